//! One whole-cluster backup (docs/backup.md). Every group's source is asked for a full
//! resync as a replica would (`PSYNC ? -1`): it forks and sends that instant's RDB, so no
//! client waits. With `one_instant`, once every source has forked, writes are paused on every
//! master (`CLIENT PAUSE <bound> WRITE`, which Redis itself lifts at the bound) just long
//! enough to read each master's replication offset, then resumed; each group's backup then
//! also keeps its replication stream from its fork up to that offset (the "tail"), so
//! RDB + tail is every group at the same instant. The RDBs go to files as they arrive (no
//! RDB is held in memory), hashed as they are written; the store's documents follow, and the
//! manifest is written last, so a directory without one is a backup that did not finish.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use sha2::{Digest, Sha256};

use super::Dashboard;
use super::admin_user;
pub(crate) use tessera_model::clock::now_ms;
use tessera_model::redis_client::{RedisClient, Value, info_fields};
use tessera_model::replica::{Replica, Start};
use tessera_model::router::GroupId;
use tessera_model::watch::ReadBounds;
use tessera_wire::backup::{
    BackupView, FORMAT_VERSION, GroupState, MANIFEST, Manifest, ManifestFile, ManifestGroup,
    STORE_FILE, StoreDocs, StoreEntry,
};

/// The largest RDB a source may send (a guard on the disk, not on memory: it is streamed).
const MAX_RDB: u64 = 1 << 40;

/// The store documents a restore may need, by their key under the cluster's prefix: exact
/// names, and prefixes ending in `/`. Never the meta (proxy secret, the control plane's
/// password) or the API tokens.
const STORE_KEYS: &[&str] = &[
    "topology",
    "group/",
    "slots/",
    "users",
    "plugin/",
    "blob/",
    "routes",
    "read-policy",
    "failover",
];

/// One group's source.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) group: GroupId,
    pub(crate) addr: String,
    pub(crate) role: &'static str,
    pub(crate) master: String,
    pub(crate) keys: Option<u64>,
}

/// What a job does.
pub(crate) struct Plan {
    pub(crate) dir: PathBuf,
    pub(crate) sources: Vec<Source>,
    /// `Some(bound)`: one instant, with a write pause of at most `bound` ms.
    pub(crate) pause_ms: Option<u64>,
}

/// A group's source after its fork.
struct Forked {
    replica: Replica,
    replid: String,
    offset: u64,
    at_ms: u64,
    /// A replica source: its master's offset when the backup asked (every write its master
    /// had answered by then is at or before it); the snapshot is completed up to it.
    floor: Option<u64>,
}

/// A file written, for the manifest.
struct Written {
    name: String,
    bytes: u64,
    sha256: String,
}

