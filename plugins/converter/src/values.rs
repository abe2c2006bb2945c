//! Value compression, per command: which arguments are values to store compressed, which
//! replies carry values to decompress, and which commands are refused on compressed keys
//! because they read or change a value's bytes in place.

use tessera_plugin_sdk::{Command, cmd};

use crate::codec;
use crate::config::Compression;
use crate::plan::{Plan, ReplyOp};

/// Why `c` is refused on a compressed key, if it is (text after `ERR converter: <NAME> `).
pub(crate) fn refusal(c: &Command<'_>) -> Option<&'static str> {
    match c.id() {
        cmd::APPEND | cmd::SETRANGE | cmd::GETRANGE | cmd::SUBSTR | cmd::LCS => {
            Some("works on a value's bytes, which are stored compressed under this key prefix")
        }
        cmd::SETBIT
        | cmd::GETBIT
        | cmd::BITCOUNT
        | cmd::BITPOS
        | cmd::BITFIELD
        | cmd::BITFIELD_RO
        | cmd::BITOP => {
            Some("works on a value's bits, which are stored compressed under this key prefix")
        }
        cmd::SORT | cmd::SORT_RO => {
            Some("would sort values stored compressed under this key prefix by their stored bytes")
        }
        _ => None,
    }
}

/// The value arguments of `c` and the key argument each belongs to.
fn value_args(c: &Command<'_>) -> Vec<(usize, usize)> {
    let n = c.len();
    match c.id() {
        cmd::SET | cmd::SETNX | cmd::GETSET => vec![(2, 1)],
        cmd::SETEX | cmd::PSETEX => vec![(3, 1)],
        cmd::MSET | cmd::MSETNX => (2..n).step_by(2).map(|i| (i, i - 1)).collect(),
        cmd::HSET | cmd::HMSET => (3..n).step_by(2).map(|i| (i, 1)).collect(),
        cmd::HSETNX | cmd::LSET | cmd::LREM => vec![(3, 1)],
        cmd::LPUSH | cmd::RPUSH | cmd::LPUSHX | cmd::RPUSHX => (2..n).map(|i| (i, 1)).collect(),
        // The pivot is matched against stored elements: encoded like them, it matches.
        cmd::LINSERT => vec![(3, 1), (4, 1)],
        cmd::LPOS => vec![(2, 1)],
        _ => Vec::new(),
    }
}

/// How the reply of `c` carries values, if it does.
fn reply_op(c: &Command<'_>) -> Option<ReplyOp> {
    Some(match c.id() {
        cmd::GET
        | cmd::GETDEL
        | cmd::GETEX
        | cmd::GETSET
        | cmd::SET
        | cmd::HGET
        | cmd::LINDEX
        | cmd::LPOP
        | cmd::RPOP
        | cmd::LMOVE
        | cmd::BLMOVE
        | cmd::RPOPLPUSH
        | cmd::BRPOPLPUSH
        | cmd::MGET
        | cmd::HMGET
        | cmd::HVALS
        | cmd::LRANGE => ReplyOp::Values,
        cmd::HGETALL => ReplyOp::Odd,
        cmd::HRANDFIELD => ReplyOp::Pairs,
        cmd::HSCAN => ReplyOp::HashScan,
        cmd::BLPOP | cmd::BRPOP | cmd::LMPOP | cmd::BLMPOP => ReplyOp::KeyHead,
        cmd::STRLEN | cmd::HSTRLEN => ReplyOp::Len,
        _ => return None,
    })
}

/// Plans compression for `c`, one of whose keys `comp` covers. `Err` is the refusal text.
pub(crate) fn plan(c: &Command<'_>, comp: &Compression, p: &mut Plan) -> Result<(), &'static str> {
    if let Some(why) = refusal(c) {
        return Err(why);
    }
    for (v, k) in value_args(c) {
        let (Some(key), Some(value)) = (c.bytes(k), c.bytes(v)) else {
            continue;
        };
        if !comp.covers(key) {
            continue;
        }
        if let Some(stored) = codec::encode(value, comp.min_bytes) {
            p.replace(v, stored);
        }
    }
    if let Some(op) = reply_op(c) {
        p.reply.decompress = true;
        match op {
            // HRANDFIELD without WITHVALUES returns fields only.
            ReplyOp::Pairs if !has_word(c, b"WITHVALUES") => p.reply.decompress = false,
            // SET answers a value only with its GET option.
            ReplyOp::Values if c.is(cmd::SET) && !has_word(c, b"GET") => {
                p.reply.decompress = false;
            }
            ReplyOp::Len => {
                p.name = Some(if c.is(cmd::STRLEN) { b"GET" } else { b"HGET" });
                p.reply.op = op;
            }
            // KeyHead is set by the namespace plan as well; Values is the default.
            _ => p.reply.op = op,
        }
    }
    Ok(())
}

fn has_word(c: &Command<'_>, word: &[u8]) -> bool {
    (2..c.len()).any(|i| c.bytes(i).is_some_and(|a| a.eq_ignore_ascii_case(word)))
}

/// The commands whose arguments or replies compression changes, or which it refuses: what a
/// converter with compression alone hooks.
pub(crate) const HOOKED: &[u16] = &[
    cmd::SET,
    cmd::SETNX,
    cmd::GETSET,
    cmd::SETEX,
    cmd::PSETEX,
    cmd::MSET,
    cmd::MSETNX,
    cmd::HSET,
    cmd::HMSET,
    cmd::HSETNX,
    cmd::LSET,
    cmd::LREM,
    cmd::LPUSH,
    cmd::RPUSH,
    cmd::LPUSHX,
    cmd::RPUSHX,
    cmd::LINSERT,
    cmd::LPOS,
    cmd::GET,
    cmd::GETDEL,
    cmd::GETEX,
    cmd::HGET,
    cmd::LINDEX,
    cmd::LPOP,
    cmd::RPOP,
    cmd::LMOVE,
    cmd::BLMOVE,
    cmd::RPOPLPUSH,
    cmd::BRPOPLPUSH,
    cmd::MGET,
    cmd::HMGET,
    cmd::HVALS,
    cmd::LRANGE,
    cmd::HGETALL,
    cmd::HRANDFIELD,
    cmd::HSCAN,
    cmd::BLPOP,
    cmd::BRPOP,
    cmd::LMPOP,
    cmd::BLMPOP,
    cmd::STRLEN,
    cmd::HSTRLEN,
    cmd::APPEND,
    cmd::SETRANGE,
    cmd::GETRANGE,
    cmd::SUBSTR,
    cmd::LCS,
    cmd::SETBIT,
    cmd::GETBIT,
    cmd::BITCOUNT,
    cmd::BITPOS,
    cmd::BITFIELD,
    cmd::BITFIELD_RO,
    cmd::BITOP,
    cmd::SORT,
    cmd::SORT_RO,
];
