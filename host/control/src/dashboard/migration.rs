//! Driving slot migrations: the per-slot state machine of DESIGN.md §4, persisted at every
//! step. pending → preparing (push "owner = target, from = source" with a barrier) → prepared
//! → migrating (the mover moves keys; proxies move those they touch) → finished (a full pass
//! found none; push "owner = target") → done. An abort turns a migration around.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Dashboard;
use crate::Error;
use crate::migrate::mover::{Mover, MoverConfig, Progress};
use crate::migrate::plan::Move;
use crate::migrate::throttle::{Limits, Throttle};
use tessera_model::router::{GroupId, SLOTS};
use tessera_store::model::{self, ActionState, SlotAction, SlotModel};
use tessera_wire::migration::{MigrationStatus, PauseStats, SlotProgress, SlowestCommand};

/// Migration bookkeeping the dashboard keeps in memory (the actions themselves are in the
/// store): progress counters, rate samples, and why the driver is held, if it is.
#[derive(Default)]
pub(crate) struct Migrations {
    pub(crate) progress: Arc<Progress>,
    pub(crate) blocked: Mutex<Option<String>>,
    /// (when, total keys moved, total bytes moved) samples for the rates.
    samples: Mutex<Vec<(Instant, u64, u64)>>,
    pub(crate) config: MoverConfig,
    /// Asks a running mover pass to stop at its next batch (abort).
    stop: std::sync::atomic::AtomicBool,
    /// Held for a mover pass.
    passing: tokio::sync::Mutex<()>,
    /// An abort answered but not yet applied: the driver turns the slots around at the top
    /// of its next step (also persisted, `Paths::migration_abort`, for a successor).
    abort: Mutex<Option<AbortRequest>>,
    /// When the slots now held for a handoff were first pushed blocked.
    blocked_since: Mutex<Option<Instant>>,
    /// A step that could not block its slots (a proxy does not answer) tries again then.
    retry_at: Mutex<Option<Instant>>,
    /// The last handoffs' write pauses: (milliseconds, slots handed over).
    pauses: Mutex<Vec<(f64, usize)>>,
    /// The running migration's speed cap (persisted, `Paths::migration_throttle`).
    pub(crate) throttle: Throttle,
    /// (keys, bytes) moved when the running migration started: the driver last found work
    /// after none.
    run_start: Mutex<Option<(u64, u64)>>,
    /// Slots saved as done whose table no proxy may have yet (its push is still to succeed):
    /// the status lists them as `finished` until it has, so that a migration reads idle only
    /// once every proxy routes its slots to their new owner.
    finishing: Mutex<BTreeMap<u16, SlotProgress>>,
}

/// How long the driver waits before trying again to block slots that a proxy held up.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// How long each proxy has to acknowledge a push that blocks slots, well inside a proxy's
/// `slot_hold_ms` (5 s by default): past it the block is taken back (`take_back_block`)
/// rather than leaving the other proxies' clients held until they get `-TRYAGAIN`.
const BLOCK_PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Handoffs whose pause is kept for the status.
const MAX_PAUSES: usize = 1000;

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
/// whose action has changed since (finished, or queued again) is left alone.
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

