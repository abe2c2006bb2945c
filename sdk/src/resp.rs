//! A small RESP2/RESP3 reader and writer for plugins that read or build replies (merges,
//! converters). The reader borrows the input, never panics and never recurses: malformed or
//! truncated input is an [`RespError`].

use std::fmt;

/// Why bytes are not one RESP value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespError {
    /// The value is cut short.
    Incomplete,
    /// Not RESP (unknown type byte, bad length, missing CRLF …).
    Invalid,
}

impl fmt::Display for RespError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Incomplete => "incomplete RESP value",
            Self::Invalid => "invalid RESP",
        })
    }
}

impl std::error::Error for RespError {}

/// One RESP value, borrowed from the input.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// `+text`
    Simple(&'a [u8]),
    /// `-text`, without the `-`.
    Error(&'a [u8]),
    /// `:n`
    Int(i64),
    /// `$len bytes`
    Bulk(&'a [u8]),
    /// `$-1`, `*-1` or RESP3 `_`.
    Nil,
    /// `*n` elements.
    Array(Seq<'a>),
    /// RESP3 `%n`: the sequence holds 2n elements, key then value.
    Map(Seq<'a>),
    /// RESP3 `~n`.
    Set(Seq<'a>),
    /// RESP3 `>n`.
    Push(Seq<'a>),
    /// RESP3 `,` (its text is kept in [`Value::Double`]'s second field for exact copies).
    Double(f64, &'a [u8]),
    /// RESP3 `#t` / `#f`.
    Bool(bool),
    /// RESP3 `(digits`.
    BigNumber(&'a [u8]),
    /// RESP3 `=len fmt:text` (the bytes include the `fmt:` prefix).
    Verbatim(&'a [u8]),
}

impl<'a> Value<'a> {
    /// The integer of `:n`, or of a simple/bulk string holding one.
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            Value::Int(n) => Some(n),
            Value::Simple(b) | Value::Bulk(b) => parse_i64(b),
            _ => None,
        }
    }

    /// The number of `,x`, `:n`, or a simple/bulk string holding one (RESP2 sends doubles as
    /// bulk strings; `inf` and `-inf` are accepted).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Double(d, _) => Some(d),
            Value::Int(n) => Some(n as f64),
            Value::Simple(b) | Value::Bulk(b) => parse_f64(b),
            _ => None,
        }
    }

    /// The bytes of a simple string, bulk string, big number or verbatim string, or the text of
    /// a double.
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Value::Simple(b) | Value::Bulk(b) | Value::BigNumber(b) | Value::Verbatim(b) => Some(b),
            Value::Double(_, t) => Some(t),
            _ => None,
        }
    }

    /// The elements of an array, set, push or map (maps: key, value, key, value …).
    pub fn as_seq(&self) -> Option<Seq<'a>> {
        match *self {
            Value::Array(s) | Value::Map(s) | Value::Set(s) | Value::Push(s) => Some(s),
            _ => None,
        }
    }

    /// Whether this is a nil.
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error(_))
    }
}

/// The elements of an aggregate, parsed lazily. Iterate for [`Value`]s, or use
/// [`Seq::raw_items`] to copy elements verbatim.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seq<'a> {
    buf: &'a [u8],
    len: usize,
}

impl<'a> Seq<'a> {
    /// Number of elements (for a map: twice the number of pairs).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements as raw RESP, each a complete value.
    pub fn raw_items(&self) -> RawItems<'a> {
        RawItems {
            buf: self.buf,
            at: 0,
            left: self.len,
        }
    }
}

impl<'a> IntoIterator for Seq<'a> {
    type Item = Value<'a>;
    type IntoIter = Values<'a>;

    fn into_iter(self) -> Values<'a> {
        Values {
            raw: self.raw_items(),
        }
    }
}

/// Iterator over the raw elements of a [`Seq`].
#[derive(Debug, Clone)]
pub struct RawItems<'a> {
    buf: &'a [u8],
    at: usize,
    left: usize,
}

