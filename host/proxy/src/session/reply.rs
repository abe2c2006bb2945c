//! Replies that are not ready yet, and their resolution into bytes: one backend's reply as it
//! came, or several replies merged. Resolution
//! happens here only; what plugins do with a reply afterwards is the plugin layer's, applied
//! by the session to the bytes this module wrote.

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use crate::backend::{ReplyResult, ReplyRx};
use crate::stages::merge::Merge;
use tessera_model::error::DataError;
use tessera_model::limits::OutputAccount;
use tessera_resp::Proto;

/// A reply in a session's ordered queue.
pub(crate) enum Pending {
    /// Encoded already (proxy-answered commands, errors).
    Ready(Bytes),
    /// Encoded already, but not to be sent before `Instant` (a failed AUTH is slowed down;
    /// boxed: rare, and it would make every `Pending` larger).
    After(Box<(Instant, Bytes)>),
    /// One backend's reply, forwarded as is.
    One(ReplyRx),
    /// Several replies, merged.
    Gather(Box<Gather>),
    /// A command that may hold its connection until answered (BLPOP, WAIT …): it ends its
    /// batch, and is not started before the replies ahead of it (see `session::blocking`).
    Blocked(std::pin::Pin<Box<dyn Future<Output = ReplyResult>>>),
    /// A reply the session works out over several requests (a script reloaded where it was
    /// missing, see `session::scripts`); in its batch like any.
    Task(std::pin::Pin<Box<dyn Future<Output = ReplyResult>>>),
    /// Composed by the session once something else is done (a subscription's confirmation,
    /// once the backends have it).
    Later(std::pin::Pin<Box<dyn Future<Output = Bytes>>>),
}

pub(crate) struct Gather {
    pub(crate) parts: Vec<Pending>,
    pub(crate) merge: Merge,
    /// The session's protocol when the command was read (a later HELLO must not change it).
    pub(crate) proto: Proto,
}

impl Pending {
    pub(crate) fn error(e: &DataError) -> Self {
        Pending::Ready(e.reply())
    }

    /// The reply's bytes (a backend reply is returned as received, without a copy).
    ///
    /// # Errors
    /// The backend failed, or the parts could not be merged.
    pub(crate) async fn resolve(self, account: &OutputAccount) -> Result<Bytes, DataError> {
        match self {
            Pending::Ready(b) => Ok(b),
            Pending::After(after) => {
                let (at, b) = *after;
                tokio::time::sleep_until(at).await;
                Ok(b)
            }
            Pending::One(rx) => taken(rx.await, account),
            Pending::Blocked(f) | Pending::Task(f) => taken(f.await, account),
            Pending::Later(f) => Ok(f.await),
            Pending::Gather(g) => {
                let Gather {
                    parts,
                    merge,
                    proto,
                } = *g;
                let replies = Box::pin(resolve_all(parts, account)).await?;
                let mut out = BytesMut::new();
                merge.finish(&replies, proto, &mut out)?;
                Ok(out.freeze())
            }
        }
    }
}

/// Every part's reply, in order. A failed part (no reply at all) fails the whole: merging the
/// others would give the client a partial answer.
///
/// # Errors
/// The first part that has no reply.
pub(crate) async fn resolve_all(
    parts: Vec<Pending>,
    account: &OutputAccount,
) -> Result<Vec<Bytes>, DataError> {
    let mut replies = Vec::with_capacity(parts.len());
    let mut failed = None;
    for p in parts {
        match p.resolve(account).await {
            Ok(b) => replies.push(b),
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(replies),
    }
}

/// A reply a backend delivered for the client, taken: its bytes are no longer held for it.
#[inline]
pub(crate) fn taken(r: ReplyResult, account: &OutputAccount) -> ReplyResult {
    if let Ok(b) = &r {
        account.release(b.len());
    }
    r
}
