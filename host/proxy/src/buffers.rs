//! A worker's spare read and write buffers. A session holds a buffer only while it has bytes in
//! it: an idle client waits for its socket to become readable with none, and takes one when
//! there is something to read (as nginx frees a keep-alive connection's buffers). What a
//! session gives back is kept for the next, up to `SPARE` buffers per worker; so the memory an
//! idle client costs is its task and socket, not two buffers.

use std::cell::RefCell;

use bytes::BytesMut;

/// The size every pooled buffer starts at; a buffer grown past `KEEP_MAX` is not kept.
pub(crate) const CHUNK: usize = 16 * 1024;
const KEEP_MAX: usize = 4 * CHUNK;
/// Spare buffers kept per worker: enough for that many sessions busy at the same instant on
/// one thread; a worker with more in use allocates (and frees) the rest.
const SPARE: usize = 256;

#[derive(Default)]
pub struct Buffers {
    spare: RefCell<Vec<BytesMut>>,
}

impl Buffers {
    /// An empty buffer with room for `CHUNK` bytes at least.
    #[inline]
    pub(crate) fn take(&self) -> BytesMut {
        self.spare
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| BytesMut::with_capacity(CHUNK))
    }

    /// Gives `buf` back (emptied) if it is worth keeping; leaves an empty, unallocated buffer
    /// in its place.
    #[inline]
    pub(crate) fn give(&self, buf: &mut BytesMut) {
        let mut b = std::mem::take(buf);
        b.clear();
        if b.capacity() < CHUNK {
            // What was read or written through it was split off: when nothing holds those
            // bytes any more this takes the whole allocation back without allocating.
            b.reserve(CHUNK);
        }
        if b.capacity() > KEEP_MAX {
            return;
        }
        let mut spare = self.spare.borrow_mut();
        if spare.len() < SPARE {
            spare.push(b);
        }
    }
}

impl Buffers {
    /// Spare buffers kept now.
    pub fn spare(&self) -> usize {
        self.spare.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_bounded() {
        let pool = Buffers::default();
        let mut a = pool.take();
        assert!(a.capacity() >= CHUNK);
        a.extend_from_slice(b"PING\r\n");
        let at = a.as_ptr();
        pool.give(&mut a);
        assert_eq!(a.capacity(), 0, "the session no longer holds it");
        let b = pool.take();
        assert!(b.is_empty());
        assert_eq!(b.as_ptr(), at, "the same allocation again");
        // One whose front was split off (a request's bytes, since dropped) comes back whole.
        let mut c = pool.take();
        c.extend_from_slice(&[b'x'; 100]);
        drop(c.split_to(100));
        pool.give(&mut c);
        assert!(pool.take().capacity() >= CHUNK);
        // A grown buffer is not kept.
        let mut big = BytesMut::with_capacity(KEEP_MAX * 2);
        pool.give(&mut big);
        assert!(pool.spare.borrow().is_empty());
        // Nor more than SPARE of them.
        let mut many: Vec<BytesMut> = (0..SPARE + 10).map(|_| pool.take()).collect();
        for m in &mut many {
            pool.give(m);
        }
        assert_eq!(pool.spare.borrow().len(), SPARE);
    }
}
