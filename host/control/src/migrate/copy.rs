//! One source group's copy (migration v3, docs/migration.md): while the source keeps serving
//! its moving slots, their keys are copied to their targets and the writes made meanwhile are
//! copied again, in rounds that shrink, until the driver hands a slot off and asks for its
//! final copy, made while every proxy holds the slot.
//!
//! - **Capture.** A replica connection to the source (`tessera_model::replica`) follows its
//!   replication stream from the moment the copy starts (`PSYNC` from the source's current
//!   offset, or past a full resync's RDB); `capture::Capture` keeps, per slot, the keys the
//!   stream says were written.
//! - **Round 0** of a slot: one SCAN of the source, its keys copied as they are found.
//! - **Round k**: the keys written during round k-1, copied again — a big key's written
//!   elements only (its fields or members, read on the source and set on the target), so a
//!   big key written all the time converges too. A slot whose round left at most
//!   `converge_keys` keys and elements, no big key to copy whole among them, is *converged*:
//!   its final copy fits in a handoff.
//! - **Final copy** (`Command::Final`): every proxy holds the slot, so nothing writes to it on
//!   the source any more; the capture is read up to the source's replication offset, and
//!   what is left is copied within `final_budget`, else the handoff is given up (the slot
//!   goes on copying).
//!
//! Every client database's keys of the slots are copied (Tessera's internal database is
//! not a client's): round 0 scans each database that holds keys, the capture names each
//! written key with its database (`capture::DbKey`), and each request is sent in its key's
//! database (a connection's `SELECT` is tracked, `Conn`).
//!
//! A key is copied whole: `DUMP` on the source (one read-only script call per batch,
//! `COPY_SCRIPT`, which also reads the key's absolute expire time), `RESTORE … REPLACE ABSTTL`
//! on the target; a key gone from the source is deleted from the target. A big key is copied
//! in chunks into a temp key in the target's internal database and put in place atomically.
//! A copy is exact for every key not written after it was read, and every key written after
//! it was read is in the next round: so once the final copy is done, the target holds the
//! slot as the source does. Nothing on the target is seen by a client before the handoff
//! routes the slot there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tessera_model::migration::{INTERNAL_DB, PUBLISH_BIG_KEY_SCRIPT, copy_request, temp_key};
use tessera_model::redis_client::{Credential, RedisClient, Value, info_fields};
use tessera_model::replica::{Replica, Start};
use tessera_model::watch::ReadBounds;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::capture::{Capture, DbKey, Elements};
use super::chunks::Chunks;
use super::progress::Progress;
use super::reply::{MoverError, databases_with_keys, expect_ok, refused, scan_page};
use super::throttle::Throttle;

/// How a copy goes.
#[derive(Debug, Clone)]
pub struct CopyConfig {
    /// SCAN's COUNT in round 0.
    pub scan_count: usize,
    /// Keys per `COPY_SCRIPT` call on the source and per pipeline of RESTOREs.
    pub batch: usize,
    /// Elements (or KiB of a string) per step of a big key.
    pub chunk: usize,
    pub timeout: Duration,
    /// A slot whose round left at most this many written keys (none big) is converged.
    pub converge_keys: usize,
    /// The most bytes of written keys the capture keeps for one source.
    pub capture_limit: usize,
    /// The longest a final copy may take, from the request to the last RESTORE's reply.
    pub final_budget: Duration,
    /// Rounds that find nothing written wait this long before looking again.
    pub idle_round: Duration,
}

impl Default for CopyConfig {
    fn default() -> Self {
        Self {
            scan_count: 400,
            batch: 200,
            chunk: 500,
            timeout: Duration::from_secs(10),
            converge_keys: 256,
            capture_limit: 256 << 20,
            final_budget: Duration::from_millis(40),
            idle_round: Duration::from_millis(20),
        }
    }
}

/// What the driver asks of a copy.
#[derive(Debug)]
pub enum Command {
    /// Start copying these slots (slot → the target's master), from round 0.
    Add(BTreeMap<u16, String>),
    /// Every proxy holds these slots: copy what is left of them and report.
    Final(BTreeSet<u16>),
    /// Report these slots' next round even if nothing changes (they must converge again).
    Again(BTreeSet<u16>),
    /// Stop copying these slots (aborted, or lost and to start over); answered once nothing
    /// of theirs is being written to a target any more.
    Forget(BTreeSet<u16>, tokio::sync::oneshot::Sender<()>),
}

/// What a copy tells the driver.
#[derive(Debug)]
pub enum Report {
    /// A slot's round ended: how many written keys it left for the next, and whether that
    /// little is enough for a handoff.
    Round {
        slot: u16,
        round: u32,
        left: usize,
        converged: bool,
    },
    /// These slots' capture was lost (a flush, the bound of written keys, the replication
    /// stream cut, a command refused): what their targets hold can no longer be trusted.
    /// They are forgotten.
    Lost { slots: BTreeSet<u16>, why: String },
    /// The final copy of these slots: done (how long it took) or not, and why.
    Final {
        slots: BTreeSet<u16>,
        result: Result<Duration, String>,
    },
}

/// A running copy of one source's slots.
pub struct CopyHandle {
    commands: mpsc::UnboundedSender<Command>,
}

impl CopyHandle {
    /// Sends `command`; false when the copy has stopped (its slots were reported lost).
    pub fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }
}

/// Starts the copy of `source`'s slots (none yet: `Command::Add` gives them). Reports go to
/// `reports`, tagged with `source`. The copy stops when its handle is dropped, or when it
/// fails (its slots reported lost).
pub fn spawn(
    source: String,
    credential: Option<Credential>,
    config: CopyConfig,
    progress: Arc<Progress>,
    throttle: Arc<Throttle>,
    reports: mpsc::UnboundedSender<(String, Report)>,
) -> CopyHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let copy = Copy {
        source,
        credential,
        config,
        progress,
        throttle,
        reports,
        slots: BTreeMap::new(),
        scan: None,
        capture: None,
        targets: BTreeMap::new(),
        unsettled: BTreeMap::new(),
        src: None,
        paced_until: None,
        big_done: mpsc::unbounded_channel(),
    };
    tokio::spawn(copy.run(rx));
    CopyHandle { commands: tx }
}

