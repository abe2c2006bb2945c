//! `tessera admin`: a command-line client of a dashboard's REST API (`docs/api.md`). It only
//! sends requests and renders the answers, as aligned tables or, with `--json`, as the raw
//! response; every rule (what may be deleted, who owns a slot) is the dashboard's.

mod failover;
mod hotkeys;
mod mirror;
mod read_policy;
mod rebalance;
mod routes;
mod token;

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use reqwest::{Method, Url};
use serde_json::{Value, json};

/// Per-request deadline. Promotions and topology pushes wait for every proxy's
/// acknowledgement, which can take a few seconds; a hung dashboard must not hang scripts.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `tessera admin`: manage a cluster through its dashboard's API.
#[derive(Args, Debug)]
pub struct AdminArgs {
    /// Dashboard API address: host:port or http://host:port[/prefix].
    #[arg(
        long,
        global = true,
        env = "TESSERA_DASHBOARD",
        default_value = "127.0.0.1:18080"
    )]
    pub dashboard: String,
    /// API token, sent as `Authorization: Bearer`: a viewer's reads, an operator's also
    /// migrates and manages plugins, an admin's does everything.
    #[arg(
        long,
        global = true,
        env = "TESSERA_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Print the JSON response, pretty-printed, instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: AdminCmd,
}

/// One subcommand per resource of the API.
#[derive(Subcommand, Debug)]
pub enum AdminCmd {
    /// Cluster summary: epoch, groups, servers, proxies, slots, load.
    Overview,
    /// Replica groups and their servers.
    #[command(subcommand)]
    Group(GroupCmd),
    /// The 1024 slots and the groups that own them.
    #[command(subcommand)]
    Slots(SlotsCmd),
    /// Registered proxies.
    #[command(subcommand)]
    Proxy(ProxyCmd),
    /// Traffic: totals, per command, per proxy.
    Stats,
    /// WebAssembly plugins of the cluster (loaded into every proxy).
    #[command(subcommand)]
    Plugin(PluginCmd),
    /// Users clients AUTH to the cluster's proxies as (docs/users.md).
    #[command(subcommand)]
    User(UserCmd),
    /// API tokens of the dashboard, each with a role (viewer, operator, admin).
    #[command(subcommand)]
    Token(token::TokenCmd),
    /// Automatic failover (docs/failover.md): on, off, settings, why not, failovers done.
    #[command(subcommand)]
    Failover(failover::FailoverCmd),
    /// Mirror commands to a shadow target and compare its replies (docs/mirroring.md).
    #[command(subcommand)]
    Mirror(mirror::MirrorCmd),
    /// Where read-only commands go (docs/replica-reads.md): show, or set MODE and the bound.
    ReadPolicy(read_policy::ReadPolicyArgs),
    /// Key prefixes routed to other clusters (docs/prefix-routes.md): list, add, remove.
    Routes {
        #[command(subcommand)]
        cmd: Option<routes::RoutesCmd>,
    },
    /// Move slots FROM..=TO to GROUP online (keys move while clients keep working).
    Migrate {
        /// First slot (0-1023).
        from: u16,
        /// Last slot, inclusive.
        to: u16,
        /// Target group id.
        group: u32,
        #[command(flatten)]
        throttle: ThrottleArgs,
    },
    /// Change the running migration's speed cap (`--off` lifts it); it ends with the migration.
    Throttle {
        #[command(flatten)]
        throttle: ThrottleArgs,
        #[arg(long, conflicts_with_all = ["max_keys_per_sec", "max_mb_per_sec"])]
        off: bool,
    },
    /// Even out slots, weight, measured load or memory over the groups: shows the plan, then
    /// queues it once confirmed (`--yes`); `--dry-run` only shows it.
    Rebalance(rebalance::RebalanceArgs),
    /// Abort migrations: the given slots, or all with `--all`; moved keys go back.
    Abort {
        #[arg(long, conflicts_with = "slots")]
        all: bool,
        slots: Vec<u16>,
    },
    /// Migration progress: slots in flight, keys moved, keys per second, ETA.
    Migrations,
    /// The hottest keys by operations and by bytes, summed over the proxies (docs/hotkeys.md).
    Hotkeys(hotkeys::HotKeysArgs),
}

/// A migration's speed cap.
#[derive(clap::Args, Debug)]
pub struct ThrottleArgs {
    /// At most this many keys per second, over every source.
    #[arg(long)]
    max_keys_per_sec: Option<u64>,
    /// At most this many MB (MiB) per second, as the sources count memory (MEMORY USAGE).
    #[arg(long)]
    max_mb_per_sec: Option<f64>,
}

impl ThrottleArgs {
    fn json(&self) -> Value {
        json!({ "max_keys_per_sec": self.max_keys_per_sec, "max_mb_per_sec": self.max_mb_per_sec })
    }
}

