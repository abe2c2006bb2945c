//! The `tessera` command line: one binary, one subcommand per role.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use tessera::config::ProxyConfig;
use tessera::proxy::Proxy;

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
    /// Run a RESP proxy. Static mode: the 1024 slots split evenly over --backends.
    Proxy(ProxyArgs),
    /// Start a local cluster: redis-server children under a data directory and a proxy.
    Up(UpArgs),
}

#[derive(clap::Args)]
struct UpArgs {
    /// Where the servers keep their data; run again with the same folder to resume.
    #[arg(long, default_value = ".tessera")]
    data_dir: PathBuf,
    /// Number of groups (one redis-server each).
    #[arg(long, default_value_t = 2)]
    groups: usize,
    /// Proxy port.
    #[arg(long, default_value_t = 19000)]
    port: u16,
    /// The redis-server binary.
    #[arg(long, env = "REDIS_SERVER_BIN", default_value = "redis-server")]
    redis_server: String,
}

#[derive(clap::Args)]
struct ProxyArgs {
    /// proxy.toml with every setting; flags below override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// RESP listen address [default: 127.0.0.1:19000].
    #[arg(long)]
    listen: Option<String>,
    /// Backend addresses, comma-separated: slots are split evenly over them, in order.
    #[arg(long, value_delimiter = ',')]
    backends: Vec<String>,
    /// Worker threads (default: one per CPU).
    #[arg(long)]
    threads: Option<usize>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    match cli.command {
        Cmd::Proxy(args) => run_proxy(args),
        Cmd::Up(args) => tessera::up::run(
            tessera::up::UpOptions {
                data_dir: args.data_dir,
                groups: args.groups,
                proxy_port: args.port,
                redis_server: args.redis_server,
            },
            shutdown_signal(),
        ),
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

fn run_proxy(args: ProxyArgs) -> anyhow::Result<()> {
    let mut config = match &args.config {
        Some(path) => ProxyConfig::from_file(path)?,
        None => ProxyConfig::default(),
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if !args.backends.is_empty() {
        config.backends = args.backends;
    }
    if let Some(t) = args.threads {
        config.threads = t;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the runtime")?;
    rt.block_on(async {
        let proxy = Proxy::bind(config)?;
        proxy.run(shutdown_signal()).await
    })
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
