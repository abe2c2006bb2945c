//! Key namespaces: what a client confined to a key prefix may run, and how its command
//! changes. Keys (every argument the host flags as a key, from Redis's key specs) get the
//! prefix; SCAN and KEYS get a pattern under it; SORT's BY / GET patterns get it; replies
//! that name keys are planned here and stripped in `reply.rs`.

use tessera_plugin_sdk::{Command, cmd};

use crate::plan::{Plan, ReplyOp};
use crate::scripts::Scripts;

/// The commands whose non-key arguments this module reads (patterns, subcommands): hooked
/// with their values.
pub(crate) const READS_ARGS: &[u16] = &[
    cmd::SCAN,
    cmd::KEYS,
    cmd::SORT,
    cmd::SORT_RO,
    cmd::CLIENT,
    cmd::SCRIPT,
    cmd::FUNCTION,
    // The SHA1 or function name decides whether a confined client may run it (`scripts.rs`).
    cmd::EVALSHA,
    cmd::EVALSHA_RO,
    cmd::FCALL,
    cmd::FCALL_RO,
];

const SHOWS_OTHERS: &str =
    "is not available in a namespace: it shows other clients' commands and keys";

/// Why a namespaced client may not run `c`, if it may not (the text follows
/// `ERR converter: <NAME> `).
pub(crate) fn refusal(c: &Command<'_>, scripts: &Scripts) -> Option<&'static str> {
    let sub = |name: &[u8]| c.bytes(1).is_some_and(|s| s.eq_ignore_ascii_case(name));
    match c.id() {
        cmd::FLUSHALL | cmd::FLUSHDB | cmd::SWAPDB | cmd::MOVE | cmd::MIGRATE | cmd::DBSIZE => {
            Some("works on the whole database, not on a namespace")
        }
        cmd::RANDOMKEY => Some(
            "cannot pick a key of the namespace in one step (use SCAN, which keeps to the \
             namespace)",
        ),
        cmd::MULTI | cmd::WATCH => Some(
            "is not available in a namespace: the proxy cannot queue commands whose keys a \
             plugin rewrites",
        ),
        cmd::SUBSCRIBE
        | cmd::PSUBSCRIBE
        | cmd::SSUBSCRIBE
        | cmd::PUBLISH
        | cmd::SPUBLISH
        | cmd::PUBSUB => Some(
            "is not available in a namespace: channels are shared by every client, and messages \
             and keyspace notifications name keys outside it",
        ),
        cmd::MONITOR | cmd::SLOWLOG => Some(SHOWS_OTHERS),
        // Valkey's COMMANDLOG is not in the ABI's Redis 7.0 table (id 0): known by its name.
        0 if c.name().eq_ignore_ascii_case(b"COMMANDLOG") => Some(SHOWS_OTHERS),
        cmd::DEBUG | cmd::CONFIG => Some("is not available in a namespace"),
        cmd::CLIENT if sub(b"TRACKING") => Some(
            "TRACKING is not available in a namespace: invalidation messages name the stored \
             keys",
        ),
        cmd::SCRIPT if sub(b"FLUSH") => Some("FLUSH removes every namespace's scripts"),
        // The proxy sends it to every group: it would stop another namespace's script.
        cmd::SCRIPT if sub(b"KILL") => {
            Some("KILL stops the running script, whichever namespace it belongs to")
        }
        cmd::FUNCTION if !(sub(b"LIST") || sub(b"STATS") || sub(b"HELP")) => {
            Some("changes libraries every namespace shares")
        }
        _ => scripts.refusal(c),
    }
}

/// Plans the namespace's changes to `c` (which [`refusal`] let through).
pub(crate) fn plan(c: &Command<'_>, ns: u16, prefix: &[u8], p: &mut Plan) {
    p.reply.namespace = Some(ns);
    if c.first_key().is_some() {
        p.key_prefix = Some(prefix.to_vec());
    }
    match c.id() {
        cmd::SCAN => scan(c, prefix, p),
        cmd::KEYS => {
            if let Some(pat) = c.bytes(1) {
                p.replace(1, [prefix, pat].concat());
            }
            p.reply.op = ReplyOp::Keys;
        }
        cmd::SORT | cmd::SORT_RO => sort_patterns(c, prefix, p),
        cmd::BLPOP
        | cmd::BRPOP
        | cmd::BZPOPMIN
        | cmd::BZPOPMAX
        | cmd::LMPOP
        | cmd::BLMPOP
        | cmd::ZMPOP
        | cmd::BZMPOP => p.reply.op = ReplyOp::KeyHead,
        cmd::XREAD | cmd::XREADGROUP => p.reply.op = ReplyOp::Streams,
        _ => {}
    }
}

/// `SCAN cursor [MATCH p] [COUNT n] [TYPE t]`: the pattern is put under the prefix, and a
/// SCAN without MATCH gets `MATCH <prefix>*`, so only the namespace's keys come back.
fn scan(c: &Command<'_>, prefix: &[u8], p: &mut Plan) {
    p.reply.op = ReplyOp::Scan;
    let mut i = 2;
    let mut matched = false;
    while i + 1 < c.len() {
        if c.bytes(i).is_some_and(|a| a.eq_ignore_ascii_case(b"MATCH")) {
            let pat = c.bytes(i + 1).unwrap_or_default();
            p.replace(i + 1, [prefix, pat].concat());
            matched = true;
        }
        i += 2;
    }
    if !matched {
        p.appended.push(b"MATCH".to_vec());
        p.appended.push([prefix, b"*"].concat());
    }
}

/// SORT's `BY pattern` and `GET pattern` read the keys the pattern names once `*` is replaced
/// by an element; under the prefix, they can only name the namespace's keys. A pattern without
/// `*` (`BY nosort`, `GET #`) reads no key and is left alone.
fn sort_patterns(c: &Command<'_>, prefix: &[u8], p: &mut Plan) {
    let mut i = 2;
    while i + 1 < c.len() {
        let opt = c.bytes(i).unwrap_or_default();
        // Parsed as Redis parses SORT's options, so no pattern is read as something else.
        if opt.eq_ignore_ascii_case(b"BY") || opt.eq_ignore_ascii_case(b"GET") {
            let pat = c.bytes(i + 1).unwrap_or_default();
            if pat.contains(&b'*') {
                p.replace(i + 1, [prefix, pat].concat());
            }
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"LIMIT") {
            i += 3;
        } else if opt.eq_ignore_ascii_case(b"STORE") {
            i += 2;
        } else {
            i += 1;
        }
    }
}