/// "5000 keys/s, 2.0 MiB/s", or "none".
fn render_throttle(t: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(k) = t["max_keys_per_sec"].as_u64() {
        parts.push(format!("{k} keys/s"));
    }
    if t["max_bytes_per_sec"].is_u64() {
        parts.push(format!("{}/s", human_bytes(&t["max_bytes_per_sec"])));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn parse_weight(s: &str) -> Result<(u32, u32), String> {
    let (g, w) = s.split_once('=').ok_or("expected GROUP=WEIGHT")?;
    Ok((
        g.parse().map_err(|_| "bad group id")?,
        w.parse().map_err(|_| "bad weight")?,
    ))
}

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
    /// Assign slots FROM..=TO to GROUP and push the topology.
    Assign {
        /// First slot (0-1023).
        from: u16,
        /// Last slot, inclusive.
        to: u16,
        /// Owning group id.
        group: u32,
    },
}

/// `tessera admin plugin ...`
#[derive(Subcommand, Debug)]
pub enum PluginCmd {
    /// The plugins in chain order, with their state.
    List,
    /// Upload (or replace) a plugin's module; a new plugin starts disabled.
    Upload {
        /// Plugin name (letters, digits, '-', '_').
        name: String,
        /// The .wasm file.
        file: std::path::PathBuf,
    },
    /// Set a plugin's config (checked by the plugin's own init first), fail policy or limits.
    Config {
        name: String,
        /// A JSON file with the config.
        #[arg(long, conflicts_with = "inline")]
        file: Option<std::path::PathBuf>,
        /// The config as inline JSON.
        #[arg(long)]
        inline: Option<String>,
        /// What the plugin's failure does to a command: open (let it through) or closed (error).
        #[arg(long)]
        fail: Option<String>,
        /// CPU time one call may use, in ms.
        #[arg(long)]
        cpu_budget_ms: Option<u64>,
        /// Memory one instance may use, in MiB.
        #[arg(long)]
        memory_mb: Option<usize>,
        /// The largest command or observed reply copied into the plugin, in KiB.
        #[arg(long)]
        max_input_kb: Option<usize>,
    },
    /// Load the plugin into every proxy.
    Enable { name: String },
    /// Unload the plugin from every proxy (it stays in the catalog).
    Disable { name: String },
    /// Set the chain order: every plugin's name, comma-separated.
    Order {
        #[arg(value_delimiter = ',')]
        names: Vec<String>,
    },
    /// Remove the plugin from every proxy and from the catalog.
    Remove { name: String },
    /// The plugin's own metrics, summed over the proxies.
    Metrics { name: String },
}

/// `tessera admin user ...`
#[derive(Subcommand, Debug)]
pub enum UserCmd {
    /// The users, with their classes, key prefix and state (never a password).
    List,
    /// Create or change a user; what is left out keeps its value. A new user needs a password.
    Set {
        /// User name (printable ASCII, no spaces); `default` configures the default user.
        name: String,
        /// The password. Shells and `ps` can show it: prefer --password-stdin.
        #[arg(long, conflicts_with = "password_stdin")]
        password: Option<String>,
        /// Read the password from the first line of stdin.
        #[arg(long)]
        password_stdin: bool,
        /// Command classes the user may use, comma-separated: read, write, admin, pubsub,
        /// scripting, transaction, blocking, dangerous, keyspace; `all` for every command.
        #[arg(long, value_delimiter = ',')]
        commands: Option<Vec<String>>,
        /// Every key the user names must start with this; "" for any key.
        #[arg(long)]
        key_prefix: Option<String>,
        /// Refuse the user's AUTH (the entry stays).
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        /// Accept the user's AUTH again.
        #[arg(long)]
        enable: bool,
    },
    /// Remove a user from the cluster.
    Remove { name: String },
}

/// `tessera admin proxy ...`
#[derive(Subcommand, Debug)]
pub enum ProxyCmd {
    /// List proxies.
    List,
    /// Put a proxy back into topology pushes (pushes the topology to it).
    Online {
        /// The proxy's token, as `proxy list` shows it.
        // Not named `token`: clap keys arguments by field name, so it would share the global
        // `--token`'s slot and be sent as the bearer token.
        #[arg(value_name = "TOKEN")]
        proxy_token: String,
    },
    /// Leave a proxy out of topology pushes.
    Offline {
        /// The proxy's token, as `proxy list` shows it.
        #[arg(value_name = "TOKEN")]
        proxy_token: String,
    },
}

/// Runs one admin command on its own current-thread runtime.
///
/// # Errors
/// The dashboard is unreachable, or it answered with an error: the message is the API's
/// (`<message> (<code>, HTTP <status>)`).
pub fn run(args: AdminArgs) -> anyhow::Result<()> {
    let client = Client::new(&args.dashboard, args.token)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    let reply = rt.block_on(async {
        match args.command {
            AdminCmd::Overview => {
                let v = client.call(Method::GET, &["api", "overview"], None).await?;
                Ok(Reply {
                    human: render_overview(&v),
                    json: v,
                })
            }
            AdminCmd::Group(cmd) => group(&client, cmd).await,
            AdminCmd::Slots(cmd) => slots(&client, cmd).await,
            AdminCmd::Proxy(cmd) => proxy(&client, cmd).await,
            AdminCmd::Migrate {
                from,
                to,
                group,
                throttle,
            } => {
                let mut body = throttle.json();
                body["from"] = json!(from);
                body["to"] = json!(to);
                body["group"] = json!(group);
                let v = client
                    .call(Method::POST, &["api", "migrations"], Some(body))
                    .await?;
                let human = format!(
                    "queued {} slots of {from}-{to} to move to group {group} (speed cap: {})\n",
                    text(&v["queued"]),
                    render_throttle(&v["throttle"])
                );
                Ok(Reply { human, json: v })
            }
            AdminCmd::Throttle { throttle, off } => {
                if !off && throttle.max_keys_per_sec.is_none() && throttle.max_mb_per_sec.is_none()
                {
                    anyhow::bail!("give --max-keys-per-sec and/or --max-mb-per-sec, or --off");
                }
                let v = client
                    .call(
                        Method::PUT,
                        &["api", "migrations", "throttle"],
                        Some(throttle.json()),
                    )
                    .await?;
                Ok(Reply {
                    human: format!("migration speed cap: {}\n", render_throttle(&v["throttle"])),
                    json: v,
                })
            }
            AdminCmd::Rebalance(a) => rebalance::run(&client, a, args.json).await,
            AdminCmd::Abort { all, slots } => {
                if !all && slots.is_empty() {
                    anyhow::bail!("name the slots to abort, or --all");
                }
                let body = if all {
                    json!({})
                } else {
                    json!({ "slots": slots })
                };
                let v = client
                    .call(Method::POST, &["api", "migrations", "abort"], Some(body))
                    .await?;
                Ok(Reply {
                    human: format!("aborted {} slot migrations\n", text(&v["aborted"])),
                    json: v,
                })
            }
            AdminCmd::Migrations => {
                let v = client
                    .call(Method::GET, &["api", "migrations"], None)
                    .await?;
                Ok(Reply {
                    human: render_migrations(&v),
                    json: v,
                })
            }
            AdminCmd::Plugin(cmd) => plugin(&client, cmd).await,
            AdminCmd::User(cmd) => user(&client, cmd).await,
            AdminCmd::Token(cmd) => token::run(&client, cmd).await,
            AdminCmd::Failover(cmd) => failover::run(&client, cmd).await,
            AdminCmd::Mirror(cmd) => mirror::run(&client, cmd).await,
            AdminCmd::ReadPolicy(args) => read_policy::run(&client, args).await,
            AdminCmd::Routes { cmd } => routes::run(&client, cmd).await,
            AdminCmd::Hotkeys(a) => hotkeys::run(&client, a).await,
            AdminCmd::Stats => {
                let v = client.call(Method::GET, &["api", "stats"], None).await?;
                Ok(Reply {
                    human: render_stats(&v),
                    json: v,
                })
            }
        }
    })?;
    let out = if args.json {
        serde_json::to_string_pretty(&reply.json)?
    } else {
        reply.human
    };
    emit(&out)
}

/// What a command prints: `human` by default, `json` with `--json`.
struct Reply {
    json: Value,
    human: String,
}

async fn group(c: &Client, cmd: GroupCmd) -> anyhow::Result<Reply> {
    let (v, summary) = match cmd {
        GroupCmd::List => {
            let v = c.call(Method::GET, &["api", "groups"], None).await?;
            let human = render_groups(v.as_array().map_or(&[], Vec::as_slice));
            return Ok(Reply { json: v, human });
        }
        GroupCmd::Create { id, tls } => {
            let mut body = match id {
                Some(id) => json!({ "id": id }),
                None => json!({}),
            };
            if tls {
                body["tls"] = json!(true);
            }
            let v = c.call(Method::POST, &["api", "groups"], Some(body)).await?;
            let summary = format!("created group {}", text(&v["id"]));
            (v, summary)
        }
        GroupCmd::Delete { id } => {
            let v = c
                .call(Method::DELETE, &["api", "groups", &id.to_string()], None)
                .await?;
            return Ok(Reply {
                json: v,
                human: format!("deleted group {id}\n"),
            });
        }
        GroupCmd::AddServer {
            id,
            addr,
            user,
            password,
        } => {
            let path = ["api", "groups", &id.to_string(), "servers"];
            let mut body = json!({ "addr": addr });
            if let Some(p) = password {
                body["user"] = json!(user);
                body["password"] = json!(p);
            }
            let v = c.call(Method::POST, &path, Some(body)).await?;
            (v, format!("added {addr} to group {id}"))
        }
        GroupCmd::RemoveServer { id, addr } => {
            let path = ["api", "groups", &id.to_string(), "servers", &addr];
            let v = c.call(Method::DELETE, &path, None).await?;
            (v, format!("removed {addr} from group {id}"))
        }
        GroupCmd::Promote { id, addr } => {
            let path = ["api", "groups", &id.to_string(), "promote"];
            let v = c
                .call(Method::POST, &path, Some(json!({ "addr": addr })))
                .await?;
            (v, format!("{addr} is now the master of group {id}"))
        }
    };
    let human = format!("{summary}\n\n{}", render_groups(std::slice::from_ref(&v)));
    Ok(Reply { json: v, human })
}

async fn slots(c: &Client, cmd: SlotsCmd) -> anyhow::Result<Reply> {
    match cmd {
        SlotsCmd::List => {
            let v = c.call(Method::GET, &["api", "slots"], None).await?;
            let human = render_slots(v.as_array().map_or(&[], Vec::as_slice));
            Ok(Reply { json: v, human })
        }
        SlotsCmd::Assign { from, to, group } => {
            let body = json!({ "from": from, "to": to, "group": group });
            let v = c
                .call(Method::POST, &["api", "slots", "assign"], Some(body))
                .await?;
            let human = format!(
                "assigned {} slots ({from}-{to}) to group {group}; topology epoch {}\n",
                text(&v["assigned"]),
                text(&v["epoch"])
            );
            Ok(Reply { json: v, human })
        }
    }
}

async fn proxy(c: &Client, cmd: ProxyCmd) -> anyhow::Result<Reply> {
    let (token, state) = match cmd {
        ProxyCmd::List => {
            let v = c.call(Method::GET, &["api", "proxies"], None).await?;
            let human = render_proxies(v.as_array().map_or(&[], Vec::as_slice));
            return Ok(Reply { json: v, human });
        }
        ProxyCmd::Online { proxy_token } => (proxy_token, "online"),
        ProxyCmd::Offline { proxy_token } => (proxy_token, "offline"),
    };
    let v = c
        .call(Method::POST, &["api", "proxies", &token, state], None)
        .await?;
    let human = format!(
        "proxy {token} is now {}\n\n{}",
        text(&v["state"]),
        render_proxies(std::slice::from_ref(&v))
    );
    Ok(Reply { json: v, human })
}

/// The body of `PUT /api/users/{name}` for `user set`'s options.
fn user_change(
    password: Option<String>,
    commands: Option<Vec<String>>,
    key_prefix: Option<String>,
    enabled: Option<bool>,
) -> Value {
    let mut body = json!({});
    if let Some(p) = password {
        body["password"] = json!(p);
    }
    if let Some(c) = commands {
        let c: Vec<String> = c.into_iter().filter(|c| !c.trim().is_empty()).collect();
        body["commands"] = if c.len() == 1 && c[0].eq_ignore_ascii_case("all") {
            Value::Null
        } else {
            json!(c)
        };
    }
    if let Some(k) = key_prefix {
        body["key_prefix"] = if k.is_empty() { Value::Null } else { json!(k) };
    }
    if let Some(on) = enabled {
        body["enabled"] = json!(on);
    }
    body
}

async fn user(c: &Client, cmd: UserCmd) -> anyhow::Result<Reply> {
    match cmd {
        UserCmd::List => {
            let v = c.call(Method::GET, &["api", "users"], None).await?;
            let human = render_users(v.as_array().map_or(&[], Vec::as_slice));
            Ok(Reply { json: v, human })
        }
        UserCmd::Set {
            name,
            password,
            password_stdin,
            commands,
            key_prefix,
            disable,
            enable,
        } => {
            let password = password_arg(password, password_stdin)?;
            let enabled = (disable || enable).then_some(enable);
            let body = user_change(password, commands, key_prefix, enabled);
            let v = c
                .call(Method::PUT, &["api", "users", &name], Some(body))
                .await?;
            let human = format!(
                "user {name} set\n\n{}",
                render_users(std::slice::from_ref(&v))
            );
            Ok(Reply { json: v, human })
        }
        UserCmd::Remove { name } => {
            let v = c
                .call(Method::DELETE, &["api", "users", &name], None)
                .await?;
            Ok(Reply {
                json: v,
                human: format!("removed user {name}\n"),
            })
        }
    }
}

/// `--password P` or `--password-stdin`, whichever was given.
fn password_arg(password: Option<String>, stdin: bool) -> anyhow::Result<Option<String>> {
    Ok(match (password, stdin) {
        (Some(p), _) => Some(p),
        (None, true) => Some(password_from_stdin()?),
        (None, false) => None,
    })
}

/// The first line of stdin, without its line ending.
fn password_from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let p = line.trim_end_matches(['\n', '\r']).to_owned();
    if p.is_empty() {
        bail!("--password-stdin: stdin gave an empty password");
    }
    Ok(p)
}

