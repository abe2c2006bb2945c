//! `tessera admin restore --from DIR --to PROXY`: a whole-cluster restore (docs/backup.md),
//! step by step. The backup is checked whole and the target found empty (the keys' side,
//! `import::from_backup`); the backup's settings are read and checked whole
//! (`import::settings`), the target's read and compared, and a conflict refuses the restore
//! before anything is changed; then the settings are applied through the dashboard
//! (`restore_settings`), the keys written through the proxy, and last the `default` user's
//! entry. Any failure leaves the target without a key and says which settings were applied.

use std::time::Instant;

use anyhow::{Context, bail};

use super::client::Client;
use super::restore_settings::{self, Applied};
use crate::import::from_backup::{self, RestoreArgs};
use crate::import::progress::line;
use crate::import::settings::Settings;

/// Runs a restore to the end, on a runtime of its own: its summary line.
///
/// # Errors
/// A bad backup, a non-empty target, a conflicting setting (nothing changed), a setting or a
/// write that failed (the message says what was applied; no key is left).
pub(super) fn run(
    dashboard: &str,
    token: Option<String>,
    args: RestoreArgs,
) -> anyhow::Result<String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the runtime")?;
    let client = if args.no_settings {
        None
    } else {
        Some(Client::new(dashboard, token)?)
    };
    rt.block_on(restore(client, args))
}

async fn restore(client: Option<Client>, args: RestoreArgs) -> anyhow::Result<String> {
    let started = Instant::now();
    let checked = from_backup::check_backup(&args)?;
    let settings = match client {
        Some(_) => Some(
            Settings::from_store(&checked.store)
                .context("store.json")
                .with_context(|| from_backup::not_a_backup(&args))?,
        ),
        None => None,
    };
    from_backup::ensure_empty(&args).await?;
    let (Some(c), Some(s)) = (client, settings) else {
        println!(
            "{}",
            line("restore settings", &[("skipped", "--no-settings".into())])
        );
        return from_backup::write(&args, &checked, started).await;
    };
    let target = restore_settings::read_target(&c, &args.to).await?;
    let conflicts = restore_settings::conflicts(&s, &target).context(
        "the backup's settings cannot be applied to the target; nothing was applied or written",
    )?;
    if !conflicts.is_empty() && !args.replace_settings {
        bail!(
            "the target already has settings the backup would replace: {}; nothing was applied \
             or written (--replace-settings replaces them, --no-settings restores the keys alone)",
            conflicts.join("; ")
        );
    }
    for c in &s.canaries_skipped {
        println!(
            "{}",
            line(
                "restore settings",
                &[("plugin", c.clone()), ("canary", "not restored".into())]
            )
        );
    }
    let mut applied = Applied::default();
    let applying = Instant::now();
    restore_settings::apply(&c, &s, &target, &mut applied).await?;
    let mut settings_secs = applying.elapsed().as_secs_f64();
    let summary = from_backup::write(&args, &checked, started)
        .await
        .with_context(|| format!("the settings applied stay: {}", applied.list()))?;
    let applying = Instant::now();
    if let Err(e) = restore_settings::apply_default(&c, &s, &target, &mut applied).await {
        let undo = from_backup::undo(&args, &checked).await;
        return Err(e.context(format!(
            "the keys were written, but applying the backup's default user failed; {undo}; the \
             settings applied stay: {}",
            applied.list()
        )));
    }
    settings_secs += applying.elapsed().as_secs_f64();
    println!(
        "{}",
        line(
            "restore settings",
            &[
                ("users", s.users.len().to_string()),
                ("plugins", s.plugins.len().to_string()),
                ("routes", s.routes.len().to_string()),
                ("read_policy", s.read_policy.is_some().to_string()),
                ("failover", s.failover.is_some().to_string()),
                ("seconds", format!("{settings_secs:.2}")),
            ]
        )
    );
    Ok(summary)
}
