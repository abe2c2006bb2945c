//! The command table: what the proxy does with each Redis 7.0 command, and where its keys are.
//!
//! Definitions (arity, flags, key specs) are generated from a real server's `COMMAND` reply
//! (`generated.rs`, by `tools/gen-command-table.py`); `table.rs` adds the proxy's policy on
//! top: route by key, split, answer locally, fan out, or refuse.

mod commandlog;
mod generated;
mod newer;
mod spec;
mod table;

pub use table::{
    Admin, Command, CommandId, CommandTable, Kind, Local, Options, PubSub, Split, Tx, hash_key,
};
