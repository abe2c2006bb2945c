//! The session's side of pub/sub: its subscriptions (through its worker's `pubsub::Hub`), the
//! confirmations it answers itself, RESP2's subscribed mode (only the (un)subscribe commands,
//! PING, QUIT and RESET), and writing the hub's messages to the client between replies, never
//! inside one. PUBLISH and PUBSUB's introspection are planned like any command
//! (`stages::plan`); the hub and its backend connections are `pubsub`'s.

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use rustc_hash::FxHashSet;

use super::reply::Pending;
use super::{End, Session};
use crate::pubsub::{Hub, Inbox, SinkId, Space, wire};
use crate::stages::classify::Classified;
use tessera_model::command::{Kind, Local, PubSub};
use tessera_model::error::DataError;
use tessera_model::router::SlotId;
use tessera_resp::Proto;

/// Channels, patterns and shard channels one client may hold, together (see docs/limits.md).
pub(super) const MAX_SUBSCRIPTIONS: usize = 10_000;

/// The names' bytes one client may hold subscribed, together.
pub(super) const MAX_SUBSCRIPTION_BYTES: usize = 4 << 20;

/// How long a subscription's confirmation waits for the backends at most.
pub(super) const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a session is subscribed to.
pub(super) struct Subscriptions {
    hub: Hub,
    /// Made at the first subscription.
    sink: Option<(SinkId, Rc<Inbox>)>,
    /// By `Space::index`.
    sets: [FxHashSet<Bytes>; 3],
    /// The bytes of every name in `sets`.
    bytes: usize,
    /// Subscribed to `__redis__:invalidate`: other clients' invalidations (CLIENT TRACKING …
    /// REDIRECT to this client), from any worker.
    redirected: Option<Redirected>,
}

struct Redirected {
    id: u64,
    redirects: std::sync::Arc<crate::pubsub::Redirects>,
    rx: std::cell::RefCell<tokio::sync::mpsc::Receiver<Bytes>>,
}

impl Drop for Redirected {
    fn drop(&mut self) {
        self.redirects.unregister(self.id);
    }
}

impl Subscriptions {
    pub(super) fn new(hub: Hub) -> Self {
        Self {
            hub,
            sink: None,
            sets: Default::default(),
            bytes: 0,
            redirected: None,
        }
    }

    /// Any subscription at all (Redis's `CLIENT_PUBSUB` flag).
    pub(super) fn subscribed(&self) -> bool {
        self.sets.iter().any(|s| !s.is_empty())
    }

    /// The count a confirmation in `space` reports: channels and patterns together, shard
    /// channels apart (as Redis counts them).
    fn count(&self, space: Space) -> usize {
        match space {
            Space::Shard => self.sets[Space::Shard.index()].len(),
            _ => self.sets[Space::Channel.index()].len() + self.sets[Space::Pattern.index()].len(),
        }
    }

    fn total(&self) -> usize {
        self.sets.iter().map(|s| s.len()).sum()
    }

    /// Completes when there are messages to write, or the client went over its output limits
    /// (never, for a session that never subscribed).
    pub(super) async fn ready(&self) {
        let redirected = async {
            match &self.redirected {
                // Only this future reads the queue; it moves what arrives into the inbox.
                Some(r) => match std::future::poll_fn(|cx| r.rx.borrow_mut().poll_recv(cx)).await {
                    Some(msg) => self.sink.as_ref().map(|(_, inbox)| inbox.push(msg)),
                    None => std::future::pending().await,
                },
                None => std::future::pending().await,
            }
        };
        match &self.sink {
            Some((_, inbox)) => {
                tokio::select! {
                    _ = inbox.ready() => {}
                    _ = inbox.account().overflowed() => {}
                    _ = redirected => {}
                }
            }
            None => std::future::pending().await,
        }
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        if let Some((id, _)) = self.sink.take() {
            for space in Space::ALL {
                let names: Vec<Bytes> = self.sets[space.index()]
                    .drain()
                    .map(|n| crate::pubsub::backend_name(&n))
                    .collect();
                self.hub.unsubscribe(id, space, &names);
            }
            self.hub.release(id);
        }
    }
}

