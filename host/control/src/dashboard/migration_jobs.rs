//! Migrations as jobs (docs/migration.md, "History"): each run of the driver — from the
//! moment it has a slot to move until it has none again — is one job, with who asked for it,
//! its slots and groups, what it moved, its longest write pause, why its steps were held, and
//! how it ended. The newest [`KEEP`] are one document in the cluster's store
//! (`Paths::migration_jobs`), written when a job starts, every [`SAVE_EVERY`] while it runs
//! and when it ends, so a successor dashboard takes a job over (adding what it moves to what
//! its predecessor saved) and records its end.
//!
//! The numbers are the run's (`migration_run`): this only names, keeps and persists them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::warn;

use super::Dashboard;
use super::migration_run::RunLedger;
use tessera_model::clock::now_ms;
use tessera_store::model;
use tessera_wire::migration::{
    Hold, JobKind, JobOutcome, MAX_HOLDS, MigrationHistory, MigrationJob, SlotSpan,
};

/// Jobs kept, the newest.
pub(crate) const KEEP: usize = 200;

/// A running job is saved at most this often (and at its start and end).
const SAVE_EVERY: Duration = Duration::from_secs(2);

/// Callers remembered between their request and the job that takes its slots.
const MAX_ASKED: usize = 64;

/// The stored document: oldest first.
#[derive(Debug, Default, Serialize, Deserialize)]
struct JobsDoc {
    jobs: Vec<MigrationJob>,
}

/// The history, in memory and as last saved.
#[derive(Default)]
pub(crate) struct Jobs {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Oldest first; the last is the current job while its outcome is `running`.
    jobs: Vec<MigrationJob>,
    /// Requests whose slots were queued and that no job has taken yet: (kind, who).
    asked: Vec<(JobKind, String)>,
    /// Who asked for an abort the current job has not taken yet.
    abort_by: Option<String>,
    /// The run (its start) the current job follows, and what the job held before it (a
    /// predecessor's keys and bytes) to add the run's to.
    bound: Option<(u64, (u64, u64))>,
    /// Changed since the last save, and when that was.
    dirty: bool,
    /// Must be saved at the next chance (a start, an end, an abort).
    urgent: bool,
    saved: Option<Instant>,
}

impl State {
    fn current(&mut self) -> Option<&mut MigrationJob> {
        self.jobs
            .last_mut()
            .filter(|j| j.outcome == JobOutcome::Running)
    }

    fn changed(&mut self, urgent: bool) {
        self.dirty = true;
        self.urgent |= urgent;
    }

    /// Takes the callers asked for so far into the current job.
    fn take_asked(&mut self) {
        if self.current().is_none() {
            return;
        }
        let asked = std::mem::take(&mut self.asked);
        let abort_by = self.abort_by.take();
        let Some(job) = self.current() else {
            return;
        };
        let mut changed = false;
        for (kind, who) in asked {
            if job.started_by.is_empty() {
                job.kind = kind;
            }
            if !job.started_by.contains(&who) {
                job.started_by.push(who);
                changed = true;
            }
        }
        if let Some(by) = abort_by {
            job.aborted_by = Some(by);
            changed = true;
        }
        if changed {
            self.changed(true);
        }
    }
}

/// Bounds a history read back from the store (its contents are not trusted to be ours).
fn bounded(mut jobs: Vec<MigrationJob>) -> Vec<MigrationJob> {
    if jobs.len() > KEEP {
        jobs.drain(..jobs.len() - KEEP);
    }
    for j in &mut jobs {
        if j.holds.len() > MAX_HOLDS {
            j.holds.drain(..j.holds.len() - MAX_HOLDS);
        }
        j.started_by.truncate(MAX_ASKED);
    }
    jobs
}

impl Jobs {
    /// A caller's slots were queued: the job that takes them names the caller.
    pub(crate) fn asked(&self, kind: JobKind, who: String) {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        if st.asked.len() < MAX_ASKED {
            st.asked.push((kind, who));
        }
        st.take_asked();
    }

    /// A caller asked for an abort.
    pub(crate) fn abort_asked(&self, who: String) {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        st.abort_by = Some(who);
        st.take_asked();
    }

