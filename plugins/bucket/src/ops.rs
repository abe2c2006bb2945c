//! Building the rewrites: one bucket, split per bucket, runs in argument order, fan-out to
//! every bucket, and the bucket-encoding SCAN cursor.

use tessera_plugin_sdk::resp::{parse_f64, push_int};
use tessera_plugin_sdk::{Action, Command, Merge, Out, Rewrite, cmd};

use crate::naming::field_bucket;
use crate::{Bucket, Key, ctx, op};

/// Commands the plugin handles on a bucketed key (everything else is refused).
pub(crate) fn supported(id: u16) -> bool {
    matches!(
        id,
        cmd::HSET
            | cmd::HMSET
            | cmd::HSETNX
            | cmd::HGET
            | cmd::HMGET
            | cmd::HDEL
            | cmd::HEXISTS
            | cmd::HINCRBY
            | cmd::HINCRBYFLOAT
            | cmd::HSTRLEN
            | cmd::HGETALL
            | cmd::HKEYS
            | cmd::HVALS
            | cmd::HLEN
            | cmd::HSCAN
            | cmd::SADD
            | cmd::SREM
            | cmd::SISMEMBER
            | cmd::SMISMEMBER
            | cmd::SMEMBERS
            | cmd::SCARD
            | cmd::SSCAN
            | cmd::ZADD
            | cmd::ZREM
            | cmd::ZSCORE
            | cmd::ZMSCORE
            | cmd::ZINCRBY
            | cmd::ZCARD
            | cmd::ZCOUNT
            | cmd::ZRANGE
            | cmd::ZREVRANGE
            | cmd::ZRANGEBYSCORE
            | cmd::ZREVRANGEBYSCORE
            | cmd::ZSCAN
            | cmd::DEL
            | cmd::UNLINK
            | cmd::EXISTS
            | cmd::EXPIRE
            | cmd::PEXPIRE
            | cmd::EXPIREAT
            | cmd::PEXPIREAT
            | cmd::PERSIST
            | cmd::TTL
            | cmd::PTTL
            | cmd::EXPIRETIME
            | cmd::PEXPIRETIME
            | cmd::TYPE
    )
}

/// Writes the name of bucket `i` as one argument.
pub(crate) fn bucket_arg(rw: &mut Rewrite<'_>, k: Key<'_>, i: u32) {
    rw.arg_parts(&[k.head(i).as_bytes(), k.name]);
}

fn no_values(out: Out<'_>) -> Action {
    out.deny("ERR bucket: the proxy did not pass argument values (manifest not honoured)")
}

/// The command as is, on the bucket of the field at argument `field`.
pub(crate) fn single(c: &Command<'_>, k: Key<'_>, field: usize, out: Out<'_>) -> Action {
    let Some(f) = c.bytes(field) else {
        return no_values(out);
    };
    let mut rw = out.rewrite(Merge::First, 0);
    rw.command(c.len()).input(0);
    bucket_arg(&mut rw, k, field_bucket(f, k.n));
    for i in 2..c.len() {
        rw.input(i);
    }
    rw.finish()
}

/// The command once per bucket (every argument after the key kept).
pub(crate) fn fanout(c: &Command<'_>, k: Key<'_>, merge: Merge, ctx: u64, out: Out<'_>) -> Action {
    let mut rw = out.rewrite(merge, ctx);
    for b in 0..k.n {
        rw.command(c.len()).input(0);
        bucket_arg(&mut rw, k, b);
        for i in 2..c.len() {
            rw.input(i);
        }
    }
    rw.finish()
}

/// Decimal text of `n` in a small stack buffer.
pub(crate) fn dec(n: u64) -> ([u8; 20], usize) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    let mut v = n;
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = b.len() - i;
    b.copy_within(i.., 0);
    (b, len)
}

/// HSCAN / SSCAN / ZSCAN: the client's cursor is `inner * N + bucket`; the reply's cursor is
/// rewritten in `on_reply` (moving to the next bucket when one is done).
pub(crate) fn scan(c: &Command<'_>, k: Key<'_>, out: Out<'_>) -> Action {
    let Some(cursor) = c
        .bytes(2)
        .and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok())
    else {
        return out.deny("ERR invalid cursor");
    };
    let n = u64::from(k.n);
    let bucket = (cursor % n) as u32;
    let (text, len) = dec(cursor / n);
    let mut rw = out.rewrite(Merge::Plugin, ctx(op::SCAN, u64::from(bucket) | (n << 16)));
    rw.command(c.len()).input(0);
    bucket_arg(&mut rw, k, bucket);
    rw.arg(&text[..len]);
    for i in 3..c.len() {
        rw.input(i);
    }
    rw.finish()
}