fn render_users(users: &[Value]) -> String {
    let mut t = Table::new(&["NAME", "ENABLED", "PASSWORD", "COMMANDS", "KEY PREFIX"]);
    for u in users {
        let commands = match &u["commands"] {
            Value::Array(c) if c.is_empty() => "(none)".to_owned(),
            Value::Array(c) => c.iter().map(text).collect::<Vec<_>>().join(","),
            _ => "all".to_owned(),
        };
        t.row(vec![
            text(&u["name"]),
            text(&u["enabled"]),
            if u["password_set"] == true {
                "set"
            } else {
                "-"
            }
            .to_owned(),
            commands,
            text(&u["key_prefix"]),
        ]);
    }
    t.render()
}

/// Migration status: totals, then the slots in flight.
fn render_migrations(v: &Value) -> String {
    let mut out = format!(
        "pending {}  in flight {}  keys moved {} ({})  keys/s {:.0}  {}/s  keys left ~{}  eta {}\n",
        text(&v["pending"]),
        text(&v["in_flight"]),
        text(&v["run_keys_moved"]),
        human_bytes(&v["run_bytes_moved"]),
        v["keys_per_sec"].as_f64().unwrap_or(0.0),
        human_bytes(&json!(v["bytes_per_sec"].as_f64().unwrap_or(0.0) as u64)),
        text(&v["keys_left"]),
        v["eta_secs"]
            .as_f64()
            .map_or("-".to_string(), |s| format!("{s:.0}s")),
    );
    out.push_str(&format!(
        "speed cap: {}  slowest mover command: {}\n",
        render_throttle(&v["throttle"]),
        v["slowest_command"]["ms"]
            .as_f64()
            .map_or("-".to_string(), |ms| format!(
                "{ms:.1} ms ({})",
                text(&v["slowest_command"]["command"])
            )),
    ));
    if let Some(b) = v["blocked"].as_str() {
        out.push_str(&format!("held: {b}\n"));
    }
    if v["abort_pending"].as_bool() == Some(true) {
        out.push_str("abort asked for: the slots turn around at the driver's next step\n");
    }
    let pause = &v["write_pause"];
    if pause.is_object() {
        let ms = |k: &str| pause[k].as_f64().unwrap_or(0.0);
        out.push_str(&format!(
            "write pause per slot handoff: p50 {:.0} ms  p99 {:.0} ms  max {:.0} ms  last {:.0} ms  ({} slots in {} handoffs)\n",
            ms("p50_ms"),
            ms("p99_ms"),
            ms("max_ms"),
            ms("last_ms"),
            text(&pause["slots"]),
            text(&pause["handoffs"]),
        ));
    }
    let slots = v["slots"].as_array().map_or(&[][..], Vec::as_slice);
    let mut rows: Vec<Vec<String>> = Vec::new();
    for s in slots.iter().filter(|s| s["state"] != "pending").take(50) {
        rows.push(vec![
            text(&s["slot"]),
            text(&s["state"]),
            format!("{} → {}", text(&s["source"]), text(&s["target"])),
            if s["aborting"].as_bool() == Some(true) {
                "abort".into()
            } else {
                String::new()
            },
            text(&s["keys_moved"]),
        ]);
    }
    if !rows.is_empty() {
        let mut t = Table::new(&["SLOT", "STATE", "GROUPS", "", "KEYS MOVED"]);
        for r in rows {
            t.row(r);
        }
        out.push_str(&t.render());
    }
    out
}