impl Session {
    /// The session's sink in its worker's hub, made on first use (a subscription, tracking).
    pub(super) fn subs_sink(&mut self) -> SinkId {
        self.subs
            .sink
            .get_or_insert_with(|| self.subs.hub.register(self.account.clone()))
            .0
    }

    pub(super) fn subs_sink_id(&self) -> Option<SinkId> {
        self.subs.sink.as_ref().map(|(id, _)| *id)
    }

    /// Subscribed to `__redis__:invalidate` or not any more: the session receives the
    /// invalidations other clients redirect to it, or stops.
    fn redirect_target(&mut self) {
        let wanted = self.subs.sets[Space::Channel.index()]
            .contains(crate::pubsub::tracking::INVALIDATE_CHANNEL);
        match (wanted, self.subs.redirected.is_some()) {
            (true, false) => {
                let redirects = self.worker.shared.redirects.clone();
                let id = self.reg.info.id;
                let rx = redirects.register(id);
                self.subs.redirected = Some(Redirected {
                    id,
                    redirects,
                    rx: std::cell::RefCell::new(rx),
                });
            }
            (false, true) => self.subs.redirected = None,
            _ => {}
        }
    }

    /// RESET: every subscription ends (no confirmation is sent), and what was queued for the
    /// client is let go.
    pub(super) fn pubsub_reset(&mut self) {
        if let Some((_, inbox)) = &self.subs.sink {
            let held: usize = inbox.take().iter().map(Bytes::len).sum();
            self.account.release(held);
        }
        self.subs = Subscriptions::new(self.worker.pubsub.clone());
    }

    /// RESP2 subscribed mode: what else the client sends is refused, in Redis's words.
    pub(super) fn pubsub_refuses(&self, c: &Classified<'_>) -> Option<DataError> {
        if self.proto != Proto::Resp2 || !self.subs.subscribed() {
            return None;
        }
        match c.cmd.name {
            "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" | "UNSUBSCRIBE" | "PUNSUBSCRIBE"
            | "SUNSUBSCRIBE" | "PING" | "QUIT" | "RESET" => None,
            name => Some(DataError::Invalid(format!(
                "Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                name.to_lowercase()
            ))),
        }
    }

    /// The session's own pub/sub commands: its subscriptions (`Own::Subscription`).
    pub(super) fn subscription(&mut self, p: PubSub, c: &Classified<'_>) -> Pending {
        let r = match p {
            PubSub::Unsubscribe => self.unsubscribe(Space::Channel, c),
            PubSub::PUnsubscribe => self.unsubscribe(Space::Pattern, c),
            PubSub::SUnsubscribe => self.unsubscribe(Space::Shard, c),
            PubSub::Subscribe => return self.subscribe_pending(Space::Channel, c),
            PubSub::PSubscribe => return self.subscribe_pending(Space::Pattern, c),
            PubSub::SSubscribe => return self.subscribe_pending(Space::Shard, c),
            // Planned to the backends, never the session's.
            PubSub::Publish
            | PubSub::SPublish
            | PubSub::Channels
            | PubSub::NumSub
            | PubSub::NumPat => Err(DataError::Refused(c.cmd.name.to_string())),
        };
        match r {
            Ok(b) => Pending::Ready(b),
            Err(e) => Pending::error(&e),
        }
    }

    /// PING in RESP2 while subscribed: answered as a subscribed client's, after the messages
    /// waiting for it; `None` when the session is not subscribed (an ordinary PING).
    pub(super) fn subscribed_ping(&mut self, c: &Classified<'_>) -> Option<Pending> {
        if self.proto != Proto::Resp2 || !self.subs.subscribed() {
            return None;
        }
        Some(if c.req.argc() > 2 {
            Pending::error(&DataError::WrongArity("ping".into()))
        } else {
            let mut out = self.queued_messages();
            if !self.silent {
                wire::subscribed_pong(c.req.get(1), &mut out);
            }
            Pending::Ready(out.freeze())
        })
    }

