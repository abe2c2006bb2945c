//! Slot migrations' shapes (docs/api.md, "Migrations"): the bodies that start, throttle and
//! abort them, their status, rebalances (the plan and its moves), and the per-slot statistics
//! a rebalance by load or memory evens out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::cluster::ActionState;
use crate::group::GroupId;

// === starting, throttling, aborting ===

/// `POST /api/migrations`: slots `from..=to` to `group`, optionally under a speed cap.
///
/// ```text
/// {"from": 0, "to": 99, "group": 2, "max_keys_per_sec": 20000, "max_mb_per_sec": 50}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MigrateSlots {
    pub from: u32,
    pub to: u32,
    pub group: u32,
    /// At most this many keys per second, over every source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_keys_per_sec: Option<u64>,
    /// At most this many MiB per second, as the sources count memory (`MEMORY USAGE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_mb_per_sec: Option<f64>,
}

/// `PUT /api/migrations/throttle`: the running migration's speed cap; an absent or null
/// field is no cap (`{}` lifts it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ThrottleChange {
    pub max_keys_per_sec: Option<u64>,
    pub max_mb_per_sec: Option<f64>,
}

/// A migration's speed caps in force; `None` is no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ThrottleLimits {
    #[schema(required = true)]
    pub max_keys_per_sec: Option<u64>,
    #[schema(required = true)]
    pub max_bytes_per_sec: Option<u64>,
}

impl ThrottleLimits {
    pub fn is_none(&self) -> bool {
        self.max_keys_per_sec.is_none() && self.max_bytes_per_sec.is_none()
    }
}

/// The answer of `POST /api/migrations`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Queued {
    /// Slots queued to move (those the group owns already are skipped).
    pub queued: usize,
    pub throttle: ThrottleLimits,
}

/// The answer of `PUT /api/migrations/throttle`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ThrottleAnswer {
    pub throttle: ThrottleLimits,
}

/// `POST /api/migrations/abort`: the slots to turn around; every migrating slot when absent
/// (or with no body).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct AbortMigrations {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<Vec<u16>>,
}

/// The answer of `POST /api/migrations/abort`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Aborted {
    /// Slot migrations asked to turn around.
    pub aborted: usize,
}

// === status ===

/// `GET /api/migrations`: what moves, how fast, and what holds it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MigrationStatus {
    /// Every slot with a migration, queued ones included, by slot.
    pub slots: Vec<SlotProgress>,
    /// Slots whose `phase` is `pending`.
    pub pending: usize,
    pub in_flight: usize,
    /// Keys copied by this dashboard since it started (a key copied again counts again).
    pub keys_moved: u64,
    /// Their serialized size (DUMP payloads; a big key's elements).
    pub bytes_moved: u64,
    pub keys_per_sec: f64,
    pub bytes_per_sec: f64,
    /// Keys and bytes the running migration has copied (since the driver last was idle).
    pub run_keys_moved: u64,
    pub run_bytes_moved: u64,
    /// The running migration's keys not yet copied once (`run.keys_left`); `None` while
    /// nothing moves, or while some slot's key count is unknown.
    #[schema(required = true)]
    pub keys_left: Option<u64>,
    /// Seconds until `keys_left` is copied at the rate of first copies over the last 10 s;
    /// `None` while nothing moves or nothing is being copied, and until that rate has been
    /// measured over 3 s (of the status being read).
    #[schema(required = true)]
    pub eta_secs: Option<f64>,
    /// The running migration, or the last one once it ended (until the next starts; not
    /// kept across a dashboard restart). `None` before the first.
    #[schema(required = true)]
    pub run: Option<MigrationRun>,
    /// The cap set on the running migration.
    pub throttle: ThrottleLimits,
    /// The slowest command the copy sent since this dashboard started.
    #[schema(required = true)]
    pub slowest_command: Option<SlowestCommand>,
    /// Why the driver waits (e.g. a proxy that does not acknowledge a step, a handoff
    /// given up, a copy lost and when it starts again, with its reason, a slot written
    /// faster than it is copied, stale keys that could not be deleted yet).
    #[schema(required = true)]
    pub blocked: Option<String>,
    pub max_slots_in_flight: usize,
    /// An abort was asked for and is not applied yet.
    pub abort_pending: bool,
    /// The write pause of the handoffs this dashboard drove: from the push that held the
    /// slots to the one that routed them to their target (`None` before the first).
    #[schema(required = true)]
    pub write_pause: Option<PauseStats>,
    /// The running (or last) migration's held steps, oldest first: when, which slots, and
    /// why (the job's `holds`, docs/migration.md "Why a step was held").
    #[serde(default)]
    #[schema(required = true)]
    pub holds: Vec<Hold>,
}

