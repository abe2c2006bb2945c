//! What passes from the dispatch stages to the reply stages: one command's place in its
//! client's reply order ([`Queued`]), that is the reply it waits for and what the after-reply
//! phase needs once it is in ([`Done`]).

use super::plugins::{Observers, PluginMerge};
use super::reply::Pending;
use tessera_model::command::CommandId;
use tessera_model::error::DataError;

/// One command's place in the reply order.
///
/// Every command's record is built, moved into the batch's queue and moved out again: it is
/// kept within 128 bytes, past which those moves become `memmove` calls (issue 14's record
/// had grown to 176 bytes and `memmove` to 3 % of the proxy's CPU, docs/bench.md). What only
/// some commands carry is boxed.
pub(super) struct Queued {
    pub(super) reply: QueuedReply,
    pub(super) done: Done,
}

const _: () = assert!(std::mem::size_of::<Queued>() <= 128);

pub(super) enum QueuedReply {
    One(Pending),
    /// A rewrite whose replies the plugin merges (boxed: rare, and large).
    PluginMerged(Box<(Vec<Pending>, PluginMerge)>),
}

/// What the after-reply phase (`session::after_reply`) needs of a command once its reply is in.
pub(super) struct Done {
    pub(super) observers: Observers,
    /// The request as read (its bytes, not a copy), for the command log, the per-slot
    /// counters and the hot-key count once the reply is in.
    pub(super) req: bytes::Bytes,
    /// A mirror copy or a hot-key cache fill to make once the reply is in.
    pub(super) extra: Option<Box<Extra>>,
    pub(super) id: Option<CommandId>,
    /// The first key (where it lies in `req`), when the hot-key count samples this command.
    pub(super) hot_key: Option<KeyAt>,
    /// The slot of the command's first key (`NO_SLOT`: keyless, or another cluster's), for
    /// the per-slot counters.
    pub(super) slot: u16,
    /// Whether the slow log times it (not a command that waits by design).
    pub(super) timed: bool,
    /// Its reply is not written (`CLIENT REPLY OFF` or `SKIP`); the command still ran.
    pub(super) silent: bool,
}

/// What few commands carry to their reply.
#[derive(Default)]
pub(super) struct Extra {
    /// To be mirrored (docs/mirroring.md).
    pub(super) mirror: Option<Box<crate::mirror::Ticket>>,
    /// A GET whose reply fills the hot-key cache.
    pub(super) hot_fill: Option<super::hot_cache::HotFill>,
    /// What the command may have written that a hot-key cache could hold: counted again once
    /// its reply is in (see `session::hot_cache`).
    pub(super) hot_write: crate::hotcache::Written,
}

/// Where a key lies in its request's bytes (a request's arguments never start at 0).
#[derive(Clone, Copy)]
pub(super) struct KeyAt {
    pub(super) start: std::num::NonZeroU32,
    pub(super) len: u32,
}

/// `Done::slot` of a command without keys.
pub(super) const NO_SLOT: u16 = u16::MAX;

impl Queued {
    pub(super) fn new(reply: QueuedReply, observers: Observers, id: Option<CommandId>) -> Self {
        Self {
            reply,
            done: Done {
                observers,
                req: bytes::Bytes::new(),
                extra: None,
                id,
                hot_key: None,
                slot: NO_SLOT,
                timed: false,
                silent: false,
            },
        }
    }

    /// A command that may hold its connection: the batch ends with it.
    pub(super) fn blocked(&self) -> bool {
        matches!(self.reply, QueuedReply::One(Pending::Blocked(_)))
    }

    pub(super) fn error(id: Option<CommandId>, e: &DataError) -> Self {
        Self::new(
            QueuedReply::One(Pending::error(e)),
            Observers::default(),
            id,
        )
    }
}

impl KeyAt {
    /// The key's bytes in `req`.
    pub(super) fn of(self, req: &[u8]) -> Option<&[u8]> {
        let start = self.start.get() as usize;
        req.get(start..start + self.len as usize)
    }
}
