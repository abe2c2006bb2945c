//! `tessera admin`: a command-line client of a dashboard's REST API (`docs/api.md`). It only
//! sends requests and renders the answers, read into the `tessera-wire` types the API
//! documents, as aligned tables or, with `--json`, as JSON; every rule (what may be deleted,
//! who owns a slot) is the dashboard's.

mod backup;
mod client;
mod cluster;
mod events;
mod failover;
mod hotkeys;
mod migration;
mod mirror;
mod plugin;
mod plugin_canary;
mod plugin_view;
mod read_policy;
mod rebalance;
mod restore;
mod restore_settings;
mod routes;
mod slot_arg;
mod table;
mod token;
mod user;

use std::io::Write;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde::Serialize;

use client::Client;

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
    Group(cluster::GroupCmd),
    /// The 1024 slots and the groups that own them.
    #[command(subcommand)]
    Slots(cluster::SlotsCmd),
    /// Registered proxies.
    #[command(subcommand)]
    Proxy(cluster::ProxyCmd),
    /// Traffic: totals, per command, per proxy.
    Stats,
    /// WebAssembly plugins of the cluster (loaded into every proxy).
    #[command(subcommand)]
    Plugin(plugin::PluginCmd),
    /// Users clients AUTH to the cluster's proxies as (docs/users.md).
    #[command(subcommand)]
    User(user::UserCmd),
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
    /// Move slots to GROUP online (keys move while clients keep working): `migrate 400-511 2`
    /// (or `migrate 400 511 2`).
    Migrate {
        /// The slots, `A-B` or `N` (0-1023), then the target group id.
        #[arg(value_name = "SLOTS GROUP", num_args = 2..=3, required = true)]
        args: Vec<String>,
        #[command(flatten)]
        throttle: migration::ThrottleArgs,
    },
    /// Change the running migration's speed cap (`--off` lifts it); it ends with the migration.
    Throttle {
        #[command(flatten)]
        throttle: migration::ThrottleArgs,
        #[arg(long, conflicts_with_all = ["max_keys_per_sec", "max_mb_per_sec"])]
        off: bool,
    },
    /// Even out slots, weight, measured load or memory over the groups: shows the plan, then
    /// queues it once confirmed (`--yes`); `--dry-run` only shows it.
    Rebalance(rebalance::RebalanceArgs),
    /// Abort migrations: the given slots (`N` or `A-B`), or all with `--all`; moved keys go
    /// back.
    Abort {
        #[arg(long, conflicts_with = "slots")]
        all: bool,
        #[arg(value_name = "SLOTS")]
        slots: Vec<String>,
    },
    /// Migration progress: slots in flight, keys moved, keys per second, ETA, and why a step
    /// was held; `--history`: the last migrations and rebalances as jobs.
    Migrations {
        #[arg(long)]
        history: bool,
    },
    /// The hottest keys by operations and by bytes, summed over the proxies (docs/hotkeys.md).
    Hotkeys(hotkeys::HotKeysArgs),
    /// Back up every group, with the cluster's documents and a manifest, into a new directory
    /// under the dashboard's --backup-root, and follow it (docs/backup.md).
    Backup(backup::BackupArgs),
    /// The recent backups of the dashboard.
    Backups,
    /// Restore a backup directory into an empty cluster: its settings (users, plugins, routes,
    /// read policy, failover) through the dashboard, then its keys through one of its proxies
    /// (checked whole first; undone if a write fails).
    Restore(crate::import::from_backup::RestoreArgs),
    /// The cluster's events (proxies lost and back, failovers, migrations, the store, the
    /// lock): time, severity, what happened; `--follow` waits for new ones.
    Events(events::EventsArgs),
}

fn parse_weight(s: &str) -> Result<(u32, u32), String> {
    let (g, w) = s.split_once('=').ok_or("expected GROUP=WEIGHT")?;
    Ok((
        g.parse().map_err(|_| "bad group id")?,
        w.parse().map_err(|_| "bad weight")?,
    ))
}