/// A migration as a whole: the slots queued from the moment the driver had none until it
/// has none again. One definition of progress, which the console and the CLI show as is.
///
/// Each slot's keys are counted when it is queued (a SCAN of its source, exact up to
/// 100 000 keys a group, sampled above) and replaced by what its first copy (round 0)
/// found once that ends. `keys_copied` counts the keys of that first copy the targets
/// acknowledged; keys written meanwhile and copied again are `keys_recopy`, not progress.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MigrationRun {
    /// Some slot of it is still moving.
    pub running: bool,
    pub started_unix_ms: u64,
    #[schema(required = true)]
    pub ended_unix_ms: Option<u64>,
    /// Its slots, aborted ones left out.
    pub slots: usize,
    /// Of them, routed to their target (in cleanup or finished).
    pub slots_done: usize,
    /// Slots of it that were aborted.
    pub slots_aborted: usize,
    /// The keys its slots hold; `None` while a slot not yet copied has no count.
    #[schema(required = true)]
    pub keys_total: Option<u64>,
    /// Keys copied once (a finished slot: all of its keys).
    pub keys_copied: u64,
    /// `keys_total - keys_copied`.
    #[schema(required = true)]
    pub keys_left: Option<u64>,
    /// Keys written since their copy, to be copied again in the slots' next round.
    pub keys_recopy: u64,
    /// By keys (`keys_copied / keys_total`) while some slot moves, capped at 99.9 until the
    /// last slot is done; by slots when the keys are unknown or none; 100 once all are done.
    pub percent_done: f64,
    /// Every key it copied, copies again included, and their bytes.
    pub keys_moved: u64,
    pub bytes_moved: u64,
}

/// One slot's migration.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlotProgress {
    pub slot: u16,
    /// What the store holds: pending, copying, handoff or cleanup.
    pub state: ActionState,
    /// Where the driver has it, finer than `state`.
    pub phase: MigrationPhase,
    pub source: GroupId,
    pub target: GroupId,
    pub aborting: bool,
    /// Keys of the slot copied so far.
    pub keys_moved: u64,
    /// Copy rounds ended (round 0 is the SCAN of the source).
    pub round: u32,
    /// Keys written during the last round, copied again in the next.
    pub changed_last_round: usize,
    /// The last round left little enough for a handoff.
    pub converged: bool,
}

/// Where the migration driver has a slot (docs/migration.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MigrationPhase {
    /// Queued, waiting for room under the per-group cap.
    Pending,
    /// The target's keys of the slot (left by an earlier, aborted or crashed copy) are
    /// being deleted before the copy starts.
    Purging,
    /// Copy rounds run; the source serves the slot.
    Copying,
    /// The push that holds the slot in every proxy is out.
    Blocking,
    /// Every proxy holds the slot: the final copy runs.
    Blocked,
    /// A handoff that could not finish (a proxy did not take the hold, the final copy did
    /// not fit its budget, the capture broke): the push that routes the slot to its source
    /// again is out, retried until every proxy has it.
    Releasing,
    /// The slot is saved as the target's; the push that routes it there is out.
    Switching,
    /// Routed to its owner; the other group's copies are being deleted.
    Cleanup,
    /// Nothing left to do: the action is cleared.
    Done,
}

/// The slowest command the copy sent, how long it may have blocked a server.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlowestCommand {
    pub ms: f64,
    pub command: String,
}

/// Write pauses of the last handoffs, per slot (a handoff of n slots counts n times).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PauseStats {
    pub handoffs: usize,
    pub slots: usize,
    pub last_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

// === history ===

/// `GET /api/migrations/history`: the last migrations and rebalances, newest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct MigrationHistory {
    pub jobs: Vec<MigrationJob>,
}

