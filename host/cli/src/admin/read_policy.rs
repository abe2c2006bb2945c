//! `tessera admin read-policy [MODE] [--max-lag-ms N]`: shows or sets where read-only
//! commands go (docs/replica-reads.md), and each replica as the health checks see it. Only
//! sends the calls and renders the answers.

use clap::{Args, ValueEnum};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Reply, Table, text};

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

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Master => "master",
            Mode::PreferReplica => "prefer-replica",
            Mode::ReplicaOnly => "replica-only",
        }
    }
}

pub(super) async fn run(c: &Client, args: ReadPolicyArgs) -> anyhow::Result<Reply> {
    let path = ["api", "read-policy"];
    let v = if args.mode.is_none() && args.max_lag_ms.is_none() {
        c.call(Method::GET, &path, None).await?
    } else {
        let mut body = json!({});
        if let Some(m) = args.mode {
            body["mode"] = json!(m.as_str());
        }
        if let Some(ms) = args.max_lag_ms {
            body["max_lag_ms"] = json!(ms);
        }
        c.call(Method::PUT, &path, Some(body)).await?
    };
    Ok(Reply {
        human: render(&v),
        json: v,
    })
}

fn render(v: &Value) -> String {
    let p = &v["policy"];
    let mut out = format!(
        "reads: {}\nmax lag: {} ms\n",
        text(&p["mode"]),
        text(&p["max_lag_ms"])
    );
    let replicas = v["replicas"].as_array().map_or(&[][..], Vec::as_slice);
    if !replicas.is_empty() {
        let mut t = Table::new(&["GROUP", "REPLICA", "UP", "LINK", "LAG"]);
        for r in replicas {
            t.row(vec![
                text(&r["group"]),
                text(&r["addr"]),
                if r["up"] == true { "yes" } else { "no" }.to_string(),
                text(&r["link"]),
                r["lag_bytes"]
                    .as_i64()
                    .map_or("-".to_string(), |b| format!("{b} B")),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_the_policy_and_each_replica() {
        let v = json!({
            "policy": {"mode": "prefer-replica", "max_lag_ms": 500},
            "replicas": [{"group": 1, "addr": "r:1", "up": true, "link": "up", "lag_bytes": 0}],
        });
        let out = render(&v);
        assert!(out.contains("reads: prefer-replica"), "{out}");
        assert!(out.contains("500 ms"), "{out}");
        assert!(out.contains("r:1") && out.contains("0 B"), "{out}");
    }
}
