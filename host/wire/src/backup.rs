//! Whole-cluster backups' shapes (docs/backup.md): what `POST /api/backups` takes, a backup
//! job's progress as `GET /api/backups` shows it, and the manifest a backup directory holds
//! (read back by `tessera admin restore`, which trusts none of it: `check_file_name` is the one
//! rule for the names it may open).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::group::GroupId;

/// The manifest's format version; a restore refuses any other.
pub const FORMAT_VERSION: u32 = 1;
/// The manifest's file name in a backup directory; written last, so a directory without it
/// is a backup that did not finish.
pub const MANIFEST: &str = "manifest.json";
/// The store documents' file name (topology, users, plugins, routes, read policy).
pub const STORE_FILE: &str = "store.json";
/// Longest backup directory name the API takes, in bytes.
pub const MAX_DIR_LEN: usize = 200;
/// The longest write pause `max_pause_ms` may ask for.
pub const MAX_PAUSE_MS: u64 = 5_000;
/// The write pause when `max_pause_ms` is not given.
pub const DEFAULT_PAUSE_MS: u64 = 500;

/// `POST /api/backups`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackupRequest {
    /// The directory to write, relative to the dashboard's `--backup-root`: 1 to 200 bytes of
    /// `A-Za-z0-9._-` in segments separated by `/`, no `.` or `..` segment. It must not exist.
    pub dir: String,
    /// Take every group's snapshot point at one instant: writes are paused on every master
    /// (`CLIENT PAUSE … WRITE`) while the points are read, at most `max_pause_ms`.
    #[serde(default)]
    pub one_instant: bool,
    /// Bound of the write pause in ms (1 to 5000, default 500); Redis itself lifts the pause
    /// at this bound if the dashboard does not first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pause_ms: Option<u64>,
}

impl BackupRequest {
    /// The checks of a request's shape (the dashboard checks the directory against its root).
    ///
    /// # Errors
    /// What is wrong, for a 400.
    pub fn validate(&self) -> Result<(), String> {
        check_dir(&self.dir)?;
        if let Some(ms) = self.max_pause_ms
            && !(1..=MAX_PAUSE_MS).contains(&ms)
        {
            return Err(format!("max_pause_ms must be 1 to {MAX_PAUSE_MS}"));
        }
        Ok(())
    }
}

/// A backup directory's name under the root: relative, segments of `A-Za-z0-9._-`, no `.`
/// or `..` segment, no empty segment, at most [`MAX_DIR_LEN`] bytes.
///
/// # Errors
/// Why it is refused.
pub fn check_dir(dir: &str) -> Result<(), String> {
    if dir.is_empty() || dir.len() > MAX_DIR_LEN {
        return Err(format!("dir must be 1 to {MAX_DIR_LEN} bytes"));
    }
    for seg in dir.split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return Err(format!(
                "dir {dir:?}: segments may not be empty, . or .. (it is relative to the backup root)"
            ));
        }
        if !seg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(format!(
                "dir {dir:?}: only A-Z a-z 0-9 . _ - and / between segments"
            ));
        }
    }
    Ok(())
}

/// A file name a manifest may name: one segment of `A-Za-z0-9._-`, not starting with `.`,
/// at most 64 bytes, so a restore never opens anything outside the backup directory.
///
/// # Errors
/// Why it is refused.
pub fn check_file_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the manifest names a file {name:?}: only plain names of A-Z a-z 0-9 . _ - are read"
        ))
    }
}

/// Where a backup job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = BackupState)]
pub enum JobState {
    Running,
    Done,
    Failed,
}

/// Where one group's part of a backup is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GroupState {
    /// Asking its source for a snapshot (PSYNC), until the source forks.
    Snapshot,
    /// The source forked; waiting for the other groups' forks and the write pause.
    Forked,
    /// Receiving the RDB.
    Receiving,
    /// Receiving the writes between the fork and the cluster's instant.
    Tail,
    Done,
    Failed,
}

/// One group of a backup job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupProgress {
    pub group: GroupId,
    /// The server the snapshot comes from.
    pub source: String,
    /// `replica` (one in sync) or `master` (none was).
    pub source_role: String,
    pub state: GroupState,
    /// RDB bytes received so far.
    pub bytes: u64,
    /// Keys the source held when the backup started (its last health check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
    /// The replication offset of the snapshot (the fork).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One backup job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupView {
    pub id: u64,
    /// The directory, relative to the backup root.
    pub dir: String,
    pub state: JobState,
    pub one_instant: bool,
    pub started_unix_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_unix_ms: Option<u64>,
    /// The write pause measured (one instant only): from the first `CLIENT PAUSE` sent to
    /// the last `CLIENT UNPAUSE` answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause_ms: Option<f64>,
    /// The bound the pause was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pause_ms: Option<u64>,
    pub groups: Vec<GroupProgress>,
    /// Bytes of every file written, once done.
    pub total_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /api/backups`: the recent jobs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackupsView {
    /// Whether this dashboard may write backups (`--backup-root` given).
    pub enabled: bool,
    /// When the last backup that finished well finished (this dashboard's run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_success_unix_ms: Option<u64>,
    pub backups: Vec<BackupView>,
}

/// A backup directory's `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT_VERSION`].
    pub format: u32,
    pub cluster: String,
    pub started_unix_ms: u64,
    pub finished_unix_ms: u64,
    pub one_instant: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_ms: Option<f64>,
    pub groups: Vec<ManifestGroup>,
    /// Every file of the backup but the manifest, with its size and SHA-256.
    pub files: Vec<ManifestFile>,
}

/// One group's snapshot in a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestGroup {
    pub group: GroupId,
    pub source: String,
    pub source_role: String,
    /// The source's replication ID and the offset of its fork.
    pub replid: String,
    pub offset: u64,
    /// When the source answered that it forked.
    pub snapshot_unix_ms: u64,
    /// The RDB file.
    pub rdb: String,
    /// One instant only: the writes between the fork and the instant, as the replication
    /// stream carried them (RESP commands), up to `tail_end_offset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_end_offset: Option<u64>,
}

/// A file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestFile {
    pub name: String,
    pub bytes: u64,
    /// Lowercase hex.
    pub sha256: String,
}

/// `store.json`: the cluster's documents a restore may need, as the store holds them (never
/// the meta, with the proxy secret and the control plane's password, nor the API tokens).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreDocs {
    pub cluster: String,
    pub entries: Vec<StoreEntry>,
}

/// One document: its key under the cluster's prefix, and its JSON, or hex for a blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreEntry {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_stay_under_the_root() {
        for ok in ["nightly", "2026/12/06", "a.b_c-d"] {
            assert!(check_dir(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "/abs", "a/../b", "..", "a//b", "./a", "a/", "sp ace", "a\\b", "é",
        ] {
            assert!(check_dir(bad).is_err(), "{bad:?}");
        }
        assert!(check_dir(&"a".repeat(MAX_DIR_LEN + 1)).is_err());
    }

    #[test]
    fn manifest_file_names_are_plain() {
        assert!(check_file_name("group-1.rdb").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "/etc/passwd"] {
            assert!(check_file_name(bad).is_err(), "{bad:?}");
        }
    }
}
