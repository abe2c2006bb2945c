//! `tessera import restore`: one RDB file through a proxy. The file is read and checked whole
//! before the proxy is even connected to, then written; a line of progress a second, and a
//! summary at the end.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::load::{self, LoadCounts};
use super::progress::{Rate, line};
use super::target::Target;

/// `tessera import restore` arguments.
#[derive(clap::Args, Debug)]
pub struct RestoreArgs {
    /// The RDB file (Redis 7.x, RDB version ≤ 11).
    #[arg(long)]
    pub rdb: PathBuf,
    /// The Tessera proxy to write through, HOST:PORT.
    #[arg(long)]
    pub to: String,
    /// Password for the proxy (`AUTH password`).
    #[arg(long, env = "TESSERA_PORT_TO_PASSWORD")]
    pub to_password: Option<String>,
}

/// Runs a restore to the end.
///
/// # Errors
/// An unreadable or bad file (nothing written), or a proxy that refuses a command.
pub async fn run(args: RestoreArgs) -> anyhow::Result<()> {
    let data =
        std::fs::read(&args.rdb).with_context(|| format!("reading {}", args.rdb.display()))?;
    let started = Instant::now();
    let keys = load::validate(&data).with_context(|| {
        format!(
            "{} is not importable, nothing was written",
            args.rdb.display()
        )
    })?;
    println!(
        "{}",
        line(
            "restore",
            &[
                ("file", args.rdb.display().to_string()),
                ("keys_in_file", keys.to_string())
            ]
        )
    );
    let mut target = Target::connect(&args.to, args.to_password.as_deref()).await?;
    let counts = Arc::new(LoadCounts::default());
    let reporter = tokio::spawn(report(counts.clone(), target.stats()));
    let result = load::load(&data, &mut target, &counts, load::Databases::Every).await;
    reporter.abort();
    result?;
    let secs = started.elapsed().as_secs_f64();
    let written = counts.keys.load(Ordering::Relaxed);
    println!(
        "{}",
        line(
            "restore done",
            &[
                ("keys", written.to_string()),
                (
                    "expired_skipped",
                    counts.expired.load(Ordering::Relaxed).to_string()
                ),
                (
                    "functions",
                    counts.functions.load(Ordering::Relaxed).to_string()
                ),
                (
                    "bytes",
                    target.stats().bytes.load(Ordering::Relaxed).to_string()
                ),
                ("seconds", format!("{secs:.2}")),
                (
                    "keys_per_s",
                    format!("{:.0}", written as f64 / secs.max(1e-9))
                ),
            ]
        )
    );
    Ok(())
}

/// A progress line once a second until aborted (a restore of an RDB, or of a backup).
pub(crate) async fn report(counts: Arc<LoadCounts>, stats: Arc<super::target::TargetStats>) {
    let mut rate = Rate::new(0);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tick.tick().await;
        let keys = counts.keys.load(Ordering::Relaxed);
        println!(
            "{}",
            line(
                "restore",
                &[
                    ("keys", keys.to_string()),
                    ("of", counts.keys_total.load(Ordering::Relaxed).to_string()),
                    ("bytes", stats.bytes.load(Ordering::Relaxed).to_string()),
                    ("keys_per_s", rate.update(keys).to_string()),
                ]
            )
        );
    }
}
