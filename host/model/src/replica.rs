//! The replica side of Redis replication, enough to follow a source: AUTH, `REPLCONF capa`,
//! `PSYNC replid offset` (falling back to `SYNC` on servers without it), the RDB payload
//! (`$len` or the diskless `$EOF:<mark>` form), then the command stream one request at a time,
//! and `REPLCONF ACK <offset>`. TLS to a server of a group marked so (`tls::backend`). Used by `tessera import sync` and by
//! the migration's capture of a source's changes. Every read is bounded in time
//! (`watch`: silence, and progress that keepalive newlines do not make) and a streamed
//! command in size, so a wrong or hostile source cannot hold the importer or its memory.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use tessera_resp::{Limits, Request, RequestDecoder};

use crate::redis_client::Credential;
use crate::watch::{Expired, ReadBounds, Watch};

/// Longest status line accepted from the source.
const MAX_LINE: usize = 64 * 1024;
/// The least room a read is given.
const READ_CHUNK: usize = 64 * 1024;

/// Why following the source stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("source {addr}: {reason}")]
    Io { addr: String, reason: String },
    #[error("source {addr} refused {what}: {reply}")]
    Refused {
        addr: String,
        what: &'static str,
        reply: String,
    },
    #[error("source {addr} sent something unexpected: {what}")]
    Protocol { addr: String, what: String },
    #[error(
        "source {addr} sends an RDB of {what}, over the limit of {limit} bytes (--max-rdb-mb): \
         nothing was written; raise the limit if the source is the right one"
    )]
    TooLarge {
        addr: String,
        what: String,
        limit: usize,
    },
    #[error(
        "source {addr} streams a command of {size} bytes or more, over the limit of {limit} \
         bytes (--max-command-mb): raise the limit if the source is the right one, and run \
         the sync again (it resumes from its saved offset)"
    )]
    CommandTooLarge {
        addr: String,
        size: usize,
        limit: usize,
    },
    #[error("source {addr} {what} ({flag}): giving up on it, as a Redis replica does")]
    TimedOut {
        addr: String,
        what: String,
        flag: &'static str,
    },
}

/// How the source answered PSYNC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// An RDB follows; the stream after it starts at `offset + 1`. `replid` is `None` after
    /// a plain `SYNC` (no resume possible).
    Full { replid: Option<String>, offset: u64 },
    /// The stream goes on from the offset asked for; the source may have a new ID.
    Continue { replid: Option<String> },
}

/// A connection to the source, acting as its replica.
pub struct Replica {
    addr: String,
    /// Plain, or TLS to a server of a group marked so (`tls::backend`).
    stream: crate::tls::Stream,
    buf: BytesMut,
    decoder: RequestDecoder,
    bounds: ReadBounds,
    watch: Watch,
    /// Bytes of the command being received when it last made progress.
    partial_seen: usize,
}

impl Replica {
    /// Connects (within `bounds.timeout`) and authenticates (`AUTH password`) when a password
    /// is given.
    ///
    /// # Errors
    /// Connect failure or timeout, or a refused AUTH.
    pub async fn connect(
        addr: &str,
        password: Option<&str>,
        bounds: ReadBounds,
    ) -> Result<Self, ReplicaError> {
        Self::connect_as(addr, password.map(|p| (None, p)), bounds).await
    }

    /// Connects and authenticates as `credential` (`AUTH user password`), when given: the
    /// control plane's own user on a cluster's servers.
    ///
    /// # Errors
    /// Connect failure or timeout, or a refused AUTH.
    pub async fn connect_with(
        addr: &str,
        credential: Option<&Credential>,
        bounds: ReadBounds,
    ) -> Result<Self, ReplicaError> {
        let auth = credential.map(|c| (Some(c.user.as_str()), c.password.as_str()));
        Self::connect_as(addr, auth, bounds).await
    }

    async fn connect_as(
        addr: &str,
        auth: Option<(Option<&str>, &str)>,
        bounds: ReadBounds,
    ) -> Result<Self, ReplicaError> {
        let io = |reason: String| ReplicaError::Io {
            addr: addr.into(),
            reason,
        };
        let connect = crate::tls::backend::backends().connect(addr);
        let stream = tokio::time::timeout(bounds.timeout, connect)
            .await
            .map_err(|_| {
                io(format!(
                    "no connection within {} s",
                    bounds.timeout.as_secs()
                ))
            })?
            .map_err(io)?;
        let mut r = Self {
            addr: addr.into(),
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            decoder: RequestDecoder::new(Limits::default()),
            bounds,
            watch: Watch::new(Instant::now()),
            partial_seen: 0,
        };
        match auth {
            Some((Some(user), p)) => {
                r.expect_ok("AUTH", &[b"AUTH", user.as_bytes(), p.as_bytes()])
                    .await?
            }
            Some((None, p)) => r.expect_ok("AUTH", &[b"AUTH", p.as_bytes()]).await?,
            None => {}
        }
        r.expect_ok(
            "REPLCONF capa",
            &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
        )
        .await?;
        Ok(r)
    }

