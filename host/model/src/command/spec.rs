//! The shape of a command definition as Redis describes it (`COMMAND` reply): arity, flags,
//! ACL categories and key specs. `generated.rs` is a table of these.

/// Where the search for keys begins (Redis key spec `begin_search`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Begin {
    /// Keys start at this argument index.
    Index(i32),
    /// Keys start after `keyword`, searched from `startfrom` (negative: from the end, backwards).
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
    Unknown,
}

/// How many keys follow the start (Redis key spec `find_keys`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Find {
    /// Up to `lastkey` (relative to the start; negative counts from the end), every `step`
    /// arguments; `limit` > 1 means only the first 1/limit of the remaining arguments.
    Range {
        lastkey: i32,
        step: i32,
        limit: i32,
    },
    /// The number of keys is the argument at `start + keynumidx`; keys start at
    /// `start + firstkey`, every `step` arguments.
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        step: i32,
    },
    Unknown,
}

#[derive(Debug, Clone, Copy)]
// `write` and `incomplete` are kept from the definition for the replica read policy and the
// plugin key views, which read them; the data path does not yet.
#[allow(dead_code)]
pub(crate) struct KeySpec {
    pub(crate) begin: Begin,
    pub(crate) find: Find,
    /// The key is written (RW, OW or RM in Redis's key-spec flags).
    pub(crate) write: bool,
    /// Redis marks the spec as not finding every key (e.g. SORT's BY/GET patterns).
    pub(crate) incomplete: bool,
}

/// One command (or subcommand, named `CONTAINER|SUB`) as the server defines it.
#[derive(Debug)]
pub(crate) struct RawCommand {
    pub(crate) name: &'static str,
    /// Redis arity: positive is exact argc, negative is a minimum.
    pub(crate) arity: i32,
    pub(crate) flags: u32,
    pub(crate) acl: u32,
    pub(crate) keys: &'static [KeySpec],
    pub(crate) subcommands: &'static [RawCommand],
}

pub(crate) const F_WRITE: u32 = 1 << 0;
pub(crate) const F_READONLY: u32 = 1 << 1;
pub(crate) const F_ADMIN: u32 = 1 << 2;
pub(crate) const F_PUBSUB: u32 = 1 << 3;
pub(crate) const F_NOSCRIPT: u32 = 1 << 4;
pub(crate) const F_BLOCKING: u32 = 1 << 5;
pub(crate) const F_LOADING: u32 = 1 << 6;
pub(crate) const F_STALE: u32 = 1 << 7;
pub(crate) const F_SKIP_MONITOR: u32 = 1 << 8;
pub(crate) const F_FAST: u32 = 1 << 9;
pub(crate) const F_MOVABLEKEYS: u32 = 1 << 10;
pub(crate) const F_NO_MANDATORY_KEYS: u32 = 1 << 11;
pub(crate) const F_ALLOW_BUSY: u32 = 1 << 12;
pub(crate) const F_NO_MULTI: u32 = 1 << 13;
pub(crate) const F_DENYOOM: u32 = 1 << 14;

pub(crate) const A_KEYSPACE: u32 = 1 << 0;
pub(crate) const A_READ: u32 = 1 << 1;
pub(crate) const A_WRITE: u32 = 1 << 2;
pub(crate) const A_ADMIN: u32 = 1 << 3;
pub(crate) const A_DANGEROUS: u32 = 1 << 4;
pub(crate) const A_CONNECTION: u32 = 1 << 5;
pub(crate) const A_TRANSACTION: u32 = 1 << 6;
pub(crate) const A_SCRIPTING: u32 = 1 << 7;
pub(crate) const A_BLOCKING: u32 = 1 << 8;
pub(crate) const A_PUBSUB: u32 = 1 << 9;
pub(crate) const A_SLOW: u32 = 1 << 10;
pub(crate) const A_FAST: u32 = 1 << 11;
