//! The host merges of ABI v1 (`sdk/ABI.md`, "Rewrite block"): how the replies of a rewrite's
//! commands become the one reply the client gets, without calling the plugin again. The one
//! implementation, used by the proxy (plugin rewrites, and its own fan-outs: AllOk, Sum, First,
//! Concat) and by the SDK's fake host, so a plugin tested natively merges as it will in the
//! proxy.
//!
//! Rules, for every merge code:
//! * If any reply is an error reply (`-…` or RESP3 `!…`, see [`crate::is_error_reply`]), the first
//!   one, in command order, is the result. The other replies are dropped.
//! * [`CONCAT`]: arrays, sets or maps concatenated (all of one kind; a map's pairs stay pairs);
//!   nil replies count as empty; all nil: an empty array.
//! * [`SUM`]: integers added; an overflow of i64 is [`MergeError::SumOverflow`] (Redis's
//!   "increment or decrement would overflow"), never a wrapped number.
//! * [`ALL_OK`]: `+OK` when every reply is `+OK`; otherwise the first reply that is not.
//! * [`FIRST_NON_NIL`]: the first reply that is not nil; all nil: a nil in the client's
//!   protocol (`$-1` RESP2, `_` RESP3).
//! * [`LAST`] / [`FIRST`]: that reply.
//!
//! [`CONCAT`]: super::CONCAT
//! [`SUM`]: super::SUM
//! [`ALL_OK`]: super::ALL_OK
//! [`FIRST_NON_NIL`]: super::FIRST_NON_NIL
//! [`LAST`]: super::LAST
//! [`FIRST`]: super::FIRST

use alloc::vec::Vec;
use core::fmt;

use crate::reply::{aggregate_body, is_error_reply, is_nil, parse_integer};

/// The protocol of the client the merged reply goes to (it decides how a nil is written;
/// integers, arrays and `+OK` are written alike in both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resp {
    #[default]
    V2,
    V3,
}

/// Where a merge writes: `Vec<u8>`, or `bytes::BytesMut` with the `bytes` feature.
pub trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

#[cfg(feature = "bytes")]
impl Sink for bytes::BytesMut {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Why replies could not be merged. Nothing was written to the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeError {
    /// SUM: reply `index` is not an integer reply.
    NotInteger { index: usize },
    /// SUM: the total does not fit in a signed 64-bit integer.
    SumOverflow,
    /// CONCAT: reply `index` is not one array, set or map reply.
    NotAggregate { index: usize },
    /// CONCAT: reply `index` is a different kind of aggregate than the ones before it.
    MixedAggregates { index: usize },
    /// There were no replies to merge.
    NoReplies,
    /// The code is not a host merge (0 is `PLUGIN`: the plugin merges in `on_reply`).
    NotAHostMerge(u32),
}

impl fmt::Display for MergeError {
    /// The message, without an error code: the caller writes `-ERR <message>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInteger { index } => {
                write!(f, "merge SUM: reply {index} is not an integer")
            }
            // Redis's own text for INCRBY past i64, so clients see a familiar error.
            Self::SumOverflow => f.write_str("increment or decrement would overflow"),
            Self::NotAggregate { index } => {
                write!(f, "merge CONCAT: reply {index} is not an array, set or map")
            }
            Self::MixedAggregates { index } => {
                write!(
                    f,
                    "merge CONCAT: reply {index} is a different kind of aggregate"
                )
            }
            Self::NoReplies => f.write_str("merge of no replies"),
            Self::NotAHostMerge(code) => write!(f, "merge code {code} is not a host merge"),
        }
    }
}

impl core::error::Error for MergeError {}

/// The first error reply, if any (the result of every merge that has one).
pub fn first_error<R: AsRef<[u8]>>(replies: &[R]) -> Option<&[u8]> {
    replies
        .iter()
        .map(AsRef::as_ref)
        .find(|r| is_error_reply(r))
}

