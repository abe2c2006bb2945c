//! `EtcdStore`: the coordinator in etcd (v3 API through etcd-client). Keys are used as-is and
//! a value's version is its `mod_revision`. Ephemeral nodes are keys bound to a lease that a
//! task keeps alive. Every unary call is bounded by [`CALL_TIMEOUT`], so a stopped etcd fails
//! fast with `Unavailable` instead of hanging; watches rely on HTTP/2 keep-alive instead.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, LeaseKeepAliveStream,
    LeaseKeeper, PutOptions, ResponseHeader, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
    WatchOptions, WatchResponse,
};
use futures_util::stream;
use tokio::sync::oneshot;

use super::fs::describe_holder;
use super::{
    Cas, Ephemeral, Holder, LeaseClock, Store, StoreError, Versioned, WatchEvent, WatchStream,
};

/// The longest any single request may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A store in an etcd cluster.
pub struct EtcdStore {
    client: Client,
    endpoints: Vec<String>,
    /// This machine's host name, read once: compared with ephemeral holders' hosts.
    host: String,
}

impl EtcdStore {
    /// Connects to `endpoints` (`http://host:port`) and checks that etcd answers.
    ///
    /// # Errors
    /// `Unavailable` if no endpoint answers within [`CALL_TIMEOUT`].
    pub async fn connect(endpoints: &[String]) -> Result<EtcdStore, StoreError> {
        let options = ConnectOptions::new()
            .with_connect_timeout(CALL_TIMEOUT)
            // Detects a dead etcd under an idle watch or keep-alive stream. Not
            // `with_timeout`: it becomes a gRPC deadline that would also end every watch.
            .with_keep_alive(Duration::from_secs(10), CALL_TIMEOUT);
        let client = bounded("connect", Client::connect(endpoints, Some(options))).await?;
        // The channel connects lazily; one cheap read proves etcd is there.
        let mut probe = client.clone();
        bounded(
            "/",
            probe.get("/", Some(GetOptions::new().with_count_only())),
        )
        .await?;
        Ok(EtcdStore {
            client,
            endpoints: endpoints.to_vec(),
            host: super::hostname(),
        })
    }

    /// Puts `value` under `lease` if `key` does not exist; else takes the node over if its
    /// holder ran on this host and its pid is gone. Returns the replaced holder, if any.
    async fn claim(
        &self,
        key: &str,
        lease: i64,
        value: &[u8],
    ) -> Result<Option<Holder>, StoreError> {
        let mut client = self.client.clone();
        let put = || TxnOp::put(key, value, Some(PutOptions::new().with_lease(lease)));
        // Two rounds: a takeover can lose a race with another claimant, then look again.
        for _ in 0..2 {
            let create = Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, 0)])
                .and_then([put()])
                .or_else([TxnOp::get(key, None)]);
            let resp = bounded(key, client.txn(create)).await?;
            if resp.succeeded() {
                return Ok(None);
            }
            let Some(current) = first_kv(resp.op_responses()) else {
                continue;
            };
            let holder = serde_json::from_slice::<Holder>(current.value()).ok();
            let Some(dead) = holder.filter(|h| h.host == self.host && !super::pid_alive(h.pid))
            else {
                return Err(StoreError::Held {
                    key: key.to_owned(),
                    holder: describe_holder(current.value()),
                });
            };
            // Only if nobody changed it since we looked.
            let take = Txn::new()
                .when([Compare::mod_revision(
                    key,
                    CompareOp::Equal,
                    current.mod_revision(),
                )])
                .and_then([put()]);
            if bounded(key, client.txn(take)).await?.succeeded() {
                if current.lease() != 0 {
                    // The dead holder's lease now holds nothing; let it go now, not at expiry.
                    let _ = bounded(key, client.lease_revoke(current.lease())).await;
                }
                return Ok(Some(dead));
            }
        }
        let current = self.get(key).await?;
        let holder = current.map_or_else(
            || "a claimant that keeps changing".to_owned(),
            |v| describe_holder(&v.value),
        );
        Err(StoreError::Held {
            key: key.to_owned(),
            holder,
        })
    }
}

