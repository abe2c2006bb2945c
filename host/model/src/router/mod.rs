//! Slots and the routing table: `slot = crc32(hash key) % 1024`, and a table of 1024 entries
//! swapped atomically (`arc-swap`) so readers never take a lock.

pub mod prefix;
pub mod replicas;
mod table;
mod topology;

pub use replicas::{ReadMode, ReadPolicy};
pub use table::{BackendIdx, Router, SlotEntry, SlotTable, SlotTableBuilder};
pub use tessera_wire::topology::GroupId;
pub use topology::{
    GroupRoute, MasterSeen, MastersSeen, PushAck, SlotRoute, ToTable, Topology, TopologyError,
};

use crate::command::hash_key;

/// Number of slots in every Tessera cluster (as in Codis).
pub const SLOTS: usize = 1024;

/// A slot, `0..1024`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotId(pub u16);

impl SlotId {
    /// The slot of a key: crc32 (IEEE) of its hash key, modulo 1024.
    #[inline]
    pub fn of_key(key: &[u8]) -> SlotId {
        SlotId((crc32fast::hash(hash_key(key)) % SLOTS as u32) as u16)
    }
}

impl std::fmt::Display for SlotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_is_crc32_ieee_mod_1024() {
        // zlib.crc32(b"foo") % 1024 == 289, the same function Codis uses.
        assert_eq!(SlotId::of_key(b"foo"), SlotId(289));
        assert_eq!(SlotId::of_key(b"{foo}:bar"), SlotId(289));
        assert_eq!(SlotId::of_key(b"{}abc"), SlotId(0));
    }
}
