//! Driving slot migrations (v3, docs/migration.md): one task owns every migrating slot's
//! state machine (`migrate::machine`), feeds it what its I/O produced — pushes acknowledged
//! or not, copy rounds ended, final copies, stale keys deleted, aborts — and carries out the
//! actions it returns, coalescing those of many slots (one store write, one push per step).
//! The copies themselves run per source group (`migrate::copy`), the deletions of stale keys
//! per group (`migrate::cleanup`).
//!
//! The API side only queues: a migration is saved as `pending`, an abort is persisted and
//! handed to the driver as a message; neither waits for the driver.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tracing::{info, warn};

use super::Dashboard;
use super::migration_jobs::Jobs;
use super::migration_run::{RunLedger, RunSlot, is_done};
use crate::Error;
use crate::migrate::cleanup::{CleanupConfig, delete_slots};
use crate::migrate::copy::{self, Command, CopyConfig, CopyHandle, Report};
use crate::migrate::machine::{Action, Event, Persisted, Phase, Slot};
use crate::migrate::plan::Move;
use crate::migrate::progress::Progress;
use crate::migrate::throttle::{Limits, Throttle};
use tessera_model::clock::now_ms;
use tessera_model::router::{GroupId, SLOTS};
use tessera_store::model::{self, ActionState, SlotAction, SlotModel};
use tessera_wire::migration::{
    JobKind, MigrationPhase, MigrationStatus, PauseStats, SlotProgress, SlowestCommand,
};

/// How often the driver looks at its slots when nothing tells it to.
const TICK: Duration = Duration::from_millis(20);

/// How long each proxy has to acknowledge a push that holds slots, well inside a proxy's
/// `slot_hold_ms` (5 s by default): past it the slots are released.
const BLOCK_PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// A slot that has been ready for a handoff this long goes, with whichever others are ready.
const HANDOFF_WAIT: Duration = Duration::from_secs(2);

/// Slots handed off at once, at most.
const HANDOFF_SLOTS: usize = 512;

/// The written keys a handoff may leave for its final copy, over all its slots.
const HANDOFF_KEYS: usize = 4000;

/// A failed deletion of stale keys is tried again after this.
const CLEANUP_RETRY: Duration = Duration::from_secs(1);
/// After a source's copy was lost, its next one starts no sooner than this, doubled for each
/// loss in a row up to `COPY_RETRY_MAX` (a target that refuses every write is not hammered,
/// nor its source scanned again and again).
const COPY_RETRY: Duration = Duration::from_millis(250);
const COPY_RETRY_MAX: Duration = Duration::from_secs(30);

/// The shortest span of the first copies' rate an ETA is given from.
const ETA_WINDOW: Duration = Duration::from_secs(3);

/// Handoffs whose pause is kept for the status.
const MAX_PAUSES: usize = 1000;

/// Migration bookkeeping the dashboard keeps in memory (the actions themselves are in the
/// store).
pub(crate) struct Migrations {
    pub(crate) progress: Arc<Progress>,
    pub(crate) throttle: Arc<Throttle>,
    pub(crate) copy: CopyConfig,
    pub(crate) cleanup: CleanupConfig,
    /// The history of runs as jobs, persisted (`migration_jobs`).
    pub(crate) jobs: Jobs,
    /// What the driver last published, for the status.
    view: Mutex<View>,
    /// An abort asked for and not yet applied by the driver (also persisted,
    /// `Paths::migration_abort`, for a successor).
    abort: Mutex<Option<AbortRequest>>,
    /// (when, total keys moved, total bytes moved, the run's keys copied once) samples for
    /// the rates.
    samples: Mutex<Vec<(Instant, u64, u64, u64)>>,
    /// Keys per slot, counted on the source when the slot was queued; taken by the driver's
    /// run ledger when it takes the slot.
    expected: Mutex<HashMap<u16, u64>>,
    inbox: mpsc::UnboundedSender<Msg>,
    inbox_rx: Mutex<Option<mpsc::UnboundedReceiver<Msg>>>,
}

impl Default for Migrations {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            progress: Arc::default(),
            throttle: Arc::default(),
            copy: CopyConfig::default(),
            cleanup: CleanupConfig::default(),
            jobs: Jobs::default(),
            view: Mutex::default(),
            abort: Mutex::default(),
            samples: Mutex::default(),
            expected: Mutex::default(),
            inbox: tx,
            inbox_rx: Mutex::new(Some(rx)),
        }
    }
}

/// What the driver publishes after each step.
#[derive(Default)]
struct View {
    slots: BTreeMap<u16, SlotProgress>,
    /// Why the driver is held, if it is.
    blocked: Option<String>,
    /// The last handoffs' write pauses: (milliseconds, slots handed over).
    pauses: Vec<(f64, usize)>,
    /// The running migration, or the last one.
    run: Option<RunLedger>,
}

/// Messages to the driver.
enum Msg {
    /// Something was queued.
    Wake,
    Abort(AbortRequest),
    Copy(Report),
    /// A deletion of stale keys ended.
    Deleted {
        slots: BTreeSet<u16>,
        result: Result<u64, String>,
    },
    /// A failed deletion's slots, to try again.
    RetryDelete(BTreeSet<u16>),
}

/// The write pauses of the last handoffs, per slot: `(milliseconds, slots handed over)`
/// each (a handoff of n slots counts n times).
fn pause_stats(pauses: &[(f64, usize)]) -> Option<PauseStats> {
    let last = pauses.last()?.0;
    let mut by_ms: Vec<(f64, usize)> = pauses.to_vec();
    by_ms.sort_by(|a, b| a.0.total_cmp(&b.0));
    let slots: usize = by_ms.iter().map(|p| p.1).sum();
    let at = |q: f64| {
        let rank = ((slots as f64) * q).ceil().max(1.0) as usize;
        let mut seen = 0;
        for (ms, n) in &by_ms {
            seen += n;
            if seen >= rank {
                return *ms;
            }
        }
        by_ms.last().map_or(0.0, |p| p.0)
    };
    Some(PauseStats {
        handoffs: pauses.len(),
        slots,
        last_ms: last,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: by_ms.last().map_or(0.0, |p| p.0),
    })
}

/// The migrations an abort asked to turn around, as they were when it was asked: a slot
/// whose action has changed since is left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AbortRequest {
    pub(crate) moves: Vec<AbortedMove>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AbortedMove {
    pub(crate) slot: u16,
    pub(crate) source: GroupId,
    pub(crate) target: GroupId,
}

