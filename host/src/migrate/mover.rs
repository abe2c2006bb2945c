//! The background mover: scans a source master for keys of the slots being moved and moves
//! them to the target master, a batch at a time: `migrate::STAGE_BIG_KEYS_SCRIPT` (the script
//! the proxies run too) stages the keys too big for one MIGRATE, which are then copied in
//! chunks, and the others go with `MIGRATE … KEYS k1 … kn`, so neither server blocks for more
//! than a batch's or a chunk's work.
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

use bytes::Bytes;
use tracing::{debug, info};

use super::throttle::Throttle;
use super::{
    INTERNAL_DB, PUBLISH_BIG_KEY_SCRIPT, UNSTAGE_SCRIPT, marker_key, migrate_request,
    stage_big_keys_request, staging_key, temp_key,
};
use crate::redis_client::{ClientError, Credential, RedisClient, Value};
use crate::router::SlotId;

/// Tunables of the mover.
#[derive(Debug, Clone)]
pub struct MoverConfig {
    /// SCAN's COUNT.
    pub scan_count: usize,
    /// Keys per staging script call: with its type, size and memory checks a key costs the
    /// script about 5 µs here, so 300 keys hold the source about 1.5 ms (1000 held it 5–15 ms
    /// in a release build's bench).
    pub batch: usize,
    /// Keys per MIGRATE: it blocks the source for roughly 10–15 µs per small key here.
    pub migrate_batch: usize,
    /// Elements (or bytes, for strings) copied per step of a big key.
    pub chunk: usize,
    pub timeout: Duration,
}

