//! COMMANDLOG's definition (Valkey 8.1; Redis 7.0, whose table `generated.rs` is, lacks it),
//! written as the generator would write it: the proxy answers it from its own command log.

use super::spec::*;

/// Commands the proxy knows beyond Redis 7.0's table.
pub(crate) static COMMANDS: &[RawCommand] = &[RawCommand {
    name: "COMMANDLOG",
    arity: -2,
    flags: 0,
    acl: A_SLOW,
    keys: &[],
    subcommands: &[
        sub(
            "COMMANDLOG|GET",
            4,
            F_ADMIN | F_LOADING | F_STALE,
            A_ADMIN | A_SLOW | A_DANGEROUS,
        ),
        sub("COMMANDLOG|HELP", 2, F_LOADING | F_STALE, A_SLOW),
        sub(
            "COMMANDLOG|LEN",
            3,
            F_ADMIN | F_LOADING | F_STALE,
            A_ADMIN | A_SLOW | A_DANGEROUS,
        ),
        sub(
            "COMMANDLOG|RESET",
            3,
            F_ADMIN | F_LOADING | F_STALE,
            A_ADMIN | A_SLOW | A_DANGEROUS,
        ),
    ],
}];

const fn sub(name: &'static str, arity: i32, flags: u32, acl: u32) -> RawCommand {
    RawCommand {
        name,
        arity,
        flags,
        acl,
        keys: &[],
        subcommands: &[],
    }
}
