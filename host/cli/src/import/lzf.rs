//! LZF decompression (liblzf's `lzf_d.c`), for the strings an RDB file stores compressed.
//! Every literal run and back-reference is checked against both buffers: a hostile file gets
//! an error, never a panic or a read outside the input.

/// Why a compressed string could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LzfError {
    #[error("compressed data runs past its end")]
    Truncated,
    #[error("back-reference before the start of the output")]
    BadReference,
    #[error("expands to {got} bytes, the file announced {want}")]
    WrongLength { got: usize, want: usize },
}

/// Most bytes one input byte can expand to: a 3-byte back-reference yields at most 264.
pub const MAX_RATIO: usize = 88;

/// Expands `input` into exactly `out_len` bytes.
///
/// # Errors
/// [`LzfError`] when the data is malformed or does not expand to `out_len` bytes. The caller
/// bounds `out_len` (at most `input.len() * MAX_RATIO`) before calling, so a length field
/// cannot make this allocate more than the input justifies.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            let lit = input.get(i..i + run).ok_or(LzfError::Truncated)?;
            out.extend_from_slice(lit);
            i += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*input.get(i).ok_or(LzfError::Truncated)?);
                i += 1;
            }
            let low = usize::from(*input.get(i).ok_or(LzfError::Truncated)?);
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            let start = out.len().checked_sub(back).ok_or(LzfError::BadReference)?;
            // Overlapping copies are how LZF encodes runs, so copy byte by byte.
            for k in 0..len + 2 {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > out_len {
            break;
        }
    }
    if out.len() != out_len {
        return Err(LzfError::WrongLength {
            got: out.len(),
            want: out_len,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_runs_and_back_references_expand() {
        // "abcabcabc": literal "abc", then a back-reference of length 6 at distance 3.
        let data = [2, b'a', b'b', b'c', (4 << 5), 2];
        assert_eq!(decompress(&data, 9).unwrap(), b"abcabcabc");
    }

    #[test]
    fn a_long_back_reference_uses_the_extra_length_byte() {
        // literal "x", then a run of 7+3+2 = 12 copies of it at distance 1.
        let data = [0, b'x', (7 << 5), 3, 0];
        assert_eq!(decompress(&data, 13).unwrap(), vec![b'x'; 13]);
    }

    #[test]
    fn hostile_inputs_are_errors_not_panics() {
        assert_eq!(decompress(&[5, b'a'], 6), Err(LzfError::Truncated));
        assert_eq!(decompress(&[(1 << 5), 0], 3), Err(LzfError::BadReference));
        assert!(matches!(
            decompress(&[0, b'a'], 2),
            Err(LzfError::WrongLength { .. })
        ));
        assert_eq!(decompress(&[(7 << 5)], 9), Err(LzfError::Truncated));
    }
}
