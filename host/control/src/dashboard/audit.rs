//! The cluster's audit log: one store node per mutating API call, under
//! `/tessera/<cluster>/audit/<unix ms, 16 digits>-<seq, 6 digits>`, so keys sort by time and a
//! successor dashboard reads the same history. The newest [`KEEP`] are kept. Who calls and what
//! counts as a change is the API layer's business (`api::audit`); this only stores and lists.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::warn;

use super::Dashboard;
use tessera_store::{Store, StoreError};
use tessera_wire::audit::AuditEntry;

/// How many entries the log keeps; older ones are deleted as new ones arrive.
pub const KEEP: usize = 1000;

/// The audit log of one cluster, in its store.
pub struct AuditLog {
    store: Arc<dyn Store>,
    prefix: String,
    seq: AtomicU64,
    /// Set once the dashboard lost its cluster lock.
    lost: tokio::sync::watch::Receiver<bool>,
    /// Keys in the store, oldest first; loaded on first use. A tokio Mutex: held across the
    /// store calls so that appends and trims do not interleave.
    keys: tokio::sync::Mutex<Option<VecDeque<String>>>,
}

impl AuditLog {
    /// The log of `d`'s cluster; writes go through the dashboard's lock-checked store, so a
    /// dashboard that lost its lock records nothing.
    pub fn new(d: &Dashboard) -> Arc<Self> {
        Arc::new(Self {
            store: d.store.clone(),
            prefix: format!("{}audit/", d.paths.cluster_prefix()),
            seq: AtomicU64::new(0),
            lost: d.lost.clone(),
            keys: tokio::sync::Mutex::new(None),
        })
    }

    /// Stores `entry` and deletes the oldest entries beyond [`KEEP`].
    ///
    /// # Errors
    /// The store fails (or the lock is lost); the entry may then be missing.
    pub async fn append(&self, entry: &AuditEntry) -> Result<(), StoreError> {
        if *self.lost.borrow() {
            // The store would refuse the write, and the process is stopping: the caller's
            // answer (a 503 saying so) must not wait for a store round trip that cannot work.
            return Err(StoreError::LockLost(
                "not recording: this dashboard stops".into(),
            ));
        }
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) % 1_000_000;
        let key = format!("{}{:016}-{seq:06}", self.prefix, entry.time_ms);
        let mut keys = self.keys.lock().await;
        if keys.is_none() {
            *keys = Some(self.load_keys().await?);
        }
        let keys = keys.as_mut().expect("loaded above");
        let bytes = serde_json::to_vec(entry).expect("an audit entry serializes");
        self.store.put(&key, bytes.into()).await?;
        keys.push_back(key);
        while keys.len() > KEEP {
            let old = keys.pop_front().expect("longer than KEEP");
            if let Err(e) = self.store.delete(&old).await {
                // Left behind, it is only one extra entry; `list` still returns KEEP at most.
                warn!(key = %old, error = %e, "could not delete an old audit entry");
            }
        }
        Ok(())
    }

    /// Up to `limit` entries, newest first.
    ///
    /// # Errors
    /// The store fails.
    pub async fn list(&self, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        let mut out = Vec::new();
        for (key, v) in self.store.list(&self.prefix).await?.into_iter().rev() {
            if out.len() >= limit.min(KEEP) {
                break;
            }
            match serde_json::from_slice(&v.value) {
                Ok(e) => out.push(e),
                Err(e) => warn!(%key, error = %e, "skipping an unreadable audit entry"),
            }
        }
        Ok(out)
    }

    async fn load_keys(&self) -> Result<VecDeque<String>, StoreError> {
        // Sorted by key, so oldest first.
        Ok(self
            .store
            .list(&self.prefix)
            .await?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }
}
