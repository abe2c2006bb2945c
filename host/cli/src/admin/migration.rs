//! `tessera admin migrate|throttle|abort|migrations`: slots moving online, the running
//! migration's speed cap, aborts and progress (docs/migration.md). Only sends the calls and
//! renders the answers.

use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::slot_arg::label;
use super::table::{Table, grouped, grouped_f, human_bytes, human_duration, uptime, word};
use tessera_wire::migration::{
    AbortMigrations, Aborted, Hold, JobOutcome, MigrateSlots, MigrationHistory, MigrationJob,
    MigrationPhase, MigrationStatus, Queued, SlotProgress, SlotSpan, ThrottleAnswer,
    ThrottleChange, ThrottleLimits,
};
use tessera_wire::topology::GroupId;

/// A migration's speed cap.
#[derive(clap::Args, Debug)]
pub struct ThrottleArgs {
    /// At most this many keys per second, over every source.
    #[arg(long)]
    max_keys_per_sec: Option<u64>,
    /// At most this many MB (MiB) per second, as the sources count memory (MEMORY USAGE).
    #[arg(long)]
    max_mb_per_sec: Option<f64>,
}

pub(super) async fn migrate(
    c: &Client,
    from: u16,
    to: u16,
    group: u32,
    throttle: ThrottleArgs,
) -> anyhow::Result<Reply> {
    let body = MigrateSlots {
        from: from.into(),
        to: to.into(),
        group,
        max_keys_per_sec: throttle.max_keys_per_sec,
        max_mb_per_sec: throttle.max_mb_per_sec,
    };
    let v: Queued = c
        .call(Method::POST, &["api", "migrations"], Send::Json(&body))
        .await?;
    let human = format!(
        "queued {} slots of {} to move to group {group} (speed cap: {})\n",
        grouped(v.queued as u64),
        label(from, to),
        render_throttle(&v.throttle)
    );
    Reply::new(&v, human)
}

pub(super) async fn throttle(c: &Client, t: ThrottleArgs, off: bool) -> anyhow::Result<Reply> {
    if !off && t.max_keys_per_sec.is_none() && t.max_mb_per_sec.is_none() {
        anyhow::bail!("give --max-keys-per-sec and/or --max-mb-per-sec, or --off");
    }
    let body = ThrottleChange {
        max_keys_per_sec: t.max_keys_per_sec,
        max_mb_per_sec: t.max_mb_per_sec,
    };
    let v: ThrottleAnswer = c
        .call(
            Method::PUT,
            &["api", "migrations", "throttle"],
            Send::Json(&body),
        )
        .await?;
    let human = format!("migration speed cap: {}\n", render_throttle(&v.throttle));
    Reply::new(&v, human)
}

pub(super) async fn abort(c: &Client, all: bool, slots: Vec<u16>) -> anyhow::Result<Reply> {
    if !all && slots.is_empty() {
        anyhow::bail!("name the slots to abort, or --all");
    }
    let body = AbortMigrations {
        slots: (!all).then_some(slots),
    };
    let v: Aborted = c
        .call(
            Method::POST,
            &["api", "migrations", "abort"],
            Send::Json(&body),
        )
        .await?;
    let human = format!("aborted {} slot migrations\n", grouped(v.aborted as u64));
    Reply::new(&v, human)
}

pub(super) async fn status(c: &Client) -> anyhow::Result<Reply> {
    let v: MigrationStatus = c.get(&["api", "migrations"]).await?;
    Reply::new(&v, render_migrations(&v))
}

pub(super) async fn history(c: &Client) -> anyhow::Result<Reply> {
    let v: MigrationHistory = c.get(&["api", "migrations", "history"]).await?;
    Reply::new(&v, render_history(&v))
}

/// "400-511, 700".
fn spans(s: &[SlotSpan]) -> String {
    s.iter()
        .map(|r| label(r.from, r.to))
        .collect::<Vec<_>>()
        .join(", ")
}

