//! `FsStore`: the coordinator in a directory, the embedded default (nothing to install).
//! A key is a file under the root (`/tessera/c1/meta` → `<root>/tessera/c1/meta`) holding a
//! one-line JSON header (version; heartbeat for ephemeral nodes) followed by the raw value.
//! Several processes may share the directory: every write runs under an `flock` on
//! `<root>/.lock`, and reads need no lock because files are replaced by atomic rename.
//! Heartbeats take no lock either: a holder renews its node by touching a beat file of its
//! own beside it, so a holder stopped mid-heartbeat (SIGSTOP, a paused VM) never holds up
//! another process's writes. Watches poll. Names starting with `.` (lock, counter, temp and
//! beat files) are never keys.

mod entry;
mod tasks;

use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{Cas, Ephemeral, Holder, LeaseClock, Store, StoreError, Versioned, WatchStream};
use entry::{Entry, Header, Heartbeat, nonce, now_ms};

pub(super) use entry::describe_holder;

/// A store in a local directory, shared safely by the processes of one machine.
#[derive(Clone)]
pub struct FsStore {
    root: Arc<Root>,
}

/// What every blocking operation needs; shared with watch and heartbeat tasks.
struct Root {
    dir: PathBuf,
    /// This machine's host name, read once: compared with ephemeral holders' hosts.
    host: String,
}

impl FsStore {
    /// Opens (creating it if needed) the store directory `path`.
    ///
    /// # Errors
    /// `BadUrl` for an empty path, `Io` if the directory cannot be created.
    pub fn open(path: &str) -> Result<FsStore, StoreError> {
        if path.is_empty() {
            return Err(StoreError::BadUrl {
                url: "fs://".into(),
                reason: "empty path".into(),
            });
        }
        private_dirs(Path::new(path)).map_err(|e| io_err(path, e))?;
        // The store holds secrets (the proxies' shared secret, token digests): the directory
        // is its owner's only, also when an older version created it open.
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(|e| io_err(path, e))?;
        let root = Root {
            dir: PathBuf::from(path),
            host: super::hostname(),
        };
        Ok(FsStore {
            root: Arc::new(root),
        })
    }

    /// Runs `f` on the blocking pool: every file operation blocks (fsync, flock).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Root) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || f(&root))
            .await
            .map_err(|e| StoreError::Io {
                key: String::new(),
                reason: format!("blocking task failed: {e}"),
            })?
    }
}

