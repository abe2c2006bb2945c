//! Batched hook calls (optional export [`crate::export::ON_COMMANDS`]): the commands of one
//! client's pipeline that a plugin hooks, in one call. `in` holds a batch table pointing at
//! ordinary command tables; `out` gets one packed result per command, then their outputs back
//! to back. The guest counts its progress in the table's header, so a fault is charged to the
//! one command that was running (its neighbours keep their results or are retried).
//!
//! ```text
//! in:  u32 n, u32 done, n × { u32 off, u32 len, u32 cmd, u32 reserved }, command tables
//! out: n × u64 result (as tp_on_command returns), then each result's out_len bytes in order
//! ```

use crate::{CMD_HEADER, get_u32, get_u64, put_u32, unpack};

/// Header of a batch table: `u32 n, u32 done`.
pub const BATCH_HEADER: usize = 8;
/// One entry of a batch table: `u32 off, u32 len, u32 cmd, u32 reserved`.
pub const BATCH_ENTRY: usize = 16;
/// One packed result in `out`.
pub const BATCH_RESULT: usize = 8;
/// Offset of the progress counter (`done`) in `in`: the commands whose results are complete
/// in `out` (and whose `out` the arena descriptor describes).
pub const BATCH_DONE: usize = 4;

/// Bytes of the batch table for `n` commands (before the command tables).
pub const fn batch_table_size(n: usize) -> usize {
    BATCH_HEADER + n * BATCH_ENTRY
}

/// Host side: writes the header for `n` commands (`done` = 0).
pub fn put_batch_header(dst: &mut [u8], n: usize) {
    put_u32(dst, 0, n as u32);
    put_u32(dst, BATCH_DONE, 0);
}

/// Host side: entry `i` says command `i`'s table is `dst[off..off + len]` and its id is `cmd`.
pub fn put_batch_entry(dst: &mut [u8], i: usize, off: usize, len: usize, cmd: u16) {
    let at = BATCH_HEADER + i * BATCH_ENTRY;
    put_u32(dst, at, off as u32);
    put_u32(dst, at + 4, len as u32);
    put_u32(dst, at + 8, u32::from(cmd));
    put_u32(dst, at + 12, 0);
}

/// Host side: the progress counter the guest left in `in` (clamped to `n`; garbage reads 0).
pub fn batch_done(input: &[u8], n: usize) -> usize {
    get_u32(input, BATCH_DONE).map_or(0, |d| (d as usize).min(n))
}

/// Guest side: a batch table in `in`. Only the header is checked up front; each entry is
/// checked when it is read (a bad one is `None` for that command alone).
#[derive(Debug, Clone, Copy)]
pub struct BatchView<'a> {
    buf: &'a [u8],
    n: u32,
}

impl<'a> BatchView<'a> {
    /// The table, if its header and entries lie inside `buf`.
    pub fn parse(buf: &'a [u8]) -> Option<Self> {
        let n = get_u32(buf, 0)?;
        let end = BATCH_HEADER.checked_add((n as usize).checked_mul(BATCH_ENTRY)?)?;
        if buf.len() < end {
            return None;
        }
        Some(Self { buf, n })
    }

    /// Commands in the batch.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Command `i`: its ABI id and its command table (`None` if the entry points outside `in`).
    pub fn command(&self, i: usize) -> Option<(u16, &'a [u8])> {
        if i >= self.n as usize {
            return None;
        }
        let at = BATCH_HEADER + i * BATCH_ENTRY;
        let off = get_u32(self.buf, at)? as usize;
        let len = get_u32(self.buf, at + 4)? as usize;
        let cmd = get_u32(self.buf, at + 8)?;
        let table = self.buf.get(off..off.checked_add(len)?)?;
        if table.len() < CMD_HEADER {
            return None;
        }
        Some((u16::try_from(cmd).ok()?, table))
    }
}

/// Guest side: records that the first `done` commands' results are complete.
pub fn set_batch_done(input: &mut [u8], done: usize) {
    if input.len() >= BATCH_HEADER {
        put_u32(input, BATCH_DONE, done as u32);
    }
}

/// Host side: the results of a batch call read back from `out`: command `i`'s packed result
/// and the range of its output bytes. Every length is plugin output and checked here.
#[derive(Debug, Clone, Copy)]
pub struct BatchResults<'a> {
    out: &'a [u8],
    n: usize,
}

