//! Scripts of confined clients: which they may run. The client writes an EVAL body, and a body
//! can name any key (`redis.call('GET', ARGV[1])`), so prefixing KEYS confines nothing; only
//! code an operator loaded and listed runs: EVALSHA of a listed SHA1, FCALL of a listed
//! function, with their KEYS prefixed like any key. Parsed from the config's `"scripts"`.

use serde::Deserialize;
use tessera_plugin_sdk::{Command, cmd};

/// The checked `"scripts"` setting. Empty lists (the default, `"refuse"`) refuse every script.
#[derive(Debug, Default)]
pub(crate) struct Scripts {
    /// SHA1s, lowercase hex, that confined clients may run with EVALSHA / EVALSHA_RO.
    sha1: Vec<String>,
    /// Function names (case-sensitive, as Redis compares them) for FCALL / FCALL_RO.
    functions: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAllow {
    #[serde(default)]
    allow_sha1: Vec<String>,
    #[serde(default)]
    allow_functions: Vec<String>,
}

impl Scripts {
    /// Parses `"scripts"`: absent or `"refuse"`, or `{"allow_sha1": [...], "allow_functions":
    /// [...]}`.
    ///
    /// # Errors
    /// `"prefix_keys"` (it confined nothing), another word, a malformed SHA1 or name.
    pub(crate) fn parse(v: Option<serde_json::Value>) -> Result<Scripts, String> {
        let v = match v {
            None => return Ok(Scripts::default()),
            Some(serde_json::Value::String(w)) if w == "refuse" => {
                return Ok(Scripts::default());
            }
            Some(serde_json::Value::String(w)) if w == "prefix_keys" => {
                return Err(
                    "converter: \"scripts\": \"prefix_keys\" is refused: the client writes an \
                     EVAL body, which can name any key (ARGV, or a name in the body), so \
                     prefixing KEYS confines nothing. Load the scripts yourself and list their \
                     SHA1s: \"scripts\": {\"allow_sha1\": [\"<sha1>\"]} (or functions in \
                     \"allow_functions\")"
                        .into(),
                );
            }
            Some(serde_json::Value::String(w)) => {
                return Err(format!(
                    "converter: \"scripts\" must be \"refuse\" or {{\"allow_sha1\": [...], \
                     \"allow_functions\": [...]}}, not {w:?}"
                ));
            }
            Some(v) => v,
        };
        let raw: RawAllow =
            serde_json::from_value(v).map_err(|e| format!("converter: bad \"scripts\": {e}"))?;
        let mut sha1 = Vec::with_capacity(raw.allow_sha1.len());
        for s in raw.allow_sha1 {
            if s.len() != 40 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!(
                    "converter: scripts.allow_sha1 entry {s:?} is not a SHA1 (40 hex digits, \
                     as SCRIPT LOAD answers)"
                ));
            }
            sha1.push(s.to_ascii_lowercase());
        }
        for f in &raw.allow_functions {
            if f.is_empty() || !f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!(
                    "converter: scripts.allow_functions entry {f:?} is not a function name \
                     (letters, digits and '_', as Redis allows)"
                ));
            }
        }
        Ok(Scripts {
            sha1,
            functions: raw.allow_functions,
        })
    }

    /// Why a confined client may not run the script command `c`, if it may not; `None` for
    /// commands that are not script calls, and for calls of listed code.
    pub(crate) fn refusal(&self, c: &Command<'_>) -> Option<&'static str> {
        match c.id() {
            cmd::EVAL | cmd::EVAL_RO => Some(
                "is not available in a namespace: the client writes the script, which can name \
                 any key (scripts an operator loaded run by EVALSHA when the converter lists \
                 them)",
            ),
            cmd::EVALSHA | cmd::EVALSHA_RO => {
                // Redis compares SHA1s case-insensitively. Bytes elided by the host (they are
                // not: the command is hooked with its values) would be refused too.
                let listed = c.bytes(1).is_some_and(|sha| {
                    self.sha1
                        .iter()
                        .any(|s| s.as_bytes().eq_ignore_ascii_case(sha))
                });
                (!listed).then_some(
                    "runs in a namespace only the scripts listed in the converter's \
                     scripts.allow_sha1",
                )
            }
            cmd::FCALL | cmd::FCALL_RO => {
                let listed = c
                    .bytes(1)
                    .is_some_and(|f| self.functions.iter().any(|g| g.as_bytes() == f));
                (!listed).then_some(
                    "calls in a namespace only the functions listed in the converter's \
                     scripts.allow_functions",
                )
            }
            _ => None,
        }
    }
}
