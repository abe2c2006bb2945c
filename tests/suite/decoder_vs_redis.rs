//! The request decoder against a real redis-server: whatever the decoder accepts, sent to
//! Redis as the very same bytes, must be parsed by Redis into the same commands. Seeded
//! mutations of valid streams (headers zero-padded, signed, spaced, resized; terminators
//! altered; inline quoting) with random splits; every command is an `RPUSH`, so the lists
//! Redis built show exactly what it parsed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tessera_resp::RequestDecoder;

use crate::support::{Frame, RawClient, RedisServer, encode};

/// Fixed, so a failure reproduces. 30 000 cases take about 3 s (debug build, 2 CPUs).
const SEED: u64 = 0x7e55_e7a1_0dec_0de5;
const CASES: usize = 30_000;

#[test]
fn whatever_the_decoder_accepts_redis_parses_the_same_way() {
    let redis = RedisServer::start();
    let mut admin = redis.raw();
    let mut conn = redis.raw();
    conn.set_read_timeout(Duration::from_secs(2));
    let mut rng = Rng(SEED);
    let mut stats = Stats::default();
    let started = Instant::now();
    for case in 0..CASES {
        let (stream, mutated) = generate(&mut rng);
        let (requests, consumed, refused) = decode_in_pieces(&stream, &mut rng);
        stats.count(mutated, requests.len(), refused);
        if consumed == 0 {
            continue;
        }
        let nonce = format!("case-{case}");
        let mut sent = stream[..consumed].to_vec();
        sent.extend_from_slice(&encode(&["ECHO", nonce.as_str()]));
        conn.send(&sent);
        let ctx = || {
            format!(
                "case {case}: sent {:?}\ndecoded {requests:?}",
                String::from_utf8_lossy(&sent)
            )
        };
        let mut model: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
        for (i, req) in requests.iter().enumerate() {
            let reply = conn
                .try_read_frame()
                .unwrap_or_else(|e| panic!("no reply {i} from Redis ({e}); {}", ctx()));
            check_reply(req, &reply, &mut model).unwrap_or_else(|why| {
                panic!("request {i}: {why}; Redis replied {reply:?}; {}", ctx())
            });
        }
        let last = conn.try_read_frame();
        assert!(
            matches!(&last, Ok(Frame::Bulk(b)) if b == nonce.as_bytes()),
            "Redis out of step after the accepted bytes (got {last:?}); {}",
            ctx()
        );
        check_lists(&mut admin, &model).unwrap_or_else(|why| panic!("{why}; {}", ctx()));
        assert_eq!(admin.cmd(&["FLUSHALL"]), Frame::Simple("OK".into()));
    }
    eprintln!("{stats:?} in {:?}", started.elapsed());
    // The run means something only if mutated streams were both accepted and refused.
    assert!(
        stats.mutated_accepted > CASES / 10,
        "too few mutated streams accepted: {stats:?}"
    );
    assert!(
        stats.refused > CASES / 10,
        "too few streams refused: {stats:?}"
    );
}

#[derive(Debug, Default)]
struct Stats {
    requests: usize,
    mutated_accepted: usize,
    refused: usize,
}

impl Stats {
    fn count(&mut self, mutated: bool, requests: usize, refused: bool) {
        self.requests += requests;
        self.mutated_accepted += usize::from(mutated && requests > 0);
        self.refused += usize::from(refused);
    }
}

/// Feeds `stream` to a fresh decoder in up to four pieces. Returns the requests, how many
/// bytes the decoder consumed (a frame boundary), and whether it refused the rest.
fn decode_in_pieces(stream: &[u8], rng: &mut Rng) -> (Vec<Vec<Vec<u8>>>, usize, bool) {
    let mut cuts: Vec<usize> = (0..rng.below(4))
        .map(|_| rng.below(stream.len() + 1))
        .collect();
    cuts.sort_unstable();
    cuts.push(stream.len());
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for cut in cuts {
        buf.extend_from_slice(&stream[fed..cut]);
        fed = cut;
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(req)) => out.push(req.args().map(<[u8]>::to_vec).collect()),
                Ok(None) => break,
                Err(_) => return (out, fed - buf.len(), true),
            }
        }
    }
    (out, fed - buf.len(), false)
}

