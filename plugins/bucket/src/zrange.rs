//! ZRANGE / ZREVRANGE / ZRANGEBYSCORE / ZREVRANGEBYSCORE over buckets: each bucket returns its
//! best candidates with scores, `on_reply` merges them in Redis's order (score, then member
//! bytes; both reversed for REV) and cuts the client's window.

use std::cmp::Ordering;

use tessera_plugin_sdk::resp::{self, Value};
use tessera_plugin_sdk::{Action, Command, Conn, Merge, Out, Replies, ReplyAction, ReplyOut, cmd};

use crate::ops::{bucket_arg, dec};
use crate::{Key, ctx, op};

/// Which part of the merged order the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    /// Ranks, Redis-style (negative counts from the end).
    Index { start: i64, stop: i64 },
    /// LIMIT offset count on a score range (count < 0: all).
    Score { offset: i64, count: i64 },
}

/// A range query waiting for its bucket replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Query {
    pub(crate) rev: bool,
    pub(crate) withscores: bool,
    pub(crate) window: Window,
}

/// Queries in flight, by slot (the slot is the ctx parameter). Bounded; a closed connection's
/// entries are dropped.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    slots: Vec<Option<(u64, Query)>>,
    free: Vec<u32>,
}

const MAX_PENDING: usize = 4096;

impl Pending {
    fn put(&mut self, conn: u64, q: Query) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = Some((conn, q));
            return Some(i);
        }
        if self.slots.len() >= MAX_PENDING {
            return None;
        }
        self.slots.push(Some((conn, q)));
        Some(self.slots.len() as u32 - 1)
    }

    pub(crate) fn take(&mut self, i: u64) -> Option<Query> {
        let slot = self.slots.get_mut(usize::try_from(i).ok()?)?;
        let (_, q) = slot.take()?;
        self.free.push(i as u32);
        Some(q)
    }

    pub(crate) fn drop_conn(&mut self, conn: u64) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.is_some_and(|(c, _)| c == conn) {
                *slot = None;
                self.free.push(i as u32);
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

fn int(c: &Command<'_>, i: usize) -> Option<i64> {
    resp::parse_i64(c.bytes(i)?)
}

/// Parses the client's command: the query, whether it is BYSCORE, and the LIMIT given.
fn parse(c: &Command<'_>) -> Result<(Query, bool), String> {
    let (mut rev, mut byscore) = match c.id() {
        cmd::ZREVRANGE => (true, false),
        cmd::ZRANGEBYSCORE => (false, true),
        cmd::ZREVRANGEBYSCORE => (true, true),
        _ => (false, false),
    };
    let is_zrange = c.is(cmd::ZRANGE);
    let mut withscores = false;
    let mut limit = None;
    let mut i = 4;
    while let Some(opt) = c.bytes(i) {
        match opt.to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => withscores = true,
            b"LIMIT" if c.id() != cmd::ZREVRANGE => {
                let (Some(o), Some(n)) = (int(c, i + 1), int(c, i + 2)) else {
                    return Err("ERR value is not an integer or out of range".into());
                };
                limit = Some((o, n));
                i += 2;
            }
            b"BYSCORE" if is_zrange => byscore = true,
            b"REV" if is_zrange => rev = true,
            b"BYLEX" if is_zrange => {
                return Err("ERR bucket: ZRANGE BYLEX is not supported on bucketed keys".into());
            }
            _ => return Err("ERR syntax error".into()),
        }
        i += 1;
    }
    let window = if byscore {
        let (offset, count) = limit.unwrap_or((0, -1));
        Window::Score { offset, count }
    } else {
        if limit.is_some() {
            return Err(
                "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
                    .into(),
            );
        }
        let (Some(start), Some(stop)) = (int(c, 2), int(c, 3)) else {
            return Err("ERR value is not an integer or out of range".into());
        };
        Window::Index { start, stop }
    };
    Ok((
        Query {
            rev,
            withscores,
            window,
        },
        byscore,
    ))
}

