//! The cluster's users (docs/users.md) as the store holds them and a push carries them to
//! the proxies (entries with password hashes), as the APIs show them (never a hash), the
//! dashboard's change of one user, and a proxy's table in force. Checking and compiling a
//! table is `tessera_model::users`'.

use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

/// One user as proxy.toml's `[[users]]` and the cluster's users document hold it.
///
/// ```text
/// {"name": "alice", "password": "sha256$<salt hex>$<digest hex>",
///  "commands": ["read", "write"], "key_prefix": "tenant1:", "enabled": true}
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    pub name: String,
    /// The password hash (`sha256$<salt hex>$<digest hex>`); never a clear password.
    /// Required except for `default`, whose password may come from `session_password` or be
    /// absent (nopass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Class names (`read`, `write`, `admin`, `pubsub`, `scripting`, `transaction`,
    /// `blocking`, `dangerous`, `keyspace`); absent: every class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Every key the user names must start with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// The client databases it may use (`SELECT`, `MOVE`, `COPY … DB`, `SWAPDB`), as Valkey
    /// 9.1's `db=` rule; absent: every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<Vec<u32>>,
    #[serde(default = "enabled_by_default")]
    pub enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

impl std::fmt::Debug for UserEntry {
    // The hash is a fast hash: leaked, it can be attacked offline. Never print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserEntry")
            .field("name", &self.name)
            .field("password", &self.password.as_ref().map(|_| "<hash>"))
            .field("commands", &self.commands)
            .field("key_prefix", &self.key_prefix)
            .field("databases", &self.databases)
            .field("enabled", &self.enabled)
            .finish()
    }
}

impl UserEntry {
    /// What the APIs show of it.
    pub fn view(&self) -> UserView {
        UserView {
            name: self.name.clone(),
            commands: self.commands.clone(),
            key_prefix: self.key_prefix.clone(),
            databases: self.databases.clone(),
            enabled: self.enabled,
            password_set: self.password.is_some(),
        }
    }
}

/// What the APIs show of an entry: never the hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserView {
    pub name: String,
    /// The classes it may use; absent: every command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    /// The client databases it may use; absent: every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<Vec<u32>>,
    pub enabled: bool,
    /// Whether the entry carries a password hash.
    pub password_set: bool,
}

/// The cluster's users document, `/tessera/<cluster>/users` (JSON), and the body of a push
/// to a proxy (`PUT /api/proxy/users`). `version` grows by one with every change; a proxy
/// refuses an older one.
///
/// ```text
/// {"schema": 1, "version": 7, "users": [UserEntry, …]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UsersDoc {
    #[serde(default)]
    pub schema: u32,
    pub version: u64,
    pub users: Vec<UserEntry>,
}

/// A change to one user (`PUT /api/users/{name}`); fields left out keep their value.
/// `commands: null` lifts the class restriction, `key_prefix: null` (or `""`) the prefix.
/// A new user needs a password or a password hash (except `default`). No `Debug`: it holds a
/// clear password or a hash.
///
/// ```text
/// {"password": "…", "commands": ["read"], "key_prefix": "tenant1:", "enabled": true}
/// {"password_hash": "sha256$<salt hex>$<digest hex>"}      (as a backup's store.json holds it)
/// ```
#[derive(Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserChange {
    /// Clear text, hashed by the dashboard before it is stored (1 to 1024 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The password as the users document holds it, already hashed
    /// (`sha256$<salt hex>$<digest hex>`: a salt of 1 to 64 bytes, a SHA-256 digest), e.g.
    /// from a backup's `store.json`: the user keeps the password it had, which the dashboard
    /// never sees in clear. Not with `password`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    /// Class names; `null`: every command.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Vec<String>>)]
    pub commands: Option<Option<Vec<String>>>,
    /// `null` or `""`: no prefix.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>)]
    pub key_prefix: Option<Option<String>>,
    /// Client database numbers; `null`: every database.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Vec<u32>>)]
    pub databases: Option<Option<Vec<u32>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`, the default).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Where a proxy's users table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum UsersSource {
    /// proxy.toml (static mode, or cluster mode before the store's table is loaded).
    Config,
    /// The cluster's users document.
    Cluster,
    /// Nothing usable: every AUTH fails (a cluster document that could not be compiled).
    Refused,
}

/// `GET /api/proxy/users`: the table in force in one proxy.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyUsers {
    /// The document version it was compiled from (0: proxy.toml's).
    pub version: u64,
    pub source: UsersSource,
    /// Whether a fresh connection must AUTH.
    pub auth_required: bool,
    /// Whether the default user accepts any password.
    #[schema(required = true)]
    pub default_nopass: bool,
    /// The entries (not the implicit default), sorted by name, without hashes.
    #[schema(required = true)]
    pub users: Vec<UserView>,
    /// Why the last table offered (pushed or read at start) was not applied.
    #[schema(required = true)]
    pub last_error: Option<String>,
}
