//! Writers for what the guest produces: manifests and rewrite blocks (needs `alloc`).

use alloc::vec::Vec;

use crate::{ARG_REF, LEN_MASK, MANIFEST_HEADER, REWRITE_HEADER};

/// Builds a manifest.
#[derive(Debug, Clone, Default)]
pub struct ManifestBuilder {
    pub flags: u32,
    pub classes: u32,
    pub tick_ms: u32,
    pub commands: Vec<(u16, u16)>,
    pub prefixes: Vec<Vec<u8>>,
    /// Classes denied to every client (the [`crate::MF_DENIES`] section).
    pub denied_classes: u32,
    /// Command names denied to every client (`FLUSHALL`, `CONFIG|SET`).
    pub denied: Vec<Vec<u8>>,
    /// The gate (the [`crate::MF_GATE`] section), if the plugin declares one.
    pub gate: Option<crate::Gate>,
}

impl ManifestBuilder {
    /// Appends the encoded manifest to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let denies = self.denied_classes != 0 || !self.denied.is_empty();
        let mut flags = self.flags & !(crate::MF_DENIES | crate::MF_GATE);
        if denies {
            flags |= crate::MF_DENIES;
        }
        if self.gate.is_some() {
            flags |= crate::MF_GATE;
        }
        out.extend_from_slice(&crate::ABI_VERSION.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.classes.to_le_bytes());
        out.extend_from_slice(&self.tick_ms.to_le_bytes());
        out.extend_from_slice(&(self.commands.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.prefixes.len() as u32).to_le_bytes());
        debug_assert_eq!(out.len() % 4, MANIFEST_HEADER % 4);
        for &(id, flags) in &self.commands {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&flags.to_le_bytes());
        }
        for p in &self.prefixes {
            out.extend_from_slice(&(p.len() as u32).to_le_bytes());
            out.extend_from_slice(p);
        }
        if denies {
            out.extend_from_slice(&self.denied_classes.to_le_bytes());
            out.extend_from_slice(&(self.denied.len() as u32).to_le_bytes());
            encode_string_list(self.denied.iter().map(Vec::as_slice), out);
        }
        if let Some(g) = &self.gate {
            out.extend_from_slice(&g.classes.to_le_bytes());
            out.extend_from_slice(&g.max_value.to_le_bytes());
            out.extend_from_slice(&(g.prefixes.len() as u32).to_le_bytes());
            encode_string_list(g.prefixes.iter().map(Vec::as_slice), out);
        }
    }
}

/// Writes a rewrite block into a buffer: `begin`, then per command `command(nargs)` followed by
/// exactly `nargs` calls of `arg` / `input`.
#[derive(Debug)]
pub struct RewriteWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    count: u32,
}

impl<'a> RewriteWriter<'a> {
    /// Starts a block at the end of `out`.
    pub fn begin(out: &'a mut Vec<u8>, merge: u32, ctx: u64) -> Self {
        let start = out.len();
        out.extend_from_slice(&merge.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&ctx.to_le_bytes());
        debug_assert_eq!(out.len() - start, REWRITE_HEADER);
        Self {
            out,
            start,
            count: 0,
        }
    }

    pub fn command(&mut self, nargs: u32) -> &mut Self {
        self.count += 1;
        self.out.extend_from_slice(&nargs.to_le_bytes());
        self
    }

    pub fn arg(&mut self, bytes: &[u8]) -> &mut Self {
        self.out
            .extend_from_slice(&((bytes.len() as u32) & !ARG_REF).to_le_bytes());
        self.out.extend_from_slice(bytes);
        self
    }

    /// An argument made of several pieces (e.g. key + suffix) without a temporary.
    pub fn arg_parts(&mut self, parts: &[&[u8]]) -> &mut Self {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.out.extend_from_slice(&(len as u32).to_le_bytes());
        for p in parts {
            self.out.extend_from_slice(p);
        }
        self
    }

    /// Reuses input argument `index` as is.
    pub fn input(&mut self, index: u32) -> &mut Self {
        self.out
            .extend_from_slice(&(ARG_REF | (index & LEN_MASK)).to_le_bytes());
        self
    }

    /// Commands written so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bytes of the block so far.
    pub fn len(&self) -> usize {
        self.out.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Encodes strings as `{u32 len, bytes}*`.
pub fn encode_string_list<'s>(items: impl IntoIterator<Item = &'s [u8]>, out: &mut Vec<u8>) {
    for s in items {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s);
    }
}
