//! The pipelined writer to the Tessera proxy: one connection, a writer task that batches
//! encoded commands onto the socket, a reader task that checks every reply in order. At most
//! [`Target::MAX_IN_FLIGHT`] bytes of commands wait for their replies (a semaphore counted in
//! bytes), so a fast dump cannot outrun the proxy. An error reply fails the import
//! ([`OnError::Fail`]) or is counted and logged ([`OnError::Count`], the live stream's
//! commands the proxy refuses).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use tessera_resp::ReplyScanner;

/// Why writing to the proxy stopped.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TargetError {
    #[error("connecting to the proxy at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("the proxy at {addr} refused AUTH: {reply}")]
    AuthRefused { addr: String, reply: String },
    #[error("the proxy at {addr}: {reason}")]
    Io { addr: String, reason: String },
    #[error("the proxy refused {what}: {reply}")]
    Refused { what: String, reply: String },
}

/// What an error reply to a command means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// The import fails (a dump's data must land whole).
    Fail,
    /// Counted in [`TargetStats::refused`] and logged; the import goes on.
    Count,
}

/// Counters the reader keeps, read by progress reports.
#[derive(Debug, Default)]
pub struct TargetStats {
    /// Replies received.
    pub replies: AtomicU64,
    /// Error replies to [`OnError::Count`] commands.
    pub refused: AtomicU64,
    /// Command bytes sent.
    pub bytes: AtomicU64,
    /// The replication offset of the last command whose reply arrived.
    pub applied_offset: AtomicU64,
    /// Commands sent whose reply has not arrived.
    pub in_flight: AtomicU64,
}

/// What the reader needs to know of each command sent, in order.
struct Sent {
    permits: u32,
    on_error: OnError,
    /// The command's name and key, for the error message.
    what: Box<[u8]>,
    offset: Option<u64>,
}

/// A pipelined connection to the proxy.
pub struct Target {
    addr: String,
    tx: mpsc::Sender<Bytes>,
    sent: mpsc::UnboundedSender<Sent>,
    budget: Arc<Semaphore>,
    stats: Arc<TargetStats>,
    reader: JoinHandle<Result<(), TargetError>>,
    writer: JoinHandle<Result<(), TargetError>>,
    /// The database the connection has selected (the commands queued after it run there).
    db: u64,
}

impl Target {
    /// Bytes of commands that may wait for their replies.
    pub const MAX_IN_FLIGHT: u32 = 8 * 1024 * 1024;
    /// Connecting to the proxy, and its answer to AUTH.
    pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

    /// Connects to the proxy and authenticates with `password` (`AUTH password`) if given.
    ///
    /// # Errors
    /// [`TargetError::Connect`] or [`TargetError::AuthRefused`].
    pub async fn connect(addr: &str, password: Option<&str>) -> Result<Self, TargetError> {
        let io = |reason: std::io::Error| TargetError::Connect {
            addr: addr.into(),
            reason: reason.to_string(),
        };
        let timed_out = |what: &str| TargetError::Connect {
            addr: addr.into(),
            reason: format!("no {what} within {} s", Self::CONNECT_TIMEOUT.as_secs()),
        };
        let mut stream = tokio::time::timeout(Self::CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out("connection"))?
            .map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        if let Some(p) = password {
            stream
                .write_all(&super::apply::encode(&[b"AUTH", p.as_bytes()]))
                .await
                .map_err(io)?;
            let mut line = [0u8; 512];
            let n = tokio::time::timeout(Self::CONNECT_TIMEOUT, stream.read(&mut line))
                .await
                .map_err(|_| timed_out("answer to AUTH"))?
                .map_err(io)?;
            if !line[..n].starts_with(b"+OK") {
                return Err(TargetError::AuthRefused {
                    addr: addr.into(),
                    reply: String::from_utf8_lossy(&line[..n]).trim_end().into(),
                });
            }
        }
        let (r, w) = stream.into_split();
        let (tx, rx) = mpsc::channel(1024);
        let (sent, sent_rx) = mpsc::unbounded_channel();
        let budget = Arc::new(Semaphore::new(Self::MAX_IN_FLIGHT as usize));
        let stats = Arc::new(TargetStats::default());
        let reader = tokio::spawn(read_replies(
            addr.to_owned(),
            r,
            sent_rx,
            budget.clone(),
            stats.clone(),
        ));
        let writer = tokio::spawn(write_commands(addr.to_owned(), w, rx));
        Ok(Self {
            addr: addr.into(),
            tx,
            sent,
            budget,
            stats,
            reader,
            writer,
            db: 0,
        })
    }

    /// Makes what is sent next run in database `db` of the proxy (a `SELECT` when it
    /// changes, refused as any failed command is).
    ///
    /// # Errors
    /// As [`Target::send`].
    pub async fn use_db(&mut self, db: u64) -> Result<(), TargetError> {
        if db == self.db {
            return Ok(());
        }
        let n = db.to_string();
        let what = format!("SELECT {db} (the source's keys of database {db})");
        self.send(
            super::apply::encode(&[b"SELECT", n.as_bytes()]),
            OnError::Fail,
            what.as_bytes(),
            None,
        )
        .await?;
        self.db = db;
        Ok(())
    }

