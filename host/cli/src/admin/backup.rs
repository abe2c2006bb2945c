//! `tessera admin backup --to DIR`: starts a whole-cluster backup on the dashboard
//! (`POST /api/backups`) and follows it (`GET /api/backups`) until it ends, a line per change
//! (docs/backup.md). `tessera admin backups` lists the recent ones. The restore is
//! `import::from_backup`: it talks to a proxy, not to the dashboard.

use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;
use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::table::{Table, human_bytes};
use tessera_wire::backup::{BackupRequest, BackupView, BackupsView, JobState};

/// `tessera admin backup` arguments.
#[derive(Args, Debug)]
pub struct BackupArgs {
    /// The new directory, relative to the dashboard's --backup-root.
    #[arg(long)]
    to: String,
    /// Every group's snapshot at one instant: writes pause briefly on every master.
    #[arg(long)]
    one_instant: bool,
    /// Bound of that pause in ms (1 to 5000; default 500).
    #[arg(long, requires = "one_instant")]
    max_pause_ms: Option<u64>,
    /// Start it and return, without following it.
    #[arg(long)]
    no_wait: bool,
    /// Give up following after this many seconds (the backup goes on).
    #[arg(long, default_value_t = 86_400)]
    wait_s: u64,
}

pub(super) async fn start(c: &Client, a: BackupArgs) -> anyhow::Result<Reply> {
    let req = BackupRequest {
        dir: a.to,
        one_instant: a.one_instant,
        max_pause_ms: a.max_pause_ms,
    };
    let mut v: BackupView = c
        .call(Method::POST, &["api", "backups"], Send::Json(&req))
        .await?;
    if a.no_wait {
        return Reply::new(&v, render(&v));
    }
    let deadline = Instant::now() + Duration::from_secs(a.wait_s);
    let mut last = String::new();
    while v.state == JobState::Running {
        let line = progress(&v);
        if line != last {
            println!("{line}");
            last = line;
        }
        if Instant::now() > deadline {
            bail!(
                "backup {} still runs after {} s (GET /api/backups follows it)",
                v.id,
                a.wait_s
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let all: BackupsView = c.get(&["api", "backups"]).await?;
        v = all
            .backups
            .into_iter()
            .find(|b| b.id == v.id)
            .ok_or_else(|| anyhow::anyhow!("backup {} is no longer listed", v.id))?;
    }
    if v.state == JobState::Failed {
        bail!(
            "backup {} to {} failed: {}",
            v.id,
            v.dir,
            v.error.as_deref().unwrap_or("no reason given")
        );
    }
    Reply::new(&v, render(&v))
}

pub(super) async fn list(c: &Client) -> anyhow::Result<Reply> {
    let v: BackupsView = c.get(&["api", "backups"]).await?;
    let mut t = Table::new(&["ID", "DIR", "STATE", "BYTES", "PAUSE MS", "ERROR"]);
    for b in &v.backups {
        t.row(vec![
            b.id.to_string(),
            b.dir.clone(),
            format!("{:?}", b.state).to_lowercase(),
            human_bytes(b.total_bytes.max(b.groups.iter().map(|g| g.bytes).sum())),
            b.pause_ms.map_or("-".into(), |p| format!("{p:.1}")),
            b.error.clone().unwrap_or_default(),
        ]);
    }
    let head = if v.enabled {
        "backups enabled"
    } else {
        "backups disabled (no --backup-root)"
    };
    Reply::new(&v, format!("{head}\n{}", t.render()))
}

/// One line: every group's state and bytes.
fn progress(v: &BackupView) -> String {
    let groups: Vec<String> = v
        .groups
        .iter()
        .map(|g| {
            format!(
                "group={} from={}({}) state={:?} bytes={}",
                g.group, g.source, g.source_role, g.state, g.bytes
            )
        })
        .collect();
    format!("backup {}: {}", v.id, groups.join("; "))
}

fn render(v: &BackupView) -> String {
    let mut t = Table::new(&[
        "GROUP", "SOURCE", "ROLE", "STATE", "BYTES", "KEYS", "OFFSET",
    ]);
    for g in &v.groups {
        t.row(vec![
            g.group.to_string(),
            g.source.clone(),
            g.source_role.clone(),
            format!("{:?}", g.state).to_lowercase(),
            g.bytes.to_string(),
            g.keys.map_or("-".into(), |k| k.to_string()),
            g.offset.map_or("-".into(), |o| o.to_string()),
        ]);
    }
    let pause = v
        .pause_ms
        .map_or(String::new(), |p| format!(" write_pause_ms={p:.1}"));
    format!(
        "backup {} to {}: {:?} bytes={}{pause}\n{}",
        v.id,
        v.dir,
        v.state,
        v.total_bytes,
        t.render()
    )
}