/// Sends each bucket the query for its candidates, always WITHSCORES (the merge needs them).
pub(crate) fn start(
    pending: &mut Pending,
    conn: Conn,
    c: &Command<'_>,
    k: Key<'_>,
    out: Out<'_>,
) -> Action {
    let (q, byscore) = match parse(c) {
        Ok(v) => v,
        Err(e) => return out.deny(&e),
    };
    // Bucket arguments after the key: (from, to) and the optional LIMIT 0 <n>.
    let (name, fetch): (&[u8], Option<u64>) = match q.window {
        Window::Index { start, stop } => {
            if start >= 0 && stop >= 0 && start > stop {
                return out.reply_raw(b"*0\r\n");
            }
            let name: &[u8] = if q.rev { b"ZREVRANGE" } else { b"ZRANGE" };
            // With both ends non-negative, the first stop+1 of each bucket suffice; otherwise
            // the window depends on the total, so fetch everything.
            (name, (start >= 0 && stop >= 0).then_some(stop as u64))
        }
        Window::Score { offset, count } => {
            if offset < 0 || count == 0 {
                return out.reply_raw(b"*0\r\n");
            }
            let name: &[u8] = if q.rev {
                b"ZREVRANGEBYSCORE"
            } else {
                b"ZRANGEBYSCORE"
            };
            (
                name,
                (count > 0).then(|| offset.saturating_add(count) as u64),
            )
        }
    };
    let Some(slot) = pending.put(conn.0, q) else {
        return out.deny("ERR bucket: too many range queries in flight");
    };
    let mut rw = out.rewrite(Merge::Plugin, ctx(op::ZRANGE, u64::from(slot)));
    for b in 0..k.n {
        match (byscore, fetch) {
            (false, stop) => {
                let (text, len) = dec(stop.unwrap_or(0));
                rw.command(5).arg(name);
                bucket_arg(&mut rw, k, b);
                rw.arg(b"0");
                if stop.is_some() {
                    rw.arg(&text[..len]);
                } else {
                    rw.arg(b"-1");
                }
                rw.arg(b"WITHSCORES");
            }
            (true, limit) => {
                rw.command(if limit.is_some() { 8 } else { 5 }).arg(name);
                bucket_arg(&mut rw, k, b);
                rw.input(2).input(3).arg(b"WITHSCORES");
                if let Some(n) = limit {
                    let (text, len) = dec(n);
                    rw.arg(b"LIMIT").arg(b"0").arg(&text[..len]);
                }
            }
        }
    }
    rw.finish()
}

struct Entry<'a> {
    member: &'a [u8],
    score: f64,
    raw_member: &'a [u8],
    raw_score: &'a [u8],
}

fn entries<'a>(replies: &Replies<'a>) -> Option<(Vec<Entry<'a>>, bool)> {
    let mut all = Vec::new();
    let mut nested = false;
    for r in replies.iter() {
        let (v, _) = resp::parse(r).ok()?;
        let mut items = v.as_seq()?.raw_items();
        while let Some(first) = items.next() {
            let (raw_member, raw_score) = match resp::parse(first).ok()?.0 {
                // RESP3: [[member, score], …]
                Value::Array(pair) => {
                    nested = true;
                    let mut it = pair.raw_items();
                    (it.next()?, it.next()?)
                }
                // RESP2: [member, score, …]
                _ => (first, items.next()?),
            };
            all.push(Entry {
                member: resp::parse(raw_member).ok()?.0.as_bytes()?,
                score: resp::parse(raw_score).ok()?.0.as_f64()?,
                raw_member,
                raw_score,
            });
        }
    }
    Some((all, nested))
}

/// Merges the bucket replies of query `q` into the client's reply.
pub(crate) fn finish(q: Query, replies: &Replies<'_>, out: ReplyOut<'_>) -> ReplyAction {
    let Some((mut all, nested)) = entries(replies) else {
        return out.error("ERR bucket: unexpected reply to a range query");
    };
    all.sort_by(|a, b| {
        let o = a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.member.cmp(b.member));
        if q.rev { o.reverse() } else { o }
    });
    let len = all.len() as i64;
    let (from, to) = match q.window {
        Window::Index { start, stop } => {
            let s = if start < 0 { len + start } else { start }.max(0);
            let e = if stop < 0 { len + stop } else { stop }.min(len - 1);
            if s > e || s >= len {
                (0, 0)
            } else {
                (s, e + 1)
            }
        }
        Window::Score { offset, count } => {
            let from = offset.min(len);
            let to = if count < 0 {
                len
            } else {
                from.saturating_add(count).min(len)
            };
            (from, to)
        }
    };
    let window = &all[from as usize..to as usize];
    out.replace(|w| {
        if q.withscores && !nested {
            w.array(window.len() * 2);
        } else {
            w.array(window.len());
        }
        for e in window {
            match (q.withscores, nested) {
                (false, _) => w.raw(e.raw_member),
                (true, false) => w.raw(e.raw_member).raw(e.raw_score),
                (true, true) => w.array(2).raw(e.raw_member).raw(e.raw_score),
            };
        }
    })
}
