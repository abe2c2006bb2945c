//! The file format: a one-line JSON header (version; heartbeat for ephemeral nodes), then
//! the raw value bytes. Also when an ephemeral node counts as gone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::super::{Holder, Versioned};

pub(super) use tessera_model::clock::now_ms;

/// The first line of every file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) ephemeral: Option<Heartbeat>,
}

/// Liveness of an ephemeral node; its value is the `Holder` JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Heartbeat {
    /// Identifies the creating handle, so a stale handle never touches a successor's node.
    pub(super) nonce: String,
    pub(super) heartbeat_ms: u64,
    pub(super) ttl_ms: u64,
}

/// A decoded file.
pub(super) struct Entry {
    pub(super) header: Header,
    pub(super) value: Bytes,
}

// === impl Entry ===

impl Entry {
    pub(super) fn decode(mut bytes: Vec<u8>) -> Option<Entry> {
        let end = bytes.iter().position(|&b| b == b'\n')?;
        let header = serde_json::from_slice(&bytes[..end]).ok()?;
        let value = Bytes::from(bytes.split_off(end + 1));
        Some(Entry { header, value })
    }

    pub(super) fn encode(&self) -> Vec<u8> {
        // Compact serde_json output never contains a raw newline, so line one is the header.
        let mut out = serde_json::to_vec(&self.header).expect("Header serializes to JSON");
        out.push(b'\n');
        out.extend_from_slice(&self.value);
        out
    }

    /// An ephemeral node is gone when its heartbeat is older than its TTL, or when its holder
    /// ran on this host and that pid no longer exists (a crash noticed without waiting).
    pub(super) fn is_gone(&self, this_host: &str) -> bool {
        let Some(beat) = &self.header.ephemeral else {
            return false;
        };
        if now_ms().saturating_sub(beat.heartbeat_ms) > beat.ttl_ms {
            return true;
        }
        serde_json::from_slice::<Holder>(&self.value)
            .is_ok_and(|h| h.host == this_host && !super::super::pid_alive(h.pid))
    }

    pub(super) fn versioned(self) -> Versioned {
        Versioned {
            value: self.value,
            version: self.header.version,
        }
    }
}

/// How `Held` names a holder: `pid 42 on host db1 ({"addr":"10.0.0.1:18080"})`.
pub(crate) fn describe_holder(value: &[u8]) -> String {
    match serde_json::from_slice::<Holder>(value) {
        Ok(h) if h.payload.is_null() => format!("pid {} on host {}", h.pid, h.host),
        Ok(h) => format!("pid {} on host {} ({})", h.pid, h.host, h.payload),
        Err(_) => format!(
            "a value that is not an ephemeral holder: {}",
            String::from_utf8_lossy(value)
        ),
    }
}

/// Unique per process and call; with the pid, unique across the processes sharing a root.
pub(super) fn nonce() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