/// The status's name of a machine's phase.
fn phase_of(p: Phase) -> MigrationPhase {
    match p {
        Phase::Pending => MigrationPhase::Pending,
        Phase::Purging => MigrationPhase::Purging,
        Phase::Copying { .. } => MigrationPhase::Copying,
        Phase::Blocking => MigrationPhase::Blocking,
        Phase::Blocked => MigrationPhase::Blocked,
        Phase::Releasing { .. } => MigrationPhase::Releasing,
        Phase::Switching => MigrationPhase::Switching,
        Phase::Cleanup => MigrationPhase::Cleanup,
        Phase::Done => MigrationPhase::Done,
    }
}

fn persisted_state(p: Persisted) -> ActionState {
    match p {
        Persisted::Pending => ActionState::Pending,
        Persisted::Copying => ActionState::Copying,
        Persisted::Handoff => ActionState::Handoff,
        Persisted::Cleanup => ActionState::Cleanup,
    }
}

impl Dashboard {
    fn slot_models(&self) -> Vec<SlotModel> {
        self.state
            .lock()
            .expect("state lock poisoned")
            .slots
            .clone()
    }

    /// Starts moving slots `from..=to` to `group` (slots it owns already are skipped).
    ///
    /// # Errors
    /// 400 bad range, 404 unknown group, 409 an unassigned slot or one already moving.
    /// `by` names the caller in the migration's job (`migration_jobs`).
    pub async fn migrate_slots(
        &self,
        from: u32,
        to: u32,
        group: GroupId,
        by: &str,
    ) -> Result<usize, Error> {
        let _ops = self.ops.lock().await;
        if from > to || to as usize >= SLOTS {
            return Err(Error::invalid(format!(
                "slot range {from}-{to} is not within 0-{}",
                SLOTS - 1
            )));
        }
        let target_ok = self
            .state
            .lock()
            .expect("state lock poisoned")
            .groups
            .get(&group)
            .is_some_and(|g| g.master().is_some());
        if !target_ok {
            return Err(Error::not_found(format!(
                "group {group} does not exist or has no server"
            )));
        }
        let slots = self.slot_models();
        let range = &slots[from as usize..=to as usize];
        if let Some(s) = range.iter().find(|s| s.group.is_none()) {
            return Err(Error::conflict(format!(
                "slot {} is not assigned: assign it instead",
                s.id
            )));
        }
        if let Some(s) = range.iter().find(|s| s.action.is_some()) {
            return Err(Error::conflict(format!(
                "slot {} is already migrating",
                s.id
            )));
        }
        let moves: Vec<Move> = range
            .iter()
            .filter(|s| s.group != Some(group))
            .map(|s| Move {
                slot: s.id,
                from: s.group.expect("checked above"),
                to: group,
            })
            .collect();
        if moves.is_empty() {
            return Err(Error::conflict(format!(
                "nothing to move: every slot of {from}-{to} is on group {group} already"
            )));
        }
        self.queue(&moves, JobKind::Migrate, by).await?;
        info!(from, to, %group, slots = moves.len(), "migration queued");
        Ok(moves.len())
    }

    /// Writes several slots with one batched store write, then keeps them in the state.
    async fn save_slots(&self, slots: Vec<SlotModel>) -> Result<(), Error> {
        if slots.is_empty() {
            return Ok(());
        }
        model::write_many(
            &*self.store,
            slots.iter().map(|s| (self.paths.slot(s.id), s)),
        )
        .await?;
        let mut st = self.state.lock().expect("state lock poisoned");
        for s in slots {
            let id = s.id as usize;
            st.slots[id] = s;
        }
        Ok(())
    }

    /// Saves `moves` as pending migrations and wakes the driver; their keys are counted
    /// first, for the progress (`migration_run`). The job that takes them names `by`.
    pub(super) async fn queue(&self, moves: &[Move], kind: JobKind, by: &str) -> Result<(), Error> {
        let counted = self.count_slot_keys(moves).await;
        self.migrations
            .expected
            .lock()
            .expect("expected lock poisoned")
            .extend(counted);
        let models = self.slot_models();
        let queued = moves
            .iter()
            .map(|m| {
                let mut s = models[m.slot as usize].clone();
                s.action = Some(SlotAction {
                    state: ActionState::Pending,
                    source: m.from,
                    target: m.to,
                    aborting: false,
                });
                s
            })
            .collect();
        self.save_slots(queued).await?;
        if !moves.is_empty() {
            self.migrations.jobs.asked(kind, by.to_owned());
        }
        let _ = self.migrations.inbox.send(Msg::Wake);
        Ok(())
    }

    /// The keys of each moving slot on its source: a fresh scan of each source group
    /// (`slot_keys`, bounded), else its last estimate; slots of a group neither gives are
    /// left out.
    async fn count_slot_keys(&self, moves: &[Move]) -> HashMap<u16, u64> {
        let mut by_source: BTreeMap<GroupId, Vec<u16>> = BTreeMap::new();
        for m in moves {
            by_source.entry(m.from).or_default().push(m.slot);
        }
        let mut out = HashMap::new();
        for (source, slots) in by_source {
            let master = {
                let st = self.state.lock().expect("state lock poisoned");
                st.groups
                    .get(&source)
                    .and_then(|g| g.master())
                    .map(str::to_string)
            };
            let fresh = match master {
                Some(m) => super::slot_keys::scan_group(&m, &self.backend_admin).await,
                None => Err(Error::not_found(format!("group {source} has no master"))),
            };
            let keys = match fresh {
                Ok(k) => {
                    let keys = k.keys.clone();
                    self.slot_keys.put(source, k);
                    Some(keys)
                }
                Err(e) => {
                    warn!(group = source.0, error = %e, "could not count the keys of the slots to move; the progress counts them as they are copied");
                    self.slot_keys
                        .snapshot()
                        .get(&source)
                        .map(|k| k.keys.clone())
                }
            };
            if let Some(keys) = keys {
                for s in slots {
                    out.insert(s, keys[s as usize].round() as u64);
                }
            }
        }
        out
    }

    /// Aborts the migration of the given slots (all when `None`): a slot not yet routed to
    /// its target stays with its source (what the target holds of it is deleted); one that
    /// is, is done. Answers at once with how many slots the abort covers: the request is
    /// persisted (a successor applies it too) and handed to the driver.
    ///
    /// # Errors
    /// The store fails.
    /// `by` names the caller in the job.
    pub async fn abort_migrations(
        &self,
        which: Option<BTreeSet<u16>>,
        by: &str,
    ) -> Result<usize, Error> {
        let asked: Vec<AbortedMove> = self
            .slot_models()
            .iter()
            .filter(|s| which.as_ref().is_none_or(|w| w.contains(&s.id)))
            .filter_map(|s| {
                let a = s.action.as_ref()?;
                let done = a.state == ActionState::Cleanup || a.state == ActionState::Finished;
                (!a.aborting && !done).then_some(AbortedMove {
                    slot: s.id,
                    source: a.source,
                    target: a.target,
                })
            })
            .collect();
        let n = asked.len();
        if n == 0 {
            return Ok(0);
        }
        let request = {
            let mut pending = self.migrations.abort.lock().expect("abort lock poisoned");
            let r = pending.get_or_insert_with(AbortRequest::default);
            for m in &asked {
                if !r.moves.contains(m) {
                    r.moves.push(m.clone());
                }
            }
            r.clone()
        };
        model::write(&*self.store, &self.paths.migration_abort(), &request).await?;
        self.migrations.jobs.abort_asked(by.to_owned());
        let _ = self
            .migrations
            .inbox
            .send(Msg::Abort(AbortRequest { moves: asked }));
        info!(slots = n, "migrations abort asked for");
        Ok(n)
    }

