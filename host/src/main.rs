//! The `tessera` command line: one binary, one subcommand per role.

mod openapi;
mod up;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use tessera_control::dashboard::{Dashboard, DashboardOptions};
use tessera_proxy::config::ProxyConfig;
use tessera_proxy::server::Proxy;
use tessera_proxy::server::cluster::ClusterOptions;

#[derive(Parser)]
#[command(name = "tessera", version, about = "Tessera: a Redis cluster platform")]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "TESSERA_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a RESP proxy: static (--backends) or in a cluster (--cluster, --store).
    Proxy(ProxyArgs),
    /// Run a cluster's dashboard: topology owner, REST API, health checks.
    Dashboard(DashboardArgs),
    /// Manage a cluster through its dashboard's API.
    Admin(tessera_cli::admin::AdminArgs),
    /// Run the federation web console over the clusters of one or more stores.
    Console(ConsoleArgs),
    /// Start a local cluster: store, redis-server groups, dashboard, proxies and the console.
    Up(UpArgs),
    /// Import into a cluster through a proxy: an RDB file (restore), or a live Redis server
    /// followed as its replica (sync). (`tessera port` is its older name.)
    #[command(alias = "port")]
    Import(tessera_cli::import::ImportArgs),
    /// Read a password from stdin and print its hash for a `[[users]]` entry of proxy.toml.
    HashPassword,
    /// Print the OpenAPI 3.1 document of an HTTP API, derived from the code (the committed
    /// copies are docs/openapi.json, docs/openapi-proxy.json, docs/openapi-console.json).
    Openapi {
        /// Which server's API.
        #[arg(long, value_enum, default_value = "dashboard")]
        api: openapi::Api,
    },
    /// (`tessera up`'s children) Run PROGRAM, stopped with SIGTERM when process PARENT dies.
    #[command(hide = true)]
    Tied {
        #[arg(long)]
        parent: u32,
        #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
        program: Vec<std::ffi::OsString>,
    },
}

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct ConsoleArgs {
    /// console.toml: users, admin tokens per cluster, stores, lockout.
    #[arg(long, env = "TESSERA_CONSOLE_CONFIG")]
    config: Option<PathBuf>,
    /// A store to search for clusters (repeat for more): fs:///path or etcd://host:port.
    #[arg(long = "store")]
    stores: Vec<String>,
    /// Listen address [default: the config's, else 127.0.0.1:9090].
    #[arg(long)]
    listen: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM; reloaded when it changes). Needs
    /// --tls-key; the session cookie is then always `Secure`.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<ConsoleCmd>,
}

#[derive(Subcommand)]
enum ConsoleCmd {
    /// Read a password from stdin and print its argon2id hash for console.toml.
    HashPassword,
}

#[derive(clap::Args)]
struct ProxyArgs {
    /// proxy.toml with every setting; flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// RESP listen address [default: 127.0.0.1:19000].
    #[arg(long)]
    listen: Option<String>,
    /// Bind the RESP listeners with SO_REUSEPORT, so that a new proxy can bind them while
    /// this one drains (an upgrade in place; docs/operations.md).
    #[arg(long)]
    reuse_port: bool,
    /// Static mode: backend addresses, comma-separated; slots are split evenly over them.
    #[arg(long, value_delimiter = ',', conflicts_with = "cluster")]
    backends: Vec<String>,
    /// Cluster mode: the cluster's name (needs --store).
    #[arg(long, requires = "store")]
    cluster: Option<String>,
    /// Cluster mode: the store, fs:///path or etcd://host:port[,host:port].
    #[arg(long, env = "TESSERA_STORE")]
    store: Option<String>,
    /// Admin HTTP API (/metrics, /health, stats; topology pushes in cluster mode).
    #[arg(long)]
    admin_listen: Option<String>,
    /// Worker threads (default: one per two CPUs).
    #[arg(long)]
    threads: Option<usize>,
    /// Static mode: a WebAssembly plugin (.wasm); repeat for a chain, in order. Its name is
    /// the file name without `.wasm`.
    #[arg(long = "plugin", conflicts_with = "cluster")]
    plugins: Vec<PathBuf>,
    /// The config of the plugin given at the same position: a JSON file, or inline JSON
    /// (starting with `{`).
    #[arg(long = "plugin-config")]
    plugin_configs: Vec<String>,
    /// NAME=open|closed: what a plugin's failure does to a command (default closed).
    #[arg(long = "plugin-fail")]
    plugin_fail: Vec<String>,
    #[command(flatten)]
    tls: ProxyTlsArgs,
}

