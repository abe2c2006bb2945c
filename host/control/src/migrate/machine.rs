//! A slot's migration as a pure state machine: `step(slot, event) → (slot, actions)`, with no
//! I/O. The driver (`dashboard::migration`) owns every slot's [`Slot`], feeds it the events
//! its I/O produced (a push acknowledged, a copy round ended, an abort …) and carries out the
//! [`Action`]s that come back, coalescing those of many slots (one store write, one push).
//!
//! The copy (docs/migration.md): while a slot's keys are copied to the target, the source
//! keeps serving it; writes to it are captured from the source's replication stream and the
//! keys they touched copied again, in rounds that shrink. Once a round leaves little to copy,
//! the slot is handed off: held in every proxy (the block push, acknowledged by all), its
//! last changed keys copied, then routed to the target (the owner push). The source's copies
//! are deleted afterwards, in the background.
//!
//! ```text
//!            Start       StaleDeleted          converged + Handoff
//! Pending ─────────▶ Purging ──────▶ Copying ─────────────────────▶ Blocking
//!                     ▲   ▲            │  ▲                             │ push acked
//!        capture lost │   └────────────┘  │ release acked               ▼
//!                     │    capture lost   └─── Releasing ◀─ failed ── Blocked
//!                     └─────────────────────── (restart)                │ final copy done
//!           StaleDeleted           owner push acked                     ▼
//! Done ◀────────────── Cleanup ◀──────────────────────────────────── Switching
//! ```
//!
//! A push is retried until every proxy has taken it wherever going back is not safe
//! (`Switching`: some proxies may route to the target already) or would hold clients for
//! nothing (`Releasing`: the slot is being handed back to its source after a handoff that
//! could not finish).
//!
//! What is persisted is enough to resume from any crash: the slot's record ([`Persisted`]) and
//! the last topology pushed (which says whom proxies route the slot to). A slot is routed to its
//! target only by a push made after its final copy, while every proxy holds it; a successor
//! that finds that topology committed finishes the switch, any other resumed slot is released
//! to its source and copied again (what the target holds of it purged first, so no stale key
//! survives). Inside a handoff — while clients wait — nothing is written to the store but the
//! topology the push carries: the slots' records follow once every proxy has acknowledged it
//! (a batched write of hundreds of records would stretch the pause by seconds).

use serde::{Deserialize, Serialize};

/// What the store keeps of a slot's migration, and so what a successor dashboard resumes
/// from. The topology proxies route with follows from it: Pending and Copying route to the
/// source, Handoff holds the slot in every proxy, Cleanup routes to the slot's owner (the
/// target after a handoff, the source after an abort).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Persisted {
    Pending,
    Copying,
    Handoff,
    /// The owner is settled; the other group's copies of the slot are being deleted.
    Cleanup,
}

/// Where a slot's migration stands, in the driver's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Waiting for room under the per-group cap.
    Pending,
    /// The target's keys of the slot (left by an earlier, aborted or crashed copy) are being
    /// deleted before the copy starts.
    Purging,
    /// Copy rounds run; the source serves the slot. `converged`: the last round left so
    /// little that a handoff would fit in its budget.
    Copying { round: u32, converged: bool },
    /// The push that holds the slot in every proxy is out.
    Blocking,
    /// Every proxy holds the slot: the final copy runs.
    Blocked,
    /// A handoff that could not finish (a proxy did not take the block, the final copy did
    /// not fit its budget, the capture broke): the push that routes the slot to its source
    /// again is out, retried until every proxy has it. `restart`: the copy starts over
    /// (from the purge) afterwards, rather than going on.
    Releasing { restart: bool },
    /// The slot is saved as the target's; the push that routes it there is out.
    Switching,
    /// Routed to its owner; the other group's copies are being deleted.
    Cleanup,
    /// Nothing left to do: the action is cleared.
    Done,
}

/// A slot's migration: its phase, and which way it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot {
    pub phase: Phase,
    /// An abort turned it around: the slot stays (or is back) with its source, and the
    /// cleanup deletes the target's copies.
    pub aborted: bool,
}

/// What happened, as the driver's I/O saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The driver has room for the slot under the per-group cap.
    Start,
    /// The group that does not own the slot holds none of its keys any more (the target
    /// before a copy starts, the source after a handoff, the target after an abort).
    StaleDeleted,
    /// A copy round ended: whether what is left would fit in a handoff's budget.
    RoundEnded { converged: bool },
    /// The capture broke (the replication stream was cut, a flush emptied the source, the
    /// changed-key table overflowed): what the target holds can no longer be trusted.
    CaptureLost,
    /// The driver hands the slot off now (it is converged, and so are the slots it goes with).
    Handoff,
    /// Every proxy acknowledged the push the slot waits for.
    PushAcked,
    /// Some proxy did not acknowledge it in time.
    PushFailed,
    /// The final copy is done: the target has every key of the slot as the source has it.
    FinalCopied,
    /// The final copy did not fit the hold's budget, or failed.
    FinalFailed,
    /// An operator aborted the migration.
    Abort,
}

