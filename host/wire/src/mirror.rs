//! Mirroring's shapes: what a mirror is told (the shadow's address, an optional password, which
//! commands go to it and the bounds of its queue: the same shape in proxy.toml's `[mirror]`,
//! the dashboard's store document and its pushes; `validate` is the one check all three go
//! through), the stored document, and the figures and samples a proxy reports.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Which commands are mirrored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = MirrorMode)]
pub enum Mode {
    /// Commands with Redis's `write` flag only: the shadow's data follows the primary's.
    #[default]
    Writes,
    /// Reads too, so their replies are compared.
    All,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Writes => "writes",
            Mode::All => "all",
        }
    }
}

/// A mirror's settings (`[mirror]` in proxy.toml; the body of `PUT /api/mirror`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MirrorConfig {
    /// The shadow: `host:port` of a Redis server or of another cluster's proxy.
    pub target: String,
    /// Sent as `AUTH <password>` when connecting to the shadow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    pub mode: Mode,
    /// Commands sent and not yet answered by the shadow, per proxy; past it commands are
    /// dropped (counted), never waited for.
    pub max_queue: usize,
    /// Bytes held for those commands (the request and, when compared, the primary's reply),
    /// per proxy.
    pub max_queue_bytes: usize,
    /// A command larger than this is not mirrored (counted); a primary reply larger than this
    /// is not kept for comparison (the command is still mirrored); a shadow reply larger than
    /// this is not read to its end (dropped, counted, its connection closed).
    pub max_command_bytes: usize,
}

impl Default for MirrorConfig {
    fn default() -> Self {
        Self {
            target: String::new(),
            password: None,
            mode: Mode::Writes,
            max_queue: 10_000,
            max_queue_bytes: 16 << 20,
            max_command_bytes: 64 << 10,
        }
    }
}

impl std::fmt::Debug for MirrorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorConfig")
            .field("target", &self.target)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("mode", &self.mode)
            .field("max_queue", &self.max_queue)
            .field("max_queue_bytes", &self.max_queue_bytes)
            .field("max_command_bytes", &self.max_command_bytes)
            .finish()
    }
}

/// Upper bounds of the queue settings: a typo must not take the proxy's memory.
const MAX_QUEUE: usize = 1_000_000;
const MAX_QUEUE_BYTES: usize = 1 << 30;

impl MirrorConfig {
    /// Checks the settings; the error says which one is wrong and why.
    ///
    /// # Errors
    /// An empty or malformed target, a password with a line break, a bound of 0 or too large.
    pub fn validate(&self) -> Result<(), String> {
        let t = self.target.trim();
        let Some((host, port)) = t.rsplit_once(':') else {
            return Err(format!("target {t:?} is not host:port"));
        };
        if host.is_empty() || host.len() > 253 || host.chars().any(char::is_whitespace) {
            return Err(format!("target {t:?} has no valid host"));
        }
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(format!("target {t:?} has no valid port"));
        }
        if let Some(p) = &self.password
            && (p.is_empty() || p.len() > 512 || p.contains(['\r', '\n']))
        {
            return Err("password must be 1 to 512 bytes without line breaks".into());
        }
        if self.max_queue == 0 || self.max_queue > MAX_QUEUE {
            return Err(format!("max_queue must be between 1 and {MAX_QUEUE}"));
        }
        if self.max_queue_bytes < 1024 || self.max_queue_bytes > MAX_QUEUE_BYTES {
            return Err(format!(
                "max_queue_bytes must be between 1024 and {MAX_QUEUE_BYTES}"
            ));
        }
        if self.max_command_bytes == 0 || self.max_command_bytes > self.max_queue_bytes {
            return Err("max_command_bytes must be between 1 and max_queue_bytes".into());
        }
        Ok(())
    }

    /// The settings as shown by the APIs: the password replaced by whether there is one.
    pub fn view(&self) -> MirrorSettingsView {
        MirrorSettingsView {
            target: self.target.clone(),
            mode: self.mode,
            password: self.password.is_some(),
            max_queue: self.max_queue,
            max_queue_bytes: self.max_queue_bytes,
            max_command_bytes: self.max_command_bytes,
        }
    }
}

/// A mirror's settings as the APIs show them: never the password, only whether there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MirrorSettingsView {
    pub target: String,
    pub mode: Mode,
    /// Whether the shadow is sent a password.
    pub password: bool,
    pub max_queue: usize,
    pub max_queue_bytes: usize,
    pub max_command_bytes: usize,
}

