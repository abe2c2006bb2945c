//! A deliberately small RESP2/RESP3 client over a blocking `TcpStream`, for the tests that need
//! the exact bytes on the wire (malformed input, exact error lines, HELLO) rather than the redis
//! crate's typed view. It keeps the distinctions the crate hides: `$-1` vs `*-1` vs `_`.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::REPLY_TIMEOUT;

/// One decoded reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    /// `$-1`
    NullBulk,
    /// `*-1`
    NullArray,
    /// RESP3 `_`
    Null,
    Array(Vec<Frame>),
    /// RESP3 `%`
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~`
    Set(Vec<Frame>),
    /// RESP3 `,`, kept as text so that equality is exact.
    Double(String),
    Boolean(bool),
    BigNumber(String),
    /// RESP3 `=`, including its `txt:` prefix.
    Verbatim(Vec<u8>),
    Push(Vec<Frame>),
    Attribute(Vec<(Frame, Frame)>),
}

impl Frame {
    /// A bulk frame holding `s`.
    pub(crate) fn bulk(s: &str) -> Frame {
        Frame::Bulk(s.as_bytes().to_vec())
    }

    /// The text of a bulk, simple or verbatim string (verbatim without its `txt:` prefix).
    pub(crate) fn text(&self) -> Option<String> {
        match self {
            Frame::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Frame::Simple(s) => Some(s.clone()),
            Frame::Verbatim(b) => {
                Some(String::from_utf8_lossy(b.get(4..).unwrap_or(b)).into_owned())
            }
            _ => None,
        }
    }

    /// The error line (without `-`), or `None` for any other frame.
    pub(crate) fn error(&self) -> Option<&str> {
        match self {
            Frame::Error(e) => Some(e),
            _ => None,
        }
    }
}

/// Encodes `args` as a RESP multibulk command.
pub(crate) fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one frame. EOF before a complete frame is `UnexpectedEof`.
pub(crate) fn read_frame(r: &mut impl BufRead) -> io::Result<Frame> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_first().ok_or_else(|| bad("empty line"))?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    let int = || -> io::Result<i64> { text().parse().map_err(|_| bad("bad integer")) };
    Ok(match kind {
        b'+' => Frame::Simple(text()),
        b'-' => Frame::Error(text()),
        b':' => Frame::Integer(int()?),
        b',' => Frame::Double(text()),
        b'(' => Frame::BigNumber(text()),
        b'_' => Frame::Null,
        b'#' => Frame::Boolean(rest == b"t"),
        b'$' => match int()? {
            -1 => Frame::NullBulk,
            n => Frame::Bulk(read_blob(r, n)?),
        },
        b'=' => Frame::Verbatim(read_blob(r, int()?)?),
        b'!' => Frame::Error(String::from_utf8_lossy(&read_blob(r, int()?)?).into_owned()),
        b'*' => match int()? {
            -1 => Frame::NullArray,
            n => Frame::Array(read_many(r, n)?),
        },
        b'~' => Frame::Set(read_many(r, int()?)?),
        b'>' => Frame::Push(read_many(r, int()?)?),
        b'%' => Frame::Map(read_pairs(r, int()?)?),
        b'|' => Frame::Attribute(read_pairs(r, int()?)?),
        other => return Err(bad(&format!("unknown type byte {:?}", *other as char))),
    })
}

fn bad(what: &str) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what.to_owned())
}

/// One `\r\n`-terminated line, without the terminator.
fn read_line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(
            ErrorKind::UnexpectedEof,
            "connection closed mid-line",
        ));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn read_blob(r: &mut impl BufRead, len: i64) -> io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(|_| bad("negative length"))?;
    let mut buf = vec![0; len + 2];
    r.read_exact(&mut buf)?;
    if !buf.ends_with(b"\r\n") {
        return Err(bad("blob without CRLF"));
    }
    buf.truncate(len);
    Ok(buf)
}

fn read_many(r: &mut impl BufRead, n: i64) -> io::Result<Vec<Frame>> {
    (0..n).map(|_| read_frame(r)).collect()
}

fn read_pairs(r: &mut impl BufRead, n: i64) -> io::Result<Vec<(Frame, Frame)>> {
    (0..n)
        .map(|_| Ok((read_frame(r)?, read_frame(r)?)))
        .collect()
}

/// A blocking connection that speaks raw RESP; every read is bounded by a timeout.
pub(crate) struct RawClient {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl RawClient {
    /// Connects to `addr` with a [`REPLY_TIMEOUT`] read timeout.
    ///
    /// # Panics
    /// If the connection is refused.
    pub(crate) fn connect(addr: SocketAddr) -> RawClient {
        let writer = TcpStream::connect_timeout(&addr, REPLY_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        writer.set_nodelay(true).expect("set_nodelay");
        writer
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .expect("set_read_timeout");
        writer
            .set_write_timeout(Some(REPLY_TIMEOUT))
            .expect("set_write_timeout");
        let reader = BufReader::new(writer.try_clone().expect("cloning stream"));
        RawClient { writer, reader }
    }

    /// Writes `bytes` as they are.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("writing to socket");
    }

    /// Writes `bytes`, reporting a closed or stuck connection instead of panicking.
    pub(crate) fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Sends one command and reads its reply.
    pub(crate) fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.send(&encode(args));
        self.read_frame()
    }

    /// Reads one frame, panicking on EOF, timeout or garbage.
    pub(crate) fn read_frame(&mut self) -> Frame {
        self.try_read_frame()
            .unwrap_or_else(|e| panic!("reading a reply: {e} ({:?})", e.kind()))
    }

    /// Reads one frame.
    pub(crate) fn try_read_frame(&mut self) -> io::Result<Frame> {
        read_frame(&mut self.reader)
    }

    /// Reads exactly `n` raw bytes.
    pub(crate) fn read_exact_bytes(&mut self, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        self.reader.read_exact(&mut buf).expect("reading raw bytes");
        buf
    }

    /// Sets the read timeout used by every later read.
    pub(crate) fn set_read_timeout(&mut self, timeout: Duration) {
        self.writer
            .set_read_timeout(Some(timeout))
            .expect("set_read_timeout");
    }

    /// Asserts that the peer closes the connection within `within` without sending more bytes.
    ///
    /// A reset counts as closed too: the proxy may close with our bytes still unread.
    pub(crate) fn expect_closed(&mut self, within: Duration) {
        self.set_read_timeout(within);
        match self.reader.fill_buf() {
            Ok([]) => {}
            Ok(bytes) => panic!(
                "expected the connection to be closed, got more bytes: {:?}",
                String::from_utf8_lossy(bytes)
            ),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) if is_timeout(&e) => {
                panic!("expected the connection to be closed within {within:?}, it is still open")
            }
            Err(e) => panic!("expected a clean close, got {e}"),
        }
        self.set_read_timeout(REPLY_TIMEOUT);
    }

    /// Asserts that nothing arrives for `quiet`, and the connection stays open meanwhile.
    pub(crate) fn expect_no_reply(&mut self, quiet: Duration) {
        self.set_read_timeout(quiet);
        match self.reader.fill_buf() {
            Ok([]) => panic!("expected no reply for {quiet:?}, the connection was closed"),
            Ok(bytes) => panic!(
                "expected no reply for {quiet:?}, got {:?}",
                String::from_utf8_lossy(bytes)
            ),
            Err(e) if is_timeout(&e) => {}
            Err(e) => panic!("expected no reply for {quiet:?}, got {e}"),
        }
        self.set_read_timeout(REPLY_TIMEOUT);
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}
