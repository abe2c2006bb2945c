//! Incremental, zero-copy decoder for client requests: RESP multibulk arrays of bulk strings,
//! and inline commands (`PING\r\n`, as telnet and health checks send them).
//!
//! A request is one `Bytes` holding the exact frame plus the byte ranges of its arguments, so
//! forwarding it to a backend is a reference-count bump, not a copy or a re-encode.

use bytes::{BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

use super::{ProtocolError, find_crlf, parse_i64};

/// Caps applied before any allocation, so `*2147483647` or `$9999999999` is refused at once.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_bulk_len: usize,
    pub max_multibulk_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // Redis's own defaults: proto-max-bulk-len 512 MiB; 1M elements is Codis's multibulk cap.
        Self {
            max_bulk_len: 512 * 1024 * 1024,
            max_multibulk_len: 1024 * 1024,
        }
    }
}

/// Longest inline command or header line accepted (Redis: PROTO_INLINE_MAX_SIZE).
const MAX_INLINE: usize = 64 * 1024;

/// One client command: the raw frame and where each argument lies in it.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    raw: Bytes,
    args: SmallVec<[(u32, u32); 6]>,
}

impl Request {
    /// Builds a multibulk request from arguments (used for sub-commands the proxy sends).
    pub fn from_args<A: AsRef<[u8]>>(args: &[A]) -> Self {
        let len: usize = args.iter().map(|a| a.as_ref().len() + 16).sum::<usize>() + 16;
        let mut buf = BytesMut::with_capacity(len);
        let mut ranges = SmallVec::new();
        put_header(&mut buf, b'*', args.len());
        for a in args {
            let a = a.as_ref();
            put_header(&mut buf, b'$', a.len());
            ranges.push((buf.len() as u32, a.len() as u32));
            buf.put_slice(a);
            buf.put_slice(b"\r\n");
        }
        Self {
            raw: buf.freeze(),
            args: ranges,
        }
    }

    /// The exact bytes to send to a backend.
    pub fn as_bytes(&self) -> &Bytes {
        &self.raw
    }

    pub fn argc(&self) -> usize {
        self.args.len()
    }

    /// Argument `i` (0 is the command name).
    ///
    /// # Panics
    /// If `i >= argc()`; callers check arity against the command table first.
    #[inline]
    pub fn arg(&self, i: usize) -> &[u8] {
        let (start, len) = self.args[i];
        &self.raw[start as usize..(start + len) as usize]
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        (i < self.args.len()).then(|| self.arg(i))
    }

    /// Argument `i` as a `Bytes` sharing the frame's buffer.
    pub fn arg_bytes(&self, i: usize) -> Bytes {
        let (start, len) = self.args[i];
        self.raw.slice(start as usize..(start + len) as usize)
    }

    pub fn args(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.argc()).map(|i| self.arg(i))
    }
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.args().map(|a| String::from_utf8_lossy(a).into_owned()))
            .finish()
    }
}

/// Encodes `count` arguments as a multibulk request: for sub-commands the proxy builds on
/// the hot path (MGET split), without the argument table `Request::from_args` keeps.
pub fn encode_request<'a>(
    count: usize,
    args: impl IntoIterator<Item = &'a [u8]>,
    size_hint: usize,
) -> Bytes {
    let mut buf = BytesMut::with_capacity(size_hint + 16 * (count + 1));
    put_header(&mut buf, b'*', count);
    let mut n = 0;
    for a in args {
        put_header(&mut buf, b'$', a.len());
        buf.put_slice(a);
        buf.put_slice(b"\r\n");
        n += 1;
    }
    debug_assert_eq!(n, count, "encode_request: count and arguments disagree");
    buf.freeze()
}

pub(crate) fn put_header(buf: &mut BytesMut, kind: u8, n: usize) {
    buf.put_u8(kind);
    buf.put_slice(itoa::Buffer::new().format(n).as_bytes());
    buf.put_slice(b"\r\n");
}

/// Where a partly received multibulk stopped, so the next call resumes instead of rescanning.
#[derive(Debug)]
struct Partial {
    nargs: usize,
    pos: usize,
    args: SmallVec<[(u32, u32); 6]>,
}

/// Decodes requests from a connection's read buffer. Keeps the progress of a partial frame.
#[derive(Debug, Default)]
pub struct RequestDecoder {
    limits: Limits,
    partial: Option<Partial>,
}

