//! The background mover: scans a source master for keys of the slots being moved and copies
//! them to the target master, a batch at a time, in three stages that run at once:
//!
//! 1. **scan**: SCAN the source, keep keys of the moving slots, cut them into batches;
//! 2. **claim** (`migrate::CLAIM_SCRIPT`, one script call per batch on the source): big keys
//!    are staged (then copied in chunks, `copy_big`); each other key is moved under its own
//!    name into the internal database (in transit: proxies that touch it wait) and DUMPed
//!    with its absolute expire time;
//! 3. **restore**: the batch's `RESTORE … REPLACE ABSTTL` pipelined to the target, then one
//!    `UNLINK` of the batch in the source's internal database, which releases the waiting
//!    proxies.
//!
//! The source serializes while the target deserializes (the two run on different cores),
//! and neither server blocks longer than one script call or one RESTORE: unlike MIGRATE,
//! which holds the source until the target has restored. A key is on the source, in transit,
//! or on the target, never in two places that a client can reach. A pass stopped for an
//! abort finishes the batches it claimed; a mover that died leaves claimed keys in transit,
//! which the next pass restores first (or an abort going back puts back in place).
//!
//! One full SCAN of the source is enough: a pass starts only once every proxy routes the
//! slots to the target, so no key of them is created on the source after it starts, and SCAN
//! returns every key present from its start to its end. A key a proxy staged meanwhile (it
//! touched it before the scan got there) is found by the marker scans, run every
//! `MARKER_SCAN_EVERY` and once more at the end. Passes are idempotent, so a dashboard that
//! dies half way simply passes again (and a big key found staged is copied again from its
//! staging key).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tracing::{debug, info};

use super::chunks::Chunks;
pub use super::reply::MoverError;
use super::reply::{expect_ok, refused, scan_page};
use super::throttle::Throttle;
use tessera_model::migration::{
    DUMP_TRANSIT_SCRIPT, INTERNAL_DB, PUBLISH_BIG_KEY_SCRIPT, UNCLAIM_SCRIPT, UNSTAGE_SCRIPT,
    claim_request, is_internal, marker_key, staging_key, temp_key,
};
use tessera_model::redis_client::{Credential, RedisClient, Value};
use tessera_model::router::SlotId;

/// Tunables of the mover.
#[derive(Debug, Clone)]
pub struct MoverConfig {
    /// SCAN's COUNT.
    pub scan_count: usize,
    /// Keys per claim (one script call on the source: type and size checks, a MOVE and a
    /// DUMP per key) and per pipeline of RESTOREs on the target.
    pub batch: usize,
    /// Elements (or bytes, for strings) copied per step of a big key.
    pub chunk: usize,
    pub timeout: Duration,
}

