//! `tessera admin hotkeys`: the cluster's hottest keys by operations and by bytes, summed over
//! the proxies (`GET /api/hotkeys`), with the proxies that saw each. Only renders; the
//! counting is the proxies', the merge the dashboard's.

use clap::{Args, ValueEnum};
use reqwest::Method;
use serde_json::Value;

use super::{Client, Reply, Table, human_bytes, text};

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
    let v = c.call(Method::GET, &["api", "hotkeys"], None).await?;
    Ok(Reply {
        human: render(&v, a.by, a.limit as usize),
        json: v,
    })
}

fn render(v: &Value, by: Option<By>, limit: usize) -> String {
    let mut out = format!(
        "hot keys over the last {:.0} s, {} proxies answered",
        v["window_secs"].as_f64().unwrap_or(0.0),
        text(&v["proxies"])
    );
    let unanswered = v["unanswered"].as_array().map_or(0, Vec::len);
    if unanswered > 0 {
        out.push_str(&format!(" ({unanswered} did not: their keys are missing)"));
    }
    out.push('\n');
    for (name, field, shown) in [
        ("by operations", "by_ops", !matches!(by, Some(By::Bytes))),
        ("by bytes", "by_bytes", !matches!(by, Some(By::Ops))),
    ] {
        if !shown {
            continue;
        }
        let keys = v[field].as_array().map_or(&[][..], Vec::as_slice);
        out.push_str(&format!("\n{name}:\n"));
        if keys.is_empty() {
            out.push_str("(none yet)\n");
            continue;
        }
        let mut t = Table::new(&["KEY", "OPS", "BYTES", "SLOT", "GROUP", "PROXIES"]);
        for k in keys.iter().take(limit) {
            let mut key = text(&k["key"]);
            if k["truncated"] == true {
                key = format!("{key}… ({} bytes)", text(&k["key_len"]));
            }
            let seen: Vec<String> = k["seen_by"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .map(|s| format!("{} ({})", text(&s["addr"]), text(&s["ops"])))
                .collect();
            t.row(vec![
                key,
                text(&k["ops"]),
                human_bytes(&k["bytes"]),
                text(&k["slot"]),
                text(&k["group"]),
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
        let v = json!({"window_secs": 10.0, "proxies": 2, "unanswered": [],
            "by_ops": [{"key": "k", "key_len": 900, "truncated": true, "ops": 30, "bytes": 2048,
                        "slot": null, "group": null,
                        "seen_by": [{"addr": "a:1", "ops": 20}, {"addr": "b:1", "ops": 10}]}],
            "by_bytes": []});
        let s = render(&v, Some(By::Ops), 20);
        assert!(s.contains("k… (900 bytes)"), "{s}");
        assert!(s.contains("a:1 (20), b:1 (10)"), "{s}");
        assert!(!s.contains("by bytes"), "{s}");
    }
}
