//! `tessera import sync`: follows a Redis server as its replica and writes everything through a
//! proxy. A full resync loads the RDB (checked whole first, see `load`); then the command
//! stream is applied: writes are forwarded as they came, each into its database (a SELECT of
//! the proxy's connection when it changes), PING, REPLCONF and MULTI/EXEC are skipped and
//! counted, and commands the proxy refuses are counted and logged. Once a second: `REPLCONF ACK`, the state file (replid and
//! the offset whose commands all have their replies), and a progress line. Ctrl-C or SIGTERM
//! stops it after the commands sent have their replies, so a restart resumes exactly; after a
//! crash it resumes from the last saved offset (at most a second of commands applied twice).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::load::{self, LoadCounts};
use super::progress::{Rate, line};
use super::state::SyncState;
use super::target::{OnError, Target, TargetStats};
use tessera_model::redis_client::{Credential, RedisClient, Value, info_fields};
use tessera_model::replica::{Replica, Start};
use tessera_model::watch::ReadBounds;
use tessera_resp::Request;

/// `tessera import sync` arguments.
#[derive(clap::Args, Debug)]
pub struct SyncArgs {
    /// The Redis server to replicate, HOST:PORT (no TLS).
    #[arg(long)]
    pub from: String,
    /// The Tessera proxy to write through, HOST:PORT.
    #[arg(long)]
    pub to: String,
    /// The source's password (`AUTH password`, the default user).
    #[arg(long, env = "TESSERA_PORT_FROM_PASSWORD")]
    pub from_password: Option<String>,
    /// Password for the proxy.
    #[arg(long, env = "TESSERA_PORT_TO_PASSWORD")]
    pub to_password: Option<String>,
    /// Where to keep the resume point (replid, offset); a restart continues from it.
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// The largest RDB the source may send, in MiB. A full resync holds the whole RDB in
    /// memory while it is checked and loaded; past this the sync stops with an error rather
    /// than let a wrongly pointed or hostile source exhaust this machine's memory.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_rdb_mb: u64,
    /// The largest command of the source's stream, in MiB. Each is held whole before it is
    /// forwarded; past this the sync stops with an error (a write of one value Redis accepts,
    /// up to its 512 MiB proto-max-bulk-len, fits the default).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_command_mb: u64,
    /// Seconds the source may send nothing, or nothing but keepalive newlines, before the
    /// sync stops (Redis's repl-timeout; a source pings its replicas every 10 s).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout_s: u64,
    /// Seconds the source may take to save its RDB after announcing a full resync (it sends
    /// keepalive newlines meanwhile).
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub rdb_wait_s: u64,
}

/// Counters of the command stream.
#[derive(Debug, Default)]
struct StreamCounts {
    /// Commands forwarded.
    commands: u64,
    /// PING, REPLCONF, MULTI, EXEC.
    control: u64,
}

/// The stream's position.
struct Position {
    replid: Option<String>,
    /// Keys written by this run's full load (0 after a continue).
    loaded: u64,
    /// Bytes of the stream read (the source's offset of the last byte read).
    read: u64,
    /// The database in force at `read`.
    db: u64,
    /// The database in force at the applied offset (what a restart resumes in), and the
    /// SELECTs read since, each with the offset after it: one per write in flight at most
    /// (SELECTs with no write between them are one).
    db_applied: u64,
    selects: std::collections::VecDeque<(u64, u64)>,
    /// The offset after the last write forwarded.
    last_write: u64,
}

impl Position {
    fn new(replid: Option<String>, loaded: u64, read: u64, db: u64) -> Self {
        Self {
            replid,
            loaded,
            read,
            db,
            db_applied: db,
            selects: Default::default(),
            last_write: read,
        }
    }

    /// The stream switched to `db` (a SELECT read up to `read`).
    fn selected(&mut self) {
        match self.selects.back_mut() {
            Some(last) if last.0 > self.last_write => *last = (self.read, self.db),
            _ => self.selects.push_back((self.read, self.db)),
        }
    }