/// A slot being copied.
struct SlotCopy {
    target: String,
    round: u32,
    /// Round 0 (the SCAN) is over.
    scanned: bool,
    /// Keys of this round still to copy.
    pending: BTreeSet<DbKey>,
    /// Keys found too big for one RESTORE (copied in chunks), with their type: a round that
    /// leaves one of them to copy whole is not converged.
    big: rustc_hash::FxHashMap<DbKey, Bytes>,
    /// Big keys of this round whose written elements (only) are to be copied.
    pending_elements: BTreeMap<DbKey, Elements>,
    /// Its big keys being copied now, on their own tasks: its round cannot end before.
    big_copying: usize,
    /// Those tasks, stopped if the slot is forgotten.
    big_tasks: Vec<BigTask>,
    /// Whether the last round reported was converged (rounds that change nothing are not
    /// reported again).
    converged: bool,
}

/// A big key's chunked copy running on its own task.
struct BigTask {
    handle: tokio::task::JoinHandle<()>,
    target: String,
    /// Its connection to the target (`CLIENT ID`), once made: killed when the copy is
    /// stopped, so that no write of it already sent runs after.
    client: Arc<std::sync::OnceLock<i64>>,
}

impl Drop for BigTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}

/// Round 0's SCAN, one page a step: of each client database that holds keys, in turn.
struct Scan {
    cursor: Vec<u8>,
    slots: BTreeSet<u16>,
    /// The databases to scan, read from the source at the first page (after the capture
    /// started, so a database that gets its first key later is in the capture).
    dbs: Option<Vec<u32>>,
    /// The database being scanned: `dbs[at]`.
    at: usize,
}

impl Scan {
    fn new(slots: BTreeSet<u16>) -> Self {
        Self {
            cursor: b"0".to_vec(),
            slots,
            dbs: None,
            at: 0,
        }
    }

    /// Its first page is read: slots joining now need a SCAN of their own.
    fn started(&self) -> bool {
        self.at > 0 || self.cursor != b"0"
    }
}

/// The capture of the source's stream, fed by its own task.
struct Following {
    capture: Arc<Mutex<Capture>>,
    /// Set by the capture's task when the stream is lost.
    broken: Arc<std::sync::atomic::AtomicBool>,
    /// The source's replication offset once the capture was set up: until the capture has
    /// read that far, the stream is not flowing yet (a diskless source starts it a while
    /// after its RDB), so a round that saw no write proves nothing and no slot converges.
    live_at: u64,
    task: tokio::task::JoinHandle<()>,
}