/// One migration or rebalance as a job: a run of the driver, from the moment it had no slot
/// to move until it has none again (a migration queued while another runs joins it).
/// Persisted in the cluster's store, so a successor dashboard records its end.
///
/// ```text
/// {"id": "1767225600000-400", "kind": "migrate", "slots": [{"from": 400, "to": 511}],
///  "from_groups": [1], "to_groups": [2], "started_unix_ms": 1767225600000,
///  "ended_unix_ms": 1767225607000, "duration_ms": 7000, "slots_moved": 112,
///  "slots_aborted": 0, "keys_moved": 10000, "bytes_moved": 480000, "peak_pause_ms": 41.2,
///  "started_by": ["ops-token"], "outcome": "finished", "aborted_by": null, "reason": null,
///  "holds": []}
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MigrationJob {
    /// Its start (Unix ms) and first slot: unique within a cluster.
    pub id: String,
    pub kind: JobKind,
    /// Every slot it took, as ranges.
    pub slots: Vec<SlotSpan>,
    pub from_groups: Vec<GroupId>,
    pub to_groups: Vec<GroupId>,
    pub started_unix_ms: u64,
    #[schema(required = true)]
    pub ended_unix_ms: Option<u64>,
    #[schema(required = true)]
    pub duration_ms: Option<u64>,
    /// Slots routed to their target.
    pub slots_moved: usize,
    pub slots_aborted: usize,
    /// Every key it copied (a key written during its copy and copied again counts again),
    /// and their bytes; across a change of dashboard, what each saved.
    pub keys_moved: u64,
    pub bytes_moved: u64,
    /// The longest write pause of its handoffs.
    #[schema(required = true)]
    pub peak_pause_ms: Option<f64>,
    /// Who asked for it: the token's name, or `console:<user>` through the console; one
    /// entry per caller whose slots joined it. Empty when its start was not seen (queued
    /// before this dashboard version).
    pub started_by: Vec<String>,
    pub outcome: JobOutcome,
    /// Who aborted slots of it.
    #[schema(required = true)]
    pub aborted_by: Option<String>,
    /// Why it failed, or a note on how its end was recorded.
    #[schema(required = true)]
    pub reason: Option<String>,
    /// Why its steps were held, oldest first (the last [`MAX_HOLDS`]).
    #[serde(default)]
    #[schema(required = true)]
    pub holds: Vec<Hold>,
}

/// The most holds a job keeps (its latest).
pub const MAX_HOLDS: usize = 50;

/// What a job moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    Migrate,
    Rebalance,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum JobOutcome {
    /// Still moving.
    Running,
    /// Every slot it kept was routed to its target.
    Finished,
    /// Some of its slots were turned back (`aborted_by`).
    Aborted,
    /// Slots left it unfinished without an abort (`reason`).
    Failed,
}

/// Slots `from..=to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SlotSpan {
    pub from: u16,
    pub to: u16,
}

impl SlotSpan {
    /// The ranges of `slots` (ascending, no repeats).
    pub fn ranges(slots: impl IntoIterator<Item = u16>) -> Vec<SlotSpan> {
        let mut out: Vec<SlotSpan> = Vec::new();
        for s in slots {
            match out.last_mut() {
                Some(r) if r.to.checked_add(1) == Some(s) => r.to = s,
                _ => out.push(SlotSpan { from: s, to: s }),
            }
        }
        out
    }
}

impl std::fmt::Display for SlotSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.from == self.to {
            write!(f, "{}", self.from)
        } else {
            write!(f, "{}-{}", self.from, self.to)
        }
    }
}

/// A step of a job held, and why: a proxy that did not acknowledge (named by address), a
/// copy lost, a slot written faster than it is copied, the store refusing a write…
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Hold {
    /// When it was first seen, and last (the same hold seen again in a row is counted, not
    /// listed again).
    pub time_ms: u64,
    pub last_ms: u64,
    pub times: u32,
    /// The slots it held.
    pub slots: Vec<SlotSpan>,
    pub reason: String,
}

// === rebalances ===

/// What a rebalance evens out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RebalanceBy {
    /// Slot counts, even.
    Slots,
    /// Slot counts, in proportion to weights.
    Weight,
    /// Measured ops/s per slot (`GET /api/slots/stats`).
    Load,
    /// Estimated memory per slot.
    Memory,
}

/// One slot to move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Move {
    pub slot: u16,
    pub from: GroupId,
    pub to: GroupId,
}

