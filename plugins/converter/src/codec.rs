//! The stored form of a compressed value: an 8-byte header (a 4-byte marker, then the
//! original length as u32 little-endian) followed by one LZ4 block. Values without the marker
//! are plain and read as they are. Decoding checks the announced length against a limit
//! before it allocates anything.

use std::fmt;

/// The first bytes of every compressed value. `\xFF` never starts UTF-8 text, and the rest
/// names the format and its version.
pub(crate) const MAGIC: &[u8; 4] = b"\xFFTZ1";

/// Header size: the marker and the u32 original length.
pub(crate) const HEADER: usize = 8;

/// Why a stored value that carries the marker cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// Shorter than the header.
    Truncated,
    /// The header announces more than the configured limit.
    TooLarge { claimed: u64, limit: usize },
    /// The LZ4 block is corrupt or does not give the announced length.
    Corrupt,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("compressed value is truncated"),
            Self::TooLarge { claimed, limit } => write!(
                f,
                "compressed value claims {claimed} bytes, over the limit of {limit}"
            ),
            Self::Corrupt => f.write_str("compressed value is corrupt"),
        }
    }
}

/// Whether `stored` carries the marker.
pub(crate) fn is_compressed(stored: &[u8]) -> bool {
    stored.starts_with(MAGIC)
}

/// The stored form of `value`: compressed when it is at least `min_bytes` long and LZ4 makes
/// it smaller, or when it starts with the marker itself (stored plain it would be misread);
/// `None` means store it as it is.
pub(crate) fn encode(value: &[u8], min_bytes: usize) -> Option<Vec<u8>> {
    let must = is_compressed(value);
    if value.len() < min_bytes && !must {
        return None;
    }
    let len = u32::try_from(value.len()).ok()?;
    let mut out = vec![0u8; HEADER + lz4_flex::block::get_maximum_output_size(value.len())];
    out[..4].copy_from_slice(MAGIC);
    out[4..HEADER].copy_from_slice(&len.to_le_bytes());
    let n = lz4_flex::block::compress_into(value, &mut out[HEADER..]).ok()?;
    out.truncate(HEADER + n);
    (must || out.len() < value.len()).then_some(out)
}

/// The original length a compressed value announces, checked against `limit`.
pub(crate) fn original_len(stored: &[u8], limit: usize) -> Result<usize, DecodeError> {
    let head: [u8; 4] = stored
        .get(4..HEADER)
        .and_then(|h| h.try_into().ok())
        .ok_or(DecodeError::Truncated)?;
    let claimed = u32::from_le_bytes(head) as usize;
    if claimed > limit {
        return Err(DecodeError::TooLarge {
            claimed: claimed as u64,
            limit,
        });
    }
    Ok(claimed)
}

/// The value `stored` holds: itself when plain, decompressed when it carries the marker.
/// Allocates at most `limit` bytes.
pub(crate) fn decode(stored: &[u8], limit: usize) -> Result<Option<Vec<u8>>, DecodeError> {
    if !is_compressed(stored) {
        return Ok(None);
    }
    let len = original_len(stored, limit)?;
    let mut out = vec![0u8; len];
    match lz4_flex::block::decompress_into(&stored[HEADER..], &mut out) {
        Ok(n) if n == len => Ok(Some(out)),
        _ => Err(DecodeError::Corrupt),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_small_ones_stay_plain() {
        assert_eq!(encode(b"short", 64), None);
        let big = b"abcdefgh".repeat(100);
        let stored = encode(&big, 64).unwrap();
        assert!(stored.len() < big.len() / 4, "{}", stored.len());
        assert!(is_compressed(&stored));
        assert_eq!(decode(&stored, 1 << 20).unwrap().as_deref(), Some(&big[..]));
        assert_eq!(decode(b"plain", 10).unwrap(), None);
    }

    #[test]
    fn incompressible_values_stay_plain_unless_they_look_compressed() {
        let noise: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(encode(&noise, 64), None);
        // A small value that starts with the marker is wrapped, so it reads back as itself.
        let tricky = b"\xFFTZ1not really";
        let stored = encode(tricky, 64).unwrap();
        assert_eq!(decode(&stored, 100).unwrap().as_deref(), Some(&tricky[..]));
    }

    #[test]
    fn hostile_stored_values_fail_without_allocating_their_claim() {
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(b"\x00");
        assert_eq!(
            decode(&huge, 1 << 20),
            Err(DecodeError::TooLarge {
                claimed: u64::from(u32::MAX),
                limit: 1 << 20
            })
        );
        assert_eq!(decode(b"\xFFTZ1\x01", 100), Err(DecodeError::Truncated));
        let mut lying = encode(&b"x".repeat(500), 64).unwrap();
        lying[4..8].copy_from_slice(&600u32.to_le_bytes());
        assert_eq!(decode(&lying, 1000), Err(DecodeError::Corrupt));
        let mut garbage = MAGIC.to_vec();
        garbage.extend_from_slice(&100u32.to_le_bytes());
        garbage.extend_from_slice(&[0xF0, 0xFF, 0xFF, 0xFF, 1, 2]);
        assert_eq!(decode(&garbage, 1000), Err(DecodeError::Corrupt));
    }
}
