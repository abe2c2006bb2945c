//! The sync's resume point: the source's replication ID, the offset applied through the
//! proxy (every command up to it has its reply), and the database the stream had selected.
//! Saved as JSON, written to a temp file and renamed, so a crash leaves the old or the new.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where a restarted sync resumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncState {
    pub replid: String,
    /// The last byte of the stream applied (PSYNC asks for `offset + 1`).
    pub offset: u64,
    /// The database selected at `offset`.
    #[serde(default)]
    pub db: u64,
}

impl SyncState {
    /// Reads `path`; `None` if it does not exist.
    ///
    /// # Errors
    /// Unreadable or not a state file.
    pub fn load(path: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes `path` atomically (temp file, then rename).
    ///
    /// # Errors
    /// I/O.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec(self).map_err(std::io::Error::other)?,
        )?;
        std::fs::rename(tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_loads_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("port.state");
        assert_eq!(SyncState::load(&path).unwrap(), None);
        let s = SyncState {
            replid: "a".repeat(40),
            offset: 12345,
            db: 0,
        };
        s.save(&path).unwrap();
        assert_eq!(SyncState::load(&path).unwrap(), Some(s));
    }
}