/// What the driver must do for the slot, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Change the slot's record — its state and whose it is (`owner_target`: the target's
    /// from now on) — in the dashboard's memory, which the next push routes by, and in the
    /// store too when `durable`.
    Save {
        state: Persisted,
        owner_target: bool,
        durable: bool,
    },
    /// Push the topology the saved records describe to every proxy, with the barrier.
    Push,
    /// Delete the slot's keys on the group that does not own it: the target's leftovers
    /// before a copy, the source's copies after a handoff, the target's after an abort.
    DeleteStale,
    /// Capture the source's changes to the slot and run copy rounds.
    StartCopy,
    /// Stop copying the slot (its capture included).
    StopCopy,
    /// Copy what changed since the last round, while the slot is held.
    FinalCopy,
    /// Report the slot's next round even if nothing changes (it went back to copying after
    /// a handoff that could not finish, and must converge again before the next).
    ReportNext,
    /// The migration is over: remove the slot's record of it.
    Clear,
}

impl Slot {
    /// A newly queued migration.
    pub fn pending() -> Self {
        Self {
            phase: Phase::Pending,
            aborted: false,
        }
    }

    /// What a dashboard that starts (or took over the cluster) makes of a persisted record,
    /// and what it must do first. A copy's progress lives in memory only, so a slot that was
    /// copying or being handed off is released (in case a proxy still holds it) and starts its
    /// copy again; one whose owner was saved finishes its switch (the push is made again) and
    /// its cleanup (`owner_target` false there: an abort's).
    pub fn resume(
        state: Persisted,
        owner_target: bool,
        committed_to_target: bool,
    ) -> (Self, Vec<Action>) {
        use Action::*;
        let aborted = state == Persisted::Cleanup && !owner_target;
        let slot = |phase| Self { phase, aborted };
        let save = |state, owner_target| Save {
            state,
            owner_target,
            durable: true,
        };
        match state {
            Persisted::Pending => (slot(Phase::Pending), vec![]),
            // The push that routes it to its target was committed (its final copy was done
            // before): the switch is finished.
            Persisted::Copying | Persisted::Handoff if committed_to_target => (
                slot(Phase::Switching),
                vec![save(Persisted::Cleanup, true), Push],
            ),
            // A proxy may still hold the slot (a handoff, or its release, was under way): it is
            // released first, with every proxy's acknowledgement, then the copy starts over.
            Persisted::Copying | Persisted::Handoff => (
                slot(Phase::Releasing { restart: true }),
                vec![save(Persisted::Copying, false), Push],
            ),
            Persisted::Cleanup => (slot(Phase::Switching), vec![Push]),
        }
    }

    /// The slot's record as it should be in the store (None once it is done).
    pub fn persisted(&self) -> Option<Persisted> {
        Some(match self.phase {
            Phase::Pending => Persisted::Pending,
            Phase::Purging | Phase::Copying { .. } | Phase::Releasing { .. } => Persisted::Copying,
            Phase::Blocking | Phase::Blocked => Persisted::Handoff,
            Phase::Switching | Phase::Cleanup => Persisted::Cleanup,
            Phase::Done => return None,
        })
    }

    /// Whether proxies route the slot to its target (after a handoff, not after an abort).
    pub fn owned_by_target(&self) -> bool {
        !self.aborted && matches!(self.phase, Phase::Switching | Phase::Cleanup | Phase::Done)
    }

    /// Whether every proxy must hold the slot's commands.
    pub fn held(&self) -> bool {
        matches!(self.phase, Phase::Blocking | Phase::Blocked)
    }

    /// Whether the slot waits for a push to be acknowledged by every proxy.
    pub fn awaits_push(&self) -> bool {
        matches!(
            self.phase,
            Phase::Blocking | Phase::Releasing { .. } | Phase::Switching
        )
    }

    /// Whether the driver may hand the slot off now.
    pub fn ready(&self) -> bool {
        matches!(
            self.phase,
            Phase::Copying {
                converged: true,
                ..
            }
        ) && !self.aborted
    }