/// Runs the job: the total bytes written, or why it failed (the caller removes the
/// directory).
pub(crate) async fn run(d: &Dashboard, job: &Job, plan: &Plan) -> Result<u64, String> {
    let started_ms = job
        .view
        .lock()
        .expect("backup view lock poisoned")
        .started_unix_ms;
    let forks = join_all(plan.sources.iter().enumerate().map(|(i, s)| async move {
        let r = fork(d, s).await;
        job.update(|v| match &r {
            Ok(f) => {
                v.groups[i].state = GroupState::Forked;
                v.groups[i].offset = Some(f.offset);
            }
            Err(e) => fail_group(v, i, e),
        });
        r
    }))
    .await;
    let forks = forks.into_iter().collect::<Result<Vec<_>, _>>()?;
    let ends = match plan.pause_ms {
        Some(bound) => {
            let (ends, pause) = pause_and_mark(d, &plan.sources, bound).await?;
            job.update(|v| v.pause_ms = Some(pause));
            super::metrics::backup_pause(d, pause);
            Some(ends)
        }
        None => None,
    };
    let received = join_all(forks.into_iter().enumerate().map(|(i, f)| {
        // One instant: the instant. Else a replica's snapshot is completed up to its
        // master's offset when the backup asked, when its fork was before it.
        let end = match &ends {
            Some(e) => Some(e[i]),
            None => f.floor.filter(|&m| m > f.offset),
        };
        let bytes = job.bytes[i].clone();
        async move {
            job.update(|v| v.groups[i].state = GroupState::Receiving);
            let group = plan.sources[i].group;
            let r = receive(f, group, &plan.dir, bytes, end, job, i)
                .await
                .map(|(f, rdb, tail)| (f, rdb, tail, end.unwrap_or(0)));
            job.update(|v| match &r {
                Ok(_) => v.groups[i].state = GroupState::Done,
                Err(e) => fail_group(v, i, e),
            });
            r
        }
    }))
    .await;
    let received = received.into_iter().collect::<Result<Vec<_>, _>>()?;
    let tail_end: Vec<u64> = received.iter().map(|r| r.3).collect();
    let mut files = Vec::new();
    let mut groups = Vec::new();
    for (i, (g, rdb, tail, _)) in received.into_iter().enumerate() {
        let s = &plan.sources[i];
        groups.push(ManifestGroup {
            group: s.group,
            source: s.addr.clone(),
            source_role: s.role.into(),
            replid: g.replid,
            offset: g.offset,
            snapshot_unix_ms: g.at_ms,
            rdb: rdb.name.clone(),
            tail: tail.as_ref().map(|t| t.name.clone()),
            tail_end_offset: tail.as_ref().map(|_| tail_end[i]),
        });
        files.push(rdb);
        files.extend(tail);
    }
    files.push(store_docs(d, &plan.dir).await?);
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    let manifest = Manifest {
        format: FORMAT_VERSION,
        cluster: d.cluster.clone(),
        started_unix_ms: started_ms,
        finished_unix_ms: now_ms(),
        one_instant: plan.pause_ms.is_some(),
        pause_ms: job.view.lock().expect("backup view lock poisoned").pause_ms,
        groups,
        files: files
            .into_iter()
            .map(|f| ManifestFile {
                name: f.name,
                bytes: f.bytes,
                sha256: f.sha256,
            })
            .collect(),
    };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| e.to_string())?;
    // Through a temporary name: the manifest appears whole or not at all.
    let tmp = plan.dir.join(".manifest.tmp");
    write_file(&tmp, &text)?;
    std::fs::rename(&tmp, plan.dir.join(MANIFEST))
        .map_err(|e| format!("writing the manifest: {e}"))?;
    Ok(total + text.len() as u64)
}

fn fail_group(v: &mut tessera_wire::backup::BackupView, i: usize, e: &str) {
    v.groups[i].state = GroupState::Failed;
    v.groups[i].error = Some(e.to_owned());
}

/// Connects to the source as a replica and asks for a full resync: it forks now.
async fn fork(d: &Dashboard, s: &Source) -> Result<Forked, String> {
    let bounds = ReadBounds {
        timeout: Duration::from_secs(60),
        rdb_wait: Duration::from_secs(3600),
        max_command: 512 << 20,
    };
    // A replica may lag its master by the writes in flight to it: the master's offset now
    // is where the snapshot must reach, so that every write answered before the backup is in.
    let floor = if s.addr == s.master {
        None
    } else {
        let mut c = admin_user::connect(&s.master, &d.backend_admin, super::ops::REDIS_TIMEOUT)
            .await
            .map_err(|e| format!("group {} master {}: {e}", s.group, s.master))?;
        Some(
            master_offset(&mut c)
                .await
                .map_err(|e| format!("group {} master {}: {e}", s.group, s.master))?,
        )
    };
    let mut replica = Replica::connect_with(&s.addr, Some(&d.backend_admin), bounds)
        .await
        .map_err(|e| format!("group {}: {e}", s.group))?;
    match replica.handshake(None).await {
        Ok(Start::Full {
            replid: Some(replid),
            offset,
        }) => Ok(Forked {
            replica,
            replid,
            offset,
            at_ms: now_ms(),
            floor,
        }),
        Ok(other) => Err(format!(
            "group {}: {} answered PSYNC with {other:?}, not a full resync with an ID",
            s.group, s.addr
        )),
        Err(e) => Err(format!("group {}: {e}", s.group)),
    }
}