impl Following {
    /// The capture has read every write made before it was set up.
    fn live(&self) -> bool {
        self.capture.lock().expect("capture lock poisoned").offset() >= self.live_at
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Copy {
    source: String,
    credential: Option<Credential>,
    config: CopyConfig,
    progress: Arc<Progress>,
    throttle: Arc<Throttle>,
    reports: mpsc::UnboundedSender<(String, Report)>,
    slots: BTreeMap<u16, SlotCopy>,
    scan: Option<Scan>,
    capture: Option<Following>,
    /// Connections to the targets' masters, by address.
    targets: BTreeMap<String, Conn>,
    /// RESTOREs sent to a target whose replies are not read yet, by address: the target
    /// restores one batch while the source reads the next (`copy_keys`), instead of the two
    /// taking turns. Read (`settle`) before a round ends, before a final copy is done, and
    /// before the connection is used for anything else.
    unsettled: BTreeMap<String, Unsettled>,
    /// The command connection to the source.
    src: Option<Conn>,
    /// No batch before then (the speed cap): the loop waits for it, or for a command.
    paced_until: Option<Instant>,
    /// Big keys' chunked copies report here when done (each runs on its own task, so that a
    /// final copy never waits behind one).
    big_done: (
        mpsc::UnboundedSender<BigCopied>,
        mpsc::UnboundedReceiver<BigCopied>,
    ),
}

/// A connection and the database it has selected.
struct Conn {
    client: RedisClient,
    db: u32,
}

impl Conn {
    fn new(client: RedisClient) -> Self {
        Self { client, db: 0 }
    }

    /// The connection, in database `db` (selected if it is not yet).
    async fn select(&mut self, server: &str, db: u32) -> Result<&mut RedisClient, MoverError> {
        if self.db != db {
            let text = db.to_string();
            expect_ok(&mut self.client, server, &[b"SELECT", text.as_bytes()]).await?;
            self.db = db;
        }
        Ok(&mut self.client)
    }
}

/// A batch of RESTOREs sent to a target, not yet answered.
#[derive(Default)]
struct Unsettled {
    requests: usize,
    /// The `SELECT`s among them.
    selects: usize,
    bytes: u64,
    slots: Vec<u16>,
    /// The slots of the keys restored by round 0, one entry per key (`Progress::first`).
    first: Vec<u16>,
}

/// A big key's chunked copy, done or failed.
struct BigCopied {
    slot: u16,
    key: DbKey,
    kind: Bytes,
    result: Result<u64, MoverError>,
}

/// What a step of work did.
enum Step {
    Worked,
    /// Nothing to do until then (or a command).
    Wait(Duration),
}

/// One key as the source holds it now.
enum Read {
    /// Absolute expire time in ms (-1: none) and the DUMP payload.
    Small {
        expire_at: i64,
        payload: Bytes,
    },
    Missing,
    /// Too big for one RESTORE; its type.
    Big(Bytes),
}

impl Copy {
    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            // Commands first: a final copy must not wait for a round.
            loop {
                match commands.try_recv() {
                    Ok(c) => self.command(c).await,
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => return,
                }
            }
            while let Ok(done) = self.big_done.1.try_recv() {
                self.big_copied(done);
            }
            if self.broken() {
                self.lose_all("the source's replication stream was lost")
                    .await;
                continue;
            }
            let step = match self.step().await {
                Ok(step) => step,
                Err(e) => {
                    warn!(source = %self.source, error = %e, "copy failed");
                    self.lose_all(&e.to_string()).await;
                    Step::Wait(self.config.idle_round)
                }
            };
            if let Step::Wait(wait) = step {
                tokio::select! {
                    c = commands.recv() => match c {
                        Some(c) => self.command(c).await,
                        None => return,
                    },
                    Some(done) = self.big_done.1.recv() => self.big_copied(done),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }

    fn big_copied(&mut self, done: BigCopied) {
        let Some(s) = self.slots.get_mut(&done.slot) else {
            return;
        };
        s.big_copying -= 1;
        match done.result {
            Ok(bytes) => {
                s.big.insert(done.key, done.kind);
                self.progress.add_slots(std::iter::once(done.slot));
                self.progress.add_total(1, bytes);
            }
            Err(e) => {
                warn!(source = %self.source, slot = done.slot, error = %e, "a big key's copy failed");
                self.slots.remove(&done.slot);
                self.report(Report::Lost {
                    slots: BTreeSet::from([done.slot]),
                    why: format!("a big key's copy failed: {e}"),
                });
            }
        }
    }

    fn report(&self, r: Report) {
        let _ = self.reports.send((self.source.clone(), r));
    }

    fn broken(&self) -> bool {
        self.capture
            .as_ref()
            .is_some_and(|f| f.broken.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// Every slot is lost; the capture and connections start afresh for the next ones.
    async fn lose_all(&mut self, why: &str) {
        let slots: BTreeSet<u16> = self.slots.keys().copied().collect();
        if !slots.is_empty() {
            info!(source = %self.source, slots = slots.len(), why, "copy lost");
            self.report(Report::Lost {
                slots,
                why: why.to_string(),
            });
        }
        let tasks: Vec<BigTask> = std::mem::take(&mut self.slots)
            .into_values()
            .flat_map(|s| s.big_tasks)
            .collect();
        self.stop_big(tasks).await;
        self.scan = None;
        self.capture = None;
        self.unsettled.clear();
        self.targets.clear();
        self.src = None;
    }

    async fn command(&mut self, c: Command) {
        // Whatever the command changes (slots forgotten, a final copy), the RESTOREs sent so
        // far are answered first: none of them lands on a target after it.
        if let Err(e) = self.settle().await {
            self.lose_all(&format!("restoring on a target failed: {e}"))
                .await;
        }
        match c {
            Command::Add(slots) => {
                if let Err(e) = self.follow(&slots).await {
                    warn!(source = %self.source, error = %e, "the copy could not follow the source");
                    self.report(Report::Lost {
                        slots: slots.into_keys().collect(),
                        why: format!("the copy could not follow the source: {e}"),
                    });
                    return;
                }
                for (slot, target) in slots {
                    self.slots.insert(
                        slot,
                        SlotCopy {
                            target,
                            round: 0,
                            scanned: false,
                            pending: BTreeSet::new(),
                            big: rustc_hash::FxHashMap::default(),
                            pending_elements: BTreeMap::new(),
                            big_copying: 0,
                            big_tasks: Vec::new(),
                            converged: false,
                        },
                    );
                }
            }
            Command::Forget(slots, done) => {
                for s in &slots {
                    if let Some(sc) = self.slots.remove(s) {
                        self.stop_big(sc.big_tasks).await;
                    }
                    if let Some(scan) = &mut self.scan {
                        scan.slots.remove(s);
                    }
                }
                if let Some(f) = &self.capture {
                    let mut c = f.capture.lock().expect("capture lock poisoned");
                    for &s in &slots {
                        c.forget(s);
                    }
                }
                let _ = done.send(());
            }
            Command::Again(slots) => {
                for s in &slots {
                    if let Some(sc) = self.slots.get_mut(s) {
                        sc.converged = false;
                    }
                }
            }
            Command::Final(slots) => {
                let started = Instant::now();
                let result = self.final_copy(&slots, started).await;
                if result.is_ok() {
                    self.progress.forget(&slots);
                }
                self.report(Report::Final {
                    slots,
                    result: result.map(|()| started.elapsed()),
                });
            }
        }
    }

    /// Starts following `slots` in the capture (starting the capture itself if needed), before
    /// their SCAN begins, so that no write to them is missed.
    async fn follow(&mut self, slots: &BTreeMap<u16, String>) -> Result<(), MoverError> {
        if self.capture.is_none() {
            self.capture = Some(self.start_capture().await?);
        }
        let f = self.capture.as_ref().expect("just started");
        let mut c = f.capture.lock().expect("capture lock poisoned");
        for &slot in slots.keys() {
            c.follow(slot);
        }
        drop(c);
        let scan = self.scan.get_or_insert_with(|| Scan::new(BTreeSet::new()));
        // Slots that join a SCAN under way get one of their own afterwards (`step`).
        if !scan.started() {
            scan.slots.extend(slots.keys());
        }
        Ok(())
    }

    /// Connects as a replica from the source's current replication offset.
    async fn start_capture(&mut self) -> Result<Following, MoverError> {
        let source = self.source.clone();
        let credential = self.credential.clone();
        let src = self.src().await?;
        let reply = src.cmd(&[&b"INFO"[..], b"replication"]).await?;
        let text = reply.as_text().unwrap_or_default();
        let fields = info_fields(&text);
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (Some(replid), Some(offset)) = (
            get("master_replid"),
            get("master_repl_offset").and_then(|o| o.parse::<u64>().ok()),
        ) else {
            return Err(refused(&source, "INFO replication", &reply));
        };
        let mut replica = Replica::connect_with(&source, credential.as_ref(), capture_bounds())
            .await
            .map_err(|e| io_error(&source, e))?;
        // A source without a replication backlog (it never had a replica) answers with a
        // full resync, which a diskless source delays by `repl-diskless-sync-delay` (5 s by
        // default) in case more replicas come: the delay is lifted for this sync, and put
        // back as soon as it has started.
        let delay = config_get(src, "repl-diskless-sync-delay").await?;
        let lifted = delay.as_deref().is_some_and(|d| d != "0");
        if lifted {
            set_config(src, "repl-diskless-sync-delay", "0").await?;
        }
        let start = replica.handshake(Some((&replid, offset))).await;
        if lifted {
            let d = delay.as_deref().unwrap_or("5");
            set_config(src, "repl-diskless-sync-delay", d).await?;
        }
        let start = start.map_err(|e| io_error(&self.source, e))?;
        let from = match start {
            Start::Continue { .. } => offset,
            Start::Full { offset, .. } => {
                // Its RDB is read past: the stream after it is what matters.
                let size = replica
                    .skip_rdb()
                    .await
                    .map_err(|e| io_error(&self.source, e))?;
                info!(source = %self.source, rdb_bytes = size, "the capture read past a full resync");
                offset
            }
        };
        // After a diskless full resync the source holds the stream back until its replica's
        // first acknowledgement.
        replica
            .ack(0)
            .await
            .map_err(|e| io_error(&self.source, e))?;
        let databases = config_get(self.src().await?, "databases")
            .await?
            .and_then(|n| n.parse().ok())
            .unwrap_or(16);
        let marker = capture_marker();
        let mut capture = Capture::new([], from, self.config.capture_limit);
        capture.set_marker(databases, &marker);
        let capture = Arc::new(Mutex::new(capture));
        let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = tokio::spawn(feed(
            replica,
            capture.clone(),
            broken.clone(),
            self.source.clone(),
        ));
        // The stream says its database from here on (`Capture::set_marker`).
        let source = self.source.clone();
        let src = self.src_in(INTERNAL_DB).await?;
        expect_ok(src, &source, &[b"SET", &marker, b"1", b"PX", b"60000"]).await?;
        expect_ok(src, &source, &[b"UNLINK", &marker]).await?;
        // Live once it has read the marker: then the source streams to it. Measured before
        // the marker, a fresh source's offset (0) made a capture that had read nothing yet
        // live, and handoffs were tried (and given up) until the stream started.
        let live_at = self.repl_offset().await?;
        debug!(source = %self.source, offset = from, live_at, "capture following the source");
        Ok(Following {
            capture,
            broken,
            live_at,
            task,
        })
    }

    /// The source's replication offset now (`master_repl_offset`): every write it has made
    /// is before it.
    async fn repl_offset(&mut self) -> Result<u64, MoverError> {
        let source = self.source.clone();
        let reply = self
            .src()
            .await?
            .cmd(&[&b"INFO"[..], b"replication"])
            .await?;
        let text = reply.as_text().unwrap_or_default();
        info_fields(&text)
            .into_iter()
            .find(|(k, _)| k == "master_repl_offset")
            .and_then(|(_, v)| v.parse::<u64>().ok())
            .ok_or_else(|| refused(&source, "INFO replication", &reply))
    }

    async fn src(&mut self) -> Result<&mut RedisClient, MoverError> {
        if self.src.is_none() {
            self.src = Some(Conn::new(
                RedisClient::connect_as(
                    &self.source,
                    self.config.timeout,
                    self.credential.as_ref(),
                )
                .await?,
            ));
        }
        Ok(&mut self.src.as_mut().expect("just connected").client)
    }

    /// The source's command connection, in database `db`.
    async fn src_in(&mut self, db: u32) -> Result<&mut RedisClient, MoverError> {
        self.src().await?;
        let source = self.source.clone();
        let conn = self.src.as_mut().expect("just connected");
        conn.select(&source, db).await
    }

    /// One step of work: a SCAN page of round 0, or a batch of a later round.
    async fn step(&mut self) -> Result<Step, MoverError> {
        if self.slots.is_empty() {
            return Ok(Step::Wait(Duration::from_secs(3600)));
        }
        if let Some(at) = self.paced_until {
            let now = Instant::now();
            if at > now {
                return Ok(Step::Wait(at - now));
            }
            self.paced_until = None;
        }
        if self.scan.as_ref().is_some_and(|s| !s.slots.is_empty()) {
            self.scan_page().await?;
            return Ok(Step::Worked);
        }
        // A SCAN that ended with slots that joined meanwhile starts again for them.
        let waiting: BTreeSet<u16> = self
            .slots
            .iter()
            .filter(|(_, s)| !s.scanned)
            .map(|(id, _)| *id)
            .collect();
        if !waiting.is_empty() {
            self.scan = Some(Scan::new(waiting));
            return Ok(Step::Worked);
        }
        self.scan = None;
        // A big key's written elements, a key at a time.
        if let Some((slot, key, e)) = self.next_elements() {
            self.copy_elements(slot, &key, &e, true).await?;
            return Ok(Step::Worked);
        }
        // Later rounds: the written keys of every slot, a batch at a time.
        let batch = self.next_batch();
        if batch.is_empty() {
            // The round's last RESTOREs are answered before it ends.
            self.settle().await?;
            return Ok(if self.end_rounds() {
                Step::Worked
            } else {
                Step::Wait(self.config.idle_round)
            });
        }
        self.copy_keys(&batch, true).await?;
        Ok(Step::Worked)
    }

    /// One page of round 0's SCAN, its keys of the scanned slots copied.
    async fn scan_page(&mut self) -> Result<(), MoverError> {
        if self.scan.as_ref().expect("a scan").dbs.is_none() {
            let source = self.source.clone();
            let mut dbs = databases_with_keys(self.src().await?, &source).await?;
            dbs.retain(|&db| db != INTERNAL_DB);
            self.scan.as_mut().expect("a scan").dbs = Some(dbs);
        }
        let (db, cursor) = {
            let scan = self.scan.as_ref().expect("a scan");
            let dbs = scan.dbs.as_deref().unwrap_or_default();
            (dbs.get(scan.at).copied(), scan.cursor.clone())
        };
        let mut next = b"0".to_vec();
        if let Some(db) = db {
            let count = self.config.scan_count.to_string();
            let reply = self
                .src_in(db)
                .await?
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", count.as_bytes()])
                .await?;
            let keys: Vec<DbKey> = {
                let page = scan_page(&self.source, "SCAN", &reply, &mut next)?;
                let scan = self.scan.as_ref().expect("a scan");
                page.iter()
                    .filter_map(Value::as_bytes)
                    .map(|k| DbKey::new(db, k))
                    .filter(|k| scan.slots.contains(&k.slot()))
                    .collect()
            };
            for batch in keys.chunks(self.config.batch.max(1)) {
                self.copy_keys(batch, true).await?;
            }
        }
        let scan = self.scan.as_mut().expect("a scan");
        scan.cursor = next;
        if scan.cursor == b"0" {
            scan.at += 1;
        }
        let done = scan.at >= scan.dbs.as_ref().map_or(0, Vec::len);
        if done {
            // Round 0 ends once its big keys' chunked copies are in place too
            // (`end_rounds`): a big key's written elements are set on the target only after
            // its copy is published there, or the publish would overwrite them.
            for s in std::mem::take(&mut scan.slots) {
                if let Some(sc) = self.slots.get_mut(&s) {
                    sc.scanned = true;
                }
            }
        }
        Ok(())
    }

    /// A big key whose written elements are still to copy in this round.
    fn next_elements(&mut self) -> Option<(u16, DbKey, Elements)> {
        self.slots.iter_mut().find_map(|(slot, s)| {
            let (k, e) = s.pending_elements.pop_first()?;
            Some((*slot, k, e))
        })
    }

    /// Copies a big key's written elements as the source holds them now: a hash's fields
    /// (`HMGET`, then `HSET`/`HDEL`), a set's members (`SMISMEMBER`, then `SADD`/`SREM`), a
    /// sorted set's members (`ZMSCORE`, then `ZADD`/`ZREM`), its expire time. A key gone, or
    /// of another type now, is copied whole instead (next batch).
    async fn copy_elements(
        &mut self,
        slot: u16,
        db_key: &DbKey,
        e: &Elements,
        pace: bool,
    ) -> Result<(), MoverError> {
        let Some(s) = self.slots.get(&slot) else {
            return Ok(());
        };
        let (target, kind) = (s.target.clone(), s.big.get(db_key).cloned());
        let source = self.source.clone();
        let chunk = self.config.chunk.max(1);
        let key = &db_key.name[..];
        let src = self.src_in(db_key.db).await?;
        let now = src.cmd(&[&b"TYPE"[..], key]).await?;
        let now = now.as_bytes().unwrap_or_default().to_vec();
        if kind.as_deref() != Some(&now[..]) {
            if let Some(s) = self.slots.get_mut(&slot) {
                s.pending.insert(db_key.clone());
            }
            return Ok(());
        }
        let names: Vec<&[u8]> = e.names.iter().map(|n| &n[..]).collect();
        let mut ops: Vec<Vec<Vec<u8>>> = Vec::new();
        for part in names.chunks(chunk) {
            let (read, present): (&[u8], fn(&Value) -> bool) = match &now[..] {
                b"hash" => (b"HMGET", |v| !matches!(v, Value::Nil)),
                b"set" => (b"SMISMEMBER", |v| v.as_int() == Some(1)),
                _ => (b"ZMSCORE", |v| !matches!(v, Value::Nil)),
            };
            let mut args: Vec<&[u8]> = vec![read, key];
            args.extend(part.iter().copied());
            let Value::Array(values) = src.cmd(&args).await? else {
                return Err(MoverError::Refused {
                    server: source,
                    what: String::from_utf8_lossy(read).into_owned(),
                    reply: "not an array".into(),
                });
            };
            for (name, v) in part.iter().zip(&values) {
                let k = key.to_vec();
                let n = name.to_vec();
                ops.push(match (&now[..], present(v)) {
                    (b"hash", true) => vec![
                        b"HSET".to_vec(),
                        k,
                        n,
                        v.as_bytes().unwrap_or_default().to_vec(),
                    ],
                    (b"hash", false) => vec![b"HDEL".to_vec(), k, n],
                    (b"set", true) => vec![b"SADD".to_vec(), k, n],
                    (b"set", false) => vec![b"SREM".to_vec(), k, n],
                    (_, true) => vec![
                        b"ZADD".to_vec(),
                        k,
                        v.as_bytes().unwrap_or_default().to_vec(),
                        n,
                    ],
                    (_, false) => vec![b"ZREM".to_vec(), k, n],
                });
            }
        }
        if e.ttl {
            let at = src
                .cmd(&[&b"PEXPIRETIME"[..], key])
                .await?
                .as_int()
                .unwrap_or(-1);
            ops.push(if at > 0 {
                vec![
                    b"PEXPIREAT".to_vec(),
                    key.to_vec(),
                    at.to_string().into_bytes(),
                ]
            } else {
                vec![b"PERSIST".to_vec(), key.to_vec()]
            });
        }
        let mut req = BytesMut::new();
        let mut bytes = 0u64;
        for op in &ops {
            let args: Vec<&[u8]> = op.iter().map(Vec::as_slice).collect();
            bytes += args.iter().map(|a| a.len() as u64).sum::<u64>();
            push_request(&mut req, &args);
        }
        self.settle().await?;
        let dst = self
            .target(&target)
            .await?
            .select(&target, db_key.db)
            .await?;
        let replies = dst.encoded_many(&req, ops.len()).await?;
        if let Some(err) = replies.iter().find(|r| matches!(r, Value::Error(_))) {
            return Err(refused(&target, "copying a big key's elements", err));
        }
        self.progress.add_total(0, bytes);
        if pace {
            let wait = self.throttle.charge(0, bytes, Instant::now());
            if !wait.is_zero() {
                self.paced_until = Some(Instant::now() + wait);
            }
        }
        Ok(())
    }

    /// Up to `batch` keys still to copy in this round, a fair share from each slot.
    fn next_batch(&mut self) -> Vec<DbKey> {
        let mut out = Vec::new();
        let share = (self.config.batch / self.slots.len().max(1)).max(1);
        for s in self.slots.values_mut() {
            for _ in 0..share {
                match s.pending.pop_first() {
                    Some(k) => out.push(k),
                    None => break,
                }
            }
            if out.len() >= self.config.batch {
                break;
            }
        }
        out
    }

    /// Every slot whose round has no key left ends its round. `true` when some slot had
    /// written keys to start its next round with.
    fn end_rounds(&mut self) -> bool {
        let done: BTreeSet<u16> = self
            .slots
            .iter()
            .filter(|(_, s)| {
                s.scanned
                    && s.pending.is_empty()
                    && s.pending_elements.is_empty()
                    && s.big_copying == 0
            })
            .map(|(id, _)| *id)
            .collect();
        self.end_round(&done)
    }

    /// Ends the round of `slots`: their written keys become the next round. `true` when some
    /// slot had some.
    fn end_round(&mut self, slots: &BTreeSet<u16>) -> bool {
        let Some(f) = &self.capture else {
            return false;
        };
        let taken = f.capture.lock().expect("capture lock poisoned").take(slots);
        if !taken.lost.is_empty() {
            for s in &taken.lost {
                self.slots.remove(s);
            }
            self.report(Report::Lost {
                slots: taken.lost.clone(),
                why: "the capture of the source's writes was lost (a flush, or more written \
                      keys than its bound)"
                    .into(),
            });
        }
        let live = self.capture.as_ref().is_some_and(Following::live);
        let mut any = false;
        let mut reports = Vec::new();
        for &slot in slots {
            if taken.lost.contains(&slot) {
                continue;
            }
            let Some(s) = self.slots.get_mut(&slot) else {
                continue;
            };
            let keys = taken.keys.get(&slot).cloned().unwrap_or_default();
            let elements = taken.elements.get(&slot).cloned().unwrap_or_default();
            let left = keys.len()
                + elements
                    .iter()
                    .map(|(_, e)| e.names.len() + usize::from(e.ttl))
                    .sum::<usize>();
            let big = keys.iter().any(|k| s.big.contains_key(k));
            s.pending.extend(keys);
            for (k, e) in elements {
                let into = s.pending_elements.entry(k).or_default();
                into.names.extend(e.names);
                into.ttl |= e.ttl;
            }
            any |= left > 0;
            let converged = live && left <= self.config.converge_keys && !big;
            // A slot nothing was written to reports only when that changes its state.
            if left > 0 || s.round == 0 || converged != s.converged {
                reports.push(Report::Round {
                    slot,
                    round: s.round,
                    left,
                    converged,
                });
            }
            if s.round == 0 {
                self.progress.scanned(slot);
            }
            s.converged = converged;
            s.round += 1;
        }
        for r in reports {
            self.report(r);
        }
        any
    }

    /// Copies `keys` (of the slots being copied) from the source to their targets, as they
    /// are now. `pace`: charged to the speed cap (not in a final copy, which holds clients).
    async fn copy_keys(&mut self, keys: &[DbKey], pace: bool) -> Result<(), MoverError> {
        if keys.is_empty() {
            return Ok(());
        }
        // Read a database at a time (one script call each, in that database).
        let mut by_db: BTreeMap<u32, Vec<&DbKey>> = BTreeMap::new();
        for k in keys {
            by_db.entry(k.db).or_default().push(k);
        }
        let mut read = Vec::with_capacity(keys.len());
        for (db, keys) in by_db {
            let names: Vec<&[u8]> = keys.iter().map(|k| &k.name[..]).collect();
            let sent = Instant::now();
            let reply = self
                .src_in(db)
                .await?
                .encoded(&copy_request(&names))
                .await?;
            self.progress
                .took(&format!("EVAL (copy of {} keys)", names.len()), sent);
            read.extend(keys.into_iter().zip(reads(&self.source, &names, &reply)?));
        }
        // RESTOREs (and deletions) pipelined per target, each in its key's database; big
        // keys after, one by one. Per target: the pipelined requests, the database they
        // leave the connection in, and what they will settle.
        let mut per_target: BTreeMap<String, (BytesMut, u32, Unsettled)> = BTreeMap::new();
        let mut big = Vec::new();
        for (key, read) in read {
            let slot = key.slot();
            let Some(s) = self.slots.get(&slot) else {
                continue;
            };
            if let Read::Big(kind) = read {
                if !s.scanned {
                    self.progress.add_first(std::iter::once(slot));
                }
                big.push((key.clone(), slot, kind));
                continue;
            }
            let now = self.targets.get(&s.target).map_or(0, |c| c.db);
            let entry = per_target
                .entry(s.target.clone())
                .or_insert_with(|| (BytesMut::new(), now, Unsettled::default()));
            if entry.1 != key.db {
                let db = key.db.to_string();
                push_request(&mut entry.0, &[b"SELECT", db.as_bytes()]);
                entry.1 = key.db;
                entry.2.selects += 1;
            }
            let name = &key.name[..];
            match read {
                Read::Small { expire_at, payload } => {
                    let ttl = expire_at.max(0).to_string();
                    push_request(
                        &mut entry.0,
                        &[
                            b"RESTORE",
                            name,
                            ttl.as_bytes(),
                            &payload,
                            b"REPLACE",
                            b"ABSTTL",
                        ],
                    );
                    entry.2.bytes += payload.len() as u64;
                    if !s.scanned {
                        entry.2.first.push(slot);
                    }
                }
                Read::Missing => push_request(&mut entry.0, &[b"UNLINK", name]),
                Read::Big(_) => unreachable!("big keys are set aside above"),
            }
            entry.2.requests += 1;
            entry.2.slots.push(slot);
        }
        // The previous batch's RESTOREs ran on the targets while the source read this one.
        self.settle().await?;
        for (target, (req, db, u)) in per_target {
            if u.requests == 0 {
                continue;
            }
            let conn = self.target(&target).await?;
            conn.client.send(&req).await?;
            // A new connection starts in database 0, as the pipeline assumed (`now`).
            conn.db = db;
            let (n, bytes) = (u.requests, u.bytes);
            self.unsettled.insert(target, u);
            if pace {
                let wait = self.throttle.charge(n as u64, bytes, Instant::now());
                if !wait.is_zero() {
                    self.paced_until = Some(Instant::now() + wait);
                }
            }
        }
        for (key, slot, kind) in big {
            self.spawn_big(key, slot, kind);
        }
        Ok(())
    }

    /// Reads the replies of the RESTOREs sent and not yet answered; a refusal fails the copy.
    async fn settle(&mut self) -> Result<(), MoverError> {
        for (target, u) in std::mem::take(&mut self.unsettled) {
            let c = self
                .targets
                .get_mut(&target)
                .expect("a connection with requests in flight");
            let replies = c.client.receive(u.requests + u.selects).await?;
            if let Some(e) = replies.iter().find(|r| matches!(r, Value::Error(_))) {
                return Err(refused(&target, "RESTORE", e));
            }
            self.progress.add_slots(u.slots.into_iter());
            self.progress.add_first(u.first.into_iter());
            self.progress.add_total(u.requests as u64, u.bytes);
        }
        Ok(())
    }

    async fn target(&mut self, addr: &str) -> Result<&mut Conn, MoverError> {
        if !self.targets.contains_key(addr) {
            let c = RedisClient::connect_as(addr, self.config.timeout, self.credential.as_ref())
                .await?;
            self.targets.insert(addr.to_string(), Conn::new(c));
        }
        Ok(self.targets.get_mut(addr).expect("just connected"))
    }

    /// Stops big keys' chunked copies: each task is ended and its target connection killed
    /// (`CLIENT KILL ID`), after which no write of it runs on the target — a request already
    /// in the server's socket is dropped with its client. A target that cannot be reached
    /// to kill it closes the connection itself when the task ends.
    async fn stop_big(&mut self, tasks: Vec<BigTask>) {
        if !tasks.is_empty() && !self.unsettled.is_empty() {
            // The kill goes on a connection that may have RESTOREs in flight.
            if let Err(e) = self.settle().await {
                warn!(source = %self.source, error = %e, "a RESTORE failed while a copy stopped");
                self.unsettled.clear();
                self.targets.clear();
            }
        }
        for t in tasks {
            t.handle.abort();
            let Some(id) = t.client.get().map(i64::to_string) else {
                continue;
            };
            let kill = async {
                let c = &mut self.target(&t.target).await?.client;
                Ok::<_, MoverError>(
                    c.cmd(&[&b"CLIENT"[..], b"KILL", b"ID", id.as_bytes()])
                        .await?,
                )
            };
            if let Err(e) = kill.await {
                warn!(target = %t.target, error = %e, "could not end a stopped big key's copy on its target");
                self.targets.remove(&t.target);
            }
        }
    }

    /// Starts a big key's chunked copy on a task of its own.
    fn spawn_big(&mut self, key: DbKey, slot: u16, kind: Bytes) {
        let Some(s) = self.slots.get_mut(&slot) else {
            return;
        };
        s.big_copying += 1;
        let client = Arc::new(std::sync::OnceLock::new());
        let big = BigCopy {
            source: self.source.clone(),
            target: s.target.clone(),
            credential: self.credential.clone(),
            chunk: self.config.chunk,
            timeout: self.config.timeout,
            throttle: self.throttle.clone(),
            client: client.clone(),
        };
        let done = self.big_done.0.clone();
        s.big_tasks.retain(|t| !t.handle.is_finished());
        // Its writes from now on are recorded element by element.
        if let Some(f) = &self.capture {
            f.capture
                .lock()
                .expect("capture lock poisoned")
                .mark_big(&key);
        }
        let target = s.target.clone();
        info!(%key, slot, "copying a big key in chunks");
        let handle = tokio::spawn(async move {
            let result = big.copy(&key, &kind).await;
            let _ = done.send(BigCopied {
                slot,
                key,
                kind,
                result,
            });
        });
        s.big_tasks.push(BigTask {
            handle,
            target,
            client,
        });
    }

    /// The final copy of `slots`, all of which every proxy holds now.
    async fn final_copy(&mut self, slots: &BTreeSet<u16>, started: Instant) -> Result<(), String> {
        let deadline = started + self.config.final_budget;
        if let Some(s) = slots
            .iter()
            .find(|s| self.slots.get(s).is_none_or(|c| !c.scanned))
        {
            return Err(format!("slot {s} is not copied yet"));
        }
        // The source's offset now: every write to the slots is before it.
        let upto = self.repl_offset().await.map_err(|e| e.to_string())?;
        let Some(capture) = self.capture.as_ref().map(|f| f.capture.clone()) else {
            return Err("the capture is not running".into());
        };
        loop {
            if self.broken() {
                return Err("the source's replication stream was lost".into());
            }
            let at = capture.lock().expect("capture lock poisoned").offset();
            if at >= upto {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the capture was at offset {at}, {} bytes short of the source's {upto}, \
                     after {} ms",
                    upto - at,
                    self.config.final_budget.as_millis()
                ));
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        let taken = capture.lock().expect("capture lock poisoned").take(slots);
        if !taken.lost.is_empty() {
            return Err(format!("the capture of slots {:?} was lost", taken.lost));
        }
        for &slot in slots {
            if let Some(s) = self.slots.get_mut(&slot) {
                s.pending
                    .extend(taken.keys.get(&slot).cloned().unwrap_or_default());
                for (k, e) in taken.elements.get(&slot).cloned().unwrap_or_default() {
                    let into = s.pending_elements.entry(k).or_default();
                    into.names.extend(e.names);
                    into.ttl |= e.ttl;
                }
                if let Some(k) = s.pending.iter().find(|k| s.big.contains_key(*k)) {
                    return Err(format!(
                        "big key {k} of slot {slot} was written since its copy"
                    ));
                }
                if s.big_copying > 0 {
                    return Err(format!("a big key of slot {slot} is being copied"));
                }
            }
        }
        // Elements first: a big key whose type changed goes to `pending`, copied whole below.
        while let Some((slot, key, e)) = slots.iter().find_map(|id| {
            let s = self.slots.get_mut(id)?;
            let (k, e) = s.pending_elements.pop_first()?;
            Some((*id, k, e))
        }) {
            if Instant::now() >= deadline {
                if let Some(s) = self.slots.get_mut(&slot) {
                    s.pending_elements.insert(key, e);
                }
                return Err(format!(
                    "big keys' written elements were left to copy past the {} ms budget",
                    self.config.final_budget.as_millis()
                ));
            }
            self.copy_elements(slot, &key, &e, false)
                .await
                .map_err(|err| err.to_string())?;
        }
        let keys: Vec<DbKey> = slots
            .iter()
            .filter_map(|id| self.slots.get(id))
            .flat_map(|s| s.pending.iter().cloned())
            .collect();
        for batch in keys.chunks(self.config.batch.max(1)) {
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} written keys were left to copy past the {} ms budget",
                    keys.len(),
                    self.config.final_budget.as_millis()
                ));
            }
            self.copy_keys(batch, false)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.settle().await.map_err(|e| e.to_string())?;
        // A key grown too big for one RESTORE since the last round went to a chunked copy:
        // the handoff cannot wait for it.
        if let Some(slot) = slots
            .iter()
            .find(|id| self.slots.get(id).is_some_and(|s| s.big_copying > 0))
        {
            return Err(format!(
                "a key of slot {slot} written since the last round is too big for the final copy"
            ));
        }
        // Copied: the slots are the target's from now on.
        let mut c = capture.lock().expect("capture lock poisoned");
        for &s in slots {
            self.slots.remove(&s);
            c.forget(s);
        }
        Ok(())
    }
}

/// A big key's chunked copy, on a task of its own with its own connections.
struct BigCopy {
    source: String,
    target: String,
    credential: Option<Credential>,
    chunk: usize,
    timeout: Duration,
    throttle: Arc<Throttle>,
    /// Its target connection's `CLIENT ID`, for `Copy::stop_big`.
    client: Arc<std::sync::OnceLock<i64>>,
}

impl BigCopy {
    /// In chunks from the live key into a temp key in the target's internal database, put
    /// in place (with its expire time) only once complete. A write to it meanwhile is in the
    /// capture: the next round copies it again. Returns the bytes copied.
    async fn copy(&self, db_key: &DbKey, kind: &[u8]) -> Result<u64, MoverError> {
        let key = &db_key.name[..];
        let temp = temp_key(db_key.db, key);
        let (internal, db) = (INTERNAL_DB.to_string(), db_key.db.to_string());
        let cred = self.credential.as_ref();
        let mut src = RedisClient::connect_as(&self.source, self.timeout, cred).await?;
        let mut dst = RedisClient::connect_as(&self.target, self.timeout, cred).await?;
        let id = dst.cmd(&[&b"CLIENT"[..], b"ID"]).await?;
        let Some(id) = id.as_int() else {
            return Err(refused(&self.target, "CLIENT ID", &id));
        };
        let _ = self.client.set(id);
        if db_key.db != 0 {
            expect_ok(&mut src, &self.source, &[b"SELECT", db.as_bytes()]).await?;
        }
        expect_ok(&mut dst, &self.target, &[b"SELECT", internal.as_bytes()]).await?;
        dst.cmd(&[&b"UNLINK"[..], &temp]).await?;
        let chunks = Chunks {
            source: &self.source,
            target: &self.target,
            chunk: self.chunk,
            throttle: &self.throttle,
        };
        let bytes = chunks.copy(&mut src, &mut dst, kind, key, &temp).await?;
        let at = src
            .cmd(&[&b"PEXPIRETIME"[..], key])
            .await?
            .as_int()
            .unwrap_or(-1);
        if at > 0 {
            let at = at.to_string();
            expect_ok(
                &mut dst,
                &self.target,
                &[b"PEXPIREAT", &temp, at.as_bytes()],
            )
            .await?;
        }
        let publish: [&[u8]; 7] = [
            b"EVAL",
            PUBLISH_BIG_KEY_SCRIPT.as_bytes(),
            b"2",
            &temp,
            key,
            internal.as_bytes(),
            db.as_bytes(),
        ];
        match dst.cmd(&publish).await? {
            Value::Int(1) => {}
            // Gone meanwhile (deleted, or expired while it was copied): the target must not
            // keep an older copy either.
            Value::Int(0) => {
                expect_ok(&mut dst, &self.target, &[b"SELECT", db.as_bytes()]).await?;
                dst.cmd(&[&b"UNLINK"[..], key]).await?;
            }
            other => return Err(refused(&self.target, "putting a big key in place", &other)),
        }
        info!(key = %db_key, bytes, "big key copied in chunks");
        Ok(bytes)
    }
}

/// The capture's task: the replication stream into `capture`, until it breaks. It
/// acknowledges every second, as a Redis replica does, and every 50 ms until the stream's
/// first command: after a diskless full resync the source starts the stream only on an
/// acknowledgement that comes after it has seen its RDB child finish (one sent on the EOF
/// mark can come too early). Acknowledging only every second left the capture up to a second
/// behind a source it had just joined, and a handoff of slots copied by then (a few keys)
/// was given up until it was not. A replica that never acknowledges is dropped after
/// `repl-timeout`. The offset acknowledged is 0: Redis keeps the greater of the offsets a
/// replica acknowledged, so `WAIT` never counts this one as a replica that has a write.
async fn feed(
    mut replica: Replica,
    capture: Arc<Mutex<Capture>>,
    broken: Arc<std::sync::atomic::AtomicBool>,
    source: String,
) {
    let mut acked = Instant::now();
    // Until the stream's first command (the copy writes its marker right after joining).
    let mut every = ACK_UNTIL_STREAMING;
    loop {
        let next = tokio::time::timeout(every, replica.next_command()).await;
        match next {
            Ok(Ok((req, n))) => {
                every = ACK_EVERY;
                capture
                    .lock()
                    .expect("capture lock poisoned")
                    .observe(&req, n);
            }
            Ok(Err(e)) => {
                warn!(%source, error = %e, "the capture's replication stream broke");
                break;
            }
            // Silence is normal (the source pings its replicas every 10 s).
            Err(_) => {}
        }
        if acked.elapsed() >= every {
            if let Err(e) = replica.ack(0).await {
                warn!(%source, error = %e, "the capture could not acknowledge");
                break;
            }
            acked = Instant::now();
        }
    }
    broken.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A key of the internal database no one else writes: the capture's marker.
fn capture_marker() -> Vec<u8> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut k = tessera_model::migration::INTERNAL_PREFIX.to_vec();
    k.extend_from_slice(format!("capture:{}-{nanos}-{n}", std::process::id()).as_bytes());
    k
}

/// How often the capture acknowledges the stream.
const ACK_EVERY: Duration = Duration::from_secs(1);
/// How often it does so until the stream starts.
const ACK_UNTIL_STREAMING: Duration = Duration::from_millis(50);

/// A server's config value (`CONFIG GET`), `None` when it has no such parameter.
async fn config_get(c: &mut RedisClient, name: &str) -> Result<Option<String>, MoverError> {
    match c.cmd(&[&b"CONFIG"[..], b"GET", name.as_bytes()]).await? {
        Value::Array(items) => Ok(items.get(1).and_then(Value::as_text)),
        other => Err(refused(c.addr(), "CONFIG GET", &other)),
    }
}

async fn set_config(c: &mut RedisClient, name: &str, value: &str) -> Result<(), MoverError> {
    let addr = c.addr().to_string();
    expect_ok(
        c,
        &addr,
        &[b"CONFIG", b"SET", name.as_bytes(), value.as_bytes()],
    )
    .await
}

/// How long the source may keep the capture waiting: as a Redis replica would let it (its
/// `repl-timeout`, 60 s; the source pings every 10 s), ten minutes to save an RDB a full
/// resync reads past, and a command as large as Redis's largest value.
fn capture_bounds() -> ReadBounds {
    ReadBounds {
        timeout: Duration::from_secs(60),
        rdb_wait: Duration::from_secs(600),
        max_command: 512 << 20,
    }
}

fn io_error(server: &str, e: impl std::fmt::Display) -> MoverError {
    MoverError::Refused {
        server: server.into(),
        what: "following its replication stream".into(),
        reply: e.to_string(),
    }
}

fn push_request(out: &mut BytesMut, args: &[&[u8]]) {
    let size = args.iter().map(|a| a.len()).sum();
    out.extend_from_slice(&tessera_resp::encode_request(
        args.len(),
        args.iter().copied(),
        size,
    ));
}

/// Parses `COPY_SCRIPT`'s reply for `keys`.
fn reads(server: &str, keys: &[&[u8]], reply: &Value) -> Result<Vec<Read>, MoverError> {
    let Value::Array(items) = reply else {
        return Err(refused(server, "reading keys to copy", reply));
    };
    if items.len() != keys.len() * 2 {
        return Err(refused(server, "reading keys to copy", reply));
    }
    items
        .chunks(2)
        .map(|pair| match pair {
            [Value::Int(-2), _] => Ok(Read::Missing),
            [Value::Int(-3), kind] => Ok(Read::Big(Bytes::copy_from_slice(
                kind.as_bytes().unwrap_or_default(),
            ))),
            [Value::Int(at), Value::Bulk(payload)] => Ok(Read::Small {
                expire_at: *at,
                payload: payload.clone(),
            }),
            _ => Err(refused(server, "reading keys to copy", reply)),
        })
        .collect()
}
