//! [`Generation`]: one loaded version of a plugin — its spec, the hooks its `init` returned in
//! a probe instance, and the `InstancePre` every worker instantiates from.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use wasmtime::InstancePre;

use crate::hooks::{DeniedToAll, Hooks};
use crate::host_state::HostState;
use crate::plugin::PluginShared;
use crate::spec::PluginSpec;

static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// One loaded version of a plugin.
pub struct Generation {
    pub id: u64,
    pub spec: PluginSpec,
    pub sha256: String,
    pub hooks: Hooks,
    pub shared: Arc<PluginShared>,
    pub(crate) pre: InstancePre<HostState>,
    pub(crate) has_close: bool,
    pub(crate) has_tick: bool,
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("id", &self.id)
            .field("name", &self.spec.name)
            .field("sha256", &self.sha256)
            .field("hooks", &self.hooks)
            .finish()
    }
}

impl Generation {
    pub(crate) fn next_id() -> u64 {
        NEXT_GENERATION.fetch_add(1, Relaxed)
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The commands and classes this plugin refuses to every client, unconditionally, as its
    /// manifest declared them (empty for plugins that declare nothing, e.g. built before the
    /// declaration existed). For the proxy's backend ACL: scripts must not run them either.
    pub fn denied_to_all(&self) -> &DeniedToAll {
        &self.hooks.denied
    }
}