    /// A step of the current job is held for `reason`: listed, or counted when it is the
    /// same hold as the last (same slots, same reason).
    pub(crate) fn hold(&self, slots: impl IntoIterator<Item = u16>, reason: &str) {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        let slots = SlotSpan::ranges(slots);
        let now = now_ms();
        let Some(job) = st.current() else {
            return;
        };
        match job.holds.last_mut() {
            Some(h) if h.reason == reason && h.slots == slots => {
                h.last_ms = now;
                h.times = h.times.saturating_add(1);
            }
            _ => {
                if job.holds.len() == MAX_HOLDS {
                    job.holds.remove(0);
                }
                job.holds.push(Hold {
                    time_ms: now,
                    last_ms: now,
                    times: 1,
                    slots,
                    reason: reason.to_owned(),
                });
            }
        }
        st.changed(false);
    }

    /// Follows the run: starts a job with it (or takes over the one a predecessor left
    /// running), keeps its numbers, and ends it with the run. `gone` names slots that left
    /// the run without an abort or a finish.
    pub(crate) fn observe(&self, run: &RunLedger, now_moved: (u64, u64), gone: &[u16]) {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        let bound_here = st.bound.is_some_and(|(r, _)| r == run.started_unix_ms);
        if !bound_here {
            if run.ended_unix_ms.is_some() && st.current().is_none() {
                return;
            }
            let carried = match st.current() {
                // A predecessor's job: this run goes on with it.
                Some(j) => (j.keys_moved, j.bytes_moved),
                None => {
                    let first = run.slots.keys().next().copied().unwrap_or(0);
                    st.jobs.push(MigrationJob {
                        id: format!("{}-{first}", run.started_unix_ms),
                        kind: JobKind::Migrate,
                        slots: Vec::new(),
                        from_groups: Vec::new(),
                        to_groups: Vec::new(),
                        started_unix_ms: run.started_unix_ms,
                        ended_unix_ms: None,
                        duration_ms: None,
                        slots_moved: 0,
                        slots_aborted: 0,
                        keys_moved: 0,
                        bytes_moved: 0,
                        peak_pause_ms: None,
                        started_by: Vec::new(),
                        outcome: JobOutcome::Running,
                        aborted_by: None,
                        reason: None,
                        holds: Vec::new(),
                    });
                    if st.jobs.len() > KEEP {
                        st.jobs.remove(0);
                    }
                    (0, 0)
                }
            };
            st.bound = Some((run.started_unix_ms, carried));
            st.changed(true);
            st.take_asked();
        }
        let carried = st.bound.map_or((0, 0), |(_, c)| c);
        let summary = run.summary(now_moved);
        let Some(job) = st.current() else {
            return;
        };
        let before = job.clone();
        let mut slots: Vec<u16> = job
            .slots
            .iter()
            .flat_map(|r| r.from..=r.to)
            .chain(run.slots.keys().copied())
            .collect();
        slots.sort_unstable();
        slots.dedup();
        job.slots = SlotSpan::ranges(slots);
        for s in run.slots.values() {
            if !job.from_groups.contains(&s.source) {
                job.from_groups.push(s.source);
            }
            if !job.to_groups.contains(&s.target) {
                job.to_groups.push(s.target);
            }
        }
        job.from_groups.sort();
        job.to_groups.sort();
        job.slots_moved = summary.slots_done;
        job.slots_aborted = summary.slots_aborted;
        job.keys_moved = carried.0 + summary.keys_moved;
        job.bytes_moved = carried.1 + summary.bytes_moved;
        if let Some(p) = run.peak_pause_ms {
            job.peak_pause_ms = Some(job.peak_pause_ms.map_or(p, |q: f64| q.max(p)));
        }
        let mut ended = false;
        if let Some(end) = run.ended_unix_ms {
            job.ended_unix_ms = Some(end);
            job.duration_ms = Some(end.saturating_sub(job.started_unix_ms));
            job.outcome = if summary.slots_aborted > 0 {
                JobOutcome::Aborted
            } else if !gone.is_empty() {
                JobOutcome::Failed
            } else {
                JobOutcome::Finished
            };
            if !gone.is_empty() {
                job.reason = Some(format!(
                    "slots {} left the migration unfinished: their migration was removed \
                     from the store by other means (a group removed with them)",
                    join(&SlotSpan::ranges(gone.iter().copied()))
                ));
            }
            ended = true;
        }
        if *job != before {
            st.changed(ended);
        }
        if ended {
            st.bound = None;
        }
    }