/// Pauses writes on every master, reads each one's replication offset, and resumes them:
/// the offsets (in the order of `sources`) and the pause in ms. Fails if the offsets could
/// not all be read within `bound` (Redis lifts the pause at the bound by itself, so past it
/// the offsets would not be one instant).
async fn pause_and_mark(
    d: &Dashboard,
    sources: &[Source],
    bound: u64,
) -> Result<(Vec<u64>, f64), String> {
    let timeout = super::ops::REDIS_TIMEOUT;
    let conns = join_all(
        sources
            .iter()
            .map(|s| admin_user::connect(&s.master, &d.backend_admin, timeout)),
    )
    .await;
    let mut conns = conns
        .into_iter()
        .zip(sources)
        .map(|(c, s)| c.map_err(|e| format!("group {} master {}: {e}", s.group, s.master)))
        .collect::<Result<Vec<_>, _>>()?;
    let ms = bound.to_string();
    let started = Instant::now();
    let marked = join_all(conns.iter_mut().map(|c| {
        let ms = ms.clone();
        async move {
            let pause = c
                .cmd(&[&b"CLIENT"[..], b"PAUSE", ms.as_bytes(), b"WRITE"])
                .await
                .map_err(|e| e.to_string())?;
            if let Value::Error(e) = pause {
                return Err(format!("CLIENT PAUSE: {e}"));
            }
            Ok::<_, String>(())
        }
    }))
    .await;
    // Every master is paused (or failed to be) from here: read the offsets.
    let offsets = if let Some(e) = marked.into_iter().find_map(Result::err) {
        Err(e)
    } else {
        let read = join_all(conns.iter_mut().map(master_offset)).await;
        read.into_iter().collect::<Result<Vec<_>, _>>()
    };
    let marked_in = started.elapsed();
    for c in &mut conns {
        let _ = c.cmd(&[&b"CLIENT"[..], b"UNPAUSE"]).await;
    }
    let pause_ms = started.elapsed().as_secs_f64() * 1000.0;
    let offsets = offsets.map_err(|e| format!("pausing writes for one instant: {e}"))?;
    if marked_in >= Duration::from_millis(bound) {
        return Err(format!(
            "the write pause took {:.0} ms to mark every group, over its bound of {bound} ms \
             (Redis lifts it at the bound): the snapshot points would not be one instant; \
             raise max_pause_ms or back up without one_instant",
            marked_in.as_secs_f64() * 1000.0
        ));
    }
    Ok((offsets, pause_ms))
}

/// A server's `master_repl_offset`.
async fn master_offset(c: &mut RedisClient) -> Result<u64, String> {
    let info = c
        .cmd(&[&b"INFO"[..], b"replication"])
        .await
        .map_err(|e| e.to_string())?;
    info.as_text()
        .map(|t| info_fields(&t))
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == "master_repl_offset")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .ok_or_else(|| "INFO replication without master_repl_offset".to_string())
}

/// Receives one group's RDB into `group-<id>.rdb`, then, for one instant, its stream up to
/// `end` into `group-<id>.tail`.
async fn receive(
    mut f: Forked,
    group: GroupId,
    dir: &Path,
    bytes: Arc<AtomicU64>,
    end: Option<u64>,
    job: &Job,
    i: usize,
) -> Result<(Forked, Written, Option<Written>), String> {
    let name = format!("group-{}.rdb", group.0);
    let mut out = FileOut::create(&dir.join(&name))?;
    let n = {
        let mut sink = |b: &[u8]| {
            bytes.fetch_add(b.len() as u64, Ordering::Relaxed);
            out.write(b)
        };
        f.replica
            .read_rdb_into(MAX_RDB, &mut sink)
            .await
            .map_err(|e| format!("group {group}: {e}"))?
    };
    let rdb = out.finish(name)?;
    debug_assert_eq!(rdb.bytes, n);
    let Some(end) = end else {
        return Ok((f, rdb, None));
    };
    job.update(|v| v.groups[i].state = GroupState::Tail);
    let name = format!("group-{}.tail", group.0);
    let mut out = FileOut::create(&dir.join(&name))?;
    // A source starts the stream after a diskless RDB only once the replica ACKs it.
    f.replica
        .ack(f.offset)
        .await
        .map_err(|e| format!("group {group}: {e}"))?;
    f.replica.start_stream();
    let mut pos = f.offset;
    while pos < end {
        let (req, n) = f
            .replica
            .next_command()
            .await
            .map_err(|e| format!("group {group}: the stream up to the instant: {e}"))?;
        out.write(req.as_bytes())
            .map_err(|e| format!("writing {name}: {e}"))?;
        pos += n;
    }
    if pos != end {
        return Err(format!(
            "group {group}: the stream passed the instant's offset {end} at {pos} (not at a \
             command boundary)"
        ));
    }
    Ok((f, rdb, Some(out.finish(name)?)))
}

