//! Console sessions, kept in a store (`fs` or `etcd`) so they outlive a console restart. The
//! store holds only the sha256 of each session id, its user and its expiry, under
//! `/tessera-console/sessions/<sha256 hex>`; the id itself exists only in the browser's
//! cookie. The CSRF token is derived from the id, so it is not stored either. Each user keeps
//! at most [`MAX_PER_USER`] sessions; a new login past that ends the user's oldest.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use tessera_model::clock::now_ms;
use tessera_model::secret::sha256_hex;
use tessera_store::{Store, StoreError};

/// Where sessions live in the store: outside `/tessera/`, so discovery never sees them.
pub const PREFIX: &str = "/tessera-console/sessions/";
/// Sessions per user at most (browsers and devices); the oldest goes first.
pub const MAX_PER_USER: usize = 10;
/// How long one store call may take before the caller gets 503.
const STORE_TIMEOUT: Duration = Duration::from_secs(3);

/// A session as the store keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    user: String,
    created_ms: u64,
    expires_ms: u64,
}

/// A live session: its user and its CSRF token.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(crate) user: String,
    pub(crate) csrf: String,
}

/// The session table in the store, opened on first use (so `new` does no I/O, and a store
/// that is down at start only fails the calls that need it).
pub(crate) struct Sessions {
    url: String,
    store: OnceCell<Arc<dyn Store>>,
    ttl: Duration,
    /// Serializes logins, so the per-user bound holds for this console.
    creating: tokio::sync::Mutex<()>,
}

/// The store key of session `id`.
fn key_of(id: &str) -> String {
    format!("{PREFIX}{}", sha256_hex(id))
}

/// The CSRF token of session `id`: not derivable from the stored sha256 of the id.
fn csrf_of(id: &str) -> String {
    sha256_hex(format!("tessera-console-csrf\0{id}"))
}

/// Whether `id` looks like one of ours (64 hex digits); anything else is no session.
fn well_formed(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Sessions {
    pub(crate) fn new(url: String, ttl: Duration) -> Self {
        Self {
            url,
            store: OnceCell::new(),
            ttl,
            creating: tokio::sync::Mutex::new(()),
        }
    }

    /// The store's URL.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    async fn store(&self) -> Result<&Arc<dyn Store>, StoreError> {
        self.store
            .get_or_try_init(|| timed(tessera_store::open(&self.url)))
            .await
    }

    /// Starts a session for `user`, ending its oldest past [`MAX_PER_USER`] and every expired
    /// one. Returns (session id, CSRF token).
    ///
    /// # Errors
    /// The store fails or does not answer in time.
    pub(crate) async fn create(&self, user: &str) -> Result<(String, String), StoreError> {
        let store = self.store().await?;
        let _one_at_a_time = self.creating.lock().await;
        let now = now_ms();
        let mut mine = Vec::new();
        for (key, v) in timed(store.list(PREFIX)).await? {
            match serde_json::from_slice::<Record>(&v.value) {
                Ok(r) if r.expires_ms > now => {
                    if r.user == user {
                        mine.push((r.created_ms, key));
                    }
                }
                // Expired, or not ours to read: it can never be a session again. Best
                // effort: the next login tries again.
                _ => {
                    let _ = timed(store.delete(&key)).await;
                }
            }
        }
        mine.sort();
        let excess = (mine.len() + 1).saturating_sub(MAX_PER_USER);
        for (_, key) in mine.into_iter().take(excess) {
            timed(store.delete(&key)).await?;
        }
        let id = hex::encode(rand::random::<[u8; 32]>());
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let record = Record {
            user: user.to_owned(),
            created_ms: now,
            expires_ms: now.saturating_add(ttl_ms),
        };
        let value = serde_json::to_vec(&record).expect("a session record serializes");
        timed(store.put(&key_of(&id), Bytes::from(value))).await?;
        let csrf = csrf_of(&id);
        Ok((id, csrf))
    }

    /// The live session `id` names, if any. An expired one is deleted.
    ///
    /// # Errors
    /// The store fails or does not answer in time.
    pub(crate) async fn find(&self, id: &str) -> Result<Option<Live>, StoreError> {
        if !well_formed(id) {
            return Ok(None);
        }
        let store = self.store().await?;
        let key = key_of(id);
        let Some(v) = timed(store.get(&key)).await? else {
            return Ok(None);
        };
        let record = serde_json::from_slice::<Record>(&v.value).ok();
        match record {
            Some(r) if r.expires_ms > now_ms() => Ok(Some(Live {
                user: r.user,
                csrf: csrf_of(id),
            })),
            _ => {
                // Best effort: it is no session either way, and the next login sweeps it.
                let _ = timed(store.delete(&key)).await;
                Ok(None)
            }
        }
    }

    /// Ends session `id` (nothing if there is none).
    ///
    /// # Errors
    /// The store fails or does not answer in time.
    pub(crate) async fn end(&self, id: &str) -> Result<(), StoreError> {
        if !well_formed(id) {
            return Ok(());
        }
        let store = self.store().await?;
        timed(store.delete(&key_of(id))).await?;
        Ok(())
    }
}

/// `f` within [`STORE_TIMEOUT`].
async fn timed<T>(f: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    tokio::time::timeout(STORE_TIMEOUT, f)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(format!(
                "no answer within {STORE_TIMEOUT:?}"
            )))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_tokens_are_not_derivable_from_the_stored_key() {
        let id = hex::encode([7u8; 32]);
        assert!(well_formed(&id));
        assert!(!well_formed("../../etc"));
        assert!(!well_formed(&"g".repeat(64)));
        let key = key_of(&id);
        assert!(key.starts_with(PREFIX));
        assert!(!key.contains(&id));
        assert_ne!(csrf_of(&id), sha256_hex(&id));
        assert_eq!(csrf_of(&id).len(), 64);
    }
}