/// Writes to stdout; a closed pipe (`tessera admin slots list | head`) is not an error.
fn emit(out: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    let result = stdout.write_all(out.as_bytes()).and_then(|()| {
        if !out.ends_with('\n') {
            stdout.write_all(b"\n")?;
        }
        stdout.flush()
    });
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

// === HTTP ===

/// Who this is, for the dashboard's audit log: `cli:<unix user>`.
fn cli_actor() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    format!("cli:{user}")
}

/// A dashboard's API at one base URL.
struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
}

impl Client {
    fn new(dashboard: &str, token: Option<String>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            base: base_url(dashboard)?,
            token,
        })
    }

    /// Sends one request and returns the JSON body of a 2xx answer.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let url = endpoint(&self.base, segments);
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .header(tessera_wire::audit::ACTOR_HEADER, cli_actor());
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = &body {
            req = req.json(body);
        }
        let resp = req.send().await.map_err(|e| self.transport_error(&e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(&e))?;
        if !(200..300).contains(&status) {
            return Err(ApiFailure::from_response(status, &bytes, self.token.is_some()).into());
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(json!({}));
        }
        serde_json::from_slice(&bytes).with_context(|| {
            format!("{method} {url} answered HTTP {status} with a body that is not JSON")
        })
    }

    /// Sends raw bytes (a module upload) and returns the JSON body of a 2xx answer.
    async fn call_bytes(
        &self,
        method: Method,
        segments: &[&str],
        body: Vec<u8>,
    ) -> anyhow::Result<Value> {
        let url = endpoint(&self.base, segments);
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/wasm")
            .header(tessera_wire::audit::ACTOR_HEADER, cli_actor())
            .body(body);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.map_err(|e| self.transport_error(&e))?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(&e))?;
        if !(200..300).contains(&status) {
            return Err(ApiFailure::from_response(status, &bytes, self.token.is_some()).into());
        }
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{method} {url}: the answer is not JSON"))
    }

    fn transport_error(&self, e: &reqwest::Error) -> anyhow::Error {
        let cause = root_cause(e);
        let host = self.base.host_str().unwrap_or("?");
        let addr = format!("{host}:{}", self.base.port_or_known_default().unwrap_or(80));
        if e.is_connect() {
            anyhow::anyhow!(
                "cannot reach the dashboard at {addr} ({}): {cause}\n\
                 hint: is `tessera dashboard` running there? Point at it with --dashboard or TESSERA_DASHBOARD",
                self.base
            )
        } else if e.is_timeout() {
            anyhow::anyhow!(
                "the dashboard at {addr} did not answer within {}s; a change may still complete: \
                 check with `tessera admin overview`",
                REQUEST_TIMEOUT.as_secs()
            )
        } else {
            anyhow::anyhow!("talking to the dashboard at {addr}: {cause}")
        }
    }
}