    /// A PING that `subscribed_ping` answers (its reply carries the messages before it).
    pub(super) fn subscribed_ping_kind(&self, c: &Classified<'_>) -> bool {
        c.cmd.kind == Kind::Local(Local::Ping)
            && c.req.argc() <= 2
            && self.proto == Proto::Resp2
            && self.subs.subscribed()
    }

    fn subscribe_pending(&mut self, space: Space, c: &Classified<'_>) -> Pending {
        self.subscribe(space, c)
            .unwrap_or_else(|e| Pending::error(&e))
    }

    fn subscribe(&mut self, space: Space, c: &Classified<'_>) -> Result<Pending, DataError> {
        let names = names_of(c);
        if space == Space::Shard {
            same_slot(&names)?;
        }
        let set = &self.subs.sets[space.index()];
        let fresh: FxHashSet<&Bytes> = names.iter().filter(|n| !set.contains(*n)).collect();
        let fresh_bytes: usize = fresh.iter().map(|n| n.len()).sum();
        if self.subs.total() + fresh.len() > MAX_SUBSCRIPTIONS
            || self.subs.bytes + fresh_bytes > MAX_SUBSCRIPTION_BYTES
        {
            return Err(DataError::Invalid(format!(
                "tessera: a client may hold at most {MAX_SUBSCRIPTIONS} subscriptions (channels, patterns and shard channels together) of {} KiB of names in all",
                MAX_SUBSCRIPTION_BYTES / 1024
            )));
        }
        self.subs.bytes += fresh_bytes;
        let fresh: Vec<Bytes> = fresh.into_iter().cloned().collect();
        let (id, _) = self
            .subs
            .sink
            .get_or_insert_with(|| self.subs.hub.register(self.account.clone()))
            .clone();
        let mut out = self.queued_messages();
        for n in &names {
            self.subs.sets[space.index()].insert(n.clone());
            let count = self.subs.count(space);
            wire::confirmation(self.proto, space.subscribe_name(), Some(n), count, &mut out);
        }
        if space == Space::Channel {
            self.redirect_target();
        }
        let login = self.worker.control_login();
        let fresh: Vec<Bytes> = fresh.iter().map(crate::pubsub::backend_name).collect();
        let synced = self.subs.hub.subscribe(id, space, &fresh, &login);
        let out = out.freeze();
        if synced.is_empty() {
            return Ok(Pending::Ready(out));
        }
        // Confirmed once the backends have it, as Redis confirms: a message published after
        // the confirmation reaches the client. A backend that does not answer holds it no
        // longer than SYNC_WAIT (its subscriptions are made when it is back), counted from
        // now: pipelined subscriptions wait together, not one after the other.
        let deadline = tokio::time::Instant::now() + SYNC_WAIT;
        Ok(Pending::Later(Box::pin(async move {
            let all = crate::pubsub::join(synced);
            let _ = tokio::time::timeout_at(deadline, all).await;
            out
        })))
    }

    fn unsubscribe(&mut self, space: Space, c: &Classified<'_>) -> Result<Bytes, DataError> {
        let mut names = names_of(c);
        if space == Space::Shard {
            same_slot(&names)?;
        }
        if names.is_empty() {
            names = self.subs.sets[space.index()].iter().cloned().collect();
        }
        let mut out = self.queued_messages();
        let kind = space.unsubscribe_name();
        if names.is_empty() {
            wire::confirmation(self.proto, kind, None, self.subs.count(space), &mut out);
            return Ok(out.freeze());
        }
        let mut gone = Vec::new();
        for n in &names {
            if self.subs.sets[space.index()].remove(n) {
                self.subs.bytes = self.subs.bytes.saturating_sub(n.len());
                gone.push(n.clone());
            }
            let count = self.subs.count(space);
            wire::confirmation(self.proto, kind, Some(n), count, &mut out);
        }
        if let Some((id, _)) = &self.subs.sink {
            let gone: Vec<Bytes> = gone.iter().map(crate::pubsub::backend_name).collect();
            self.subs.hub.unsubscribe(*id, space, &gone);
        }
        if space == Space::Channel {
            self.redirect_target();
        }
        Ok(out.freeze())
    }

