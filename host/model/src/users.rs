//! Users the proxy knows: the table (`[[users]]` in proxy.toml, or the cluster's users
//! document in the store), its password hashes, and the compiled form sessions authenticate
//! against. AUTH and HELLO themselves, and enforcing a user's classes and key prefix, are the
//! session's; storing and pushing the cluster's table are `dashboard::users` and `api::proxy`.
//!
//! Semantics follow Redis ACL (docs/users.md): the `default` user always exists. Without a
//! password (no `session_password`, no `default` entry with one) it is "nopass": every new
//! connection is default, and `AUTH default <anything>` is OK. Any other name must match an
//! entry whose password hash verifies.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use tessera_plugin_abi::class;

/// The implicit user every connection starts as (Redis's name for it).
pub const DEFAULT_USER: &str = "default";
/// Most entries a table may hold (the store document stays far below etcd's request limit).
pub const MAX_USERS: usize = 1000;
/// Longest user name, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Longest key prefix, in bytes.
pub const MAX_KEY_PREFIX_LEN: usize = 256;
/// Longest clear password `hash_password` and the dashboard accept, in bytes.
pub const MAX_PASSWORD_LEN: usize = 1024;
/// Bytes of salt `hash_password` draws.
pub const SALT_LEN: usize = 16;

/// Keyspace-wide commands (KEYS, SCAN, DBSIZE, RANDOMKEY, FLUSHALL, FLUSHDB): the plugin ABI
/// has no class for them (its nearest, Redis's `@keyspace`, also covers DEL and EXPIRE), so
/// this bit is ours. Bit 31, above every `tessera_plugin_abi::class` bit.
pub const KEYSPACE: u32 = 1 << 31;

/// Commands that read or change the whole keyspace: they carry [`KEYSPACE`].
pub const KEYSPACE_COMMANDS: &[&str] =
    &["KEYS", "SCAN", "DBSIZE", "RANDOMKEY", "FLUSHALL", "FLUSHDB"];

/// The class names a user's `commands` may list, and their bits.
pub const CLASSES: &[(&str, u32)] = &[
    ("read", class::READ),
    ("write", class::WRITE),
    ("admin", class::ADMIN),
    ("pubsub", class::PUBSUB),
    ("scripting", class::SCRIPTING),
    ("transaction", class::TRANSACTION),
    ("blocking", class::BLOCKING),
    ("dangerous", class::DANGEROUS),
    ("keyspace", KEYSPACE),
];

/// Every bit a user's classes govern; a command's other bits (fast, keyless …) are free.
pub const GOVERNED: u32 = class::READ
    | class::WRITE
    | class::ADMIN
    | class::PUBSUB
    | class::SCRIPTING
    | class::TRANSACTION
    | class::BLOCKING
    | class::DANGEROUS
    | KEYSPACE;

/// The classes of a command as users see them: its ABI class bits (`Command::abi_class`)
/// plus [`KEYSPACE`] for the commands in [`KEYSPACE_COMMANDS`] (`name` upper-case).
pub fn command_classes(abi_class: u32, name: &str) -> u32 {
    let wide = KEYSPACE_COMMANDS.contains(&name);
    abi_class | if wide { KEYSPACE } else { 0 }
}

/// What is wrong with a users table or one of its entries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsersError {
    #[error("invalid user name {0:?}: 1 to {MAX_NAME_LEN} printable ASCII characters, no spaces")]
    BadName(String),
    #[error("user {0} appears twice")]
    Duplicate(String),
    #[error("{0} users: a table holds at most {MAX_USERS}")]
    TooMany(usize),
    #[error("user {user}: unknown command class {class:?} (known: {known})", known = class_names())]
    UnknownClass { user: String, class: String },
    #[error("user {user}: {count} command classes listed: at most {max}", max = CLASSES.len() * 2)]
    TooManyClasses { user: String, count: usize },
    #[error(
        "user {user}: key_prefix must be 1 to {MAX_KEY_PREFIX_LEN} bytes without control characters (leave it out for no prefix)"
    )]
    BadKeyPrefix { user: String },
    #[error(
        "user {user}: password is not a hash of the form sha256$<salt hex>$<64 hex digits> (make one with `tessera hash-password`)"
    )]
    BadHash { user: String },
    #[error("user {0} has no password: give it one (`tessera hash-password` makes the hash)")]
    NoPassword(String),
    #[error(
        "the default user's password is set twice: by session_password and by a [[users]] entry named default; keep one"
    )]
    TwoDefaultPasswords,
    #[error("a password must be 1 to {MAX_PASSWORD_LEN} bytes")]
    BadPassword,
    #[error(
        "user {user}: databases must list 1 to {max} client database numbers below {max} (leave it out for every database)",
        max = crate::databases::MAX_DATABASES
    )]
    BadDatabases { user: String },
}