    fn io(&self, e: impl ToString) -> ReplicaError {
        ReplicaError::Io {
            addr: self.addr.clone(),
            reason: e.to_string(),
        }
    }

    /// Writes a request; a source that stops reading (its socket buffer full of our ACKs)
    /// is given up on after `--timeout-s` like a silent one.
    async fn send(&mut self, args: &[&[u8]]) -> Result<(), ReplicaError> {
        let size = args.iter().map(|a| a.len()).sum();
        let req = tessera_resp::encode_request(args.len(), args.iter().copied(), size);
        match tokio::time::timeout(self.bounds.timeout, self.stream.write_all(&req)).await {
            Ok(r) => r.map_err(|e| self.io(e)),
            Err(_) => Err(ReplicaError::TimedOut {
                addr: self.addr.clone(),
                what: format!(
                    "read nothing we sent for {} s",
                    self.bounds.timeout.as_secs()
                ),
                flag: "--timeout-s",
            }),
        }
    }

    async fn expect_ok(&mut self, what: &'static str, args: &[&[u8]]) -> Result<(), ReplicaError> {
        self.send(args).await?;
        let reply = self.line(self.bounds.timeout).await?;
        if reply.starts_with('+') {
            return Ok(());
        }
        Err(ReplicaError::Refused {
            addr: self.addr.clone(),
            what,
            reply,
        })
    }

    /// One status line, skipping the bare newlines a source sends as keepalives; they keep
    /// the connection but are not progress, so the line must come within `stall`.
    async fn line(&mut self, stall: Duration) -> Result<String, ReplicaError> {
        loop {
            if let Some(end) = memchr::memchr(b'\n', &self.buf) {
                let line = self.buf.split_to(end + 1);
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                if text.is_empty() {
                    continue;
                }
                self.watch.progressed(Instant::now());
                return Ok(text);
            }
            if self.buf.len() > MAX_LINE {
                return Err(ReplicaError::Protocol {
                    addr: self.addr.clone(),
                    what: "a status line longer than 64 KiB".into(),
                });
            }
            // The start of a line with text in it is progress; a lone `\r` is not.
            if self.buf.iter().any(|b| !b.is_ascii_whitespace()) {
                self.watch.progressed(Instant::now());
            }
            self.fill(stall).await?;
        }
    }

    /// Reads more into the buffer, giving up after `bounds.timeout` of silence or `stall`
    /// since the last progress (what counts as progress is the caller's to say).
    async fn fill(&mut self, stall: Duration) -> Result<(), ReplicaError> {
        let (deadline, why) = self
            .watch
            .deadline(Instant::now(), self.bounds.timeout, stall);
        self.make_room();
        let read = self.stream.read_buf(&mut self.buf);
        let n = match tokio::time::timeout_at(deadline.into(), read).await {
            Ok(r) => r.map_err(|e| self.io(e))?,
            Err(_) => {
                return Err(ReplicaError::TimedOut {
                    addr: self.addr.clone(),
                    what: self.watch.describe(why),
                    flag: match why {
                        Expired::Stalled(d) if d > self.bounds.timeout => "--rdb-wait-s",
                        _ => "--timeout-s",
                    },
                });
            }
        };
        if n == 0 {
            return Err(self.io("the source closed the connection"));
        }
        self.watch.received(Instant::now());
        Ok(())
    }

    /// Asks to continue after `resume` (the source's replication ID and the last byte of its
    /// stream already had), else for a full copy, and reads the answer.
    ///
    /// # Errors
    /// A refused PSYNC and SYNC, or a malformed answer.
    pub async fn handshake(&mut self, resume: Option<(&str, u64)>) -> Result<Start, ReplicaError> {
        let (id, off) = match resume {
            Some((replid, offset)) => (replid.to_string(), (offset + 1).to_string()),
            None => ("?".to_string(), "-1".to_string()),
        };
        self.send(&[b"PSYNC", id.as_bytes(), off.as_bytes()])
            .await?;
        let reply = self.line(self.bounds.timeout).await?;
        let mut words = reply.split_whitespace();
        match words.next() {
            Some("+FULLRESYNC") => {
                let replid = words.next().map(str::to_owned);
                let offset = words.next().and_then(|o| o.parse().ok());
                match (replid, offset) {
                    (Some(r), Some(o)) => Ok(Start::Full {
                        replid: Some(r),
                        offset: o,
                    }),
                    _ => Err(self.protocol(format!("PSYNC answered {reply:?}"))),
                }
            }
            Some("+CONTINUE") => Ok(Start::Continue {
                replid: words.next().map(str::to_owned),
            }),
            _ if reply.to_ascii_lowercase().contains("unknown command") => {
                // A source older than PSYNC (Redis < 2.8): the RDB follows SYNC directly.
                self.send(&[b"SYNC"]).await?;
                Ok(Start::Full {
                    replid: None,
                    offset: 0,
                })
            }
            _ => Err(ReplicaError::Refused {
                addr: self.addr.clone(),
                what: "PSYNC",
                reply,
            }),
        }
    }