#[async_trait::async_trait]
impl Store for FsStore {
    async fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |root| {
            let path = root.path_of(&key)?;
            Ok(root.read_live(&path, &key)?.map(Entry::versioned))
        })
        .await
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<u64, StoreError> {
        // As a batch of one: synced without the store lock held (see `write_many`).
        let key = key.to_owned();
        self.blocking(move |root| Ok(root.write_many(vec![(key, value)])?[0]))
            .await
    }

    async fn put_many(&self, entries: Vec<(String, Bytes)>) -> Result<(), StoreError> {
        self.blocking(move |root| root.write_many(entries).map(|_| ()))
            .await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<u64>,
        value: Bytes,
    ) -> Result<Cas, StoreError> {
        let key = key.to_owned();
        self.blocking(move |root| {
            let path = root.path_of(&key)?;
            let _lock = root.lock()?;
            let raw = root.read(&path, &key)?;
            let previous = raw.as_ref().map(|e| e.header.version);
            let live = raw.filter(|e| !e.is_gone(&root.host));
            if live.as_ref().map(|e| e.header.version) != expected {
                return Ok(Cas::Conflict(live.map(Entry::versioned)));
            }
            let version = root.write_value(&path, &key, previous, value)?;
            Ok(Cas::Written(version))
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        let key = key.to_owned();
        self.blocking(move |root| {
            let path = root.path_of(&key)?;
            let _lock = root.lock()?;
            let Some(current) = root.read(&path, &key)? else {
                return Ok(false);
            };
            forget_beat(&path, &current);
            root.remove(&path, &key)?;
            Ok(!current.is_gone(&root.host))
        })
        .await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>, StoreError> {
        let prefix = prefix.to_owned();
        self.blocking(move |root| root.list(&prefix)).await
    }

    async fn children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let prefix = prefix.to_owned();
        self.blocking(move |root| root.children(&prefix)).await
    }

    async fn watch(&self, prefix: &str) -> Result<WatchStream, StoreError> {
        let first = self.list(prefix).await?;
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(tasks::poll(
            self.clone(),
            prefix.to_owned(),
            tasks::snapshot(first),
            tx,
        ));
        Ok(Box::pin(ReceiverStream::new(rx)))
    }

    async fn create_ephemeral(
        &self,
        key: &str,
        holder: &Holder,
        ttl: Duration,
    ) -> Result<Ephemeral, StoreError> {
        let value = Bytes::from(serde_json::to_vec(holder).expect("Holder serializes to JSON"));
        // Before the heartbeat's time is taken: others judge the node by that time.
        let clock = LeaseClock::new(std::time::Instant::now(), ttl);
        let beat = Heartbeat {
            nonce: nonce(),
            heartbeat_ms: now_ms(),
            ttl_ms: ttl.as_millis() as u64,
        };
        let (key, nonce) = (key.to_owned(), beat.nonce.clone());
        let (path, took_over_from) = self
            .blocking({
                let key = key.clone();
                move |root| root.claim(&key, beat, value)
            })
            .await?;
        let stop = tasks::spawn_heartbeat(
            self.root.clone(),
            key.clone(),
            path.clone(),
            nonce.clone(),
            ttl,
            clock.clone(),
        );
        let root = self.root.clone();
        let release_key = key.clone();
        // Synchronous on purpose: after `release()` returns the node is gone, also when the
        // runtime is shutting down. It is one small locked file operation.
        let release = Box::new(move || {
            let _ = stop.send(());
            if let Err(e) = root.release(&path, &release_key, &nonce) {
                tracing::warn!(key = %release_key, error = %e, "releasing ephemeral node");
            }
        });
        Ok(Ephemeral::new(key, took_over_from, clock, release))
    }

    async fn ephemeral_silence(&self, key: &str) -> Result<Option<Duration>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |root| {
            let path = root.path_of(&key)?;
            let beat = root
                .read(&path, &key)?
                .filter(|e| !e.is_gone(&root.host))
                .and_then(|e| e.header.ephemeral);
            Ok(beat.map(|b| Duration::from_millis(now_ms().saturating_sub(b.heartbeat_ms))))
        })
        .await
    }

    async fn expire_ephemeral(&self, key: &str) -> Result<bool, StoreError> {
        // The holder's next heartbeat finds its node gone (`Root::refresh`) and says so.
        self.delete(key).await
    }

    fn describe(&self) -> String {
        format!("fs://{}", self.root.dir.display())
    }
}

// === impl Root ===