    fn abort_pending(&self) -> bool {
        self.migrations
            .abort
            .lock()
            .expect("abort lock poisoned")
            .is_some()
    }

    /// Reads an abort asked of a predecessor and not yet applied (at start): the driver
    /// applies it once it has taken the slots over.
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn load_abort(&self) -> Result<(), Error> {
        if let Some((r, _)) =
            model::read::<AbortRequest>(&*self.store, &self.paths.migration_abort()).await?
        {
            *self.migrations.abort.lock().expect("abort lock poisoned") = Some(r.clone());
            let _ = self.migrations.inbox.send(Msg::Abort(r));
        }
        Ok(())
    }

    /// Sets the running migration's speed cap (kept until it ends), persisted for a successor.
    ///
    /// # Errors
    /// The store fails.
    pub async fn set_migration_throttle(&self, limits: Limits) -> Result<(), Error> {
        if limits.is_none() {
            self.store.delete(&self.paths.migration_throttle()).await?;
        } else {
            model::write(&*self.store, &self.paths.migration_throttle(), &limits).await?;
        }
        self.migrations.throttle.set(limits);
        info!(?limits, "migration throttle set");
        Ok(())
    }

    /// Changes the running migration's cap (`PUT /api/migrations/throttle`).
    ///
    /// # Errors
    /// [`Error::Conflict`] when no migration runs: a cap ends with its migration, so one set
    /// now would be lifted before any move (it used to be taken, and silently dropped); the
    /// store fails.
    pub async fn change_migration_throttle(&self, limits: Limits) -> Result<(), Error> {
        if self.slot_models().iter().all(|s| s.action.is_none()) {
            return Err(Error::conflict(
                "no migration is running: a speed cap applies to a running migration and ends \
                 with it; give it with the migration (POST /api/migrations \
                 max_keys_per_sec/max_mb_per_sec, tessera admin migrate … --max-keys-per-sec N)",
            ));
        }
        self.set_migration_throttle(limits).await
    }

    /// Reads the cap a predecessor set on a migration still running (at start).
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn load_throttle(&self) -> Result<(), Error> {
        if let Some((l, _)) =
            model::read::<Limits>(&*self.store, &self.paths.migration_throttle()).await?
        {
            self.migrations.throttle.set(l);
        }
        Ok(())
    }

    pub fn migration_status(&self) -> MigrationStatus {
        use std::sync::atomic::Ordering::Relaxed;
        let p = &self.migrations.progress;
        let (total, bytes) = (p.total.load(Relaxed), p.bytes.load(Relaxed));
        let view = self.migrations.view.lock().expect("view lock poisoned");
        let run = view.run.as_ref().map(|r| r.summary((total, bytes)));
        let running = run.as_ref().is_some_and(|r| r.running);
        // Rates over the last 10 s, of the running migration only: once it ends, nothing
        // moves, whatever the last seconds held.
        let (rate, byte_rate, copy_rate) = {
            let mut samples = self
                .migrations
                .samples
                .lock()
                .expect("samples lock poisoned");
            let now = Instant::now();
            if running {
                let copied = run.as_ref().map_or(0, |r| r.keys_copied);
                samples.push((now, total, bytes, copied));
                samples.retain(|(t, ..)| now.duration_since(*t) < Duration::from_secs(10));
            } else {
                samples.clear();
            }
            match (samples.first(), samples.last()) {
                (Some((t0, k0, b0, c0)), Some((t1, k1, b1, c1))) if t1 > t0 => {
                    let dt = t1.duration_since(*t0).as_secs_f64();
                    // The copies acknowledge keys a batch (200) at a time: over less than
                    // ETA_WINDOW the first copies' rate is more batches than rate, and an
                    // ETA from it was seen 35 % off early in a move. No ETA until then.
                    let copy_rate = if dt >= ETA_WINDOW.as_secs_f64() {
                        c1.saturating_sub(*c0) as f64 / dt
                    } else {
                        0.0
                    };
                    (
                        k1.saturating_sub(*k0) as f64 / dt,
                        b1.saturating_sub(*b0) as f64 / dt,
                        copy_rate,
                    )
                }
                _ => (0.0, 0.0, 0.0),
            }
        };
        let moved = p.moved.lock().expect("progress lock poisoned").clone();
        let mut slots: Vec<SlotProgress> = view
            .slots
            .values()
            .cloned()
            .map(|mut s| {
                s.keys_moved = moved.get(&s.slot).copied().unwrap_or(s.keys_moved);
                s
            })
            .collect();
        // Slots queued that the driver has not taken yet.
        for s in self.slot_models() {
            if let Some(a) = &s.action
                && !view.slots.contains_key(&s.id)
            {
                slots.push(SlotProgress {
                    slot: s.id,
                    state: a.state,
                    phase: MigrationPhase::Pending,
                    source: a.source,
                    target: a.target,
                    aborting: a.aborting,
                    keys_moved: 0,
                    round: 0,
                    changed_last_round: 0,
                    converged: false,
                });
            }
        }
        slots.sort_by_key(|s| s.slot);
        let pending = slots
            .iter()
            .filter(|s| s.phase == MigrationPhase::Pending)
            .count();
        let keys_left = run
            .as_ref()
            .filter(|r| r.running && !slots.is_empty())
            .and_then(|r| r.keys_left);
        let eta_secs = keys_left.and_then(|k| {
            if k == 0 {
                Some(0.0)
            } else {
                (copy_rate > 0.0).then(|| k as f64 / copy_rate)
            }
        });
        let slowest = p
            .slowest
            .lock()
            .expect("progress lock poisoned")
            .clone()
            .map(|(ms, command)| SlowestCommand { ms, command });
        MigrationStatus {
            in_flight: slots.len() - pending,
            pending,
            keys_moved: total,
            bytes_moved: bytes,
            keys_per_sec: rate,
            bytes_per_sec: byte_rate,
            run_keys_moved: run
                .as_ref()
                .filter(|r| r.running)
                .map_or(0, |r| r.keys_moved),
            run_bytes_moved: run
                .as_ref()
                .filter(|r| r.running)
                .map_or(0, |r| r.bytes_moved),
            keys_left,
            eta_secs,
            run,
            throttle: self.migrations.throttle.limits(),
            slowest_command: slowest,
            blocked: view.blocked.clone(),
            max_slots_in_flight: self.opts.max_slots_in_flight,
            abort_pending: self.abort_pending(),
            write_pause: pause_stats(&view.pauses),
            holds: if view.run.is_some() {
                self.migrations.jobs.last_holds()
            } else {
                Vec::new()
            },
            slots,
        }
    }
}

