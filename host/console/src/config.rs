//! `console.toml`: where the console listens, which stores it searches (and which keeps its
//! sessions), its users (argon2id password hashes and roles) and the API token of each
//! cluster. Read at start; `tessera up` writes one, always with mode 0600.
//!
//! ```toml
//! listen = "127.0.0.1:9090"
//! stores = ["fs:///var/lib/tessera"]
//! session_store = "fs:///var/lib/tessera"   # default: the first of `stores`
//! session_ttl_secs = 43200
//! lockout_failures = 5
//! lockout_secs = 300
//! [[users]]
//! name = "admin"
//! password_hash = "$argon2id$v=19$m=19456,t=2,p=1$…"
//! role = "admin"                      # viewer (the default), operator or admin
//! [tokens]
//! local = "…"                                       # bound to the first store
//! other = { store = "etcd://10.0.0.5:2379", token = "…" }
//! ```
//!
//! A token is bound to one store: a cluster of the same name found in another store (a
//! stranger's, or one seen while the right store is down) is never sent it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use serde::{Deserialize, Serialize};

use tessera_wire::access::Role;

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
    /// The store URL that keeps the sessions; the first of `stores` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_store: Option<String>,
    /// How long a login lasts.
    #[serde(default = "default_session_ttl")]
    pub session_ttl_secs: u64,
    /// Failed logins in a row that lock a (client address, user name) pair out …
    #[serde(default = "default_lockout_failures")]
    pub lockout_failures: u32,
    /// … for this long, doubled for each lockout in a row (at most 16 times this).
    #[serde(default = "default_lockout_secs")]
    pub lockout_secs: u64,
    /// Send the session cookie with `Secure`. Always on when the console serves HTTPS itself
    /// (`tls_cert`); set it when plain HTTP is reached through an HTTPS proxy.
    /// `X-Forwarded-Proto` is never trusted for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub secure_cookie: bool,
    /// Serve HTTPS with this certificate chain and key (PEM; reloaded when they change;
    /// docs/tls.md). `--tls-cert`/`--tls-key` win.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<std::path::PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<std::path::PathBuf>,
    #[serde(default)]
    pub users: Vec<User>,
    /// API token per cluster name, sent to that cluster's dashboard in its store only. Its
    /// role bounds what every console user can do there.
    #[serde(default)]
    pub tokens: BTreeMap<String, ClusterToken>,
}

/// A cluster's admin token and the store its cluster lives in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ClusterToken {
    /// For the cluster of this name in the first store listed.
    Token(String),
    /// For the cluster of this name in `store`.
    Bound { store: String, token: String },
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
            session_store: None,
            session_ttl_secs: default_session_ttl(),
            lockout_failures: default_lockout_failures(),
            lockout_secs: default_lockout_secs(),
            secure_cookie: false,
            tls_cert: None,
            tls_key: None,
            users: Vec::new(),
            tokens: BTreeMap::new(),
        }
    }
}

impl ConsoleConfig {
    /// The admin token for cluster `name` found in `store`, if the console has one bound to
    /// that store.
    pub fn token(&self, name: &str, store: &str) -> Option<&str> {
        match self.tokens.get(name)? {
            ClusterToken::Token(t) => {
                (self.stores.first().map(String::as_str) == Some(store)).then_some(t.as_str())
            }
            ClusterToken::Bound { store: s, token } => (s == store).then_some(token.as_str()),
        }
    }

    /// Reads and checks a config file.
    ///
    /// # Errors
    /// Unreadable, not valid TOML for this shape, or a user's hash is not a PHC string.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        warn_if_readable_by_others(path);
        let config: Self =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        config
            .check()
            .with_context(|| format!("checking {}", path.display()))?;
        Ok(config)
    }

    /// Writes the file with mode 0600 (it holds password hashes and API tokens), through a
    /// temporary file renamed over it.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let text = toml::to_string(self).context("serializing the console config")?;
        let tmp = path.with_extension("toml.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        // `mode` applies only when the file is created: a temporary file left behind by an
        // earlier run keeps its mode, and the rename would carry that over.
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("setting the mode of {}", tmp.display()))?;
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
            let hash = PasswordHash::new(&u.password_hash).map_err(|e| {
                anyhow::anyhow!(
                    "user {:?}: password_hash is not a PHC string ({e}); make one with \
                     `tessera console hash-password`",
                    u.name
                )
            })?;
            let params = argon2::Params::try_from(&hash).map_err(|e| {
                anyhow::anyhow!(
                    "user {:?}: password_hash has bad argon2 parameters ({e})",
                    u.name
                )
            })?;
            if params.m_cost() > MAX_M_COST_KIB {
                bail!(
                    "user {:?}: password_hash uses m={} KiB; at most {MAX_M_COST_KIB} KiB, since \
                     the console runs several verifications at once",
                    u.name,
                    params.m_cost()
                );
            }
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

