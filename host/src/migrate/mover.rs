//! The background mover: scans a source master for keys of the slots being moved and moves
//! them to the target master. Small keys go in batches with `MIGRATE … KEYS k1 … kn`; a key
//! too big for one MIGRATE goes through the staging protocol (see `migrate` docs), copied in
//! chunks so neither server blocks for more than a chunk's work.
//!
//! One `pass` is a full SCAN of the source; a slot is finished when a full pass finds none of
//! its keys. Passes are idempotent, so a dashboard that dies half way simply passes again
//! (and a big key found staged is copied again from its staging key).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use tracing::{debug, info};

use super::{INTERNAL_PREFIX, marker_key, staging_key, temp_key};
use crate::redis_client::{ClientError, RedisClient, Value};
use crate::router::SlotId;

/// Tunables of the mover.
#[derive(Debug, Clone)]
pub struct MoverConfig {
    /// SCAN's COUNT.
    pub scan_count: usize,
    /// Keys per MIGRATE.
    pub batch: usize,
    /// A collection with more elements than this is a big key.
    pub big_key_elements: u64,
    /// A string longer than this is a big key.
    pub big_key_bytes: u64,
    /// Elements (or bytes, for strings) copied per step of a big key.
    pub chunk: usize,
    pub timeout: Duration,
}

