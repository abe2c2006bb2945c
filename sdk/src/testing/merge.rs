//! The host's merges of a rewrite's replies, as the fake host performs them in
//! [`super::Harness::run`]: `tessera_plugin_abi::merge`, the implementation the proxy runs, so
//! a plugin merges the same natively and in the proxy. Also the one place that writes an error
//! reply the way the host sends a DENY or ERROR.

use tessera_plugin_abi::merge::{self as abi_merge, Resp};

use crate::out::Merge;

/// `-<text>\r\n` with CR/LF replaced, as the host sends a DENY or ERROR.
pub(crate) fn error_reply(text: &str) -> Vec<u8> {
    let mut v = b"-".to_vec();
    v.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    v.extend_from_slice(b"\r\n");
    v
}

/// Combines `replies` as the proxy does for `merge` (not [`Merge::Plugin`]), for a RESP2
/// client: the first error reply (`-` or RESP3 `!`) wins; otherwise CONCAT joins arrays, sets
/// or maps of one kind (nil counts as empty), SUM adds integers (an i64 overflow is the error
/// `ERR increment or decrement would overflow`), ALL_OK answers `+OK` when every reply is `+OK`
/// and otherwise the first reply that is not, FIRST_NON_NIL, FIRST and LAST pick one reply.
/// Replies the merge cannot combine give the error reply the proxy would send.
///
/// # Panics
/// On [`Merge::Plugin`]: that merge is the plugin's own `on_reply`.
pub fn merge(merge: Merge, replies: &[Vec<u8>]) -> Vec<u8> {
    if merge == Merge::Plugin {
        panic!("Merge::Plugin is merged by the plugin");
    }
    let mut out = Vec::new();
    match abi_merge::merge(merge as u32, replies, Resp::V2, &mut out) {
        Ok(()) => out,
        Err(e) => error_reply(&format!("ERR {e}")),
    }
}
