//! `tessera admin rebalance`: plans a rebalance (by slots, weight, load or memory), shows the
//! plan and each group's measure before and after, and queues exactly the moves shown once
//! confirmed (on a terminal, or by `--yes`); `--dry-run` only shows.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::bail;
use clap::{Args, ValueEnum};
use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::table::{Table, human_bytes};
use tessera_wire::migration::{Rebalance, RebalanceAnswer, RebalanceBy};

/// What a rebalance evens out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum By {
    /// Slot counts, even.
    Slots,
    /// Slot counts in proportion to `--weight`s.
    Weight,
    /// Measured ops/s per slot.
    Load,
    /// Estimated memory per slot.
    Memory,
}

/// `tessera admin rebalance`.
#[derive(Args, Debug)]
pub struct RebalanceArgs {
    /// What to even out (default: weight when `--weight` is given, else slots).
    #[arg(long, value_enum)]
    by: Option<By>,
    /// Load and memory: how far from the mean a group may stay, in percent (default 10).
    #[arg(long)]
    tolerance: Option<f64>,
    /// Only show the plan.
    #[arg(long)]
    dry_run: bool,
    /// Queue the plan without asking (needed when stdin is not a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    /// Weights as GROUP=WEIGHT, e.g. `--weight 1=2 --weight 2=1`.
    #[arg(long = "weight", value_parser = super::parse_weight)]
    weights: Vec<(u32, u32)>,
}

impl From<By> for RebalanceBy {
    fn from(b: By) -> Self {
        match b {
            By::Slots => RebalanceBy::Slots,
            By::Weight => RebalanceBy::Weight,
            By::Load => RebalanceBy::Load,
            By::Memory => RebalanceBy::Memory,
        }
    }
}

pub(super) async fn run(c: &Client, a: RebalanceArgs, json_out: bool) -> anyhow::Result<Reply> {
    let by = RebalanceBy::from(a.by.unwrap_or(if a.weights.is_empty() {
        By::Slots
    } else {
        By::Weight
    }));
    let body = Rebalance {
        dry_run: true,
        by: Some(by),
        weights: (!a.weights.is_empty()).then(|| a.weights.iter().copied().collect()),
        tolerance: a.tolerance,
        moves: None,
    };
    let path = ["api", "rebalance"];
    let plan: RebalanceAnswer = c.call(Method::POST, &path, Send::Json(&body)).await?;
    let moves = plan.moves.len();
    if a.dry_run || moves == 0 {
        return Reply::new(&plan, render_plan(&plan, "would move"));
    }
    if !a.yes {
        let shown = if json_out {
            serde_json::to_string_pretty(&plan)?
        } else {
            render_plan(&plan, "would move")
        };
        super::emit(&shown)?;
        if !std::io::stdin().is_terminal() {
            bail!("not queued: confirm the plan above with --yes (stdin is not a terminal)");
        }
        if !confirm(moves)? {
            bail!("not queued: nothing moved");
        }
    }
    let queue = Rebalance {
        by: Some(by),
        moves: Some(plan.moves.clone()),
        ..Rebalance::default()
    };
    let done: RebalanceAnswer = c.call(Method::POST, &path, Send::Json(&queue)).await?;
    let mut human = if a.yes {
        render_plan(&plan, "would move")
    } else {
        String::new()
    };
    human.push_str(&format!("queued {} slot moves\n", done.slots));
    Reply::new(&done, human)
}

/// Asks on the terminal; yes only for "y" or "yes".
fn confirm(moves: usize) -> anyhow::Result<bool> {
    eprint!("Queue these {moves} slot moves? [y/N] ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// A plan: moves collapsed per (from, to), each group's measure before and after, notes.
fn render_plan(v: &RebalanceAnswer, verb: &str) -> String {
    let mut per: std::collections::BTreeMap<(u32, u32), Vec<u64>> = Default::default();
    for m in &v.moves {
        per.entry((m.from.0, m.to.0))
            .or_default()
            .push(u64::from(m.slot));
    }
    let by = v.by.unwrap_or(RebalanceBy::Slots);
    let by_name = super::table::word(&by);
    let tolerance = v
        .tolerance
        .map_or(String::new(), |t| format!(" (tolerance ±{t} %)"));
    let mut out = format!(
        "rebalance by {by_name}{tolerance}: {verb} {} slots\n",
        v.moves.len()
    );
    for ((from, to), slots) in per {
        out.push_str(&format!(
            "  group {from} → group {to}: {} slots ({})\n",
            slots.len(),
            slot_list(&slots)
        ));
    }
    if let Some(before) = &v.before {
        let unit = match by {
            RebalanceBy::Load => "ops/s",
            RebalanceBy::Memory => "bytes",
            _ => "slots",
        };
        let mut t = Table::new(&["GROUP", &format!("BEFORE ({unit})"), "AFTER"]);
        for (g, b) in before {
            let a = v
                .after
                .as_ref()
                .and_then(|a| a.get(g))
                .copied()
                .unwrap_or(0.0);
            t.row(vec![g.to_string(), measure(*b, by), measure(a, by)]);
        }
        out.push_str(&t.render());
    }
    for n in v.notes.iter().flatten() {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

fn measure(x: f64, by: RebalanceBy) -> String {
    match by {
        RebalanceBy::Memory => human_bytes(x as u64),
        RebalanceBy::Load => format!("{x:.1}"),
        _ => format!("{x:.0}"),
    }
}

/// "1-3, 7" for slots 1, 2, 3 and 7 (sorted input), the first 8 runs at most.
fn slot_list(slots: &[u64]) -> String {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &s in slots {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == s => *end = s,
            _ => runs.push((s, s)),
        }
    }
    let mut parts: Vec<String> = runs
        .iter()
        .take(8)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if runs.len() > 8 {
        parts.push("…".into());
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_shows_moves_measures_and_notes() {
        let v: RebalanceAnswer = serde_json::from_value(serde_json::json!({
            "by": "load", "tolerance": 10.0, "dry_run": true, "slots": 3,
            "moves": [{"slot": 1, "from": 1, "to": 2}, {"slot": 2, "from": 1, "to": 2},
                      {"slot": 9, "from": 1, "to": 2}],
            "before": {"1": 300.0, "2": 0.0}, "after": {"1": 150.0, "2": 150.0},
            "notes": ["group 3 stays"],
        }))
        .unwrap();
        let s = render_plan(&v, "would move");
        assert!(
            s.contains("rebalance by load (tolerance ±10 %): would move 3 slots"),
            "{s}"
        );
        assert!(s.contains("group 1 → group 2: 3 slots (1-2, 9)"), "{s}");
        assert!(s.contains("300.0") && s.contains("150.0"), "{s}");
        assert!(s.contains("note: group 3 stays"), "{s}");
    }
}
