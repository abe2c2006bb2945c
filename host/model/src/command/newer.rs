//! Subcommands of Redis 7.0's commands that later Redis versions added and the proxy answers
//! itself, written as the generator would write them (`generated.rs` is Redis 7.0's table).

use super::spec::*;

/// `CLIENT MAINT_NOTIFICATIONS ON|OFF [moving-endpoint-type TYPE]` (Redis 8): the client asks
/// to be told, by a RESP3 push, before its connection goes away (docs/operations.md).
pub(crate) static SUBCOMMANDS: &[RawCommand] = &[RawCommand {
    name: "CLIENT|MAINT_NOTIFICATIONS",
    arity: -3,
    flags: F_NOSCRIPT | F_LOADING | F_STALE,
    acl: A_SLOW | A_CONNECTION,
    keys: &[],
    subcommands: &[],
}];
