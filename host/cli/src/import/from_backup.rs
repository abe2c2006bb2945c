//! `tessera admin restore --from DIR --to PROXY`: loads a whole-cluster backup's keys
//! (docs/backup.md) into a cluster through one of its proxies, so every key lands on the group
//! that owns its slot in the new cluster (any number of groups) and passes its plugins. The
//! restore's steps are run, with the backup's settings applied between them, by
//! `admin::restore`; the settings are read by `settings`.
//!
//! Nothing in the directory is trusted. Before anything is written: the manifest is read
//! (capped, its format version checked, every file name a plain name), every file it lists is
//! read (capped by `--max-file-mb`, its size and SHA-256 compared), every RDB parsed whole
//! and every tail of commands decoded whole, and the target must hold no key. Then each
//! group's RDB is written through `load` (the import's one apply path), then its tail
//! (commands as `import sync` forwards them). If a write fails midway, every key the backup
//! names is deleted again, so the target is left as empty as it was found.

use std::collections::{BTreeSet, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::BytesMut;
use sha2::{Digest, Sha256};

use super::apply;
use super::load::{self, LoadCounts};
use super::progress::line;
use super::rdb::Parser;
use super::sync::{StreamCommand, classify};
use super::target::{OnError, Target};
use super::value::Item;
use tessera_model::command::CommandTable;
use tessera_model::redis_client::{RedisClient, Value};
use tessera_resp::{Limits, Request, RequestDecoder};
use tessera_wire::backup::{
    FORMAT_VERSION, MANIFEST, Manifest, STORE_FILE, StoreDocs, check_file_name,
};

/// The largest manifest read.
const MAX_MANIFEST: u64 = 16 << 20;

/// `tessera admin restore` arguments.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// The backup directory (`manifest.json` and the files it lists).
    #[arg(long)]
    pub from: PathBuf,
    /// A proxy of the cluster to restore into, HOST:PORT. The cluster must hold no key.
    #[arg(long)]
    pub to: String,
    /// Password for the proxy.
    #[arg(long, env = "TESSERA_PORT_TO_PASSWORD", hide_env_values = true)]
    pub to_password: Option<String>,
    /// The largest file of the backup read, in MiB: every file is held in memory while it is
    /// checked and loaded.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_file_mb: u64,
    /// Write the keys only: leave the backup's users, plugins, prefix routes, read policy and
    /// failover settings out (no dashboard is needed then).
    #[arg(long, conflicts_with = "replace_settings")]
    pub no_settings: bool,
    /// Replace the target's users, plugins and routes of the same names as the backup's, and
    /// its read policy and failover settings, instead of refusing the restore.
    #[arg(long)]
    pub replace_settings: bool,
}

/// A backup checked whole.
pub struct Checked {
    pub manifest: Manifest,
    /// Per group of the manifest: its RDB, its tail's commands, keys in the RDB.
    groups: Vec<(Vec<u8>, Vec<Request>, u64)>,
    pub store: StoreDocs,
    bytes: u64,
}

/// Reads and checks the whole backup (nothing is written), and prints what it holds.
///
/// # Errors
/// Why the directory is not a backup that can be restored.
pub fn check_backup(args: &RestoreArgs) -> anyhow::Result<Checked> {
    let max = args.max_file_mb << 20;
    let checked = check(&args.from, max).with_context(|| not_a_backup(args))?;
    let keys_in_backup: u64 = checked.groups.iter().map(|g| g.2).sum();
    println!(
        "{}",
        line(
            "restore checked",
            &[
                ("dir", args.from.display().to_string()),
                ("groups", checked.groups.len().to_string()),
                ("keys", keys_in_backup.to_string()),
                ("bytes", checked.bytes.to_string()),
                ("one_instant", checked.manifest.one_instant.to_string()),
                ("store_documents", checked.store.entries.len().to_string()),
            ]
        )
    );
    Ok(checked)
}

/// The context of every refusal of the backup itself.
pub fn not_a_backup(args: &RestoreArgs) -> String {
    format!(
        "{} is not a backup that can be restored; nothing was written",
        args.from.display()
    )
}

/// Refuses a target that holds a key: a restore writes only into an empty cluster, so that a
/// failure can be undone.
///
/// # Errors
/// The proxy is unreachable, refuses `DBSIZE`, or the cluster holds keys.
pub async fn ensure_empty(args: &RestoreArgs) -> anyhow::Result<()> {
    let held = target_keys(&args.to, args.to_password.as_deref()).await?;
    if held > 0 {
        bail!(
            "the cluster behind {} holds {held} keys: a restore writes only into an empty \
             cluster (so a failure can be undone); nothing was written",
            args.to
        );
    }
    Ok(())
}

