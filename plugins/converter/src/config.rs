//! The converter's config (JSON, README.md "Config"): which users are confined to which key
//! prefix, and which keys have their values compressed. Checked once, in `init`; an error
//! names the field.

use serde::Deserialize;

use crate::scripts::Scripts;

/// Smallest `min_bytes`: every integer and float Redis stores as a string (INCRBYFLOAT's
/// longest is well under this) stays plain, so the INCR family keeps working.
pub(crate) const MIN_THRESHOLD: usize = 64;
/// Default and largest `max_value_bytes`: a decompressed value must fit the plugin's memory
/// (64 MiB by default) together with the reply it came in.
const DEFAULT_MAX_VALUE: usize = 8 << 20;
const MAX_MAX_VALUE: usize = 16 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    namespaces: Vec<RawNamespace>,
    /// Parsed by `Scripts::parse` (a word or an object).
    #[serde(default)]
    scripts: Option<serde_json::Value>,
    #[serde(default)]
    compression: Option<RawCompression>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNamespace {
    users: Vec<String>,
    prefix: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCompression {
    #[serde(default = "all_keys")]
    prefixes: Vec<String>,
    #[serde(default = "default_min")]
    min_bytes: usize,
    #[serde(default = "default_max")]
    max_value_bytes: usize,
}

fn all_keys() -> Vec<String> {
    vec![String::new()]
}
fn default_min() -> usize {
    1024
}
fn default_max() -> usize {
    DEFAULT_MAX_VALUE
}

/// The checked config.
#[derive(Debug)]
pub(crate) struct Config {
    /// Namespace prefixes, indexed by the namespace number carried in reply contexts.
    pub(crate) prefixes: Vec<Vec<u8>>,
    /// (user, namespace number), one entry per user.
    pub(crate) users: Vec<(String, u16)>,
    pub(crate) scripts: Scripts,
    pub(crate) compression: Option<Compression>,
}

/// Value compression.
#[derive(Debug)]
pub(crate) struct Compression {
    /// Keys (as the client names them) whose values are compressed; `""` is every key.
    pub(crate) prefixes: Vec<Vec<u8>>,
    pub(crate) min_bytes: usize,
    pub(crate) max_value: usize,
}

impl Compression {
    /// Whether the values of `key` (the client's name for it) are compressed.
    pub(crate) fn covers(&self, key: &[u8]) -> bool {
        self.prefixes.iter().any(|p| key.starts_with(p))
    }
}

impl Config {
    /// Parses and checks the JSON config.
    pub(crate) fn parse(json: &[u8]) -> Result<Config, String> {
        let raw: Raw =
            serde_json::from_slice(json).map_err(|e| format!("converter: bad config: {e}"))?;
        if raw.namespaces.is_empty() && raw.compression.is_none() {
            return Err("converter: nothing to do: give namespaces, compression or both".into());
        }
        let mut prefixes: Vec<Vec<u8>> = Vec::new();
        let mut users: Vec<(String, u16)> = Vec::new();
        for ns in raw.namespaces {
            let p = ns.prefix.into_bytes();
            if p.is_empty() {
                return Err("converter: a namespace prefix is empty".into());
            }
            if p.iter().any(|b| b"*?[]\\".contains(b)) {
                return Err(format!(
                    "converter: namespace prefix {:?} has a glob character (* ? [ ] \\): SCAN \
                     and KEYS patterns are built from it",
                    String::from_utf8_lossy(&p)
                ));
            }
            if let Some(q) = prefixes
                .iter()
                .find(|q| q.starts_with(&p) || p.starts_with(q))
            {
                return Err(format!(
                    "converter: namespace prefixes {:?} and {:?} overlap: one namespace would see \
                     the other's keys",
                    String::from_utf8_lossy(q),
                    String::from_utf8_lossy(&p)
                ));
            }
            if ns.users.is_empty() {
                return Err(format!(
                    "converter: namespace {:?} has no users",
                    String::from_utf8_lossy(&p)
                ));
            }
            let idx = u16::try_from(prefixes.len())
                .map_err(|_| "converter: too many namespaces".to_owned())?;
            for u in ns.users {
                if users.iter().any(|(v, _)| *v == u) {
                    return Err(format!("converter: user {u:?} is in two namespaces"));
                }
                users.push((u, idx));
            }
            prefixes.push(p);
        }
        let compression = raw.compression.map(check_compression).transpose()?;
        Ok(Config {
            prefixes,
            users,
            scripts: Scripts::parse(raw.scripts)?,
            compression,
        })
    }

    /// The namespace number of `user`, if it is confined.
    pub(crate) fn namespace_of(&self, user: &str) -> Option<u16> {
        self.users.iter().find(|(u, _)| u == user).map(|&(_, i)| i)
    }
}

fn check_compression(c: RawCompression) -> Result<Compression, String> {
    if c.prefixes.is_empty() {
        return Err("converter: compression.prefixes is empty (use [\"\"] for every key)".into());
    }
    if c.min_bytes < MIN_THRESHOLD {
        return Err(format!(
            "converter: compression.min_bytes must be at least {MIN_THRESHOLD} (numbers must stay \
             plain for INCR), not {}",
            c.min_bytes
        ));
    }
    if c.max_value_bytes < c.min_bytes || c.max_value_bytes > MAX_MAX_VALUE {
        return Err(format!(
            "converter: compression.max_value_bytes must be between min_bytes and {MAX_MAX_VALUE}, \
             not {}",
            c.max_value_bytes
        ));
    }
    Ok(Compression {
        prefixes: c.prefixes.into_iter().map(String::into_bytes).collect(),
        min_bytes: c.min_bytes,
        max_value: c.max_value_bytes,
    })
}