/// TLS flags of `tessera proxy` (each overrides its proxy.toml setting; docs/tls.md).
#[derive(clap::Args)]
struct ProxyTlsArgs {
    /// A TLS RESP listener beside --listen (needs --tls-cert and --tls-key).
    #[arg(long)]
    tls_listen: Option<String>,
    /// Certificate chain (PEM) of the TLS listener; reloaded when the file changes.
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// Verify client certificates against this CA bundle (PEM).
    #[arg(long)]
    tls_client_ca: Option<PathBuf>,
    /// With --tls-client-ca: `required` (default) or `optional`.
    #[arg(long, value_parser = ["required", "optional"])]
    tls_client_auth: Option<String>,
    #[command(flatten)]
    backend: BackendTlsArgs,
    /// Static mode: every backend speaks TLS.
    #[arg(long)]
    backend_tls: bool,
}

/// How this process verifies (and, optionally, authenticates to) TLS backends.
#[derive(clap::Args)]
struct BackendTlsArgs {
    /// CA bundle (PEM) TLS backends' certificates are verified against.
    #[arg(long)]
    backend_tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for backends that require one.
    #[arg(long, requires = "backend_tls_key")]
    backend_tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "backend_tls_cert")]
    backend_tls_key: Option<PathBuf>,
}

#[derive(clap::Args)]
struct DashboardArgs {
    /// The cluster this dashboard owns (created at first start).
    #[arg(long)]
    cluster: String,
    /// fs:///path or etcd://host:port[,host:port].
    #[arg(long, env = "TESSERA_STORE")]
    store: String,
    #[arg(long, default_value = "127.0.0.1:18080")]
    listen: String,
    /// The token named `admin` (role admin); without it the first start generates one and
    /// prints it once. Later starts check it, and restore it if it was revoked.
    #[arg(long, env = "TESSERA_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// The file with the cluster's token key (HMAC key of the stored tokens; created with
    /// mode 0600 if missing). Default: beside an fs store; an etcd store needs it.
    #[arg(long, env = "TESSERA_TOKEN_KEY_FILE")]
    token_key_file: Option<PathBuf>,
    /// Accepted for old scripts and ignored: reads always need a token now (a viewer's).
    #[arg(long, hide = true)]
    auth_reads: bool,
    /// Health-check interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    health_interval_ms: u64,
    /// Failed checks in a row before a master is declared down.
    #[arg(long, default_value_t = 3)]
    down_after: u32,
    /// Slots migrating at once per group.
    #[arg(long, default_value_t = 512)]
    max_slots_in_flight: usize,
    /// Seconds between reads of every proxy's per-slot counters (`GET /api/slots/stats`).
    #[arg(long, default_value_t = 5.0)]
    slot_sample_secs: f64,
    /// Seconds of reads the per-slot rates are measured over.
    #[arg(long, default_value_t = 60.0)]
    slot_window_secs: f64,
    /// Seconds between estimates of each group's keys and memory per slot (a bounded SCAN).
    #[arg(long, default_value_t = 30.0)]
    slot_keys_secs: f64,
    /// The directory whole-cluster backups are written under (`POST /api/backups` names a
    /// new directory inside it; docs/backup.md); without it backups are refused.
    #[arg(long, env = "TESSERA_BACKUP_ROOT")]
    backup_root: Option<PathBuf>,
    /// Serve the API over HTTPS with this certificate chain (PEM; reloaded when it changes).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    #[command(flatten)]
    backend_tls: BackendTlsArgs,
}