/// A slot the driver drives.
struct Driven {
    slot: Slot,
    source: GroupId,
    target: GroupId,
    round: u32,
    changed: usize,
    converged: bool,
    /// Since when it has been ready for a handoff.
    ready_since: Option<Instant>,
    /// When the push that held it went out (for the write pause).
    held_since: Option<Instant>,
}

/// The driver: the only owner of the slots' state machines.
struct Driver {
    d: Arc<Dashboard>,
    slots: BTreeMap<u16, Driven>,
    /// Actions to carry out, per slot, in order.
    todo: Vec<(u16, Action)>,
    /// Records to write once no handoff holds clients (`carry_out`): slot → (state,
    /// owner is the target, durable), `None` for a record cleared.
    postponed: BTreeMap<u16, Option<(Persisted, bool, bool)>>,
    copies: BTreeMap<GroupId, CopyHandle>,
    reports: mpsc::UnboundedSender<(String, Report)>,
    /// Slots of a migration from before v3 that was left half-way (not driven).
    legacy: BTreeSet<u16>,
    /// The topology last committed when the driver started: which slots' switch a
    /// predecessor had pushed.
    committed: Option<tessera_model::router::Topology>,
    blocked: Option<String>,
    /// Per source, copies lost in a row and when the next may start.
    retry: BTreeMap<GroupId, (u32, Instant)>,
    /// Slots whose copy waits for its source's `retry` time.
    deferred: BTreeMap<GroupId, BTreeSet<u16>>,
    /// Slots of the run whose migration went away without an abort or a finish.
    gone: Vec<u16>,
}

/// The background driver.
pub(super) async fn run(d: Arc<Dashboard>) {
    let Some(mut inbox) = d
        .migrations
        .inbox_rx
        .lock()
        .expect("inbox lock poisoned")
        .take()
    else {
        return;
    };
    let (reports_tx, mut reports) = mpsc::unbounded_channel();
    let mut driver = Driver {
        d: d.clone(),
        slots: BTreeMap::new(),
        todo: Vec::new(),
        postponed: BTreeMap::new(),
        copies: BTreeMap::new(),
        reports: reports_tx,
        legacy: BTreeSet::new(),
        blocked: None,
        committed: None,
        retry: BTreeMap::new(),
        deferred: BTreeMap::new(),
        gone: Vec::new(),
    };
    match model::read::<tessera_model::router::Topology>(&*d.store, &d.paths.topology()).await {
        Ok(t) => driver.committed = t.map(|(t, _)| t),
        Err(e) => {
            warn!(error = %e, "could not read the committed topology; migrations found half-way are released and copied again")
        }
    }
    let mut aborts: Vec<AbortRequest> = Vec::new();
    loop {
        let msg = tokio::select! {
            m = inbox.recv() => m,
            r = reports.recv() => r.map(|(_, r)| Msg::Copy(r)),
            _ = tokio::time::sleep(TICK) => None,
        };
        driver.adopt();
        let mut msgs: Vec<Msg> = msg.into_iter().collect();
        while let Ok(m) = inbox.try_recv() {
            msgs.push(m);
        }
        while let Ok((_, r)) = reports.try_recv() {
            msgs.push(Msg::Copy(r));
        }
        for m in msgs {
            match m {
                Msg::Abort(r) => aborts.push(r),
                m => driver.message(m),
            }
        }
        let aborted = !aborts.is_empty();
        for r in std::mem::take(&mut aborts) {
            driver.abort(&r);
        }
        driver.step().await;
        // The persisted request goes once the aborted slots are saved as such.
        if aborted && driver.todo.is_empty() {
            driver.aborts_applied().await;
        }
        driver.publish();
        d.save_jobs().await;
    }
}

impl Driver {
    /// Takes over the slots the store says migrate and the driver does not drive yet: newly
    /// queued ones, and at start every one a predecessor left.
    fn adopt(&mut self) {
        let models = self.d.slot_models();
        for s in &models {
            let Some(a) = &s.action else {
                continue;
            };
            if self.slots.contains_key(&s.id) || self.legacy.contains(&s.id) {
                continue;
            }
            let owner_target = s.group == Some(a.target);
            // Whether the last topology pushed routes the slot to its target: its switch was
            // committed (only a push after its final copy does that).
            let committed = self.committed.as_ref().is_some_and(|t| {
                t.slots
                    .get(s.id as usize)
                    .is_some_and(|r| r.group == Some(a.target) && !r.blocked)
            });
            let (slot, actions) = match a.state {
                ActionState::Pending => (Slot::pending(), vec![]),
                ActionState::Copying => Slot::resume(Persisted::Copying, false, committed),
                ActionState::Handoff | ActionState::Preparing => {
                    Slot::resume(Persisted::Handoff, false, committed)
                }
                ActionState::Cleanup => Slot::resume(Persisted::Cleanup, owner_target, false),
                // Every key is on the target already; its owner is saved with the cleanup.
                ActionState::Finished => {
                    let (slot, mut actions) = Slot::resume(Persisted::Cleanup, true, false);
                    actions.insert(
                        0,
                        Action::Save {
                            state: Persisted::Cleanup,
                            owner_target: true,
                            durable: true,
                        },
                    );
                    (slot, actions)
                }
                ActionState::Prepared | ActionState::Migrating => {
                    warn!(
                        slot = s.id,
                        "a migration started by a dashboard before v3 is half-way: finish or \
                         abort it with that version (docs/migration.md, upgrading)"
                    );
                    self.legacy.insert(s.id);
                    continue;
                }
            };
            self.slots.insert(
                s.id,
                Driven {
                    slot,
                    source: a.source,
                    target: a.target,
                    round: 0,
                    changed: 0,
                    converged: false,
                    ready_since: None,
                    held_since: None,
                },
            );
            self.todo.extend(actions.into_iter().map(|a| (s.id, a)));
        }
        // Slots whose action went away by other means (a group removed with them).
        let gone: Vec<u16> = self
            .slots
            .keys()
            .copied()
            .filter(|id| models[*id as usize].action.is_none())
            .collect();
        for id in gone {
            if !self.todo.iter().any(|(s, _)| *s == id) {
                self.slots.remove(&id);
                self.gone.push(id);
            }
        }
    }

