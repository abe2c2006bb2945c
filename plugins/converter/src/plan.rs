//! [`Plan`]: what the converter changes in one command (arguments replaced, added, the name)
//! and what it must do to the reply ([`ReplyOp`]), as `namespace.rs` and `values.rs` decide
//! it; `lib.rs` turns a plan into a pass, an observe or a rewrite.

/// What happens to the reply on its way back (the low byte of the reply context).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(crate) enum ReplyOp {
    /// Nothing (or only decompression of the top-level bulk strings, with `decompress`).
    #[default]
    Values = 0,
    /// Values at odd positions (HGETALL: field, value, …; a RESP3 map likewise).
    Odd = 1,
    /// HRANDFIELD … WITHVALUES: flat field, value (RESP2) or [field, value] pairs (RESP3).
    Pairs = 2,
    /// HSCAN: `[cursor, [field, value, …]]`.
    HashScan = 3,
    /// `[key, value]` or `[key, [values]]` (BLPOP, LMPOP, BZPOPMIN, ZMPOP …): the key is
    /// stripped, the value part decompressed with `decompress`.
    KeyHead = 4,
    /// XREAD / XREADGROUP: stream names are keys (an array of `[key, entries]`, or a map).
    Streams = 5,
    /// SCAN: `[cursor, [keys]]`.
    Scan = 6,
    /// KEYS: `[keys]`.
    Keys = 7,
    /// STRLEN / HSTRLEN sent as GET / HGET: the reply is the value's length.
    Len = 8,
}

impl ReplyOp {
    pub(crate) fn from_u8(v: u8) -> Option<ReplyOp> {
        Some(match v {
            0 => Self::Values,
            1 => Self::Odd,
            2 => Self::Pairs,
            3 => Self::HashScan,
            4 => Self::KeyHead,
            5 => Self::Streams,
            6 => Self::Scan,
            7 => Self::Keys,
            8 => Self::Len,
            _ => return None,
        })
    }
}

/// The reply context: `op | decompress << 8 | namespaced << 9 | namespace << 16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ReplyCtx {
    pub(crate) op: ReplyOp,
    /// Decompress values of the reply.
    pub(crate) decompress: bool,
    /// The namespace whose prefix comes off keys in the reply.
    pub(crate) namespace: Option<u16>,
}

impl ReplyCtx {
    /// Whether the reply needs the plugin at all.
    pub(crate) fn needed(&self) -> bool {
        self.decompress || self.op != ReplyOp::Values
    }

    pub(crate) fn encode(&self) -> u64 {
        let mut v = self.op as u64;
        if self.decompress {
            v |= 1 << 8;
        }
        if let Some(n) = self.namespace {
            v |= 1 << 9 | u64::from(n) << 16;
        }
        v
    }

    pub(crate) fn decode(ctx: u64) -> Option<ReplyCtx> {
        Some(ReplyCtx {
            op: ReplyOp::from_u8(ctx as u8)?,
            decompress: ctx & 1 << 8 != 0,
            namespace: (ctx & 1 << 9 != 0).then_some((ctx >> 16) as u16),
        })
    }
}

/// The changes to one command.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Replacement command name (STRLEN → GET).
    pub(crate) name: Option<&'static [u8]>,
    /// Arguments replaced by whole new bytes (compressed values, prefixed patterns), by index.
    pub(crate) replaced: Vec<(usize, Vec<u8>)>,
    /// Arguments appended at the end (SCAN's MATCH).
    pub(crate) appended: Vec<Vec<u8>>,
    /// The key prefix every key argument gets.
    pub(crate) key_prefix: Option<Vec<u8>>,
    pub(crate) reply: ReplyCtx,
}

impl Plan {
    /// Whether the command goes to Redis unchanged.
    pub(crate) fn unchanged(&self) -> bool {
        self.name.is_none()
            && self.replaced.is_empty()
            && self.appended.is_empty()
            && self.key_prefix.is_none()
    }

    pub(crate) fn replace(&mut self, i: usize, bytes: Vec<u8>) {
        self.replaced.push((i, bytes));
    }

    pub(crate) fn replacement(&self, i: usize) -> Option<&[u8]> {
        self.replaced
            .iter()
            .find(|(j, _)| *j == i)
            .map(|(_, b)| b.as_slice())
    }
}