    /// The dashboard has nothing to move and follows no run: a job a predecessor left
    /// running ended while no dashboard watched it (its slots are all where they go, or
    /// were turned back by it); its end is recorded now, with what it had saved.
    pub(crate) fn close_orphan(&self) {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        if st.bound.is_some() {
            return;
        }
        let Some(job) = st.current() else {
            return;
        };
        let now = now_ms();
        job.ended_unix_ms = Some(now);
        job.duration_ms = Some(now.saturating_sub(job.started_unix_ms));
        job.outcome = if job.slots_aborted > 0 || job.aborted_by.is_some() {
            JobOutcome::Aborted
        } else {
            JobOutcome::Finished
        };
        job.reason = Some(
            "the dashboard that ran it stopped before recording its end; no slot was left \
             migrating when the next one started: the end time is when that one looked, the \
             numbers are the last saved"
                .into(),
        );
        st.changed(true);
    }

    /// The holds of the newest job.
    pub(crate) fn last_holds(&self) -> Vec<Hold> {
        let st = self.state.lock().expect("jobs lock poisoned");
        st.jobs.last().map(|j| j.holds.clone()).unwrap_or_default()
    }

    /// The history, newest first.
    pub(crate) fn history(&self) -> MigrationHistory {
        let st = self.state.lock().expect("jobs lock poisoned");
        MigrationHistory {
            jobs: st.jobs.iter().rev().cloned().collect(),
        }
    }

    /// The document to save now, if any: when something urgent changed, or a change is
    /// older than [`SAVE_EVERY`]. Marked saved (a failed save marks it again).
    fn to_save(&self) -> Option<JobsDoc> {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        let due = st.urgent || st.saved.is_none_or(|t| t.elapsed() >= SAVE_EVERY);
        if !st.dirty || !due {
            return None;
        }
        st.dirty = false;
        st.urgent = false;
        st.saved = Some(Instant::now());
        Some(JobsDoc {
            jobs: st.jobs.clone(),
        })
    }

    fn save_failed(&self) {
        let mut st = self.state.lock().expect("jobs lock poisoned");
        st.changed(true);
    }
}

