//! The dashboard's store, guarded by its lock: every write first checks that the cluster
//! lock still names this dashboard. A dashboard that lost its lock (its lease expired during
//! a store outage and a successor took over) must never write again; its writes fail with
//! `StoreError::LockLost` and `lost()` fires, so the process stops.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use tessera_store::{Cas, Ephemeral, Holder, Store, StoreError, Versioned, WatchStream};

pub(crate) struct Guarded {
    inner: Arc<dyn Store>,
    lock_key: String,
    me: Holder,
    lost: tokio::sync::watch::Sender<bool>,
}

impl Guarded {
    pub(crate) fn new(inner: Arc<dyn Store>, lock_key: String, me: Holder) -> Self {
        Self {
            inner,
            lock_key,
            me,
            lost: tokio::sync::watch::channel(false).0,
        }
    }

    pub(crate) fn lost(&self) -> tokio::sync::watch::Receiver<bool> {
        self.lost.subscribe()
    }

    async fn check(&self) -> Result<(), StoreError> {
        let holder = match self.inner.get(&self.lock_key).await? {
            Some(v) => serde_json::from_slice::<Holder>(&v.value).ok(),
            None => None,
        };
        if holder.as_ref() == Some(&self.me) {
            return Ok(());
        }
        let now = holder.map_or("nobody".to_string(), |h| {
            format!("pid {} on {}", h.pid, h.host)
        });
        tracing::error!(lock = %self.lock_key, holder = %now, "this dashboard lost the cluster lock; it stops writing");
        self.lost.send_replace(true);
        Err(StoreError::LockLost(format!(
            "the cluster lock is held by {now}, not by this dashboard"
        )))
    }
}

#[async_trait::async_trait]
impl Store for Guarded {
    async fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        self.inner.get(key).await
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<u64, StoreError> {
        self.check().await?;
        self.inner.put(key, value).await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<u64>,
        value: Bytes,
    ) -> Result<Cas, StoreError> {
        self.check().await?;
        self.inner.compare_and_swap(key, expected, value).await
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        self.check().await?;
        self.inner.delete(key).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>, StoreError> {
        self.inner.list(prefix).await
    }

    async fn watch(&self, prefix: &str) -> Result<WatchStream, StoreError> {
        self.inner.watch(prefix).await
    }

    async fn create_ephemeral(
        &self,
        key: &str,
        holder: &Holder,
        ttl: Duration,
    ) -> Result<Ephemeral, StoreError> {
        self.inner.create_ephemeral(key, holder, ttl).await
    }

    async fn ephemeral_silence(&self, key: &str) -> Result<Option<Duration>, StoreError> {
        self.inner.ephemeral_silence(key).await
    }

    async fn expire_ephemeral(&self, key: &str) -> Result<bool, StoreError> {
        self.check().await?;
        self.inner.expire_ephemeral(key).await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