#[derive(clap::Args)]
struct UpArgs {
    /// Where the store and the servers keep their data; run again to resume.
    #[arg(long, default_value = ".tessera")]
    data_dir: PathBuf,
    /// Number of groups (a master and a replica each).
    #[arg(long, default_value_t = 2)]
    groups: usize,
    /// Port of the first proxy (every further proxy gets the next one).
    #[arg(long, default_value_t = 19000)]
    port: u16,
    /// Dashboard port (of the first cluster; each further cluster's gets the next one).
    #[arg(long, default_value_t = 18080)]
    dashboard_port: u16,
    /// Admin API port of the first proxy (every further proxy gets the next one).
    #[arg(long, default_value_t = 11080)]
    admin_port: u16,
    /// The redis-server binary.
    #[arg(long, env = "REDIS_SERVER_BIN", default_value = "redis-server")]
    redis_server: String,
    /// Clusters to run: `local`, `local2`, … Each further one takes the next dashboard port
    /// and the next two proxy and admin ports.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=9))]
    clusters: u16,
    /// The web console's port.
    #[arg(long, default_value_t = 9090)]
    console_port: u16,
    /// Give the console user `admin` a new password and print it.
    #[arg(long)]
    reset_password: bool,
    /// Where the example plugins' .wasm files are (tessera_plugin_metrics.wasm,
    /// tessera_plugin_filter.wasm) [default: <target>/wasm32-unknown-unknown/release next to
    /// the binary's target directory]. Loaded on a cluster's first start when found.
    #[arg(long)]
    plugins_dir: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Cmd::Proxy(args) => run_proxy(args),
        Cmd::Dashboard(args) => run_dashboard(args),
        Cmd::Admin(args) => {
            if let Err(e) = tessera_cli::admin::run(args) {
                eprint!("{}", tessera_cli::admin::render_error(&e));
                std::process::exit(1);
            }
            Ok(())
        }
        Cmd::Import(args) => tessera_cli::import::run(args),
        Cmd::Console(args) => run_console(args),
        Cmd::Up(args) => up::run(up::UpOptions {
            data_dir: args.data_dir,
            groups: args.groups,
            proxy_port: args.port,
            dashboard_port: args.dashboard_port,
            admin_port: args.admin_port,
            redis_server: args.redis_server,
            exe: std::env::current_exe().context("locating the tessera binary")?,
            clusters: usize::from(args.clusters),
            console_port: args.console_port,
            reset_password: args.reset_password,
            plugins_dir: args.plugins_dir,
        }),
        Cmd::Tied { parent, program } => Err(up::exec_tied(parent, &program)),
        Cmd::Openapi { api } => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(openapi::document(api).as_bytes())
                .and_then(|()| out.flush())
                .context("writing the document to stdout")
        }
        Cmd::HashPassword => {
            let password = read_password("tessera hash-password")?;
            tessera_model::users::check_password(&password)?;
            println!("{}", tessera_model::users::hash_password(&password));
            Ok(())
        }
    }
}

fn init_logging(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")
}

