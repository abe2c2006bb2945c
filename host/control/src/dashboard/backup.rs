//! Whole-cluster backups as dashboard jobs (docs/backup.md): where they may be written (under
//! `--backup-root`, never outside it), one at a time, the recent jobs and their progress for
//! `GET /api/backups`, and the time of the last one that finished well (kept in the store, so
//! a restarted dashboard still knows it; the "backup too old" alert reads it). Running a job
//! is `backup_job`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tracing::warn;

use super::Dashboard;
use super::backup_job::{self, Job, Plan, Source, now_ms};
use crate::Error;
use tessera_store::model;
use tessera_wire::backup::{
    BackupRequest, BackupView, BackupsView, DEFAULT_PAUSE_MS, GroupProgress, GroupState, JobState,
};
use tessera_wire::events::{EventKind, Severity};

/// Jobs listed by `GET /api/backups` (older ones are forgotten; their directories stay).
const KEEP: usize = 20;

/// The store document with the last good backup.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct LastBackup {
    finished_unix_ms: u64,
    dir: String,
}

/// The dashboard's backups.
#[derive(Default)]
pub(crate) struct Backups {
    /// `--backup-root`, canonical; `None`: backups are refused.
    root: Option<PathBuf>,
    jobs: Mutex<VecDeque<Arc<Job>>>,
    running: AtomicBool,
    next_id: AtomicU64,
    /// 0: none known.
    last_success_ms: AtomicU64,
}

impl Backups {
    /// Backups under `root` (created 0700 if missing), `None` to refuse them.
    ///
    /// # Errors
    /// The root cannot be created or resolved.
    pub(crate) fn new(root: Option<&Path>) -> anyhow::Result<Self> {
        let root = match root {
            Some(r) => {
                create_private_dir_all(r)?;
                Some(
                    std::fs::canonicalize(r)
                        .map_err(|e| anyhow::anyhow!("--backup-root {}: {e}", r.display()))?,
                )
            }
            None => None,
        };
        Ok(Self {
            root,
            next_id: AtomicU64::new(1),
            ..Self::default()
        })
    }

    /// When the last good backup finished (Unix ms), if one is known.
    pub(crate) fn last_success_ms(&self) -> Option<u64> {
        Some(self.last_success_ms.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }

    pub(crate) fn enabled(&self) -> bool {
        self.root.is_some()
    }
}

impl Dashboard {
    /// Reads the last good backup's time from the store (a restarted dashboard keeps it).
    pub(crate) async fn load_last_backup(&self) {
        match model::read::<LastBackup>(&*self.store, &last_backup_key(self)).await {
            Ok(Some((doc, _))) => self
                .backups
                .last_success_ms
                .store(doc.finished_unix_ms, Ordering::Relaxed),
            Ok(None) => {}
            Err(e) => warn!(error = %e, "the last backup's record is unreadable"),
        }
    }

    /// `GET /api/backups`.
    pub fn backups_view(&self) -> BackupsView {
        let jobs = self.backups.jobs.lock().expect("backup jobs lock poisoned");
        BackupsView {
            enabled: self.backups.enabled(),
            last_success_unix_ms: self.backups.last_success_ms(),
            backups: jobs.iter().map(|j| j.snapshot()).collect(),
        }
    }

    /// `POST /api/backups`: checks the request, creates its directory and starts the job.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad directory or a dashboard without `--backup-root`,
    /// [`Error::Conflict`] if the directory exists or the cluster has no group,
    /// [`Error::Busy`] while another backup runs.
    pub async fn start_backup(self: &Arc<Self>, req: BackupRequest) -> Result<BackupView, Error> {
        req.validate().map_err(Error::Invalid)?;
        let Some(root) = &self.backups.root else {
            return Err(Error::Invalid(
                "this dashboard takes no backups: start it with --backup-root DIR".into(),
            ));
        };
        let plan = self.backup_plan()?;
        if self.backups.running.swap(true, Ordering::SeqCst) {
            return Err(Error::Busy(
                "a backup is running: wait for it (GET /api/backups)".into(),
            ));
        }
        let dir = match make_backup_dir(root, &req.dir) {
            Ok(d) => d,
            Err(e) => {
                self.backups.running.store(false, Ordering::SeqCst);
                return Err(e);
            }
        };
        let id = self.backups.next_id.fetch_add(1, Ordering::Relaxed);
        let view = BackupView {
            id,
            dir: req.dir.clone(),
            state: JobState::Running,
            one_instant: req.one_instant,
            started_unix_ms: now_ms(),
            finished_unix_ms: None,
            pause_ms: None,
            max_pause_ms: req
                .one_instant
                .then(|| req.max_pause_ms.unwrap_or(DEFAULT_PAUSE_MS)),
            groups: plan
                .iter()
                .map(|s| GroupProgress {
                    group: s.group,
                    source: s.addr.clone(),
                    source_role: s.role.into(),
                    state: GroupState::Snapshot,
                    bytes: 0,
                    keys: s.keys,
                    offset: None,
                    error: None,
                })
                .collect(),
            total_bytes: 0,
            error: None,
        };
        let job = Arc::new(Job {
            bytes: plan.iter().map(|_| Arc::default()).collect(),
            view: Mutex::new(view.clone()),
        });
        {
            let mut jobs = self.backups.jobs.lock().expect("backup jobs lock poisoned");
            jobs.push_front(job.clone());
            jobs.truncate(KEEP);
        }
        let d = self.clone();
        let plan = Plan {
            dir,
            sources: plan,
            pause_ms: view.max_pause_ms,
        };
        tokio::spawn(async move {
            let result = backup_job::run(&d, &job, &plan).await;
            d.finish_backup(&job, &plan.dir, &req.dir, result).await;
        });
        Ok(view)
    }

