//! Merge codes of a rewrite block: how the host combines the replies of a rewrite's commands.
//! With `alloc`, also the one implementation of those merges ([`merge()`], [`concat()`], [`sum`]
//! …), shared by the proxy and the SDK's fake host.

/// Call `on_reply` with every reply.
pub const PLUGIN: u32 = 0;
/// Concatenate arrays (or sets, or maps).
pub const CONCAT: u32 = 1;
/// Sum integers.
pub const SUM: u32 = 2;
/// `+OK` when every reply is `+OK`.
pub const ALL_OK: u32 = 3;
/// The first reply that is not nil (nil if all are).
pub const FIRST_NON_NIL: u32 = 4;
/// The last command's reply.
pub const LAST: u32 = 5;
/// The first command's reply.
pub const FIRST: u32 = 6;
/// The highest merge code of ABI v1.
pub const MAX: u32 = 6;

#[cfg(feature = "alloc")]
mod combine;
#[cfg(feature = "alloc")]
pub use combine::{
    MergeError, Resp, Sink, all_ok, concat, first, first_error, first_non_nil, last, merge, sum,
};
