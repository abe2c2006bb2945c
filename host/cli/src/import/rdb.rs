//! The RDB file parser: header, opcodes (aux, SELECTDB, RESIZEDB, expire times, LRU/LFU,
//! FUNCTION2), and every value type Redis 7.x writes (RDB version ≤ 11). It yields one [`Item`]
//! at a time from a byte slice, so a caller can validate a whole file before writing anything
//! and then walk it again to apply it. Stream values are decoded in `stream`, compact blobs in
//! `encoding`. Hostile input gets an [`RdbError`]: every length is checked against the bytes
//! left, and no allocation is sized by a length field alone.

use super::encoding;
use super::input::{Input, printable};
pub use super::input::{MAX_VERSION, RdbError};
use super::value::{Entry, Item, Value};

/// The file's version, checked; the body starts after these 9 bytes.
///
/// # Errors
/// [`RdbError::NotRdb`] or [`RdbError::UnsupportedVersion`].
pub fn version(data: &[u8]) -> Result<u32, RdbError> {
    let head = data.get(..9).ok_or(RdbError::NotRdb)?;
    if &head[..5] != b"REDIS" {
        return Err(RdbError::NotRdb);
    }
    let v: u32 = std::str::from_utf8(&head[5..])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(RdbError::NotRdb)?;
    if v > MAX_VERSION {
        return Err(RdbError::UnsupportedVersion(v));
    }
    Ok(v)
}

/// Walks an RDB file item by item.
pub struct Parser<'a> {
    input: Input<'a>,
    version: u32,
    db: u64,
    done: bool,
}

impl<'a> Parser<'a> {
    /// Checks the header and the trailing CRC-64 (when the file has one, version ≥ 5 and
    /// not 0) before a single item is read.
    ///
    /// # Errors
    /// A bad header, version or checksum.
    pub fn new(data: &'a [u8]) -> Result<Self, RdbError> {
        let version = version(data)?;
        if version >= 5 {
            verify_checksum(data)?;
        }
        Ok(Self {
            input: Input::at_pos(data, 9),
            version,
            db: 0,
            done: false,
        })
    }

    /// The file's RDB version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The next item, or `None` after the EOF opcode.
    ///
    /// # Errors
    /// Anything malformed, a module type, an unknown type.
    pub fn next_item(&mut self) -> Result<Option<Item>, RdbError> {
        if self.done {
            return Ok(None);
        }
        let mut expire_ms = None;
        loop {
            let at = self.input.at();
            match self.input.byte()? {
                0xFF => return self.finish(),
                0xFE => self.db = self.input.len()?,
                0xFD => {
                    let b = self.input.take(4)?;
                    let secs = u32::from_le_bytes(b.try_into().expect("4 bytes"));
                    expire_ms = Some(u64::from(secs) * 1000);
                }
                0xFC => expire_ms = Some(self.input.u64_le()?),
                0xFB => {
                    self.input.len()?;
                    self.input.len()?;
                }
                0xFA => {
                    let key = self.input.string()?;
                    let value = self.input.string()?;
                    return Ok(Some(Item::Aux { key, value }));
                }
                0xF9 => {
                    self.input.byte()?; // LFU frequency: not carried over
                }
                0xF8 => {
                    self.input.len()?; // LRU idle time: not carried over
                }
                0xF7 => {
                    let id = self.input.len()?;
                    return Err(RdbError::ModuleAux(module_name(id)));
                }
                0xF6 => {
                    return Err(RdbError::malformed(
                        at,
                        "functions of Redis 7.0 release candidates (FUNCTION_PRE_GA) are not supported",
                    ));
                }
                0xF5 => return Ok(Some(Item::Function(self.input.string()?))),
                kind => {
                    let key = self.input.string()?;
                    let value = self.value(kind, &key)?;
                    return Ok(Some(Item::Entry(Entry {
                        db: self.db,
                        key,
                        expire_ms,
                        value,
                    })));
                }
            }
        }
    }

    fn finish(&mut self) -> Result<Option<Item>, RdbError> {
        self.done = true;
        let trailer = if self.version >= 5 { 8 } else { 0 };
        self.input.take(trailer)?;
        if self.input.remaining() != 0 {
            return Err(RdbError::malformed(
                self.input.at(),
                "bytes after the end of the dump",
            ));
        }
        Ok(None)
    }