    /// The database in force at `applied`.
    fn db_at(&mut self, applied: u64) -> u64 {
        while let Some(&(at, db)) = self.selects.front()
            && at <= applied
        {
            self.db_applied = db;
            self.selects.pop_front();
        }
        self.db_applied
    }
}

/// Runs until Ctrl-C or SIGTERM, or until the source or the proxy fails.
///
/// # Errors
/// A lost source or proxy, a bad RDB, a command the proxy refused during the full load.
pub async fn run(args: SyncArgs) -> anyhow::Result<()> {
    let saved = match &args.state {
        Some(p) => SyncState::load(p).with_context(|| format!("reading {}", p.display()))?,
        None => None,
    };
    let mut replica = Replica::connect(
        &args.from,
        args.from_password.as_deref(),
        read_bounds(&args),
    )
    .await?;
    let start = replica
        .handshake(saved.as_ref().map(|s| (s.replid.as_str(), s.offset)))
        .await?;
    let mut target = Target::connect(&args.to, args.to_password.as_deref()).await?;
    let pos = match (start, saved) {
        (Start::Continue { replid }, Some(s)) => {
            let replid = replid.unwrap_or(s.replid);
            println!(
                "{}",
                line(
                    "sync",
                    &[
                        ("psync", "continue".into()),
                        ("replid", replid.clone()),
                        ("offset", s.offset.to_string())
                    ]
                )
            );
            Position::new(Some(replid), 0, s.offset, s.db)
        }
        (Start::Continue { .. }, None) => {
            anyhow::bail!("the source continued a stream this sync never asked for")
        }
        (Start::Full { replid, offset }, _) => {
            println!(
                "{}",
                line(
                    "sync",
                    &[
                        ("psync", "fullresync".into()),
                        ("replid", replid.clone().unwrap_or_default()),
                        ("offset", offset.to_string())
                    ]
                )
            );
            let (t, loaded) = full_load(&mut replica, target, offset, max_rdb_bytes(&args)).await?;
            target = t;
            Position::new(replid, loaded, offset, 0)
        }
    };
    follow(args, replica, target, pos).await
}

/// `--max-rdb-mb` in bytes.
fn max_rdb_bytes(args: &SyncArgs) -> usize {
    usize::try_from(args.max_rdb_mb << 20).unwrap_or(usize::MAX)
}

/// The source connection's bounds from the flags.
fn read_bounds(args: &SyncArgs) -> ReadBounds {
    ReadBounds {
        timeout: Duration::from_secs(args.timeout_s),
        rdb_wait: Duration::from_secs(args.rdb_wait_s),
        max_command: usize::try_from(args.max_command_mb << 20).unwrap_or(usize::MAX),
    }
}

/// Reads the RDB and loads it, sending ACKs meanwhile so the source keeps this replica.
async fn full_load(
    replica: &mut Replica,
    mut target: Target,
    offset: u64,
    max_rdb: usize,
) -> anyhow::Result<(Target, u64)> {
    let rdb = replica.read_rdb(max_rdb).await?;
    replica.ack(offset).await?;
    let counts = Arc::new(LoadCounts::default());
    let stats = target.stats();
    let task_counts = counts.clone();
    let mut loading = tokio::spawn(async move {
        let r = load::load(&rdb, &mut target, &task_counts, load::Databases::Every).await;
        (target, r)
    });
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut rate = Rate::new(0);
    let started = Instant::now();
    loop {
        tokio::select! {
            done = &mut loading => {
                let (target, r) = done.context("the load task")?;
                r?;
                let keys = counts.keys.load(Ordering::Relaxed);
                println!("{}", line("sync loaded", &[
                    ("keys", keys.to_string()),
                    ("expired_skipped", counts.expired.load(Ordering::Relaxed).to_string()),
                    ("functions", counts.functions.load(Ordering::Relaxed).to_string()),
                    ("seconds", format!("{:.2}", started.elapsed().as_secs_f64())),
                ]));
                return Ok((target, keys));
            }
            _ = tick.tick() => {
                replica.ack(offset).await?;
                let keys = counts.keys.load(Ordering::Relaxed);
                println!("{}", line("sync load", &[
                    ("keys", keys.to_string()),
                    ("of", counts.keys_total.load(Ordering::Relaxed).to_string()),
                    ("bytes", stats.bytes.load(Ordering::Relaxed).to_string()),
                    ("keys_per_s", rate.update(keys).to_string()),
                ]));
            }
        }
    }
}