/// What Redis must answer to `req` as the decoder parsed it; updates the model lists.
fn check_reply(
    req: &[Vec<u8>],
    reply: &Frame,
    model: &mut BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
) -> Result<(), String> {
    if let Some(e) = reply.error().filter(|e| e.contains("Protocol error")) {
        return Err(format!("Redis refused the framing: {e}"));
    }
    let name = &req[0];
    // An inserted `x` makes RPUSHX, which pushes only onto an existing list.
    let pushx = name.eq_ignore_ascii_case(b"RPUSHX");
    if !name.eq_ignore_ascii_case(b"RPUSH") && !pushx {
        // Mutations make no other command (none is spelled from the bytes used); Redis
        // quotes the name it parsed.
        let error = reply.error().ok_or("expected an unknown-command error")?;
        let shown = name.iter().all(|b| b.is_ascii_graphic() && *b != b'\'');
        if !error.starts_with("ERR unknown command")
            || (shown && !error.contains(&format!("'{}'", String::from_utf8_lossy(name))))
        {
            return Err(format!("expected unknown command {name:?}"));
        }
        return Ok(());
    }
    if req.len() < 3 {
        let error = reply.error().unwrap_or_default();
        if !error.starts_with("ERR wrong number of arguments") {
            return Err("expected a wrong-arity error".into());
        }
        return Ok(());
    }
    let len = match model.get_mut(&req[1]) {
        None if pushx => 0,
        Some(list) => {
            list.extend(req[2..].iter().cloned());
            list.len()
        }
        None => {
            model.insert(req[1].clone(), req[2..].to_vec());
            req.len() - 2
        }
    };
    match reply {
        Frame::Integer(n) if *n == len as i64 => Ok(()),
        _ => Err(format!("expected :{len}")),
    }
}

/// Every key Redis holds, and every list's elements, are those of the model.
fn check_lists(
    admin: &mut RawClient,
    model: &BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
) -> Result<(), String> {
    let Frame::Array(keys) = admin.cmd(&["KEYS", "*"]) else {
        return Err("KEYS did not answer an array".into());
    };
    let mut keys: Vec<Vec<u8>> = keys
        .into_iter()
        .map(|k| match k {
            Frame::Bulk(b) => b,
            other => panic!("KEYS element {other:?}"),
        })
        .collect();
    keys.sort();
    let want: Vec<&Vec<u8>> = model.keys().collect();
    if keys.iter().collect::<Vec<_>>() != want {
        return Err(format!(
            "Redis has keys {keys:?}, the decoder pushed to {want:?}"
        ));
    }
    for (key, list) in model {
        let got = admin.cmd(&[&b"LRANGE"[..], key.as_slice(), b"0", b"-1"]);
        let want = Frame::Array(list.iter().map(|v| Frame::Bulk(v.clone())).collect());
        if got != want {
            return Err(format!("list {key:?}: Redis has {got:?}, decoder {want:?}"));
        }
    }
    Ok(())
}

// === generating streams ===

/// A stream of 1–4 requests, and whether it was mutated. Headers are recorded as they are
/// written so that most mutations hit the grammar rather than payload bytes.
fn generate(rng: &mut Rng) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut headers = Vec::new();
    let mut ends = Vec::new();
    for _ in 0..1 + rng.below(4) {
        match rng.below(10) {
            0 => out.extend_from_slice(rng.pick(&[&b"*0\r\n"[..], b"*-1\r\n", b"\r\n", b" \n"])),
            1..=3 => inline_rpush(rng, &mut out),
            _ => multibulk_rpush(rng, &mut out, &mut headers, &mut ends),
        }
    }
    let mutations = rng.below(4);
    for _ in 0..mutations {
        // A change at a recorded position keeps the positions before it valid; those after
        // it are dropped. A random byte change drops them all.
        match rng.below(3) {
            0 if !headers.is_empty() => {
                let at = headers.remove(rng.below(headers.len()));
                mutate_header(rng, &mut out, at);
                headers.retain(|&h| h < at);
                ends.retain(|&e| e < at);
            }
            1 if !ends.is_empty() => {
                let at = ends.remove(rng.below(ends.len()));
                let with = rng.pick(&[&b"\n"[..], b"\r", b"xx", b"\r\r\n", b"", b"\n\r"]);
                out.splice(at..at + 2, with.iter().copied());
                headers.retain(|&h| h < at);
                ends.retain(|&e| e < at);
            }
            _ => {
                mutate_byte(rng, &mut out);
                headers.clear();
                ends.clear();
            }
        }
    }
    (out, mutations > 0)
}

