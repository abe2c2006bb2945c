//! Incremental, zero-copy decoder for client requests: RESP multibulk arrays of bulk strings,
//! and inline commands (`PING\r\n`, as telnet and health checks send them).
//!
//! A request is one `Bytes` holding the exact frame plus the byte ranges of its arguments, so
//! forwarding it to a backend is a reference-count bump, not a copy or a re-encode. That
//! backend connection is shared with other clients, so a frame is accepted only in a form
//! Redis parses exactly as we do (see [`RequestDecoder`]); inline commands are re-encoded.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use smallvec::SmallVec;

use super::ProtocolError;

mod inline;
#[cfg(test)]
mod tests;

/// Caps checked at each header, before the data arrives, so `*2147483647` or `$9999999999`
/// is refused at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest argument, in bytes (Redis: `proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// Most arguments in one request.
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

impl Limits {
    /// Redis's caps for a client that has not authenticated yet, its fix for CVE-2021-32675
    /// (an unauthenticated client announcing huge frames to make the server allocate): at
    /// most 10 arguments of at most 16 KiB each. See [`RequestDecoder::set_pre_auth_limits`].
    pub const UNAUTHENTICATED: Limits = Limits {
        max_bulk_len: 16 * 1024,
        max_multibulk_len: 10,
    };

    fn min(self, other: Limits) -> Limits {
        Limits {
            max_bulk_len: self.max_bulk_len.min(other.max_bulk_len),
            max_multibulk_len: self.max_multibulk_len.min(other.max_multibulk_len),
        }
    }
}

/// Longest inline command accepted, in bytes (Redis: PROTO_INLINE_MAX_SIZE).
const MAX_INLINE: usize = 64 * 1024;

/// Most digits in a length header: 18 digits fit an `i64` without overflow checks and are
/// already more than any proxy could buffer. Redis takes 19, so this only makes us stricter.
const MAX_DIGITS: usize = 18;