    /// Feeds `event` to `slot`'s machine and queues what it asks for.
    fn feed(&mut self, slot: u16, event: Event) {
        let Some(d) = self.slots.get_mut(&slot) else {
            return;
        };
        let (next, actions) = d.slot.step(event);
        d.slot = next;
        self.todo.extend(actions.into_iter().map(|a| (slot, a)));
    }

    /// A step of `slots` is held for `why`: the status says so, and the job lists it.
    fn hold(&mut self, slots: impl IntoIterator<Item = u16>, why: String) {
        self.d.migrations.jobs.hold(slots, &why);
        self.blocked = Some(why);
    }

    /// The copy of `slots` stopped: they start over (from the purge), no sooner than their
    /// source's backoff allows.
    fn copy_lost(&mut self, slots: BTreeSet<u16>, why: &str) {
        if let Some(source) = slots
            .first()
            .and_then(|s| self.slots.get(s))
            .map(|d| d.source)
        {
            let (streak, at) = self.retry.entry(source).or_insert((0, Instant::now()));
            let wait = COPY_RETRY
                .saturating_mul(1 << (*streak).min(10))
                .min(COPY_RETRY_MAX);
            *streak += 1;
            *at = Instant::now() + wait;
            let why = format!(
                "the copy from group {source} stopped, starting again in {} ms: {why}",
                wait.as_millis()
            );
            self.hold(slots.iter().copied(), why);
        }
        for s in slots {
            self.feed(s, Event::CaptureLost);
        }
    }