impl Default for MoverConfig {
    fn default() -> Self {
        Self {
            scan_count: 2000,
            batch: 500,
            big_key_elements: super::BIG_KEY_ELEMENTS,
            big_key_bytes: super::BIG_KEY_BYTES,
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
    fn add(&self, slot: u16, n: u64) {
        *self
            .moved
            .lock()
            .expect("progress lock poisoned")
            .entry(slot)
            .or_default() += n;
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
}

/// What `OBJECT ENCODING` says about size: compact encodings are small by construction.
fn compact(encoding: &[u8]) -> bool {
    matches!(
        encoding,
        b"int" | b"embstr" | b"listpack" | b"ziplist" | b"intset"
    )
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
        let mut src = RedisClient::connect(self.source, self.config.timeout).await?;
        let mut found = BTreeSet::new();
        let mut cursor = b"0".to_vec();
        let count = self.config.scan_count.to_string();
        loop {
            let reply = src
                .cmd(&[&b"SCAN"[..], &cursor, b"COUNT", count.as_bytes()])
                .await?;
            let Value::Array(parts) = &reply else {
                return Err(refused(self.source, "SCAN", &reply));
            };
            let (Some(next), Some(Value::Array(keys))) =
                (parts.first().and_then(Value::as_bytes), parts.get(1))
            else {
                return Err(refused(self.source, "SCAN", &reply));
            };
            cursor = next.to_vec();
            let mut small: Vec<(Bytes, u16)> = Vec::new();
            let mut resume: Vec<(Bytes, u16)> = Vec::new();
            for k in keys.iter().filter_map(Value::as_bytes) {
                if let Some(orig) = k.strip_prefix(&b"__tessera:marker:"[..]) {
                    if let Some(slot) = self.wanted(orig) {
                        resume.push((Bytes::copy_from_slice(orig), slot));
                    }
                } else if !k.starts_with(INTERNAL_PREFIX)
                    && let Some(slot) = self.wanted(k)
                {
                    small.push((Bytes::copy_from_slice(k), slot));
                }
            }
            for (key, slot) in resume {
                info!(key = %String::from_utf8_lossy(&key), slot, "resuming the copy of a staged big key");
                self.copy_big(&mut src, &key, true).await?;
                self.progress.add(slot, 1);
                found.insert(slot);
            }
            if !small.is_empty() {
                let big = self.find_big(&mut src, &small).await?;
                for (key, slot) in &small {
                    found.insert(*slot);
                    if big.contains(key) {
                        self.copy_big(&mut src, key, false).await?;
                        self.progress.add(*slot, 1);
                    }
                }
                let rest: Vec<&(Bytes, u16)> =
                    small.iter().filter(|(k, _)| !big.contains(k)).collect();
                for chunk in rest.chunks(self.config.batch) {
                    self.migrate(&mut src, chunk).await?;
                }
            }
            if cursor == b"0" {
                break;
            }
        }
        debug!(source = self.source, found = found.len(), "mover pass done");
        Ok(found)
    }

    /// Which of `keys` are too big for one MIGRATE.
    async fn find_big(
        &self,
        src: &mut RedisClient,
        keys: &[(Bytes, u16)],
    ) -> Result<BTreeSet<Bytes>, MoverError> {
        let cmds: Vec<Vec<&[u8]>> = keys
            .iter()
            .map(|(k, _)| vec![&b"OBJECT"[..], b"ENCODING", k])
            .collect();
        let encodings = src.pipeline(&cmds).await?;
        let unsure: Vec<&Bytes> = keys
            .iter()
            .zip(&encodings)
            .filter(|(_, e)| e.as_bytes().is_some_and(|e| !compact(e)))
            .map(|((k, _), _)| k)
            .collect();
        if unsure.is_empty() {
            return Ok(BTreeSet::new());
        }
        let types = src
            .pipeline(
                &unsure
                    .iter()
                    .map(|k| vec![&b"TYPE"[..], k])
                    .collect::<Vec<_>>(),
            )
            .await?;
        let len_cmds: Vec<Vec<&[u8]>> = unsure
            .iter()
            .zip(&types)
            .map(|(k, t)| {
                let cmd: &[u8] = match t.as_bytes().unwrap_or_default() {
                    b"hash" => b"HLEN",
                    b"set" => b"SCARD",
                    b"zset" => b"ZCARD",
                    b"list" => b"LLEN",
                    b"stream" => b"XLEN",
                    _ => b"STRLEN",
                };
                vec![cmd, &k[..]]
            })
            .collect();
        let lens = src.pipeline(&len_cmds).await?;
        Ok(unsure
            .into_iter()
            .zip(types.iter().zip(&lens))
            .filter(|(_, (t, n))| {
                let n = n.as_int().unwrap_or(0) as u64;
                match t.as_bytes().unwrap_or_default() {
                    b"string" => n > self.config.big_key_bytes,
                    // Streams have no chunked copy: MIGRATE them whole (logged when large).
                    b"stream" => false,
                    _ => n > self.config.big_key_elements,
                }
            })
            .map(|(k, _)| k.clone())
            .collect())
    }

    async fn migrate(
        &self,
        src: &mut RedisClient,
        keys: &[&(Bytes, u16)],
    ) -> Result<(), MoverError> {
        let (host, port) = self
            .target
            .rsplit_once(':')
            .unwrap_or((self.target, "6379"));
        let timeout = self.config.timeout.as_millis().to_string();
        let mut args: Vec<&[u8]> = vec![
            b"MIGRATE",
            host.as_bytes(),
            port.as_bytes(),
            b"",
            b"0",
            timeout.as_bytes(),
            b"REPLACE",
            b"KEYS",
        ];
        args.extend(keys.iter().map(|(k, _)| &k[..]));
        match src.cmd(&args).await? {
            Value::Ok(s) if s == "OK" || s == "NOKEY" => {
                // NOKEY: every key of the batch was moved meanwhile (by a proxy) or deleted.
                let moved = s == "OK";
                if moved {
                    for (_, slot) in keys {
                        self.progress.add(*slot, 1);
                    }
                }
                Ok(())
            }
            other => Err(refused(self.source, "MIGRATE", &other)),
        }
    }

    /// Copies a big key through its staging key. `resume`: it is staged already.
    async fn copy_big(
        &self,
        src: &mut RedisClient,
        key: &[u8],
        resume: bool,
    ) -> Result<(), MoverError> {
        let (staging, marker, temp) = (staging_key(key), marker_key(key), temp_key(key));
        if !resume {
            // Atomically: key → staging, marker holds the TTL. Returns 0 if the key is gone.
            let staged = src
                .cmd(&[
                    &b"EVAL"[..],
                    STAGE_SCRIPT.as_bytes(),
                    b"3",
                    key,
                    &staging,
                    &marker,
                ])
                .await?;
            match staged {
                Value::Int(0) => return Ok(()),
                Value::Int(_) => {}
                other => return Err(refused(self.source, "staging a big key", &other)),
            }
        }
        let mut dst = RedisClient::connect(self.target, self.config.timeout).await?;
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
                    let Value::Array(p) = &r else {
                        return Err(refused(self.source, "chunk scan", &r));
                    };
                    let (Some(next), Some(Value::Array(items))) =
                        (p.first().and_then(Value::as_bytes), p.get(1))
                    else {
                        return Err(refused(self.source, "chunk scan", &r));
                    };
                    cursor = next.to_vec();
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
        expect_ok(&mut dst, self.target, &[b"RENAME", &temp, key]).await?;
        // Only now is the key complete on the target: release the waiting proxies.
        src.cmd(&[&b"UNLINK"[..], &staging, &marker]).await?;
        info!(key = %String::from_utf8_lossy(key), "big key copied in chunks");
        Ok(())
    }
}

/// Atomically renames a key to its staging key and records its TTL in the marker.
const STAGE_SCRIPT: &str = "\
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end \
local ttl = redis.call('PTTL', KEYS[1]) \
redis.call('RENAME', KEYS[1], KEYS[2]) \
redis.call('SET', KEYS[3], ttl) \
return 1";

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