/// Room [`RequestDecoder::wanted`] may always suggest, whatever has been received so far.
const WANTED_FLOOR: usize = 64 * 1024;

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

    /// The request's bytes, kept after the request is done with (no copy).
    pub fn into_bytes(self) -> Bytes {
        self.raw
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

    /// Where argument `i` lies in [`Request::as_bytes`]: its start and length. The start is
    /// never 0 (the frame begins with its header).
    #[inline]
    pub fn arg_range(&self, i: usize) -> (u32, u32) {
        self.args[i]
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

/// The limits in force: the ordinary ones, tightened while the client is unauthenticated.
#[derive(Debug, Clone, Copy, Default)]
struct Caps {
    ordinary: Limits,
    pre_auth: Option<Limits>,
    /// `ordinary` tightened by `pre_auth`: the one comparison made per header.
    in_force: Limits,
}

impl Caps {
    fn new(ordinary: Limits, pre_auth: Option<Limits>) -> Self {
        Self {
            ordinary,
            pre_auth,
            in_force: pre_auth.map_or(ordinary, |p| ordinary.min(p)),
        }
    }

    /// Redis's order: over the ordinary limit is invalid, else over the pre-auth one is
    /// "unauthenticated".
    #[inline]
    fn check_multibulk(&self, n: u64) -> Result<(), ProtocolError> {
        if n <= self.in_force.max_multibulk_len as u64 {
            Ok(())
        } else if n > self.ordinary.max_multibulk_len as u64 {
            Err(ProtocolError::InvalidMultibulkLength)
        } else {
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        }
    }

    #[inline]
    fn check_bulk(&self, n: u64) -> Result<(), ProtocolError> {
        if n <= self.in_force.max_bulk_len as u64 {
            Ok(())
        } else if n > self.ordinary.max_bulk_len as u64 {
            Err(ProtocolError::InvalidBulkLength)
        } else {
            Err(ProtocolError::UnauthenticatedBulkLength)
        }
    }
}

/// Where a partly received multibulk stopped, so the next call resumes instead of rescanning.
#[derive(Debug)]
struct Partial {
    nargs: usize,
    /// Where the next argument's header starts, or, once `bulk` is known, its payload.
    pos: usize,
    /// Length of the argument whose header has been parsed.
    bulk: Option<usize>,
    args: SmallVec<[(u32, u32); 6]>,
}

impl Partial {
    /// Parses as many arguments as `buf` holds; `true` once all `nargs` are in.
    #[inline]
    fn fill(&mut self, buf: &[u8], caps: &Caps) -> Result<bool, ProtocolError> {
        while self.args.len() < self.nargs {
            let len = match self.bulk {
                Some(len) => len,
                None => {
                    match buf.get(self.pos) {
                        None => return Ok(false),
                        Some(b'$') => {}
                        Some(&got) => {
                            return Err(ProtocolError::UnexpectedByte {
                                expected: '$',
                                got: got as char,
                            });
                        }
                    }
                    let (len, next) = match parse_len(buf, self.pos + 1, false) {
                        Header::Len(n, next) => (n as u64, next),
                        Header::Incomplete => return Ok(false),
                        Header::Invalid => return Err(ProtocolError::InvalidBulkLength),
                    };
                    caps.check_bulk(len)?;
                    // Argument offsets are u32: a frame past 4 GiB is refused, not wrapped.
                    if next as u64 + len + 2 > u64::from(u32::MAX) {
                        return Err(ProtocolError::InvalidBulkLength);
                    }
                    self.pos = next;
                    self.bulk = Some(len as usize);
                    len as usize
                }
            };
            let end = self.pos + len;
            match buf.get(end..end + 2) {
                None => return Ok(false),
                Some(b"\r\n") => {}
                // Redis would skip any two bytes here; refusing is the only safe agreement.
                Some(_) => return Err(ProtocolError::UnterminatedBulk),
            }
            self.args.push((self.pos as u32, len as u32));
            self.pos = end + 2;
            self.bulk = None;
        }
        Ok(true)
    }
}

/// Decodes requests from a connection's read buffer. Keeps the progress of a partial frame.
///
/// Accepts a subset of what Redis 7.0 accepts, parsed the same way (`processMultibulkBuffer`,
/// `processInlineBuffer`, `string2ll`, `sdssplitargs`; each rule has a unit test quoting the
/// experiment against redis-server 7.0.15):
///
/// ```text
/// multibulk = "*" count CRLF, then count times: "$" len CRLF <len bytes> CRLF
/// count     = "0" | ["-"] [1-9] [0-9]{0,17}   <= 0: skipped without a reply, as Redis does
/// len       = "0" | [1-9] [0-9]{0,17}         no "+", leading zero, "-0", space or NUL
/// inline    = any line not starting with "*", up to 64 KiB, without NUL, ending "\n" or
///             "\r\n"; split into arguments exactly as sdssplitargs does; blank: skipped
/// ```
///
/// Refused where Redis is lenient or would stall: a header byte other than a digit before
/// CRLF (Redis stops at the first `\r` and skips the next byte unseen), anything but CRLF
/// after a payload (Redis skips any two bytes), NUL in a header or inline line (Redis waits
/// for a line end its C string search never finds), 19-digit lengths.
#[derive(Debug, Default)]
pub struct RequestDecoder {
    caps: Caps,
    partial: Option<Partial>,
}

impl RequestDecoder {
    pub fn new(limits: Limits) -> Self {
        Self {
            caps: Caps::new(limits, None),
            partial: None,
        }
    }

    /// Replaces the ordinary limits. Every header parsed from now on is checked against them,
    /// including the rest of a frame in progress (a frame whose `*count` was accepted keeps
    /// its count; its arguments not yet announced are checked).
    pub fn set_limits(&mut self, limits: Limits) {
        self.caps = Caps::new(limits, self.caps.pre_auth);
    }

    /// Applies tighter limits (usually [`Limits::UNAUTHENTICATED`]) on top of the ordinary
    /// ones until called with `None`, as Redis does before `AUTH`: a header over them but
    /// within the ordinary ones is refused as "unauthenticated multibulk/bulk length". Takes
    /// effect at the next header parsed, as [`Self::set_limits`] does.
    pub fn set_pre_auth_limits(&mut self, pre_auth: Option<Limits>) {
        self.caps = Caps::new(self.caps.ordinary, pre_auth);
    }

    /// The limits in force now: the ordinary ones, tightened by the pre-auth ones if set.
    pub fn limits(&self) -> Limits {
        self.caps.in_force
    }

    /// Takes one complete request off the front of `buf`.
    ///
    /// Returns `Ok(None)` when more bytes are needed: a partial frame is normal operation.
    /// Never reserves memory for a length that has been announced but not received.
    ///
    /// # Errors
    /// A `ProtocolError` for bytes that can never become a valid request; the connection
    /// should be answered with the error and closed. `buf` keeps the offending frame.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        loop {
            if self.partial.is_none() {
                match buf.first() {
                    None => return Ok(None),
                    Some(b'*') => match parse_len(buf, 1, true) {
                        Header::Incomplete => return Ok(None),
                        Header::Invalid => return Err(ProtocolError::InvalidMultibulkLength),
                        Header::Len(n, next) if n <= 0 => {
                            // Redis skips `*0` and `*-1` (any negative count) without a reply.
                            buf.advance(next);
                            continue;
                        }
                        Header::Len(n, next) => {
                            self.caps.check_multibulk(n as u64)?;
                            self.partial = Some(Partial {
                                nargs: n as usize,
                                pos: next,
                                bulk: None,
                                args: SmallVec::new(),
                            });
                        }
                    },
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

    /// Room worth reserving in `buf` for the frame being received: the rest of the argument
    /// whose header has arrived, capped at `max(buf.len(), 64 KiB)`.
    ///
    /// The cap is why this is safe to reserve: a client announcing `$536870912` and sending
    /// nothing more gets 64 KiB, not 512 MiB, while a large value that does arrive grows the
    /// buffer geometrically (at most doubling it per read).
    pub fn wanted(&self, buf: &BytesMut) -> usize {
        self.wanted_capped(buf, buf.len().max(WANTED_FLOOR))
    }

    /// The rest of the argument being received (header parsed, payload incomplete), at most
    /// `cap` bytes; 0 if no such argument. Uncapped, this is the client's announced length:
    /// never reserve it without a cap.
    pub fn wanted_capped(&self, buf: &[u8], cap: usize) -> usize {
        match &self.partial {
            Some(Partial {
                pos,
                bulk: Some(len),
                ..
            }) => (pos + len + 2).saturating_sub(buf.len()).min(cap),
            _ => 0,
        }
    }

    fn decode_multibulk(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        let Self { caps, partial } = self;
        let p = partial
            .as_mut()
            .expect("decode_multibulk runs with a partial frame");
        match p.fill(buf, caps) {
            Ok(false) => Ok(None),
            Ok(true) => {
                let p = partial.take().expect("checked above");
                Ok(Some(Request {
                    raw: buf.split_to(p.pos).freeze(),
                    args: p.args,
                }))
            }
            Err(e) => {
                *partial = None;
                Err(e)
            }
        }
    }

    /// `None`: need more bytes; `Some(None)`: a blank line was skipped.
    fn decode_inline(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<Option<Request>>, ProtocolError> {
        let window = &buf[..buf.len().min(MAX_INLINE + 1)];
        let Some(at) = memchr::memchr2(b'\n', 0, window) else {
            return if buf.len() > MAX_INLINE {
                Err(ProtocolError::InlineTooBig)
            } else {
                Ok(None)
            };
        };
        if buf[at] == 0 {
            return Err(ProtocolError::NulInInline);
        }
        // Redis strips one `\r` before the `\n`; any other `\r` separates arguments.
        let line = &buf[..at];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let args = inline::split(line)?;
        self.caps.check_multibulk(args.len() as u64)?;
        for a in &args {
            self.caps.check_bulk(a.len() as u64)?;
        }
        buf.advance(at + 1);
        if args.is_empty() {
            return Ok(Some(None));
        }
        Ok(Some(Some(Request::from_args(&args))))
    }
}

/// A length header after its type byte, as far as received.
enum Header {
    /// The value and where the header ends (after its CRLF).
    Len(i64, usize),
    /// Every byte so far can still begin a valid header (at most 20 after the type byte).
    Incomplete,
    Invalid,
}

/// Parses `count`/`len` (see [`RequestDecoder`]) at `at`: the forms Redis's `string2ll`
/// accepts, then exactly CRLF. `signed` allows a `-`.
#[inline]
fn parse_len(buf: &[u8], at: usize, signed: bool) -> Header {
    let neg = signed && buf.get(at) == Some(&b'-');
    let digits = at + usize::from(neg);
    let mut i = digits;
    let mut v: i64 = 0;
    loop {
        let Some(&b) = buf.get(i) else {
            return Header::Incomplete;
        };
        match b {
            b'0'..=b'9' => {
                let n = i - digits;
                // "0" alone is the only number that may start with 0: no "01", no "-0".
                if n == MAX_DIGITS || (n > 0 && buf[digits] == b'0') || (neg && n == 0 && b == b'0')
                {
                    return Header::Invalid;
                }
                v = v * 10 + i64::from(b - b'0');
                i += 1;
            }
            b'\r' if i > digits => {
                return match buf.get(i + 1) {
                    None => Header::Incomplete,
                    Some(b'\n') => Header::Len(if neg { -v } else { v }, i + 2),
                    Some(_) => Header::Invalid,
                };
            }
            _ => return Header::Invalid,
        }
    }
}