/// Applies the command stream until stopped.
async fn follow(
    args: SyncArgs,
    mut replica: Replica,
    mut target: Target,
    mut pos: Position,
) -> anyhow::Result<()> {
    let stats = target.stats();
    // Nothing of the stream is in flight yet: everything up to `read` is applied.
    stats.applied_offset.store(pos.read, Ordering::SeqCst);
    let mut counts = StreamCounts::default();
    replica.start_stream();
    let mut monitor = Monitor::new(&args.from, args.from_password.clone());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut stop = std::pin::pin!(stopped());
    loop {
        tokio::select! {
            cmd = replica.next_command() => {
                let (req, n) = cmd?;
                pos.read += n;
                let applied = applied(&stats, &pos);
                if apply_command(&req, &mut pos, &mut counts, &mut target).await? {
                    replica.ack(applied).await?;
                }
            }
            _ = tick.tick() => {
                let applied = applied(&stats, &pos);
                replica.ack(applied).await?;
                save(&args, &mut pos, applied)?;
                let source = monitor.offset().await;
                println!("{}", monitor.report(&stats, &counts, &pos, applied, source));
            }
            _ = &mut stop => break,
        }
    }
    target.flush().await?;
    let applied = applied(&stats, &pos);
    save(&args, &mut pos, applied)?;
    println!(
        "{}",
        line(
            "sync stopped",
            &[
                ("offset", applied.to_string()),
                ("commands", counts.commands.to_string())
            ]
        )
    );
    Ok(())
}

/// The offset whose commands all have their replies.
fn applied(stats: &TargetStats, pos: &Position) -> u64 {
    if stats.in_flight.load(Ordering::SeqCst) == 0 {
        pos.read
    } else {
        stats.applied_offset.load(Ordering::SeqCst)
    }
}

fn save(args: &SyncArgs, pos: &mut Position, applied: u64) -> anyhow::Result<()> {
    // The database in force at `applied`, where a restart resumes: commands after it may be
    // in flight, and a SELECT read among them must not move the resume point's database.
    let db = pos.db_at(applied);
    let (Some(path), Some(replid)) = (&args.state, &pos.replid) else {
        return Ok(());
    };
    let state = SyncState {
        replid: replid.clone(),
        offset: applied,
        db,
    };
    state
        .save(path)
        .with_context(|| format!("saving {}", path.display()))
}

/// What a command of a replication stream is to an importer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamCommand {
    /// PING, MULTI, EXEC, REPLCONF (`getack`: the source asks for an ACK): not forwarded.
    Control { getack: bool },
    /// SELECT: the database changed.
    Select,
    /// A write to a database other than 0 (`sync` forwards it into that database; a
    /// backup's tail skips it: a cluster's data is its database 0).
    OtherDb,
    /// A write of db 0: forwarded as it came.
    Write,
}