impl Bucket {
    /// Puts the elements (`width` arguments each, from `start`; the field is at `field_at`
    /// inside an element) in bucket order: fills `self.of`, `self.order`, `self.starts`.
    /// `None` if a field's bytes are missing.
    fn group(
        &mut self,
        c: &Command<'_>,
        k: Key<'_>,
        start: usize,
        width: usize,
        field_at: usize,
    ) -> Option<()> {
        let count = (c.len() - start) / width;
        self.of.clear();
        for e in 0..count {
            let f = c.bytes(start + e * width + field_at)?;
            self.of.push(field_bucket(f, k.n));
        }
        // Counting sort by bucket: starts[b]..starts[b+1] indexes `order`.
        self.starts.clear();
        self.starts.resize(k.n as usize + 1, 0);
        for &b in &self.of {
            self.starts[b as usize + 1] += 1;
        }
        for b in 0..k.n as usize {
            self.starts[b + 1] += self.starts[b];
        }
        self.order.clear();
        self.order.resize(count, 0);
        self.next.clear();
        self.next.extend_from_slice(&self.starts);
        for (e, &b) in self.of.iter().enumerate() {
            self.order[self.next[b as usize] as usize] = e as u32;
            self.next[b as usize] += 1;
        }
        Some(())
    }

    /// One command per bucket that has elements: the name, the bucket, arguments `2..start`
    /// (options), then the bucket's elements in their original order.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn split(
        &mut self,
        c: &Command<'_>,
        k: Key<'_>,
        start: usize,
        width: usize,
        field_at: usize,
        merge: Merge,
        out: Out<'_>,
    ) -> Action {
        if self.group(c, k, start, width, field_at).is_none() {
            return no_values(out);
        }
        let mut rw = out.rewrite(merge, 0);
        for b in 0..k.n as usize {
            let (from, to) = (self.starts[b] as usize, self.starts[b + 1] as usize);
            if from == to {
                continue;
            }
            rw.command(start + (to - from) * width).input(0);
            bucket_arg(&mut rw, k, b as u32);
            for i in 2..start {
                rw.input(i);
            }
            for &e in &self.order[from..to] {
                for j in 0..width {
                    rw.input(start + e as usize * width + j);
                }
            }
        }
        rw.finish()
    }

    /// HMGET / SMISMEMBER / ZMSCORE: consecutive fields of the same bucket make one command,
    /// and the host concatenates the array replies in order: the reply is in field order by
    /// construction, with no state kept between the command and its replies.
    pub(crate) fn runs(&mut self, c: &Command<'_>, k: Key<'_>, out: Out<'_>) -> Action {
        if self.group(c, k, 2, 1, 0).is_none() {
            return no_values(out);
        }
        let mut rw = out.rewrite(Merge::Concat, 0);
        let mut i = 0;
        while i < self.of.len() {
            let b = self.of[i];
            let j = self.of[i..]
                .iter()
                .position(|&x| x != b)
                .map_or(self.of.len(), |p| i + p);
            rw.command(2 + j - i).input(0);
            bucket_arg(&mut rw, k, b);
            for x in i..j {
                rw.input(2 + x);
            }
            i = j;
        }
        rw.finish()
    }

    /// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member …: scores are checked here (Redis
    /// refuses the whole command on one bad score; split buckets would apply the good ones),
    /// then split with the same options. NX/XX/GT/LT/CH are per member, so they keep their
    /// meaning per bucket; INCR has a single member and goes to its bucket.
    pub(crate) fn zadd(&mut self, c: &Command<'_>, k: Key<'_>, out: Out<'_>) -> Action {
        let mut at = 2;
        let mut incr = false;
        while let Some(opt) = c.bytes(at) {
            match opt.to_ascii_uppercase().as_slice() {
                b"NX" | b"XX" | b"GT" | b"LT" | b"CH" => {}
                b"INCR" => incr = true,
                _ => break,
            }
            at += 1;
        }
        let rest = c.len() - at;
        if rest == 0 {
            return out.deny("ERR wrong number of arguments for 'zadd' command");
        }
        if !rest.is_multiple_of(2) {
            return out.deny("ERR syntax error");
        }
        if incr && rest > 2 {
            return out.deny("ERR INCR option supports a single increment-element pair");
        }
        for s in (at..c.len()).step_by(2) {
            match c.bytes(s) {
                Some(score) if parse_f64(score).is_some() => {}
                Some(_) => return out.deny("ERR value is not a valid float"),
                None => return no_values(out),
            }
        }
        let merge = if incr { Merge::First } else { Merge::Sum };
        self.split(c, k, at, 2, 1, merge, out)
    }
}

/// The SCAN cursor for the client: `inner * N + bucket`, or the next bucket when this one is
/// done, or 0 at the end. `None` if it does not fit in 64 bits.
pub(crate) fn next_cursor(inner: u64, bucket: u64, n: u64) -> Option<u64> {
    if inner == 0 {
        return Some(if bucket + 1 < n { bucket + 1 } else { 0 });
    }
    inner.checked_mul(n)?.checked_add(bucket)
}

/// Appends `n` as a RESP bulk string.
pub(crate) fn push_bulk_int(buf: &mut Vec<u8>, n: u64) {
    let (text, len) = dec(n);
    buf.push(b'$');
    push_int(buf, len as i64);
    buf.extend_from_slice(b"\r\n");
    buf.extend_from_slice(&text[..len]);
    buf.extend_from_slice(b"\r\n");
}