/// Writes every group's RDB and tail through the proxy, a line per group: the summary line.
/// `started` is when the restore began (for its rate).
///
/// # Errors
/// A write that failed: every key the backup names is deleted again first, and the message
/// says whether that worked.
pub async fn write(
    args: &RestoreArgs,
    checked: &Checked,
    started: Instant,
) -> anyhow::Result<String> {
    let mut target = Target::connect(&args.to, args.to_password.as_deref()).await?;
    let counts = Arc::new(LoadCounts::default());
    let mut tail_commands = 0u64;
    let reporter = tokio::spawn(super::restore::report(counts.clone(), target.stats()));
    for (i, (rdb, tail, _)) in checked.groups.iter().enumerate() {
        let g = &checked.manifest.groups[i];
        let written = async {
            // The servers' databases: each client database n is their n + 1 (but 0), and
            // their database 1 is Tessera's own.
            load::load(rdb, &mut target, &counts, load::Databases::Backend).await?;
            let mut db = 0;
            for req in tail {
                if let StreamCommand::Write | StreamCommand::OtherDb = classify(req, &mut db)? {
                    let Some(client) = load::Databases::Backend.client(db) else {
                        continue;
                    };
                    target.use_db(client).await?;
                    let name = req.arg(0).to_ascii_uppercase();
                    target
                        .send(req.as_bytes().clone(), OnError::Fail, &name, None)
                        .await?;
                    tail_commands += 1;
                }
            }
            target.use_db(0).await?;
            target.flush().await?;
            anyhow::Ok(())
        }
        .await;
        if let Err(e) = written {
            reporter.abort();
            let undo = undo(args, checked).await;
            return Err(e.context(format!(
                "restoring group {} of the backup failed; {undo}",
                g.group
            )));
        }
        println!(
            "{}",
            line(
                "restore group",
                &[
                    ("group", g.group.to_string()),
                    (
                        "keys_written",
                        counts.keys.load(Ordering::Relaxed).to_string()
                    ),
                    ("tail_commands", tail_commands.to_string()),
                ]
            )
        );
    }
    reporter.abort();
    let secs = started.elapsed().as_secs_f64();
    let written = counts.keys.load(Ordering::Relaxed);
    Ok(line(
        "restore done",
        &[
            ("keys", written.to_string()),
            (
                "expired_skipped",
                counts.expired.load(Ordering::Relaxed).to_string(),
            ),
            (
                "functions",
                counts.functions.load(Ordering::Relaxed).to_string(),
            ),
            ("tail_commands", tail_commands.to_string()),
            (
                "bytes_sent",
                target.stats().bytes.load(Ordering::Relaxed).to_string(),
            ),
            ("seconds", format!("{secs:.2}")),
            (
                "keys_per_s",
                format!("{:.0}", written as f64 / secs.max(1e-9)),
            ),
        ],
    ))
}

/// Reads and checks the whole backup.
fn check(dir: &Path, max: u64) -> anyhow::Result<Checked> {
    let text = read_capped(&dir.join(MANIFEST), MAX_MANIFEST)?;
    let manifest: Manifest =
        serde_json::from_slice(&text).with_context(|| format!("{MANIFEST} is not a manifest"))?;
    if manifest.format != FORMAT_VERSION {
        bail!(
            "{MANIFEST} has format {}; this restore reads format {FORMAT_VERSION}",
            manifest.format
        );
    }
    if manifest.groups.is_empty() {
        bail!("{MANIFEST} lists no group");
    }
    let mut names = HashSet::new();
    for f in &manifest.files {
        check_file_name(&f.name).map_err(anyhow::Error::msg)?;
        if f.name == MANIFEST || !names.insert(f.name.as_str()) {
            bail!("{MANIFEST} lists {:?} twice or as itself", f.name);
        }
    }
    let mut total = 0;
    let mut read = |name: &str| -> anyhow::Result<Vec<u8>> {
        let f = manifest
            .files
            .iter()
            .find(|f| f.name == name)
            .with_context(|| format!("{MANIFEST} names {name:?} but does not list its checksum"))?;
        if f.bytes > max {
            bail!(
                "{name} is {} bytes, over the limit of {max} (--max-file-mb)",
                f.bytes
            );
        }
        let data = read_capped(&dir.join(name), f.bytes)?;
        if data.len() as u64 != f.bytes {
            bail!(
                "{name} is {} bytes, the manifest says {}: truncated or changed",
                data.len(),
                f.bytes
            );
        }
        let sum = hex::encode(Sha256::digest(&data));
        if !sum.eq_ignore_ascii_case(&f.sha256) {
            bail!(
                "{name}: its SHA-256 is {sum}, the manifest says {}: the file is corrupted \
                 or changed",
                f.sha256
            );
        }
        total += data.len() as u64;
        Ok(data)
    };
    let store: StoreDocs = serde_json::from_slice(&read(STORE_FILE)?)
        .with_context(|| format!("{STORE_FILE} is not the store's documents"))?;
    let mut groups = Vec::new();
    let mut seen = BTreeSet::new();
    for g in &manifest.groups {
        if !seen.insert(g.group) {
            bail!("{MANIFEST} lists group {} twice", g.group);
        }
        check_file_name(&g.rdb).map_err(anyhow::Error::msg)?;
        let rdb = read(&g.rdb)?;
        let keys =
            load::validate(&rdb).with_context(|| format!("{} (group {})", g.rdb, g.group))?;
        let tail = match &g.tail {
            Some(name) => {
                check_file_name(name).map_err(anyhow::Error::msg)?;
                decode_all(&read(name)?).with_context(|| format!("{name} (group {})", g.group))?
            }
            None => Vec::new(),
        };
        groups.push((rdb, tail, keys));
    }
    Ok(Checked {
        manifest,
        groups,
        store,
        bytes: total,
    })
}

