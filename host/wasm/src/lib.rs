//! Tessera's WebAssembly plugin runtime (wasmtime 48, core modules, ABI v1 of
//! `tessera-plugin-abi`).
//!
//! - [`Runtime`]: one `Engine` per process, modules compiled once and cached by sha256 (a
//!   bounded cache of modules that passed the ABI checks), the epoch ticker, the linker with
//!   every host import.
//! - [`Generation`]: one loaded version of a plugin (module + config): an `InstancePre` shared by
//!   all threads, and the hook manifest its `init` returned in a probe instance.
//! - [`Chain`]: the ordered plugins in force, swapped atomically on reload.
//! - [`WorkerChain`]: a worker thread's warm instances for the chain in force; an instance that
//!   faulted is replaced at once for the next command (backoff only when instantiation keeps
//!   failing); an instance still referenced by a command in flight outlives a reload.
//! - [`CallError`] / [`FailPolicy`]: why a call gave no verdict (input over the plugin's input
//!   limit, a fault, a dead instance) and what the policy makes of it ([`Verdict`]).
//!
//! This crate knows nothing of sessions or routing: the proxy hands it argument slices and gets
//! actions back.

mod batch;
mod chain;
mod client;
pub mod clock;
pub mod cputime;
mod fault;
mod generation;
mod hook_latency;
mod hooks;
mod host_state;
mod imports;
mod instance;
pub mod metrics;
mod module_cache;
mod plugin;
mod runtime;
mod spec;
pub mod state;

pub use batch::BatchCmd;
pub use chain::{Chain, ChainStep, InstanceRef, WorkerChain};
pub use client::{ClientFacts, ClientLookup};
pub use fault::{CallError, FAULT_REASONS, FailPolicy, Fault, Input, InputTooLarge, Verdict};
pub use generation::Generation;
pub use hook_latency::DEFAULT_SAMPLE as DEFAULT_HOOK_SAMPLE;
pub use hook_latency::{Hook, HookLatencies};
pub use hooks::{DeniedToAll, Hooks};
pub use instance::{CmdOutcome, Instance, ReplyOutcome};
pub use module_cache::{MAX_BYTES as MAX_CACHED_BYTES, MAX_MODULES as MAX_CACHED_MODULES};
pub use plugin::PluginShared;
pub use runtime::{LoadError, Runtime, RuntimeConfig};
pub use spec::{PluginSpec, valid_plugin_name};
pub use tessera_plugin_abi as abi;