fn groups(g: &[GroupId]) -> String {
    g.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The jobs, newest first, one row each; then, per job that was aborted, failed or held,
/// why.
fn render_history(v: &MigrationHistory) -> String {
    if v.jobs.is_empty() {
        return "no migration or rebalance in the history yet\n".into();
    }
    let mut t = Table::new(&[
        "STARTED",
        "KIND",
        "SLOTS",
        "GROUPS",
        "TOOK",
        "SLOTS MOVED",
        "KEYS",
        "BYTES",
        "PEAK PAUSE",
        "BY",
        "OUTCOME",
    ]);
    let mut notes = String::new();
    for j in &v.jobs {
        t.row(vec![
            uptime(j.started_unix_ms / 1000) + " ago",
            word(&j.kind),
            spans(&j.slots),
            format!("{} → {}", groups(&j.from_groups), groups(&j.to_groups)),
            j.duration_ms
                .map_or("-".into(), |ms| human_duration(ms.div_ceil(1000))),
            grouped(j.slots_moved as u64),
            grouped(j.keys_moved),
            human_bytes(j.bytes_moved),
            j.peak_pause_ms.map_or("-".into(), |p| format!("{p:.0} ms")),
            if j.started_by.is_empty() {
                "-".into()
            } else {
                j.started_by.join(", ")
            },
            outcome(j),
        ]);
        if let Some(r) = &j.reason {
            notes.push_str(&format!("{} ({}): {r}\n", j.id, spans(&j.slots)));
        }
        if !j.holds.is_empty() {
            notes.push_str(&format!("{} held:\n{}", j.id, render_holds(&j.holds)));
        }
    }
    t.render() + &notes
}

/// "finished", "aborted by ops (3 slots)", "failed".
fn outcome(j: &MigrationJob) -> String {
    match j.outcome {
        JobOutcome::Aborted => format!(
            "aborted by {} ({} slots)",
            j.aborted_by.as_deref().unwrap_or("?"),
            grouped(j.slots_aborted as u64)
        ),
        o => word(&o),
    }
}

/// One line per hold: how long ago, how often, which slots, why.
fn render_holds(holds: &[Hold]) -> String {
    holds
        .iter()
        .map(|h| {
            let seen = if h.times > 1 {
                format!(
                    " ({}x over {})",
                    grouped(u64::from(h.times)),
                    human_duration(h.last_ms.saturating_sub(h.time_ms).div_ceil(1000))
                )
            } else {
                String::new()
            };
            format!(
                "  {} ago{seen}  slots {}: {}\n",
                uptime(h.time_ms / 1000),
                spans(&h.slots),
                h.reason
            )
        })
        .collect()
}

/// "5000 keys/s, 2.0 MiB/s", or "none".
fn render_throttle(t: &ThrottleLimits) -> String {
    let mut parts = Vec::new();
    if let Some(k) = t.max_keys_per_sec {
        parts.push(format!("{} keys/s", grouped(k)));
    }
    if let Some(b) = t.max_bytes_per_sec {
        parts.push(format!("{}/s", human_bytes(b)));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// Migration status: the run's progress (the dashboard's numbers as they are), what holds it,
/// then the slots in flight summarised by range.
fn render_migrations(v: &MigrationStatus) -> String {
    let mut out = String::new();
    match &v.run {
        None => out.push_str("no migration has run since the dashboard started\n"),
        Some(r) if r.running => {
            out.push_str(&format!(
                "migrating: {:.1} % done  slots {} of {} left  keys copied {} of {}  left {}{}\n",
                r.percent_done,
                grouped((r.slots - r.slots_done) as u64),
                grouped(r.slots as u64),
                grouped(r.keys_copied),
                r.keys_total.map_or("unknown".into(), grouped),
                v.keys_left.map_or("unknown".into(), grouped),
                if r.keys_recopy > 0 {
                    format!(" (+{} written since their copy)", grouped(r.keys_recopy))
                } else {
                    String::new()
                },
            ));
            out.push_str(&format!(
                "rate {} keys/s ({}/s)  eta {}  moved {} keys ({}), copies again included\n",
                grouped_f(v.keys_per_sec),
                human_bytes(v.bytes_per_sec.max(0.0) as u64),
                v.eta_secs
                    .map_or("unknown".to_string(), |s| human_duration(s.round() as u64)),
                grouped(r.keys_moved),
                human_bytes(r.bytes_moved),
            ));
        }
        Some(r) => {
            let took = r
                .ended_unix_ms
                .map(|e| human_duration(e.saturating_sub(r.started_unix_ms) / 1000))
                .unwrap_or_else(|| "-".into());
            out.push_str(&format!(
                "no migration running; the last moved {} slots{} and {} keys in {took}\n",
                grouped(r.slots_done as u64),
                if r.slots_aborted > 0 {
                    format!(" ({} aborted)", grouped(r.slots_aborted as u64))
                } else {
                    String::new()
                },
                grouped(r.keys_copied),
            ));
        }
    }
    out.push_str(&format!(
        "speed cap: {}  slowest copy command: {}\n",
        render_throttle(&v.throttle),
        v.slowest_command
            .as_ref()
            .map_or("-".to_string(), |c| format!(
                "{:.1} ms ({})",
                c.ms, c.command
            )),
    ));
    if let Some(b) = &v.blocked {
        out.push_str(&format!("held: {b}\n"));
    }
    if !v.holds.is_empty() {
        out.push_str("why steps were held (oldest first):\n");
        out.push_str(&render_holds(&v.holds));
    }
    if v.abort_pending {
        out.push_str("abort asked for: the slots turn around at the driver's next step\n");
    }
    if let Some(p) = &v.write_pause {
        out.push_str(&format!(
            "write pause per slot handoff: p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms  last {:.0} ms  ({} slots in {} handoffs)\n",
            p.p50_ms, p.p99_ms, p.max_ms, p.last_ms, grouped(p.slots as u64), grouped(p.handoffs as u64),
        ));
    }
    let ranges = summarize(&v.slots);
    if !ranges.is_empty() {
        // A copy round re-copies the keys written during the one before; a slot converges
        // once a round leaves few enough for its handoff.
        let mut t = Table::new(&[
            "SLOTS",
            "PHASE",
            "GROUPS",
            "",
            "ROUND",
            "CHANGED",
            "CONVERGED",
            "KEYS MOVED",
        ]);
        for r in ranges {
            t.row(vec![
                label(r.from, r.to),
                word(&r.phase),
                format!("{} → {}", r.source, r.target),
                if r.aborting {
                    "abort".into()
                } else {
                    String::new()
                },
                if r.round.0 == r.round.1 {
                    r.round.0.to_string()
                } else {
                    format!("{}-{}", r.round.0, r.round.1)
                },
                grouped(r.changed),
                format!("{}/{}", r.converged, r.to - r.from + 1),
                grouped(r.keys_moved),
            ]);
        }
        out.push_str(&t.render());
    }
    out
}

/// Consecutive slots in one phase between the same groups, with their sums.
struct SlotRange {
    from: u16,
    to: u16,
    phase: MigrationPhase,
    source: GroupId,
    target: GroupId,
    aborting: bool,
    /// Lowest and highest round.
    round: (u32, u32),
    changed: u64,
    converged: usize,
    keys_moved: u64,
}

fn summarize(slots: &[SlotProgress]) -> Vec<SlotRange> {
    let mut sorted: Vec<&SlotProgress> = slots.iter().collect();
    sorted.sort_by_key(|s| s.slot);
    let mut out: Vec<SlotRange> = Vec::new();
    for s in sorted {
        if let Some(last) = out.last_mut()
            && last.to + 1 == s.slot
            && last.phase == s.phase
            && last.source == s.source
            && last.target == s.target
            && last.aborting == s.aborting
        {
            last.to = s.slot;
            last.round = (last.round.0.min(s.round), last.round.1.max(s.round));
            last.changed += s.changed_last_round as u64;
            last.converged += usize::from(s.converged);
            last.keys_moved += s.keys_moved;
            continue;
        }
        out.push(SlotRange {
            from: s.slot,
            to: s.slot,
            phase: s.phase,
            source: s.source,
            target: s.target,
            aborting: s.aborting,
            round: (s.round, s.round),
            changed: s.changed_last_round as u64,
            converged: usize::from(s.converged),
            keys_moved: s.keys_moved,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slot(n: u16, phase: &str, round: u32, changed: u64, converged: bool) -> serde_json::Value {
        json!({"slot": n, "state": "copying", "phase": phase, "source": 1, "target": 2,
               "aborting": false, "keys_moved": 1000, "round": round,
               "changed_last_round": changed, "converged": converged})
    }

    #[test]
    fn status_shows_the_run_the_cap_and_the_slots_in_flight_by_range() {
        let mut slots: Vec<serde_json::Value> = (400..=509)
            .map(|n| slot(n, "copying", 2, 3, n % 2 == 0))
            .collect();
        slots.push(slot(510, "pending", 0, 0, false));
        slots.push(slot(511, "pending", 0, 0, false));
        let v: MigrationStatus = serde_json::from_value(json!({
            "slots": slots,
            "pending": 2, "in_flight": 110, "keys_moved": 12000, "bytes_moved": 2048,
            "keys_per_sec": 2006.4, "bytes_per_sec": 1024.0, "run_keys_moved": 12000,
            "run_bytes_moved": 2048, "keys_left": 4566, "eta_secs": 125.0,
            "run": {"running": true, "started_unix_ms": 1, "ended_unix_ms": null, "slots": 112,
                    "slots_done": 0, "slots_aborted": 0, "keys_total": 9900, "keys_copied": 5334,
                    "keys_left": 4566, "keys_recopy": 330, "percent_done": 53.8,
                    "keys_moved": 12000, "bytes_moved": 2048},
            "throttle": {"max_keys_per_sec": 5000, "max_bytes_per_sec": 2097152},
            "slowest_command": {"ms": 1.25, "command": "EVAL (copy of 200 keys)"}, "blocked": "waiting",
            "max_slots_in_flight": 512, "abort_pending": false, "write_pause": null
        }))
        .unwrap();
        let out = render_migrations(&v);
        assert!(
            out.starts_with(
                "migrating: 53.8 % done  slots 112 of 112 left  keys copied 5,334 of 9,900  left 4,566 (+330 written since their copy)\n"
            ),
            "{out}"
        );
        assert!(out.contains("rate 2,006 keys/s"), "{out}");
        assert!(out.contains("eta 2m05s"), "{out}");
        assert!(!out.contains("~"), "{out}");
        assert!(out.contains("speed cap: 5,000 keys/s, 2.0 MiB/s"), "{out}");
        assert!(
            out.contains("1.2 ms (EVAL (copy of 200 keys))")
                || out.contains("1.3 ms (EVAL (copy of 200 keys))"),
            "{out}"
        );
        assert!(out.contains("held: waiting"), "{out}");
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip_while(|l| !l.starts_with("SLOTS"))
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                vec![
                    "400-509", "copying", "1", "→", "2", "2", "330", "55/110", "110,000"
                ],
                vec![
                    "510-511", "pending", "1", "→", "2", "0", "0", "0/2", "2,000"
                ],
            ],
            "one line per range, not per slot: {out}"
        );
        assert_eq!(render_throttle(&ThrottleLimits::default()), "none");
    }

    #[test]
    fn an_idle_status_says_what_the_last_migration_did_and_never_prints_a_placeholder() {
        let v: MigrationStatus = serde_json::from_value(json!({
            "slots": [], "pending": 0, "in_flight": 0, "keys_moved": 0, "bytes_moved": 0,
            "keys_per_sec": 0.0, "bytes_per_sec": 0.0, "run_keys_moved": 0, "run_bytes_moved": 0,
            "keys_left": null, "eta_secs": null,
            "run": {"running": false, "started_unix_ms": 1000, "ended_unix_ms": 61000,
                    "slots": 200, "slots_done": 200, "slots_aborted": 0, "keys_total": 12345,
                    "keys_copied": 12345, "keys_left": 0, "keys_recopy": 0,
                    "percent_done": 100.0, "keys_moved": 13000, "bytes_moved": 1},
            "throttle": {"max_keys_per_sec": null, "max_bytes_per_sec": null},
            "slowest_command": null, "blocked": null, "max_slots_in_flight": 512,
            "abort_pending": false, "write_pause": null
        }))
        .unwrap();
        let out = render_migrations(&v);
        assert!(
            out.starts_with(
                "no migration running; the last moved 200 slots and 12,345 keys in 1m00s\n"
            ),
            "{out}"
        );
        assert!(!out.contains("~-") && !out.contains("SLOTS"), "{out}");
        let mut none = v.clone();
        none.run = None;
        assert!(render_migrations(&none).starts_with("no migration has run"));
    }
}