/// At most `cap` bytes of `path`, and one more if there are (so a caller sees it is longer).
fn read_capped(path: &Path, cap: u64) -> anyhow::Result<Vec<u8>> {
    let file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut data = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut data)
        .with_context(|| format!("reading {}", path.display()))?;
    if data.len() as u64 > cap {
        bail!("{} is larger than {cap} bytes", path.display());
    }
    Ok(data)
}

/// Every command of a tail; an incomplete or malformed one is an error.
fn decode_all(data: &[u8]) -> anyhow::Result<Vec<Request>> {
    let mut buf = BytesMut::from(data);
    let mut decoder = RequestDecoder::new(Limits::default());
    let mut out = Vec::new();
    while !buf.is_empty() {
        match decoder.decode(&mut buf) {
            Ok(Some(req)) => out.push(req),
            Ok(None) => bail!("it ends inside a command: truncated"),
            Err(e) => bail!("command {} is malformed: {e}", out.len() + 1),
        }
    }
    Ok(out)
}

/// Keys in the cluster behind the proxy (`DBSIZE`, which the proxy sums over its groups).
async fn target_keys(addr: &str, password: Option<&str>) -> anyhow::Result<i64> {
    let mut c = RedisClient::connect(addr, Duration::from_secs(10))
        .await
        .with_context(|| format!("connecting to the proxy at {addr}"))?;
    if let Some(p) = password
        && let Value::Error(e) = c.cmd(&[&b"AUTH"[..], p.as_bytes()]).await?
    {
        bail!("the proxy at {addr} refused AUTH: {e}");
    }
    let in_db0 = match c.cmd(&[&b"DBSIZE"[..]]).await? {
        Value::Int(n) => n,
        other => bail!(
            "cannot check that the cluster behind {addr} is empty (DBSIZE answered {other:?}; \
             the restore needs a user that may run it); nothing was written"
        ),
    };
    // The other databases' keys, as `INFO keyspace` counts them (`db3:keys=5,…`).
    let info = c.cmd(&[&b"INFO"[..], b"keyspace"]).await?;
    let Some(text) = info.as_text() else {
        bail!(
            "cannot check that the cluster behind {addr} is empty (INFO keyspace answered \
             {info:?}); nothing was written"
        );
    };
    let others: u64 = tessera_model::databases::info_keyspace(&text)
        .into_iter()
        .filter(|&(db, _)| db != 0)
        .map(|(_, keys)| keys)
        .sum();
    Ok(in_db0.saturating_add(i64::try_from(others).unwrap_or(i64::MAX)))
}

/// Deletes every key the backup names (its RDBs' and its tails' keys) after a failed write:
/// what to tell the user about it.
pub async fn undo(args: &RestoreArgs, checked: &Checked) -> String {
    // (client database, key)
    let mut keys: BTreeSet<(u64, Vec<u8>)> = BTreeSet::new();
    let client = |db| load::Databases::Backend.client(db);
    for (rdb, tail, _) in &checked.groups {
        if let Ok(mut p) = Parser::new(rdb) {
            while let Ok(Some(item)) = p.next_item() {
                if let Item::Entry(e) = item
                    && let Some(db) = client(e.db)
                {
                    keys.insert((db, e.key));
                }
            }
        }
        let table = CommandTable::get();
        let mut db = 0;
        for req in tail {
            let Ok(StreamCommand::Write | StreamCommand::OtherDb) = classify(req, &mut db) else {
                continue;
            };
            if let (Ok(cmd), Some(db)) = (table.lookup(req), client(db)) {
                for i in cmd.key_indices(req) {
                    if let Some(k) = req.get(i as usize) {
                        keys.insert((db, k.to_vec()));
                    }
                }
            }
        }
    }
    let deleted = async {
        let mut target = Target::connect(&args.to, args.to_password.as_deref()).await?;
        for (db, k) in &keys {
            target.use_db(*db).await?;
            let cmd = apply::encode(&[b"DEL", k]);
            // A key the proxy refuses to delete (outside the user's rights) was refused when
            // written too: counted, not fatal.
            target
                .send(cmd, OnError::Count, b"DEL (undoing the restore)", None)
                .await?;
        }
        target.flush().await?;
        anyhow::Ok(())
    }
    .await;
    match deleted {
        Ok(()) => format!(
            "the {} keys the backup names were deleted again: the cluster is as empty as it was",
            keys.len()
        ),
        Err(e) => format!(
            "deleting the {} keys the backup names failed too ({e:#}): the cluster may hold \
             part of the backup; empty it (FLUSHALL) before restoring again",
            keys.len()
        ),
    }
}