impl Default for MoverConfig {
    fn default() -> Self {
        Self {
            scan_count: 1000,
            batch: 200,
            chunk: 500,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Claimed batches waiting for their RESTORE: keys in transit are at most this many batches
/// (plus the one being restored and the one being claimed), so proxies wait little.
const CLAIMED_AHEAD: usize = 1;

/// How often a pass looks for big keys the proxies staged, so their commands wait little.
const MARKER_SCAN_EVERY: Duration = Duration::from_millis(250);

/// Keys moved per slot, shared with whoever reports progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// Per slot in flight (cleared when the slot is done).
    pub moved: Mutex<HashMap<u16, u64>>,
    /// Keys moved since the dashboard started.
    pub total: std::sync::atomic::AtomicU64,
    /// Their size: the DUMP payloads of small keys, the source's `MEMORY USAGE` of big ones.
    pub bytes: std::sync::atomic::AtomicU64,
    /// The slowest command the mover sent (milliseconds, and which), since the dashboard
    /// started: how long it may have blocked a server.
    pub slowest: Mutex<Option<(f64, String)>>,
}

impl Progress {
    /// Per-slot counts only; `add_total` counts keys moved.
    pub(crate) fn add_slots(&self, slots: impl Iterator<Item = u16>) {
        let mut moved = self.moved.lock().expect("progress lock poisoned");
        for slot in slots {
            *moved.entry(slot).or_default() += 1;
        }
    }

    pub(crate) fn add_total(&self, n: u64, bytes: u64) {
        self.total
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        self.bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    /// Forgets the per-slot counts of `slots` (their copy is over).
    pub(crate) fn forget(&self, slots: &BTreeSet<u16>) {
        let mut moved = self.moved.lock().expect("progress lock poisoned");
        for s in slots {
            moved.remove(s);
        }
    }

    pub(crate) fn took(&self, what: &str, since: Instant) {
        let ms = since.elapsed().as_secs_f64() * 1000.0;
        let mut s = self.slowest.lock().expect("progress lock poisoned");
        if s.as_ref().is_none_or(|(worst, _)| ms > *worst) {
            *s = Some((ms, what.to_string()));
        }
    }
}

/// Moves keys of `slots` from `source` to `target`.
pub struct Mover<'a> {
    pub source: &'a str,
    pub target: &'a str,
    pub slots: &'a BTreeSet<u16>,
    pub config: &'a MoverConfig,
    pub progress: &'a Progress,
    /// The move is an abort going back: big keys the forward move staged on this mover's
    /// target (the forward source) are put back in place first.
    pub aborting: bool,
    /// Set when the pass should stop at the next batch (an abort turns these slots around).
    pub stop: &'a std::sync::atomic::AtomicBool,
    /// The user the mover authenticates as on both servers, and that MIGRATE presents to the
    /// target (`AUTH2`): the control plane's, which keeps every right.
    pub credential: Option<&'a Credential>,
    /// The migration's speed cap, shared by every pass.
    pub throttle: &'a Throttle,
}

/// A key claimed on the source (in transit in its internal database), with its dump.
struct Transit {
    key: Bytes,
    slot: u16,
    payload: Bytes,
    /// Absolute expire time in ms (`PEXPIRETIME`), -1 for none.
    expire_at: i64,
}

/// Parses `{key, payload, expire-at, …}` (from [`CLAIM_SCRIPT`] past its two lists, or
/// [`DUMP_TRANSIT_SCRIPT`]).
fn transits(server: &str, items: &[Value]) -> Result<Vec<Transit>, MoverError> {
    items
        .chunks(3)
        .map(|t| match t {
            [
                Value::Bulk(key),
                Value::Bulk(payload),
                Value::Int(expire_at),
            ] => Ok(Transit {
                slot: SlotId::of_key(key).0,
                key: key.clone(),
                payload: payload.clone(),
                expire_at: *expire_at,
            }),
            other => Err(MoverError::Refused {
                server: server.into(),
                what: "claiming keys".into(),
                reply: format!("{other:?}"),
            }),
        })
        .collect()
}

/// The keys of a reply's list, as bytes.
fn key_list(v: &Value) -> Vec<Bytes> {
    match v {
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_bytes)
            .map(Bytes::copy_from_slice)
            .collect(),
        _ => Vec::new(),
    }
}

impl Mover<'_> {
    fn wanted(&self, key: &[u8]) -> Option<u16> {
        let slot = SlotId::of_key(key).0;
        self.slots.contains(&slot).then_some(slot)
    }