fn run_proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => ProxyConfig::from_file(path)?,
        None => ProxyConfig::default(),
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    config.reuse_port |= args.reuse_port;
    if !args.backends.is_empty() {
        config.backends = args.backends;
    }
    if let Some(t) = args.threads {
        config.threads = t;
    }
    args.tls.apply(&mut config);
    if args.plugin_configs.len() > args.plugins.len() {
        bail!(
            "--plugin-config given {} times but --plugin only {}",
            args.plugin_configs.len(),
            args.plugins.len()
        );
    }
    for (i, path) in args.plugins.iter().enumerate() {
        let given = args.plugin_configs.get(i);
        let inline = given.filter(|c| c.trim_start().starts_with('{'));
        config.plugins.push(tessera_proxy::config::PluginFile {
            path: path.clone(),
            config: given.filter(|_| inline.is_none()).map(PathBuf::from),
            config_json: inline.cloned(),
            ..Default::default()
        });
    }
    for f in &args.plugin_fail {
        let (name, policy) = f
            .split_once('=')
            .with_context(|| format!("--plugin-fail {f:?}: expected NAME=open or NAME=closed"))?;
        let mut found = false;
        for p in &mut config.plugins {
            let spec_name = p.to_spec()?.name;
            if spec_name == name {
                p.fail = Some(policy.to_owned());
                found = true;
            }
        }
        if !found {
            bail!("--plugin-fail {f:?}: no plugin named {name}");
        }
    }
    // A bad users table stops the proxy here, with the reason, before it listens.
    config.users_table().context("proxy.toml's [[users]]")?;
    runtime()?.block_on(async {
        if let Some(cluster) = args.cluster {
            if !config.plugins.is_empty() {
                bail!("a cluster-mode proxy takes its plugins from the cluster's catalog (tessera admin plugin …), not from --plugin or [[plugins]]");
            }
            let store_url = args.store.context("--cluster needs --store")?;
            let admin_listen = args
                .admin_listen
                .unwrap_or_else(|| "127.0.0.1:11080".into());
            let opts = ClusterOptions {
                cluster,
                store_url,
                admin_listen,
            };
            return tessera_proxy::server::cluster::run(config, opts, shutdown_signal()).await;
        }
        if args.store.is_some() {
            bail!("--store is for cluster mode: give --cluster too, or --backends for static mode");
        }
        let specs = config
            .plugins
            .iter()
            .map(tessera_proxy::config::PluginFile::to_spec)
            .collect::<anyhow::Result<Vec<_>>>()?;
        let proxy = Proxy::bind(config)?;
        if !specs.is_empty() {
            let loaded = proxy
                .shared()
                .plugins
                .apply(specs)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            for p in loaded {
                tracing::info!(plugin = %p.name, sha256 = %p.sha256, fail = %p.fail, hooks = ?p.hooks, classes = ?p.hook_classes, "plugin loaded");
            }
        }
        if let Some(addr) = args.admin_listen {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .with_context(|| format!("binding the admin API on {addr}"))?;
            let admin = tessera_proxy::admin::ProxyAdmin::new(
                proxy.shared().clone(),
                String::new(),
                listener.local_addr()?.to_string(),
                None,
            );
            tokio::spawn(admin.clone().sample_ops());
            tokio::spawn(tessera_http::server::serve(
                listener,
                admin.router(),
                std::future::pending(),
            ));
        }
        proxy.run(shutdown_signal()).await
    })
}

fn run_console(args: ConsoleArgs) -> anyhow::Result<()> {
    if let Some(ConsoleCmd::HashPassword) = args.command {
        let password = read_password("tessera console hash-password")?;
        println!("{}", tessera_console::hash_password(&password)?);
        return Ok(());
    }
    let config = match &args.config {
        Some(path) => tessera_console::ConsoleConfig::from_file(path)?,
        None => tessera_console::ConsoleConfig::default(),
    };
    let mut config = config;
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config.tls_cert = Some(cert);
        config.tls_key = Some(key);
    }
    let opts = tessera_console::ConsoleOptions {
        config,
        stores: args.stores,
        listen: args.listen,
    };
    runtime()?.block_on(tessera_console::run(opts, shutdown_signal()))
}

/// One line from stdin, without its line ending. On a terminal it prompts and turns echo
/// off (with `stty`) while the password is typed.
fn read_password(command: &str) -> anyhow::Result<String> {
    use std::io::{BufRead, IsTerminal};
    let tty = std::io::stdin().is_terminal();
    let stty = |arg: &str| {
        std::process::Command::new("stty")
            .arg(arg)
            .stdin(std::process::Stdio::inherit())
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut line = String::new();
    if tty {
        eprint!("Password: ");
        let hidden = stty("-echo");
        let read = std::io::stdin().lock().read_line(&mut line);
        if hidden {
            stty("echo");
            eprintln!();
        }
        read?;
    } else {
        std::io::stdin().lock().read_line(&mut line)?;
    }
    let password = line.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        bail!("empty password: give it on stdin, e.g. `printf '%s' \"$PW\" | {command}`");
    }
    Ok(password)
}