impl Root {
    /// The file of `key`: an absolute path whose segments are non-empty and do not start with
    /// `.` (which rules out `..` and keeps the store's own dot-files out of the key space).
    fn path_of(&self, key: &str) -> Result<PathBuf, StoreError> {
        let bad = |reason: &str| StoreError::Io {
            key: key.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = key
            .strip_prefix('/')
            .ok_or_else(|| bad("a key must start with '/'"))?;
        let mut path = self.dir.clone();
        for segment in rest.split('/') {
            if segment.is_empty() || segment.starts_with('.') {
                return Err(bad(
                    "a key segment must be non-empty and not start with '.'",
                ));
            }
            path.push(segment);
        }
        Ok(path)
    }

    /// Reads a file, including ephemeral nodes whose holder is gone. Missing → `None`.
    /// An ephemeral node's heartbeat is the later of its header's and its beat file's.
    fn read(&self, path: &Path, key: &str) -> Result<Option<Entry>, StoreError> {
        let mut entry = match fs::read(path) {
            Ok(bytes) => Entry::decode(bytes).ok_or_else(|| StoreError::Io {
                key: key.to_owned(),
                reason: "not a store file (bad header)".into(),
            })?,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(io_err(key, e)),
        };
        if let Some(beat) = entry.header.ephemeral.as_mut() {
            let touched = fs::metadata(beat_path(path, &beat.nonce))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            if let Some(touched) = touched {
                beat.heartbeat_ms = beat.heartbeat_ms.max(touched.as_millis() as u64);
            }
        }
        Ok(Some(entry))
    }

    /// Like [`Root::read`], but an ephemeral node whose holder is gone counts as absent.
    fn read_live(&self, path: &Path, key: &str) -> Result<Option<Entry>, StoreError> {
        Ok(self.read(path, key)?.filter(|e| !e.is_gone(&self.host)))
    }

    /// Takes the store-wide write lock; released when the returned file is closed.
    fn lock(&self) -> Result<File, StoreError> {
        let path = self.dir.join(".lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_err(".lock", e))?;
        file.lock().map_err(|e| io_err(".lock", e))?;
        Ok(file)
    }

    /// The next version, under the lock: one counter for the whole store, so a key that is
    /// deleted and created again still gets a higher version.
    fn next_version(&self, current: Option<u64>) -> Result<u64, StoreError> {
        let mut file = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(self.dir.join(".version"))
            .map_err(|e| io_err(".version", e))?;
        let mut text = String::new();
        file.read_to_string(&mut text)
            .map_err(|e| io_err(".version", e))?;
        // A lost or torn counter falls back to the key's own version, which keeps versions
        // increasing per key; only a delete-then-recreate could then reuse a number.
        let last = text.trim().parse::<u64>().unwrap_or(0);
        let next = last.max(current.unwrap_or(0)) + 1;
        // Fixed width, written in place: no rename (the lock is on another file anyway) and
        // no fsync; the value file written next is synced, which is what callers rely on.
        file.write_all_at(format!("{next:020}\n").as_bytes(), 0)
            .map_err(|e| io_err(".version", e))?;
        Ok(next)
    }

    /// Writes a plain value under the lock with the next version; returns that version.
    /// `previous`: the version in the file now, even of a gone ephemeral node.
    fn write_value(
        &self,
        path: &Path,
        key: &str,
        previous: Option<u64>,
        value: Bytes,
    ) -> Result<u64, StoreError> {
        let version = self.next_version(previous)?;
        let header = Header {
            version,
            ephemeral: None,
        };
        self.write(path, key, &Entry { header, value }, true)?;
        Ok(version)
    }

    /// Writes several plain values. The store lock is held to give them versions and write
    /// their temp files, and again to rename them, but not while they are synced (by a few
    /// threads at once: the journal then commits them together rather than one commit a
    /// file): under I/O load syncing hundreds of files took seconds, and every other writer
    /// waited for the lock meanwhile. A key written by someone
    /// else while the lock was released is staged again under it, with a newer version.
    /// Each directory is synced once, at the end. Returns the versions written, in order.
    fn write_many(&self, entries: Vec<(String, Bytes)>) -> Result<Vec<u64>, StoreError> {
        /// Threads syncing at once.
        const SYNCERS: usize = 8;
        let mut staged: Vec<Staged> = Vec::with_capacity(entries.len());
        let mut dirs = std::collections::BTreeSet::new();
        {
            let _lock = self.lock()?;
            for (key, value) in entries {
                let path = self.path_of(&key)?;
                let previous = self.read(&path, &key)?.map(|e| e.header.version);
                dirs.insert(path.parent().expect("a key path has a parent").to_owned());
                match self.stage_versioned(path, key, previous, value) {
                    Ok(s) => staged.push(s),
                    Err(e) => {
                        Staged::remove_all(&staged);
                        return Err(e);
                    }
                }
            }
        }
        let chunk = staged.len().div_ceil(SYNCERS).max(1);
        let synced: Result<(), (String, std::io::Error)> = std::thread::scope(|scope| {
            let handles: Vec<_> = staged
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        for s in part {
                            s.file.sync_all().map_err(|e| (s.key.clone(), e))?;
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("a sync thread panicked"))
        });
        if let Err((key, e)) = synced {
            Staged::remove_all(&staged);
            return Err(io_err(&key, e));
        }
        {
            let _lock = self.lock()?;
            for i in 0..staged.len() {
                let now = self
                    .read(&staged[i].path, &staged[i].key)?
                    .map(|e| e.header.version);
                if now != staged[i].previous {
                    // Written meanwhile: ours comes after it, with a newer version.
                    let old = &staged[i];
                    let again = self.stage_versioned(
                        old.path.clone(),
                        old.key.clone(),
                        now,
                        old.value.clone(),
                    );
                    let again = again.and_then(|s| {
                        s.file.sync_all().map_err(|e| io_err(&s.key, e))?;
                        Ok(s)
                    });
                    let _ = fs::remove_file(&old.tmp);
                    match again {
                        Ok(s) => staged[i] = s,
                        Err(e) => {
                            Staged::remove_all(&staged[i + 1..]);
                            return Err(e);
                        }
                    }
                }
                let s = &staged[i];
                if let Err(e) = fs::rename(&s.tmp, &s.path) {
                    Staged::remove_all(&staged[i..]);
                    return Err(io_err(&s.key, e));
                }
            }
        }
        for dir in dirs {
            File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err(&dir.to_string_lossy(), e))?;
        }
        Ok(staged.iter().map(|s| s.version).collect())
    }

    /// A plain value's temp file beside `path`, with the next version (under the lock).
    fn stage_versioned(
        &self,
        path: PathBuf,
        key: String,
        previous: Option<u64>,
        value: Bytes,
    ) -> Result<Staged, StoreError> {
        let version = self.next_version(previous)?;
        let entry = Entry {
            header: Header {
                version,
                ephemeral: None,
            },
            value,
        };
        let (tmp, file) = stage(&path, &entry).map_err(|e| io_err(&key, e))?;
        Ok(Staged {
            tmp,
            path,
            key,
            previous,
            version,
            value: entry.value,
            file,
        })
    }

    /// Atomically replaces the file at `path`: temp file in the same directory, then rename.
    fn write(
        &self,
        path: &Path,
        key: &str,
        entry: &Entry,
        durable: bool,
    ) -> Result<(), StoreError> {
        let dir = path.parent().expect("a key path has a parent");
        let (tmp, file) = stage(path, entry).map_err(|e| io_err(key, e))?;
        let result = (|| {
            if durable {
                file.sync_all()?;
            }
            fs::rename(&tmp, path)?;
            if durable {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })();
        result.map_err(|e: std::io::Error| {
            let _ = fs::remove_file(&tmp);
            io_err(key, e)
        })
    }

    /// Removes a key's file and the directories it leaves empty (never the root).
    fn remove(&self, path: &Path, key: &str) -> Result<(), StoreError> {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(io_err(key, e)),
        }
        self.prune(path);
        Ok(())
    }

    /// Removes the directories above `path` that are left empty (never the root).
    fn prune(&self, path: &Path) {
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| *d != self.dir) {
            // Fails (harmlessly) as soon as a directory is not empty.
            if fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
    }

    /// Every live key starting with `prefix`, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>, StoreError> {
        if !prefix.is_empty() && !prefix.starts_with('/') {
            return Err(StoreError::Io {
                key: prefix.to_owned(),
                reason: "a prefix must start with '/'".into(),
            });
        }
        // Walk from the last complete segment: `/a/b/c` lists under `/a/b` and filters.
        let base = &prefix[..prefix.rfind('/').unwrap_or(0)];
        let dir = if base.is_empty() {
            self.dir.clone()
        } else {
            self.path_of(base)?
        };
        let mut out = Vec::new();
        self.walk(&dir, base, prefix, &mut out)?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The entries of the directory of `prefix` (`/a/b/`), without reading any file.
    fn children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let base = prefix.trim_end_matches('/');
        let dir = if base.is_empty() {
            self.dir.clone()
        } else {
            self.path_of(base)?
        };
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if is_absent(&e) => return Ok(Vec::new()),
            Err(e) => return Err(io_err(prefix, e)),
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names)
    }

    fn walk(
        &self,
        dir: &Path,
        key: &str,
        prefix: &str,
        out: &mut Vec<(String, Versioned)>,
    ) -> Result<(), StoreError> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if is_absent(&e) => return Ok(()),
            Err(e) => return Err(io_err(key, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| io_err(key, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else {
                continue;
            };
            let child = format!("{key}/{name}");
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                let below = format!("{child}/");
                if below.starts_with(prefix) || prefix.starts_with(&below) {
                    self.walk(&entry.path(), &child, prefix, out)?;
                }
            } else if kind.is_file() && child.starts_with(prefix) {
                match self.read_live(&entry.path(), &child) {
                    Ok(Some(e)) => out.push((child, e.versioned())),
                    Ok(None) => {}
                    // One foreign or damaged file should not hide the rest of the cluster.
                    Err(e) => {
                        tracing::warn!(key = %child, error = %e, "skipping unreadable store file")
                    }
                }
            }
        }
        Ok(())
    }

    /// Creates the ephemeral node under the lock, replacing one whose holder is gone.
    fn claim(
        &self,
        key: &str,
        beat: Heartbeat,
        value: Bytes,
    ) -> Result<(PathBuf, Option<Holder>), StoreError> {
        let path = self.path_of(key)?;
        let _lock = self.lock()?;
        let current = self.read(&path, key)?;
        let mut took_over_from = None;
        if let Some(current) = &current {
            if !current.is_gone(&self.host) {
                return Err(StoreError::Held {
                    key: key.to_owned(),
                    holder: describe_holder(&current.value),
                });
            }
            took_over_from = serde_json::from_slice::<Holder>(&current.value).ok();
            forget_beat(&path, current);
        }
        let version = self.next_version(current.map(|e| e.header.version))?;
        let entry = Entry {
            header: Header {
                version,
                ephemeral: Some(beat),
            },
            value,
        };
        self.write(&path, key, &entry, true)?;
        Ok((path, took_over_from))
    }

    /// Renews our node's heartbeat, without the store lock: the node is read (files are
    /// replaced whole) and, if it is still ours, our own beat file is touched. A node taken
    /// over between the two has another holder's nonce, so our touch is not read as its
    /// heartbeat. `false`: the node is no longer ours (deleted, replaced).
    fn refresh(&self, path: &Path, key: &str, nonce: &str) -> Result<bool, StoreError> {
        let ours = self
            .read(path, key)?
            .and_then(|e| e.header.ephemeral)
            .is_some_and(|b| b.nonce == nonce);
        let beat = beat_path(path, nonce);
        if !ours {
            let _ = fs::remove_file(&beat);
            self.prune(&beat);
            return Ok(false);
        }
        // Not synced: losing one to a crash only makes the node look older, which a crash
        // does anyway.
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&beat)
            .and_then(|f| f.set_modified(std::time::SystemTime::now()))
            .map_err(|e| io_err(key, e))?;
        Ok(true)
    }

    /// Deletes our node if it is still ours.
    fn release(&self, path: &Path, key: &str, nonce: &str) -> Result<(), StoreError> {
        let _lock = self.lock()?;
        let ours = self
            .read(path, key)?
            .and_then(|e| e.header.ephemeral)
            .is_some_and(|b| b.nonce == nonce);
        let _ = fs::remove_file(beat_path(path, nonce));
        if ours { self.remove(path, key) } else { Ok(()) }
    }
}

