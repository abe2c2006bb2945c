//! The data path's one error type. Every error a client can see is a `DataError`, made where
//! the problem is found and rendered once, by [`DataError::reply`], into a RESP error line with
//! a stable prefix (`ERR`, `NOAUTH`, `WRONGPASS`, `NOPERM`, `CROSSSLOT`, `TRYAGAIN`, …).
//!
//! Each error knows its [`Side`]: who caused it. The session decides from the side and from
//! [`DataError::closes`] whether to answer and go on, or answer and close the connection.
//! This module sits below every stage of the data path (`resp` is the only thing it uses), so
//! the stages return it without importing each other.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use tessera_resp::ProtocolError;

/// Who caused an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client sent something malformed or meaningless.
    Client,
    /// Well formed, but the proxy's policy (auth, command rules, rights) refuses it.
    Policy,
    /// A client went over one of its limits (buffers, memory).
    Limit,
    /// The routing table has no usable backend for it.
    Routing,
    /// A backend failed or answered something the proxy cannot use.
    Backend,
    /// A plugin refused it or failed.
    Plugin,
    /// A slot migration is in the way.
    Migration,
}

/// An error on the data path. `Display` is the exact text of the error reply (without `-`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataError {
    // === client ===
    #[error("ERR Protocol error: {0}")]
    Protocol(ProtocolError),
    #[error("ERR unknown command '{0}'")]
    UnknownCommand(String),
    #[error("ERR unknown subcommand '{sub}'. Try {container} HELP.")]
    UnknownSubcommand { container: Box<str>, sub: Box<str> },
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    #[error("ERR syntax error")]
    Syntax,
    /// A syntax error with Redis's own wording (e.g. HELLO's unknown option).
    #[error("ERR {0}")]
    Invalid(String),
    #[error("NOPROTO unsupported protocol version")]
    NoProto,
    #[error("ERR invalid cursor")]
    InvalidCursor,
    #[error("ERR DB index is out of range")]
    DbOutOfRange,
    /// SELECT while keys are watched: the watch's connection stays in its database.
    #[error("ERR SELECT while keys are watched is not supported through tessera: UNWATCH first")]
    SelectWhileWatching,
    #[error("EXECABORT Transaction discarded because of previous errors.")]
    ExecAbort,
    #[error("ERR command '{0}' cannot be queued in a transaction through tessera")]
    NotInTransaction(String),
    /// A command Redis never queues (`no-multi`: SAVE, SHUTDOWN, SUBSCRIBE …), in Redis's words.
    #[error("ERR Command not allowed inside a transaction")]
    NoMulti,

    // === policy ===
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    #[error(
        "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
    )]
    NoAuthHello,
    #[error("WRONGPASS invalid username-password pair or user is disabled.")]
    WrongPass,
    #[error(
        "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
    )]
    NoPasswordConfigured,
    #[error(
        "ERR command '{0}' is disabled: set admin_commands = true in the proxy config to allow cluster-wide admin commands"
    )]
    AdminDisabled(String),
    #[error(
        "ERR command '{0}' is disabled: Redis marks it dangerous; set admin_commands = true in the proxy config to allow it"
    )]
    DangerousDisabled(String),
    #[error("ERR command '{0}' is not allowed through tessera")]
    Refused(String),
    #[error("ERR command '{0}' is not supported by tessera")]
    Unsupported(String),
    #[error("NOPERM User {user} has no permissions to run the '{command}' command")]
    NoPermCommand { user: Box<str>, command: Box<str> },
    #[error("NOPERM User {user} has no permissions to access the '{key}' key")]
    NoPermKey { user: Box<str>, key: Box<str> },
    /// A database outside the user's `databases` (as Valkey 9.1's `db=` rule).
    #[error("NOPERM User {user} has no permissions to access database {db}")]
    NoPermDb { user: Box<str>, db: u32 },
    /// A confined user asked to hear of keys outside its prefix (CLIENT TRACKING … PREFIX).
    #[error(
        "NOPERM User {user} may only track keys starting with '{allowed}': the prefix '{prefix}' is outside it"
    )]
    NoPermPrefix {
        user: Box<str>,
        prefix: Box<str>,
        allowed: Box<str>,
    },
    #[error(
        "ERR keys starting with '__tessera:' are reserved for Tessera's own use: '{0}' cannot be used"
    )]
    ReservedKey(String),
    #[error(
        "ERR command '{0}' is disabled: scripts can only run on backends where Tessera confines them (backend_acl = false)"
    )]
    ScriptsUnconfined(String),

    // === limits ===
    #[error("ERR query buffer limit reached: a request larger than {limit} bytes")]
    QueryBufferLimit { limit: usize },
    #[error(
        "ERR the proxy holds too much memory for unfinished requests; try again (limit {limit} bytes)"
    )]
    ProxyRequestMemory { limit: usize },
    #[error("ERR max number of clients reached")]
    MaxClients,

    // === routing ===
    #[error("CROSSSLOT Keys in request don't hash to the same slot")]
    CrossSlot,
    #[error("ERR slot {0} is not served by any group")]
    SlotNotServed(u16),
    #[error(
        "CROSSSLOT keys of this command belong to different clusters (key prefix routes: {0}); send it once per cluster"
    )]
    CrossCluster(String),
    #[error(
        "TRYAGAIN keys starting with '{prefix}' belong to cluster {cluster}, and none of its proxies is reachable from this one now"
    )]
    RouteUnreachable { prefix: String, cluster: Arc<str> },
    #[error("ERR group {group} master {addr} is down")]
    MasterDown { group: u32, addr: Arc<str> },
    #[error("TRYAGAIN slot {0} is being handed to another group; retry shortly")]
    SlotBlocked(u16),
    #[error(
        "TRYAGAIN this proxy lost touch with the cluster store and does not serve until it is registered again; retry, or use another proxy"
    )]
    Fenced,
    #[error("ERR no backend is serving any slot")]
    NoBackend,
    #[error(
        "TRYAGAIN no replica of group {group} is known to be within {max_lag_ms} ms of its master (read policy replica-only)"
    )]
    NoFreshReplica { group: u32, max_lag_ms: u64 },
    #[error(
        "TRYAGAIN slot {0} is moving to another group: the transaction was discarded, nothing of it ran; retry it"
    )]
    TransactionMoved(u16),

    // === backend ===
    #[error("ERR backend {addr} unavailable: {reason}")]
    BackendUnavailable { addr: Arc<str>, reason: Arc<str> },
    #[error("ERR backend connection dropped the request")]
    BackendDropped,
    /// A server that is not one of the cluster's (a mirror's shadow) sent a reply past the
    /// bound the proxy reads of it; the connection was closed.
    #[error("ERR backend {addr} sent a reply over {limit} bytes")]
    ReplyTooLarge { addr: Arc<str>, limit: usize },
    #[error("ERR unexpected reply from backend to {0}")]
    UnexpectedReply(&'static str),
    #[error("ERR SCAN cursor out of range for this cluster")]
    CursorOutOfRange,
    #[error(
        "ERR backend {addr} has {limit} dedicated connections for blocking commands and WATCH already (dedicated_connections); try again later"
    )]
    DedicatedExhausted { addr: Arc<str>, limit: usize },
    /// The parts' replies could not be merged (e.g. a SUM past i64: Redis's overflow text).
    #[error("ERR {0}")]
    Merge(#[from] tessera_plugin_abi::merge::MergeError),

    // === plugins ===
    #[error("ERR plugin {name} failed: {reason}")]
    PluginFailed { name: Box<str>, reason: Box<str> },
    /// A plugin call that failed; `detail` says how ("cannot take this command: …").
    #[error("ERR plugin {name} {detail}")]
    PluginCall { name: Box<str>, detail: Box<str> },
    #[error("ERR plugins unavailable: {0}")]
    PluginsUnavailable(String),
    #[error("ERR plugin {name} rewrote into a bad command: {reason}")]
    PluginBadRewrite { name: Box<str>, reason: Box<str> },

    // === migration ===
    #[error("TRYAGAIN a key of this command is being moved to another group; retry shortly")]
    KeyMoving,
}