    fn stopped(&self) -> bool {
        self.stop.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// One full pass: when it returns `true`, no key of the slots is left on the source.
    /// `false`: stopped early (an abort turns the slots around), nothing is finished; the
    /// batches already claimed are on the target.
    ///
    /// # Errors
    /// A server unreachable or refusing a command; nothing is lost (keys claimed and not yet
    /// restored stay in transit on the source, where the next pass finds them): pass again.
    pub async fn pass(&self) -> Result<bool, MoverError> {
        if self.aborting {
            self.unstage_on_target().await?;
        }
        self.resume_transit().await?;
        self.resume_staged().await?;
        let (batches_tx, batches_rx) = mpsc::channel(1);
        let (claimed_tx, claimed_rx) = mpsc::channel(CLAIMED_AHEAD);
        // Each stage ends when its input ends or its output is dropped, so one failing
        // stage ends the others; the restore stage finishes whatever was claimed.
        let (scanned, claimed, restored) = tokio::join!(
            self.scan(batches_tx),
            self.claim(batches_rx, claimed_tx),
            self.restore(claimed_rx),
        );
        restored?;
        claimed?;
        if !scanned? {
            return Ok(false);
        }
        // Big keys proxies staged after the last marker scan.
        self.resume_staged().await?;
        Ok(true)
    }

    /// Stage 1: SCANs the source and sends batches of keys of the moving slots. `false`
    /// when stopped (an abort) before the end.
    async fn scan(&self, out: mpsc::Sender<Vec<(Bytes, u16)>>) -> Result<bool, MoverError> {
        let mut src =
            RedisClient::connect_as(self.source, self.config.timeout, self.credential).await?;
        let mut cursor = b"0".to_vec();
        let count = self.config.scan_count.to_string();
        let mut found = 0u64;
        let mut pending: Vec<(Bytes, u16)> = Vec::new();
        loop {
            if self.stopped() {
                return Ok(false);
            }
            let sent = Instant::now();
            let reply = src
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", count.as_bytes()])
                .await?;
            self.progress.took("SCAN", sent);
            let keys = scan_page(self.source, "SCAN", &reply, &mut cursor)?;
            pending.extend(
                keys.iter()
                    .filter_map(Value::as_bytes)
                    .filter_map(|k| Some((Bytes::copy_from_slice(k), self.wanted(k)?))),
            );
            let done = cursor == b"0";
            while pending.len() >= self.config.batch || (done && !pending.is_empty()) {
                let rest = pending.split_off(self.config.batch.min(pending.len()));
                let batch = std::mem::replace(&mut pending, rest);
                found += batch.len() as u64;
                if out.send(batch).await.is_err() {
                    return Ok(false); // a later stage failed; its error is the one reported
                }
            }
            if done {
                debug!(source = self.source, found, "mover scan done");
                return Ok(true);
            }
        }
    }

    /// Stage 2: claims each batch on the source (`CLAIM_SCRIPT`): big keys are staged and
    /// copied in chunks here, the others sent on in transit with their dumps.
    async fn claim(
        &self,
        mut batches: mpsc::Receiver<Vec<(Bytes, u16)>>,
        out: mpsc::Sender<Vec<Transit>>,
    ) -> Result<(), MoverError> {
        let mut src =
            RedisClient::connect_as(self.source, self.config.timeout, self.credential).await?;
        let mut markers_scanned = Instant::now();
        while let Some(batch) = batches.recv().await {
            if self.stopped() {
                return Ok(());
            }
            let names: Vec<&[u8]> = batch.iter().map(|(k, _)| &k[..]).collect();
            let sent = Instant::now();
            let reply = src.encoded(&claim_request(&names)).await?;
            self.progress
                .took(&format!("EVAL (claim of {} keys)", names.len()), sent);
            // `{{staged…}, {conflicts…}, key, payload, expire-at, …}` (CLAIM_SCRIPT).
            let Value::Array(parts) = &reply else {
                return Err(refused(self.source, "claiming keys", &reply));
            };
            let (Some(staged), Some(conflicts)) = (parts.first(), parts.get(1)) else {
                return Err(refused(self.source, "claiming keys", &reply));
            };
            let claimed = transits(self.source, &parts[2..])?;
            if !claimed.is_empty() && out.send(claimed).await.is_err() {
                // The restore stage failed: these stay in transit for the next pass.
                return Ok(());
            }
            if let Some(k) = key_list(conflicts).first() {
                return Err(MoverError::Refused {
                    server: self.source.into(),
                    what: "claiming keys".into(),
                    reply: format!(
                        "{} is both in database 0 and in transit in database {INTERNAL_DB}; \
                         an earlier copy was interrupted in a way the mover cannot settle alone",
                        String::from_utf8_lossy(k)
                    ),
                });
            }
            for key in key_list(staged) {
                let bytes = self.copy_big(&key).await?;
                self.progress
                    .add_slots(std::iter::once(SlotId::of_key(&key).0));
                self.progress.add_total(1, bytes);
                // Its bytes were charged chunk by chunk.
                self.throttle.pace(1, 0).await;
            }
            if markers_scanned.elapsed() >= MARKER_SCAN_EVERY {
                self.resume_staged().await?;
                markers_scanned = Instant::now();
            }
        }
        Ok(())
    }

    /// Stage 3: restores each claimed batch on the target, then releases it on the source.
    async fn restore(&self, mut claimed: mpsc::Receiver<Vec<Transit>>) -> Result<(), MoverError> {
        let mut dst =
            RedisClient::connect_as(self.target, self.config.timeout, self.credential).await?;
        let mut src = self.internal(self.source).await?;
        while let Some(batch) = claimed.recv().await {
            self.restore_batch(&mut dst, &mut src, &batch).await?;
        }
        Ok(())
    }

    /// `RESTORE key ttl payload REPLACE ABSTTL` of each key, pipelined to the target, then one
    /// `UNLINK` of them in the source's internal database (`src`). REPLACE: while a key is in
    /// transit no proxy writes it on the target, so a copy found there is this batch's own,
    /// restored by a pass that stopped before its UNLINK. An expire time already past makes
    /// RESTORE store nothing: a key that expired in transit ends deleted.
    async fn restore_batch(
        &self,
        dst: &mut RedisClient,
        src: &mut RedisClient,
        batch: &[Transit],
    ) -> Result<(), MoverError> {
        let mut req = BytesMut::new();
        let mut bytes = 0u64;
        for t in batch {
            let ttl = t.expire_at.max(0).to_string();
            let args: [&[u8]; 6] = [
                b"RESTORE",
                &t.key,
                ttl.as_bytes(),
                &t.payload,
                b"REPLACE",
                b"ABSTTL",
            ];
            let size = args.iter().map(|a| a.len()).sum();
            req.extend_from_slice(&tessera_resp::encode_request(
                args.len(),
                args.iter().copied(),
                size,
            ));
            bytes += t.payload.len() as u64;
        }
        let replies = dst.encoded_many(&req, batch.len()).await?;
        if let Some((t, e)) = batch
            .iter()
            .zip(&replies)
            .find(|(_, r)| !matches!(r, Value::Ok(_)))
        {
            return Err(MoverError::Refused {
                server: self.target.into(),
                what: format!("RESTORE of {}", String::from_utf8_lossy(&t.key)),
                reply: format!("{e:?}"),
            });
        }
        let mut unlink: Vec<&[u8]> = vec![b"UNLINK"];
        unlink.extend(batch.iter().map(|t| &t.key[..]));
        let sent = Instant::now();
        src.cmd(&unlink).await?;
        self.progress
            .took(&format!("UNLINK of {} keys in transit", batch.len()), sent);
        self.progress.add_slots(batch.iter().map(|t| t.slot));
        let n = batch.len() as u64;
        self.progress.add_total(n, bytes);
        self.throttle.pace(n, bytes).await;
        Ok(())
    }

    /// Restores the keys a stopped pass left in transit on the source (claimed, not yet
    /// released), before anything else: proxies wait on them.
    async fn resume_transit(&self) -> Result<(), MoverError> {
        let mut src = self.internal(self.source).await?;
        let left = self.transit_keys(&mut src, self.source).await?;
        if left.is_empty() {
            return Ok(());
        }
        info!(
            source = self.source,
            keys = left.len(),
            "restoring keys left in transit"
        );
        let mut dst =
            RedisClient::connect_as(self.target, self.config.timeout, self.credential).await?;
        let mut release = self.internal(self.source).await?;
        for chunk in left.chunks(self.config.batch.max(1)) {
            let reply = src
                .encoded(&keys_script_request(DUMP_TRANSIT_SCRIPT, chunk, &[]))
                .await?;
            let Value::Array(items) = &reply else {
                return Err(refused(self.source, "dumping keys in transit", &reply));
            };
            let batch = transits(self.source, items)?;
            self.restore_batch(&mut dst, &mut release, &batch).await?;
        }
        Ok(())
    }

    /// The keys of the moving slots in transit on `server` (`c`: its internal database).
    async fn transit_keys(
        &self,
        c: &mut RedisClient,
        server: &str,
    ) -> Result<Vec<Bytes>, MoverError> {
        let mut cursor = b"0".to_vec();
        let mut out = Vec::new();
        loop {
            let reply = c.cmd(&[&b"SCAN"[..], &cursor, b"COUNT", b"1000"]).await?;
            let keys = scan_page(server, "SCAN", &reply, &mut cursor)?;
            out.extend(
                keys.iter()
                    .filter_map(Value::as_bytes)
                    .filter(|k| !is_internal(k) && self.wanted(k).is_some())
                    .map(Bytes::copy_from_slice),
            );
            if cursor == b"0" {
                return Ok(out);
            }
        }
    }

    /// Copies again the big keys an interrupted pass left staged (their markers are in the
    /// internal database).
    async fn resume_staged(&self) -> Result<(), MoverError> {
        for key in self.marked_keys(self.source).await? {
            let Some(slot) = self.wanted(&key) else {
                continue;
            };
            info!(key = %String::from_utf8_lossy(&key), slot, "copying a staged big key");
            let bytes = self.copy_big(&key).await?;
            self.progress.add_slots(std::iter::once(slot));
            self.progress.add_total(1, bytes);
            self.throttle.pace(1, 0).await;
        }
        Ok(())
    }

    /// The keys with a marker on `server`: staged there, being copied.
    async fn marked_keys(&self, server: &str) -> Result<Vec<Bytes>, MoverError> {
        let mut c = self.internal(server).await?;
        let mut cursor = b"0".to_vec();
        let mut out = Vec::new();
        loop {
            let reply = c
                .cmd(&[
                    &b"SCAN"[..],
                    &cursor,
                    b"MATCH",
                    b"__tessera:marker:*",
                    b"COUNT",
                    b"2000",
                ])
                .await?;
            let keys = scan_page(server, "SCAN", &reply, &mut cursor)?;
            out.extend(
                keys.iter()
                    .filter_map(Value::as_bytes)
                    .filter_map(|m| m.strip_prefix(&b"__tessera:marker:"[..]))
                    .map(Bytes::copy_from_slice),
            );
            if cursor == b"0" {
                return Ok(out);
            }
        }
    }

    fn chunks(&self) -> Chunks<'_> {
        Chunks {
            source: self.source,
            target: self.target,
            chunk: self.config.chunk,
            throttle: self.throttle,
        }
    }