#[async_trait::async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        let mut client = self.client.clone();
        let resp = bounded(key, client.get(key, None)).await?;
        Ok(resp.kvs().first().map(versioned))
    }

    async fn put(&self, key: &str, value: Bytes) -> Result<u64, StoreError> {
        let mut client = self.client.clone();
        let resp = bounded(key, client.put(key, value.to_vec(), None)).await?;
        revision(key, resp.header())
    }

    async fn put_many(&self, entries: Vec<(String, Bytes)>) -> Result<(), StoreError> {
        /// Below etcd's default `--max-txn-ops` (128).
        const PER_TXN: usize = 100;
        for part in entries.chunks(PER_TXN) {
            let ops: Vec<TxnOp> = part
                .iter()
                .map(|(k, v)| TxnOp::put(k.as_str(), v.to_vec(), None))
                .collect();
            let first = part.first().map_or("", |(k, _)| k.as_str());
            let mut client = self.client.clone();
            bounded(first, client.txn(Txn::new().and_then(ops))).await?;
        }
        Ok(())
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: Option<u64>,
        value: Bytes,
    ) -> Result<Cas, StoreError> {
        let compare = match expected {
            Some(version) => Compare::mod_revision(
                key,
                CompareOp::Equal,
                i64::try_from(version).unwrap_or(i64::MAX),
            ),
            None => Compare::create_revision(key, CompareOp::Equal, 0),
        };
        let txn = Txn::new()
            .when([compare])
            .and_then([TxnOp::put(key, value.to_vec(), None)])
            .or_else([TxnOp::get(key, None)]);
        let mut client = self.client.clone();
        let resp = bounded(key, client.txn(txn)).await?;
        if resp.succeeded() {
            return Ok(Cas::Written(revision(key, resp.header())?));
        }
        Ok(Cas::Conflict(
            first_kv(resp.op_responses()).as_ref().map(versioned),
        ))
    }

    async fn delete(&self, key: &str) -> Result<bool, StoreError> {
        let mut client = self.client.clone();
        Ok(bounded(key, client.delete(key, None)).await?.deleted() > 0)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<(String, Versioned)>, StoreError> {
        let options = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Key, SortOrder::Ascend);
        let mut client = self.client.clone();
        let resp = bounded(prefix, client.get(prefix, Some(options))).await?;
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    versioned(kv),
                )
            })
            .collect())
    }

    async fn children(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let options = GetOptions::new().with_prefix().with_keys_only();
        let mut client = self.client.clone();
        let resp = bounded(prefix, client.get(prefix, Some(options))).await?;
        let mut names: Vec<String> = resp
            .kvs()
            .iter()
            .filter_map(|kv| {
                let key = String::from_utf8_lossy(kv.key());
                let name = key.strip_prefix(prefix)?.split('/').next()?;
                (!name.is_empty()).then(|| name.to_owned())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn watch(&self, prefix: &str) -> Result<WatchStream, StoreError> {
        let mut client = self.client.clone();
        let mut watch = bounded(
            prefix,
            client.watch(prefix, Some(WatchOptions::new().with_prefix())),
        )
        .await?;
        // Events count from the created response on; waiting for it makes "from now on" exact.
        match bounded(prefix, watch.message()).await? {
            Some(resp) if resp.created() && !resp.canceled() => {}
            Some(resp) => return Err(cancelled(prefix, &resp)),
            None => {
                return Err(StoreError::Unavailable(format!(
                    "etcd closed the watch on {prefix}"
                )));
            }
        }
        let state = Watching {
            watch,
            prefix: prefix.to_owned(),
            pending: Vec::new(),
            ended: false,
        };
        Ok(Box::pin(stream::unfold(state, Watching::next)))
    }

    async fn create_ephemeral(
        &self,
        key: &str,
        holder: &Holder,
        ttl: Duration,
    ) -> Result<Ephemeral, StoreError> {
        let value = serde_json::to_vec(holder).expect("Holder serializes to JSON");
        // etcd leases count whole seconds (and etcd may raise a short TTL to its minimum).
        let ttl_secs = (ttl.as_secs_f64().ceil() as i64).max(1);
        let mut client = self.client.clone();
        let sent_at = std::time::Instant::now();
        let grant = bounded(key, client.lease_grant(ttl_secs, None)).await?;
        let lease = grant.id();
        match self.claim(key, lease, &value).await {
            Ok(took_over_from) => {
                let ttl = grant.ttl().max(1);
                let clock = LeaseClock::new(sent_at, Duration::from_secs(ttl as u64));
                let (released_tx, released) = oneshot::channel();
                let stop = spawn_keep_alive(
                    self.client.clone(),
                    key.to_owned(),
                    lease,
                    ttl,
                    clock.clone(),
                    released_tx,
                );
                // The closure is synchronous; the keep-alive task revokes the lease on stop
                // and reports it on `released` (`Ephemeral::release_confirmed` waits for it).
                let release = Box::new(move || {
                    let _ = stop.send(());
                });
                Ok(
                    Ephemeral::new(key.to_owned(), took_over_from, clock, release)
                        .confirmed_by(released),
                )
            }
            Err(e) => {
                let _ = bounded(key, client.lease_revoke(lease)).await;
                Err(e)
            }
        }
    }

    async fn ephemeral_silence(&self, key: &str) -> Result<Option<Duration>, StoreError> {
        let mut client = self.client.clone();
        let resp = bounded(key, client.get(key, None)).await?;
        let Some(lease) = resp.kvs().first().map(KeyValue::lease).filter(|&l| l != 0) else {
            return Ok(None);
        };
        let ttl = bounded(key, client.lease_time_to_live(lease, None)).await?;
        // A lease that is gone reports a TTL of -1.
        if ttl.ttl() < 0 {
            return Ok(None);
        }
        let silent = ttl.granted_ttl().saturating_sub(ttl.ttl()).max(0);
        Ok(Some(Duration::from_secs(silent as u64)))
    }

    async fn expire_ephemeral(&self, key: &str) -> Result<bool, StoreError> {
        let mut client = self.client.clone();
        let resp = bounded(key, client.get(key, None)).await?;
        let Some(kv) = resp.kvs().first() else {
            return Ok(false);
        };
        if kv.lease() == 0 {
            return Ok(bounded(key, client.delete(key, None)).await?.deleted() > 0);
        }
        // Revoking deletes every key bound to the lease, and the holder's next keep-alive
        // is answered with TTL 0 (`LeaseClock::lost`).
        bounded(key, client.lease_revoke(kv.lease())).await?;
        Ok(true)
    }

    fn describe(&self) -> String {
        let hosts: Vec<&str> = self
            .endpoints
            .iter()
            .map(|e| e.trim_start_matches("http://"))
            .collect();
        format!("etcd://{}", hosts.join(","))
    }
}

// === watch ===

/// State of a watch stream: events of the last response not yet handed out.
struct Watching {
    watch: etcd_client::WatchStream,
    prefix: String,
    /// In reverse order, so `pop` yields the oldest.
    pending: Vec<WatchEvent>,
    ended: bool,
}

impl Watching {
    async fn next(mut self) -> Option<(Result<WatchEvent, StoreError>, Watching)> {
        loop {
            if let Some(event) = self.pending.pop() {
                return Some((Ok(event), self));
            }
            if self.ended {
                return None;
            }
            let err = match self.watch.message().await {
                Ok(Some(resp)) if resp.canceled() => cancelled(&self.prefix, &resp),
                Ok(Some(resp)) => {
                    self.pending = resp.events().iter().rev().filter_map(to_event).collect();
                    continue;
                }
                Ok(None) => {
                    StoreError::Unavailable(format!("etcd closed the watch on {}", self.prefix))
                }
                Err(e) => to_store_error(&self.prefix, e),
            };
            // The consumer re-lists and watches again; an error ends the stream.
            self.ended = true;
            return Some((Err(err), self));
        }
    }
}

fn to_event(event: &etcd_client::Event) -> Option<WatchEvent> {
    let kv = event.kv()?;
    let key = String::from_utf8_lossy(kv.key()).into_owned();
    Some(match event.event_type() {
        etcd_client::EventType::Put => WatchEvent::Put {
            key,
            value: Bytes::copy_from_slice(kv.value()),
        },
        etcd_client::EventType::Delete => WatchEvent::Delete { key },
    })
}

fn cancelled(prefix: &str, resp: &WatchResponse) -> StoreError {
    StoreError::Unavailable(format!(
        "etcd cancelled the watch on {prefix} (compact_revision {}): {}",
        resp.compact_revision(),
        resp.cancel_reason()
    ))
}

// === keep-alive ===

/// Keeps `lease` alive (`renew_period`) until told to stop (then revokes it), or until etcd says
/// the lease has expired.
fn spawn_keep_alive(
    mut client: Client,
    key: String,
    lease: i64,
    ttl_secs: i64,
    clock: Arc<LeaseClock>,
    released: oneshot::Sender<Result<(), StoreError>>,
) -> oneshot::Sender<()> {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let period = super::renew_period(Duration::from_secs(ttl_secs as u64));
    tokio::spawn(async move {
        let mut keeper = None;
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                _ = tokio::time::sleep(period) => {}
            }
            let sent_at = std::time::Instant::now();
            match keep_alive_once(&mut client, &mut keeper, lease).await {
                Ok(ttl) if ttl > 0 => clock.renewed(sent_at, Duration::from_secs(ttl as u64)),
                Ok(_) => {
                    clock.lost();
                    tracing::warn!(key = %key, lease, "ephemeral node's lease expired; keep-alive stops");
                    return;
                }
                Err(e) => {
                    tracing::warn!(key = %key, lease, error = %e, "lease keep-alive failed; retrying");
                    keeper = None;
                }
            }
        }
        let revoked = bounded(&key, client.lease_revoke(lease)).await.map(|_| ());
        if let Err(e) = &revoked {
            tracing::warn!(key = %key, lease, error = %e, "revoking lease; it expires by itself");
        }
        let _ = released.send(revoked);
    });
    stop_tx
}

