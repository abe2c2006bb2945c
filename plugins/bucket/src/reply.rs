//! `on_reply`: the merges no generic host merge gets exactly right.

use tessera_plugin_sdk::resp::{self, Value};
use tessera_plugin_sdk::{Replies, ReplyAction, ReplyOut};

use crate::ops::{next_cursor, push_bulk_int};
use crate::{Bucket, op, zrange};

/// Dispatches on the operation in the low byte of `ctx`.
pub(crate) fn merge(
    plugin: &mut Bucket,
    ctx: u64,
    replies: &Replies<'_>,
    out: ReplyOut<'_>,
) -> ReplyAction {
    let (op, param) = ((ctx & 0xff) as u8, ctx >> 8);
    // Free the pending query first, whatever the replies are.
    let query = (op == op::ZRANGE)
        .then(|| plugin.pending.take(param))
        .flatten();
    if let Some(e) = replies.first_error() {
        return out.replace_raw(e);
    }
    match op {
        op::ANY => any_positive(replies, out),
        op::TTL => ttl(replies, out),
        op::TYPE => match replies
            .iter()
            .find(|r| !matches!(resp::parse(r), Ok((Value::Simple(b"none"), _))))
        {
            Some(r) => out.replace_raw(r),
            None => out.replace_raw(b"+none\r\n"),
        },
        op::SCAN => scan(param, replies, out),
        op::ZRANGE => match query {
            Some(q) => zrange::finish(q, replies, out),
            None => out.error("ERR bucket: range query state lost"),
        },
        _ => out.error("ERR bucket: unknown reply context"),
    }
}

fn ints<'a>(replies: &'a Replies<'_>) -> impl Iterator<Item = Option<i64>> + 'a {
    replies.iter().map(|r| match resp::parse(r) {
        Ok((Value::Int(n), _)) => Some(n),
        _ => None,
    })
}

/// DEL, UNLINK, EXISTS, EXPIRE …, PERSIST on one logical key: 1 if any bucket said so.
fn any_positive(replies: &Replies<'_>, out: ReplyOut<'_>) -> ReplyAction {
    let mut any = false;
    for n in ints(replies) {
        match n {
            Some(n) => any |= n > 0,
            None => return out.error("ERR bucket: unexpected reply"),
        }
    }
    out.replace_raw(if any { b":1\r\n" } else { b":0\r\n" })
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 if no bucket exists, -1 if some part of the key
/// never expires, else the latest (when the last part of the key goes away).
fn ttl(replies: &Replies<'_>, out: ReplyOut<'_>) -> ReplyAction {
    let mut result: i64 = -2;
    for n in ints(replies) {
        match n {
            Some(-2) => {}
            Some(-1) => result = -1,
            Some(n) if result != -1 => result = result.max(n),
            Some(_) => {}
            None => return out.error("ERR bucket: unexpected reply"),
        }
    }
    out.replace(|w| {
        w.int(result);
    })
}

/// `[cursor, items]` from one bucket → the client's cursor, items as they are.
fn scan(param: u64, replies: &Replies<'_>, out: ReplyOut<'_>) -> ReplyAction {
    let (bucket, n) = (param & 0xffff, param >> 16);
    let parsed = replies.value(0).and_then(|v| {
        let mut items = v.as_seq()?.raw_items();
        // Redis cursors are unsigned 64-bit: parse the text, not as an i64.
        let text = resp::parse(items.next()?).ok()?.0.as_bytes()?;
        let cursor = std::str::from_utf8(text).ok()?.parse::<u64>().ok()?;
        Some((cursor, items.next()?))
    });
    let Some((inner, items)) = parsed else {
        return out.error("ERR bucket: unexpected SCAN reply");
    };
    let Some(next) = next_cursor(inner, bucket, n) else {
        return out.error("ERR bucket: SCAN cursor overflow");
    };
    out.replace(|w| {
        w.array(2);
        let mut head = Vec::with_capacity(24);
        push_bulk_int(&mut head, next);
        w.raw(&head).raw(items);
    })
}