    /// A connection to `server`'s internal database.
    async fn internal(&self, server: &str) -> Result<RedisClient, MoverError> {
        let mut c = RedisClient::connect_as(server, self.config.timeout, self.credential).await?;
        let db = INTERNAL_DB.to_string();
        expect_ok(&mut c, server, &[b"SELECT", db.as_bytes()]).await?;
        Ok(c)
    }

    /// For an abort going back: on this mover's target (the forward move's source), keys
    /// the forward move left in transit go back into database 0, and big keys it had staged
    /// are renamed back in place (their partial copies here dropped). Proxies of an
    /// aborting slot wait on both meanwhile.
    async fn unstage_on_target(&self) -> Result<(), MoverError> {
        let mut dst = self.internal(self.target).await?;
        let left = self.transit_keys(&mut dst, self.target).await?;
        for chunk in left.chunks(self.config.batch.max(1)) {
            let reply = dst
                .encoded(&keys_script_request(UNCLAIM_SCRIPT, chunk, &[]))
                .await?;
            info!(keys = chunk.len(), back = ?reply, "abort: keys left in transit are back in place");
        }
        let mut dst =
            RedisClient::connect_as(self.target, self.config.timeout, self.credential).await?;
        let mut src = self.internal(self.source).await?;
        let db = INTERNAL_DB.to_string();
        for key in self.marked_keys(self.target).await? {
            if !self.slots.contains(&SlotId::of_key(&key).0) {
                continue;
            }
            let (staging, marker, temp) = (staging_key(&key), marker_key(&key), temp_key(&key));
            let args: [&[u8]; 7] = [
                b"EVAL",
                UNSTAGE_SCRIPT.as_bytes(),
                b"3",
                &key,
                &staging,
                &marker,
                db.as_bytes(),
            ];
            expect_ok(&mut dst, self.target, &args).await?;
            src.cmd(&[&b"UNLINK"[..], &temp]).await?;
            info!(key = %String::from_utf8_lossy(&key), "abort: a staged big key is back in place");
        }
        Ok(())
    }