/// Merges `replies` with ABI merge `code` (`merge::CONCAT` … `merge::FIRST`) into `out`.
///
/// # Errors
/// [`MergeError`]: the replies cannot be combined this way, or `code` is not a host merge.
/// `out` is untouched then.
pub fn merge<R: AsRef<[u8]>>(
    code: u32,
    replies: &[R],
    resp: Resp,
    out: &mut impl Sink,
) -> Result<(), MergeError> {
    match code {
        super::CONCAT => concat(replies, out),
        super::SUM => sum(replies, out),
        super::ALL_OK => all_ok(replies, out),
        super::FIRST_NON_NIL => first_non_nil(replies, resp, out),
        super::LAST => pick(replies.last(), replies, out),
        super::FIRST => pick(replies.first(), replies, out),
        other => Err(MergeError::NotAHostMerge(other)),
    }
}

fn pick<R: AsRef<[u8]>>(
    choice: Option<&R>,
    replies: &[R],
    out: &mut impl Sink,
) -> Result<(), MergeError> {
    let r = first_error(replies).or(choice.map(AsRef::as_ref));
    out.put(r.ok_or(MergeError::NoReplies)?);
    Ok(())
}

/// The first reply.
///
/// # Errors
/// [`MergeError::NoReplies`].
pub fn first<R: AsRef<[u8]>>(replies: &[R], out: &mut impl Sink) -> Result<(), MergeError> {
    pick(replies.first(), replies, out)
}

/// The last reply.
///
/// # Errors
/// [`MergeError::NoReplies`].
pub fn last<R: AsRef<[u8]>>(replies: &[R], out: &mut impl Sink) -> Result<(), MergeError> {
    pick(replies.last(), replies, out)
}

/// `+OK` if every reply is `+OK`, else the first reply that is not (an error reply first).
///
/// # Errors
/// [`MergeError::NoReplies`].
pub fn all_ok<R: AsRef<[u8]>>(replies: &[R], out: &mut impl Sink) -> Result<(), MergeError> {
    if replies.is_empty() {
        return Err(MergeError::NoReplies);
    }
    let odd = first_error(replies)
        .or_else(|| replies.iter().map(AsRef::as_ref).find(|r| *r != b"+OK\r\n"));
    out.put(odd.unwrap_or(b"+OK\r\n"));
    Ok(())
}

/// The sum of integer replies, as `:n`.
///
/// # Errors
/// A reply that is not an integer, or a total past i64 ([`MergeError::SumOverflow`]).
pub fn sum<R: AsRef<[u8]>>(replies: &[R], out: &mut impl Sink) -> Result<(), MergeError> {
    if let Some(e) = first_error(replies) {
        out.put(e);
        return Ok(());
    }
    if replies.is_empty() {
        return Err(MergeError::NoReplies);
    }
    let mut total: i64 = 0;
    for (index, r) in replies.iter().enumerate() {
        let n = parse_integer(r.as_ref()).ok_or(MergeError::NotInteger { index })?;
        total = total.checked_add(n).ok_or(MergeError::SumOverflow)?;
    }
    put_line(out, b':', total.unsigned_abs(), total < 0);
    Ok(())
}

/// The first reply that is not nil; all nil: a nil in `resp`.
///
/// # Errors
/// [`MergeError::NoReplies`].
pub fn first_non_nil<R: AsRef<[u8]>>(
    replies: &[R],
    resp: Resp,
    out: &mut impl Sink,
) -> Result<(), MergeError> {
    if replies.is_empty() {
        return Err(MergeError::NoReplies);
    }
    let found =
        first_error(replies).or_else(|| replies.iter().map(AsRef::as_ref).find(|r| !is_nil(r)));
    out.put(found.unwrap_or(match resp {
        Resp::V2 => b"$-1\r\n",
        Resp::V3 => b"_\r\n",
    }));
    Ok(())
}

/// Arrays, sets or maps (one kind) concatenated; nil replies count as empty, and with no
/// non-nil reply the result is `*0`. Elements are copied as they are, never re-encoded.
///
/// # Errors
/// A reply that is not one aggregate, or aggregates of different kinds.
pub fn concat<R: AsRef<[u8]>>(replies: &[R], out: &mut impl Sink) -> Result<(), MergeError> {
    if let Some(e) = first_error(replies) {
        out.put(e);
        return Ok(());
    }
    // Validate everything before writing, so an error leaves `out` untouched.
    let mut kind = None;
    let mut total: u64 = 0;
    for (index, r) in replies.iter().enumerate() {
        let r = r.as_ref();
        if is_nil(r) {
            continue;
        }
        let (k, n, _) = aggregate_body(r).ok_or(MergeError::NotAggregate { index })?;
        if *kind.get_or_insert(k) != k {
            return Err(MergeError::MixedAggregates { index });
        }
        total = total.saturating_add(n);
    }
    let kind = kind.unwrap_or(b'*');
    // A map's header counts pairs.
    let count = if kind == b'%' { total / 2 } else { total };
    put_line(out, kind, count, false);
    for r in replies {
        if let Some((_, _, body)) = aggregate_body(r.as_ref()) {
            out.put(body);
        }
    }
    Ok(())
}

