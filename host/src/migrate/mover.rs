//! The background mover: scans a source master for keys of the slots being moved and moves
//! them to the target master, a batch at a time with `migrate::MOVE_KEYS_SCRIPT` (the same
//! script the proxies run): small keys go with one `MIGRATE … KEYS k1 … kn`, a key too big
//! for one MIGRATE is staged and then copied in chunks, so neither server blocks for more
//! than a batch's or a chunk's work.
//!
//! One `pass` is a full SCAN of the source; a slot is finished when a full pass finds none of
//! its keys. Passes are idempotent, so a dashboard that dies half way simply passes again
//! (and a big key found staged is copied again from its staging key).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use tracing::{debug, info};

use super::{
    INTERNAL_DB, PUBLISH_BIG_KEY_SCRIPT, UNSTAGE_SCRIPT, marker_key, stage_big_keys_request,
    staging_key, temp_key,
};
use crate::redis_client::{ClientError, Credential, RedisClient, Value};
use crate::router::SlotId;

/// Tunables of the mover.
#[derive(Debug, Clone)]
pub struct MoverConfig {
    /// SCAN's COUNT.
    pub scan_count: usize,
    /// Keys per staging script call.
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
            batch: 1000,
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

/// Keys moved per slot, shared with whoever reports progress.
#[derive(Debug, Default)]
pub struct Progress {
    /// Per slot in flight (cleared when the slot is done).
    pub moved: Mutex<HashMap<u16, u64>>,
    /// Since the dashboard started.
    pub total: std::sync::atomic::AtomicU64,
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

    fn add_total(&self, n: u64) {
        self.total
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
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

    /// One full pass. Returns the slots of which keys were found (and moved).
    ///
    /// # Errors
    /// A server unreachable or refusing a command; nothing is lost, pass again.
    pub async fn pass(&self) -> Result<BTreeSet<u16>, MoverError> {
        let mut src =
            RedisClient::connect_as(self.source, self.config.timeout, self.credential).await?;
        if self.aborting {
            self.unstage_on_target().await?;
        }
        let mut found = self.resume_staged().await?;
        let mut cursor = b"0".to_vec();
        let count = self.config.scan_count.to_string();
        loop {
            if self.stop.load(std::sync::atomic::Ordering::SeqCst) {
                // Stopped early: report every slot as found, so none is taken for finished.
                return Ok(self.slots.clone());
            }
            let reply = src
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", count.as_bytes()])
                .await?;
            let keys = scan_page(self.source, "SCAN", &reply, &mut cursor)?;
            let small: Vec<(Bytes, u16)> = keys
                .iter()
                .filter_map(Value::as_bytes)
                .filter_map(|k| Some((Bytes::copy_from_slice(k), self.wanted(k)?)))
                .collect();
            for chunk in small.chunks(self.config.batch) {
                for (_, slot) in chunk {
                    found.insert(*slot);
                }
                let moved = self.move_batch(&mut src, chunk).await?;
                self.progress.add_total(moved);
            }
            if cursor == b"0" {
                break;
            }
        }
        debug!(source = self.source, found = found.len(), "mover pass done");
        Ok(found)
    }

    /// Copies again the big keys an interrupted pass left staged (their markers are in the
    /// internal database). Returns their slots.
    async fn resume_staged(&self) -> Result<BTreeSet<u16>, MoverError> {
        let mut found = BTreeSet::new();
        for key in self.marked_keys(self.source).await? {
            let Some(slot) = self.wanted(&key) else {
                continue;
            };
            info!(key = %String::from_utf8_lossy(&key), slot, "resuming the copy of a staged big key");
            self.copy_big(&key).await?;
            self.progress.add(slot, 1);
            self.progress.add_total(1);
            found.insert(slot);
        }
        Ok(found)
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
    /// Returns how many keys were moved.
    async fn move_batch(
        &self,
        src: &mut RedisClient,
        keys: &[(Bytes, u16)],
    ) -> Result<u64, MoverError> {
        let names: Vec<&[u8]> = keys.iter().map(|(k, _)| &k[..]).collect();
        let staged = src.encoded(&stage_big_keys_request(&names)).await?;
        let Value::Array(parts) = &staged else {
            return Err(refused(self.source, "staging big keys", &staged));
        };
        let staged: Vec<Bytes> = parts
            .iter()
            .skip(2)
            .filter_map(|v| v.as_bytes().map(Bytes::copy_from_slice))
            .collect();
        let mut moved = 0;
        for (key, slot) in keys.iter().filter(|(k, _)| staged.contains(k)) {
            self.copy_big(key).await?;
            self.progress.add(*slot, 1);
            moved += 1;
        }
        let rest: Vec<&(Bytes, u16)> = keys.iter().filter(|(k, _)| !staged.contains(k)).collect();
        let (host, port) = self
            .target
            .rsplit_once(':')
            .unwrap_or((self.target, "6379"));
        let timeout = self.config.timeout.as_millis().to_string();
        for group in rest.chunks(self.config.migrate_batch.max(1)) {
            let mut args: Vec<&[u8]> = vec![
                b"MIGRATE",
                host.as_bytes(),
                port.as_bytes(),
                b"",
                b"0",
                timeout.as_bytes(),
                b"REPLACE",
            ];
            if let Some(c) = self.credential {
                // Redis leaves AUTH2's arguments out of SLOWLOG and MONITOR.
                args.extend([&b"AUTH2"[..], c.user.as_bytes(), c.password.as_bytes()]);
            }
            args.push(b"KEYS");
            args.extend(group.iter().map(|(k, _)| &k[..]));
            match src.cmd(&args).await? {
                Value::Ok(s) if s == "OK" || s == "NOKEY" => {}
                other => return Err(refused(self.source, "MIGRATE", &other)),
            }
            for (_, slot) in group {
                self.progress.add(*slot, 1);
            }
            moved += group.len() as u64;
        }
        Ok(moved)
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
    async fn copy_big(&self, key: &[u8]) -> Result<(), MoverError> {
        let (staging, marker, temp) = (staging_key(key), marker_key(key), temp_key(key));
        let mut src = self.internal(self.source).await?;
        let src = &mut src;
        let mut dst = self.internal(self.target).await?;
        dst.cmd(&[&b"UNLINK"[..], &temp]).await?;
        let kind = src.cmd(&[&b"TYPE"[..], &staging]).await?;
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
                return Ok(());
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
        Ok(())
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