/// `*n` / `$n` header whose type byte is at `at`: pad, sign, space, resize or corrupt it.
fn mutate_header(rng: &mut Rng, out: &mut Vec<u8>, at: usize) {
    let digits_end = at + 1 + out[at + 1..].iter().position(|&b| b == b'\r').unwrap_or(0);
    let n: i64 = String::from_utf8_lossy(&out[at + 1..digits_end])
        .parse()
        .unwrap_or(0);
    let digits = out[at + 1..digits_end].to_vec();
    let new: Vec<u8> = match rng.below(9) {
        0 => [&b"0"[..], &digits].concat(),
        1 => [&b"+"[..], &digits].concat(),
        2 => [&b"-"[..], &digits].concat(),
        3 => b"-0".to_vec(),
        4 => [&b" "[..], &digits].concat(),
        5 => [&digits[..], b" "].concat(),
        6 => (n + 1).to_string().into_bytes(),
        7 => (n - 1).to_string().into_bytes(),
        _ => [&digits[..], b"\0"].concat(),
    };
    out.splice(at + 1..digits_end, new);
    if rng.below(4) == 0 {
        // The header's own terminator: `\n` alone, `\r` alone, or `\r` and another byte.
        let crlf = out[at..].iter().position(|&b| b == b'\r').map(|p| at + p);
        if let Some(c) = crlf.filter(|&c| c + 2 <= out.len()) {
            let with = rng.pick(&[&b"\n"[..], b"\r", b"\rX", b"\r\r\n"]);
            out.splice(c..c + 2, with.iter().copied());
        }
    }
}

/// Replaces, inserts, deletes or duplicates bytes at a random place.
fn mutate_byte(rng: &mut Rng, out: &mut Vec<u8>) {
    if out.is_empty() {
        return;
    }
    let at = rng.below(out.len());
    let byte = special(rng);
    match rng.below(4) {
        0 => out[at] = byte,
        1 => out.insert(at, byte),
        2 => {
            out.remove(at);
        }
        _ => {
            let end = (at + 1 + rng.below(6)).min(out.len());
            let dup = out[at..end].to_vec();
            out.splice(at..at, dup);
        }
    }
}

fn multibulk_rpush(
    rng: &mut Rng,
    out: &mut Vec<u8>,
    headers: &mut Vec<usize>,
    ends: &mut Vec<usize>,
) {
    let key = rng.pick(&[&b"k"[..], b"j"]).to_vec();
    let mut args = vec![b"RPUSH".to_vec(), key];
    for _ in 0..1 + rng.below(3) {
        args.push((0..rng.below(8)).map(|_| any_byte(rng)).collect());
    }
    headers.push(out.len());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in &args {
        headers.push(out.len());
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        ends.push(out.len());
        out.extend_from_slice(b"\r\n");
    }
}

fn inline_rpush(rng: &mut Rng, out: &mut Vec<u8>) {
    out.extend_from_slice(rng.pick(&[&b"RPUSH k"[..], b"rpush j", b"RPUSH\tk"]));
    for _ in 0..1 + rng.below(3) {
        out.extend_from_slice(rng.pick(&[&b" "[..], b"  ", b"\t", b"\x0b", b" \x0c", b"\r"]));
        match rng.below(4) {
            0 => quoted(
                rng,
                out,
                b'"',
                &[
                    &b"\\x41"[..],
                    b"\\x4",
                    b"\\xzz",
                    b"\\n",
                    b"\\\"",
                    b"\\\\",
                    b"\\q",
                    b"'",
                    b" ",
                ],
            ),
            1 => quoted(rng, out, b'\'', &[&b"\\'"[..], b"\\", b"\"", b" "]),
            _ => (0..1 + rng.below(5)).for_each(|_| out.push(plain(rng))),
        }
    }
    out.extend_from_slice(rng.pick(&[&b"\r\n"[..], b"\n"]));
}

fn quoted(rng: &mut Rng, out: &mut Vec<u8>, q: u8, escapes: &[&[u8]]) {
    if rng.below(3) == 0 {
        out.push(plain(rng)); // a quote may also start mid-argument
    }
    out.push(q);
    for _ in 0..rng.below(5) {
        match rng.below(2) {
            0 => out.extend_from_slice(rng.pick(escapes)),
            _ => out.push(plain(rng)),
        }
    }
    out.push(q);
}

/// Bytes no Redis command name is spelled from, so a mutated name is always unknown.
fn plain(rng: &mut Rng) -> u8 {
    rng.pick(b"xyz0159$*-+\x0b\x0c\x80\xff")
}

fn special(rng: &mut Rng) -> u8 {
    rng.pick(b"0123456789+-*$ \t\r\n\0\"'\\x\x0b\x0c")
}

fn any_byte(rng: &mut Rng) -> u8 {
    match rng.below(2) {
        0 => special(rng),
        _ => rng.next() as u8,
    }
}

/// SplitMix64: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}