/// One keep-alive round trip, opening the stream if needed: the lease's new TTL in seconds
/// (0: the lease is gone).
async fn keep_alive_once(
    client: &mut Client,
    keeper: &mut Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    lease: i64,
) -> Result<i64, StoreError> {
    if keeper.is_none() {
        let opened = tokio::time::timeout(CALL_TIMEOUT, client.lease_keep_alive(lease)).await;
        *keeper = Some(match opened {
            Ok(Ok(k)) => k,
            // etcd-client opens the stream with a first keep-alive, and reports its TTL 0 (the
            // lease expired or was revoked, `expire_ephemeral`) as this error, not as a TTL.
            Ok(Err(etcd_client::Error::LeaseKeepAliveError(m))) if m == "lease not found" => {
                return Ok(0);
            }
            Ok(Err(e)) => return Err(to_store_error("lease keep-alive", e)),
            Err(_) => {
                return Err(StoreError::Unavailable(format!(
                    "etcd did not answer within {CALL_TIMEOUT:?} (lease keep-alive)"
                )));
            }
        });
    }
    let (sender, responses) = keeper.as_mut().expect("set above");
    bounded("lease keep-alive", sender.keep_alive()).await?;
    match bounded("lease keep-alive", responses.message()).await? {
        Some(resp) => Ok(resp.ttl()),
        None => Err(StoreError::Unavailable(
            "etcd closed the lease keep-alive stream".into(),
        )),
    }
}

