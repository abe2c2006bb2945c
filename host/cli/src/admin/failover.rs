//! `tessera admin failover ...`: automatic failover's settings (docs/failover.md), why a down
//! group is not failing over, and the failovers done with their timings. Only sends the calls
//! and renders the answers; the decisions are the dashboard's.

use clap::{Args, Subcommand};
use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::table::{Table, human_bytes, word};
use tessera_wire::failover::{FailoverChange, FailoverView};

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
    let v: FailoverView = match cmd {
        FailoverCmd::Status => c.get(&["api", "failover"]).await?,
        FailoverCmd::On(s) => put(c, Some(true), s).await?,
        FailoverCmd::Off => put(c, Some(false), Settings::default()).await?,
        FailoverCmd::Set(s) => put(c, None, s).await?,
    };
    Reply::new(&v, render(&v))
}

async fn put(c: &Client, enabled: Option<bool>, s: Settings) -> anyhow::Result<FailoverView> {
    let body = FailoverChange {
        enabled,
        max_lag_bytes: s.max_lag_bytes,
        quorum: s.quorum,
        down_after_checks: s.down_after_checks,
        cooldown_secs: s.cooldown_secs,
    };
    c.call(Method::PUT, &["api", "failover"], Send::Json(&body))
        .await
}

fn render(v: &FailoverView) -> String {
    let s = &v.settings;
    let quorum = match s.quorum {
        0 => "a majority of the online proxies".to_string(),
        n => format!("{n} proxies"),
    };
    let mut out = format!(
        "automatic failover: {}\nmax lag: {} ({} bytes)\nquorum: {quorum}\ndown after: {} failed checks\ncooldown: {} s\n",
        if s.enabled { "on" } else { "off" },
        human_bytes(s.max_lag_bytes),
        s.max_lag_bytes,
        s.down_after_checks,
        s.cooldown_secs,
    );
    if let Some(p) = &v.pending {
        out.push_str(&format!(
            "\npromoting {} in group {} (decided, not yet complete)\n",
            p.to, p.group
        ));
    }
    if !v.groups.is_empty() {
        let mut t = Table::new(&["GROUP", "MASTER", "STATE", "WHY"]);
        for g in &v.groups {
            t.row(vec![
                g.group.to_string(),
                g.master.clone(),
                word(&g.state),
                g.reason.clone(),
            ]);
        }
        out.push_str("\ndown groups not failing over:\n");
        out.push_str(&t.render());
    }
    let events = &v.events;
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
            let ms = |n: Option<u64>| n.map_or("-".to_string(), |n| format!("{n} ms"));
            t.row(vec![
                e.group.to_string(),
                e.old_master.clone(),
                e.new_master.clone(),
                format!("{} B", e.lag_bytes),
                format!("{}/{}", e.votes, e.proxies),
                ms(e.detect_ms),
                if e.resumed {
                    "completed by a successor".to_string()
                } else {
                    ms(e.failover_ms)
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
        let v: FailoverView = serde_json::from_value(serde_json::json!({
            "settings": {"enabled": true, "max_lag_bytes": 1024, "quorum": 0,
                         "down_after_checks": 3, "cooldown_secs": 60},
            "groups": [{"group": 2, "master": "m:2", "state": "refused", "kind": "lag",
                        "reason": "the best replica lags", "since_ms": 1}],
            "pending": null, "rejoin": [],
            "events": [{"time_ms": 1, "group": 1, "old_master": "a:1", "new_master": "b:1",
                        "offset": 10, "lag_bytes": 0, "votes": 1, "proxies": 1,
                        "failover_ms": 812, "detect_ms": 640, "resumed": false}],
        }))
        .unwrap();
        let out = render(&v);
        assert!(out.contains("automatic failover: on"), "{out}");
        assert!(out.contains("the best replica lags"), "{out}");
        assert!(out.contains("812 ms"), "{out}");
        assert!(out.contains("a majority of the online proxies"), "{out}");
    }
}