/// The memory cost a user's hash may ask for (256 MiB). The console runs at most 4
/// verifications at once, so logins need at most 1 GiB even with such hashes; the default
/// hash needs 19 MiB.
pub const MAX_M_COST_KIB: u32 = 256 * 1024;

/// Warns when `path` (console.toml) can be read by other users than its owner.
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{:o}", meta.permissions().mode() & 0o777),
            "console.toml holds password hashes and cluster tokens but others may read it: chmod 600"
        );
    }
}

/// A PHC string of a random password made with the same algorithm and costs as `like`, so
/// verifying against it costs what verifying against `like` costs. The crate's defaults when
/// `like` does not parse.
///
/// # Errors
/// Only if the system's random source fails.
pub fn hash_like(like: &str) -> anyhow::Result<String> {
    let password = hex::encode(rand::random::<[u8; 16]>());
    let Ok(phc) = PasswordHash::new(like) else {
        return hash_password(&password);
    };
    let (Ok(params), Ok(algorithm)) = (
        argon2::Params::try_from(&phc),
        argon2::Algorithm::try_from(phc.algorithm.as_str()),
    ) else {
        return hash_password(&password);
    };
    let version = phc
        .version
        .and_then(|v| argon2::Version::try_from(v).ok())
        .unwrap_or_default();
    argon2::Argon2::new(algorithm, version, params)
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hashing the password: {e}"))
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
    fn a_hash_like_another_has_its_costs() {
        let params = argon2::Params::new(8 * 1024, 1, 1, None).unwrap();
        let like = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
            .hash_password(b"pw")
            .unwrap()
            .to_string();
        let dummy = hash_like(&like).unwrap();
        assert!(
            dummy.starts_with("$argon2id$v=19$m=8192,t=1,p=1$"),
            "{dummy}"
        );
        assert!(hash_like("not a hash").unwrap().starts_with("$argon2id$"));
    }

    #[test]
    fn save_writes_mode_0600_even_over_a_stale_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!(
            "tessera-console-save-{}",
            hex::encode(rand::random::<[u8; 8]>())
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("console.toml");
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, "stale").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        ConsoleConfig::default().save(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(mode, 0o600, "{mode:o}");
    }

    #[test]
    fn a_hash_asking_for_too_much_memory_is_refused() {
        let c = ConsoleConfig {
            users: vec![User {
                name: "a".into(),
                password_hash: "$argon2id$v=19$m=4194304,t=1,p=1$c2FsdHNhbHQ$\
                                AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
                    .into(),
                role: None,
            }],
            ..ConsoleConfig::default()
        };
        let e = c.check().unwrap_err().to_string();
        assert!(e.contains("KiB"), "{e}");
    }

    #[test]
    fn config_round_trips_and_rejects_unknown_keys() {
        let mut c = ConsoleConfig::default();
        c.users.push(User {
            name: "admin".into(),
            password_hash: hash_password("pw").unwrap(),
            role: Some(Role::Operator),
        });
        c.tokens
            .insert("local".into(), ClusterToken::Token("t".into()));
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

    #[test]
    fn a_token_goes_to_its_own_store_only() {
        let c: ConsoleConfig = toml::from_str(
            "stores = [\"fs:///a\", \"fs:///b\"]\n[tokens]\nlocal = \"t1\"\n\
             other = { store = \"fs:///b\", token = \"t2\" }\n",
        )
        .unwrap();
        assert_eq!(c.token("local", "fs:///a"), Some("t1"));
        assert_eq!(c.token("local", "fs:///b"), None);
        assert_eq!(c.token("other", "fs:///b"), Some("t2"));
        assert_eq!(c.token("other", "fs:///a"), None);
        assert_eq!(c.token("nobody", "fs:///a"), None);
    }
}