// === helpers ===

/// Runs one etcd call with [`CALL_TIMEOUT`], mapping its error.
async fn bounded<T>(
    key: &str,
    call: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(result) => result.map_err(|e| to_store_error(key, e)),
        Err(_) => Err(StoreError::Unavailable(format!(
            "etcd did not answer within {CALL_TIMEOUT:?} ({key})"
        ))),
    }
}

/// Rejections of the request itself become `Io`; everything else means etcd is not there.
fn to_store_error(key: &str, e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    // gRPC codes (tonic is not a direct dependency): 3 InvalidArgument, 5 NotFound,
    // 6 AlreadyExists, 7 PermissionDenied, 8 ResourceExhausted, 9 FailedPrecondition,
    // 11 OutOfRange, 16 Unauthenticated.
    let rejected = match &e {
        E::GRpcStatus(status) => matches!(i32::from(status.code()), 3 | 5..=9 | 11 | 16),
        E::InvalidArgs(_) | E::Utf8Error(_) => true,
        _ => false,
    };
    if rejected {
        StoreError::Io {
            key: key.to_owned(),
            reason: e.to_string(),
        }
    } else {
        StoreError::Unavailable(format!("etcd ({key}): {e}"))
    }
}

fn versioned(kv: &KeyValue) -> Versioned {
    Versioned {
        value: Bytes::copy_from_slice(kv.value()),
        version: kv.mod_revision() as u64,
    }
}

/// The store revision a write produced, which is the written key's `mod_revision`.
fn revision(key: &str, header: Option<&ResponseHeader>) -> Result<u64, StoreError> {
    header
        .map(|h| h.revision() as u64)
        .ok_or_else(|| StoreError::Io {
            key: key.to_owned(),
            reason: "etcd reply without a header".into(),
        })
}

/// The key read by a txn's `get` branch, if it exists.
fn first_kv(responses: Vec<TxnOpResponse>) -> Option<KeyValue> {
    responses.into_iter().find_map(|r| match r {
        TxnOpResponse::Get(mut get) => get.take_kvs().into_iter().next(),
        _ => None,
    })
}