/// `POST /api/rebalance` (every field optional; no body: an even split by slot count,
/// queued). With `moves`, the moves of an earlier dry run are queued exactly as shown.
///
/// ```text
/// {"dry_run": true, "by": "load", "tolerance": 10}
/// {"by": "weight", "weights": {"1": 1, "2": 2}}
/// {"moves": [{"slot": 7, "from": 1, "to": 2}]}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct Rebalance {
    /// Plan only; nothing is queued.
    #[serde(default)]
    pub dry_run: bool,
    /// What to even out; absent: `weight` when weights are given, else `slots`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<RebalanceBy>,
    /// Group id → weight; an even split by slot count when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, u32>>)]
    pub weights: Option<BTreeMap<u32, u32>>,
    /// Load and memory: how far from the mean a group may stay, in percent (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// Moves planned earlier (a dry run's), queued as they are instead of planning again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moves: Option<Vec<Move>>,
}

/// The answer of `POST /api/rebalance`: the plan (queued unless `dry_run`) and each group's
/// measure before and after it. Queued planned moves answer `dry_run`, `by`, `slots` and
/// `moves` only.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RebalanceAnswer {
    pub dry_run: bool,
    /// What was evened out (as asked, for queued planned moves).
    #[schema(required = true)]
    pub by: Option<RebalanceBy>,
    /// How many slots move.
    pub slots: usize,
    pub moves: Vec<Move>,
    /// ± percent of the mean the plan aims within (load and memory only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// Each group's measure (slots, ops/s or bytes) before and after, by group id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, f64>>)]
    pub before: Option<BTreeMap<GroupId, f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, f64>>)]
    pub after: Option<BTreeMap<GroupId, f64>>,
    /// Why the plan could not do better (a group that stays off the mean, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
}

// === per-slot statistics ===

/// `GET /api/slots/stats`: per-slot arrays (index = slot) and per-group totals.
///
/// ```text
/// {"window_secs": 60.0, "sample_secs": 5, "proxies": 2,
///  "slots": {"group": [1, …], "ops_per_sec": [0.0, …], "bytes_per_sec": […],
///            "keys": […], "memory": […]},
///  "groups": [{"group": 1, "slots": 512, "ops_per_sec", "bytes_per_sec", "keys", "memory",
///              "keys_exact": true, "keys_scanned", "dbsize", "keys_at_unix"}]}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlotStatsView {
    /// The span the rates are measured over (shorter just after start; 0 before two reads).
    pub window_secs: f64,
    /// How often every online proxy's slot counters are read.
    pub sample_secs: f64,
    /// How often each group's keys and memory per slot are estimated.
    pub keys_every_secs: f64,
    /// Proxies counted in the rates.
    pub proxies: usize,
    pub slots: SlotArrays,
    pub groups: Vec<GroupTotals>,
}

/// One entry per slot, in slot order (`group` 0: unassigned). `bytes_per_sec` counts
/// request bytes in and reply bytes out.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SlotArrays {
    pub group: Vec<u32>,
    pub ops_per_sec: Vec<f64>,
    pub bytes_per_sec: Vec<f64>,
    pub keys: Vec<f64>,
    pub memory: Vec<f64>,
}

/// A group's sums over the slots it owns (every group is listed, those without slots too),
/// and how its keys were counted.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupTotals {
    pub group: GroupId,
    pub slots: usize,
    pub ops_per_sec: f64,
    pub bytes_per_sec: f64,
    pub keys: f64,
    /// Its keys' size: the sum of its slots' estimates (`MEMORY USAGE` of sampled keys).
    pub memory: f64,
    /// Its master's memory as its last health check read it (INFO `used_memory`, what the
    /// groups view shows); `null` before the first check or while it does not answer. It is
    /// larger than `memory`: it also counts the allocator's pages and the key table.
    #[schema(required = true)]
    pub used_memory: Option<u64>,
    /// The last scan saw every key of the group (else the counts are a scaled sample);
    /// `null` before the first scan.
    #[schema(required = true)]
    pub keys_exact: Option<bool>,
    #[schema(required = true)]
    pub keys_scanned: Option<u64>,
    #[schema(required = true)]
    pub dbsize: Option<u64>,
    #[schema(required = true)]
    pub keys_at_unix: Option<u64>,
}