fn run_dashboard(args: DashboardArgs) -> anyhow::Result<()> {
    let mut opts = DashboardOptions::new(&args.cluster, &args.store, &args.listen);
    opts.admin_token = args.admin_token;
    opts.token_key_file = args.token_key_file;
    if args.auth_reads {
        tracing::warn!("--auth-reads is the default now and has no effect: drop it");
    }
    opts.health_interval = Duration::from_millis(args.health_interval_ms.max(100));
    opts.down_after = args.down_after.max(1);
    opts.max_slots_in_flight = args.max_slots_in_flight.max(1);
    opts.slot_sample = Duration::from_secs_f64(args.slot_sample_secs.clamp(0.1, 3600.0));
    opts.slot_window = Duration::from_secs_f64(args.slot_window_secs.clamp(0.2, 86_400.0));
    opts.slot_keys = Duration::from_secs_f64(args.slot_keys_secs.clamp(0.5, 86_400.0));
    opts.backup_root = args.backup_root;
    args.backend_tls.configure()?;
    let https = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => Some(
            tessera_model::tls::ServerTls::load(tessera_model::tls::ServerTlsFiles {
                cert,
                key,
                client_ca: None,
                client_auth: tessera_model::tls::ClientAuth::default(),
            })
            .context("--tls-cert/--tls-key")?,
        ),
        _ => None,
    };
    runtime()?.block_on(async {
        let started = Dashboard::start(opts).await?;
        if let Some(token) = &started.new_token {
            // Printed once, on stdout, for the operator to keep; only its hash is stored.
            println!("admin token for cluster {}: {token}", args.cluster);
            println!(
                "(the token named admin; stored only as an HMAC, keep it: API calls need \
                 `Authorization: Bearer <token>`, and `tessera admin token create` makes more)"
            );
        }
        let addr = started.listener.local_addr()?;
        let listener = tessera_http::tls::HttpListener::new(started.listener, https)?;
        tracing::info!(%addr, cluster = %args.cluster, https = listener.is_tls(), "dashboard API listening");
        let d = started.dashboard.clone();
        tokio::spawn(d.clone().run_background());
        let serve = tessera_http::server::serve(listener, tessera_control::api::router(d.clone()), shutdown_signal());
        tokio::select! {
            r = serve => r?,
            _ = d.lock_lost() => bail!("this dashboard lost the cluster lock to another one; stopping"),
        }
        tracing::info!("dashboard stopped");
        Ok(())
    })
}

impl ProxyTlsArgs {
    fn apply(self, config: &mut ProxyConfig) {
        let set = |slot: &mut Option<PathBuf>, v: Option<PathBuf>| {
            if v.is_some() {
                *slot = v;
            }
        };
        if self.tls_listen.is_some() {
            config.tls_listen = self.tls_listen;
        }
        set(&mut config.tls_cert, self.tls_cert);
        set(&mut config.tls_key, self.tls_key);
        set(&mut config.tls_client_ca, self.tls_client_ca);
        if let Some(mode) = self
            .tls_client_auth
            .as_deref()
            .and_then(tessera_model::tls::ClientAuth::parse)
        {
            config.tls_client_auth = mode;
        }
        config.backend_tls |= self.backend_tls;
        set(&mut config.backend_tls_ca, self.backend.backend_tls_ca);
        set(&mut config.backend_tls_cert, self.backend.backend_tls_cert);
        set(&mut config.backend_tls_key, self.backend.backend_tls_key);
    }
}

impl BackendTlsArgs {
    /// Loads the backend CA (and client certificate) into this process's connector.
    fn configure(&self) -> anyhow::Result<()> {
        tessera_model::tls::backend::configure(
            self.backend_tls_ca.as_deref(),
            self.backend_tls_cert.as_deref(),
            self.backend_tls_key.as_deref(),
        )
        .context("backend TLS")
    }
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