/// Runs one admin command on its own current-thread runtime.
///
/// # Errors
/// The dashboard is unreachable, or it answered with an error: the message is the API's
/// (`<message> (<code>, HTTP <status>)`).
pub fn run(args: AdminArgs) -> anyhow::Result<()> {
    // A restore writes through a proxy (and configures through the dashboard), on a runtime
    // of its own.
    if let AdminCmd::Restore(a) = args.command {
        return emit(&restore::run(&args.dashboard, args.token, a)?);
    }
    let client = Client::new(&args.dashboard, args.token)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    let reply = rt.block_on(async {
        match args.command {
            AdminCmd::Overview => cluster::overview(&client).await,
            AdminCmd::Group(cmd) => cluster::group(&client, cmd).await,
            AdminCmd::Slots(cmd) => cluster::slots(&client, cmd).await,
            AdminCmd::Proxy(cmd) => cluster::proxy(&client, cmd).await,
            AdminCmd::Stats => cluster::stats(&client).await,
            AdminCmd::Migrate { args, throttle } => {
                let (from, to, group) = slot_arg::range_and_group(&args)?;
                migration::migrate(&client, from, to, group, throttle).await
            }
            AdminCmd::Throttle { throttle, off } => {
                migration::throttle(&client, throttle, off).await
            }
            AdminCmd::Rebalance(a) => rebalance::run(&client, a, args.json).await,
            AdminCmd::Abort { all, slots } => {
                migration::abort(&client, all, slot_arg::expand(&slots)?).await
            }
            AdminCmd::Migrations { history: false } => migration::status(&client).await,
            AdminCmd::Migrations { history: true } => migration::history(&client).await,
            AdminCmd::Plugin(cmd) => plugin::run(&client, cmd).await,
            AdminCmd::User(cmd) => user::run(&client, cmd).await,
            AdminCmd::Token(cmd) => token::run(&client, cmd).await,
            AdminCmd::Failover(cmd) => failover::run(&client, cmd).await,
            AdminCmd::Mirror(cmd) => mirror::run(&client, cmd).await,
            AdminCmd::ReadPolicy(args) => read_policy::run(&client, args).await,
            AdminCmd::Routes { cmd } => routes::run(&client, cmd).await,
            AdminCmd::Hotkeys(a) => hotkeys::run(&client, a).await,
            AdminCmd::Backup(a) => backup::start(&client, a).await,
            AdminCmd::Backups => backup::list(&client).await,
            AdminCmd::Restore(_) => bail!("a restore runs on a runtime of its own"),
            AdminCmd::Events(a) => events::run(&client, a, args.json).await,
        }
    })?;
    emit(if args.json { &reply.json } else { &reply.human })
}

/// How `tessera` prints an admin command's failure (to stderr): the message and its causes,
/// never a backtrace, even with `RUST_BACKTRACE=1`. Every failure here is one a person acts
/// on (a refusal the dashboard explained, a wrong address or token, a bad argument): a
/// backtrace through the CLI's own frames says nothing more. A panic still prints its own.
pub fn render_error(e: &anyhow::Error) -> String {
    format!("Error: {e:#}\n")
}

/// What a command prints: `human` by default, `json` (the answer, pretty-printed) with
/// `--json`.
struct Reply {
    json: String,
    human: String,
}

impl Reply {
    /// The answer `v` and its rendering for people.
    fn new<T: Serialize>(v: &T, human: String) -> anyhow::Result<Self> {
        Ok(Self {
            json: serde_json::to_string_pretty(v).context("rendering the answer as JSON")?,
            human,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    pub(super) struct Cli {
        #[command(flatten)]
        pub(super) admin: AdminArgs,
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
            matches!(cli.admin.command, AdminCmd::Proxy(cluster::ProxyCmd::Online { proxy_token }) if proxy_token == "abc")
        );
    }

    #[test]
    fn global_options_go_after_the_subcommand_too() {
        let cli = Cli::try_parse_from(["admin", "slots", "list", "--json", "--dashboard", "h:1"])
            .unwrap();
        assert!(cli.admin.json);
        assert_eq!(cli.admin.dashboard, "h:1");
    }

    /// Words of a shell line: blanks split, single and double quotes group (no escapes
    /// needed by the README's lines).
    fn shell_words(line: &str) -> Vec<String> {
        let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
        for c in line.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    any = true;
                }
                (None, c) if c.is_whitespace() => {
                    if any || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    any = false;
                }
                (None, c) => word.push(c),
            }
        }
        if any || !word.is_empty() {
            words.push(word);
        }
        words
    }

    /// Every `tessera admin` command the README shows: lines of its code blocks, and inline
    /// code (prose names a placeholder with `…`, which is left out).
    fn readme_admin_commands() -> Vec<String> {
        let readme = include_str!("../../../README.md");
        let mut found = Vec::new();
        let mut in_block = false;
        for line in readme.lines() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            let code = line.split(" #").next().unwrap_or(line).trim();
            if in_block && code.starts_with("tessera admin ") {
                found.push(code.to_owned());
            }
        }
        for (i, span) in readme.split('`').enumerate() {
            let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
            if i % 2 == 1 && span.starts_with("tessera admin ") && !span.contains('…') {
                found.push(span);
            }
        }
        found
    }

    #[test]
    fn every_admin_command_the_readme_shows_parses() {
        let commands = readme_admin_commands();
        // The README's tours show more than a dozen: fewer means the scan above broke.
        assert!(commands.len() >= 12, "found only {commands:?}");
        for line in commands {
            let words = shell_words(&line);
            let args = std::iter::once("admin".to_owned()).chain(words.into_iter().skip(2));
            if let Err(e) = Cli::try_parse_from(args) {
                panic!("the README's `{line}` does not parse:\n{e}");
            }
        }
    }

    #[test]
    fn shell_words_group_quoted_json() {
        assert_eq!(
            shell_words(r#"a --inline '{"x": [1, 2]}' --fail closed"#),
            ["a", "--inline", r#"{"x": [1, 2]}"#, "--fail", "closed"]
        );
    }
}
