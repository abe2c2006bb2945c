//! `tessera admin mirror ...`: turn mirroring to a shadow target on or off for the cluster and
//! show what it found (docs/mirroring.md). Only sends the calls and renders the answers.

use clap::{Args, Subcommand};
use reqwest::Method;

use super::Reply;
use super::client::{Client, NOTHING, Send};
use super::table::{Table, human_bytes};
use tessera_wire::mirror::{MirrorConfig, MirrorView, Mode, ProxyMirrorEntry};

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
    #[arg(long, default_value = "writes", value_parser = ["writes", "all"])]
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
    let path = ["api", "mirror"];
    let v: MirrorView = match cmd {
        MirrorCmd::Status => c.get(&path).await?,
        MirrorCmd::Off => c.call(Method::DELETE, &path, NOTHING).await?,
        MirrorCmd::Set(a) => {
            // clap allows only these two.
            let mode = if a.mode == "all" {
                Mode::All
            } else {
                Mode::Writes
            };
            // Unset bounds keep the defaults: the API's body is a whole new setting.
            let defaults = MirrorConfig::default();
            let body = MirrorConfig {
                target: a.target,
                password: a.password,
                mode,
                max_queue: a.max_queue.map_or(defaults.max_queue, |n| n as usize),
                max_queue_bytes: a
                    .max_queue_bytes
                    .map_or(defaults.max_queue_bytes, |n| n as usize),
                max_command_bytes: a
                    .max_command_bytes
                    .map_or(defaults.max_command_bytes, |n| n as usize),
            };
            c.call(Method::PUT, &path, Send::Json(&body)).await?
        }
    };
    Reply::new(&v, render(&v))
}

fn render(v: &MirrorView) -> String {
    let mut out = match &v.config {
        None => "mirror: off\n".to_string(),
        Some(c) => format!(
            "mirror: on, {} to {}{}\nqueue bound per proxy thread: {} commands, {}; commands over {} not mirrored\n",
            c.mode.as_str(),
            c.target,
            if c.password { " (with a password)" } else { "" },
            c.max_queue,
            human_bytes(c.max_queue_bytes as u64),
            human_bytes(c.max_command_bytes as u64),
        ),
    };
    let f = &v.figures;
    out.push_str(&format!(
        "sent {}, compared {}, mismatched {}, not compared {}, shadow errors {}, queued now {} ({})\n",
        f.sent,
        f.compared,
        f.mismatched,
        f.uncompared,
        f.errors,
        f.queue_entries,
        human_bytes(f.queue_bytes),
    ));
    let parts: Vec<String> = f.dropped.iter().map(|(k, n)| format!("{k} {n}")).collect();
    out.push_str(&format!("dropped: {}\n", parts.join(", ")));
    if !f.commands.is_empty() {
        let mut t = Table::new(&["COMMAND", "SENT", "COMPARED", "MISMATCHED", "NOT COMPARED"]);
        for c in &f.commands {
            t.row(vec![
                c.command.clone(),
                c.sent.to_string(),
                c.compared.to_string(),
                c.mismatched.to_string(),
                c.uncompared.to_string(),
            ]);
        }
        out.push('\n');
        out.push_str(&t.render());
    }
    for p in &v.proxies {
        if let ProxyMirrorEntry::Unreachable(e) = p {
            out.push_str(&format!("proxy {} not reached: {}\n", e.token, e.error));
        }
    }
    if !v.samples.is_empty() {
        out.push_str("\nlatest mismatches:\n");
        for s in v.samples.iter().take(10) {
            let s = &s.sample;
            out.push_str(&format!(
                "  {} {}\n    primary: {}\n    shadow:  {}\n",
                s.command,
                s.args.join(" "),
                s.primary,
                s.shadow,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_settings_counters_unreached_proxies_and_mismatches() {
        let v: MirrorView = serde_json::from_value(serde_json::json!({
            "version": 2,
            "config": {"target": "s:1", "mode": "all", "password": true, "max_queue": 10,
                       "max_queue_bytes": 2048, "max_command_bytes": 1024},
            "figures": {"sent": 3, "compared": 2, "mismatched": 1, "uncompared": 1, "errors": 0,
                        "dropped": {"queue_full": 4}, "queue_entries": 0, "queue_bytes": 0,
                        "commands": [{"command": "get", "sent": 3, "compared": 2,
                                      "mismatched": 1, "uncompared": 1}]},
            "proxies": [{"token": "p1", "addr": "a:1", "version": 2, "on": true,
                         "queue_entries": 0, "queue_bytes": 0},
                        {"token": "p2", "addr": "a:2", "error": "timed out"}],
            "samples": [{"command": "get", "args": ["k"], "primary": "\"a\"",
                         "shadow": "nil", "unix_ms": 1, "proxy": "p1"}],
        }))
        .unwrap();
        let out = render(&v);
        assert!(
            out.starts_with("mirror: on, all to s:1 (with a password)"),
            "{out}"
        );
        assert!(out.contains("sent 3, compared 2, mismatched 1"), "{out}");
        assert!(out.contains("dropped: queue_full 4"), "{out}");
        assert!(out.contains("proxy p2 not reached: timed out"), "{out}");
        assert!(
            out.contains("get k\n    primary: \"a\"\n    shadow:  nil"),
            "{out}"
        );
    }
}