impl AbortRequest {
    fn covers(&self, s: &SlotModel) -> bool {
        s.action.as_ref().is_some_and(|a| {
            self.moves
                .iter()
                .any(|m| m.slot == s.id && m.source == a.source && m.target == a.target)
        })
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
    pub async fn migrate_slots(&self, from: u32, to: u32, group: GroupId) -> Result<usize, Error> {
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
        self.queue(&moves).await?;
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

    pub(super) async fn queue(&self, moves: &[Move]) -> Result<(), Error> {
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
        self.save_slots(queued).await
    }

    /// Aborts the migration of the given slots (all when `None`): pending ones are dropped,
    /// started ones turn around and move their keys back. Finished ones are done already.
    /// Answers at once with how many slots will turn: the request is persisted, the running
    /// mover pass asked to stop at its next batch, and the driver applies it at the top of
    /// its next step (`apply_abort`), between barrier pushes and with no pass running.
    ///
    /// # Errors
    /// The store fails.
    pub async fn abort_migrations(&self, which: Option<BTreeSet<u16>>) -> Result<usize, Error> {
        let asked: Vec<AbortedMove> = self
            .slot_models()
            .iter()
            .filter(|s| which.as_ref().is_none_or(|w| w.contains(&s.id)))
            .filter_map(|s| {
                let a = s.action.as_ref()?;
                (!a.aborting && a.state != ActionState::Finished).then_some(AbortedMove {
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
            for m in asked {
                if !r.moves.contains(&m) {
                    r.moves.push(m);
                }
            }
            r.clone()
        };
        model::write(&*self.store, &self.paths.migration_abort(), &request).await?;
        self.migrations
            .stop
            .store(true, std::sync::atomic::Ordering::SeqCst);
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

    /// Reads an abort asked of a predecessor and not yet applied (at start).
    ///
    /// # Errors
    /// The store fails.
    pub(crate) async fn load_abort(&self) -> Result<(), Error> {
        if let Some((r, _)) =
            model::read::<AbortRequest>(&*self.store, &self.paths.migration_abort()).await?
        {
            *self.migrations.abort.lock().expect("abort lock poisoned") = Some(r);
        }
        Ok(())
    }

    /// Turns around the slots of an abort asked for, if any. The caller holds `ops`, and no
    /// mover pass runs (no pass of the old direction may run once the slots turn around: it
    /// could stage or copy a key the new direction's proxies then look for in the wrong place).
    async fn apply_abort(&self) -> Result<(), Error> {
        let Some(request) = self
            .migrations
            .abort
            .lock()
            .expect("abort lock poisoned")
            .clone()
        else {
            return Ok(());
        };
        let mut turned = Vec::new();
        for mut s in self.slot_models() {
            let Some(a) = s.action.clone() else { continue };
            if !request.covers(&s) || a.aborting {
                continue;
            }
            match a.state {
                ActionState::Pending => s.action = None,
                ActionState::Finished => continue,
                _ => {
                    s.action = Some(SlotAction {
                        state: ActionState::Preparing,
                        source: a.target,
                        target: a.source,
                        aborting: true,
                    })
                }
            }
            turned.push(s);
        }
        let n = turned.len();
        self.save_slots(turned).await?;
        {
            // A request merged in meanwhile stays for the next step.
            let mut pending = self.migrations.abort.lock().expect("abort lock poisoned");
            if pending.as_ref() == Some(&request) {
                *pending = None;
                self.migrations
                    .stop
                    .store(false, std::sync::atomic::Ordering::SeqCst);
            }
        }
        if !self.abort_pending() {
            self.store.delete(&self.paths.migration_abort()).await?;
            // One asked for while the delete ran is written again.
            let again = self
                .migrations
                .abort
                .lock()
                .expect("abort lock poisoned")
                .clone();
            if let Some(r) = again {
                model::write(&*self.store, &self.paths.migration_abort(), &r).await?;
            }
        }
        info!(slots = n, "migrations aborted");
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

    /// Nothing left to move: the migration's cap and run counters end with it.
    async fn migration_idle(&self) {
        self.migrations
            .run_start
            .lock()
            .expect("run lock poisoned")
            .take();
        if !self.migrations.throttle.limits().is_none() {
            // A migration queued meanwhile keeps the cap its start set.
            let _ops = self.ops.lock().await;
            if self.slot_models().iter().all(|s| s.action.is_none())
                && let Err(e) = self.set_migration_throttle(Limits::default()).await
            {
                warn!(error = %e, "could not clear the migration throttle");
            }
        }
    }

    /// The slots saved as done whose table is still to reach every proxy.
    fn finishing_slots(&self) -> BTreeMap<u16, SlotProgress> {
        self.migrations
            .finishing
            .lock()
            .expect("finishing lock poisoned")
            .clone()
    }

    /// Whether some slot saved as done still waits for its table to reach every proxy.
    fn any_finishing(&self) -> bool {
        !self
            .migrations
            .finishing
            .lock()
            .expect("finishing lock poisoned")
            .is_empty()
    }

    pub fn migration_status(&self) -> MigrationStatus {
        let slots = self.slot_models();
        let moved = self
            .migrations
            .progress
            .moved
            .lock()
            .expect("progress lock poisoned")
            .clone();
        let total = self
            .migrations
            .progress
            .total
            .load(std::sync::atomic::Ordering::Relaxed);
        let bytes = self
            .migrations
            .progress
            .bytes
            .load(std::sync::atomic::Ordering::Relaxed);
        let (rate, byte_rate) = {
            let mut samples = self
                .migrations
                .samples
                .lock()
                .expect("samples lock poisoned");
            let now = Instant::now();
            samples.push((now, total, bytes));
            samples.retain(|(t, _, _)| now.duration_since(*t) < Duration::from_secs(10));
            match (samples.first(), samples.last()) {
                (Some((t0, k0, b0)), Some((t1, k1, b1))) if t1 > t0 => {
                    let dt = t1.duration_since(*t0).as_secs_f64();
                    ((k1 - k0) as f64 / dt, (b1 - b0) as f64 / dt)
                }
                _ => (0.0, 0.0),
            }
        };
        let finishing = self.finishing_slots();
        let mut active: Vec<SlotProgress> = slots
            .iter()
            .filter_map(|s| {
                let a = s.action.as_ref()?;
                Some(SlotProgress {
                    slot: s.id,
                    state: a.state,
                    source: a.source,
                    target: a.target,
                    aborting: a.aborting,
                    keys_moved: moved.get(&s.id).copied().unwrap_or(0),
                })
            })
            .filter(|p| !finishing.contains_key(&p.slot))
            .collect();
        active.extend(finishing.into_values());
        active.sort_by_key(|p| p.slot);
        let pending = active
            .iter()
            .filter(|p| p.state == ActionState::Pending)
            .count();
        // Keys left: per source group, its master's keys over the slots it owns (moving ones
        // included), times its slots still to move, less what was moved of them.
        let keys_left = {
            let st = self.state.lock().expect("state lock poisoned");
            let mut owned: HashMap<GroupId, u64> = HashMap::new();
            for s in &slots {
                if let Some(g) = s.group {
                    *owned.entry(g).or_default() += 1;
                }
            }
            let left: u64 = active
                .iter()
                .filter(|p| p.state <= ActionState::Migrating)
                .map(|p| {
                    let keys = st
                        .groups
                        .get(&p.source)
                        .and_then(|g| g.master())
                        .and_then(|m| st.servers.get(m))
                        .and_then(|h| h.keys)
                        .unwrap_or(0);
                    let per_slot = keys / owned.get(&p.source).copied().unwrap_or(1).max(1);
                    per_slot.saturating_sub(p.keys_moved)
                })
                .sum();
            (!active.is_empty()).then_some(left)
        };
        let (run_keys, run_bytes) = self
            .migrations
            .run_start
            .lock()
            .expect("run lock poisoned")
            .map_or((0, 0), |(k, b)| (total - k, bytes - b));
        let slowest = self
            .migrations
            .progress
            .slowest
            .lock()
            .expect("progress lock poisoned")
            .clone()
            .map(|(ms, command)| SlowestCommand { ms, command });
        MigrationStatus {
            in_flight: active.len() - pending,
            pending,
            slots: active,
            keys_moved: total,
            bytes_moved: bytes,
            keys_per_sec: rate,
            bytes_per_sec: byte_rate,
            run_keys_moved: run_keys,
            run_bytes_moved: run_bytes,
            keys_left,
            eta_secs: keys_left.filter(|_| rate > 0.0).map(|k| k as f64 / rate),
            throttle: self.migrations.throttle.limits(),
            slowest_command: slowest,
            blocked: self
                .migrations
                .blocked
                .lock()
                .expect("blocked lock poisoned")
                .clone(),
            max_slots_in_flight: self.opts.max_slots_in_flight,
            abort_pending: self.abort_pending(),
            write_pause: pause_stats(&self.migrations.pauses.lock().expect("pauses lock poisoned")),
        }
    }

    /// Commits (pushes) the topology with the slots in `from`, then moves them to `to`:
    /// persisted when `persist`, else in memory only (see the caller). Returns when the
    /// push started and when every proxy had acknowledged it.
    async fn advance(
        &self,
        epoch: &mut u64,
        from: ActionState,
        to: ActionState,
        persist: bool,
        within: Option<Duration>,
    ) -> Result<(Instant, Instant), Error> {
        let topo = self.persist_next(epoch).await?;
        let pushed = Instant::now();
        self.push_all_within(&topo, within).await?;
        let acknowledged = Instant::now();
        let advanced: Vec<SlotModel> = self
            .slot_models()
            .into_iter()
            .filter_map(|mut s| {
                let a = s.action.as_mut().filter(|a| a.state == from)?;
                a.state = to;
                Some(s)
            })
            .collect();
        if persist {
            // One batched write: slot by slot, 512 slots took seconds of fsyncs, with the
            // cluster's change lock held (and an abort waiting for it).
            self.save_slots(advanced).await?;
        } else {
            let mut st = self.state.lock().expect("state lock poisoned");
            for s in advanced {
                let id = s.id as usize;
                st.slots[id] = s;
            }
        }
        Ok((pushed, acknowledged))
    }

    /// One mover pass of `slots` from `source` to `target`; the slots it found none of are
    /// finished.
    ///
    /// # Errors
    /// Why the pass could not run or failed, for the status.
    async fn pass_once(
        &self,
        source: GroupId,
        target: GroupId,
        aborting: bool,
        slots: &BTreeSet<u16>,
    ) -> Result<(), Error> {
        let addrs = {
            let st = self.state.lock().expect("state lock poisoned");
            let m = |g: GroupId| {
                st.groups
                    .get(&g)
                    .and_then(|g| g.master())
                    .map(str::to_string)
            };
            m(source).zip(m(target))
        };
        let Some((src, dst)) = addrs else {
            return Err(Error::conflict(format!(
                "group {source} or {target} has no master"
            )));
        };
        let mover = Mover {
            source: &src,
            target: &dst,
            slots,
            config: &self.migrations.config,
            progress: &self.migrations.progress,
            aborting,
            stop: &self.migrations.stop,
            credential: Some(&self.backend_admin),
            throttle: &self.migrations.throttle,
        };
        let complete = mover.pass().await.map_err(|error| Error::Move {
            source,
            target,
            error,
        })?;
        if !complete {
            return Ok(()); // stopped for an abort: nothing is finished
        }
        let _ops = self.ops.lock().await;
        let models = self.slot_models();
        let finished: Vec<SlotModel> = slots
            .iter()
            .filter_map(|id| {
                let mut s = models[*id as usize].clone();
                let a = s.action.as_mut().filter(|a| {
                    a.state == ActionState::Migrating
                        && (a.source, a.target, a.aborting) == (source, target, aborting)
                })?;
                a.state = ActionState::Finished;
                Some(s)
            })
            .collect();
        self.save_slots(finished).await
    }

    /// A handoff's write pause: the slots blocked since `since` (the push that blocked them
    /// started) were routed to their target on every proxy at `until`.
    fn record_pause(&self, since: Instant, until: Instant, slots: usize) {
        let ms = until.duration_since(since).as_secs_f64() * 1000.0;
        let mut p = self.migrations.pauses.lock().expect("pauses lock poisoned");
        if p.len() == MAX_PAUSES {
            p.remove(0);
        }
        p.push((ms, slots));
        info!(pause_ms = ms as u64, slots, "write pause of a slot handoff");
    }

    fn set_blocked(&self, why: Option<String>) {
        if let Some(w) = &why {
            warn!(reason = %w, "migration held");
        }
        *self
            .migrations
            .blocked
            .lock()
            .expect("blocked lock poisoned") = why;
    }

    /// Holds the driver back for [`RETRY_AFTER`], saying why.
    fn hold_back(&self, why: String) {
        self.set_blocked(Some(why));
        *self
            .migrations
            .retry_at
            .lock()
            .expect("retry lock poisoned") = Some(Instant::now() + RETRY_AFTER);
    }

    /// A push that blocks slots reached some proxies and not all: the block is taken back.
    /// The slots go back to pending (not those of an abort, which were routed to their
    /// target before and stay blocked), and a table that serves them from their source again is
    /// pushed to every proxy that takes it, so the proxies that got the block stop holding
    /// their clients' commands while the step waits for the others. Safe without the
    /// barrier: no proxy has routed a slot to its target yet, and both tables a proxy may
    /// run meanwhile serve it from the source or not at all.
    async fn take_back_block(&self, epoch: &mut u64, why: &Error) {
        let why = held_by(why);
        let back: Vec<SlotModel> = self
            .slot_models()
            .into_iter()
            .filter_map(|mut s| {
                let a = s
                    .action
                    .as_mut()
                    .filter(|a| a.state == ActionState::Preparing && !a.aborting)?;
                a.state = ActionState::Pending;
                Some(s)
            })
            .collect();
        let unblocked = match self.save_slots(back).await {
            Ok(()) => self.persist_next(epoch).await,
            Err(e) => Err(e),
        };
        let missed = match unblocked {
            Ok(topo) => self.push_reachable(&topo).await,
            Err(e) => vec![format!("the store ({e})")],
        };
        self.migrations
            .blocked_since
            .lock()
            .expect("pause lock poisoned")
            .take();
        if missed.is_empty() {
            self.hold_back(format!("{why}; the block is taken back"));
        } else {
            self.hold_back(format!(
                "{why}; the block is taken back, not yet on {}",
                missed.join(", ")
            ));
        }
    }

    /// One step of the driver; returns whether there is migration work left.
    async fn migration_step(&self) -> bool {
        let retry_at = *self
            .migrations
            .retry_at
            .lock()
            .expect("retry lock poisoned");
        if retry_at.is_some_and(|at| Instant::now() < at) && !self.abort_pending() {
            return true;
        }
        if self.abort_pending() {
            let _ops = self.ops.lock().await;
            if let Err(e) = self.apply_abort().await {
                self.set_blocked(Some(format!("applying an abort: {e}")));
                return true;
            }
        }
        let slots = self.slot_models();
        if slots.iter().all(|s| s.action.is_none()) && !self.any_finishing() {
            self.migration_idle().await;
            return false;
        }
        self.migrations
            .run_start
            .lock()
            .expect("run lock poisoned")
            .get_or_insert_with(|| {
                let p = &self.migrations.progress;
                (
                    p.total.load(std::sync::atomic::Ordering::Relaxed),
                    p.bytes.load(std::sync::atomic::Ordering::Relaxed),
                )
            });
        // pending → preparing, under the cap of slots in flight per group.
        let cap = self.opts.max_slots_in_flight.max(1);
        let mut busy: HashMap<GroupId, usize> = HashMap::new();
        for a in slots
            .iter()
            .filter_map(|s| s.action.as_ref())
            .filter(|a| a.state != ActionState::Pending)
        {
            *busy.entry(a.source).or_default() += 1;
            *busy.entry(a.target).or_default() += 1;
        }
        let mut epoch = self.ops.lock().await;
        let mut prepared_any = false;
        let mut started = Vec::new();
        for mut s in self.slot_models() {
            let Some(a) = s.action.as_mut() else { continue };
            if a.state == ActionState::Pending
                && busy.get(&a.source).copied().unwrap_or(0) < cap
                && busy.get(&a.target).copied().unwrap_or(0) < cap
            {
                *busy.entry(a.source).or_default() += 1;
                *busy.entry(a.target).or_default() += 1;
                a.state = ActionState::Preparing;
                started.push(s.clone());
            }
            prepared_any |= s
                .action
                .as_ref()
                .is_some_and(|a| a.state == ActionState::Preparing);
        }
        if let Err(e) = self.save_slots(started).await {
            self.set_blocked(Some(e.to_string()));
            return true;
        }
        // Two phases, each only after every online proxy acknowledged the previous one:
        // preparing (the slot is blocked on every proxy) → prepared (owner = target, moving
        // from source) → migrating. While one proxy may still route the old way no proxy
        // serves the slot, so no write can land on a copy that another proxy moves away.
        //
        // Between the two pushes the slots serve no one (proxies hold their commands): the
        // write pause. Only the second push's epoch and topology are written in it; the
        // slots' `prepared` state is kept in memory and persisted as `migrating` after. A
        // successor that finds them `preparing` blocks them again, which is safe.
        if prepared_any {
            // Blocked only when every proxy answers: one that does not would hold the push,
            // and the slots blocked on all the others (their clients held) meanwhile.
            if let Err(e) = self.barrier_reachable(*epoch + 1).await {
                self.hold_back(held_by(&Error::from(e)));
                return true;
            }
            match self
                .advance(
                    &mut epoch,
                    ActionState::Preparing,
                    ActionState::Prepared,
                    false,
                    Some(BLOCK_PUSH_TIMEOUT),
                )
                .await
            {
                Ok((since, _)) => {
                    self.migrations
                        .blocked_since
                        .lock()
                        .expect("pause lock poisoned")
                        .get_or_insert(since);
                }
                Err(e) => {
                    self.take_back_block(&mut epoch, &e).await;
                    return true;
                }
            }
        }
        let routed: usize = self
            .slot_models()
            .iter()
            .filter(|s| {
                s.action
                    .as_ref()
                    .is_some_and(|a| a.state == ActionState::Prepared)
            })
            .count();
        if routed > 0 {
            let until = match self
                .advance(
                    &mut epoch,
                    ActionState::Prepared,
                    ActionState::Migrating,
                    true,
                    None,
                )
                .await
            {
                Ok((_, until)) => until,
                Err(e) => {
                    self.set_blocked(Some(held_by(&e)));
                    return true;
                }
            };
            let since = self
                .migrations
                .blocked_since
                .lock()
                .expect("pause lock poisoned")
                .take();
            if let Some(since) = since {
                self.record_pause(since, until, routed);
            }
        }
        // finished → done: push "owner = target" and clear the action.
        let finished: Vec<SlotModel> = self
            .slot_models()
            .into_iter()
            .filter(|s| {
                s.action
                    .as_ref()
                    .is_some_and(|a| a.state == ActionState::Finished)
            })
            .collect();
        if !finished.is_empty() {
            {
                let moved = self
                    .migrations
                    .progress
                    .moved
                    .lock()
                    .expect("progress lock poisoned");
                let mut finishing = self
                    .migrations
                    .finishing
                    .lock()
                    .expect("finishing lock poisoned");
                for s in &finished {
                    let a = s.action.as_ref().expect("filtered on action");
                    finishing.insert(
                        s.id,
                        SlotProgress {
                            slot: s.id,
                            state: ActionState::Finished,
                            source: a.source,
                            target: a.target,
                            aborting: a.aborting,
                            keys_moved: moved.get(&s.id).copied().unwrap_or(0),
                        },
                    );
                }
            }
            let done: Vec<SlotModel> = finished
                .iter()
                .cloned()
                .map(|mut s| {
                    let a = s.action.take().expect("filtered on action");
                    s.group = Some(a.target);
                    s
                })
                .collect();
            if let Err(e) = self.save_slots(done).await {
                self.set_blocked(Some(e.to_string()));
                return true;
            }
            if let Err(e) = self.commit(&mut epoch).await {
                self.hold_back(held_by(&e));
                return true;
            }
        } else if self.any_finishing() {
            // Saved as done at a step whose push failed: that epoch again, not a new one.
            let pushed = match self.committed_topology(*epoch).await {
                Ok(topo) => self.push_all(&topo).await.map(|_| ()).map_err(Error::from),
                Err(e) => Err(e),
            };
            if let Err(e) = pushed {
                self.hold_back(held_by(&e));
                return true;
            }
        }
        // Done once every proxy has the table that says so.
        let done = std::mem::take(
            &mut *self
                .migrations
                .finishing
                .lock()
                .expect("finishing lock poisoned"),
        );
        if !done.is_empty() {
            let mut moved = self
                .migrations
                .progress
                .moved
                .lock()
                .expect("progress lock poisoned");
            for slot in done.keys() {
                moved.remove(slot);
            }
            info!(slots = done.len(), "slots migrated");
        }
        drop(epoch);
        if self.slot_models().iter().all(|s| s.action.is_none()) {
            // The last slots are done: the cap and the run's counters end now.
            self.migration_idle().await;
            return false;
        }
        // migrating: one mover pass per (source, target). Listed once the passing lock is
        // ours: an abort that held it meanwhile has turned slots around, and a pass of the
        // old direction must not start after it (nor move keys the abort is bringing back).
        let _passing = self.migrations.passing.lock().await;
        if self.abort_pending() {
            return true; // the next step turns the slots around first
        }
        let mut jobs: BTreeMap<(GroupId, GroupId, bool), BTreeSet<u16>> = BTreeMap::new();
        for s in self.slot_models() {
            if let Some(a) = s
                .action
                .as_ref()
                .filter(|a| a.state == ActionState::Migrating)
            {
                jobs.entry((a.source, a.target, a.aborting))
                    .or_default()
                    .insert(s.id);
            }
        }
        // Different sources in parallel (each pass has its own connections); one source's
        // moves to several targets one after the other, so a source is scanned once at a time.
        let mut by_source: BTreeMap<GroupId, Vec<(GroupId, bool, BTreeSet<u16>)>> = BTreeMap::new();
        for ((source, target, aborting), slots) in jobs {
            by_source
                .entry(source)
                .or_default()
                .push((target, aborting, slots));
        }
        let passes = by_source.into_iter().map(|(source, moves)| async move {
            for (target, aborting, slots) in moves {
                self.pass_once(source, target, aborting, &slots).await?;
            }
            Ok::<(), Error>(())
        });
        let failed: Vec<String> = futures_util::future::join_all(passes)
            .await
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect();
        if !failed.is_empty() {
            self.set_blocked(Some(failed.join("; ")));
            return true;
        }
        self.set_blocked(None);
        true
    }
}

/// Why the driver is held, as the status says it: a push some proxies did not acknowledge
/// is the driver waiting for them.
fn held_by(e: &Error) -> String {
    match e {
        Error::PushIncomplete(e) => format!("waiting for proxies: {e}"),
        e => e.to_string(),
    }
}

/// The background driver.
pub(super) async fn run(d: Arc<Dashboard>) {
    loop {
        let busy = d.migration_step().await;
        let pause = if busy {
            Duration::from_millis(20)
        } else {
            Duration::from_millis(200)
        };
        tokio::time::sleep(pause).await;
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
