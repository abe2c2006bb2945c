//! `console.toml`: where the console listens, which stores it searches, its users (argon2id
//! password hashes and roles) and the API token of each cluster. Read at start; `tessera up`
//! writes one.
//!
//! ```toml
//! listen = "127.0.0.1:9090"
//! stores = ["fs:///var/lib/tessera"]
//! session_ttl_secs = 43200
//! lockout_failures = 5
//! lockout_secs = 300
//! [[users]]
//! name = "admin"
//! password_hash = "$argon2id$v=19$m=19456,t=2,p=1$…"
//! role = "admin"                      # viewer (the default), operator or admin
//! [tokens]
//! local = "…"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use serde::{Deserialize, Serialize};

use crate::access::Role;

/// The console's settings file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Listen address; `--listen` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Store URLs to search for clusters; `--store` adds more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<String>,
    /// How long a login lasts.
    #[serde(default = "default_session_ttl")]
    pub session_ttl_secs: u64,
    /// Failed logins in a row that lock a user name out …
    #[serde(default = "default_lockout_failures")]
    pub lockout_failures: u32,
    /// … for this long.
    #[serde(default = "default_lockout_secs")]
    pub lockout_secs: u64,
    /// Send the session cookie with `Secure` (set this when the console is behind HTTPS).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secure_cookie: bool,
    #[serde(default)]
    pub users: Vec<User>,
    /// API token per cluster name, sent to that cluster's dashboard. Its role bounds what
    /// every console user can do there.
    #[serde(default)]
    pub tokens: BTreeMap<String, String>,
}

/// A console user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub name: String,
    /// A PHC string from `tessera console hash-password`.
    pub password_hash: String,
    /// What the user may do through the console (see [`User::role`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

impl User {
    /// The user's role: viewer unless console.toml gives another. Least privilege by default:
    /// a user from before roles existed reads until someone makes it more.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(Role::Viewer)
    }
}

fn default_session_ttl() -> u64 {
    12 * 3600
}
fn default_lockout_failures() -> u32 {
    5
}
fn default_lockout_secs() -> u64 {
    300
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        Self {
            listen: None,
            stores: Vec::new(),
            session_ttl_secs: default_session_ttl(),
            lockout_failures: default_lockout_failures(),
            lockout_secs: default_lockout_secs(),
            secure_cookie: false,
            users: Vec::new(),
            tokens: BTreeMap::new(),
        }
    }
}

impl ConsoleConfig {
    /// Reads and checks a config file.
    ///
    /// # Errors
    /// Unreadable, not valid TOML for this shape, or a user's hash is not a PHC string.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config: Self =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        config
            .check()
            .with_context(|| format!("checking {}", path.display()))?;
        Ok(config)
    }

    /// Writes the file (mode 0600: it holds API tokens).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let text = toml::to_string(self).context("serializing the console config")?;
        let tmp = path.with_extension("toml.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }

    /// Names are unique and non-empty, hashes parse, limits are sane.
    ///
    /// # Errors
    /// Says which entry is wrong.
    pub fn check(&self) -> anyhow::Result<()> {
        let mut seen = std::collections::HashSet::new();
        for u in &self.users {
            if u.name.trim().is_empty() {
                bail!("a user has an empty name");
            }
            if !seen.insert(u.name.as_str()) {
                bail!("user {:?} is listed twice", u.name);
            }
            PasswordHash::new(&u.password_hash).map_err(|e| {
                anyhow::anyhow!(
                    "user {:?}: password_hash is not a PHC string ({e}); make one with \
                     `tessera console hash-password`",
                    u.name
                )
            })?;
        }
        if self.lockout_failures == 0 {
            bail!("lockout_failures must be at least 1");
        }
        if self.session_ttl_secs == 0 {
            bail!("session_ttl_secs must be at least 1");
        }
        Ok(())
    }
}

/// An argon2id PHC string of `password`, with a random salt and the crate's default costs.
///
/// # Errors
/// Only if the system's random source fails.
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    argon2::Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hashing the password: {e}"))
}

/// Whether `password` matches the PHC string `hash` (compared in constant time by argon2).
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("correct hors", &h));
        assert!(!verify_password("correct horse", "not a hash"));
    }

    #[test]
    fn config_round_trips_and_rejects_unknown_keys() {
        let mut c = ConsoleConfig::default();
        c.users.push(User {
            name: "admin".into(),
            password_hash: hash_password("pw").unwrap(),
            role: Some(Role::Operator),
        });
        c.tokens.insert("local".into(), "t".into());
        let text = toml::to_string(&c).unwrap();
        let back: ConsoleConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, c);
        back.check().unwrap();
        assert!(toml::from_str::<ConsoleConfig>("lisen = \"x\"").is_err());
        let no_role: User =
            toml::from_str("name = \"v\"\npassword_hash = \"$argon2id$x\"").unwrap();
        assert_eq!(no_role.role(), Role::Viewer);
        assert!(
            toml::from_str::<User>("name = \"v\"\npassword_hash = \"h\"\nrole = \"root\"").is_err()
        );
        let bad = ConsoleConfig {
            users: vec![User {
                name: "a".into(),
                password_hash: "plain".into(),
                role: None,
            }],
            ..ConsoleConfig::default()
        };
        assert!(bad.check().is_err());
    }
}