impl DataError {
    /// Who caused it.
    pub fn side(&self) -> Side {
        use DataError::*;
        match self {
            Protocol(_)
            | UnknownCommand(_)
            | UnknownSubcommand { .. }
            | WrongArity(_)
            | Syntax
            | Invalid(_)
            | NoProto
            | InvalidCursor
            | DbOutOfRange
            | SelectWhileWatching
            | ExecAbort
            | NotInTransaction(_)
            | NoMulti => Side::Client,
            NoAuth
            | NoAuthHello
            | WrongPass
            | NoPasswordConfigured
            | AdminDisabled(_)
            | DangerousDisabled(_)
            | Refused(_)
            | Unsupported(_)
            | NoPermCommand { .. }
            | NoPermKey { .. }
            | NoPermDb { .. }
            | NoPermPrefix { .. }
            | ReservedKey(_)
            | ScriptsUnconfined(_) => Side::Policy,
            QueryBufferLimit { .. } | ProxyRequestMemory { .. } | MaxClients => Side::Limit,
            CrossSlot
            | SlotNotServed(_)
            | CrossCluster(_)
            | RouteUnreachable { .. }
            | MasterDown { .. }
            | SlotBlocked(_)
            | Fenced
            | NoBackend
            | NoFreshReplica { .. }
            | TransactionMoved(_) => Side::Routing,
            BackendUnavailable { .. }
            | BackendDropped
            | ReplyTooLarge { .. }
            | UnexpectedReply(_)
            | CursorOutOfRange
            | DedicatedExhausted { .. }
            | Merge(_) => Side::Backend,
            PluginFailed { .. }
            | PluginCall { .. }
            | PluginsUnavailable(_)
            | PluginBadRewrite { .. } => Side::Plugin,
            KeyMoving => Side::Migration,
        }
    }