impl<'a> Iterator for RawItems<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match value_end(self.buf, self.at) {
            Ok(end) => {
                let item = self.buf.get(self.at..end)?;
                self.at = end;
                Some(item)
            }
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

/// Iterator over the parsed elements of a [`Seq`].
#[derive(Debug, Clone)]
pub struct Values<'a> {
    raw: RawItems<'a>,
}

impl<'a> Iterator for Values<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        let raw = self.raw.next()?;
        parse(raw).ok().map(|(v, _)| v)
    }
}

/// Parses the value at the start of `buf`; returns it and the number of bytes it takes.
pub fn parse(buf: &[u8]) -> Result<(Value<'_>, usize), RespError> {
    let end = value_end(buf, 0)?;
    let (head, body) = header(buf, 0)?;
    let v = match head {
        Header::Line(t, line) => match t {
            b'+' => Value::Simple(line),
            b'-' => Value::Error(line),
            b':' => Value::Int(parse_i64(line).ok_or(RespError::Invalid)?),
            b',' => Value::Double(parse_f64(line).ok_or(RespError::Invalid)?, line),
            b'#' => match line {
                b"t" => Value::Bool(true),
                b"f" => Value::Bool(false),
                _ => return Err(RespError::Invalid),
            },
            b'(' => Value::BigNumber(line),
            _ => Value::Nil,
        },
        Header::Blob(t, bytes) => match t {
            b'=' => Value::Verbatim(bytes),
            b'!' => Value::Error(bytes),
            _ => Value::Bulk(bytes),
        },
        Header::Agg(t, n) => {
            let seq = Seq {
                buf: buf.get(body..end).ok_or(RespError::Invalid)?,
                len: if t == b'%' { n * 2 } else { n },
            };
            match t {
                b'%' => Value::Map(seq),
                b'~' => Value::Set(seq),
                b'>' => Value::Push(seq),
                _ => Value::Array(seq),
            }
        }
        Header::Nil => Value::Nil,
    };
    Ok((v, end))
}

enum Header<'a> {
    Line(u8, &'a [u8]),
    Blob(u8, &'a [u8]),
    Agg(u8, usize),
    Nil,
}

/// The line starting at `at` (without CRLF) and the offset after the CRLF.
fn line(buf: &[u8], at: usize) -> Result<(&[u8], usize), RespError> {
    let rest = buf.get(at..).ok_or(RespError::Incomplete)?;
    let cr = rest
        .iter()
        .position(|&b| b == b'\r')
        .ok_or(RespError::Incomplete)?;
    match rest.get(cr + 1) {
        Some(b'\n') => Ok((&rest[..cr], at + cr + 2)),
        Some(_) => Err(RespError::Invalid),
        None => Err(RespError::Incomplete),
    }
}

/// Parses the header of the value at `at`; returns it and where its body starts (for blobs:
/// after the payload's CRLF).
fn header(buf: &[u8], at: usize) -> Result<(Header<'_>, usize), RespError> {
    let t = *buf.get(at).ok_or(RespError::Incomplete)?;
    let (l, next) = line(buf, at + 1)?;
    match t {
        b'+' | b'-' | b':' | b',' | b'#' | b'(' => Ok((Header::Line(t, l), next)),
        b'_' if l.is_empty() => Ok((Header::Nil, next)),
        b'$' | b'=' | b'!' => {
            let n = parse_i64(l).ok_or(RespError::Invalid)?;
            if n == -1 && t == b'$' {
                return Ok((Header::Nil, next));
            }
            let n = usize::try_from(n).map_err(|_| RespError::Invalid)?;
            let end = next.checked_add(n).ok_or(RespError::Invalid)?;
            let bytes = buf.get(next..end).ok_or(RespError::Incomplete)?;
            match buf.get(end..end + 2) {
                Some(b"\r\n") => Ok((Header::Blob(t, bytes), end + 2)),
                Some(_) => Err(RespError::Invalid),
                None => Err(RespError::Incomplete),
            }
        }
        b'*' | b'%' | b'~' | b'>' => {
            let n = parse_i64(l).ok_or(RespError::Invalid)?;
            if n == -1 && t == b'*' {
                return Ok((Header::Nil, next));
            }
            let n = usize::try_from(n).map_err(|_| RespError::Invalid)?;
            Ok((Header::Agg(t, n), next))
        }
        _ => Err(RespError::Invalid),
    }
}

/// The offset just past the complete value starting at `at`. Iterative, so deep nesting cannot
/// overflow the stack; every header consumes at least 3 bytes, so a huge announced count ends
/// at the end of the buffer (`Incomplete`), not in a long loop.
pub fn value_end(buf: &[u8], at: usize) -> Result<usize, RespError> {
    let mut pending: usize = 1;
    let mut pos = at;
    while pending > 0 {
        pending -= 1;
        let (h, next) = header(buf, pos)?;
        if let Header::Agg(t, n) = h {
            let n = if t == b'%' { n.checked_mul(2) } else { Some(n) };
            pending = pending
                .checked_add(n.ok_or(RespError::Invalid)?)
                .ok_or(RespError::Invalid)?;
        }
        pos = next;
    }
    Ok(pos)
}

/// Parses a decimal `i64` (optional `-`, no spaces, no `+`), as Redis does.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        n = if neg {
            n.checked_mul(10)?.checked_sub(d)?
        } else {
            n.checked_mul(10)?.checked_add(d)?
        };
    }
    Some(n)
}

