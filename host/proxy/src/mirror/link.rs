//! A worker's link to the shadow: one connection per protocol (the backend connection code,
//! so connect, login, pipelining, timeouts and backoff are the data path's own), the bounded
//! queue of commands sent and not yet answered, and the task that compares each shadow reply
//! with the primary's, in order, as it arrives. A shadow reply larger than `max_queue_bytes`
//! drops its connection (the commands in flight count as errors): a shadow that never stops
//! sending cannot make the proxy hold more.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::debug;

use super::stats::{Drop, MirrorStats};
use super::{Active, Rule, Ticket, same};
use crate::backend::{BackendConn, BackendOptions, BackendStats, ReplyRx};
use tessera_model::login::{Login, LoginStep, is_ok};
use tessera_resp::{Limits, Proto, RequestDecoder, encode_request};

/// A shadow with commands outstanding and no reply for this long is dropped, failing them
/// (they count as errors) and freeing their place in the queue; the next command reconnects.
const SHADOW_TIMEOUT: Duration = Duration::from_secs(2);
const SHADOW_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A worker's side of the mirror; created empty, linked on the first command to mirror.
#[derive(Default)]
pub struct WorkerMirror {
    link: RefCell<Option<Link>>,
}

/// The link for one generation of the settings.
struct Link {
    generation: u64,
    active: Arc<Active>,
    /// By protocol: RESP2, RESP3 (a command goes to the shadow in its client's protocol, so
    /// both replies are in the same one and compare byte for byte). Shared with the comparing
    /// task, which lets them go once the settings change (mirroring off included), so no
    /// connection to a former shadow stays open.
    conns: Rc<RefCell<[Option<BackendConn>; 2]>>,
    queue: Rc<Queue>,
    to_compare: mpsc::UnboundedSender<Entry>,
    login: Login,
    backend_stats: Arc<BackendStats>,
}

/// What the worker's link holds now (the bounds apply to these).
#[derive(Default)]
struct Queue {
    entries: Cell<usize>,
    bytes: Cell<usize>,
}

/// A command sent to the shadow, awaiting its reply.
struct Entry {
    reply: ReplyRx,
    ticket: Box<Ticket>,
    /// The primary's reply, when it is compared.
    primary: Option<Bytes>,
    held: usize,
}

impl WorkerMirror {
    /// Sends `t`'s command to the shadow and queues the comparison with `primary` (the reply
    /// the client gets), unless the worker's queue is at a bound (then dropped, counted).
    pub fn send(&self, t: Box<Ticket>, primary: &[u8]) {
        let mut slot = self.link.borrow_mut();
        if slot
            .as_ref()
            .is_none_or(|l| l.generation != t.active.generation)
        {
            *slot = Some(Link::new(t.active.clone()));
        }
        let link = slot.as_mut().expect("link set above");
        let active = link.active.clone();
        let (c, stats) = (&active.config, &active.stats);
        let keep = t.rule != Rule::Skip && primary.len() <= c.max_command_bytes;
        let held = t.req.len() + if keep { primary.len() } else { 0 };
        let q = link.queue.clone();
        if q.entries.get() >= c.max_queue {
            stats.dropped(Drop::QueueFull);
            return;
        }
        if q.bytes.get() + held > c.max_queue_bytes {
            stats.dropped(Drop::QueueBytes);
            return;
        }
        let reply = link.send(t.proto, t.req.clone());
        q.entries.set(q.entries.get() + 1);
        q.bytes.set(q.bytes.get() + held);
        stats.queued(held);
        stats.sent(t.id);
        let primary = keep.then(|| Bytes::copy_from_slice(primary));
        let entry = Entry {
            reply,
            ticket: t,
            primary,
            held,
        };
        if let Err(mpsc::error::SendError(e)) = link.to_compare.send(entry) {
            // The comparing task is gone (its runtime is shutting down): nothing waits.
            Link::settle(&q, stats, e.held);
        }
    }
}

impl Link {
    fn new(active: Arc<Active>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let queue = Rc::new(Queue::default());
        let conns: Rc<RefCell<[Option<BackendConn>; 2]>> = Rc::default();
        tokio::task::spawn_local(compare_all(
            rx,
            queue.clone(),
            active.clone(),
            conns.clone(),
        ));
        let login = match &active.config.password {
            None => Login::none(),
            Some(p) => Login {
                // Never shared with the data path's pool: the id only has to be stable.
                id: u64::MAX - active.generation,
                steps: Arc::from(vec![LoginStep {
                    request: encode_request(2, [&b"AUTH"[..], p.as_bytes()], p.len() + 4),
                    what: "AUTH to the mirror's shadow",
                    accept: is_ok,
                }]),
            },
        };
        debug!(target = %active.config.target, mode = active.config.mode.as_str(), "mirror link");
        Self {
            generation: active.generation,
            active,
            conns,
            queue,
            to_compare: tx,
            login,
            backend_stats: Arc::default(),
        }
    }

    /// Sends `req` on the connection for `proto` (made on first use).
    fn send(&self, proto: Proto, req: Bytes) -> ReplyRx {
        let i = usize::from(proto == Proto::Resp3);
        let mut conns = self.conns.borrow_mut();
        conns[i]
            .get_or_insert_with(|| {
                let opts = BackendOptions {
                    timeout: SHADOW_TIMEOUT,
                    connect_timeout: SHADOW_CONNECT_TIMEOUT,
                    stats: self.backend_stats.clone(),
                    max_reply: self.active.config.max_queue_bytes,
                    // The shadow is not one of the cluster's servers: never fenced.
                    fence: Arc::default(),
                };
                BackendConn::spawn(
                    Arc::from(self.active.config.target.trim()),
                    proto,
                    self.login.clone(),
                    opts,
                )
            })
            .send(req, None)
    }

    fn settle(q: &Queue, stats: &MirrorStats, held: usize) {
        q.entries.set(q.entries.get() - 1);
        q.bytes.set(q.bytes.get() - held);
        stats.unqueued(held);
    }
}

/// Awaits each shadow reply in order and compares it; ends when the link is gone and every
/// queued entry is settled.
async fn compare_all(
    mut rx: mpsc::UnboundedReceiver<Entry>,
    queue: Rc<Queue>,
    active: Arc<Active>,
    conns: Rc<RefCell<[Option<BackendConn>; 2]>>,
) {
    let stats = active.stats.clone();
    let mut generations = active.generations.clone();
    let mut current = true;
    loop {
        let e = tokio::select! {
            e = rx.recv() => match e {
                Some(e) => e,
                None => return,
            },
            changed = generations.changed(), if current => {
                // Settings changed (or the mirror is gone): the next command of this worker
                // makes a new link; this one lets its connections go once their replies are in.
                current = changed.is_ok() && *generations.borrow() == active.generation;
                if !current {
                    *conns.borrow_mut() = [None, None];
                }
                continue;
            }
        };
        let t = &e.ticket;
        match e.reply.await {
            Err(_) => stats.error(),
            Ok(shadow) => match &e.primary {
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
        Link::settle(&queue, &stats, e.held);
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
