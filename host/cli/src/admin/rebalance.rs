//! `tessera admin rebalance`: plans a rebalance (by slots, weight, load or memory), shows the
//! plan and each group's measure before and after, and queues exactly the moves shown once
//! confirmed (on a terminal, or by `--yes`); `--dry-run` only shows.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::bail;
use clap::{Args, ValueEnum};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Reply, Table, human_bytes, text};

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

pub(super) async fn run(c: &Client, a: RebalanceArgs, json_out: bool) -> anyhow::Result<Reply> {
    let by = a.by.unwrap_or(if a.weights.is_empty() {
        By::Slots
    } else {
        By::Weight
    });
    let name = by
        .to_possible_value()
        .expect("no variant is skipped")
        .get_name()
        .to_owned();
    let mut body = json!({ "dry_run": true, "by": name });
    if let Some(t) = a.tolerance {
        body["tolerance"] = json!(t);
    }
    if !a.weights.is_empty() {
        body["weights"] = a
            .weights
            .iter()
            .map(|(g, w)| (g.to_string(), json!(w)))
            .collect();
    }
    let plan = c
        .call(Method::POST, &["api", "rebalance"], Some(body))
        .await?;
    let moves = plan["moves"].as_array().map_or(0, Vec::len);
    if a.dry_run || moves == 0 {
        return Ok(Reply {
            human: render_plan(&plan, "would move"),
            json: plan,
        });
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
    let done = c
        .call(
            Method::POST,
            &["api", "rebalance"],
            Some(json!({ "by": name, "moves": plan["moves"] })),
        )
        .await?;
    let mut human = if a.yes {
        render_plan(&plan, "would move")
    } else {
        String::new()
    };
    human.push_str(&format!("queued {} slot moves\n", text(&done["slots"])));
    Ok(Reply { human, json: done })
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
fn render_plan(v: &Value, verb: &str) -> String {
    let moves = v["moves"].as_array().map_or(&[][..], Vec::as_slice);
    let mut per: std::collections::BTreeMap<(u64, u64), Vec<u64>> = Default::default();
    for m in moves {
        per.entry((
            m["from"].as_u64().unwrap_or(0),
            m["to"].as_u64().unwrap_or(0),
        ))
        .or_default()
        .push(m["slot"].as_u64().unwrap_or(0));
    }
    let by = v["by"].as_str().unwrap_or("slots");
    let tolerance = v["tolerance"]
        .as_f64()
        .map_or(String::new(), |t| format!(" (tolerance ±{t} %)"));
    let mut out = format!(
        "rebalance by {by}{tolerance}: {verb} {} slots\n",
        moves.len()
    );
    for ((from, to), slots) in per {
        out.push_str(&format!(
            "  group {from} → group {to}: {} slots ({})\n",
            slots.len(),
            slot_list(&slots)
        ));
    }
    if let Some(before) = v["before"].as_object() {
        let unit = match by {
            "load" => "ops/s",
            "memory" => "bytes",
            _ => "slots",
        };
        let mut t = Table::new(&["GROUP", &format!("BEFORE ({unit})"), "AFTER"]);
        for (g, b) in before {
            let a = &v["after"][g];
            t.row(vec![g.clone(), measure(b, by), measure(a, by)]);
        }
        out.push_str(&t.render());
    }
    for n in v["notes"].as_array().map_or(&[][..], Vec::as_slice) {
        out.push_str(&format!("note: {}\n", text(n)));
    }
    out
}

fn measure(v: &Value, by: &str) -> String {
    let x = v.as_f64().unwrap_or(0.0);
    match by {
        "memory" => human_bytes(&json!(x as u64)),
        "load" => format!("{x:.1}"),
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
        let v = json!({
            "by": "load", "tolerance": 10.0, "dry_run": true,
            "moves": [{"slot": 1, "from": 1, "to": 2}, {"slot": 2, "from": 1, "to": 2},
                      {"slot": 9, "from": 1, "to": 2}],
            "before": {"1": 300.0, "2": 0.0}, "after": {"1": 150.0, "2": 150.0},
            "notes": ["group 3 stays"],
        });
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
