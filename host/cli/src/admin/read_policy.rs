//! `tessera admin read-policy [MODE] [--max-lag-ms N]`: shows or sets where read-only
//! commands go (docs/replica-reads.md), and each replica as the health checks see it. Only
//! sends the calls and renders the answers.

use clap::{Args, ValueEnum};
use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::table::{Table, grouped, opt, yes_no};
use tessera_wire::read_policy::{ReadMode, ReadPolicyChange, ReadPolicyView};

/// `tessera admin read-policy ...`
#[derive(Args, Debug)]
pub struct ReadPolicyArgs {
    /// Where reads go; absent: show the policy (with --max-lag-ms alone: change the bound).
    mode: Option<Mode>,
    /// A replica read never returns a value older than the one acknowledged this many
    /// milliseconds before the read (at least 200).
    #[arg(long)]
    max_lag_ms: Option<u64>,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Mode {
    /// Every read to the master.
    Master,
    /// A fresh replica when there is one, else the master.
    PreferReplica,
    /// A fresh replica only; with none, the read fails with TRYAGAIN.
    ReplicaOnly,
}

impl From<Mode> for ReadMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Master => ReadMode::Master,
            Mode::PreferReplica => ReadMode::PreferReplica,
            Mode::ReplicaOnly => ReadMode::ReplicaOnly,
        }
    }
}

pub(super) async fn run(c: &Client, args: ReadPolicyArgs) -> anyhow::Result<Reply> {
    let path = ["api", "read-policy"];
    let v: ReadPolicyView = if args.mode.is_none() && args.max_lag_ms.is_none() {
        c.get(&path).await?
    } else {
        let body = ReadPolicyChange {
            mode: args.mode.map(ReadMode::from),
            max_lag_ms: args.max_lag_ms,
        };
        c.call(Method::PUT, &path, Send::Json(&body)).await?
    };
    Reply::new(&v, render(&v))
}

fn render(v: &ReadPolicyView) -> String {
    let p = &v.policy;
    let mut out = format!("reads: {}\nmax lag: {} ms\n", p.mode.as_str(), p.max_lag_ms);
    if !v.replicas.is_empty() {
        // FRESH ON and PROVEN are the proxies' own findings, in ms like the bound; BEHIND is
        // the health checks' offset difference, in bytes.
        let mut t = Table::new(&[
            "GROUP", "REPLICA", "UP", "LINK", "FRESH ON", "PROVEN", "BEHIND",
        ]);
        for r in &v.replicas {
            t.row(vec![
                r.group.to_string(),
                r.addr.clone(),
                yes_no(r.up),
                opt(r.link.as_ref()),
                format!("{}/{}", r.fresh_on, v.proxies),
                r.proven_ms_ago
                    .map_or("never".to_string(), |ms| format!("{} ms ago", grouped(ms))),
                r.lag_bytes.map_or("-".to_string(), |b| {
                    format!("{} B", grouped(b.max(0).unsigned_abs()))
                }),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    if p.mode == ReadMode::Master {
        out.push_str("\nreads go to masters: the proxies do not probe their replicas\n");
    }
    if !v.unreachable.is_empty() {
        out.push_str(&format!(
            "proxies not answering: {}\n",
            v.unreachable.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_policy_and_each_replica() {
        let v: ReadPolicyView = serde_json::from_value(serde_json::json!({
            "policy": {"mode": "prefer-replica", "max_lag_ms": 500},
            "replicas": [{"group": 1, "addr": "r:1", "up": true, "link": "up", "lag_bytes": 0,
                          "fresh_on": 1, "proven_ms_ago": 140}],
            "proxies": 2,
            "unreachable": ["p:3"],
        }))
        .unwrap();
        let out = render(&v);
        assert!(out.contains("reads: prefer-replica"), "{out}");
        assert!(out.contains("500 ms"), "{out}");
        assert!(out.contains("r:1") && out.contains("0 B"), "{out}");
        assert!(out.contains("1/2") && out.contains("140 ms ago"), "{out}");
        assert!(out.contains("not answering: p:3"), "{out}");
    }
}
