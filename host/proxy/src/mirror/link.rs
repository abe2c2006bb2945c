//! The link to the shadow, on a thread of its own: a worker hands each copy over (within the
//! queue's bounds, never waiting) and returns to its clients; the link thread sends the copies
//! on its own connections (the backend connection code, so connect, login, pipelining,
//! timeouts and backoff are the data path's own) and compares each shadow reply with the
//! primary's, in order, as it arrives. Nothing a shadow sends is read, scanned or compared on
//! a client's worker thread. What is read of a shadow is bounded too: a reply over
//! `max_command_bytes` (it could not equal a primary reply kept for comparison) is dropped and
//! counted, its connection closed, and the next one backs off (`backend::conn`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use super::stats::{Drop, MirrorStats};
use super::{Active, MirrorConfig, Rule, Ticket, same};
use crate::backend::{BackendConn, BackendOptions, ReplyRx};
use tessera_model::error::DataError;
use tessera_model::login::{Login, LoginStep, is_ok};
use tessera_resp::{Limits, Proto, RequestDecoder, encode_request};

/// A shadow with commands outstanding and no reply for this long is dropped, failing them
/// (they count as errors) and freeing their place in the queue; the next command reconnects.
const SHADOW_TIMEOUT: Duration = Duration::from_secs(2);
const SHADOW_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A worker's side of the mirror: hands copies to the link thread of the settings in force.
#[derive(Default)]
pub struct WorkerMirror;

/// What the proxy holds for copies sent and not yet answered, all workers together (the
/// bounds apply to these).
#[derive(Default)]
pub(crate) struct Queue {
    entries: AtomicUsize,
    bytes: AtomicUsize,
}

impl Queue {
    /// Room for one more copy of `held` bytes, or the bound that is reached.
    fn take(&self, held: usize, c: &MirrorConfig) -> Result<(), Drop> {
        self.entries
            .fetch_update(Relaxed, Relaxed, |n| (n < c.max_queue).then_some(n + 1))
            .map_err(|_| Drop::QueueFull)?;
        let fits = |b: usize| b.checked_add(held).filter(|&t| t <= c.max_queue_bytes);
        if self.bytes.fetch_update(Relaxed, Relaxed, fits).is_err() {
            self.entries.fetch_sub(1, Relaxed);
            return Err(Drop::QueueBytes);
        }
        Ok(())
    }

    fn settle(&self, stats: &MirrorStats, held: usize) {
        self.entries.fetch_sub(1, Relaxed);
        self.bytes.fetch_sub(held, Relaxed);
        stats.unqueued(held);
    }
}

/// The link thread of one generation of the settings: its queue of copies. The thread ends
/// once the generation's `Active` is gone (this sender with it) and every copy is settled.
pub(crate) struct LinkThread {
    tx: mpsc::UnboundedSender<Job>,
}

/// A copy for the link thread.
struct Job {
    ticket: Box<Ticket>,
    /// The primary's reply, when it is compared.
    primary: Option<Bytes>,
    held: usize,
}

/// A copy sent to the shadow, awaiting its reply.
struct Entry {
    reply: ReplyRx,
    job: Job,
}

impl WorkerMirror {
    /// Hands `t`'s command to the link thread with `primary` (the reply the client got) for
    /// the comparison, unless the queue is at a bound (then dropped, counted).
    pub fn send(&self, t: Box<Ticket>, primary: &[u8]) {
        let active = t.active.clone();
        let (c, stats) = (&active.config, &active.stats);
        let keep = t.rule != Rule::Skip && primary.len() <= c.max_command_bytes;
        let held = t.req.len() + if keep { primary.len() } else { 0 };
        if let Err(why) = active.queue.take(held, c) {
            stats.dropped(why);
            return;
        }
        stats.queued(held);
        stats.sent(t.id);
        let job = Job {
            primary: keep.then(|| Bytes::copy_from_slice(primary)),
            ticket: t,
            held,
        };
        let sent = match active.link() {
            Some(link) => link.tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
            // No link thread (it could not start, or its runtime is gone): never answered.
            stats.error();
            active.queue.settle(stats, held);
        }
    }
}

impl Active {
    /// The link thread of these settings, started on first use.
    fn link(&self) -> Option<&LinkThread> {
        self.link
            .get_or_init(|| {
                let (tx, rx) = mpsc::unbounded_channel();
                let setup = Setup {
                    config: self.config.clone(),
                    generation: self.generation,
                    stats: self.stats.clone(),
                    generations: self.generations.clone(),
                    queue: self.queue.clone(),
                };
                std::thread::Builder::new()
                    .name("tessera-mirror".into())
                    .spawn(move || setup.run(rx))
                    .map_err(|e| warn!(error = %e, "the mirror's link thread did not start"))
                    .ok()
                    .map(|_| LinkThread { tx })
            })
            .as_ref()
    }
}