/// Parses a float as Redis prints and accepts them (`1.5`, `-3`, `inf`, `-inf`, `+inf`);
/// `nan` is refused.
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Writes RESP into a buffer. RESP2 by default: maps are flat arrays, doubles are bulk
/// strings, nil is `$-1`; [`RespWriter::resp3`] writes the RESP3 types.
#[derive(Debug)]
pub struct RespWriter<'a> {
    buf: &'a mut Vec<u8>,
    resp3: bool,
}

impl<'a> RespWriter<'a> {
    /// A RESP2 writer appending to `buf`.
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Self { buf, resp3: false }
    }

    /// A RESP3 writer appending to `buf`.
    pub fn resp3(buf: &'a mut Vec<u8>) -> Self {
        Self { buf, resp3: true }
    }

    fn head(&mut self, t: u8, n: i64) -> &mut Self {
        self.buf.push(t);
        push_int(self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// `*n`: follow with `n` values.
    pub fn array(&mut self, n: usize) -> &mut Self {
        self.head(b'*', n as i64)
    }

    /// A map of `n` pairs: `%n` (RESP3) or `*2n` (RESP2); follow with `2n` values.
    pub fn map(&mut self, n: usize) -> &mut Self {
        if self.resp3 {
            self.head(b'%', n as i64)
        } else {
            self.head(b'*', 2 * n as i64)
        }
    }

    /// A set: `~n` (RESP3) or `*n` (RESP2).
    pub fn set(&mut self, n: usize) -> &mut Self {
        self.head(if self.resp3 { b'~' } else { b'*' }, n as i64)
    }

    /// `$len bytes`.
    pub fn bulk(&mut self, bytes: &[u8]) -> &mut Self {
        self.head(b'$', bytes.len() as i64);
        self.buf.extend_from_slice(bytes);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// `+text` (CR and LF are replaced by spaces).
    pub fn simple(&mut self, text: &str) -> &mut Self {
        self.line(b'+', text.as_bytes())
    }

    /// `-text`, e.g. `ERR no such key` (CR and LF are replaced by spaces).
    pub fn error(&mut self, text: &str) -> &mut Self {
        self.line(b'-', text.as_bytes())
    }

    fn line(&mut self, t: u8, text: &[u8]) -> &mut Self {
        self.buf.push(t);
        self.buf.extend(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// `:n`.
    pub fn int(&mut self, n: i64) -> &mut Self {
        self.head(b':', n)
    }

    /// Nil: `$-1` (RESP2) or `_` (RESP3).
    pub fn nil(&mut self) -> &mut Self {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
        self
    }

    /// Nil array `*-1` (RESP2) or `_` (RESP3).
    pub fn nil_array(&mut self) -> &mut Self {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
        self
    }

    /// A double: `,x` (RESP3) or a bulk string (RESP2), shortest round-trip text, `inf` /
    /// `-inf` for infinities.
    pub fn double(&mut self, v: f64) -> &mut Self {
        let mut text = [0u8; 32];
        let n = format_f64(v, &mut text);
        if self.resp3 {
            self.line(b',', &text[..n])
        } else {
            self.bulk(&text[..n])
        }
    }

    /// `#t` / `#f` (RESP3) or `:1` / `:0` (RESP2).
    pub fn bool(&mut self, v: bool) -> &mut Self {
        if self.resp3 {
            self.buf
                .extend_from_slice(if v { b"#t\r\n" } else { b"#f\r\n" });
            self
        } else {
            self.int(i64::from(v))
        }
    }

    /// Bytes that already are complete RESP values (e.g. an element copied from a reply).
    pub fn raw(&mut self, resp: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(resp);
        self
    }
}

/// Appends the decimal text of `n` without allocating.
pub fn push_int(buf: &mut Vec<u8>, n: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        buf.push(b'-');
    }
    buf.extend_from_slice(&tmp[i..]);
}

fn format_f64(v: f64, dst: &mut [u8; 32]) -> usize {
    use std::io::Write as _;
    let mut cur = std::io::Cursor::new(&mut dst[..]);
    let _ = if v.is_infinite() {
        cur.write_all(if v > 0.0 { b"inf" } else { b"-inf" })
    } else {
        write!(cur, "{v}")
    };
    cur.position() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_values_parse_and_copy_verbatim() {
        let buf = b"*3\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n%1\r\n+k\r\n,1.5\r\nrest";
        let (v, n) = parse(buf).unwrap();
        assert_eq!(n, buf.len() - 4);
        let seq = v.as_seq().unwrap();
        assert_eq!(seq.len(), 3);
        let raw: Vec<&[u8]> = seq.raw_items().collect();
        assert_eq!(raw[1], b"*2\r\n:1\r\n$-1\r\n");
        let vals: Vec<Value<'_>> = seq.into_iter().collect();
        assert_eq!(vals[0], Value::Bulk(b"a"));
        let inner: Vec<Value<'_>> = vals[1].as_seq().unwrap().into_iter().collect();
        assert_eq!(inner, [Value::Int(1), Value::Nil]);
        let map: Vec<Value<'_>> = vals[2].as_seq().unwrap().into_iter().collect();
        assert_eq!(map[1].as_f64(), Some(1.5));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &b""[..],
            b"*",
            b"*2\r\n:1\r\n",
            b"$5\r\nab\r\n",
            b"$2\r\nabXX",
            b"?x\r\n",
            b":12a\r\n",
            b"*99999999999\r\n",
            b"*-2\r\n",
            b"%9223372036854775807\r\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // Deep nesting does not recurse.
        let deep: Vec<u8> = b"*1\r\n"
            .repeat(100_000)
            .into_iter()
            .chain(*b":1\r\n")
            .collect();
        assert!(parse(&deep).is_ok());
    }

    #[test]
    fn writer_speaks_resp2_by_default_and_resp3_on_request() {
        let mut b = Vec::new();
        RespWriter::new(&mut b)
            .map(1)
            .bulk(b"f")
            .double(0.1)
            .nil()
            .int(-42)
            .double(f64::NEG_INFINITY);
        assert_eq!(
            b,
            b"*2\r\n$1\r\nf\r\n$3\r\n0.1\r\n$-1\r\n:-42\r\n$4\r\n-inf\r\n"
        );
        let mut b = Vec::new();
        RespWriter::resp3(&mut b)
            .map(1)
            .simple("a\r\nb")
            .double(2.0)
            .nil();
        assert_eq!(b, b"%1\r\n+a  b\r\n,2\r\n_\r\n");
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"nan"), None);
    }
}
