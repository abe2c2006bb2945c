//! `tessera admin hotkeys`: the cluster's hottest keys by operations and by bytes, summed over
//! the proxies (`GET /api/hotkeys`), with the proxies that saw each. Only renders; the
//! counting is the proxies', the merge the dashboard's.

use clap::{Args, ValueEnum};

use super::Reply;
use super::client::Client;
use super::table::{Table, human_bytes, opt};
use tessera_wire::telemetry::{ClusterHotKey, ClusterHotKeys};

/// The keys the API lists per ranking by default.
const API_DEFAULT: u16 = 20;

/// `tessera admin hotkeys [--by ops|bytes] [--limit N]`
#[derive(Args, Debug)]
pub struct HotKeysArgs {
    /// Which ranking to show (both when not given).
    #[arg(long, value_enum)]
    by: Option<By>,
    /// Keys per ranking (at most 20).
    #[arg(long, default_value_t = API_DEFAULT, value_parser = clap::value_parser!(u16).range(1..=API_DEFAULT as i64))]
    limit: u16,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum By {
    Ops,
    Bytes,
}

pub(super) async fn run(c: &Client, a: HotKeysArgs) -> anyhow::Result<Reply> {
    let v: ClusterHotKeys = c.get(&["api", "hotkeys"]).await?;
    Reply::new(&v, render(&v, a.by, a.limit as usize))
}

fn render(v: &ClusterHotKeys, by: Option<By>, limit: usize) -> String {
    let mut out = format!(
        "hot keys over the last {:.0} s, {} proxies answered",
        v.window_secs, v.proxies
    );
    let unanswered = v.unanswered.len();
    if unanswered > 0 {
        out.push_str(&format!(" ({unanswered} did not: their keys are missing)"));
    }
    out.push('\n');
    let rankings: [(&str, &[ClusterHotKey], bool); 2] = [
        ("by operations", &v.by_ops, !matches!(by, Some(By::Bytes))),
        ("by bytes", &v.by_bytes, !matches!(by, Some(By::Ops))),
    ];
    for (name, keys, shown) in rankings {
        if !shown {
            continue;
        }
        out.push_str(&format!("\n{name}:\n"));
        if keys.is_empty() {
            out.push_str("(none yet)\n");
            continue;
        }
        let mut t = Table::new(&["KEY", "OPS", "BYTES", "SLOT", "GROUP", "PROXIES"]);
        for k in keys.iter().take(limit) {
            let mut key = k.key.clone();
            if k.truncated {
                key = format!("{key}… ({} bytes)", k.key_len);
            }
            let seen: Vec<String> = k
                .seen_by
                .iter()
                .map(|s| format!("{} ({})", s.addr, s.ops))
                .collect();
            t.row(vec![
                key,
                k.ops.to_string(),
                human_bytes(k.bytes),
                opt(k.slot),
                opt(k.group),
                seen.join(", "),
            ]);
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
    fn a_truncated_key_shows_its_length_and_proxies_their_share() {
        let v: ClusterHotKeys =
            serde_json::from_value(json!({"window_secs": 10.0, "proxies": 2, "unanswered": [],
            "by_ops": [{"key": "k", "key_len": 900, "truncated": true, "ops": 30, "bytes": 2048,
                        "slot": null, "group": null,
                        "seen_by": [{"token": "t1", "addr": "a:1", "ops": 20, "bytes": 1024},
                                    {"token": "t2", "addr": "b:1", "ops": 10, "bytes": 1024}]}],
            "by_bytes": []}))
            .unwrap();
        let s = render(&v, Some(By::Ops), 20);
        assert!(s.contains("k… (900 bytes)"), "{s}");
        assert!(s.contains("a:1 (20), b:1 (10)"), "{s}");
        assert!(!s.contains("by bytes"), "{s}");
    }
}