impl Default for MoverConfig {
    fn default() -> Self {
        Self {
            scan_count: 2000,
            batch: 300,
            migrate_batch: 300,
            chunk: 500,
            timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MoverError {
    #[error("{0}")]
    Client(#[from] ClientError),
    #[error("{server} refused {what}: {reply}")]
    Refused {
        server: String,
        what: String,
        reply: String,
    },
}

/// How often a pass looks for big keys the proxies staged, so their commands wait little.
const MARKER_SCAN_EVERY: Duration = Duration::from_millis(250);

/// Keys moved per slot, shared with whoever reports progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// Per slot in flight (cleared when the slot is done).
    pub moved: Mutex<HashMap<u16, u64>>,
    /// Keys moved since the dashboard started.
    pub total: std::sync::atomic::AtomicU64,
    /// Their memory on the source (`MEMORY USAGE`), since the dashboard started.
    pub bytes: std::sync::atomic::AtomicU64,
    /// The slowest command the mover sent (milliseconds, and which), since the dashboard
    /// started: how long it may have blocked a server.
    pub slowest: Mutex<Option<(f64, String)>>,
}

impl Progress {
    /// Per-slot count only; `add_total` counts keys moved.
    fn add(&self, slot: u16, n: u64) {
        *self
            .moved
            .lock()
            .expect("progress lock poisoned")
            .entry(slot)
            .or_default() += n;
    }

    fn add_total(&self, n: u64, bytes: u64) {
        self.total
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        self.bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
    }

    fn took(&self, what: &str, since: Instant) {
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

/// One page of a SCAN-family reply: advances `cursor` and returns the page's items.
fn scan_page<'v>(
    server: &str,
    what: &str,
    reply: &'v Value,
    cursor: &mut Vec<u8>,
) -> Result<&'v [Value], MoverError> {
    if let Value::Array(parts) = reply
        && let (Some(next), Some(Value::Array(items))) =
            (parts.first().and_then(Value::as_bytes), parts.get(1))
    {
        *cursor = next.to_vec();
        return Ok(items);
    }
    Err(refused(server, what, reply))
}

fn refused(server: &str, what: &str, v: &Value) -> MoverError {
    MoverError::Refused {
        server: server.into(),
        what: what.into(),
        reply: format!("{v:?}"),
    }
}

impl Mover<'_> {
    fn wanted(&self, key: &[u8]) -> Option<u16> {
        let slot = SlotId::of_key(key).0;
        self.slots.contains(&slot).then_some(slot)
    }

    /// One full pass: when it returns `true`, no key of the slots is left on the source.
    /// `false`: stopped early (an abort turns the slots around), nothing is finished.
    ///
    /// # Errors
    /// A server unreachable or refusing a command; nothing is lost, pass again.
    pub async fn pass(&self) -> Result<bool, MoverError> {
        let mut src =
            RedisClient::connect_as(self.source, self.config.timeout, self.credential).await?;
        if self.aborting {
            self.unstage_on_target().await?;
        }
        self.resume_staged().await?;
        let mut markers_scanned = Instant::now();
        let mut cursor = b"0".to_vec();
        let count = self.config.scan_count.to_string();
        let mut found = 0u64;
        loop {
            if self.stop.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(false);
            }
            let sent = Instant::now();
            let reply = src
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", count.as_bytes()])
                .await?;
            self.progress.took("SCAN", sent);
            let keys = scan_page(self.source, "SCAN", &reply, &mut cursor)?;
            let small: Vec<(Bytes, u16)> = keys
                .iter()
                .filter_map(Value::as_bytes)
                .filter_map(|k| Some((Bytes::copy_from_slice(k), self.wanted(k)?)))
                .collect();
            for chunk in small.chunks(self.config.batch) {
                found += chunk.len() as u64;
                self.move_batch(&mut src, chunk).await?;
            }
            if markers_scanned.elapsed() >= MARKER_SCAN_EVERY {
                self.resume_staged().await?;
                markers_scanned = Instant::now();
            }
            if cursor == b"0" {
                break;
            }
        }
        // Big keys proxies staged after the last marker scan.
        self.resume_staged().await?;
        debug!(source = self.source, found, "mover pass done");
        Ok(true)
    }

    /// Copies again the big keys an interrupted pass left staged (their markers are in the
    /// internal database). Returns their slots.
    async fn resume_staged(&self) -> Result<(), MoverError> {
        for key in self.marked_keys(self.source).await? {
            let Some(slot) = self.wanted(&key) else {
                continue;
            };
            info!(key = %String::from_utf8_lossy(&key), slot, "copying a staged big key");
            let bytes = self.copy_big(&key).await?;
            self.progress.add(slot, 1);
            self.progress.add_total(1, bytes);
            self.pace(1, bytes).await;
        }
        Ok(())
    }

    /// Sleeps as long as the throttle asks after `keys` and `bytes` were moved.
    async fn pace(&self, keys: u64, bytes: u64) {
        let wait = self.throttle.charge(keys, bytes, Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
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

    /// A connection to `server`'s internal database.
    async fn internal(&self, server: &str) -> Result<RedisClient, MoverError> {
        let mut c = RedisClient::connect_as(server, self.config.timeout, self.credential).await?;
        let db = INTERNAL_DB.to_string();
        expect_ok(&mut c, server, &[b"SELECT", db.as_bytes()]).await?;
        Ok(c)
    }

    /// Moves a batch of keys: big keys are staged (one script) and copied in chunks, the
    /// others go with `MIGRATE … REPLACE KEYS` in groups of `migrate_batch`, short enough to
    /// block the source only a few milliseconds. REPLACE is safe: past the barrier nothing
    /// writes to the source, so a copy on the target is the same value left by a MIGRATE that
    /// failed half way; a key a proxy moved already is gone from the source and skipped.
    async fn move_batch(
        &self,
        src: &mut RedisClient,
        keys: &[(Bytes, u16)],
    ) -> Result<(), MoverError> {
        let names: Vec<&[u8]> = keys.iter().map(|(k, _)| &k[..]).collect();
        let sent = Instant::now();
        let reply = src.encoded(&stage_big_keys_request(&names)).await?;
        self.progress.took("EVAL (staging big keys)", sent);
        // `{markers, bytes, staged…}` (migrate::STAGE_BIG_KEYS_SCRIPT).
        let parts = match &reply {
            Value::Array(p) if p.len() >= 2 => p,
            _ => return Err(refused(self.source, "staging big keys", &reply)),
        };
        let measured = parts[1].as_int().unwrap_or(0).max(0) as u64;
        let staged: Vec<Bytes> = parts[2..]
            .iter()
            .filter_map(|v| v.as_bytes().map(Bytes::copy_from_slice))
            .collect();
        for (key, slot) in keys.iter().filter(|(k, _)| staged.contains(k)) {
            let bytes = self.copy_big(key).await?;
            self.progress.add(*slot, 1);
            self.progress.add_total(1, bytes);
            self.pace(1, bytes).await;
        }
        let rest: Vec<&(Bytes, u16)> = keys.iter().filter(|(k, _)| !staged.contains(k)).collect();
        let timeout = self.config.timeout.as_millis() as u64;
        let per_key = measured / rest.len().max(1) as u64;
        for group in rest.chunks(self.config.migrate_batch.max(1)) {
            let names: Vec<&[u8]> = group.iter().map(|(k, _)| &k[..]).collect();
            let req = migrate_request(self.target, timeout, self.credential, &names);
            let sent = Instant::now();
            match src.encoded(&req).await? {
                Value::Ok(s) if s == "OK" || s == "NOKEY" => {}
                other => return Err(refused(self.source, "MIGRATE", &other)),
            }
            self.progress
                .took(&format!("MIGRATE of {} keys", group.len()), sent);
            for (_, slot) in group {
                self.progress.add(*slot, 1);
            }
            let (n, bytes) = (group.len() as u64, per_key * group.len() as u64);
            self.progress.add_total(n, bytes);
            self.pace(n, bytes).await;
        }
        Ok(())
    }

    /// For an abort going back: big keys the forward move had staged on this mover's target
    /// (its source then) are renamed back in place, and their partial copies here dropped.
    async fn unstage_on_target(&self) -> Result<(), MoverError> {
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
    /// database) to a temp key in the target's internal database, then puts it in place.
    /// Returns its memory on the source.
    async fn copy_big(&self, key: &[u8]) -> Result<u64, MoverError> {
        let (staging, marker, temp) = (staging_key(key), marker_key(key), temp_key(key));
        let mut src = self.internal(self.source).await?;
        let src = &mut src;
        let mut dst = self.internal(self.target).await?;
        dst.cmd(&[&b"UNLINK"[..], &temp]).await?;
        let kind = src.cmd(&[&b"TYPE"[..], &staging]).await?;
        let bytes = src
            .cmd(&[&b"MEMORY"[..], b"USAGE", &staging])
            .await?
            .as_int()
            .unwrap_or(0)
            .max(0) as u64;
        let kind = kind.as_bytes().unwrap_or_default().to_vec();
        let chunk = self.config.chunk.to_string();
        match &kind[..] {
            b"hash" | b"set" | b"zset" => {
                let (scan, add): (&[u8], &[u8]) = match &kind[..] {
                    b"hash" => (b"HSCAN", b"HSET"),
                    b"set" => (b"SSCAN", b"SADD"),
                    _ => (b"ZSCAN", b"ZADD"),
                };
                let mut cursor = b"0".to_vec();
                loop {
                    let r = src
                        .cmd(&[scan, &staging, &cursor, b"COUNT", chunk.as_bytes()])
                        .await?;
                    let items = scan_page(self.source, "chunk scan", &r, &mut cursor)?;
                    let mut items: Vec<&[u8]> = items.iter().filter_map(Value::as_bytes).collect();
                    if kind == b"zset" {
                        // ZSCAN gives member, score; ZADD wants score, member.
                        for pair in items.chunks_mut(2) {
                            pair.swap(0, 1);
                        }
                    }
                    if !items.is_empty() {
                        let mut args = vec![add, &temp[..]];
                        args.extend(items);
                        expect_ok(&mut dst, self.target, &args).await?;
                    }
                    if cursor == b"0" {
                        break;
                    }
                }
            }
            b"list" => {
                let step = self.config.chunk as i64;
                let mut at = 0i64;
                loop {
                    let (a, b) = (at.to_string(), (at + step - 1).to_string());
                    let r = src
                        .cmd(&[&b"LRANGE"[..], &staging, a.as_bytes(), b.as_bytes()])
                        .await?;
                    let Value::Array(items) = &r else {
                        return Err(refused(self.source, "LRANGE", &r));
                    };
                    if items.is_empty() {
                        break;
                    }
                    let mut args: Vec<&[u8]> = vec![b"RPUSH", &temp];
                    args.extend(items.iter().filter_map(Value::as_bytes));
                    expect_ok(&mut dst, self.target, &args).await?;
                    at += step;
                }
            }
            b"string" => {
                let step = (self.config.chunk * 1024) as i64;
                let mut at = 0i64;
                loop {
                    let (a, b) = (at.to_string(), (at + step - 1).to_string());
                    let r = src
                        .cmd(&[&b"GETRANGE"[..], &staging, a.as_bytes(), b.as_bytes()])
                        .await?;
                    let Some(part) = r.as_bytes() else {
                        return Err(refused(self.source, "GETRANGE", &r));
                    };
                    if part.is_empty() {
                        break;
                    }
                    expect_ok(&mut dst, self.target, &[b"APPEND", &temp, part]).await?;
                    at += step;
                }
            }
            b"none" => {
                // Staging vanished (an earlier run finished): only the marker is left.
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
        }
        let ttl = src
            .cmd(&[&b"GET"[..], &marker])
            .await?
            .as_int()
            .unwrap_or(-1);
        if ttl > 0 {
            expect_ok(
                &mut dst,
                self.target,
                &[b"PEXPIRE", &temp, ttl.to_string().as_bytes()],
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
        expect_ok(&mut dst, self.target, &publish).await?;
        // Only now is the key complete on the target: release the waiting proxies.
        src.cmd(&[&b"UNLINK"[..], &staging, &marker]).await?;
        info!(key = %String::from_utf8_lossy(key), "big key copied in chunks");
        Ok(bytes)
    }
}

async fn expect_ok(c: &mut RedisClient, server: &str, args: &[&[u8]]) -> Result<(), MoverError> {
    match c.cmd(args).await? {
        Value::Error(e) => Err(MoverError::Refused {
            server: server.into(),
            what: String::from_utf8_lossy(args[0]).into_owned(),
            reply: e,
        }),
        _ => Ok(()),
    }
}