    fn message(&mut self, m: Msg) {
        match m {
            Msg::Wake | Msg::Abort(_) => {}
            Msg::Copy(Report::Round {
                slot,
                round,
                left,
                converged,
            }) => {
                if let Some(d) = self.slots.get_mut(&slot) {
                    d.round = round + 1;
                    d.changed = left;
                    d.converged = converged;
                    // A round ended: the source's copies work again.
                    self.retry.remove(&d.source);
                }
                self.feed(slot, Event::RoundEnded { converged });
            }
            Msg::Copy(Report::Lost { slots, why }) => self.copy_lost(slots, &why),
            Msg::Copy(Report::Final { slots, result }) => {
                let event = match &result {
                    Ok(took) => {
                        info!(
                            slots = slots.len(),
                            ms = took.as_millis() as u64,
                            "final copy done"
                        );
                        Event::FinalCopied
                    }
                    Err(why) => {
                        warn!(slots = slots.len(), reason = %why, "a handoff's final copy did not fit; the slots go on copying");
                        self.hold(
                            slots.iter().copied(),
                            format!("a handoff was given up: {why}"),
                        );
                        Event::FinalFailed
                    }
                };
                for s in slots {
                    if self
                        .slots
                        .get(&s)
                        .is_some_and(|d| d.slot.phase == Phase::Blocked)
                    {
                        self.feed(s, event);
                    }
                }
            }
            Msg::Deleted { slots, result } => match result {
                Ok(n) => {
                    info!(slots = slots.len(), keys = n, "stale keys deleted");
                    for s in slots {
                        self.feed(s, Event::StaleDeleted);
                    }
                }
                Err(e) => {
                    warn!(slots = slots.len(), error = %e, "deleting stale keys failed; trying again");
                    self.hold(slots.iter().copied(), format!("deleting stale keys: {e}"));
                    let tx = self.d.migrations.inbox.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(CLEANUP_RETRY).await;
                        let _ = tx.send(Msg::RetryDelete(slots));
                    });
                }
            },
            Msg::RetryDelete(slots) => {
                for s in slots {
                    if self
                        .slots
                        .get(&s)
                        .is_some_and(|d| matches!(d.slot.phase, Phase::Purging | Phase::Cleanup))
                    {
                        self.todo.push((s, Action::DeleteStale));
                    }
                }
            }
        }
    }

    fn abort(&mut self, r: &AbortRequest) {
        for m in &r.moves {
            let covered = self
                .slots
                .get(&m.slot)
                .is_some_and(|d| d.source == m.source && d.target == m.target);
            if covered {
                self.feed(m.slot, Event::Abort);
            }
        }
    }

    /// The aborts asked for are in the machines: the persisted request goes (one asked for
    /// meanwhile is written again by its caller).
    async fn aborts_applied(&mut self) {
        let taken = self
            .d
            .migrations
            .abort
            .lock()
            .expect("abort lock poisoned")
            .take();
        if taken.is_some()
            && let Err(e) = self.d.store.delete(&self.d.paths.migration_abort()).await
        {
            warn!(error = %e, "could not remove the applied abort request");
        }
    }

    /// One step: start what has room, hand off what is ready, carry out the actions (and
    /// those their results ask for).
    async fn step(&mut self) {
        self.start_deferred().await;
        self.start_pending();
        self.hand_off();
        for _ in 0..8 {
            if self.todo.is_empty() && (self.postponed.is_empty() || self.holding()) {
                break;
            }
            self.carry_out().await;
        }
        self.retire_copies();
        if self.slots.is_empty() && self.legacy.is_empty() {
            self.idle().await;
        }
    }

    /// Copies deferred after a loss start once their source's wait is over (those of slots
    /// that are still copying: an abort may have come meanwhile).
    async fn start_deferred(&mut self) {
        let now = Instant::now();
        let due: Vec<GroupId> = self
            .deferred
            .keys()
            .copied()
            .filter(|g| self.retry.get(g).is_none_or(|(_, at)| *at <= now))
            .collect();
        for source in due {
            let slots: BTreeSet<u16> = self
                .deferred
                .remove(&source)
                .unwrap_or_default()
                .into_iter()
                .filter(|id| {
                    self.slots.get(id).is_some_and(|d| {
                        !d.slot.aborted && matches!(d.slot.phase, Phase::Copying { .. })
                    })
                })
                .collect();
            if !slots.is_empty() {
                self.start_copy(source, slots).await;
            }
        }
    }

    /// Pending slots start, under the cap of slots in flight per group.
    fn start_pending(&mut self) {
        let cap = self.d.opts.max_slots_in_flight.max(1);
        let mut busy: HashMap<GroupId, usize> = HashMap::new();
        for d in self.slots.values() {
            if d.slot.phase != Phase::Pending {
                *busy.entry(d.source).or_default() += 1;
                *busy.entry(d.target).or_default() += 1;
            }
        }
        let ids: Vec<u16> = self
            .slots
            .iter()
            .filter(|(_, d)| d.slot.phase == Phase::Pending)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let (s, t) = {
                let d = &self.slots[&id];
                (d.source, d.target)
            };
            if busy.get(&s).copied().unwrap_or(0) < cap && busy.get(&t).copied().unwrap_or(0) < cap
            {
                *busy.entry(s).or_default() += 1;
                *busy.entry(t).or_default() += 1;
                self.feed(id, Event::Start);
            }
        }
    }

    /// Ready slots of a source are handed off together: once all its copying slots are
    /// ready, or enough of them, or one has waited long enough. The final copy's keys are
    /// bounded over the handoff.
    fn hand_off(&mut self) {
        // Nothing else may be held meanwhile (one handoff at a time keeps pauses short).
        if self
            .slots
            .values()
            .any(|d| matches!(d.slot.phase, Phase::Blocking | Phase::Blocked))
        {
            return;
        }
        let now = Instant::now();
        for d in self.slots.values_mut() {
            if d.slot.ready() {
                d.ready_since.get_or_insert(now);
            } else {
                d.ready_since = None;
            }
        }
        let mut by_source: BTreeMap<GroupId, (Vec<u16>, usize)> = BTreeMap::new();
        for (id, d) in &self.slots {
            if matches!(d.slot.phase, Phase::Copying { .. } | Phase::Purging) {
                by_source.entry(d.source).or_default().1 += 1;
            }
            if d.slot.ready() {
                by_source.entry(d.source).or_default().0.push(*id);
            }
        }
        let mut chosen = Vec::new();
        let mut keys = 0;
        for (_, (ready, copying)) in by_source {
            if ready.is_empty() {
                continue;
            }
            let waited = ready
                .iter()
                .filter_map(|id| self.slots[id].ready_since)
                .min()
                .is_some_and(|t| now - t >= HANDOFF_WAIT);
            if ready.len() < copying && ready.len() < HANDOFF_SLOTS && !waited {
                continue;
            }
            for id in ready {
                let changed = self.slots[&id].changed;
                if chosen.len() >= HANDOFF_SLOTS
                    || (!chosen.is_empty() && keys + changed > HANDOFF_KEYS)
                {
                    break;
                }
                keys += changed;
                chosen.push(id);
            }
        }
        for id in chosen {
            self.feed(id, Event::Handoff);
        }
    }

    /// Some slot's clients are held, or may be: a handoff is under way.
    fn holding(&self) -> bool {
        self.slots.values().any(|d| {
            matches!(
                d.slot.phase,
                Phase::Blocking | Phase::Blocked | Phase::Switching | Phase::Releasing { .. }
            )
        })
    }

    /// Carries out the queued actions: the store first (one write), then one push (its
    /// acknowledgement fed back at once), then the copies and deletions.
    async fn carry_out(&mut self) {
        let todo = std::mem::take(&mut self.todo);
        let mut push = false;
        let mut saves: BTreeMap<u16, Option<(Persisted, bool, bool)>> = BTreeMap::new();
        let mut stop: BTreeMap<GroupId, BTreeSet<u16>> = BTreeMap::new();
        let mut start: BTreeMap<GroupId, BTreeSet<u16>> = BTreeMap::new();
        let mut finals: BTreeMap<GroupId, BTreeSet<u16>> = BTreeMap::new();
        let mut again: BTreeMap<GroupId, BTreeSet<u16>> = BTreeMap::new();
        let mut deletes: BTreeMap<GroupId, BTreeSet<u16>> = BTreeMap::new();
        for (id, action) in todo {
            let Some(d) = self.slots.get(&id) else {
                continue;
            };
            match action {
                Action::Save {
                    state,
                    owner_target,
                    durable,
                } => {
                    saves.insert(id, Some((state, owner_target, durable)));
                }
                Action::Clear => {
                    saves.insert(id, None);
                }
                Action::Push => push = true,
                Action::StopCopy => {
                    stop.entry(d.source).or_default().insert(id);
                }
                Action::StartCopy => {
                    start.entry(d.source).or_default().insert(id);
                }
                Action::FinalCopy => {
                    finals.entry(d.source).or_default().insert(id);
                }
                Action::ReportNext => {
                    again.entry(d.source).or_default().insert(id);
                }
                Action::DeleteStale => {
                    // The group that does not own the slot: after a handoff the source.
                    let group = if d.slot.owned_by_target() {
                        d.source
                    } else {
                        d.target
                    };
                    deletes.entry(group).or_default().insert(id);
                }
            }
        }
        // While a handoff holds clients (from its block push to its owner push), no record
        // is written but the topology: a batch of hundreds of records (slots whose cleanup
        // ended meanwhile) took seconds on a loaded store, all of it write pause. Those
        // records change in memory now (none of them changes a route: they follow an
        // acknowledged push or precede a copy) and are written once nothing is held.
        if self.holding() {
            for (id, save) in saves.iter_mut() {
                match save {
                    None => {
                        self.postponed.insert(*id, None);
                    }
                    Some((state, owner_target, durable)) if *durable => {
                        self.postponed
                            .insert(*id, Some((*state, *owner_target, true)));
                        *durable = false;
                    }
                    Some(_) => {}
                }
            }
            saves.retain(|_, save| save.is_some());
        } else {
            for (id, save) in std::mem::take(&mut self.postponed) {
                saves.entry(id).or_insert(save);
            }
        }
        if let Err(e) = self.save(&saves).await {
            // Nothing was written: the actions wait for the next step.
            self.hold(saves.keys().copied(), format!("writing the store: {e}"));
            for (id, save) in saves {
                if save.is_none_or(|(_, _, durable)| durable) {
                    self.postponed.insert(id, save);
                }
            }
            return;
        }
        for (id, save) in &saves {
            if save.is_none() {
                self.slots.remove(id);
            }
        }
        if push {
            self.push().await;
        }
        for (source, slots) in stop {
            if let Some(h) = self.copies.get(&source) {
                let (tx, rx) = oneshot::channel();
                if h.send(Command::Forget(slots, tx)) {
                    let _ = rx.await;
                }
            }
        }
        let now = Instant::now();
        for (source, slots) in start {
            if self.retry.get(&source).is_some_and(|(_, at)| *at > now) {
                self.deferred.entry(source).or_default().extend(slots);
            } else {
                self.start_copy(source, slots).await;
            }
        }
        for (source, slots) in again {
            if let Some(h) = self.copies.get(&source) {
                h.send(Command::Again(slots));
            }
        }
        for (source, slots) in finals {
            let sent = self
                .copies
                .get(&source)
                .is_some_and(|h| h.send(Command::Final(slots.clone())));
            if !sent {
                for s in slots {
                    self.feed(s, Event::CaptureLost);
                }
            }
        }
        for (group, slots) in deletes {
            self.delete(group, slots);
        }
    }

    /// Changes the slots' records in the dashboard's memory (what the next push routes by),
    /// and writes the durable ones (and the cleared ones) to the store in one batch first.
    async fn save(
        &self,
        saves: &BTreeMap<u16, Option<(Persisted, bool, bool)>>,
    ) -> Result<(), Error> {
        if saves.is_empty() {
            return Ok(());
        }
        let models = self.d.slot_models();
        let mut durable = Vec::new();
        let mut noted = Vec::new();
        for (id, save) in saves {
            let Some(d) = self.slots.get(id) else {
                continue;
            };
            let mut s = models[*id as usize].clone();
            let keep = match save {
                None => {
                    s.action = None;
                    true
                }
                Some((state, owner_target, keep)) => {
                    s.group = Some(if *owner_target { d.target } else { d.source });
                    s.action = Some(SlotAction {
                        state: persisted_state(*state),
                        source: d.source,
                        target: d.target,
                        aborting: d.slot.aborted,
                    });
                    *keep
                }
            };
            if keep {
                durable.push(s);
            } else {
                noted.push(s);
            }
        }
        self.d.save_slots(durable).await?;
        let mut st = self.d.state.lock().expect("state lock poisoned");
        for s in noted {
            let id = s.id as usize;
            st.slots[id] = s;
        }
        Ok(())
    }

    /// Pushes the topology the records describe, with the barrier, and feeds every slot that
    /// waits for a push its outcome.
    async fn push(&mut self) {
        let holding: Vec<u16> = self
            .slots
            .iter()
            .filter(|(_, d)| d.slot.phase == Phase::Blocking)
            .map(|(id, _)| *id)
            .collect();
        let mut epoch = self.d.ops.lock().await;
        let started = Instant::now();
        let outcome = async {
            if !holding.is_empty() {
                // Held only when every proxy answers: one that does not would hold the push,
                // and the slots held on all the others (their clients waiting) meanwhile.
                self.d
                    .barrier_reachable(*epoch + 1)
                    .await
                    .map_err(|e| format!("waiting for proxies: {e}"))?;
            }
            let topo = self
                .d
                .persist_next(&mut epoch)
                .await
                .map_err(|e| e.to_string())?;
            let within = (!holding.is_empty()).then_some(BLOCK_PUSH_TIMEOUT);
            self.d
                .push_all_within(&topo, within)
                .await
                .map(|_| ())
                .map_err(|e| format!("waiting for proxies: {e}"))
        }
        .await;
        drop(epoch);
        let acked = Instant::now();
        for id in &holding {
            if let Some(d) = self.slots.get_mut(id) {
                d.held_since = Some(started);
            }
        }
        let waiting: Vec<u16> = self
            .slots
            .iter()
            .filter(|(_, d)| d.slot.awaits_push())
            .map(|(id, _)| *id)
            .collect();
        tracing::debug!(
            holding = holding.len(),
            ms = acked.duration_since(started).as_millis() as u64,
            ok = outcome.is_ok(),
            "migration push"
        );
        let event = match &outcome {
            Ok(()) => Event::PushAcked,
            Err(why) => {
                warn!(reason = %why, "a migration push did not reach every proxy");
                self.hold(waiting.iter().copied(), why.clone());
                Event::PushFailed
            }
        };
        // The write pause of the slots now routed to their target.
        let mut paused = 0;
        let mut since = None;
        for id in waiting {
            let switching = self
                .slots
                .get(&id)
                .is_some_and(|d| d.slot.phase == Phase::Switching && !d.slot.aborted);
            self.feed(id, event);
            if outcome.is_ok()
                && switching
                && let Some(t) = self.slots.get_mut(&id).and_then(|d| d.held_since.take())
            {
                paused += 1;
                since = Some(since.map_or(t, |s: Instant| s.min(t)));
            }
        }
        if let Some(since) = since {
            self.record_pause(acked.duration_since(since), paused);
        }
    }

    fn record_pause(&self, took: Duration, slots: usize) {
        let ms = took.as_secs_f64() * 1000.0;
        let mut v = self.d.migrations.view.lock().expect("view lock poisoned");
        if v.pauses.len() == MAX_PAUSES {
            v.pauses.remove(0);
        }
        v.pauses.push((ms, slots));
        if let Some(run) = v.run.as_mut() {
            run.peak_pause_ms = Some(run.peak_pause_ms.map_or(ms, |p: f64| p.max(ms)));
        }
        info!(pause_ms = ms as u64, slots, "write pause of a slot handoff");
    }

    /// Starts copying `slots` from `source` (the copy of that source started if needed).
    async fn start_copy(&mut self, source: GroupId, slots: BTreeSet<u16>) {
        let (master, targets) = {
            let st = self.d.state.lock().expect("state lock poisoned");
            let master = st
                .groups
                .get(&source)
                .and_then(|g| g.master())
                .map(str::to_string);
            let targets: BTreeMap<u16, Option<String>> = slots
                .iter()
                .map(|id| {
                    let t = self.slots[id].target;
                    (
                        *id,
                        st.groups
                            .get(&t)
                            .and_then(|g| g.master())
                            .map(str::to_string),
                    )
                })
                .collect();
            (master, targets)
        };
        let targets: Option<BTreeMap<u16, String>> = targets
            .into_iter()
            .map(|(id, t)| t.map(|t| (id, t)))
            .collect();
        let (Some(master), Some(targets)) = (master, targets) else {
            self.copy_lost(slots, &format!("group {source} or a target has no master"));
            return;
        };
        // The slots' first copy starts from nothing (before the copy can report any of it).
        self.d
            .migrations
            .progress
            .start_first(slots.iter().copied());
        let alive = self
            .copies
            .get(&source)
            .is_some_and(|h| h.send(Command::Add(targets.clone())));
        if !alive {
            let m = &self.d.migrations;
            let h = copy::spawn(
                master,
                Some(self.d.backend_admin.clone()),
                m.copy.clone(),
                m.progress.clone(),
                m.throttle.clone(),
                self.reports.clone(),
            );
            h.send(Command::Add(targets));
            self.copies.insert(source, h);
        }
    }

    /// Deletes `slots`' keys on `group` in the background.
    fn delete(&self, group: GroupId, slots: BTreeSet<u16>) {
        let master = {
            let st = self.d.state.lock().expect("state lock poisoned");
            st.groups
                .get(&group)
                .and_then(|g| g.master())
                .map(str::to_string)
        };
        let tx = self.d.migrations.inbox.clone();
        let cred = self.d.backend_admin.clone();
        let config = self.d.migrations.cleanup.clone();
        tokio::spawn(async move {
            let result = match master {
                Some(m) => delete_slots(&m, &slots, Some(&cred), &config)
                    .await
                    .map_err(|e| e.to_string()),
                None => Err(format!("group {group} has no master")),
            };
            let _ = tx.send(Msg::Deleted { slots, result });
        });
    }

    /// Copies of sources with no slot left to copy end.
    fn retire_copies(&mut self) {
        let copying: BTreeSet<GroupId> = self
            .slots
            .values()
            .filter(|d| {
                matches!(
                    d.slot.phase,
                    Phase::Purging
                        | Phase::Copying { .. }
                        | Phase::Blocking
                        | Phase::Blocked
                        | Phase::Releasing { .. }
                )
            })
            .map(|d| d.source)
            .collect();
        self.copies.retain(|g, _| copying.contains(g));
    }

    /// Nothing migrates: the cap and the run's counters end with the migration.
    async fn idle(&mut self) {
        self.blocked = None;
        let had_run = {
            use std::sync::atomic::Ordering::Relaxed;
            let p = &self.d.migrations.progress;
            let mut v = self.d.migrations.view.lock().expect("view lock poisoned");
            match v.run.as_mut().filter(|r| r.ended_unix_ms.is_none()) {
                Some(r) => {
                    r.ended_unix_ms = Some(now_ms());
                    r.moved_at_end = Some((p.total.load(Relaxed), p.bytes.load(Relaxed)));
                    // Slots that left the driver without an abort finished (unless their
                    // migration went away).
                    for (id, s) in r.slots.iter_mut() {
                        s.done |= !s.aborted && !self.gone.contains(id);
                    }
                    let aborted = r.slots.values().filter(|s| s.aborted).count();
                    let keys = p.total.load(Relaxed).saturating_sub(r.moved_at_start.0);
                    self.d.migration_ended(r.slots.len(), aborted, keys);
                    true
                }
                None => {
                    // Nothing ran here: a job a predecessor left running is over.
                    if v.run.is_none() {
                        self.d.migrations.jobs.close_orphan();
                    }
                    false
                }
            }
        };
        if had_run && !self.d.migrations.throttle.limits().is_none() {
            let _ops = self.d.ops.lock().await;
            if self.d.slot_models().iter().all(|s| s.action.is_none())
                && let Err(e) = self.d.set_migration_throttle(Limits::default()).await
            {
                warn!(error = %e, "could not clear the migration throttle");
            }
        }
    }

    /// Why no handoff starts while the only slots left are still copying: the busiest slot
    /// written faster than its rounds copy (after a few rounds, so a first pass is not
    /// reported). The source keeps serving it meanwhile; nothing is held.
    fn not_converging(&self) -> Option<(u16, String)> {
        const ROUNDS: u32 = 3;
        let (id, d) = self
            .slots
            .iter()
            .filter(|(_, d)| matches!(d.slot.phase, Phase::Copying { .. }))
            .filter(|(_, d)| d.round >= ROUNDS && !d.converged)
            .max_by_key(|(_, d)| d.changed)?;
        Some((
            *id,
            format!(
                "slot {id} is written faster than it is copied: {} keys changed during its \
                 last round, a handoff waits for a round that leaves at most {}; its source \
                 keeps serving it meanwhile",
                d.changed, self.d.migrations.copy.converge_keys
            ),
        ))
    }

    /// Publishes the slots' progress for the status.
    fn publish(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        let p = &self.d.migrations.progress;
        let mut v = self.d.migrations.view.lock().expect("view lock poisoned");
        if !self.slots.is_empty() {
            if v.run.as_ref().is_none_or(|r| r.ended_unix_ms.is_some()) {
                self.gone.clear();
                v.run = Some(RunLedger {
                    started_unix_ms: now_ms(),
                    moved_at_start: (p.total.load(Relaxed), p.bytes.load(Relaxed)),
                    ..RunLedger::default()
                });
            }
            let run = v.run.as_mut().expect("just made");
            let mut expected = self
                .d
                .migrations
                .expected
                .lock()
                .expect("expected lock poisoned");
            for (id, d) in &self.slots {
                let e = run.slots.entry(*id).or_insert_with(|| RunSlot {
                    source: d.source,
                    target: d.target,
                    expected: expected.remove(id),
                    ..RunSlot::default()
                });
                let phase = phase_of(d.slot.phase);
                // Before its copy starts, what the progress holds of the slot is an earlier
                // copy's (start_copy resets it).
                e.first = match phase {
                    MigrationPhase::Pending | MigrationPhase::Purging => Default::default(),
                    _ => p.first_of(*id),
                };
                e.recopy = if phase == MigrationPhase::Copying && d.round > 0 {
                    d.changed as u64
                } else {
                    0
                };
                e.aborted |= d.slot.aborted;
                e.done = is_done(phase) && !e.aborted;
            }
            // Slots that left the driver: finished, unless aborted or gone.
            for (id, e) in run.slots.iter_mut() {
                if !self.slots.contains_key(id) {
                    e.done = !e.aborted && !self.gone.contains(id);
                }
            }
        }
        if let Some(run) = v.run.as_ref() {
            let moved = (p.total.load(Relaxed), p.bytes.load(Relaxed));
            self.d.migrations.jobs.observe(run, moved, &self.gone);
        }
        v.slots = self
            .slots
            .iter()
            .map(|(id, d)| {
                (
                    *id,
                    SlotProgress {
                        slot: *id,
                        state: persisted_state(d.slot.persisted().unwrap_or(Persisted::Cleanup)),
                        phase: phase_of(d.slot.phase),
                        source: d.source,
                        target: d.target,
                        aborting: d.slot.aborted,
                        keys_moved: 0,
                        round: d.round,
                        changed_last_round: d.changed,
                        converged: d.converged,
                    },
                )
            })
            .collect();
        v.blocked = if self.legacy.is_empty() {
            self.blocked.clone().or_else(|| {
                let (id, why) = self.not_converging()?;
                // Listed once per slot in a row, not per round (the count changes).
                let hold = format!(
                    "slot {id} is written faster than it is copied; a handoff waits for a \
                     round that leaves at most {} keys",
                    self.d.migrations.copy.converge_keys
                );
                self.d.migrations.jobs.hold([id], &hold);
                Some(why)
            })
        } else {
            Some(format!(
                "slots {:?} are half-way through a migration a dashboard before v3 started: \
                 finish or abort it with that version (docs/migration.md)",
                self.legacy
            ))
        };
        self.d.migration_hold(v.blocked.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::pause_stats;

    #[test]
    fn pause_percentiles_count_each_slot_of_a_handoff() {
        assert!(pause_stats(&[]).is_none());
        // 98 slots paused 10 ms, one 40 ms, one 900 ms (two handoffs of one slot last).
        let p = pause_stats(&[(10.0, 98), (40.0, 1), (900.0, 1)]).unwrap();
        assert_eq!((p.handoffs, p.slots), (3, 100));
        assert_eq!(p.p50_ms, 10.0);
        assert_eq!(p.p99_ms, 40.0);
        assert_eq!(p.max_ms, 900.0);
        assert_eq!(p.last_ms, 900.0);
    }
}