// === helpers ===

/// The beat file of the holder `nonce` of the ephemeral node at `path`: a dot-file beside it
/// whose modification time is that holder's latest heartbeat.
fn beat_path(path: &Path, nonce: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{nonce}.beat"))
}

/// Removes the beat file of `entry`'s holder, if it is an ephemeral node (best effort).
fn forget_beat(path: &Path, entry: &Entry) {
    if let Some(beat) = &entry.header.ephemeral {
        let _ = fs::remove_file(beat_path(path, &beat.nonce));
    }
}

/// One value of a batch, written to its temp file and not yet renamed into place.
struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    key: String,
    /// The key's version when it was staged.
    previous: Option<u64>,
    /// The version it is written with.
    version: u64,
    value: Bytes,
    file: File,
}

impl Staged {
    fn remove_all(staged: &[Staged]) {
        for s in staged {
            let _ = fs::remove_file(&s.tmp);
        }
    }
}

/// Writes `entry` to a new temp file (mode 0600) beside `path`, creating its directories;
/// not synced, not renamed. A failed write removes the temp file.
fn stage(path: &Path, entry: &Entry) -> std::io::Result<(PathBuf, File)> {
    let dir = path.parent().expect("a key path has a parent");
    private_dirs(dir)?;
    let name = path
        .file_name()
        .expect("a key path has a file name")
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp.{}", nonce()));
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    if let Err(e) = file.write_all(&entry.encode()) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok((tmp, file))
}

/// `create_dir_all` with mode 0700 for the directories it creates.
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn io_err(key: &str, e: std::io::Error) -> StoreError {
    StoreError::Io {
        key: key.to_owned(),
        reason: e.to_string(),
    }
}

/// Missing, or a path through a regular file: either way there is no such key.
fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::NotFound | ErrorKind::NotADirectory | ErrorKind::IsADirectory
    )
}