/// `host:port` or an `http://` URL (optionally with a path prefix, behind a reverse proxy).
fn base_url(dashboard: &str) -> anyhow::Result<Url> {
    let with_scheme = if dashboard.contains("://") {
        dashboard.to_string()
    } else {
        format!("http://{dashboard}")
    };
    let url = Url::parse(&with_scheme).with_context(|| {
        format!("--dashboard {dashboard:?} is neither host:port nor an http:// URL")
    })?;
    if url.scheme() != "http" {
        bail!("--dashboard {dashboard}: only http:// is supported");
    }
    Ok(url)
}

/// `base` + path segments, each percent-encoded (a server address or token is one segment).
fn endpoint(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    url.path_segments_mut()
        .expect("http URLs have a path")
        .pop_if_empty()
        .extend(segments);
    url
}

/// The innermost error: reqwest's own message only says "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// A non-2xx answer. The API sends `{"error": {"code", "message"}}`; anything else
/// (a reverse proxy's page, an empty body) keeps its text and has no code.
#[derive(Debug, PartialEq)]
struct ApiFailure {
    status: u16,
    code: Option<String>,
    message: String,
    hint: Option<&'static str>,
}

impl ApiFailure {
    fn from_response(status: u16, body: &[u8], sent_token: bool) -> Self {
        let parsed: Option<Value> = serde_json::from_slice(body).ok();
        let err = parsed.as_ref().map(|v| &v["error"]);
        let code = err.and_then(|e| e["code"].as_str()).map(str::to_string);
        let message = match err.and_then(|e| e["message"].as_str()) {
            Some(m) => m.to_string(),
            None => {
                let raw = String::from_utf8_lossy(body);
                let raw = raw.trim();
                if raw.is_empty() {
                    "the dashboard gave no reason".into()
                } else {
                    truncate(raw, 200)
                }
            }
        };
        let hint = match status {
            401 if !sent_token => {
                Some("no token was sent: pass --token or set TESSERA_ADMIN_TOKEN")
            }
            403 => Some("the token's role is too low: use a token with the role named above"),
            502 => Some("the change is saved; check the proxies with `tessera admin proxy list`"),
            _ => None,
        };
        Self {
            status,
            code,
            message,
            hint,
        }
    }
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({code}, HTTP {})", self.message, self.status)?,
            None => write!(f, "{} (HTTP {})", self.message, self.status)?,
        }
        if let Some(hint) = self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiFailure {}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

// === Rendering ===

