//! What every part of the RDB parser reads with: the byte cursor over a dump ([`Input`]:
//! lengths, length-prefixed and LZF-compressed strings, each checked against the bytes left)
//! and the errors a dump can give ([`RdbError`]).

use super::encoding::EncodingError;
use super::lzf::{self, LzfError};

/// Newest RDB version this parser knows (Redis 7.2 and 7.4 write 11 and 12).
pub const MAX_VERSION: u32 = 11;

/// Why a dump cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum RdbError {
    #[error("not an RDB file (no REDIS magic)")]
    NotRdb,
    #[error(
        "RDB version {0} is newer than this importer reads (at most {MAX_VERSION}, Redis 7.x \
         up to 7.2); dump the data with a Redis that writes version {MAX_VERSION} or older"
    )]
    UnsupportedVersion(u32),
    #[error("the file ends early (at byte {at}, wanted {wanted} more bytes)")]
    Truncated { at: usize, wanted: u64 },
    #[error(
        "checksum mismatch: the file says {stored:016x}, its bytes give {computed:016x} (the \
         file is damaged or cut short)"
    )]
    Checksum { stored: u64, computed: u64 },
    #[error("at byte {at}: {what}")]
    Malformed { at: usize, what: String },
    #[error("key {key:?}: {source}")]
    Encoding {
        key: String,
        #[source]
        source: EncodingError,
    },
    #[error("at byte {at}: compressed string: {source}")]
    Lzf {
        at: usize,
        #[source]
        source: LzfError,
    },
    #[error(
        "key {key:?} holds a value of module {module:?}: module types cannot be imported \
         through the proxy"
    )]
    ModuleType { key: String, module: String },
    #[error("the file holds module auxiliary data (module {0:?}): module data cannot be imported")]
    ModuleAux(String),
    #[error("key {key:?} has value type {kind}, which this importer does not know")]
    UnknownType { key: String, kind: u8 },
}

impl RdbError {
    pub(crate) fn malformed(at: usize, what: impl Into<String>) -> Self {
        RdbError::Malformed {
            at,
            what: what.into(),
        }
    }
}

/// A key's name as error messages show it.
pub(crate) fn printable(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

/// A bounds-checked cursor over the file's bytes.
pub(crate) struct Input<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A cursor over `buf`, at `pos`.
    pub(crate) fn at_pos(buf: &'a [u8], pos: usize) -> Self {
        Input { buf, pos }
    }

    pub(crate) fn at(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: u64) -> Result<&'a [u8], RdbError> {
        let short = RdbError::Truncated {
            at: self.pos,
            wanted: n,
        };
        let n = usize::try_from(n).map_err(|_| short)?;
        if n > self.remaining() {
            return Err(RdbError::Truncated {
                at: self.pos,
                wanted: n as u64,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u64_le(&mut self) -> Result<u64, RdbError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("took 8 bytes")))
    }

    /// A length (`rdbLoadLen`); an encoded-string marker here is malformed.
    pub(crate) fn len(&mut self) -> Result<u64, RdbError> {
        match self.len_or_encoding()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => Err(RdbError::malformed(
                self.pos,
                "encoded value where a length belongs",
            )),
        }
    }

    /// A count of items that each take at least one byte: bounded by the bytes left.
    pub(crate) fn count(&mut self) -> Result<u64, RdbError> {
        let at = self.pos;
        let n = self.len()?;
        if n > self.remaining() as u64 {
            return Err(RdbError::malformed(
                at,
                format!("count {n} exceeds the bytes left"),
            ));
        }
        Ok(n)
    }

    fn len_or_encoding(&mut self) -> Result<Len, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3F)),
            1 => Len::Plain((u64::from(first & 0x3F) << 8) | u64::from(self.byte()?)),
            2 => match first {
                0x80 => {
                    let b = self.take(4)?;
                    Len::Plain(u64::from(u32::from_be_bytes(
                        b.try_into().expect("4 bytes"),
                    )))
                }
                0x81 => Len::Plain(u64::from_be_bytes(
                    self.take(8)?.try_into().expect("8 bytes"),
                )),
                _ => return Err(RdbError::malformed(self.pos - 1, "unknown length encoding")),
            },
            _ => Len::Encoded(first & 0x3F),
        })
    }

    /// A string object: raw, an integer encoding (as its decimal text) or LZF-compressed.
    pub(crate) fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let at = self.pos;
        match self.len_or_encoding()? {
            Len::Plain(n) => Ok(self.take(n)?.to_vec()),
            Len::Encoded(0) => Ok(int_text(i64::from(self.byte()? as i8))),
            Len::Encoded(1) => {
                let b = self.take(2)?;
                Ok(int_text(i64::from(i16::from_le_bytes([b[0], b[1]]))))
            }
            Len::Encoded(2) => {
                let b = self.take(4)?;
                Ok(int_text(i64::from(i32::from_le_bytes(
                    b.try_into().expect("4 bytes"),
                ))))
            }
            Len::Encoded(3) => {
                let clen = self.len()?;
                let ulen = self.len()?;
                let data = self.take(clen)?;
                if ulen > (data.len() as u64).saturating_mul(lzf::MAX_RATIO as u64) {
                    return Err(RdbError::malformed(
                        at,
                        "compressed string claims an impossible length",
                    ));
                }
                lzf::decompress(data, ulen as usize).map_err(|source| RdbError::Lzf { at, source })
            }
            Len::Encoded(_) => Err(RdbError::malformed(at, "unknown string encoding")),
        }
    }
}

enum Len {
    Plain(u64),
    Encoded(u8),
}

fn int_text(i: i64) -> Vec<u8> {
    itoa::Buffer::new().format(i).as_bytes().to_vec()
}
