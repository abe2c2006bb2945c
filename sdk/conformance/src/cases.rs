//! A plugin's own expectations, in a JSON file the suite checks after its generic checks: a
//! config, the commands to send and what each must get, the metrics the plugin declares and
//! the sample values they must show afterwards. One file can serve the same plugin written in
//! several languages (`sdk/conformance/cases/`), which is how the examples are held to the
//! same behaviour.
//!
//! ```json
//! {
//!   "config": {"deny_commands": ["FLUSHALL"]},
//!   "metrics": [{"name": "commands_total", "kind": "counter"}],
//!   "cases": [
//!     {"command": ["FLUSHALL"], "expect": {"deny": "ERR command 'FLUSHALL' is not allowed"}},
//!     {"command": ["GET", "k"], "expect": "not-hooked"},
//!     {"command": ["SET", "k", "v"], "expect": "pass"},
//!     {"command": ["GET", "k"], "expect": "observe", "reply": "$1\r\nv\r\n", "then": "pass"}
//!   ],
//!   "samples": {"commands_total{command=\"get\"}": 1}
//! }
//! ```

use serde::Deserialize;
use std::collections::BTreeMap;

/// The file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cases {
    /// The plugin's config (used unless `--config` is given).
    pub config: Option<serde_json::Value>,
    /// Every metric the plugin defines: no more, no fewer.
    pub metrics: Option<Vec<DeclaredMetric>>,
    #[serde(default)]
    pub cases: Vec<Case>,
    /// Series (the metric's own name and labels, as rendered after the plugin's prefix) and
    /// their values once every case has run.
    #[serde(default)]
    pub samples: BTreeMap<String, f64>,
}

/// A metric the plugin declares.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DeclaredMetric {
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: String,
}

/// One command and what it must get.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub command: Vec<String>,
    #[serde(default = "one")]
    pub conn: u64,
    pub expect: Expect,
    /// The backend's reply, for an observed command (default `+OK`).
    pub reply: Option<String>,
    /// What `on_reply` must answer to it (default: not checked).
    pub then: Option<ReplyExpect>,
}

fn one() -> u64 {
    1
}

/// What `on_command` must answer.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Expect {
    /// `not-hooked` (the manifest does not select it), `pass`, `observe`, `rewrite`.
    Word(String),
    Deny {
        deny: String,
    },
    Reply {
        reply: String,
    },
}

/// What `on_reply` must answer.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ReplyExpect {
    /// `pass`.
    Word(String),
    Replace {
        replace: String,
    },
    Error {
        error: String,
    },
}

impl Cases {
    /// Reads a cases file.
    ///
    /// # Errors
    /// Unreadable, or not the format above (with serde's position).
    pub fn parse(text: &str) -> Result<Self, String> {
        let c: Cases = serde_json::from_str(text).map_err(|e| format!("cases file: {e}"))?;
        for case in &c.cases {
            if let Expect::Word(w) = &case.expect
                && !["not-hooked", "pass", "observe", "rewrite"].contains(&w.as_str())
            {
                return Err(format!("cases file: unknown expectation {w:?}"));
            }
        }
        Ok(c)
    }
}