    fn too_large(&self, what: String, limit: usize) -> ReplicaError {
        ReplicaError::TooLarge {
            addr: self.addr.clone(),
            what,
            limit,
        }
    }

    fn protocol(&self, what: String) -> ReplicaError {
        ReplicaError::Protocol {
            addr: self.addr.clone(),
            what,
        }
    }

    /// Reads the RDB payload after a full resync, at most `limit` bytes of it. Memory grows
    /// with the bytes received, not with the announced length.
    ///
    /// # Errors
    /// A lost connection, a malformed header, or an RDB over `limit`.
    pub async fn read_rdb(&mut self, limit: usize) -> Result<Vec<u8>, ReplicaError> {
        // The source saves its RDB first, sending keepalive newlines meanwhile.
        self.watch.progressed(Instant::now());
        let head = self.line(self.bounds.rdb_wait).await?;
        let Some(spec) = head.strip_prefix('$') else {
            return Err(self.protocol(format!("expected the RDB payload, got {head:?}")));
        };
        if let Some(mark) = spec.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            if mark.len() != 40 {
                return Err(self.protocol("an EOF mark that is not 40 bytes".into()));
            }
            let mut data: Vec<u8> = Vec::new();
            loop {
                let from = data.len().saturating_sub(mark.len());
                data.extend_from_slice(&self.buf.split());
                if let Some(p) = memchr::memmem::find(&data[from..], &mark) {
                    // What follows the mark is the start of the command stream.
                    let rest = data.split_off(from + p + mark.len());
                    data.truncate(from + p);
                    self.buf.extend_from_slice(&rest);
                    return Ok(data);
                }
                if data.len() > limit.saturating_add(mark.len()) {
                    return Err(self.too_large(format!("more than {limit} bytes"), limit));
                }
                self.fill_rdb().await?;
            }
        }
        let len: usize = spec
            .parse()
            .map_err(|_| self.protocol(format!("bad RDB length {spec:?}")))?;
        if len > limit {
            return Err(self.too_large(format!("{len} bytes"), limit));
        }
        let mut data = Vec::with_capacity(len.min(64 * 1024 * 1024));
        while data.len() < len {
            if self.buf.is_empty() {
                self.fill_rdb().await?;
            }
            let n = (len - data.len()).min(self.buf.len());
            data.extend_from_slice(&self.buf.split_to(n));
        }
        Ok(data)
    }

    /// Reads past the RDB payload after a full resync without keeping it (a capture of the
    /// source's changes needs only the stream after it). Memory stays bounded by the read
    /// buffer and the EOF mark. Returns the payload's size.
    ///
    /// # Errors
    /// A lost connection, a malformed header, or a source that stalls past the bounds.
    pub async fn skip_rdb(&mut self) -> Result<u64, ReplicaError> {
        self.read_rdb_into(u64::MAX, &mut |_| Ok(())).await
    }

    /// Hands the RDB payload after a full resync to `sink` as it arrives (a backup writes it
    /// to a file), at most `limit` bytes of it. Memory stays bounded by the read buffer and
    /// the EOF mark. Returns the payload's size.
    ///
    /// # Errors
    /// A lost connection, a malformed header, a source that stalls past the bounds, a payload
    /// over `limit`, or a failed `sink`.
    pub async fn read_rdb_into(
        &mut self,
        limit: u64,
        sink: &mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send),
    ) -> Result<u64, ReplicaError> {
        self.watch.progressed(Instant::now());
        let head = self.line(self.bounds.rdb_wait).await?;
        let Some(spec) = head.strip_prefix('$') else {
            return Err(self.protocol(format!("expected the RDB payload, got {head:?}")));
        };
        let limit_usize = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut sink =
            |s: &Self, bytes: &[u8]| sink(bytes).map_err(|e| s.io(format!("keeping the RDB: {e}")));
        if let Some(mark) = spec.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            if mark.len() != 40 {
                return Err(self.protocol("an EOF mark that is not 40 bytes".into()));
            }
            let mut read = 0u64;
            loop {
                if let Some(p) = memchr::memmem::find(&self.buf, &mark) {
                    let data = self.buf.split_to(p + mark.len());
                    read += p as u64;
                    if read > limit {
                        return Err(self.too_large(format!("{read} bytes"), limit_usize));
                    }
                    sink(self, &data[..p])?;
                    return Ok(read);
                }
                // Keep what could be the start of the mark.
                let keep = self.buf.len().min(mark.len() - 1);
                let data = self.buf.split_to(self.buf.len() - keep);
                read += data.len() as u64;
                if read > limit {
                    return Err(self.too_large(format!("more than {limit} bytes"), limit_usize));
                }
                sink(self, &data)?;
                self.fill_rdb().await?;
            }
        }
        let len: u64 = spec
            .parse()
            .map_err(|_| self.protocol(format!("bad RDB length {spec:?}")))?;
        if len > limit {
            return Err(self.too_large(format!("{len} bytes"), limit_usize));
        }
        let mut left = len;
        while left > 0 {
            if self.buf.is_empty() {
                self.fill_rdb().await?;
            }
            let n = usize::try_from(left)
                .unwrap_or(usize::MAX)
                .min(self.buf.len());
            let data = self.buf.split_to(n);
            sink(self, &data)?;
            left -= n as u64;
        }
        Ok(len)
    }

    /// Gives the next read room: doubling, as `read_buf` would, but never past
    /// `--max-command-mb` and a chunk. Left to `read_buf`, the buffer's capacity doubled past
    /// the command it held (a 768 MiB command peaked the importer at 1.6 GB); capped, a
    /// command refused at 512 MiB peaks it at 547 MB.
    fn make_room(&mut self) {
        if self.buf.capacity() - self.buf.len() >= READ_CHUNK {
            return;
        }
        let to_cap = self
            .bounds
            .max_command
            .saturating_sub(self.buf.len())
            .saturating_add(READ_CHUNK);
        self.buf.reserve(self.buf.len().max(READ_CHUNK).min(to_cap));
    }

    /// Reads RDB bytes: each is progress.
    async fn fill_rdb(&mut self) -> Result<(), ReplicaError> {
        self.fill(self.bounds.timeout).await?;
        self.watch.progressed(Instant::now());
        Ok(())
    }

    /// Starts the command stream's clock: the stream owes nothing for the time spent before
    /// it (loading the RDB into the proxy can take long, unread).
    pub fn start_stream(&mut self) {
        self.watch.progressed(Instant::now());
        self.partial_seen = 0;
    }

    /// The next command of the stream and how many bytes of it it took.
    ///
    /// Cancel-safe: what was read stays buffered for the next call, and the clocks live in
    /// `self`, so a caller that polls this in a loop with a ticker does not reset them.
    ///
    /// # Errors
    /// A lost connection, a malformed command, a command over `--max-command-mb`, or a
    /// source that sent no command (only keepalives, or nothing) for `--timeout-s`.
    pub async fn next_command(&mut self) -> Result<(Request, u64), ReplicaError> {
        loop {
            let before = self.buf.len();
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(req)) => {
                    self.watch.progressed(Instant::now());
                    self.partial_seen = 0;
                    return Ok((req, (before - self.buf.len()) as u64));
                }
                Ok(None) => self.check_partial()?,
                Err(e) => return Err(self.protocol(format!("in the command stream: {e}"))),
            }
            self.fill(self.bounds.timeout).await?;
        }
    }

    /// After `decode` asked for more bytes, `buf` holds only the command being received (the
    /// blank keepalive lines before it were skipped): refuses it once it, with the rest of the
    /// argument already announced, is over the limit, and counts its growth as progress.
    fn check_partial(&mut self) -> Result<(), ReplicaError> {
        let held = self.buf.len();
        let size = held.saturating_add(self.decoder.wanted_capped(&self.buf, usize::MAX));
        if size > self.bounds.max_command {
            return Err(ReplicaError::CommandTooLarge {
                addr: self.addr.clone(),
                size,
                limit: self.bounds.max_command,
            });
        }
        if held > self.partial_seen {
            self.watch.progressed(Instant::now());
            self.partial_seen = held;
        }
        Ok(())
    }

    /// `REPLCONF ACK <offset>`: tells the source how far this replica has applied.
    ///
    /// # Errors
    /// A lost connection.
    pub async fn ack(&mut self, offset: u64) -> Result<(), ReplicaError> {
        let o = offset.to_string();
        self.send(&[b"REPLCONF", b"ACK", o.as_bytes()]).await
    }
}