fn join(spans: &[SlotSpan]) -> String {
    spans
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Dashboard {
    /// Reads the history a predecessor saved (at start). A document that does not parse is
    /// logged and replaced by the next save.
    pub(crate) async fn load_jobs(&self) {
        match model::read::<JobsDoc>(&*self.store, &self.paths.migration_jobs()).await {
            Ok(Some((doc, _))) => {
                let mut st = self
                    .migrations
                    .jobs
                    .state
                    .lock()
                    .expect("jobs lock poisoned");
                st.jobs = bounded(doc.jobs);
            }
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "could not read the migration history; it starts again")
            }
        }
    }

    /// Saves the history if it is due (`Jobs::to_save`).
    pub(crate) async fn save_jobs(&self) {
        let Some(doc) = self.migrations.jobs.to_save() else {
            return;
        };
        if let Err(e) = model::write(&*self.store, &self.paths.migration_jobs(), &doc).await {
            warn!(error = %e, "could not save the migration history; trying again");
            self.migrations.jobs.save_failed();
        }
    }

    /// `GET /api/migrations/history`.
    pub fn migration_history(&self) -> MigrationHistory {
        self.migrations.jobs.history()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::migration_run::RunSlot;
    use crate::migrate::progress::FirstCopy;
    use tessera_model::router::GroupId;

    fn run(started: u64, slots: &[u16], done: bool, aborted: &[u16]) -> RunLedger {
        RunLedger {
            started_unix_ms: started,
            moved_at_start: (100, 1000),
            slots: slots
                .iter()
                .map(|s| {
                    (
                        *s,
                        RunSlot {
                            expected: Some(10),
                            first: FirstCopy {
                                copied: 10,
                                scanned: true,
                            },
                            aborted: aborted.contains(s),
                            done: done && !aborted.contains(s),
                            source: GroupId(1),
                            target: GroupId(2),
                            ..RunSlot::default()
                        },
                    )
                })
                .collect(),
            ..RunLedger::default()
        }
    }

    #[test]
    fn a_run_is_one_job_named_by_its_callers_and_ended_with_it() {
        let jobs = Jobs::default();
        jobs.asked(JobKind::Rebalance, "ops-token".into());
        let mut r = run(5, &[400, 401, 402, 700], false, &[]);
        jobs.observe(&r, (150, 1500), &[]);
        jobs.asked(JobKind::Migrate, "console:ada".into());
        jobs.hold([400, 401], "waiting for proxies: proxy at 127.0.0.1:1");
        jobs.hold([400, 401], "waiting for proxies: proxy at 127.0.0.1:1");
        r.ended_unix_ms = Some(905);
        r.moved_at_end = Some((160, 1600));
        for s in r.slots.values_mut() {
            s.done = true;
        }
        jobs.observe(&r, (999, 9999), &[]);
        let h = jobs.history();
        assert_eq!(h.jobs.len(), 1);
        let j = &h.jobs[0];
        assert_eq!(j.kind, JobKind::Rebalance, "the first caller's kind");
        assert_eq!(j.started_by, ["ops-token", "console:ada"]);
        assert_eq!(
            j.slots,
            [
                SlotSpan { from: 400, to: 402 },
                SlotSpan { from: 700, to: 700 }
            ]
        );
        assert_eq!(
            (j.from_groups.clone(), j.to_groups.clone()),
            (vec![GroupId(1)], vec![GroupId(2)])
        );
        assert_eq!((j.keys_moved, j.bytes_moved), (60, 600));
        assert_eq!((j.slots_moved, j.outcome), (4, JobOutcome::Finished));
        assert_eq!(j.duration_ms, Some(900));
        assert_eq!(
            j.holds.len(),
            1,
            "the same hold again is counted: {:?}",
            j.holds
        );
        assert_eq!(j.holds[0].times, 2);
        // The ended run seen again makes no second job.
        jobs.observe(&r, (999, 9999), &[]);
        assert_eq!(jobs.history().jobs.len(), 1);
    }

    #[test]
    fn an_aborted_run_names_who_aborted_and_a_successor_adds_to_what_was_saved() {
        let jobs = Jobs::default();
        jobs.asked(JobKind::Migrate, "a".into());
        let mut r = run(1, &[1, 2], false, &[]);
        jobs.observe(&r, (130, 1300), &[]);
        // A successor reads the saved history: the job runs, 30 keys moved.
        let saved = jobs.to_save().expect("a new job is saved at once");
        let next = Jobs::default();
        next.state.lock().unwrap().jobs = bounded(saved.jobs);
        r = run(50, &[1, 2], false, &[]);
        next.abort_asked("b".into());
        r.slots.get_mut(&2).unwrap().aborted = true;
        r.ended_unix_ms = Some(80);
        r.moved_at_end = Some((105, 1050));
        next.observe(&r, (0, 0), &[]);
        let j = &next.history().jobs[0];
        assert_eq!(j.id, "1-1", "the predecessor's job, not a new one");
        assert_eq!(j.keys_moved, 35);
        assert_eq!(j.outcome, JobOutcome::Aborted);
        assert_eq!(j.aborted_by.as_deref(), Some("b"));
        assert_eq!(j.duration_ms, Some(79));
    }

    #[test]
    fn slots_gone_without_an_abort_fail_the_job_and_the_history_is_bounded() {
        let jobs = Jobs::default();
        for i in 0..(KEEP as u64 + 5) {
            let mut r = run(i * 10 + 1, &[3], true, &[]);
            jobs.observe(&r, (0, 0), &[]);
            r.ended_unix_ms = Some(i * 10 + 2);
            jobs.observe(&r, (0, 0), if i == KEEP as u64 + 4 { &[3] } else { &[] });
        }
        let h = jobs.history();
        assert_eq!(h.jobs.len(), KEEP);
        assert_eq!(h.jobs[0].outcome, JobOutcome::Failed);
        assert!(h.jobs[0].reason.as_deref().unwrap().contains("slots 3 "));
        assert_eq!(h.jobs[1].outcome, JobOutcome::Finished);
    }

    #[test]
    fn a_job_left_running_with_nothing_to_move_is_closed_by_the_successor() {
        let jobs = Jobs::default();
        jobs.observe(&run(1, &[1], false, &[]), (100, 1000), &[]);
        let saved = jobs.to_save().unwrap();
        let next = Jobs::default();
        next.state.lock().unwrap().jobs = bounded(saved.jobs);
        next.close_orphan();
        let j = &next.history().jobs[0];
        assert_eq!(j.outcome, JobOutcome::Finished);
        assert!(j.reason.is_some() && j.ended_unix_ms.is_some());
    }
}
