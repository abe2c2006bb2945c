//! A big key's copy in chunks, whatever its type: a hash, set or sorted set a SCAN page at a
//! time, a list an `LRANGE` range at a time, a string a `GETRANGE` range at a time, a stream
//! with its groups as `stream` copies it. No chunk holds either server longer than one
//! command of `chunk` elements; each is charged to the migration's speed cap as it is sent.

use super::reply::{MoverError, expect_ok, refused, scan_page};
use super::throttle::Throttle;
use tessera_model::redis_client::{RedisClient, Value};

/// Where chunks go, how big they are, and the cap they are charged to.
pub(super) struct Chunks<'a> {
    /// The servers' names, for errors.
    pub(super) source: &'a str,
    pub(super) target: &'a str,
    /// Elements (or KiB, for strings) per step.
    pub(super) chunk: usize,
    pub(super) throttle: &'a Throttle,
}

impl Chunks<'_> {
    /// Copies `from` on `src` (a key of type `kind`) into `to` on `dst`, which holds nothing
    /// under that name yet. Returns the bytes copied.
    ///
    /// # Errors
    /// A server refusing a command, or a type with no chunked copy.
    pub(super) async fn copy(
        &self,
        src: &mut RedisClient,
        dst: &mut RedisClient,
        kind: &[u8],
        from: &[u8],
        to: &[u8],
    ) -> Result<u64, MoverError> {
        match kind {
            b"hash" | b"set" | b"zset" => self.scanned(src, dst, kind, from, to).await,
            b"list" => self.list(src, dst, from, to).await,
            b"string" => self.string(src, dst, from, to).await,
            b"stream" => {
                super::stream::copy(
                    src,
                    dst,
                    (self.source, self.target),
                    from,
                    to,
                    self.chunk,
                    self.throttle,
                )
                .await
            }
            other => Err(MoverError::Refused {
                server: self.source.into(),
                what: "copying a big key".into(),
                reply: format!(
                    "type {} has no chunked copy",
                    String::from_utf8_lossy(other)
                ),
            }),
        }
    }

    /// A hash, set or sorted set, a SCAN page at a time. Returns the bytes copied.
    async fn scanned(
        &self,
        src: &mut RedisClient,
        dst: &mut RedisClient,
        kind: &[u8],
        from: &[u8],
        to: &[u8],
    ) -> Result<u64, MoverError> {
        let chunk = self.chunk.to_string();
        let (scan, add): (&[u8], &[u8]) = match kind {
            b"hash" => (b"HSCAN", b"HSET"),
            b"set" => (b"SSCAN", b"SADD"),
            _ => (b"ZSCAN", b"ZADD"),
        };
        let mut copied = 0;
        let mut cursor = b"0".to_vec();
        loop {
            let r = src
                .cmd(&[scan, from, &cursor, b"COUNT", chunk.as_bytes()])
                .await?;
            let items = scan_page(self.source, "chunk scan", &r, &mut cursor)?;
            let mut items: Vec<&[u8]> = items.iter().filter_map(Value::as_bytes).collect();
            if kind == b"zset" {
                // ZSCAN gives member, score; ZADD wants score, member.
                for pair in items.chunks_mut(2) {
                    pair.swap(0, 1);
                }
            }
            // A SCAN page can hold more than COUNT asked for: each write carries at most a
            // chunk of elements, so no command on the target runs longer than a chunk's.
            let per_element = if kind == b"set" { 1 } else { 2 };
            for part in items.chunks(self.chunk.max(1) * per_element) {
                let bytes: u64 = part.iter().map(|i| i.len() as u64).sum();
                let mut args = vec![add, to];
                args.extend(part);
                expect_ok(dst, self.target, &args).await?;
                copied += bytes;
                self.throttle.pace(0, bytes).await;
            }
            if cursor == b"0" {
                return Ok(copied);
            }
        }
    }

    async fn list(
        &self,
        src: &mut RedisClient,
        dst: &mut RedisClient,
        from: &[u8],
        to: &[u8],
    ) -> Result<u64, MoverError> {
        let step = self.chunk as i64;
        let (mut at, mut copied) = (0i64, 0);
        loop {
            let (a, b) = (at.to_string(), (at + step - 1).to_string());
            let r = src
                .cmd(&[&b"LRANGE"[..], from, a.as_bytes(), b.as_bytes()])
                .await?;
            let Value::Array(items) = &r else {
                return Err(refused(self.source, "LRANGE", &r));
            };
            if items.is_empty() {
                return Ok(copied);
            }
            let mut args: Vec<&[u8]> = vec![b"RPUSH", to];
            args.extend(items.iter().filter_map(Value::as_bytes));
            let chunk: u64 = args[2..].iter().map(|i| i.len() as u64).sum();
            expect_ok(dst, self.target, &args).await?;
            copied += chunk;
            self.throttle.pace(0, chunk).await;
            at += step;
        }
    }

    async fn string(
        &self,
        src: &mut RedisClient,
        dst: &mut RedisClient,
        from: &[u8],
        to: &[u8],
    ) -> Result<u64, MoverError> {
        let step = (self.chunk * 1024) as i64;
        let (mut at, mut copied) = (0i64, 0);
        loop {
            let (a, b) = (at.to_string(), (at + step - 1).to_string());
            let r = src
                .cmd(&[&b"GETRANGE"[..], from, a.as_bytes(), b.as_bytes()])
                .await?;
            let Some(part) = r.as_bytes() else {
                return Err(refused(self.source, "GETRANGE", &r));
            };
            if part.is_empty() {
                return Ok(copied);
            }
            expect_ok(dst, self.target, &[b"APPEND", to, part]).await?;
            copied += part.len() as u64;
            self.throttle.pace(0, part.len() as u64).await;
            at += step;
        }
    }
}