    /// The next state and what to do, for `event`. An event that does not apply to the
    /// slot's phase (a late acknowledgement, a round that ended after an abort) changes
    /// nothing.
    pub fn step(self, event: Event) -> (Self, Vec<Action>) {
        use Action::*;
        use Phase::*;
        let to = |phase| Self {
            phase,
            aborted: self.aborted,
        };
        // In the store at once (outside a handoff), or only once its push is acknowledged.
        let save = |state| Save {
            state,
            owner_target: false,
            durable: true,
        };
        let note = |state, owner_target| Save {
            state,
            owner_target,
            durable: false,
        };
        match (self.phase, event) {
            (_, Event::Abort) => self.abort(),
            (Pending, Event::Start) => (to(Purging), vec![save(Persisted::Copying), DeleteStale]),
            (Purging, Event::StaleDeleted) if !self.aborted => (
                to(Copying {
                    round: 0,
                    converged: false,
                }),
                vec![StartCopy],
            ),
            (Copying { round, .. }, Event::RoundEnded { converged }) => (
                to(Copying {
                    round: round + 1,
                    converged,
                }),
                vec![],
            ),
            (Copying { .. }, Event::CaptureLost) => (to(Purging), vec![StopCopy, DeleteStale]),
            (Copying { .. }, Event::Handoff) if self.ready() => {
                (to(Blocking), vec![note(Persisted::Handoff, false), Push])
            }
            (Blocking, Event::PushAcked) => (to(Blocked), vec![FinalCopy]),
            // Some proxy did not take the block, or the final copy did not fit: hand the slot
            // back to its source (the others would hold their clients for nothing) and keep
            // copying.
            (Blocking, Event::PushFailed) | (Blocked, Event::FinalFailed) => (
                to(Releasing { restart: false }),
                vec![note(Persisted::Copying, false), Push],
            ),
            (Blocking | Blocked, Event::CaptureLost) => (
                to(Releasing { restart: true }),
                vec![StopCopy, note(Persisted::Copying, false), Push],
            ),
            (Releasing { restart: false }, Event::CaptureLost) => {
                (to(Releasing { restart: true }), vec![StopCopy])
            }
            (Releasing { restart }, Event::PushAcked) => {
                if restart {
                    (to(Purging), vec![save(Persisted::Copying), DeleteStale])
                } else {
                    (
                        to(Copying {
                            round: 0,
                            converged: false,
                        }),
                        vec![save(Persisted::Copying), ReportNext],
                    )
                }
            }
            (Releasing { .. }, Event::PushFailed) => (self, vec![Push]),
            (Blocked, Event::FinalCopied) => (
                to(Switching),
                vec![note(Persisted::Cleanup, true), Push, StopCopy],
            ),
            (Switching, Event::PushAcked) => (
                to(Cleanup),
                vec![
                    Save {
                        state: Persisted::Cleanup,
                        owner_target: !self.aborted,
                        durable: true,
                    },
                    DeleteStale,
                ],
            ),
            // Some proxies may route to the target already, the others hold the slot: the
            // only way is forward.
            (Switching, Event::PushFailed) => (self, vec![Push]),
            (Cleanup, Event::StaleDeleted) => (to(Done), vec![Clear]),
            _ => (self, vec![]),
        }
    }

    /// An abort: a slot not yet routed to its target stays with its source (what the target
    /// holds of it is deleted); one that is, is done already.
    fn abort(self) -> (Self, Vec<Action>) {
        use Action::*;
        if self.aborted {
            return (self, vec![]);
        }
        let aborted = Self {
            phase: Phase::Cleanup,
            aborted: true,
        };
        let save = Save {
            state: Persisted::Cleanup,
            owner_target: false,
            durable: true,
        };
        let note = Save {
            state: Persisted::Cleanup,
            owner_target: false,
            durable: false,
        };
        match self.phase {
            Phase::Pending => (
                Self {
                    phase: Phase::Done,
                    aborted: true,
                },
                vec![Clear],
            ),
            Phase::Purging => (aborted, vec![save, DeleteStale]),
            Phase::Copying { .. } => (aborted, vec![StopCopy, save, DeleteStale]),
            // Held in the proxies (or being released): routed back to the source, the push
            // retried until every proxy has it, then the target's copies deleted.
            Phase::Blocking | Phase::Blocked | Phase::Releasing { .. } => (
                Self {
                    phase: Phase::Switching,
                    aborted: true,
                },
                vec![StopCopy, note, Push],
            ),
            Phase::Switching | Phase::Cleanup | Phase::Done => (self, vec![]),
        }
    }
}

#[cfg(test)]
mod tests;