/// Writes `<kind>[-]<n>\r\n` without allocating.
fn put_line(out: &mut impl Sink, kind: u8, n: u64, negative: bool) {
    let mut buf = [0u8; 24];
    let mut at = buf.len();
    let mut v = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    at -= 1;
    buf[at] = kind;
    out.put(&buf[at..]);
    out.put(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merge as code;
    use std::vec;

    fn run(c: u32, replies: &[&[u8]]) -> Result<Vec<u8>, MergeError> {
        run_in(c, replies, Resp::V2)
    }

    fn run_in(c: u32, replies: &[&[u8]], resp: Resp) -> Result<Vec<u8>, MergeError> {
        let mut out = b"prefix:".to_vec();
        merge(c, replies, resp, &mut out)?;
        Ok(out[7..].to_vec())
    }

    #[test]
    fn concat_joins_arrays_sets_and_maps_and_skips_nils() {
        assert_eq!(
            run(
                code::CONCAT,
                &[b"*1\r\n:1\r\n", b"*-1\r\n", b"*2\r\n:2\r\n:3\r\n"]
            )
            .unwrap(),
            b"*3\r\n:1\r\n:2\r\n:3\r\n"
        );
        assert_eq!(
            run(code::CONCAT, &[b"~1\r\n+a\r\n", b"_\r\n", b"~1\r\n+b\r\n"]).unwrap(),
            b"~2\r\n+a\r\n+b\r\n"
        );
        // Map pairs stay pairs: the header counts pairs, not elements.
        assert_eq!(
            run(
                code::CONCAT,
                &[b"%1\r\n+a\r\n:1\r\n", b"%1\r\n+b\r\n:2\r\n"]
            )
            .unwrap(),
            b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n"
        );
        // Nested elements are copied whole.
        assert_eq!(
            run(code::CONCAT, &[b"*1\r\n*2\r\n:1\r\n:2\r\n", b"*0\r\n"]).unwrap(),
            b"*1\r\n*2\r\n:1\r\n:2\r\n"
        );
        assert_eq!(
            run(code::CONCAT, &[b"*-1\r\n", b"$-1\r\n"]).unwrap(),
            b"*0\r\n"
        );
    }

    #[test]
    fn concat_refuses_what_it_cannot_join_and_writes_nothing() {
        assert_eq!(
            run(code::CONCAT, &[b"*1\r\n:1\r\n", b":5\r\n"]),
            Err(MergeError::NotAggregate { index: 1 })
        );
        assert_eq!(
            run(code::CONCAT, &[b"*1\r\n:1\r\n", b"%1\r\n+a\r\n:1\r\n"]),
            Err(MergeError::MixedAggregates { index: 1 })
        );
        // A count that lies about the elements is not one aggregate.
        assert_eq!(
            run(code::CONCAT, &[b"*2\r\n:1\r\n"]),
            Err(MergeError::NotAggregate { index: 0 })
        );
        assert_eq!(
            run(code::CONCAT, &[b"*1\r\n:1\r\n:2\r\n"]),
            Err(MergeError::NotAggregate { index: 0 })
        );
        let mut out = Vec::new();
        assert!(concat(&[&b"*1\r\n:1\r\n"[..], b"+x\r\n"], &mut out).is_err());
        assert!(out.is_empty(), "a failed merge wrote {out:?}");
    }

    #[test]
    fn sum_adds_integers_and_reports_overflow_like_redis() {
        assert_eq!(
            run(code::SUM, &[b":1\r\n", b":41\r\n"]).unwrap(),
            b":42\r\n"
        );
        assert_eq!(
            run(code::SUM, &[b":-5\r\n", b":2\r\n"]).unwrap(),
            b":-3\r\n"
        );
        assert_eq!(
            run(code::SUM, &[b":-9223372036854775808\r\n"]).unwrap(),
            b":-9223372036854775808\r\n"
        );
        // Disagreement 3: the proxy wrapped around, a fan-out panicked in debug builds.
        let max = std::format!(":{}\r\n", i64::MAX);
        assert_eq!(
            run(code::SUM, &[max.as_bytes(), b":1\r\n"]),
            Err(MergeError::SumOverflow)
        );
        assert_eq!(
            std::format!("{}", MergeError::SumOverflow),
            "increment or decrement would overflow"
        );
        assert_eq!(
            run(code::SUM, &[b":1\r\n", b"+OK\r\n"]),
            Err(MergeError::NotInteger { index: 1 })
        );
    }

    #[test]
    fn all_ok_is_ok_only_when_every_reply_is_and_otherwise_the_odd_one_out() {
        assert_eq!(
            run(code::ALL_OK, &[b"+OK\r\n", b"+OK\r\n"]).unwrap(),
            b"+OK\r\n"
        );
        // Disagreement 1: the proxy answered "unexpected reply", the fake host the reply
        // itself. The reply itself it is: a SET NX fan-out that did not set reports nil.
        assert_eq!(
            run(code::ALL_OK, &[b"+OK\r\n", b"$-1\r\n", b":0\r\n"]).unwrap(),
            b"$-1\r\n"
        );
    }

    #[test]
    fn every_merge_answers_the_first_error_reply_including_resp3_blob_errors() {
        // Disagreement 2: the fake host saw only '-' as an error, the proxy '-' and '!'.
        let replies: [&[u8]; 4] = [
            b":1\r\n",
            b"!7\r\nERR bad\r\n",
            b"-ERR later\r\n",
            b"*0\r\n",
        ];
        for c in [
            code::CONCAT,
            code::SUM,
            code::ALL_OK,
            code::FIRST_NON_NIL,
            code::LAST,
            code::FIRST,
        ] {
            assert_eq!(run(c, &replies).unwrap(), b"!7\r\nERR bad\r\n", "merge {c}");
        }
        assert_eq!(first_error(&[&b"+OK\r\n"[..]]), None);
    }

    #[test]
    fn first_non_nil_first_and_last_pick_one_reply() {
        assert_eq!(
            run(
                code::FIRST_NON_NIL,
                &[b"$-1\r\n", b"$1\r\nx\r\n", b"$1\r\ny\r\n"]
            )
            .unwrap(),
            b"$1\r\nx\r\n"
        );
        assert_eq!(
            run(code::FIRST_NON_NIL, &[b"$-1\r\n", b"_\r\n"]).unwrap(),
            b"$-1\r\n"
        );
        assert_eq!(
            run_in(code::FIRST_NON_NIL, &[b"$-1\r\n"], Resp::V3).unwrap(),
            b"_\r\n"
        );
        assert_eq!(
            run(code::FIRST, &[b":1\r\n", b":2\r\n"]).unwrap(),
            b":1\r\n"
        );
        assert_eq!(run(code::LAST, &[b":1\r\n", b":2\r\n"]).unwrap(), b":2\r\n");
    }

    #[test]
    fn no_replies_and_unknown_codes_are_errors() {
        for c in [
            code::CONCAT,
            code::SUM,
            code::ALL_OK,
            code::FIRST_NON_NIL,
            code::LAST,
            code::FIRST,
        ] {
            let r = run(c, &[]);
            // CONCAT of nothing is an empty array; everything else needs a reply.
            if c == code::CONCAT {
                assert_eq!(r.unwrap(), b"*0\r\n");
            } else {
                assert_eq!(r, Err(MergeError::NoReplies), "merge {c}");
            }
        }
        assert_eq!(
            run(code::PLUGIN, &[b"+OK\r\n"]),
            Err(MergeError::NotAHostMerge(0))
        );
        assert_eq!(run(99, &[b"+OK\r\n"]), Err(MergeError::NotAHostMerge(99)));
        let owned = vec![b":1\r\n".to_vec(), b":2\r\n".to_vec()];
        let mut out = Vec::new();
        sum(&owned, &mut out).unwrap();
        assert_eq!(out, b":3\r\n");
    }
}
