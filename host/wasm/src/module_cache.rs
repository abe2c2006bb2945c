//! Compiled modules by the sha256 of their bytes, so that a reload of a plugin whose module is
//! unchanged (a new config) and the dashboard's checks of a module it already checked do not
//! compile again. Bounded by count and by compiled bytes, least recently used first out: the
//! modules are chosen by whoever may upload one, so an unbounded cache would grow with every
//! upload. Only modules that passed the ABI checks are kept (`Runtime` inserts after them).

use rustc_hash::FxHashMap;
use wasmtime::Module;

/// Modules kept at most: a full catalog's (`MAX_ENABLED`, 16) twice over, so a reload that
/// replaces every module still finds the ones in force.
pub const MAX_MODULES: usize = 32;
/// Compiled bytes kept at most (the plugins shipped compile to well under 1 MiB each).
pub const MAX_BYTES: usize = 256 << 20;

struct Entry {
    module: Module,
    bytes: usize,
    used: u64,
}

/// The cache (the runtime holds it behind a mutex; every operation is O(entries) at most).
#[derive(Default)]
pub(crate) struct ModuleCache {
    entries: FxHashMap<[u8; 32], Entry>,
    bytes: usize,
    clock: u64,
}

impl ModuleCache {
    /// The module compiled from bytes hashing to `sha`, if kept; marks it used.
    pub(crate) fn get(&mut self, sha: &[u8; 32]) -> Option<Module> {
        self.clock += 1;
        let e = self.entries.get_mut(sha)?;
        e.used = self.clock;
        Some(e.module.clone())
    }

    /// Keeps `module`, dropping the least recently used ones past [`MAX_MODULES`] or
    /// [`MAX_BYTES`]. A module larger than [`MAX_BYTES`] alone is not kept.
    pub(crate) fn insert(&mut self, sha: [u8; 32], module: Module) {
        let bytes = compiled_size(&module);
        if bytes > MAX_BYTES {
            return;
        }
        self.clock += 1;
        if let Some(old) = self.entries.insert(
            sha,
            Entry {
                module,
                bytes,
                used: self.clock,
            },
        ) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
        while self.entries.len() > MAX_MODULES || self.bytes > MAX_BYTES {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.bytes;
            }
        }
    }

    /// Modules kept now and their compiled bytes.
    pub(crate) fn usage(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }
}

/// The bytes of a module's compiled image (code and data wasmtime keeps for it).
fn compiled_size(module: &Module) -> usize {
    let r = module.image_range();
    (r.end as usize).saturating_sub(r.start as usize)
}