    /// Copies a staged big key (renamed to its staging key, marker set, both in the internal
    /// database) to a temp key in the target's internal database, then puts it in place with
    /// the expire time the marker holds. Each chunk is charged to the throttle as it is
    /// sent (a big key is not one step of the cap: at 1 MB/s a 500 MB key would otherwise
    /// go at full speed, then owe minutes). Returns the bytes copied.
    async fn copy_big(&self, key: &[u8]) -> Result<u64, MoverError> {
        let (staging, marker, temp) = (staging_key(key), marker_key(key), temp_key(key));
        let mut src = self.internal(self.source).await?;
        let src = &mut src;
        let mut dst = self.internal(self.target).await?;
        dst.cmd(&[&b"UNLINK"[..], &temp]).await?;
        let kind = src.cmd(&[&b"TYPE"[..], &staging]).await?;
        let kind = kind.as_bytes().unwrap_or_default().to_vec();
        let bytes = match &kind[..] {
            b"hash" | b"set" | b"zset" | b"list" | b"string" | b"stream" => {
                self.chunks()
                    .copy(src, &mut dst, &kind, &staging, &temp)
                    .await?
            }
            b"none" => {
                // Staging vanished (an earlier run finished, or it expired): only the marker
                // is left.
                src.cmd(&[&b"UNLINK"[..], &marker]).await?;
                return Ok(0);
            }
            other => {
                return Err(MoverError::Refused {
                    server: self.source.into(),
                    what: "copying a big key".into(),
                    reply: format!(
                        "type {} has no chunked copy",
                        String::from_utf8_lossy(other)
                    ),
                });
            }
        };
        // The marker holds the absolute expire time in ms (-1: none); a small positive
        // number is a relative TTL left by a marker of an older Tessera.
        let at = src
            .cmd(&[&b"GET"[..], &marker])
            .await?
            .as_int()
            .unwrap_or(-1);
        if at > 0 {
            let set: &[u8] = if at < 1_000_000_000_000 {
                b"PEXPIRE"
            } else {
                b"PEXPIREAT"
            };
            expect_ok(
                &mut dst,
                self.target,
                &[set, &temp, at.to_string().as_bytes()],
            )
            .await?;
        }
        let db = INTERNAL_DB.to_string();
        let publish: [&[u8]; 6] = [
            b"EVAL",
            PUBLISH_BIG_KEY_SCRIPT.as_bytes(),
            b"2",
            &temp,
            key,
            db.as_bytes(),
        ];
        let published = dst.cmd(&publish).await?;
        match published {
            Value::Int(1) => {}
            Value::Int(0) if at > 0 => {
                info!(key = %String::from_utf8_lossy(key), "a big key expired while it was copied");
            }
            other => return Err(refused(self.target, "putting a big key in place", &other)),
        }
        // Only now is the key complete on the target: release the waiting proxies.
        src.cmd(&[&b"UNLINK"[..], &staging, &marker]).await?;
        info!(key = %String::from_utf8_lossy(key), "big key copied in chunks");
        Ok(bytes)
    }
}

/// `EVAL script n keys… args…`.
fn keys_script_request(script: &str, keys: &[Bytes], args: &[&[u8]]) -> Bytes {
    let n = keys.len().to_string();
    let mut all: Vec<&[u8]> = vec![b"EVAL", script.as_bytes(), n.as_bytes()];
    all.extend(keys.iter().map(|k| &k[..]));
    all.extend(args);
    let size = all.iter().map(|a| a.len()).sum();
    tessera_resp::encode_request(all.len(), all.iter().copied(), size)
}
