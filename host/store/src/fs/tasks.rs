//! The background tasks of `FsStore`: ephemeral heartbeats and polling watches.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::super::{LeaseClock, Store, StoreError, Versioned, WatchEvent};
use super::{FsStore, Root};

/// How often a watch re-lists its prefix.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Renews the heartbeat (`renew_period`) until told to stop or the node is no longer ours.
pub(super) fn spawn_heartbeat(
    root: Arc<Root>,
    key: String,
    path: PathBuf,
    nonce: String,
    ttl: Duration,
    clock: Arc<LeaseClock>,
) -> oneshot::Sender<()> {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let period = super::super::renew_period(ttl);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut stop_rx => return,
                _ = tokio::time::sleep(period) => {}
            }
            let (r, k, p, n) = (root.clone(), key.clone(), path.clone(), nonce.clone());
            // Readers judge the heartbeat by the time it is written, after this.
            let sent_at = std::time::Instant::now();
            let renewed = tokio::task::spawn_blocking(move || r.refresh(&p, &k, &n)).await;
            let took = sent_at.elapsed();
            if took > period {
                tracing::warn!(key = %key, took_ms = took.as_millis() as u64, "ephemeral heartbeat was slow (the store's disk stalled or this process was starved)");
            }
            match renewed {
                Ok(Ok(true)) => clock.renewed(sent_at, ttl),
                Ok(Ok(false)) | Err(_) => {
                    clock.lost();
                    tracing::warn!(key = %key, "ephemeral node was deleted or taken over; heartbeat stops");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(key = %key, error = %e, "ephemeral heartbeat failed; retrying")
                }
            }
        }
    });
    stop_tx
}

/// A watch: re-lists every [`POLL_INTERVAL`] and sends the differences. Ends when the
/// receiver is dropped, or after sending an error.
pub(super) async fn poll(
    store: FsStore,
    prefix: String,
    mut seen: BTreeMap<String, Versioned>,
    tx: mpsc::Sender<Result<WatchEvent, StoreError>>,
) {
    let mut ticks = tokio::time::interval(POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tx.closed() => return,
            _ = ticks.tick() => {}
        }
        let now = match store.list(&prefix).await {
            Ok(list) => snapshot(list),
            Err(e) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        for event in diff(&seen, &now) {
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
        seen = now;
    }
}

pub(super) fn snapshot(list: Vec<(String, Versioned)>) -> BTreeMap<String, Versioned> {
    list.into_iter().collect()
}

/// Deletes first, then puts in version order: the store-wide counter orders writes, so
/// puts come out in the order they happened. Deletes carry no version; what happened
/// between two polls is all the order a poller can know.
fn diff(old: &BTreeMap<String, Versioned>, new: &BTreeMap<String, Versioned>) -> Vec<WatchEvent> {
    let deletes = old
        .keys()
        .filter(|k| !new.contains_key(*k))
        .map(|k| WatchEvent::Delete { key: k.clone() });
    let mut puts: Vec<(&String, &Versioned)> = new
        .iter()
        .filter(|(k, v)| old.get(*k).is_none_or(|o| o.version != v.version))
        .collect();
    puts.sort_by_key(|(_, v)| v.version);
    let puts = puts.into_iter().map(|(k, v)| WatchEvent::Put {
        key: k.clone(),
        value: v.value.clone(),
    });
    deletes.chain(puts).collect()
}
