//! `tessera admin failover ...`: automatic failover's settings (docs/failover.md), why a down
//! group is not failing over, and the failovers done with their timings. Only sends the calls
//! and renders the answers; the decisions are the dashboard's.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Reply, Table, human_bytes, text};

/// `tessera admin failover ...`
#[derive(Subcommand, Debug)]
pub enum FailoverCmd {
    /// Settings, down groups that are not failing over and why, recent failovers.
    Status,
    /// Turn automatic failover on (and change settings given).
    On(Settings),
    /// Turn automatic failover off: a dead master's group stays down until promoted by hand.
    Off,
    /// Change settings, leaving it on or off.
    Set(Settings),
}

/// Settings; those not given stay as they are.
#[derive(Args, Debug, Default)]
pub struct Settings {
    /// Refuse to promote a replica that lags the dead master by more than this many bytes.
    #[arg(long)]
    max_lag_bytes: Option<u64>,
    /// Proxies that must see the master down (0: a majority of the online ones).
    #[arg(long)]
    quorum: Option<u32>,
    /// Failed checks of the master in a row before failing over.
    #[arg(long)]
    down_after_checks: Option<u32>,
    /// Seconds between two failovers of one group.
    #[arg(long)]
    cooldown_secs: Option<u64>,
}

pub(super) async fn run(c: &Client, cmd: FailoverCmd) -> anyhow::Result<Reply> {
    let v = match cmd {
        FailoverCmd::Status => c.call(Method::GET, &["api", "failover"], None).await?,
        FailoverCmd::On(s) => put(c, Some(true), s).await?,
        FailoverCmd::Off => put(c, Some(false), Settings::default()).await?,
        FailoverCmd::Set(s) => put(c, None, s).await?,
    };
    Ok(Reply {
        human: render(&v),
        json: v,
    })
}

async fn put(c: &Client, enabled: Option<bool>, s: Settings) -> anyhow::Result<Value> {
    let mut body = json!({});
    let fields = [
        ("enabled", enabled.map(Value::from)),
        ("max_lag_bytes", s.max_lag_bytes.map(Value::from)),
        ("quorum", s.quorum.map(Value::from)),
        ("down_after_checks", s.down_after_checks.map(Value::from)),
        ("cooldown_secs", s.cooldown_secs.map(Value::from)),
    ];
    for (k, v) in fields {
        if let Some(v) = v {
            body[k] = v;
        }
    }
    c.call(Method::PUT, &["api", "failover"], Some(body)).await
}

fn render(v: &Value) -> String {
    let s = &v["settings"];
    let quorum = match s["quorum"].as_u64() {
        Some(0) | None => "a majority of the online proxies".to_string(),
        Some(n) => format!("{n} proxies"),
    };
    let mut out = format!(
        "automatic failover: {}\nmax lag: {} ({} bytes)\nquorum: {quorum}\ndown after: {} failed checks\ncooldown: {} s\n",
        if s["enabled"] == true { "on" } else { "off" },
        human_bytes(&s["max_lag_bytes"]),
        text(&s["max_lag_bytes"]),
        text(&s["down_after_checks"]),
        text(&s["cooldown_secs"]),
    );
    if let Some(p) = v["pending"].as_object() {
        out.push_str(&format!(
            "\npromoting {} in group {} (decided, not yet complete)\n",
            text(&p["to"]),
            text(&p["group"])
        ));
    }
    let groups = v["groups"].as_array().map_or(&[][..], Vec::as_slice);
    if !groups.is_empty() {
        let mut t = Table::new(&["GROUP", "MASTER", "STATE", "WHY"]);
        for g in groups {
            t.row(vec![
                text(&g["group"]),
                text(&g["master"]),
                text(&g["state"]),
                text(&g["reason"]),
            ]);
        }
        out.push_str("\ndown groups not failing over:\n");
        out.push_str(&t.render());
    }
    let events = v["events"].as_array().map_or(&[][..], Vec::as_slice);
    if !events.is_empty() {
        let mut t = Table::new(&[
            "GROUP",
            "OLD MASTER",
            "NEW MASTER",
            "LAG",
            "PROXIES",
            "DETECTED",
            "FAILOVER TIME",
        ]);
        for e in events {
            let ms = |k: &str| e[k].as_u64().map_or("-".to_string(), |n| format!("{n} ms"));
            t.row(vec![
                text(&e["group"]),
                text(&e["old_master"]),
                text(&e["new_master"]),
                format!("{} B", text(&e["lag_bytes"])),
                format!("{}/{}", text(&e["votes"]), text(&e["proxies"])),
                ms("detect_ms"),
                if e["resumed"] == true {
                    "completed by a successor".to_string()
                } else {
                    ms("failover_ms")
                },
            ]);
        }
        out.push_str(
            "\nrecent failovers (newest first; times from the master's first failed check):\n",
        );
        out.push_str(&t.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_why_a_group_is_not_failing_over_and_the_failover_time() {
        let v = json!({
            "settings": {"enabled": true, "max_lag_bytes": 1024, "quorum": 0,
                         "down_after_checks": 3, "cooldown_secs": 60},
            "groups": [{"group": 2, "master": "m:2", "state": "refused", "kind": "lag",
                        "reason": "the best replica lags", "since_ms": 1}],
            "pending": null, "rejoin": [],
            "events": [{"time_ms": 1, "group": 1, "old_master": "a:1", "new_master": "b:1",
                        "offset": 10, "lag_bytes": 0, "votes": 1, "proxies": 1,
                        "failover_ms": 812, "detect_ms": 640, "resumed": false}],
        });
        let out = render(&v);
        assert!(out.contains("automatic failover: on"), "{out}");
        assert!(out.contains("the best replica lags"), "{out}");
        assert!(out.contains("812 ms"), "{out}");
        assert!(out.contains("a majority of the online proxies"), "{out}");
    }
}
