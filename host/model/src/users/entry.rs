//! A users table as proxy.toml and the store hold it: entries, the store document, the
//! views the APIs show (never a hash), and the checks of names, classes, prefixes, passwords.

use serde::{Deserialize, Serialize};

use super::{CLASSES, MAX_KEY_PREFIX_LEN, MAX_NAME_LEN, MAX_PASSWORD_LEN, UsersError};

/// One user as proxy.toml's `[[users]]` and the cluster's users document hold it.
///
/// ```text
/// {"name": "alice", "password": "sha256$<salt hex>$<digest hex>",
///  "commands": ["read", "write"], "key_prefix": "tenant1:", "enabled": true}
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    pub name: String,
    /// The password hash ([`hash_password`](super::hash_password)); never a clear password. Required except for
    /// `default`, whose password may come from `session_password` or be absent (nopass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Class names from [`CLASSES`]; absent: every class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    /// Every key the user names must start with this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
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
            .field("enabled", &self.enabled)
            .finish()
    }
}

/// What the APIs show of an entry: never the hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserView {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_prefix: Option<String>,
    pub enabled: bool,
    /// Whether the entry carries a password hash.
    pub password_set: bool,
}

impl UserEntry {
    pub fn view(&self) -> UserView {
        UserView {
            name: self.name.clone(),
            commands: self.commands.clone(),
            key_prefix: self.key_prefix.clone(),
            enabled: self.enabled,
            password_set: self.password.is_some(),
        }
    }
}

/// The cluster's users document, `/tessera/<cluster>/users` (JSON), and the body of a push
/// to a proxy. `version` grows by one with every change; a proxy refuses an older one.
///
/// ```text
/// {"schema": 1, "version": 7, "users": [UserEntry, …]}
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersDoc {
    #[serde(default)]
    pub schema: u32,
    pub version: u64,
    pub users: Vec<UserEntry>,
}

/// Checks a user name: 1 to [`MAX_NAME_LEN`] printable ASCII characters, no spaces (Redis
/// refuses spaces; control characters and non-ASCII would garble logs and RESP replies).
///
/// # Errors
/// [`UsersError::BadName`].
pub fn check_name(name: &str) -> Result<(), UsersError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(UsersError::BadName(
            name.chars().take(MAX_NAME_LEN).collect(),
        ))
    }
}

/// The class bits of `names` (case-insensitive), normalized to lower case.
///
/// # Errors
/// An unknown name, or an absurdly long list.
pub fn parse_classes(user: &str, names: &[String]) -> Result<(u32, Vec<String>), UsersError> {
    if names.len() > CLASSES.len() * 2 {
        return Err(UsersError::TooManyClasses {
            user: user.into(),
            count: names.len(),
        });
    }
    let mut bits = 0;
    let mut normalized = Vec::with_capacity(names.len());
    for n in names {
        let Some(&(canonical, bit)) = CLASSES.iter().find(|(c, _)| c.eq_ignore_ascii_case(n))
        else {
            return Err(UsersError::UnknownClass {
                user: user.into(),
                class: n.chars().take(32).collect(),
            });
        };
        bits |= bit;
        if !normalized.iter().any(|c| c == canonical) {
            normalized.push(canonical.to_owned());
        }
    }
    Ok((bits, normalized))
}

/// Checks a key prefix: 1 to [`MAX_KEY_PREFIX_LEN`] bytes, no control characters.
///
/// # Errors
/// [`UsersError::BadKeyPrefix`].
pub fn check_key_prefix(user: &str, prefix: &str) -> Result<(), UsersError> {
    if prefix.is_empty()
        || prefix.len() > MAX_KEY_PREFIX_LEN
        || prefix.chars().any(char::is_control)
    {
        return Err(UsersError::BadKeyPrefix { user: user.into() });
    }
    Ok(())
}

/// Checks a clear password before it is hashed.
///
/// # Errors
/// [`UsersError::BadPassword`] for an empty or overlong one.
pub fn check_password(password: &str) -> Result<(), UsersError> {
    if password.is_empty() || password.len() > MAX_PASSWORD_LEN {
        return Err(UsersError::BadPassword);
    }
    Ok(())
}
