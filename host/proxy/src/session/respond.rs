//! The reply stages of a batch, in its commands' order:
//!
//! ```text
//! Queued → resolve (bytes in the output buffer) → after_reply → write
//! ```
//!
//! Replies are resolved one at a time into the output buffer; past `FLUSH_AT` bytes they are
//! written out without waiting while later ones are still resolving. A client over its
//! output limits is closed at whichever await it is caught.

use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::{Buf, BytesMut};

use super::queued::{Queued, QueuedReply};
use super::reply::{self, Pending};
use super::{Batch, End, Session};
use crate::backend::ReplyResult;
use tessera_model::limits::OutputAccount;
use tessera_model::tls::Stream;

/// Replies accumulated past this are written out (without waiting) while later ones are
/// still being resolved.
const FLUSH_AT: usize = 64 * 1024;

impl Session {
    /// Resolves the queued replies in order into `wbuf`, runs the after-reply phase of each,
    /// and writes them, closing the client if it goes over its output limits meanwhile.
    pub(super) async fn write_replies(
        &mut self,
        queue: &mut Vec<Queued>,
        wbuf: &mut BytesMut,
        started: Instant,
        batch: Batch,
    ) -> Result<(), End> {
        let mut batch = Some(batch);
        if queue.is_empty() {
            return Ok(());
        }
        if wbuf.capacity() == 0 {
            *wbuf = self.worker.buffers.take();
        }
        for q in queue.drain(..) {
            let Queued { reply, done } = q;
            if matches!(reply, QueuedReply::One(Pending::Blocked(_))) {
                // Last of its batch (see `Queued::blocked`): the replies before it leave now,
                // and it no longer holds a table swap (it counts itself in flight while it is
                // sent, see `blocking`).
                drop(batch.take());
                self.write_out(wbuf).await?;
            }
            let at = wbuf.len();
            match ready_now(reply, &self.account) {
                Ok(r) => put(r, wbuf),
                Err(reply) => self.resolve(reply, wbuf).await?,
            }
            if let Some(o) = self.account.overflow() {
                return Err(End::Output(o));
            }
            self.after_reply(done, wbuf, at, started);
            if wbuf.len() >= FLUSH_AT {
                // Without waiting: a slow reader must not hold the batch (and a table swap
                // waiting for it) while the later replies are still being resolved.
                match self.stream.try_write(wbuf) {
                    Ok(n) => {
                        wbuf.advance(n);
                        self.account.release(n);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(End::Io(e)),
                }
            }
        }
        // Every reply is in: this batch no longer holds back a table swap.
        drop(batch);
        self.write_out(wbuf).await?;
        // Back to the worker until the next batch (one grown large is let go).
        self.worker.buffers.give(wbuf);
        self.reg.info.touch();
        Ok(())
    }

    /// Writes all of `wbuf` to the client and empties it.
    async fn write_out(&mut self, wbuf: &mut BytesMut) -> Result<(), End> {
        if wbuf.is_empty() {
            return Ok(());
        }
        let account = self.account.clone();
        let write = self.stream.send_all(wbuf);
        tokio::select! {
            biased;
            o = account.overflowed() => return Err(End::Output(o)),
            r = write => r.map_err(End::Io)?,
        }
        account.release(wbuf.len());
        wbuf.clear();
        Ok(())
    }

    /// Appends one queued reply's bytes to `wbuf` once it is in (an error's, if it failed),
    /// unless the client goes over its output limits first. A blocked command's wait also
    /// ends when the client goes.
    async fn resolve(&mut self, reply: QueuedReply, wbuf: &mut BytesMut) -> Result<(), End> {
        let account = self.account.clone();
        let r = match reply {
            QueuedReply::One(Pending::Ready(b)) => Ok(b),
            QueuedReply::One(Pending::One(rx)) => tokio::select! {
                biased;
                o = account.overflowed() => return Err(End::Output(o)),
                r = rx => reply::taken(r, &account),
            },
            // Not ended by the proxy stopping: a blocking command answers then (see
            // `blocking`), a held one or WAIT within their own bounds, and the shutdown grace
            // bounds them all.
            QueuedReply::One(Pending::Blocked(f)) => tokio::select! {
                biased;
                o = account.overflowed() => return Err(End::Output(o)),
                _ = client_gone(&self.stream) => return Err(End::ClientClosed),
                r = f => reply::taken(r, &account),
            },
            QueuedReply::One(p) => tokio::select! {
                biased;
                o = account.overflowed() => return Err(End::Output(o)),
                r = p.resolve(&account) => r,
            },
            QueuedReply::PluginMerged(merged) => {
                let (parts, pm) = *merged;
                tokio::select! {
                    biased;
                    o = account.overflowed() => return Err(End::Output(o)),
                    r = reply::resolve_all(parts, &account) => match r {
                        Ok(replies) => {
                            pm.merge(&replies, wbuf);
                            return Ok(());
                        }
                        Err(e) => Err(e),
                    },
                }
            }
        };
        put(r, wbuf);
        Ok(())
    }
}

/// The reply, if it is in already (encoded by the proxy, or delivered by its backend), without
/// building a future: most replies of a pipeline are, and a future per reply costs more than
/// the rest of its resolution. `Err` gives the reply back to be awaited.
#[inline]
fn ready_now(reply: QueuedReply, account: &OutputAccount) -> Result<ReplyResult, QueuedReply> {
    match reply {
        QueuedReply::One(Pending::Ready(b)) => Ok(Ok(b)),
        QueuedReply::One(Pending::One(mut rx)) => {
            // Polled with a waker that does nothing: if the reply is not in, `resolve` polls
            // it again with the session's own, which replaces this one.
            let mut cx = Context::from_waker(Waker::noop());
            match std::pin::Pin::new(&mut rx).poll(&mut cx) {
                Poll::Ready(r) => Ok(reply::taken(r, account)),
                Poll::Pending => Err(QueuedReply::One(Pending::One(rx))),
            }
        }
        other => Err(other),
    }
}

/// A reply's bytes, or its error's, appended to the client's output.
#[inline]
fn put(r: ReplyResult, wbuf: &mut BytesMut) {
    match r {
        Ok(b) => wbuf.extend_from_slice(&b),
        Err(e) => wbuf.extend_from_slice(&e.reply()),
    }
}

/// Resolves when the client has closed its side; never, once it has sent more (a pipeline
/// after a blocking command is read when the command is answered).
///
/// TLS: a client closing politely sends `close_notify` (bytes) before its FIN, so the peek
/// would see "more" and wait for ever; there the FIN itself is watched for (`EPOLLRDHUP`,
/// tokio's read-closed readiness), whatever bytes came before it. Bytes waiting are left
/// unread and so is their readiness (cleared, the session's next read would wait for an edge
/// that never comes); with bytes waiting the readiness is looked at again every 250 ms.
async fn client_gone(stream: &Stream) {
    match stream {
        Stream::Plain(tcp) => {
            let mut b = [0u8; 1];
            if let Ok(n) = tcp.peek(&mut b).await
                && n > 0
            {
                std::future::pending::<()>().await;
            }
        }
        Stream::Tls(_) => {
            let tcp = stream.tcp();
            loop {
                match tcp.ready(tokio::io::Interest::READABLE).await {
                    Ok(r) if r.is_read_closed() => return,
                    Ok(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
                    Err(_) => return,
                }
            }
        }
    }
}