/// Why a batch's results cannot be used (a fault of the plugin's call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchError {
    /// `out` is shorter than the result array.
    ResultsOutside,
    /// A result's output runs past the bytes the call returned.
    OutputOutside(usize),
}

impl<'a> BatchResults<'a> {
    /// `out` is the first `out_len` bytes the call returned.
    pub fn parse(out: &'a [u8], n: usize) -> Result<Self, BatchError> {
        if out.len() < n.saturating_mul(BATCH_RESULT) {
            return Err(BatchError::ResultsOutside);
        }
        Ok(Self { out, n })
    }

    /// Each command's packed result and its output, in order; stops at the first error.
    pub fn iter(&self) -> impl Iterator<Item = Result<(i64, &'a [u8]), BatchError>> + 'a {
        let out = self.out;
        let n = self.n;
        let mut at = n * BATCH_RESULT;
        (0..n).map(move |i| {
            let r = get_u64(out, i * BATCH_RESULT).ok_or(BatchError::ResultsOutside)? as i64;
            let (_, _, len) = unpack(r);
            let end = at
                .checked_add(len as usize)
                .filter(|&e| e <= out.len())
                .ok_or(BatchError::OutputOutside(i))?;
            let bytes = &out[at..end];
            at = end;
            Ok((r, bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArgIn, CommandView, action, command_size, encode_command, pack};

    #[test]
    fn a_batch_round_trips_and_bad_entries_stay_local() {
        let cmds: [&[&[u8]]; 2] = [&[b"SET", b"k", b"v"], &[b"GET", b"x"]];
        let sizes: Vec<usize> = cmds
            .iter()
            .map(|c| {
                command_size(c.iter().map(|b| ArgIn {
                    bytes: b,
                    key: false,
                    elide: false,
                }))
            })
            .collect();
        let mut buf = vec![0u8; batch_table_size(2) + sizes.iter().sum::<usize>()];
        put_batch_header(&mut buf, 2);
        let mut off = batch_table_size(2);
        for (i, c) in cmds.iter().enumerate() {
            let args = c.iter().map(|b| ArgIn {
                bytes: b,
                key: false,
                elide: false,
            });
            encode_command(&mut buf[off..off + sizes[i]], 0, c.len(), args).unwrap();
            put_batch_entry(&mut buf, i, off, sizes[i], 7 + i as u16);
            off += sizes[i];
        }
        let v = BatchView::parse(&buf).unwrap();
        assert_eq!(v.len(), 2);
        let (id, t) = v.command(1).unwrap();
        assert_eq!(id, 8);
        assert_eq!(
            CommandView::parse(t).unwrap().arg(1).unwrap().bytes,
            Some(&b"x"[..])
        );
        // An entry pointing outside `in` fails alone.
        put_batch_entry(&mut buf, 0, 1 << 30, 16, 7);
        let v = BatchView::parse(&buf).unwrap();
        assert!(v.command(0).is_none());
        assert!(v.command(1).is_some());
        assert!(v.command(2).is_none());
        set_batch_done(&mut buf, 5);
        assert_eq!(batch_done(&buf, 2), 2);
        assert!(BatchView::parse(&[1, 0, 0, 0, 0, 0, 0, 0]).is_none());
    }

    #[test]
    fn results_are_checked_against_the_output() {
        let mut out = vec![0u8; 16];
        out[..8].copy_from_slice(&pack(action::DENY, 0, 3).to_le_bytes());
        out.extend_from_slice(b"ERR");
        let r = BatchResults::parse(&out, 2).unwrap();
        let got: Vec<_> = r.iter().collect();
        assert_eq!(got[0], Ok((pack(action::DENY, 0, 3), &b"ERR"[..])));
        assert_eq!(got[1], Ok((0, &b""[..])));
        out[8..16].copy_from_slice(&pack(action::DENY, 0, 9).to_le_bytes());
        let r = BatchResults::parse(&out, 2).unwrap();
        assert_eq!(r.iter().nth(1), Some(Err(BatchError::OutputOutside(1))));
        assert_eq!(
            BatchResults::parse(&out[..8], 2).err(),
            Some(BatchError::ResultsOutside)
        );
    }
}