/// The store's documents a restore may need, into `store.json`.
async fn store_docs(d: &Dashboard, dir: &Path) -> Result<Written, String> {
    let prefix = d.paths.cluster_prefix();
    let all = d
        .store
        .list(&prefix)
        .await
        .map_err(|e| format!("reading the store: {e}"))?;
    let mut entries = Vec::new();
    for (key, v) in all {
        let Some(rel) = key.strip_prefix(&prefix) else {
            continue;
        };
        let wanted = STORE_KEYS.iter().any(|k| match k.strip_suffix('/') {
            Some(_) => rel.starts_with(k),
            None => rel == *k,
        });
        if !wanted {
            continue;
        }
        let json = serde_json::from_slice::<serde_json::Value>(&v.value).ok();
        entries.push(StoreEntry {
            key: rel.to_owned(),
            hex: json.is_none().then(|| hex::encode(&v.value)),
            json,
        });
    }
    let docs = StoreDocs {
        cluster: d.cluster.clone(),
        entries,
    };
    let text = serde_json::to_vec_pretty(&docs).map_err(|e| e.to_string())?;
    let mut out = FileOut::create(&dir.join(STORE_FILE))?;
    out.write(&text)
        .map_err(|e| format!("writing {STORE_FILE}: {e}"))?;
    out.finish(STORE_FILE.into())
}

/// A new file (0600), hashed as it is written.
struct FileOut {
    file: std::io::BufWriter<std::fs::File>,
    sha: Sha256,
    bytes: u64,
    path: PathBuf,
}

impl FileOut {
    fn create(path: &Path) -> Result<Self, String> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| format!("creating {}: {e}", path.display()))?;
        Ok(Self {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            sha: Sha256::new(),
            bytes: 0,
            path: path.to_owned(),
        })
    }

    fn write(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.sha.update(b);
        self.bytes += b.len() as u64;
        self.file.write_all(b)
    }

    /// Flushes and syncs the file.
    fn finish(self, name: String) -> Result<Written, String> {
        let path = self.path;
        let file = self
            .file
            .into_inner()
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        file.sync_all()
            .map_err(|e| format!("syncing {}: {e}", path.display()))?;
        Ok(Written {
            name,
            bytes: self.bytes,
            sha256: hex::encode(self.sha.finalize()),
        })
    }
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), String> {
    let mut out = FileOut::create(path)?;
    out.write(data)
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    out.finish(String::new()).map(|_| ())
}

/// One job: its view, and the bytes each group has received (read when the view is shown).
pub(crate) struct Job {
    pub(crate) view: Mutex<BackupView>,
    pub(crate) bytes: Vec<Arc<AtomicU64>>,
}

impl Job {
    /// Changes the view.
    pub(crate) fn update(&self, f: impl FnOnce(&mut BackupView)) {
        f(&mut self.view.lock().expect("backup view lock poisoned"));
    }

    /// The view with the byte counts as they are now.
    pub(crate) fn snapshot(&self) -> BackupView {
        let mut v = self.view.lock().expect("backup view lock poisoned").clone();
        for (g, b) in v.groups.iter_mut().zip(&self.bytes) {
            g.bytes = b.load(Ordering::Relaxed);
        }
        v
    }
}
