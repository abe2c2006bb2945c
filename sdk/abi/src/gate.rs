//! [`Gate`]: a static rule a manifest may declare so that the host calls the plugin only for
//! the commands the rule touches. A plugin whose check is static (keys under some prefixes
//! are read-only, values above a size are refused) is then not entered for every other
//! command of the classes it hooks; the host and the SDK's test harness decide with this one
//! implementation.

use alloc::vec::Vec;

use crate::ManifestView;

/// For commands hooked only through `classes` (not listed by id, not through another hooked
/// class, not through "hook all"): call the plugin only when a key starts with one of
/// `prefixes`, or a value (an argument after the name that is not a key) is longer than
/// `max_value` bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gate {
    pub classes: u32,
    /// `u32::MAX`: values never open the gate.
    pub max_value: u32,
    pub prefixes: Vec<Vec<u8>>,
}

impl Gate {
    /// The gate a parsed manifest declares (`None` without [`crate::MF_GATE`]).
    pub fn from_manifest(m: &ManifestView<'_>) -> Option<Self> {
        (m.flags & crate::MF_GATE != 0).then(|| Self {
            classes: m.gated_classes,
            max_value: m.gate_max_value,
            prefixes: m.gate_prefixes().map(<[u8]>::to_vec).collect(),
        })
    }

    /// Whether the gate applies to a command of `class`: hooked neither by id (`listed`) nor
    /// by hooking every command (`all`) nor through a hooked class outside the gate's.
    #[inline]
    pub fn applies(&self, listed: bool, all: bool, hooked_classes: u32, class: u32) -> bool {
        !listed && !all && class & hooked_classes & !self.classes == 0
    }

    /// Whether a command with these keys and value lengths goes to the plugin.
    #[inline]
    pub fn opens<'a>(
        &self,
        mut keys: impl Iterator<Item = &'a [u8]>,
        mut value_lens: impl Iterator<Item = usize>,
    ) -> bool {
        (!self.prefixes.is_empty() && keys.any(|k| self.prefixes.iter().any(|p| k.starts_with(p))))
            || (self.max_value != u32::MAX && value_lens.any(|n| n > self.max_value as usize))
    }
}