impl RequestDecoder {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            partial: None,
        }
    }

    /// Applies `limits` from the next header on (e.g. the full limits once a client
    /// authenticates).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Takes one complete request off the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed: a partial frame is normal operation.
    ///
    /// # Errors
    /// A `ProtocolError` for bytes that can never become a valid request; the connection
    /// should be answered with the error and closed.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        loop {
            if self.partial.is_none() {
                match buf.first() {
                    None => return Ok(None),
                    Some(b'*') => {
                        let Some(end) = find_crlf(buf, 1) else {
                            return if buf.len() > MAX_INLINE {
                                Err(ProtocolError::InvalidMultibulkLength)
                            } else {
                                Ok(None)
                            };
                        };
                        let n =
                            parse_i64(&buf[1..end]).ok_or(ProtocolError::InvalidMultibulkLength)?;
                        if n > self.limits.max_multibulk_len as i64 {
                            return Err(ProtocolError::InvalidMultibulkLength);
                        }
                        if n <= 0 {
                            // Redis ignores empty multibulks.
                            let _ = buf.split_to(end + 2);
                            continue;
                        }
                        let nargs = n as usize;
                        self.partial = Some(Partial {
                            nargs,
                            pos: end + 2,
                            args: SmallVec::new(),
                        });
                    }
                    Some(_) => match self.decode_inline(buf)? {
                        Some(Some(req)) => return Ok(Some(req)),
                        Some(None) => continue, // blank line
                        None => return Ok(None),
                    },
                }
            }
            return self.decode_multibulk(buf);
        }
    }

    /// Bytes still needed to finish the bulk being received, if known: lets the reader reserve
    /// a large value's room once instead of growing the buffer step by step.
    pub fn wanted(&self, buf: &BytesMut) -> usize {
        let Some(p) = &self.partial else { return 0 };
        if buf.get(p.pos) != Some(&b'$') {
            return 0;
        }
        let Some(end) = find_crlf(buf, p.pos + 1) else {
            return 0;
        };
        match parse_i64(&buf[p.pos + 1..end]) {
            Some(n) if n >= 0 => (end + 2 + n as usize + 2).saturating_sub(buf.len()),
            _ => 0,
        }
    }

    fn decode_multibulk(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        let p = self
            .partial
            .as_mut()
            .expect("decode_multibulk runs with a partial frame");
        while p.args.len() < p.nargs {
            let Some(&kind) = buf.get(p.pos) else {
                return Ok(None);
            };
            if kind != b'$' {
                self.partial = None;
                return Err(ProtocolError::UnexpectedByte {
                    expected: '$',
                    got: kind as char,
                });
            }
            let Some(end) = find_crlf(buf, p.pos + 1) else {
                if buf.len() - p.pos > 32 {
                    self.partial = None;
                    return Err(ProtocolError::InvalidBulkLength);
                }
                return Ok(None);
            };
            let len = match parse_i64(&buf[p.pos + 1..end]) {
                Some(n) if n >= 0 && n as u64 <= self.limits.max_bulk_len as u64 => n as usize,
                _ => {
                    self.partial = None;
                    return Err(ProtocolError::InvalidBulkLength);
                }
            };
            let start = end + 2;
            if buf.len() < start + len + 2 {
                return Ok(None);
            }
            if &buf[start + len..start + len + 2] != b"\r\n" {
                self.partial = None;
                return Err(ProtocolError::InvalidBulkLength);
            }
            p.args.push((start as u32, len as u32));
            p.pos = start + len + 2;
        }
        let p = self.partial.take().expect("checked above");
        Ok(Some(Request {
            raw: buf.split_to(p.pos).freeze(),
            args: p.args,
        }))
    }

    /// `None`: need more bytes; `Some(None)`: a blank line was skipped.
    fn decode_inline(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<Option<Request>>, ProtocolError> {
        let Some(nl) = memchr::memchr(b'\n', buf) else {
            return if buf.len() > MAX_INLINE {
                Err(ProtocolError::InlineTooBig)
            } else {
                Ok(None)
            };
        };
        let line = buf.split_to(nl + 1);
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let args = split_inline(line)?;
        if args.is_empty() {
            return Ok(Some(None));
        }
        if args.len() > self.limits.max_multibulk_len {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        Ok(Some(Some(Request::from_args(&args))))
    }
}

/// Splits an inline command like Redis's `sdssplitargs`: spaces separate arguments, double
/// quotes allow `\n`, `\xHH`-style escapes, single quotes are literal.
fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        let mut cur = Vec::new();
        match line[i] {
            q @ (b'"' | b'\'') => {
                i += 1;
                loop {
                    let Some(&c) = line.get(i) else {
                        return Err(ProtocolError::UnbalancedQuotes);
                    };
                    i += 1;
                    if c == q {
                        if line.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        break;
                    }
                    if c == b'\\' && q == b'"' {
                        let Some(&e) = line.get(i) else {
                            return Err(ProtocolError::UnbalancedQuotes);
                        };
                        i += 1;
                        cur.push(match e {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 8,
                            b'a' => 7,
                            b'x' if i + 2 <= line.len() => {
                                match std::str::from_utf8(&line[i..i + 2])
                                    .ok()
                                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                                {
                                    Some(v) => {
                                        i += 2;
                                        v
                                    }
                                    None => b'x',
                                }
                            }
                            other => other,
                        });
                    } else if c == b'\\' && q == b'\'' && line.get(i) == Some(&b'\'') {
                        cur.push(b'\'');
                        i += 1;
                    } else {
                        cur.push(c);
                    }
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    cur.push(line[i]);
                    i += 1;
                }
            }
        }
        out.push(cur);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn decode_all(
        dec: &mut RequestDecoder,
        buf: &mut BytesMut,
    ) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut out = Vec::new();
        while let Some(r) = dec.decode(buf)? {
            out.push(r.args().map(<[u8]>::to_vec).collect());
        }
        Ok(out)
    }

    fn args(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_inline_decode_to_the_same_arguments() {
        let mut dec = RequestDecoder::default();
        let mut buf =
            BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nGET k\r\nPING\r\n\r\n*0\r\n"[..]);
        let got = decode_all(&mut dec, &mut buf).unwrap();
        assert_eq!(
            got,
            vec![args(&["GET", "k"]), args(&["GET", "k"]), args(&["PING"])]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_frame_is_none_and_resumes() {
        let mut dec = RequestDecoder::default();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$5\r\nhel"[..]);
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert_eq!(dec.wanted(&buf), 4);
        buf.extend_from_slice(b"lo\r\n");
        let r = dec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(r.arg(1), b"hello");
        assert_eq!(r.as_bytes().as_ref(), b"*2\r\n$3\r\nSET\r\n$5\r\nhello\r\n");
    }

    #[test]
    fn inline_quotes_follow_redis_rules() {
        assert_eq!(
            split_inline(br#"SET "a b" 'c d' "\x41\n""#).unwrap(),
            args(&["SET", "a b", "c d", "A\n"])
        );
        assert_eq!(
            split_inline(br#"SET "a"#),
            Err(ProtocolError::UnbalancedQuotes)
        );
    }

    #[test]
    fn malformed_input_is_a_protocol_error() {
        let limits = Limits {
            max_bulk_len: 1 << 20,
            max_multibulk_len: 1000,
        };
        for bad in [
            &b"*1\r\n:1\r\n"[..],
            b"*1\r\n$-5\r\n",
            b"*2147483647\r\n",
            b"*1\r\n$9999999999\r\n",
            b"*1\r\n$3\r\nGETxx",
            b"*x\r\n",
            b"*1\r\n$abc\r\n",
        ] {
            let mut dec = RequestDecoder::new(limits);
            let mut buf = BytesMut::from(bad);
            assert!(
                dec.decode(&mut buf).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn header_limits_apply_before_the_data_arrives() {
        let mut dec = RequestDecoder::new(Limits {
            max_bulk_len: 10,
            max_multibulk_len: 4,
        });
        assert_eq!(
            dec.decode(&mut BytesMut::from(&b"*5\r\n"[..])),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        let mut dec = RequestDecoder::new(Limits {
            max_bulk_len: 10,
            max_multibulk_len: 4,
        });
        assert_eq!(
            dec.decode(&mut BytesMut::from(&b"*1\r\n$11\r\n"[..])),
            Err(ProtocolError::InvalidBulkLength)
        );
    }

    #[test]
    fn encode_request_matches_from_args() {
        let args: [&[u8]; 3] = [b"MGET", b"a", b""];
        assert_eq!(
            encode_request(3, args, 8),
            Request::from_args(&args).as_bytes()
        );
    }

    #[test]
    fn from_args_round_trips() {
        let r = Request::from_args(&["MGET", "a", ""]);
        let mut buf = BytesMut::from(r.as_bytes().as_ref());
        let got = RequestDecoder::default().decode(&mut buf).unwrap().unwrap();
        assert_eq!(got, r);
        assert_eq!(got.arg(2), b"");
    }

    fn arb_request() -> impl Strategy<Value = Vec<Vec<u8>>> {
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
    }

    proptest! {
        #[test]
        fn any_split_of_a_valid_stream_decodes_to_the_same_requests(
            reqs in prop::collection::vec(arb_request(), 1..8),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let stream: Vec<u8> = reqs.iter().flat_map(|r| Request::from_args(r).as_bytes().to_vec()).collect();
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
            cuts.sort_unstable();
            let mut dec = RequestDecoder::default();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            let mut last = 0;
            for cut in cuts.into_iter().chain([stream.len()]) {
                buf.extend_from_slice(&stream[last..cut]);
                last = cut;
                got.extend(decode_all(&mut dec, &mut buf).unwrap());
            }
            prop_assert_eq!(got, reqs);
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn decoder_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut dec = RequestDecoder::default();
            let mut buf = BytesMut::from(&bytes[..]);
            let _ = decode_all(&mut dec, &mut buf);
        }
    }
}