    /// Records how a job ended: a failed one's directory is removed (a backup is whole or
    /// absent); a good one's time is kept in the store.
    async fn finish_backup(&self, job: &Job, dir: &Path, name: &str, result: Result<u64, String>) {
        let now = now_ms();
        match result {
            Ok(total) => {
                job.update(|v| {
                    v.state = JobState::Done;
                    v.total_bytes = total;
                    v.finished_unix_ms = Some(now);
                });
                self.backups.last_success_ms.store(now, Ordering::Relaxed);
                let doc = LastBackup {
                    finished_unix_ms: now,
                    dir: name.into(),
                };
                if let Err(e) = model::write(&*self.store, &last_backup_key(self), &doc).await {
                    warn!(error = %e, "could not record the backup's time in the store");
                }
                super::metrics::backup_done(self, now);
                self.events.record(
                    Severity::Info,
                    EventKind::BackupTaken,
                    format!("backup {name} taken: {total} bytes"),
                );
            }
            Err(e) => {
                warn!(dir = %dir.display(), error = %e, "backup failed; its directory is removed");
                self.events.record(
                    Severity::Warning,
                    EventKind::BackupFailed,
                    format!("backup {name} failed: {e}"),
                );
                if let Err(rm) = std::fs::remove_dir_all(dir) {
                    warn!(dir = %dir.display(), error = %rm, "could not remove a failed backup's directory");
                }
                job.update(|v| {
                    v.state = JobState::Failed;
                    v.error = Some(e);
                    v.finished_unix_ms = Some(now);
                });
                super::metrics::backup_failed(self);
            }
        }
        self.backups.running.store(false, Ordering::SeqCst);
    }

    /// Each group's source: a replica in sync (up, link up) where there is one, else its
    /// master.
    fn backup_plan(&self) -> Result<Vec<Source>, Error> {
        let st = self.state.lock().expect("state lock poisoned");
        let mut out = Vec::new();
        for g in st.groups.values() {
            let Some(master) = g.master() else { continue };
            let in_sync = g.servers.iter().skip(1).find(|s| {
                st.servers.get(&s.addr).is_some_and(|h| {
                    h.up && matches!(h.role_reported.as_deref(), Some("slave" | "replica"))
                        && h.master_link.as_deref() == Some("up")
                })
            });
            let (addr, role) = match in_sync {
                Some(s) => (s.addr.clone(), "replica"),
                None => (master.to_owned(), "master"),
            };
            let keys = st.servers.get(&addr).and_then(|h| h.keys);
            out.push(Source {
                group: g.id,
                addr,
                role,
                master: master.to_owned(),
                keys,
            });
        }
        if out.is_empty() {
            return Err(Error::Conflict(
                "the cluster has no group with a server: nothing to back up".into(),
            ));
        }
        Ok(out)
    }
}

fn last_backup_key(d: &Dashboard) -> String {
    format!("{}backup-last", d.paths.cluster_prefix())
}

/// Creates `dir` and its missing parents, each 0700.
fn create_private_dir_all(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))
}

/// Creates `root/name`, which must not exist, and its missing parents (0700), one segment at
/// a time: each that exists must resolve inside `root` (a symbolic link on the way could lead
/// out) before anything is created under it.
fn make_backup_dir(root: &Path, name: &str) -> Result<PathBuf, Error> {
    use std::os::unix::fs::DirBuilderExt;
    let segments: Vec<&str> = name.split('/').collect();
    let mut dir = root.to_path_buf();
    for (i, seg) in segments.iter().enumerate() {
        dir.push(seg);
        let last = i + 1 == segments.len();
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && last => {
                return Err(Error::Conflict(format!(
                    "dir {name:?} exists: a backup never writes over another; choose a new name"
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let inside = std::fs::canonicalize(&dir).is_ok_and(|r| r.starts_with(root));
                if !inside || !dir.is_dir() {
                    return Err(Error::Invalid(format!(
                        "dir {name:?}: {} is not a directory inside the backup root",
                        dir.display()
                    )));
                }
            }
            Err(e) => return Err(Error::Internal(format!("creating {}: {e}", dir.display()))),
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_directory_is_new_and_inside_the_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let d = make_backup_dir(&root, "a/b").unwrap();
        assert!(d.starts_with(&root) && d.is_dir());
        assert!(matches!(
            make_backup_dir(&root, "a/b"),
            Err(Error::Conflict(_))
        ));
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        for through_link in ["link/x", "link/x/y"] {
            assert!(matches!(
                make_backup_dir(&root, through_link),
                Err(Error::Invalid(_))
            ));
        }
        assert!(!outside.path().join("x").exists());
    }
}