/// Columns padded to their widest cell, two spaces apart; no header line if `headers` is empty.
struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn render(&self) -> String {
        let lines: Vec<&Vec<String>> = std::iter::once(&self.headers)
            .filter(|h| !h.is_empty())
            .chain(&self.rows)
            .collect();
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in &lines {
            for (w, cell) in widths.iter_mut().zip(line.iter()) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in lines {
            let mut text = String::new();
            for (cell, w) in line.iter().zip(&widths) {
                text.push_str(&format!("{cell:<w$}  "));
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A JSON value as a table cell: strings bare, `null` or missing as `-`, booleans yes/no.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        other => other.to_string(),
    }
}

fn human_bytes(v: &Value) -> String {
    let Some(n) = v.as_u64() else { return text(v) };
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn human_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match () {
        _ if d > 0 => format!("{d}d{h}h"),
        _ if h > 0 => format!("{h}h{m:02}m"),
        _ if m > 0 => format!("{m}m{s:02}s"),
        _ => format!("{s}s"),
    }
}

/// Time since a `start_unix` field.
fn uptime(start_unix: &Value) -> String {
    let Some(start) = start_unix.as_u64() else {
        return "-".into();
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    human_duration(now.saturating_sub(start))
}

fn render_overview(v: &Value) -> String {
    let d = &v["dashboard"];
    let mut t = Table::new(&[]);
    let mut kv = |k: &str, value: String| t.row(vec![k.to_string(), value]);
    kv("cluster", text(&v["cluster"]));
    kv("epoch", text(&v["epoch"]));
    kv(
        "dashboard",
        format!(
            "{} (pid {} on {}, version {}, up {})",
            text(&d["admin_addr"]),
            text(&d["pid"]),
            text(&d["host"]),
            text(&d["version"]),
            uptime(&d["start_unix"])
        ),
    );
    kv("groups", text(&v["groups"]));
    let f = &v["failover"];
    if f.is_object() {
        let last = &f["last"];
        let mut line = if f["enabled"] == true {
            format!("on (max lag {})", human_bytes(&f["max_lag_bytes"]))
        } else {
            "off".to_string()
        };
        if last.is_object() {
            line.push_str(&format!(
                "; last: group {} {} -> {}, {}",
                text(&last["group"]),
                text(&last["old_master"]),
                text(&last["new_master"]),
                last["failover_ms"]
                    .as_u64()
                    .map_or("completed by a successor".to_string(), |ms| format!(
                        "{ms} ms"
                    ))
            ));
        }
        kv("failover", line);
    }
    kv(
        "servers",
        format!(
            "{} ({} down)",
            text(&v["servers"]),
            text(&v["servers_down"])
        ),
    );
    kv(
        "proxies",
        format!(
            "{} ({} online)",
            text(&v["proxies"]),
            text(&v["proxies_online"])
        ),
    );
    kv(
        "slots",
        format!(
            "{} assigned, {} unassigned",
            text(&v["slots_assigned"]),
            text(&v["slots_unassigned"])
        ),
    );
    kv("ops/s", text(&v["ops_per_sec"]));
    kv("memory", human_bytes(&v["memory_bytes"]));
    kv("keys", text(&v["keys"]));
    t.render()
}

/// One row per server; the group's columns only on its first row.
fn render_groups(groups: &[Value]) -> String {
    let mut t = Table::new(&[
        "GROUP", "SLOTS", "SERVER", "ROLE", "UP", "LINK", "OFFSET", "LAG", "MEMORY", "KEYS", "NOTE",
    ]);
    for g in groups {
        let mut id = text(&g["id"]);
        if g["tls"].as_bool() == Some(true) {
            id.push_str(" (tls)");
        }
        if g["down"].as_bool() == Some(true) {
            id.push_str(" (down)");
        }
        let mut head = vec![id, text(&g["slots"])];
        let servers = g["servers"].as_array().map_or(&[][..], Vec::as_slice);
        if servers.is_empty() {
            head.push("(no servers)".into());
            t.row(head);
            continue;
        }
        for s in servers {
            let note = match (&s["error"], &s["role_reported"]) {
                (Value::String(e), _) => e.clone(),
                // Redis's ROLE still says "slave" for a replica.
                (_, Value::String(r))
                    if Some(r.replace("slave", "replica").as_str()) != s["role"].as_str() =>
                {
                    format!("reports {r}")
                }
                _ => String::new(),
            };
            let mut row = std::mem::replace(&mut head, vec![String::new(), String::new()]);
            row.extend([
                text(&s["addr"]),
                text(&s["role"]),
                text(&s["up"]),
                text(&s["master_link"]),
                text(&s["repl_offset"]),
                s["lag_bytes"]
                    .as_u64()
                    .map_or_else(|| text(&s["lag_bytes"]), |_| human_bytes(&s["lag_bytes"])),
                human_bytes(&s["memory_bytes"]),
                text(&s["keys"]),
                note,
            ]);
            t.row(row);
        }
        if let Some(f) = g["failover"].as_object() {
            let mut row = vec![String::new(); 10];
            row.push(format!(
                "failover {}: {}",
                text(&f["state"]),
                text(&f["reason"])
            ));
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

fn collapse_slots(slots: &[Value]) -> Vec<SlotRange> {
    let mut sorted: Vec<&Value> = slots.iter().filter(|s| s["id"].is_u64()).collect();
    sorted.sort_by_key(|s| s["id"].as_u64());
    let mut out: Vec<SlotRange> = Vec::new();
    for s in sorted {
        let id = s["id"].as_u64().expect("filtered on is_u64");
        let owner = match &s["group"] {
            Value::Null => "unassigned".to_string(),
            g => format!("group {}", text(g)),
        };
        let action = match &s["action"] {
            Value::Null => None,
            a @ Value::Object(_) => Some(format!(
                "{} → group {}",
                text(&a["state"]),
                text(&a["target"])
            )),
            a => Some(text(a)),
        };
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

fn render_slots(slots: &[Value]) -> String {
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

fn render_proxies(proxies: &[Value]) -> String {
    let mut t = Table::new(&[
        "TOKEN", "STATE", "UP", "EPOCH", "ADDR", "ADMIN", "PID", "HOST", "VERSION", "UPTIME",
    ]);
    for p in proxies {
        t.row(vec![
            text(&p["token"]),
            text(&p["state"]),
            text(&p["up"]),
            text(&p["epoch"]),
            text(&p["addr"]),
            text(&p["admin_addr"]),
            text(&p["pid"]),
            text(&p["host"]),
            text(&p["version"]),
            uptime(&p["start_unix"]),
        ]);
    }
    t.render()
}

fn render_stats(v: &Value) -> String {
    let mut totals = Table::new(&[]);
    for (k, field) in [
        ("ops/s", "ops_per_sec"),
        ("ops total", "ops_total"),
        ("errors total", "errors_total"),
        ("sessions", "sessions"),
    ] {
        totals.row(vec![k.into(), text(&v[field])]);
    }
    let mut commands = Table::new(&["COMMAND", "CALLS", "ERRORS"]);
    for c in v["commands"].as_array().into_iter().flatten() {
        commands.row(vec![
            text(&c["command"]),
            text(&c["calls"]),
            text(&c["errors"]),
        ]);
    }
    let mut proxies = Table::new(&[
        "PROXY", "EPOCH", "SESSIONS", "OPS/S", "OPS", "ERRORS", "NOTE",
    ]);
    for p in v["proxies"].as_array().into_iter().flatten() {
        let mut row = vec![text(&p["token"])];
        match &p["error"] {
            Value::Null => row.extend(
                [
                    "epoch",
                    "sessions",
                    "ops_per_sec",
                    "ops_total",
                    "errors_total",
                ]
                .map(|f| text(&p[f])),
            ),
            e => row.extend(
                ["-", "-", "-", "-", "-"]
                    .map(String::from)
                    .into_iter()
                    .chain([text(e)]),
            ),
        }
        proxies.row(row);
    }
    format!(
        "{}\n{}\n{}",
        totals.render(),
        commands.render(),
        proxies.render()
    )
}

async fn plugin(c: &Client, cmd: PluginCmd) -> anyhow::Result<Reply> {
    let v = match cmd {
        PluginCmd::List => c.call(Method::GET, &["api", "plugins"], None).await?,
        PluginCmd::Upload { name, file } => {
            let wasm =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            c.call_bytes(Method::PUT, &["api", "plugins", &name, "module"], wasm)
                .await?
        }
        PluginCmd::Config {
            name,
            file,
            inline,
            fail,
            cpu_budget_ms,
            memory_mb,
            max_input_kb,
        } => {
            let config: Option<Value> = match (file, inline) {
                (Some(f), _) => {
                    let text =
                        std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
                    Some(
                        serde_json::from_slice(&text)
                            .with_context(|| format!("{} is not JSON", f.display()))?,
                    )
                }
                (None, Some(j)) => Some(serde_json::from_str(&j).context("--inline is not JSON")?),
                (None, None) => None,
            };
            let mut body = json!({});
            if let Some(cfg) = config {
                body["config"] = cfg;
            }
            if let Some(f) = fail {
                body["fail"] = json!(f);
            }
            if let Some(ms) = cpu_budget_ms {
                body["cpu_budget_ms"] = json!(ms);
            }
            if let Some(mb) = memory_mb {
                body["memory_mb"] = json!(mb);
            }
            if let Some(kb) = max_input_kb {
                body["max_input_kb"] = json!(kb);
            }
            c.call(
                Method::PUT,
                &["api", "plugins", &name, "config"],
                Some(body),
            )
            .await?
        }
        PluginCmd::Enable { name } => {
            c.call(Method::POST, &["api", "plugins", &name, "enable"], None)
                .await?
        }
        PluginCmd::Disable { name } => {
            c.call(Method::POST, &["api", "plugins", &name, "disable"], None)
                .await?
        }
        PluginCmd::Order { names } => {
            c.call(
                Method::PUT,
                &["api", "plugins", "order"],
                Some(json!({ "order": names })),
            )
            .await?
        }
        PluginCmd::Remove { name } => {
            c.call(Method::DELETE, &["api", "plugins", &name], None)
                .await?
        }
        PluginCmd::Metrics { name } => {
            let v = c
                .call(Method::GET, &["api", "plugins", &name, "metrics"], None)
                .await?;
            let mut human = String::new();
            for s in v["samples"].as_array().map_or(&[][..], Vec::as_slice) {
                let labels: Vec<String> = s["labels"]
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
                    .unwrap_or_default();
                human.push_str(&format!(
                    "{}{{{}}} {}\n",
                    text(&s["name"]),
                    labels.join(","),
                    text(&s["value"])
                ));
            }
            return Ok(Reply { json: v, human });
        }
    };
    let list = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) if o.contains_key("plugins") => {
            o["plugins"].as_array().cloned().unwrap_or_default()
        }
        Value::Object(o) if o.contains_key("name") => vec![v.clone()],
        _ => vec![],
    };
    let mut human = format!(
        "{:<16} {:<8} {:<7} {:<14} {:>9}  CONFIG\n",
        "NAME", "ENABLED", "FAIL", "SHA256", "SIZE"
    );
    for p in &list {
        let sha = text(&p["sha256"]);
        human.push_str(&format!(
            "{:<16} {:<8} {:<7} {:<14} {:>9}  {}\n",
            text(&p["name"]),
            text(&p["enabled"]),
            text(&p["fail"]),
            &sha[..sha.len().min(12)],
            text(&p["size"]),
            p["config"]
        ));
    }
    if list.is_empty() {
        human = "ok\n".into();
    }
    Ok(Reply { json: v, human })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        admin: AdminArgs,
    }

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn proxy_token_argument_does_not_replace_the_admin_token() {
        let cli =
            Cli::try_parse_from(["admin", "--token", "secret", "proxy", "online", "abc"]).unwrap();
        assert_eq!(cli.admin.token.as_deref(), Some("secret"));
        assert!(
            matches!(cli.admin.command, AdminCmd::Proxy(ProxyCmd::Online { proxy_token }) if proxy_token == "abc")
        );
    }

    #[test]
    fn global_options_go_after_the_subcommand_too() {
        let cli = Cli::try_parse_from(["admin", "slots", "list", "--json", "--dashboard", "h:1"])
            .unwrap();
        assert!(cli.admin.json);
        assert_eq!(cli.admin.dashboard, "h:1");
    }

    #[test]
    fn user_set_sends_only_what_was_given() {
        assert_eq!(user_change(None, None, None, None), json!({}));
        assert_eq!(
            user_change(
                Some("pw".into()),
                Some(vec!["read".into(), "write".into()]),
                Some("t:".into()),
                Some(false)
            ),
            json!({"password": "pw", "commands": ["read", "write"], "key_prefix": "t:", "enabled": false})
        );
        assert_eq!(
            user_change(None, Some(vec!["all".into()]), Some(String::new()), None),
            json!({"commands": null, "key_prefix": null})
        );
        assert_eq!(
            user_change(None, Some(vec![String::new()]), None, None),
            json!({"commands": []})
        );
        let cli = Cli::try_parse_from([
            "admin",
            "user",
            "set",
            "alice",
            "--commands",
            "read,write",
            "--disable",
        ])
        .unwrap();
        assert!(matches!(
            cli.admin.command,
            AdminCmd::User(UserCmd::Set { disable: true, enable: false, commands: Some(c), .. }) if c == ["read", "write"]
        ));
        assert!(
            Cli::try_parse_from(["admin", "user", "set", "a", "--disable", "--enable"]).is_err()
        );
    }

    #[test]
    fn users_render_without_passwords() {
        let out = render_users(&[
            json!({"name": "alice", "enabled": true, "password_set": true, "commands": ["read"], "key_prefix": "t:"}),
            json!({"name": "default", "enabled": false, "password_set": false}),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["NAME", "ENABLED", "PASSWORD", "COMMANDS", "KEY", "PREFIX"]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["alice", "yes", "set", "read", "t:"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["default", "no", "-", "all", "-"]
        );
    }

    #[test]
    fn table_pads_columns_to_the_widest_cell() {
        let mut t = Table::new(&["ID", "ADDR"]);
        t.row(vec!["1".into(), "127.0.0.1:7001".into()]);
        t.row(vec!["12".into(), "h:1".into()]);
        assert_eq!(t.render(), "ID  ADDR\n1   127.0.0.1:7001\n12  h:1\n");
    }

    #[test]
    fn table_without_headers_has_no_header_line_and_no_trailing_spaces() {
        let mut t = Table::new(&[]);
        t.row(vec!["0-511".into(), "→ group 1".into(), String::new()]);
        t.row(vec!["512".into(), "→ unassigned".into(), "(x)".into()]);
        assert_eq!(t.render(), "0-511  → group 1\n512    → unassigned  (x)\n");
    }

    #[test]
    fn table_counts_characters_not_bytes() {
        let mut t = Table::new(&["A", "B"]);
        t.row(vec!["→→".into(), "x".into()]);
        assert_eq!(t.render(), "A   B\n→→  x\n");
    }

    #[test]
    fn short_rows_leave_the_last_columns_empty() {
        let mut t = Table::new(&["A", "B", "C"]);
        t.row(vec!["1".into()]);
        assert_eq!(t.render(), "A  B  C\n1\n");
    }

    fn slot(id: u64, group: Option<u64>) -> Value {
        json!({ "id": id, "group": group })
    }

    #[test]
    fn consecutive_slots_of_one_group_collapse_into_a_range() {
        let mut slots: Vec<Value> = (0..512).map(|i| slot(i, Some(1))).collect();
        slots.extend((512..1023).map(|i| slot(i, Some(2))));
        slots.push(json!({ "id": 1023 })); // `group` absent: unassigned
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
            json!({ "id": 2, "group": 1, "action": { "state": "migrating", "target": 2 } }),
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

    #[test]
    fn api_error_body_gives_message_code_and_status() {
        let body = br#"{"error":{"code":"conflict","message":"group 2 still owns 512 slots"}}"#;
        let f = ApiFailure::from_response(409, body, true);
        assert_eq!(f.code.as_deref(), Some("conflict"));
        assert_eq!(
            f.to_string(),
            "group 2 still owns 512 slots (conflict, HTTP 409)"
        );
    }

    #[test]
    fn non_json_error_body_keeps_its_text() {
        let f = ApiFailure::from_response(404, b"  Not Found\n", true);
        assert_eq!(f.to_string(), "Not Found (HTTP 404)");
        let f = ApiFailure::from_response(500, b"", true);
        assert_eq!(f.to_string(), "the dashboard gave no reason (HTTP 500)");
        let f = ApiFailure::from_response(400, &[b'x'; 300], true);
        assert_eq!(f.message.chars().count(), 201);
    }

    #[test]
    fn unauthorized_without_a_token_hints_at_the_flag() {
        let body = br#"{"error":{"code":"unauthorized","message":"missing or wrong token"}}"#;
        let f = ApiFailure::from_response(401, body, false);
        assert!(
            f.to_string()
                .starts_with("missing or wrong token (unauthorized, HTTP 401)\nhint: ")
        );
        assert!(f.to_string().contains("--token"));
        assert_eq!(ApiFailure::from_response(401, body, true).hint, None);
    }

    #[test]
    fn dashboard_address_accepts_host_port_and_urls() {
        assert_eq!(
            base_url("127.0.0.1:18080").unwrap().as_str(),
            "http://127.0.0.1:18080/"
        );
        let prefixed = base_url("http://admin.example/tessera/").unwrap();
        assert_eq!(
            endpoint(&prefixed, &["api", "groups"]).as_str(),
            "http://admin.example/tessera/api/groups"
        );
        assert!(base_url("https://x:1").is_err());
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        let base = base_url("127.0.0.1:18080").unwrap();
        let url = endpoint(&base, &["api", "groups", "1", "servers", "a/b c:7000"]);
        assert_eq!(url.path(), "/api/groups/1/servers/a%2Fb%20c:7000");
    }

    #[test]
    fn sizes_and_durations_read_like_a_human_wrote_them() {
        assert_eq!(human_bytes(&json!(512)), "512 B");
        assert_eq!(human_bytes(&json!(3 * 1024 * 1024 + 512 * 1024)), "3.5 MiB");
        assert_eq!(human_bytes(&Value::Null), "-");
        assert_eq!(human_duration(59), "59s");
        assert_eq!(human_duration(3 * 3600 + 5 * 60 + 1), "3h05m");
        assert_eq!(human_duration(2 * 86_400 + 3600), "2d1h");
    }

    #[test]
    fn groups_render_one_row_per_server() {
        let g = json!([
            { "id": 1, "slots": 512, "down": false, "servers": [
                { "addr": "127.0.0.1:7001", "role": "master", "up": true, "role_reported": "master" },
                { "addr": "127.0.0.1:7002", "role": "replica", "up": true, "role_reported": "slave" },
                { "addr": "127.0.0.1:7003", "role": "replica", "up": true, "role_reported": "master" },
                { "addr": "127.0.0.1:7004", "role": "replica", "up": false, "error": "connection refused" }
            ]},
            { "id": 2, "slots": 0, "down": true, "servers": [] }
        ]);
        let out = render_groups(g.as_array().unwrap());
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
}
