//! Redis's compact encodings of small collections, as stored inside RDB strings: listpack
//! (7.x), ziplist (before 7.0), intset and zipmap (before 2.6). Each decoder turns one blob into
//! its elements, integers as their decimal text (as Redis returns them). Every length is
//! checked against the blob, so a hostile blob is an error, not a panic or a huge allocation.

/// A compact blob that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {kind}: {what}")]
pub struct EncodingError {
    pub kind: &'static str,
    pub what: &'static str,
}

type Elements = Vec<Vec<u8>>;

fn bad(kind: &'static str, what: &'static str) -> EncodingError {
    EncodingError { kind, what }
}

/// A bounds-checked cursor over one blob.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    kind: &'static str,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8], kind: &'static str) -> Self {
        Self { buf, pos: 0, kind }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], EncodingError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or(bad(self.kind, "runs past its end"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn byte(&mut self) -> Result<u8, EncodingError> {
        Ok(self.take(1)?[0])
    }
    fn le(&mut self, n: usize) -> Result<u64, EncodingError> {
        let b = self.take(n)?;
        Ok(b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// Sign-extends the low `bits` bits of `v`.
fn signed(v: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

fn int_text(i: i64) -> Vec<u8> {
    itoa::Buffer::new().format(i).as_bytes().to_vec()
}

// === listpack ===

/// Decodes a listpack: `<total u32><count u16><entry>…<0xFF>`, each entry followed by its
/// back-length.
///
/// # Errors
/// [`EncodingError`] for a truncated or malformed blob.
pub fn listpack(blob: &[u8]) -> Result<Elements, EncodingError> {
    const K: &str = "listpack";
    let mut c = Cursor::new(blob, K);
    let total = c.le(4)? as usize;
    if total != blob.len() {
        return Err(bad(K, "total length disagrees with its size"));
    }
    c.le(2)?; // element count; 65535 means "count them", so the terminator decides.
    let mut out = Vec::new();
    loop {
        let start = c.pos;
        let first = c.byte()?;
        if first == 0xFF {
            break;
        }
        out.push(listpack_entry(&mut c, first)?);
        let entry_len = c.pos - start;
        c.take(backlen_size(entry_len))?;
    }
    if c.remaining() != 0 {
        return Err(bad(K, "bytes after the terminator"));
    }
    Ok(out)
}

fn listpack_entry(c: &mut Cursor<'_>, first: u8) -> Result<Vec<u8>, EncodingError> {
    Ok(match first {
        0x00..=0x7F => int_text(i64::from(first)),
        0x80..=0xBF => c.take(usize::from(first & 0x3F))?.to_vec(),
        0xC0..=0xDF => {
            let v = (u64::from(first & 0x1F) << 8) | u64::from(c.byte()?);
            int_text(signed(v, 13))
        }
        0xE0..=0xEF => {
            let len = (usize::from(first & 0x0F) << 8) | usize::from(c.byte()?);
            c.take(len)?.to_vec()
        }
        0xF0 => {
            let len = c.le(4)? as usize;
            c.take(len)?.to_vec()
        }
        0xF1 => int_text(signed(c.le(2)?, 16)),
        0xF2 => int_text(signed(c.le(3)?, 24)),
        0xF3 => int_text(signed(c.le(4)?, 32)),
        0xF4 => int_text(c.le(8)? as i64),
        _ => return Err(bad("listpack", "unknown entry encoding")),
    })
}

/// Bytes of the back-length that follows an entry of `len` bytes.
fn backlen_size(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

// === ziplist ===

/// Decodes a ziplist: `<zlbytes u32><zltail u32><zllen u16><entry>…<0xFF>`.
///
/// # Errors
/// [`EncodingError`] for a truncated or malformed blob.
pub fn ziplist(blob: &[u8]) -> Result<Elements, EncodingError> {
    const K: &str = "ziplist";
    let mut c = Cursor::new(blob, K);
    if c.le(4)? as usize != blob.len() {
        return Err(bad(K, "total length disagrees with its size"));
    }
    c.le(4)?;
    c.le(2)?;
    let mut out = Vec::new();
    loop {
        match c.peek() {
            None => return Err(bad(K, "no terminator")),
            Some(0xFF) => break,
            Some(_) => {}
        }
        if c.byte()? == 0xFE {
            c.le(4)?; // a long previous-entry length
        }
        out.push(ziplist_entry(&mut c)?);
    }
    c.byte()?;
    if c.remaining() != 0 {
        return Err(bad(K, "bytes after the terminator"));
    }
    Ok(out)
}

fn ziplist_entry(c: &mut Cursor<'_>) -> Result<Vec<u8>, EncodingError> {
    let enc = c.byte()?;
    Ok(match enc >> 6 {
        0 => c.take(usize::from(enc & 0x3F))?.to_vec(),
        1 => {
            let len = (usize::from(enc & 0x3F) << 8) | usize::from(c.byte()?);
            c.take(len)?.to_vec()
        }
        2 => {
            let b = c.take(4)?;
            let len = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
            c.take(len)?.to_vec()
        }
        _ => int_text(match enc {
            0xC0 => signed(c.le(2)?, 16),
            0xD0 => signed(c.le(4)?, 32),
            0xE0 => c.le(8)? as i64,
            0xF0 => signed(c.le(3)?, 24),
            0xFE => signed(c.le(1)?, 8),
            0xF1..=0xFD => i64::from(enc & 0x0F) - 1,
            _ => return Err(bad("ziplist", "unknown entry encoding")),
        }),
    })
}

// === intset ===

/// Decodes an intset: `<encoding u32: 2|4|8><length u32><little-endian integers>`.
///
/// # Errors
/// [`EncodingError`] for a bad width or a length that disagrees with the blob.
pub fn intset(blob: &[u8]) -> Result<Elements, EncodingError> {
    const K: &str = "intset";
    let mut c = Cursor::new(blob, K);
    let width = c.le(4)? as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(bad(K, "width is not 2, 4 or 8"));
    }
    let len = c.le(4)? as usize;
    if len.checked_mul(width) != Some(c.remaining()) {
        return Err(bad(K, "length disagrees with its size"));
    }
    (0..len)
        .map(|_| Ok(int_text(signed(c.le(width)?, 8 * width as u32))))
        .collect()
}

// === zipmap ===

/// Decodes a zipmap (hashes of RDB files before Redis 2.6) into field, value, field, …
///
/// # Errors
/// [`EncodingError`] for a truncated or malformed blob.
pub fn zipmap(blob: &[u8]) -> Result<Elements, EncodingError> {
    const K: &str = "zipmap";
    let mut c = Cursor::new(blob, K);
    c.byte()?; // count, 254+ means "count them"
    let mut out = Vec::new();
    loop {
        let len = match c.byte()? {
            0xFF => break,
            0xFE => c.le(4)? as usize,
            n => usize::from(n),
        };
        out.push(c.take(len)?.to_vec());
        let vlen = match c.byte()? {
            0xFF => return Err(bad(K, "field without a value")),
            0xFE => c.le(4)? as usize,
            n => usize::from(n),
        };
        let free = usize::from(c.byte()?);
        out.push(c.take(vlen)?.to_vec());
        c.take(free)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(v: &[&str]) -> Elements {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn listpack_decodes_every_entry_encoding() {
        let mut body = vec![
            0x05, 0x01, // 7-bit uint 5
            0x83, b'a', b'b', b'c', 0x04, // 6-bit string
            0xDF, 0xFF, 0x02, // 13-bit int: -1
            0xF1, 0x00, 0x80, 0x03, // int16: -32768
            0xF3, 0x40, 0x42, 0x0F, 0x00, 0x05, // int32: 1_000_000
        ];
        let long = vec![b'x'; 200];
        body.extend([0xE0, 200]);
        body.extend(&long);
        body.extend([0x81, 0x4A]); // backlen of 202 in two bytes
        body.push(0xFF);
        let mut blob = ((body.len() + 6) as u32).to_le_bytes().to_vec();
        blob.extend(6u16.to_le_bytes());
        blob.extend(body);
        let mut want = texts(&["5", "abc", "-1", "-32768", "1000000"]);
        want.push(long);
        assert_eq!(listpack(&blob).unwrap(), want);
    }

    #[test]
    fn ziplist_decodes_strings_and_integers() {
        let mut body = vec![
            0x00, 0x02, b'h', b'i', // prevlen, 6-bit string
            0x04, 0xF2, // immediate 1
            0x02, 0xFE, 0x9C, // int8 -100
            0x03, 0xC0, 0x39, 0x30, // int16 12345
        ];
        body.push(0xFF);
        let mut blob = ((body.len() + 10) as u32).to_le_bytes().to_vec();
        blob.extend(0u32.to_le_bytes());
        blob.extend(4u16.to_le_bytes());
        blob.extend(body);
        assert_eq!(
            ziplist(&blob).unwrap(),
            texts(&["hi", "1", "-100", "12345"])
        );
    }

    #[test]
    fn intset_decodes_each_width() {
        let mut blob = 2u32.to_le_bytes().to_vec();
        blob.extend(2u32.to_le_bytes());
        blob.extend((-3i16).to_le_bytes());
        blob.extend(7i16.to_le_bytes());
        assert_eq!(intset(&blob).unwrap(), texts(&["-3", "7"]));
        let mut wide = 8u32.to_le_bytes().to_vec();
        wide.extend(1u32.to_le_bytes());
        wide.extend(i64::MIN.to_le_bytes());
        assert_eq!(intset(&wide).unwrap(), texts(&["-9223372036854775808"]));
    }

    #[test]
    fn zipmap_decodes_fields_and_values() {
        let blob = [2, 1, b'a', 2, 1, b'x', b'y', 0, 1, b'b', 1, 0, b'z', 0xFF];
        assert_eq!(zipmap(&blob).unwrap(), texts(&["a", "xy", "b", "z"]));
    }

    #[test]
    fn hostile_blobs_are_errors() {
        assert!(listpack(&[]).is_err());
        assert!(listpack(&[7, 0, 0, 0, 1, 0, 0xF0]).is_err());
        let mut huge = 11u32.to_le_bytes().to_vec();
        huge.extend([1, 0, 0xF0, 0xFF, 0xFF, 0xFF, 0x7F]);
        assert!(listpack(&huge).is_err());
        assert!(intset(&[4, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
        assert!(ziplist(&[11, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0x80]).is_err());
        assert!(zipmap(&[1, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF]).is_err());
    }
}