    fn value(&mut self, kind: u8, key: &[u8]) -> Result<Value, RdbError> {
        let input = &mut self.input;
        let enc = |source| RdbError::Encoding {
            key: printable(key),
            source,
        };
        Ok(match kind {
            0 => Value::String(input.string()?),
            1 | 2 => {
                let n = input.count()?;
                let items = (0..n).map(|_| input.string()).collect::<Result<_, _>>()?;
                if kind == 1 {
                    Value::List(items)
                } else {
                    Value::Set(items)
                }
            }
            3 | 5 => Value::ZSet(zset_skiplist(input, kind == 5)?),
            4 => Value::Hash(pairs(
                (0..input.count()? * 2)
                    .map(|_| input.string())
                    .collect::<Result<_, _>>()?,
            )),
            6 | 7 => {
                let id = input.len()?;
                return Err(RdbError::ModuleType {
                    key: printable(key),
                    module: module_name(id),
                });
            }
            9 => Value::Hash(pairs(encoding::zipmap(&input.string()?).map_err(enc)?)),
            10 => Value::List(encoding::ziplist(&input.string()?).map_err(enc)?),
            11 => Value::Set(encoding::intset(&input.string()?).map_err(enc)?),
            12 | 17 => {
                let blob = input.string()?;
                let flat = if kind == 12 {
                    encoding::ziplist(&blob)
                } else {
                    encoding::listpack(&blob)
                };
                Value::ZSet(scored(input.at(), pairs(flat.map_err(enc)?))?)
            }
            13 | 16 => {
                let blob = input.string()?;
                let flat = if kind == 13 {
                    encoding::ziplist(&blob)
                } else {
                    encoding::listpack(&blob)
                };
                let flat = flat.map_err(enc)?;
                if flat.len() % 2 != 0 {
                    return Err(RdbError::malformed(
                        input.at(),
                        "hash with a field and no value",
                    ));
                }
                Value::Hash(pairs(flat))
            }
            14 | 18 => Value::List(quicklist(input, kind == 18, key)?),
            15 | 19 | 21 => Value::Stream(Box::new(super::stream::read(input, kind, key)?)),
            20 => Value::Set(encoding::listpack(&input.string()?).map_err(enc)?),
            _ => {
                return Err(RdbError::UnknownType {
                    key: printable(key),
                    kind,
                });
            }
        })
    }
}

/// Checks the last 8 bytes against the CRC-64 of everything before them (0: not computed).
fn verify_checksum(data: &[u8]) -> Result<(), RdbError> {
    let body = data.len().checked_sub(8).ok_or(RdbError::Truncated {
        at: data.len(),
        wanted: 8,
    })?;
    let stored = u64::from_le_bytes(data[body..].try_into().expect("8 bytes"));
    if stored == 0 {
        return Ok(());
    }
    let computed = super::crc64::crc64(0, &data[..body]);
    if computed != stored {
        return Err(RdbError::Checksum { stored, computed });
    }
    Ok(())
}

fn pairs(flat: Vec<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = flat.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    out
}

fn scored(at: usize, flat: Vec<(Vec<u8>, Vec<u8>)>) -> Result<Vec<(Vec<u8>, f64)>, RdbError> {
    flat.into_iter()
        .map(|(m, s)| {
            let score = std::str::from_utf8(&s).ok().and_then(|s| s.parse().ok());
            Ok((
                m,
                score.ok_or_else(|| RdbError::malformed(at, "sorted set score is not a number"))?,
            ))
        })
        .collect()
}

fn zset_skiplist(input: &mut Input<'_>, binary: bool) -> Result<Vec<(Vec<u8>, f64)>, RdbError> {
    let n = input.count()?;
    let mut out = Vec::with_capacity(n.min(1024) as usize);
    for _ in 0..n {
        let member = input.string()?;
        let score = if binary {
            f64::from_bits(input.u64_le()?)
        } else {
            old_double(input)?
        };
        out.push((member, score));
    }
    Ok(out)
}

/// A double of RDB type ZSET (1): a length byte, 253 NaN, 254 +inf, 255 -inf, else its text.
fn old_double(input: &mut Input<'_>) -> Result<f64, RdbError> {
    let at = input.at();
    Ok(match input.byte()? {
        253 => f64::NAN,
        254 => f64::INFINITY,
        255 => f64::NEG_INFINITY,
        n => {
            let text = input.take(u64::from(n))?;
            std::str::from_utf8(text)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| RdbError::malformed(at, "score is not a number"))?
        }
    })
}

/// Quicklist nodes: ziplists (v1), or plain elements and listpacks (v2).
fn quicklist(input: &mut Input<'_>, v2: bool, key: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    let nodes = input.count()?;
    let mut out = Vec::new();
    for _ in 0..nodes {
        let container = if v2 { input.len()? } else { 2 };
        let blob = input.string()?;
        let enc = |source| RdbError::Encoding {
            key: printable(key),
            source,
        };
        match (v2, container) {
            (true, 1) => out.push(blob),
            (true, 2) => out.extend(encoding::listpack(&blob).map_err(enc)?),
            (false, _) => out.extend(encoding::ziplist(&blob).map_err(enc)?),
            _ => {
                return Err(RdbError::malformed(
                    input.at(),
                    "unknown quicklist container",
                ));
            }
        }
    }
    Ok(out)
}

/// A module type's name from its 64-bit id (9 characters of 6 bits, then a 10-bit version).
fn module_name(id: u64) -> String {
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let name: String = (0..9)
        .map(|i| CHARS[((id >> (10 + 6 * (8 - i))) & 63) as usize] as char)
        .collect();
    format!("{name} (version {})", id & 1023)
}

#[cfg(test)]
mod tests;
