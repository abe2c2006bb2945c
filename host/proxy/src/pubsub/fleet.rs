//! The cluster's other proxies, asked for their subscription counts (`POST
//! /api/proxy/pubsub/counts` on their admin API, with the proxy secret) when a server's count
//! includes subscriptions that are not this proxy's. Cluster mode learns them from the
//! proxies registered in the store (`server::cluster`); a static proxy has none.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::Bytes;

use super::counts::{Count, add};
use tessera_wire::pubsub::{MAX_COUNTED_NAMES, SubCounts, SubCountsQuery};

/// How long a proxy's answer is waited for; one that gives none is left out of the count.
const ASK_WITHIN: Duration = Duration::from_millis(500);
/// How long a proxy that gave no answer is not asked again, so that a frozen or unreachable
/// one (still registered until its registration lapses) does not hold every `PUBLISH` for
/// `ASK_WITHIN`.
const REST: Duration = Duration::from_secs(5);

thread_local! {
    /// One HTTP client per worker thread (its connections are that thread's runtime's).
    static HTTP: reqwest::Client = reqwest::Client::builder()
        .timeout(ASK_WITHIN)
        .build()
        .unwrap_or_default();
}

/// The other proxies of the cluster (`Shared::fleet`).
#[derive(Default)]
pub struct Fleet {
    /// Their admin API addresses.
    others: ArcSwap<Vec<String>>,
    /// The cluster's proxy secret, which their admin APIs ask for.
    secret: OnceLock<String>,
    /// Those that gave no answer lately, and when (at most one entry per proxy listed).
    resting: Mutex<Vec<(String, Instant)>>,
}

/// The other proxies' counts summed, and how many of them gave none.
pub struct Answers {
    pub counts: Vec<Count>,
    pub missing: usize,
}

impl Fleet {
    pub fn set_secret(&self, secret: String) {
        let _ = self.secret.set(secret);
    }

    /// The other proxies now (their admin addresses).
    pub fn set_others(&self, admin_addrs: Vec<String>) {
        self.resting
            .lock()
            .expect("fleet lock poisoned")
            .retain(|(a, _)| admin_addrs.contains(a));
        self.others.store(Arc::new(admin_addrs));
    }

    /// Whether `addr` gave no answer within the last `REST`.
    fn rests(&self, addr: &str) -> bool {
        let mut resting = self.resting.lock().expect("fleet lock poisoned");
        resting.retain(|(_, at)| at.elapsed() < REST);
        resting.iter().any(|(a, _)| a == addr)
    }

    fn gave_nothing(&self, addr: &str) {
        let mut resting = self.resting.lock().expect("fleet lock poisoned");
        if !resting.iter().any(|(a, _)| a == addr) {
            resting.push((addr.to_owned(), Instant::now()));
        }
    }

    pub fn has_others(&self) -> bool {
        !self.others.load().is_empty()
    }

    /// Every other proxy's counts of `names` (see `SubCountsQuery`), summed; all asked at once.
    pub async fn ask(&self, shard: bool, names: &[Bytes], patterns: bool) -> Answers {
        let others = self.others.load_full();
        let secret = self.secret.get().cloned().unwrap_or_default();
        let queries: Vec<SubCountsQuery> = names
            .chunks(MAX_COUNTED_NAMES)
            .map(|chunk| SubCountsQuery {
                shard,
                names_hex: chunk.iter().map(hex::encode).collect(),
                patterns,
            })
            .collect();
        let http = HTTP.with(Clone::clone);
        let (asked, resting): (Vec<&String>, Vec<&String>) =
            others.iter().partition(|a| !self.rests(a));
        let answers = futures_util::future::join_all(asked.iter().map(|addr| {
            let (http, secret, queries) = (&http, &secret, &queries);
            async move { ask_one(http, addr, secret, queries).await }
        }))
        .await;
        let mut counts = vec![Count::default(); names.len()];
        let mut missing = resting.len();
        for (addr, answer) in asked.iter().zip(answers) {
            match answer {
                Some(theirs) if theirs.len() == names.len() => {
                    counts.iter_mut().zip(theirs).for_each(|(c, t)| add(c, t));
                }
                _ => {
                    self.gave_nothing(addr);
                    missing += 1;
                }
            }
        }
        Answers { counts, missing }
    }
}

/// One proxy's counts, or `None` if it did not give them all, or gave something else.
async fn ask_one(
    http: &reqwest::Client,
    addr: &str,
    secret: &str,
    queries: &[SubCountsQuery],
) -> Option<Vec<Count>> {
    let mut all = Vec::new();
    for q in queries {
        let r = http
            .post(format!("http://{addr}/api/proxy/pubsub/counts"))
            .bearer_auth(secret)
            .json(q)
            .send()
            .await
            .ok()?;
        if !r.status().is_success() {
            tracing::debug!(peer = addr, status = %r.status(), "pub/sub counts refused");
            return None;
        }
        let got: SubCounts = r.json().await.ok()?;
        if got.counts.len() != q.names_hex.len() {
            return None;
        }
        all.extend(got.counts);
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_that_gives_no_answer_is_left_out_then_rests() {
        let fleet = Fleet::default();
        // Nothing listens on port 1: refused at once.
        fleet.set_others(vec!["127.0.0.1:1".into()]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let names = [Bytes::from_static(b"news")];
        let a = rt.block_on(fleet.ask(false, &names, true));
        assert_eq!((a.counts, a.missing), (vec![Count::default()], 1));
        assert!(fleet.rests("127.0.0.1:1"), "not asked again for a while");
        let a = rt.block_on(fleet.ask(false, &names, true));
        assert_eq!(a.missing, 1);
        // Gone from the store: forgotten.
        fleet.set_others(Vec::new());
        assert!(!fleet.rests("127.0.0.1:1"));
    }
}