fn class_names() -> String {
    CLASSES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

mod entry;
mod password;

pub use entry::{
    UserEntry, UserView, UsersDoc, check_databases, check_key_prefix, check_name, check_password,
    parse_classes,
};
use password::{DUMMY, PasswordHash};
pub use password::{hash_password, is_password_hash};

// === the compiled table ===

/// A user a session runs as: what it may run, where its keys must start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    /// Bits of [`CLASSES`] the user may use; `None`: every command.
    pub allowed_classes: Option<u32>,
    /// Every key the user names must start with this; `None`: any key.
    pub key_prefix: Option<Bytes>,
    /// The client databases it may use, sorted; `None`: every one.
    pub databases: Option<Box<[u32]>>,
}

impl User {
    /// Whether a command of `classes` ([`command_classes`]) is allowed: each governed class
    /// it has must be allowed (KEYS is read, dangerous and keyspace: all three are needed).
    pub fn allows(&self, classes: u32) -> bool {
        self.allowed_classes
            .is_none_or(|allowed| classes & GOVERNED & !allowed == 0)
    }

    /// Whether the user may name `key`.
    pub fn may_touch(&self, key: &[u8]) -> bool {
        self.key_prefix.as_ref().is_none_or(|p| key.starts_with(p))
    }

    /// Whether the user may use client database `db`.
    pub fn may_use_db(&self, db: u32) -> bool {
        self.databases
            .as_ref()
            .is_none_or(|d| d.binary_search(&db).is_ok())
    }
}

#[derive(Clone)]
enum Password {
    /// Any password is accepted (Redis `nopass`).
    NoPass,
    Hash(PasswordHash),
    /// No password can match.
    Locked,
}

struct Account {
    user: Arc<User>,
    password: Password,
    enabled: bool,
}

/// Where a table came from, for the admin API.
pub use tessera_wire::users::UsersSource as Source;

/// The compiled users table: lookup by name, password checks. Swapped whole (`ArcSwap`).
pub struct Users {
    accounts: HashMap<Box<[u8]>, Account>,
    version: u64,
    source: Source,
    views: Vec<UserView>,
}

