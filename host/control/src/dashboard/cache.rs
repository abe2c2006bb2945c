//! A value fetched at most once per period and shared by everyone who asks meanwhile: the
//! proxies' stats behind `/api/overview` and `/api/stats`, so a page polling both, or a
//! hundred callers at once, cost one fan-out to the proxies a second, not one each.

use std::time::{Duration, Instant};

/// The last value fetched and when it arrived.
pub struct Cached<T> {
    ttl: Duration,
    // A tokio Mutex, held across the fetch on purpose: callers arriving while one fetch is
    // in flight wait for it and take its value instead of starting their own.
    slot: tokio::sync::Mutex<Option<(Instant, T)>>,
}

impl<T: Clone> Cached<T> {
    /// An empty cache whose values are served for `ttl` after they arrive.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            slot: tokio::sync::Mutex::new(None),
        }
    }

    /// The value if it arrived less than the period ago, else `fetch`'s (kept on success).
    ///
    /// # Errors
    /// `fetch`'s error; nothing is kept then, so the next caller fetches again.
    pub async fn get_or_fetch<E, F>(&self, fetch: impl FnOnce() -> F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some((at, v)) = &*slot
            && at.elapsed() < self.ttl
        {
            return Ok(v.clone());
        }
        let v = fetch().await?;
        *slot = Some((Instant::now(), v.clone()));
        Ok(v)
    }

    /// `fetch`'s value now, whatever the cache holds, kept for the others (the metrics
    /// history samples each second: a cached value would count one second twice).
    ///
    /// # Errors
    /// `fetch`'s error; the cache keeps what it had.
    pub async fn refresh<E, F>(&self, fetch: impl FnOnce() -> F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let mut slot = self.slot.lock().await;
        let v = fetch().await?;
        *slot = Some((Instant::now(), v.clone()));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fetch that takes a while and returns how many fetches ran, or fails when told to.
    async fn call(cache: &Cached<u32>, fetches: &AtomicU32, fail: bool) -> Result<u32, ()> {
        cache
            .get_or_fetch(|| async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let n = fetches.fetch_add(1, Ordering::SeqCst) + 1;
                if fail { Err(()) } else { Ok(n) }
            })
            .await
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch() {
        let cache = Arc::new(Cached::<u32>::new(Duration::from_secs(60)));
        let fetches = Arc::new(AtomicU32::new(0));
        let all = futures_util::future::join_all((0..10).map(|_| {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            tokio::spawn(async move { call(&cache, &fetches, false).await })
        }))
        .await;
        assert!(all.into_iter().all(|v| v.unwrap() == Ok(1)));
        assert_eq!(call(&cache, &fetches, false).await, Ok(1));
        assert_eq!(fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_value_past_its_period_or_a_failure_is_fetched_again() {
        let cache = Cached::<u32>::new(Duration::from_millis(1));
        let fetches = AtomicU32::new(0);
        assert_eq!(call(&cache, &fetches, false).await, Ok(1));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(call(&cache, &fetches, true).await, Err(()));
        assert_eq!(call(&cache, &fetches, false).await, Ok(3));
    }
}
