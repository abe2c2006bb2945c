//! Write Tessera proxy plugins in Rust.
//!
//! A plugin is a type implementing [`Plugin`]; [`export_plugin!`] turns it into the exports of
//! Tessera plugin ABI v1 (`sdk/ABI.md`) when built for `wasm32-unknown-unknown`. The SDK keeps
//! the arena (the two shared buffers) and the plugin instance, parses the host's command and
//! reply tables into [`Command`] and [`Replies`], and lets a hook write its answer straight into
//! the output buffer through [`Out`] / [`ReplyOut`]: passing a command allocates nothing.
//!
//! ```
//! use tessera_plugin_sdk::{cmd, Action, Command, Conn, Manifest, Out, Plugin};
//!
//! /// Refuses FLUSHALL.
//! struct NoFlush;
//!
//! impl Plugin for NoFlush {
//!     fn init(_config: &[u8]) -> Result<(Self, Manifest), String> {
//!         // Hook only FLUSHALL: every other command never enters the plugin.
//!         Ok((NoFlush, Manifest::new().hook(cmd::FLUSHALL)))
//!     }
//!
//!     fn on_command(&mut self, _conn: Conn, cmd: &Command<'_>, out: Out<'_>) -> Action {
//!         if cmd.is(cmd::FLUSHALL) {
//!             return out.deny("ERR FLUSHALL is disabled on this cluster");
//!         }
//!         Action::PASS
//!     }
//! }
//!
//! tessera_plugin_sdk::export_plugin!(NoFlush);
//! # fn main() {}
//! ```
//!
//! Layout: `hooks.rs` the trait, `command.rs` / `replies.rs` the input views, `out.rs` the
//! output builders, `manifest.rs` the hook declaration, `resp.rs` a small RESP reader/writer,
//! `transform.rs` reply trees to rewrite, `host/` the imports, `rt.rs` the ABI glue behind the macro, `testing/` the fake host.

#![deny(missing_docs)]

mod command;
mod hooks;
pub mod host;
mod manifest;
mod out;
mod replies;
pub mod resp;
#[doc(hidden)]
pub mod rt;
pub mod transform;

#[cfg(all(feature = "testing", not(target_arch = "wasm32")))]
pub mod testing;

pub use command::{Arg, Command, Keys};
pub use hooks::{Conn, Plugin};
pub use manifest::Manifest;
pub use out::{Action, Merge, Out, ReplyAction, ReplyOut, Rewrite};
pub use replies::Replies;
pub use resp::{RespWriter, Value};
pub use tessera_plugin_abi::{class, cmd, command_id, command_name};
pub use transform::Node;

/// The ABI itself (layouts and constants), for plugins that need something the SDK does not wrap.
pub use tessera_plugin_abi as abi;

/// Exports a [`Plugin`] type as a Tessera plugin module (ABI v1).
///
/// On `wasm32` this generates every export of `sdk/ABI.md`: the version marker
/// `tessera_plugin_abi_v1`, `tp_arena`, `tp_reserve`, `tp_init`, `tp_on_command`,
/// `tp_on_commands` (a pipeline's commands in one call), `tp_on_reply`, `tp_on_close` and `tp_on_tick`. On other targets it generates nothing, so the
/// same crate builds natively for tests (see the `testing` feature).
///
/// The generated code contains `#[unsafe(no_mangle)]` but no `unsafe` block; every raw memory
/// access is inside this SDK. rustc does not report `unsafe_code` for tokens produced by a
/// macro from another crate, so plugin crates may keep `unsafe_code = "forbid"` (and must not
/// be given an `#[allow(unsafe_code)]`, which `forbid` turns into a hard error).
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            static TESSERA_PLUGIN: $crate::rt::Global<$plugin> = $crate::rt::Global::new();

            #[unsafe(no_mangle)]
            extern "C" fn tessera_plugin_abi_v1() {}

            #[unsafe(no_mangle)]
            extern "C" fn tp_arena() -> i32 {
                TESSERA_PLUGIN.with(|rt| rt.arena())
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_reserve(in_len: i32, out_len: i32) -> i32 {
                TESSERA_PLUGIN.with(|rt| rt.reserve(in_len, out_len))
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_init(cfg_len: i32) -> i64 {
                TESSERA_PLUGIN.with(|rt| rt.init(cfg_len))
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_on_command(conn: i64, cmd: i32, nargs: i32) -> i64 {
                TESSERA_PLUGIN.with(|rt| rt.on_command(conn, cmd, nargs))
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_on_commands(conn: i64, n: i32) -> i64 {
                TESSERA_PLUGIN.with(|rt| rt.on_commands(conn, n))
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_on_reply(conn: i64, ctx: i64, nreplies: i32) -> i64 {
                TESSERA_PLUGIN.with(|rt| rt.on_reply(conn, ctx, nreplies))
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_on_close(conn: i64) {
                TESSERA_PLUGIN.with(|rt| rt.on_close(conn))
            }

            #[unsafe(no_mangle)]
            extern "C" fn tp_on_tick() {
                TESSERA_PLUGIN.with(|rt| rt.on_tick())
            }
        };
    };
}