    /// The messages that arrived before the command being answered: they precede its reply,
    /// as they would from Redis. Their bytes are released here (the reply is charged anew).
    fn queued_messages(&self) -> BytesMut {
        let mut out = BytesMut::new();
        if let Some((_, inbox)) = &self.subs.sink {
            let confined = self.rights.as_deref().and_then(|u| u.key_prefix.as_deref());
            let held = write_messages(self.proto, inbox, confined, &mut out);
            inbox.account().release(held);
        }
        out
    }

    /// Writes the messages waiting for the client (called between replies, while the session
    /// waits for input).
    ///
    /// # Errors
    /// The client went over its output limits (it does not read), or the socket failed.
    pub(super) async fn deliver_pubsub(&mut self) -> Result<(), End> {
        let Some((_, inbox)) = &self.subs.sink else {
            return Ok(());
        };
        let account = inbox.account().clone();
        if let Some(o) = account.overflow() {
            return Err(End::Output(o));
        }
        if inbox.is_empty() {
            return Ok(());
        }
        let mut out = BytesMut::new();
        let confined = self.rights.as_deref().and_then(|u| u.key_prefix.as_deref());
        let held = write_messages(self.proto, inbox, confined, &mut out);
        let write = self.stream.send_all(&out);
        tokio::select! {
            biased;
            o = account.overflowed() => return Err(End::Output(o)),
            r = write => r.map_err(End::Io)?,
        }
        account.release(held);
        self.reg.info.touch();
        Ok(())
    }
}

/// Appends every queued message in `proto`; returns the bytes they held. For a user confined
/// to a key prefix, of the pub/sub messages only keyspace notifications of keys under it (its
/// subscriptions are limited to those, `classify::own_keyspace_events`; a key event names
/// any key).
fn write_messages(
    proto: Proto,
    inbox: &Inbox,
    confined: Option<&[u8]>,
    out: &mut BytesMut,
) -> usize {
    let msgs = inbox.take();
    let held = msgs.iter().map(Bytes::len).sum();
    out.reserve(held);
    for m in &msgs {
        if let Some(prefix) = confined
            && !own_key_event(m, prefix)
        {
            continue;
        }
        if proto == Proto::Resp2 && crate::pubsub::tracking::is_redirect_broken(m) {
            continue;
        }
        // A RESP3 redirect target gets an `invalidate` push, as from Redis.
        match crate::pubsub::tracking::for_resp3_target(m).filter(|_| proto == Proto::Resp3) {
            Some(push) => out.extend_from_slice(&push),
            None => wire::message_for(proto, m, out),
        }
    }
    held
}

/// Whether a user confined to `prefix` may be shown `push`: a message only when it is a
/// keyspace notification of a key under the prefix; anything else in the inbox (tracking's
/// invalidations, kept under the prefix by `tracking`) as it is.
fn own_key_event(push: &[u8], prefix: &[u8]) -> bool {
    match wire::classify_push(push) {
        wire::Push::Message { channel, .. } => {
            wire::notified_key(channel, push).is_some_and(|k| k.starts_with(prefix))
        }
        _ => true,
    }
}

/// The command's channels or patterns, copied: a slice of the request would keep the whole
/// read buffer it was decoded from alive for as long as the subscription lasts.
fn names_of(c: &Classified<'_>) -> Vec<Bytes> {
    (1..c.req.argc())
        .map(|i| Bytes::copy_from_slice(c.req.arg(i)))
        .collect()
}

/// Shard channels of one command must share a slot (Redis Cluster's rule).
fn same_slot(names: &[Bytes]) -> Result<(), DataError> {
    let mut slots = names.iter().map(|n| SlotId::of_key(n));
    match slots.next() {
        Some(first) if slots.any(|s| s != first) => Err(DataError::CrossSlot),
        _ => Ok(()),
    }
}