/// Classifies `req`, tracking the database in `db` (the one rule for `sync`'s stream and a
/// backup's tail).
///
/// # Errors
/// A SELECT without a database number.
pub(crate) fn classify(req: &Request, db: &mut u64) -> anyhow::Result<StreamCommand> {
    let name = req.arg(0).to_ascii_uppercase();
    Ok(match &name[..] {
        b"PING" | b"MULTI" | b"EXEC" => StreamCommand::Control { getack: false },
        b"REPLCONF" => StreamCommand::Control {
            getack: req
                .get(1)
                .is_some_and(|a| a.eq_ignore_ascii_case(b"GETACK")),
        },
        b"SELECT" => {
            *db = std::str::from_utf8(req.get(1).unwrap_or_default())
                .ok()
                .and_then(|d| d.parse().ok())
                .context("SELECT without a database number in the stream")?;
            StreamCommand::Select
        }
        _ if *db != 0 => StreamCommand::OtherDb,
        _ => StreamCommand::Write,
    })
}

/// Handles one command of the stream; `true` if the source asked for an ACK.
async fn apply_command(
    req: &Request,
    pos: &mut Position,
    counts: &mut StreamCounts,
    target: &mut Target,
) -> anyhow::Result<bool> {
    match classify(req, &mut pos.db)? {
        StreamCommand::Control { getack } => {
            counts.control += 1;
            return Ok(getack);
        }
        StreamCommand::Select => pos.selected(),
        // Every database's writes, in the same database of the proxy (a SELECT the target
        // refuses stops the sync with its reason).
        StreamCommand::OtherDb | StreamCommand::Write => {
            target.use_db(pos.db).await?;
            pos.last_write = pos.read;
            counts.commands += 1;
            let name = req.arg(0).to_ascii_uppercase();
            target
                .send(
                    req.as_bytes().clone(),
                    OnError::Count,
                    &name,
                    Some(pos.read),
                )
                .await?;
        }
    }
    Ok(false)
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stopped() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// A second connection to the source for its current offset (lag), and the progress line.
struct Monitor {
    addr: String,
    password: Option<String>,
    conn: Option<RedisClient>,
    rate: Rate,
    caught_up_at: Instant,
}

impl Monitor {
    fn new(addr: &str, password: Option<String>) -> Self {
        Self {
            addr: addr.into(),
            password,
            conn: None,
            rate: Rate::new(0),
            caught_up_at: Instant::now(),
        }
    }

    /// The source's `master_repl_offset`, or `None` if it cannot be asked now.
    async fn offset(&mut self) -> Option<u64> {
        if self.conn.is_none() {
            let cred = self.password.as_ref().map(|p| Credential {
                user: "default".into(),
                password: p.clone(),
            });
            self.conn = RedisClient::connect_as(&self.addr, Duration::from_secs(2), cred.as_ref())
                .await
                .ok();
        }
        let reply = self
            .conn
            .as_mut()?
            .cmd(&[&b"INFO"[..], b"replication"])
            .await;
        let Ok(Value::Bulk(text)) = reply else {
            self.conn = None;
            return None;
        };
        info_fields(&String::from_utf8_lossy(&text))
            .into_iter()
            .find(|(k, _)| k == "master_repl_offset")
            .and_then(|(_, v)| v.parse().ok())
    }

    fn report(
        &mut self,
        stats: &TargetStats,
        counts: &StreamCounts,
        pos: &Position,
        applied: u64,
        source: Option<u64>,
    ) -> String {
        let lag = source.map(|s| s.saturating_sub(applied));
        if lag == Some(0) {
            self.caught_up_at = Instant::now();
        }
        let done = stats.replies.load(Ordering::Relaxed);
        line(
            "sync",
            &[
                ("keys_loaded", pos.loaded.to_string()),
                ("commands", counts.commands.to_string()),
                ("bytes", stats.bytes.load(Ordering::Relaxed).to_string()),
                ("commands_per_s", self.rate.update(done).to_string()),
                ("offset", applied.to_string()),
                ("lag_bytes", lag.map_or("?".into(), |l| l.to_string())),
                (
                    "lag_s",
                    format!("{:.1}", self.caught_up_at.elapsed().as_secs_f64()),
                ),
                ("refused", stats.refused.load(Ordering::Relaxed).to_string()),
            ],
        )
    }
}
