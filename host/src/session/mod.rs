//! One client connection: read → decode every complete request → dispatch each (proxy
//! answer, one backend, or split/fan-out) → write the replies in request order.
//!
//! A pipeline read in one go is dispatched as a whole before any reply is awaited, so its
//! commands run concurrently on every backend they touch; replies still leave in order.

mod dispatch;
mod gather;
mod info;
mod migrate;
mod plugins;

use std::rc::Rc;
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::debug;

use crate::clients::Registration;
use crate::command::CommandId;
use crate::resp::{Frame, Proto, RequestDecoder};
use crate::worker::Worker;
use gather::Pending;

/// Read buffer size; a pipeline larger than this is handled over several rounds.
const READ_CHUNK: usize = 16 * 1024;

pub struct Session {
    worker: Rc<Worker>,
    stream: TcpStream,
    stop: watch::Receiver<bool>,
    reg: Registration,
    decoder: RequestDecoder,
    proto: Proto,
    authed: bool,
    /// Set by QUIT: answer, then close.
    closing: bool,
}

/// Why a session ended (logged at debug level).
#[derive(Debug)]
enum End {
    ClientClosed,
    Quit,
    Idle,
    Shutdown,
    Protocol,
    Io(#[allow(dead_code)] std::io::Error), // read by the debug log through `Debug`
}

impl Session {
    pub fn new(worker: Rc<Worker>, stream: TcpStream, stop: watch::Receiver<bool>) -> Self {
        let _ = stream.set_nodelay(true);
        let peer = stream
            .peer_addr()
            .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
        let local = stream
            .local_addr()
            .unwrap_or_else(|_| ([0, 0, 0, 0], 0).into());
        let shared = &worker.shared;
        let reg = shared.clients.register(peer, local);
        let decoder = RequestDecoder::new(shared.config.limits());
        let authed = shared.config.session_password.is_none();
        Self {
            worker,
            stream,
            stop,
            reg,
            decoder,
            proto: Proto::Resp2,
            authed,
            closing: false,
        }
    }

    pub async fn run(mut self) {
        let end = self.serve().await;
        self.plugins_close();
        debug!(client = self.reg.info.id, addr = %self.reg.info.addr, ?end, "session closed");
    }

    async fn serve(&mut self) -> End {
        let idle = self.worker.shared.config.idle_timeout();
        let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
        let mut wbuf = BytesMut::with_capacity(READ_CHUNK);
        let mut pending: Vec<(Option<CommandId>, Pending)> = Vec::new();
        loop {
            let want = self.decoder.wanted(&rbuf).max(READ_CHUNK / 4);
            if rbuf.capacity() - rbuf.len() < want {
                rbuf.reserve(want.max(READ_CHUNK));
            }
            let read = async {
                match idle {
                    Some(t) => tokio::time::timeout(t, self.stream.read_buf(&mut rbuf))
                        .await
                        .ok(),
                    None => Some(self.stream.read_buf(&mut rbuf).await),
                }
            };
            tokio::select! {
                biased;
                _ = self.stop.changed() => return End::Shutdown,
                r = read => match r {
                    None => return End::Idle,
                    Some(Ok(0)) => return End::ClientClosed,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return End::Io(e),
                },
            }
            let started = Instant::now();
            let batch = Batch::enter(self.worker.clone());
            let mut protocol_error = false;
            loop {
                match self.decoder.decode(&mut rbuf) {
                    Ok(Some(req)) => {
                        pending.push(self.dispatch(req));
                        if self.closing {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let reply = Frame::error(format!("ERR Protocol error: {e}"));
                        pending.push((None, Pending::frame(reply, self.proto)));
                        protocol_error = true;
                        break;
                    }
                }
            }
            if !pending.is_empty() {
                let stats = &self.worker.shared.command_stats;
                for (id, p) in pending.drain(..) {
                    let at = wbuf.len();
                    p.write_into(&mut wbuf).await;
                    if let Some(id) = id {
                        let error = matches!(wbuf.get(at), Some(b'-' | b'!'));
                        stats.record(id, error, started.elapsed());
                    }
                }
                // Every reply is in: this batch no longer holds back a table swap.
                drop(batch);
                if let Err(e) = self.stream.write_all(&wbuf).await {
                    return End::Io(e);
                }
                wbuf.clear();
                if wbuf.capacity() > 4 * 1024 * 1024 {
                    wbuf = BytesMut::with_capacity(READ_CHUNK);
                }
                self.reg.info.touch();
            }
            if protocol_error {
                return End::Protocol;
            }
            if self.closing {
                return End::Quit;
            }
        }
    }
}

/// A batch of commands counted as in flight (see `Shared::drain`) until dropped, even if the
/// session is cancelled half way.
struct Batch {
    worker: Rc<Worker>,
    phase: usize,
}

impl Batch {
    fn enter(worker: Rc<Worker>) -> Self {
        let phase = worker.shared.enter();
        Self { worker, phase }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.worker.shared.leave(self.phase);
    }
}