/// The mirror settings a dashboard stores and pushes: `config` is `None` when off. `version`
/// grows with each change, so a proxy never applies an older document after a newer one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct MirrorDoc {
    pub version: u64,
    pub config: Option<MirrorConfig>,
}

/// A mismatch: the command (name and its first arguments, truncated) and both replies
/// (truncated), as text with bytes outside printable ASCII escaped.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = MirrorSample)]
pub struct Sample {
    pub command: String,
    pub args: Vec<String>,
    pub primary: String,
    pub shadow: String,
    pub unix_ms: u64,
}

/// One command's figures in the JSON view.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[schema(as = MirrorCommandFigures)]
pub struct CommandFigures {
    pub command: String,
    pub sent: u64,
    pub compared: u64,
    pub mismatched: u64,
    pub uncompared: u64,
}

/// The JSON view of a proxy's counters (also what the dashboard sums).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[schema(as = MirrorFigures)]
pub struct Figures {
    pub sent: u64,
    pub compared: u64,
    pub mismatched: u64,
    pub uncompared: u64,
    pub errors: u64,
    /// By reason: queue_full, queue_bytes, too_large, reply_too_large.
    pub dropped: std::collections::BTreeMap<String, u64>,
    pub queue_entries: u64,
    pub queue_bytes: u64,
    pub commands: Vec<CommandFigures>,
}

/// `GET /api/proxy/mirror`: one proxy's mirror: its settings in force, counters by command,
/// drops, and its last 32 mismatches.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyMirror {
    pub token: String,
    /// The version of the mirror document in force (0: none pushed).
    pub version: u64,
    /// `null`: mirroring off.
    #[schema(required = true)]
    pub config: Option<MirrorSettingsView>,
    pub figures: Figures,
    /// Newest first.
    pub samples: Vec<Sample>,
}

/// `GET /api/mirror` (and the answer of `PUT` and `DELETE`): the cluster's settings, every
/// registered proxy's counters summed, and the newest mismatches of all.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MirrorView {
    pub version: u64,
    /// `null`: mirroring off.
    #[schema(required = true)]
    pub config: Option<MirrorSettingsView>,
    pub figures: Figures,
    pub proxies: Vec<ProxyMirrorEntry>,
    /// Newest first, at most 50, each naming its proxy.
    pub samples: Vec<ClusterSample>,
}

/// One proxy's mirror as the dashboard read it, or why it could not.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ProxyMirrorEntry {
    Answered(ProxyMirrorSummary),
    Unreachable(ProxyMirrorError),
}

/// A proxy's mirror in brief.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyMirrorSummary {
    pub token: String,
    pub addr: String,
    /// The mirror document version it runs.
    pub version: u64,
    /// Whether it mirrors now.
    pub on: bool,
    pub queue_entries: u64,
    pub queue_bytes: u64,
}

/// A proxy whose mirror could not be read, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyMirrorError {
    pub token: String,
    pub addr: String,
    pub error: String,
}

/// A mismatch and the proxy that found it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterSample {
    #[serde(flatten)]
    pub sample: Sample,
    /// The proxy's token.
    pub proxy: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_target(t: &str) -> MirrorConfig {
        MirrorConfig {
            target: t.into(),
            ..MirrorConfig::default()
        }
    }

    #[test]
    fn targets_must_be_host_and_port() {
        assert!(with_target("127.0.0.1:6379").validate().is_ok());
        assert!(with_target("shadow.internal:7400").validate().is_ok());
        for bad in ["", "127.0.0.1", ":6379", "h:0", "h:99999", "a b:1"] {
            assert!(with_target(bad).validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bounds_are_checked_and_the_password_never_shown() {
        let mut c = with_target("h:1");
        c.max_queue = 0;
        assert!(c.validate().unwrap_err().contains("max_queue"));
        let c = MirrorConfig {
            password: Some("secret".into()),
            ..with_target("h:1")
        };
        assert!(!format!("{c:?}").contains("secret"));
        assert!(c.view().password);
        let toml: MirrorConfig = toml::from_str("target = \"h:1\"\nmode = \"all\"").unwrap();
        assert_eq!(toml.mode, Mode::All);
    }
}
