//! `tessera admin mirror ...`: turn mirroring to a shadow target on or off for the cluster and
//! show what it found (docs/mirroring.md). Only sends the calls and renders the answers.

use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Reply, Table, human_bytes, text};

/// `tessera admin mirror ...`
#[derive(Subcommand, Debug)]
pub enum MirrorCmd {
    /// Settings, counters summed over the proxies, by command, and the latest mismatches.
    Status,
    /// Mirror to a shadow target (replaces the settings in force).
    Set(SetArgs),
    /// Stop mirroring.
    Off,
}

#[derive(Args, Debug)]
pub struct SetArgs {
    /// The shadow: host:port of a Redis server or of another cluster's proxy.
    #[arg(long)]
    target: String,
    /// `writes` (the default) or `all` (reads too, so their replies are compared).
    #[arg(long, default_value = "writes")]
    mode: String,
    /// Sent as AUTH when connecting to the shadow (or TESSERA_MIRROR_PASSWORD).
    #[arg(long, env = "TESSERA_MIRROR_PASSWORD", hide_env_values = true)]
    password: Option<String>,
    /// Commands awaiting the shadow per proxy thread; more are dropped (counted).
    #[arg(long)]
    max_queue: Option<u64>,
    /// Bytes held for them per proxy thread.
    #[arg(long)]
    max_queue_bytes: Option<u64>,
    /// Larger commands are not mirrored.
    #[arg(long)]
    max_command_bytes: Option<u64>,
}

pub(super) async fn run(c: &Client, cmd: MirrorCmd) -> anyhow::Result<Reply> {
    let v = match cmd {
        MirrorCmd::Status => c.call(Method::GET, &["api", "mirror"], None).await?,
        MirrorCmd::Off => c.call(Method::DELETE, &["api", "mirror"], None).await?,
        MirrorCmd::Set(a) => {
            let mut body = json!({ "target": a.target, "mode": a.mode });
            let fields = [
                ("password", a.password.map(Value::from)),
                ("max_queue", a.max_queue.map(Value::from)),
                ("max_queue_bytes", a.max_queue_bytes.map(Value::from)),
                ("max_command_bytes", a.max_command_bytes.map(Value::from)),
            ];
            for (k, v) in fields {
                if let Some(v) = v {
                    body[k] = v;
                }
            }
            c.call(Method::PUT, &["api", "mirror"], Some(body)).await?
        }
    };
    Ok(Reply {
        human: render(&v),
        json: v,
    })
}

fn render(v: &Value) -> String {
    let c = &v["config"];
    let mut out = if c.is_null() {
        "mirror: off\n".to_string()
    } else {
        format!(
            "mirror: on, {} to {}{}\nqueue bound per proxy thread: {} commands, {}; commands over {} not mirrored\n",
            text(&c["mode"]),
            text(&c["target"]),
            if c["password"] == true {
                " (with a password)"
            } else {
                ""
            },
            text(&c["max_queue"]),
            human_bytes(&c["max_queue_bytes"]),
            human_bytes(&c["max_command_bytes"]),
        )
    };
    let f = &v["figures"];
    out.push_str(&format!(
        "sent {}, compared {}, mismatched {}, not compared {}, shadow errors {}, queued now {} ({})\n",
        text(&f["sent"]),
        text(&f["compared"]),
        text(&f["mismatched"]),
        text(&f["uncompared"]),
        text(&f["errors"]),
        text(&f["queue_entries"]),
        human_bytes(&f["queue_bytes"]),
    ));
    if let Some(d) = f["dropped"].as_object() {
        let parts: Vec<String> = d.iter().map(|(k, n)| format!("{k} {}", text(n))).collect();
        out.push_str(&format!("dropped: {}\n", parts.join(", ")));
    }
    if let Some(cmds) = f["commands"].as_array().filter(|c| !c.is_empty()) {
        let mut t = Table::new(&["COMMAND", "SENT", "COMPARED", "MISMATCHED", "NOT COMPARED"]);
        for c in cmds {
            t.row(vec![
                text(&c["command"]),
                text(&c["sent"]),
                text(&c["compared"]),
                text(&c["mismatched"]),
                text(&c["uncompared"]),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    for p in v["proxies"].as_array().into_iter().flatten() {
        if let Some(e) = p["error"].as_str() {
            out.push_str(&format!("proxy {} not reached: {e}\n", text(&p["token"])));
        }
    }
    if let Some(samples) = v["samples"].as_array().filter(|s| !s.is_empty()) {
        out.push_str("\nlatest mismatches:\n");
        for s in samples.iter().take(10) {
            let args: Vec<String> = s["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(text)
                .collect();
            out.push_str(&format!(
                "  {} {}\n    primary: {}\n    shadow:  {}\n",
                text(&s["command"]),
                args.join(" "),
                text(&s["primary"]),
                text(&s["shadow"]),
            ));
        }
    }
    out
}