    /// After this error the connection is closed: the byte stream cannot be trusted any more,
    /// or the client went over a limit (as Redis closes a client over its query buffer limit).
    pub fn closes(&self) -> bool {
        matches!(self.side(), Side::Limit) || matches!(self, DataError::Protocol(_))
    }

    /// The error reply, `-<text>\r\n`. The text is kept on one line whatever it quotes.
    pub fn reply(&self) -> Bytes {
        let text = self.to_string();
        let mut out = BytesMut::with_capacity(text.len() + 3);
        out.put_u8(b'-');
        out.extend(
            text.bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        out.put_slice(b"\r\n");
        out.freeze()
    }
}

impl From<ProtocolError> for DataError {
    fn from(e: ProtocolError) -> Self {
        DataError::Protocol(e)
    }
}

/// How a command name is shown in errors: `CLIENT|LIST` as users type it, `CLIENT LIST`.
pub fn display_name(name: &str) -> String {
    name.replace('|', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_side_renders_its_stable_prefix() {
        let cases: [(DataError, &str); 10] = [
            (DataError::NoAuth, "-NOAUTH "),
            (DataError::WrongPass, "-WRONGPASS "),
            (DataError::CrossSlot, "-CROSSSLOT "),
            (DataError::SlotBlocked(7), "-TRYAGAIN "),
            (DataError::KeyMoving, "-TRYAGAIN "),
            (
                DataError::NoPermKey {
                    user: "a".into(),
                    key: "k".into(),
                },
                "-NOPERM ",
            ),
            (
                DataError::NoPermPrefix {
                    user: "a".into(),
                    prefix: "v:".into(),
                    allowed: "t1:".into(),
                },
                "-NOPERM ",
            ),
            (DataError::NoProto, "-NOPROTO "),
            (DataError::Syntax, "-ERR "),
            (
                DataError::Protocol(ProtocolError::InvalidBulkLength),
                "-ERR Protocol error: ",
            ),
        ];
        for (e, prefix) in cases {
            let r = e.reply();
            assert!(r.starts_with(prefix.as_bytes()), "{e:?} -> {r:?}");
            assert!(r.ends_with(b"\r\n"));
        }
    }

    #[test]
    fn quoted_text_cannot_break_the_reply_line() {
        let r = DataError::UnknownCommand("a\r\nb".into()).reply();
        assert_eq!(&r[..], b"-ERR unknown command 'a  b'\r\n");
    }

    #[test]
    fn limits_and_protocol_errors_close_the_connection() {
        assert!(DataError::QueryBufferLimit { limit: 1 }.closes());
        assert!(DataError::Protocol(ProtocolError::InlineTooBig).closes());
        assert!(!DataError::CrossSlot.closes());
        assert!(!DataError::WrongPass.closes());
    }
}