impl Users {
    /// Compiles `entries`; `session_password` (clear, from proxy.toml) is the default user's
    /// password unless the table's `default` entry has one of its own, which wins.
    ///
    /// # Errors
    /// A bad name, class, prefix or hash, a duplicate, a named user without a password,
    /// more than [`MAX_USERS`] entries.
    pub fn new(
        entries: &[UserEntry],
        session_password: Option<&str>,
        version: u64,
        source: Source,
    ) -> Result<Users, UsersError> {
        if entries.len() > MAX_USERS {
            return Err(UsersError::TooMany(entries.len()));
        }
        let mut accounts = HashMap::with_capacity(entries.len() + 1);
        for e in entries {
            let (name, account) = compile(e, session_password)?;
            if accounts.insert(name, account).is_some() {
                return Err(UsersError::Duplicate(e.name.clone()));
            }
        }
        if !accounts.contains_key(DEFAULT_USER.as_bytes()) {
            let (name, account) = compile(&implicit_default(), session_password)?;
            accounts.insert(name, account);
        }
        let mut views: Vec<UserView> = entries.iter().map(UserEntry::view).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Users {
            accounts,
            version,
            source,
            views,
        })
    }

    /// A cluster's table; the proxy's own `session_password` still applies to a `default`
    /// the document leaves without a password.
    ///
    /// # Errors
    /// As [`Users::new`].
    pub fn from_document(
        doc: &UsersDoc,
        session_password: Option<&str>,
    ) -> Result<Users, UsersError> {
        Users::new(&doc.users, session_password, doc.version, Source::Cluster)
    }

    /// A table no one can log in to (fail closed when the cluster's table is unusable).
    pub fn refuse_all(version: u64) -> Users {
        let mut accounts = HashMap::new();
        accounts.insert(
            DEFAULT_USER.as_bytes().into(),
            Account {
                user: Arc::new(user_of(DEFAULT_USER, None, None, None)),
                password: Password::Locked,
                enabled: false,
            },
        );
        Users {
            accounts,
            version,
            source: Source::Refused,
            views: Vec::new(),
        }
    }

    /// The user `name` is if `password` is right and the user enabled; `None` otherwise
    /// (the session answers `WRONGPASS invalid username-password pair or user is disabled.`).
    /// Unknown names, disabled users and users without a password are verified against a
    /// dummy hash, so a failure costs one SHA-256 whatever the cause.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        // black_box: the dummy check's result is unused, and it must not be optimized away.
        let Some(account) = self.accounts.get(name) else {
            std::hint::black_box(DUMMY.verify(password));
            return None;
        };
        let ok = match &account.password {
            Password::NoPass => true,
            Password::Hash(h) => h.verify(password),
            Password::Locked => {
                std::hint::black_box(DUMMY.verify(password));
                false
            }
        };
        (ok && account.enabled).then(|| account.user.clone())
    }

    /// The rights of the enabled user `name` in this table; `None` if it is gone or disabled
    /// (a session authenticated as it then ends, as Redis disconnects a deleted user's
    /// clients).
    pub fn current(&self, name: &str) -> Option<Arc<User>> {
        let account = self.accounts.get(name.as_bytes())?;
        account.enabled.then(|| account.user.clone())
    }

    /// The user a fresh connection is: `default` when it is enabled and nopass; `None` when
    /// the client must AUTH first.
    pub fn connect_as(&self) -> Option<Arc<User>> {
        let account = self.accounts.get(DEFAULT_USER.as_bytes())?;
        (account.enabled && matches!(account.password, Password::NoPass))
            .then(|| account.user.clone())
    }

    /// Whether a fresh connection must AUTH before anything else.
    pub fn auth_required(&self) -> bool {
        self.connect_as().is_none()
    }

    /// Whether the default user accepts any password (so `AUTH <password>` with one argument
    /// is the Redis error "called without any password configured").
    pub fn default_is_nopass(&self) -> bool {
        self.accounts
            .get(DEFAULT_USER.as_bytes())
            .is_some_and(|a| matches!(a.password, Password::NoPass))
    }

    /// The document version this table was compiled from (0 for proxy.toml's).
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn source(&self) -> Source {
        self.source
    }

    /// The table's entries (not the implicit default), sorted by name, without hashes.
    pub fn views(&self) -> &[UserView] {
        &self.views
    }
}

impl Default for Users {
    /// No table and no password: the default user is nopass (a proxy without settings).
    fn default() -> Users {
        Users::new(&[], None, 0, Source::Config).expect("the empty table compiles")
    }
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Users")
            .field("version", &self.version)
            .field("source", &self.source)
            .field("users", &self.views)
            .finish()
    }
}

fn implicit_default() -> UserEntry {
    UserEntry {
        name: DEFAULT_USER.into(),
        password: None,
        commands: None,
        key_prefix: None,
        databases: None,
        enabled: true,
    }
}

fn user_of(
    name: &str,
    allowed: Option<u32>,
    prefix: Option<&str>,
    databases: Option<Vec<u32>>,
) -> User {
    User {
        name: name.into(),
        allowed_classes: allowed,
        key_prefix: prefix.map(|p| Bytes::copy_from_slice(p.as_bytes())),
        databases: databases.map(Vec::into_boxed_slice),
    }
}

/// Checks one entry and compiles it into its account.
fn compile(
    e: &UserEntry,
    session_password: Option<&str>,
) -> Result<(Box<[u8]>, Account), UsersError> {
    check_name(&e.name)?;
    let allowed = match &e.commands {
        Some(names) => Some(parse_classes(&e.name, names)?.0),
        None => None,
    };
    if let Some(p) = &e.key_prefix {
        check_key_prefix(&e.name, p)?;
    }
    let databases = match &e.databases {
        Some(d) => Some(check_databases(&e.name, d)?),
        None => None,
    };
    let is_default = e.name == DEFAULT_USER;
    let password = match (&e.password, is_default, session_password) {
        (Some(h), _, _) => {
            Password::Hash(PasswordHash::parse(h).ok_or_else(|| UsersError::BadHash {
                user: e.name.clone(),
            })?)
        }
        (None, true, Some(clear)) => Password::Hash(PasswordHash::new(clear.as_bytes())),
        (None, true, None) => Password::NoPass,
        (None, false, _) => return Err(UsersError::NoPassword(e.name.clone())),
    };
    let account = Account {
        user: Arc::new(user_of(
            &e.name,
            allowed,
            e.key_prefix.as_deref(),
            databases,
        )),
        password,
        enabled: e.enabled,
    };
    Ok((e.name.as_bytes().into(), account))
}

#[cfg(test)]
mod tests;
