//! `tessera admin migrate|throttle|abort|migrations`: slots moving online, the running
//! migration's speed cap, aborts and progress (docs/migration.md). Only sends the calls and
//! renders the answers.

use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::table::{Table, human_bytes, opt, word};
use tessera_wire::cluster::ActionState;
use tessera_wire::migration::{
    AbortMigrations, Aborted, MigrateSlots, MigrationStatus, Queued, ThrottleAnswer,
    ThrottleChange, ThrottleLimits,
};

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
        "queued {} slots of {from}-{to} to move to group {group} (speed cap: {})\n",
        v.queued,
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
    let human = format!("aborted {} slot migrations\n", v.aborted);
    Reply::new(&v, human)
}

pub(super) async fn status(c: &Client) -> anyhow::Result<Reply> {
    let v: MigrationStatus = c.get(&["api", "migrations"]).await?;
    Reply::new(&v, render_migrations(&v))
}

/// "5000 keys/s, 2.0 MiB/s", or "none".
fn render_throttle(t: &ThrottleLimits) -> String {
    let mut parts = Vec::new();
    if let Some(k) = t.max_keys_per_sec {
        parts.push(format!("{k} keys/s"));
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

/// Migration status: totals, then the slots in flight.
fn render_migrations(v: &MigrationStatus) -> String {
    let mut out = format!(
        "pending {}  in flight {}  keys moved {} ({})  keys/s {:.0}  {}/s  keys left ~{}  eta {}\n",
        v.pending,
        v.in_flight,
        v.run_keys_moved,
        human_bytes(v.run_bytes_moved),
        v.keys_per_sec,
        human_bytes(v.bytes_per_sec as u64),
        opt(v.keys_left),
        v.eta_secs.map_or("-".to_string(), |s| format!("{s:.0}s")),
    );
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
    if v.abort_pending {
        out.push_str("abort asked for: the slots turn around at the driver's next step\n");
    }
    if let Some(p) = &v.write_pause {
        out.push_str(&format!(
            "write pause per slot handoff: p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms  last {:.0} ms  ({} slots in {} handoffs)\n",
            p.p50_ms, p.p99_ms, p.max_ms, p.last_ms, p.slots, p.handoffs,
        ));
    }
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in v
        .slots
        .iter()
        .filter(|s| s.state != ActionState::Pending)
        .take(50)
    {
        rows.push(vec![
            s.slot.to_string(),
            word(&s.phase),
            format!("{} → {}", s.source, s.target),
            if s.aborting {
                "abort".into()
            } else {
                String::new()
            },
            s.round.to_string(),
            s.changed_last_round.to_string(),
            if s.converged { "yes" } else { "no" }.into(),
            s.keys_moved.to_string(),
        ]);
    }
    if !rows.is_empty() {
        // A copy round re-copies the keys written during the one before; a slot converges
        // once a round leaves few enough for its handoff.
        let mut t = Table::new(&[
            "SLOT",
            "PHASE",
            "GROUPS",
            "",
            "ROUND",
            "CHANGED",
            "CONVERGED",
            "KEYS MOVED",
        ]);
        for r in rows {
            t.row(r);
        }
        out.push_str(&t.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_shows_totals_the_cap_and_the_slots_in_flight() {
        let v: MigrationStatus = serde_json::from_value(json!({
            "slots": [{"slot": 7, "state": "copying", "phase": "copying", "source": 1,
                       "target": 2, "aborting": true, "keys_moved": 12, "round": 2,
                       "changed_last_round": 3, "converged": false},
                      {"slot": 8, "state": "pending", "phase": "pending", "source": 1,
                       "target": 2, "aborting": false, "keys_moved": 0, "round": 0,
                       "changed_last_round": 0, "converged": false}],
            "pending": 1, "in_flight": 1, "keys_moved": 12, "bytes_moved": 2048,
            "keys_per_sec": 3.0, "bytes_per_sec": 1024.0, "run_keys_moved": 12,
            "run_bytes_moved": 2048, "keys_left": 40, "eta_secs": 13.3,
            "throttle": {"max_keys_per_sec": 5000, "max_bytes_per_sec": 2097152},
            "slowest_command": {"ms": 1.25, "command": "EVAL (copy of 200 keys)"}, "blocked": "waiting",
            "max_slots_in_flight": 512, "abort_pending": false, "write_pause": null
        }))
        .unwrap();
        let out = render_migrations(&v);
        assert!(
            out.starts_with("pending 1  in flight 1  keys moved 12 (2.0 KiB)"),
            "{out}"
        );
        assert!(out.contains("keys left ~40  eta 13s"), "{out}");
        assert!(out.contains("speed cap: 5000 keys/s, 2.0 MiB/s"), "{out}");
        assert!(
            out.contains("1.2 ms (EVAL (copy of 200 keys))")
                || out.contains("1.3 ms (EVAL (copy of 200 keys))"),
            "{out}"
        );
        assert!(out.contains("held: waiting"), "{out}");
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip_while(|l| !l.starts_with("SLOT"))
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [["7", "copying", "1", "→", "2", "abort", "2", "3", "no", "12"]],
            "pending slots are not listed: {out}"
        );
        assert_eq!(render_throttle(&ThrottleLimits::default()), "none");
    }
}
