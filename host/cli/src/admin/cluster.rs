//! `tessera admin overview|group|slots|proxy|stats`: the cluster at a glance, its groups and
//! their servers, slot ownership, the registered proxies, traffic. Only sends the calls and
//! renders the answers.

use clap::Subcommand;
use reqwest::Method;

use super::Reply;
use super::client::{Client, NOTHING, Send};
use super::table::{Table, grouped, human_bytes, opt, opt_bytes, uptime, word, yes_no};
use tessera_wire::Empty;
use tessera_wire::cluster::{
    AddServer, AssignSlots, Assigned, CreateGroup, GroupView, Overview, Promote, ProxyStatsEntry,
    ProxyView, SlotView, Stats,
};

/// `tessera admin group ...`
#[derive(Subcommand, Debug)]
pub enum GroupCmd {
    /// List groups with their servers' health.
    List,
    /// Create a group (empty: add servers next).
    Create {
        /// Group id [default: the next free one].
        #[arg(long)]
        id: Option<u32>,
        /// Its servers speak TLS only: proxies, health checks and the mover connect with TLS
        /// (verified against each process's `--backend-tls-ca`; docs/tls.md).
        #[arg(long)]
        tls: bool,
    },
    /// Delete a group that has no slots and no servers.
    Delete {
        /// Group id.
        id: u32,
    },
    /// Add a server; the first one is the master, the others replicate from it.
    AddServer {
        /// Group id.
        id: u32,
        /// Redis server address, host:port.
        addr: String,
        /// The server has a password: a user of it that may create users (with
        /// TESSERA_SERVER_PASSWORD), used once to create the control plane's user.
        #[arg(long, default_value = "default", requires = "password")]
        user: String,
        /// That user's password (`requirepass` for `default`).
        #[arg(long, env = "TESSERA_SERVER_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Remove a server from a group.
    RemoveServer {
        /// Group id.
        id: u32,
        /// Redis server address, host:port.
        addr: String,
    },
    /// Make a replica the group's master.
    Promote {
        /// Group id.
        id: u32,
        /// The replica to promote, host:port.
        addr: String,
    },
}

/// `tessera admin slots ...`
#[derive(Subcommand, Debug)]
pub enum SlotsCmd {
    /// Slot ranges and their owners.
    List,
    /// Assign slots to GROUP and push the topology: `assign 0-511 1` (or `assign 0 511 1`).
    Assign {
        /// The slots, `A-B` or `N` (0-1023), then the owning group id.
        #[arg(value_name = "SLOTS GROUP", num_args = 2..=3, required = true)]
        args: Vec<String>,
    },
}

/// `tessera admin proxy ...`
#[derive(Subcommand, Debug)]
pub enum ProxyCmd {
    /// List proxies.
    List,
    /// Put a proxy back into topology pushes (pushes the topology to it).
    Online {
        /// The proxy: its address (host:port, clients' or admin) or its token, as `proxy
        /// list` shows them.
        // Not named `token`: clap keys arguments by field name, so it would share the global
        // `--token`'s slot and be sent as the bearer token.
        #[arg(value_name = "PROXY")]
        proxy_token: String,
    },
    /// Leave a proxy out of topology pushes.
    Offline {
        /// The proxy: its address (host:port, clients' or admin) or its token.
        #[arg(value_name = "PROXY")]
        proxy_token: String,
    },
    /// Remove a lost proxy from the list (one that answers is refused: stop it first).
    Remove {
        /// The proxy: its address (host:port, clients' or admin) or its token.
        #[arg(value_name = "PROXY")]
        proxy_token: String,
    },
}

pub(super) async fn overview(c: &Client) -> anyhow::Result<Reply> {
    let v: Overview = c.get(&["api", "overview"]).await?;
    Reply::new(&v, render_overview(&v))
}

pub(super) async fn stats(c: &Client) -> anyhow::Result<Reply> {
    let v: Stats = c.get(&["api", "stats"]).await?;
    Reply::new(&v, render_stats(&v))
}

pub(super) async fn group(c: &Client, cmd: GroupCmd) -> anyhow::Result<Reply> {
    let (v, summary): (GroupView, String) = match cmd {
        GroupCmd::List => {
            let v: Vec<GroupView> = c.get(&["api", "groups"]).await?;
            return Reply::new(&v, render_groups(&v));
        }
        GroupCmd::Create { id, tls } => {
            let body = CreateGroup { id, tls };
            let v: GroupView = c
                .call(Method::POST, &["api", "groups"], Send::Json(&body))
                .await?;
            let summary = format!("created group {}", v.id);
            (v, summary)
        }
        GroupCmd::Delete { id } => {
            let v: Empty = c
                .call(Method::DELETE, &["api", "groups", &id.to_string()], NOTHING)
                .await?;
            return Reply::new(&v, format!("deleted group {id}\n"));
        }
        GroupCmd::AddServer {
            id,
            addr,
            user,
            password,
        } => {
            let path = ["api", "groups", &id.to_string(), "servers"];
            let body = AddServer {
                addr: addr.clone(),
                user: password.is_some().then_some(user),
                password,
            };
            let v = c.call(Method::POST, &path, Send::Json(&body)).await?;
            (v, format!("added {addr} to group {id}"))
        }
        GroupCmd::RemoveServer { id, addr } => {
            let path = ["api", "groups", &id.to_string(), "servers", &addr];
            let v = c.call(Method::DELETE, &path, NOTHING).await?;
            (v, format!("removed {addr} from group {id}"))
        }
        GroupCmd::Promote { id, addr } => {
            let path = ["api", "groups", &id.to_string(), "promote"];
            let body = Promote { addr: addr.clone() };
            let v = c.call(Method::POST, &path, Send::Json(&body)).await?;
            (v, format!("{addr} is now the master of group {id}"))
        }
    };
    let human = format!("{summary}\n\n{}", render_groups(std::slice::from_ref(&v)));
    Reply::new(&v, human)
}

pub(super) async fn slots(c: &Client, cmd: SlotsCmd) -> anyhow::Result<Reply> {
    match cmd {
        SlotsCmd::List => {
            let v: Vec<SlotView> = c.get(&["api", "slots"]).await?;
            Reply::new(&v, render_slots(&v))
        }
        SlotsCmd::Assign { args } => {
            let (from, to, group) = super::slot_arg::range_and_group(&args)?;
            let body = AssignSlots {
                from: from.into(),
                to: to.into(),
                group,
            };
            let v: Assigned = c
                .call(Method::POST, &["api", "slots", "assign"], Send::Json(&body))
                .await?;
            let human = format!(
                "assigned {} slots ({}) to group {group}; topology epoch {}\n",
                v.assigned,
                super::slot_arg::label(from, to),
                v.epoch
            );
            Reply::new(&v, human)
        }
    }
}

pub(super) async fn proxy(c: &Client, cmd: ProxyCmd) -> anyhow::Result<Reply> {
    let (token, state) = match cmd {
        ProxyCmd::List => {
            let v: Vec<ProxyView> = c.get(&["api", "proxies"]).await?;
            return Reply::new(&v, render_proxies(&v));
        }
        ProxyCmd::Online { proxy_token } => (proxy_token, "online"),
        ProxyCmd::Offline { proxy_token } => (proxy_token, "offline"),
        ProxyCmd::Remove { proxy_token } => (proxy_token, "remove"),
    };
    // An address names a proxy as `proxy list` shows it first; the API names it by token.
    let token = if token.contains(':') {
        let all: Vec<ProxyView> = c.get(&["api", "proxies"]).await?;
        match all
            .iter()
            .find(|p| p.addr == token || p.admin_addr == token)
        {
            Some(p) => p.token.clone(),
            None => anyhow::bail!(
                "no registered proxy has the address {token}: `tessera admin proxy list` shows them"
            ),
        }
    } else {
        token
    };
    if state == "remove" {
        let v: ProxyView = c
            .call(Method::DELETE, &["api", "proxies", &token], NOTHING)
            .await?;
        let human = format!("proxy {} removed (it was {})\n", v.addr, word(&v.health));
        return Reply::new(&v, human);
    }
    let v: ProxyView = c
        .call(Method::POST, &["api", "proxies", &token, state], NOTHING)
        .await?;
    let human = format!(
        "proxy {} is now {}\n\n{}",
        v.addr,
        word(&v.state),
        render_proxies(std::slice::from_ref(&v))
    );
    Reply::new(&v, human)
}

fn render_overview(v: &Overview) -> String {
    let d = &v.dashboard;
    let mut t = Table::new(&[]);
    let mut kv = |k: &str, value: String| t.row(vec![k.to_string(), value]);
    kv("cluster", v.cluster.clone());
    kv("epoch", v.epoch.to_string());
    kv(
        "dashboard",
        format!(
            "{} (pid {} on {}, version {}, up {})",
            d.admin_addr,
            d.pid,
            d.host,
            d.version,
            uptime(d.start_unix)
        ),
    );
    kv("groups", v.groups.to_string());
    let f = &v.failover;
    let mut line = if f.enabled {
        format!("on (max lag {})", human_bytes(f.max_lag_bytes))
    } else {
        "off".to_string()
    };
    if let Some(last) = &f.last {
        line.push_str(&format!(
            "; last: group {} {} -> {}, {}",
            last.group,
            last.old_master,
            last.new_master,
            last.failover_ms
                .map_or("completed by a successor".to_string(), |ms| format!(
                    "{ms} ms"
                ))
        ));
    }
    kv("failover", line);
    kv(
        "servers",
        format!("{} ({} down)", v.servers, v.servers_down),
    );
    kv(
        "proxies",
        format!("{} ({} online)", v.proxies, v.proxies_online),
    );
    kv(
        "slots",
        format!(
            "{} assigned, {} unassigned",
            v.slots_assigned, v.slots_unassigned
        ),
    );
    kv("ops/s", v.ops_per_sec.to_string());
    kv("memory", human_bytes(v.memory_bytes));
    kv("keys", v.keys.to_string());
    t.render()
}

/// One row per server; the group's columns only on its first row.
fn render_groups(groups: &[GroupView]) -> String {
    let mut t = Table::new(&[
        "GROUP", "SLOTS", "SERVER", "ROLE", "UP", "LINK", "OFFSET", "LAG", "MEMORY", "KEYS", "NOTE",
    ]);
    for g in groups {
        let mut id = g.id.to_string();
        if g.tls {
            id.push_str(" (tls)");
        }
        if g.down {
            id.push_str(" (down)");
        }
        let mut head = vec![id, g.slots.to_string()];
        if g.servers.is_empty() {
            head.push("(no servers)".into());
            t.row(head);
            continue;
        }
        for s in &g.servers {
            let role = word(&s.role);
            let note = match (&s.error, &s.role_reported) {
                (Some(e), _) => e.clone(),
                // Redis's ROLE still says "slave" for a replica.
                (_, Some(r)) if r.replace("slave", "replica") != role => format!("reports {r}"),
                _ => String::new(),
            };
            let mut row = std::mem::replace(&mut head, vec![String::new(), String::new()]);
            row.extend([
                s.addr.clone(),
                role,
                yes_no(s.up),
                opt(s.master_link.as_ref()),
                opt(s.repl_offset),
                // A negative lag (the replica ahead of the master's last known offset) is
                // shown as the number it is.
                s.lag_bytes.map_or("-".into(), |l| {
                    u64::try_from(l).map_or_else(|_| l.to_string(), human_bytes)
                }),
                opt_bytes(s.memory_bytes),
                opt(s.keys),
                note,
            ]);
            t.row(row);
        }
        if let Some(f) = &g.failover {
            let mut row = vec![String::new(); 10];
            row.push(format!("failover {}: {}", word(&f.state), f.reason));
            t.row(row);
        }
    }
    t.render()
}

/// Consecutive slots with the same owner and the same action in progress.
#[derive(Debug, PartialEq)]
struct SlotRange {
    from: u64,
    to: u64,
    owner: String,
    action: Option<String>,
}

fn collapse_slots(slots: &[SlotView]) -> Vec<SlotRange> {
    let mut sorted: Vec<&SlotView> = slots.iter().collect();
    sorted.sort_by_key(|s| s.id);
    let mut out: Vec<SlotRange> = Vec::new();
    for s in sorted {
        let id = u64::from(s.id);
        let owner = match s.group {
            None => "unassigned".to_string(),
            Some(g) => format!("group {g}"),
        };
        let action = s
            .action
            .as_ref()
            .map(|a| format!("{} → group {}", word(&a.state), a.target));
        match out.last_mut() {
            Some(r) if r.to + 1 == id && r.owner == owner && r.action == action => r.to = id,
            _ => out.push(SlotRange {
                from: id,
                to: id,
                owner,
                action,
            }),
        }
    }
    out
}

fn render_slots(slots: &[SlotView]) -> String {
    let mut t = Table::new(&[]);
    for r in collapse_slots(slots) {
        let range = if r.from == r.to {
            r.from.to_string()
        } else {
            format!("{}-{}", r.from, r.to)
        };
        let action = r.action.map(|a| format!("({a})")).unwrap_or_default();
        t.row(vec![range, format!("→ {}", r.owner), action]);
    }
    t.render()
}

fn render_proxies(proxies: &[ProxyView]) -> String {
    // Named by the address clients use; the token (which the API names it by) comes last.
    let mut t = Table::new(&[
        "ADDR", "HEALTH", "STATE", "EPOCH", "ADMIN", "PID", "HOST", "VERSION", "UPTIME", "TOKEN",
    ]);
    for p in proxies {
        t.row(vec![
            p.addr.clone(),
            word(&p.health),
            word(&p.state),
            opt(p.epoch),
            p.admin_addr.clone(),
            p.pid.to_string(),
            p.host.clone(),
            p.version.clone(),
            uptime(p.start_unix),
            p.token.clone(),
        ]);
    }
    t.render()
}

fn render_stats(v: &Stats) -> String {
    let mut totals = Table::new(&[]);
    for (k, n) in [
        ("ops/s", v.ops_per_sec),
        ("ops total", v.ops_total),
        ("errors total", v.errors_total),
        ("sessions", v.sessions as u64),
    ] {
        totals.row(vec![k.into(), grouped(n)]);
    }
    let mut commands = Table::new(&["COMMAND", "CALLS", "ERRORS"]);
    for c in &v.commands {
        commands.row(vec![c.command.clone(), grouped(c.calls), grouped(c.errors)]);
    }
    let mut proxies = Table::new(&[
        "PROXY", "EPOCH", "SESSIONS", "OPS/S", "OPS", "ERRORS", "NOTE",
    ]);
    for p in &v.proxies {
        proxies.row(match p {
            ProxyStatsEntry::Answered(s) => vec![
                s.token.clone(),
                s.epoch.to_string(),
                grouped(s.sessions as u64),
                grouped(s.ops_per_sec),
                grouped(s.ops_total),
                grouped(s.errors_total),
            ],
            ProxyStatsEntry::Unreachable(u) => {
                let mut row = vec![u.token.clone()];
                row.extend(["-", "-", "-", "-", "-"].map(String::from));
                row.push(u.error.clone());
                row
            }
        });
    }
    format!(
        "{}\n{}\n{}",
        totals.render(),
        commands.render(),
        proxies.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tessera_wire::cluster::ServerRole;

    fn slot(id: u64, group: Option<u64>) -> SlotView {
        serde_json::from_value(json!({ "id": id, "group": group })).unwrap()
    }

    #[test]
    fn consecutive_slots_of_one_group_collapse_into_a_range() {
        let mut slots: Vec<SlotView> = (0..512).map(|i| slot(i, Some(1))).collect();
        slots.extend((512..1023).map(|i| slot(i, Some(2))));
        slots.push(serde_json::from_value(json!({ "id": 1023 })).unwrap()); // `group` absent: unassigned
        assert_eq!(
            render_slots(&slots),
            "0-511     → group 1\n512-1022  → group 2\n1023      → unassigned\n"
        );
    }

    #[test]
    fn a_gap_or_an_action_splits_a_range() {
        let slots = vec![
            slot(3, Some(1)),
            slot(0, Some(1)),
            slot(1, Some(1)),
            serde_json::from_value(json!({ "id": 2, "group": 1, "action": { "state": "migrating", "source": 1, "target": 2 } })).unwrap(),
        ];
        let ranges = collapse_slots(&slots);
        let spans: Vec<(u64, u64)> = ranges.iter().map(|r| (r.from, r.to)).collect();
        assert_eq!(spans, [(0, 1), (2, 2), (3, 3)]);
        assert_eq!(ranges[1].action.as_deref(), Some("migrating → group 2"));
        assert_eq!(ranges[2].owner, "group 1");
    }

    #[test]
    fn null_group_is_unassigned() {
        let ranges = collapse_slots(&[slot(0, None), slot(1, None)]);
        assert_eq!(
            ranges,
            [SlotRange {
                from: 0,
                to: 1,
                owner: "unassigned".into(),
                action: None
            }]
        );
    }

    /// A server of a group's answer, with the fields a test leaves out absent.
    fn server(fields: serde_json::Value) -> serde_json::Value {
        let mut s = json!({"role_reported": null, "master_link": null, "repl_offset": null,
                           "memory_bytes": null, "keys": null, "error": null, "lag_bytes": null});
        for (k, v) in fields.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    }

    #[test]
    fn groups_render_one_row_per_server() {
        let g: Vec<GroupView> = serde_json::from_value(json!([
            { "id": 1, "slots": 512, "down": false, "tls": false, "servers": [
                server(json!({ "addr": "127.0.0.1:7001", "role": "master", "up": true, "role_reported": "master" })),
                server(json!({ "addr": "127.0.0.1:7002", "role": "replica", "up": true, "role_reported": "slave" })),
                server(json!({ "addr": "127.0.0.1:7003", "role": "replica", "up": true, "role_reported": "master" })),
                server(json!({ "addr": "127.0.0.1:7004", "role": "replica", "up": false, "error": "connection refused" }))
            ]},
            { "id": 2, "slots": 0, "down": true, "tls": false, "servers": [] }
        ]))
        .unwrap();
        let out = render_groups(&g);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 6);
        assert!(lines[1].starts_with("1         512    127.0.0.1:7001  master   yes"));
        assert!(!lines[1].contains("reports"));
        assert!(lines[2].starts_with("                 127.0.0.1:7002  replica  yes"));
        assert!(
            !lines[2].contains("reports"),
            "ROLE's \"slave\" is a replica: {}",
            lines[2]
        );
        assert!(lines[3].ends_with("reports master"));
        assert!(lines[4].starts_with("                 127.0.0.1:7004  replica  no"));
        assert!(lines[4].ends_with("connection refused"));
        assert_eq!(lines[5], "2 (down)  0      (no servers)");
    }

    #[test]
    fn a_server_role_is_spelled_as_the_api_spells_it() {
        assert_eq!(word(&ServerRole::Replica), "replica");
    }
}