/// What the link thread needs of its generation (never the `Active` itself, whose end is
/// what ends the thread).
struct Setup {
    config: MirrorConfig,
    generation: u64,
    stats: Arc<MirrorStats>,
    generations: watch::Receiver<u64>,
    queue: Arc<Queue>,
}

impl Setup {
    /// The thread's body: a runtime of its own, the shadow connections, the comparisons.
    fn run(self, mut rx: mpsc::UnboundedReceiver<Job>) {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => return warn!(error = %e, "the mirror's link thread has no runtime"),
        };
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            debug!(target = %self.config.target, mode = self.config.mode.as_str(), "mirror link");
            let conns: Rc<RefCell<[Option<BackendConn>; 2]>> = Rc::default();
            let (tx, to_compare) = mpsc::unbounded_channel();
            let login = login(&self.config, self.generation);
            let opts = BackendOptions {
                timeout: SHADOW_TIMEOUT,
                connect_timeout: SHADOW_CONNECT_TIMEOUT,
                stats: Arc::default(),
                max_reply: self.config.max_command_bytes,
                // The shadow is not one of the cluster's servers: never fenced.
                fence: Arc::default(),
            };
            let target: Arc<str> = Arc::from(self.config.target.trim());
            let comparing = tokio::task::spawn_local(compare_all(
                to_compare,
                self.queue.clone(),
                self.stats.clone(),
                self.generation,
                self.generations.clone(),
                conns.clone(),
            ));
            while let Some(job) = rx.recv().await {
                if *self.generations.borrow() != self.generation {
                    // Settings changed since it was queued: not sent to a former shadow.
                    self.stats.error();
                    self.queue.settle(&self.stats, job.held);
                    continue;
                }
                let proto = job.ticket.proto;
                // By protocol: RESP2, RESP3 (a command goes to the shadow in its client's
                // protocol, so both replies are in the same one and compare byte for byte).
                let i = usize::from(proto == Proto::Resp3);
                let reply = conns.borrow_mut()[i]
                    .get_or_insert_with(|| {
                        BackendConn::spawn(target.clone(), proto, login.clone(), opts.clone())
                    })
                    .send(job.ticket.req.clone(), None);
                if let Err(mpsc::error::SendError(e)) = tx.send(Entry { reply, job }) {
                    self.stats.error();
                    self.queue.settle(&self.stats, e.job.held);
                }
            }
            drop(tx);
            let _ = comparing.await;
        });
    }
}

/// How the link logs in to the shadow.
fn login(c: &MirrorConfig, generation: u64) -> Login {
    match &c.password {
        None => Login::none(),
        Some(p) => Login {
            // Never shared with the data path's pool: the id only has to be stable.
            id: u64::MAX - generation,
            steps: Arc::from(vec![LoginStep {
                request: encode_request(2, [&b"AUTH"[..], p.as_bytes()], p.len() + 4),
                what: "AUTH to the mirror's shadow",
                accept: is_ok,
                confines: false,
            }]),
        },
    }
}

/// Awaits each shadow reply in order and compares it; ends when the link is gone and every
/// queued entry is settled. Once the settings change (mirroring off included), the shadow
/// connections are let go, so no connection to a former shadow stays open.
async fn compare_all(
    mut rx: mpsc::UnboundedReceiver<Entry>,
    queue: Arc<Queue>,
    stats: Arc<MirrorStats>,
    generation: u64,
    mut generations: watch::Receiver<u64>,
    conns: Rc<RefCell<[Option<BackendConn>; 2]>>,
) {
    let mut current = true;
    loop {
        let e = tokio::select! {
            e = rx.recv() => match e {
                Some(e) => e,
                None => return,
            },
            changed = generations.changed(), if current => {
                current = changed.is_ok() && *generations.borrow() == generation;
                if !current {
                    *conns.borrow_mut() = [None, None];
                }
                continue;
            }
        };
        let t = &e.job.ticket;
        match e.reply.await {
            Err(DataError::ReplyTooLarge { .. }) => stats.dropped(Drop::ReplyTooLarge),
            Err(_) => stats.error(),
            Ok(shadow) => match &e.job.primary {
                None => stats.uncompared(t.id),
                Some(primary) => {
                    let matched = same(t.rule, primary, &shadow);
                    stats.compared(t.id, matched);
                    if !matched {
                        sample(&stats, t, primary, &shadow);
                    }
                }
            },
        }
        queue.settle(&stats, e.job.held);
    }
}

/// Keeps a mismatch with the command's arguments (decoded again: mismatches are rare, and
/// the ticket holds only the request's bytes).
fn sample(stats: &MirrorStats, t: &Ticket, primary: &[u8], shadow: &[u8]) {
    let mut buf = bytes::BytesMut::from(&t.req[..]);
    let req = RequestDecoder::new(Limits::default())
        .decode(&mut buf)
        .ok()
        .flatten();
    let args: Vec<&[u8]> = req.as_ref().map_or_else(Vec::new, |r| r.args().collect());
    stats.sample(t.name, &args, primary, shadow);
}