    /// Counters shared with the reader.
    pub fn stats(&self) -> Arc<TargetStats> {
        self.stats.clone()
    }

    /// Queues one encoded command; waits while too many bytes are in flight.
    ///
    /// `what` names it in an error; `offset` is the replication offset reached once its reply
    /// arrives.
    ///
    /// # Errors
    /// The first failure of the connection or a refused [`OnError::Fail`] command.
    pub async fn send(
        &mut self,
        cmd: Bytes,
        on_error: OnError,
        what: &[u8],
        offset: Option<u64>,
    ) -> Result<(), TargetError> {
        let permits = (cmd.len() as u64).clamp(1, u64::from(Self::MAX_IN_FLIGHT)) as u32;
        let Ok(p) = self.budget.clone().acquire_many_owned(permits).await else {
            return Err(self.failure().await);
        };
        p.forget();
        self.stats.in_flight.fetch_add(1, Ordering::SeqCst);
        self.stats
            .bytes
            .fetch_add(cmd.len() as u64, Ordering::Relaxed);
        let record = Sent {
            permits,
            on_error,
            what: what.into(),
            offset,
        };
        if self.sent.send(record).is_err() || self.tx.send(cmd).await.is_err() {
            return Err(self.failure().await);
        }
        Ok(())
    }

    /// Waits until every command sent has its reply.
    ///
    /// # Errors
    /// As [`Target::send`].
    pub async fn flush(&mut self) -> Result<(), TargetError> {
        let all = self.budget.acquire_many(Self::MAX_IN_FLIGHT).await.is_ok();
        if all {
            return Ok(());
        }
        Err(self.failure().await)
    }

    /// Whether a reply has failed the import, without waiting.
    pub fn failed(&self) -> bool {
        self.budget.is_closed()
    }

    /// The error that stopped the reader or the writer.
    async fn failure(&mut self) -> TargetError {
        let gone = || TargetError::Io {
            addr: self.addr.clone(),
            reason: "connection task ended".into(),
        };
        if self.reader.is_finished()
            && let Ok(Err(e)) = (&mut self.reader).await
        {
            return e;
        }
        if self.writer.is_finished()
            && let Ok(Err(e)) = (&mut self.writer).await
        {
            return e;
        }
        gone()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

/// Writes queued commands, coalescing what is already queued into one write.
async fn write_commands(
    addr: String,
    mut w: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Bytes>,
) -> Result<(), TargetError> {
    let mut buf = BytesMut::with_capacity(256 * 1024);
    while let Some(first) = rx.recv().await {
        buf.extend_from_slice(&first);
        while buf.len() < 256 * 1024 {
            match rx.try_recv() {
                Ok(more) => buf.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        w.write_all(&buf).await.map_err(|e| TargetError::Io {
            addr: addr.clone(),
            reason: e.to_string(),
        })?;
        buf.clear();
    }
    Ok(())
}

/// Reads replies in order, matches each to its command, releases its bytes.
async fn read_replies(
    addr: String,
    mut r: OwnedReadHalf,
    mut sent: mpsc::UnboundedReceiver<Sent>,
    budget: Arc<Semaphore>,
    stats: Arc<TargetStats>,
) -> Result<(), TargetError> {
    let result = read_loop(&addr, &mut r, &mut sent, &budget, &stats).await;
    // Wakes a sender or a flush waiting for room: they read the error from this task.
    budget.close();
    result
}

async fn read_loop(
    addr: &str,
    r: &mut OwnedReadHalf,
    sent: &mut mpsc::UnboundedReceiver<Sent>,
    budget: &Semaphore,
    stats: &TargetStats,
) -> Result<(), TargetError> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut scanner = ReplyScanner::default();
    let io = |reason: String| TargetError::Io {
        addr: addr.into(),
        reason,
    };
    loop {
        while let Some(len) = scanner.next_len(&buf).map_err(|e| io(e.to_string()))? {
            let reply = buf.split_to(len);
            let Ok(s) = sent.try_recv() else {
                return Err(io("a reply to no command".into()));
            };
            if matches!(reply.first(), Some(b'-' | b'!')) {
                let text = String::from_utf8_lossy(&reply).trim_end().to_string();
                let what = String::from_utf8_lossy(&s.what).into_owned();
                if s.on_error == OnError::Fail {
                    return Err(TargetError::Refused { what, reply: text });
                }
                let n = stats.refused.fetch_add(1, Ordering::Relaxed) + 1;
                if n <= 10 || n.is_power_of_two() {
                    tracing::warn!(refused_total = n, command = %what, reply = %text, "the proxy refused a replicated command; skipped");
                }
            }
            if let Some(o) = s.offset {
                stats.applied_offset.store(o, Ordering::SeqCst);
            }
            stats.replies.fetch_add(1, Ordering::Relaxed);
            stats.in_flight.fetch_sub(1, Ordering::SeqCst);
            budget.add_permits(s.permits as usize);
        }
        if r.read_buf(&mut buf).await.map_err(|e| io(e.to_string()))? == 0 {
            return Err(io("the proxy closed the connection".into()));
        }
    }
}
