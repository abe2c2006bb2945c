//! Backend connections: per worker thread, a small fixed set of multiplexed connections per
//! (address, protocol, login). Requests from every session on the thread are pipelined onto
//! them and replies matched in FIFO order. A broken connection fails only the requests in
//! flight on it; the next request reconnects, with backoff while the server stays down.
//!
//! Protocol choice: a RESP3 session uses connections that sent `HELLO 3` at connect, a RESP2
//! session plain ones, so every reply is forwarded byte for byte, never converted.
//!
//! Login: a connection runs its [`Login`]'s steps before its first request, so it acts with
//! the rights of one Redis ACL user (a session's confined data user, or the proxy's own control
//! user); connections of different logins are never shared.

mod conn;
mod dedicated;
mod local;
mod pool;

use std::sync::Arc;

pub use conn::{BackendConn, BackendOptions, BackendStats, ReplyRx, connect_logged_in};
pub use dedicated::{Dedicated, DedicatedLimit, DedicatedPool};
pub use pool::Pool;

use bytes::Bytes;

use crate::error::DataError;

/// A backend's reply (exact bytes) or why there is none.
pub type ReplyResult = Result<Bytes, DataError>;

/// How a connection identifies itself before serving: requests sent in order at connect, each
/// of whose replies must pass its check. `id` distinguishes logins in the pool (equal ids,
/// equal steps).
#[derive(Clone)]
pub struct Login {
    pub id: u64,
    pub steps: Arc<[LoginStep]>,
}

/// One request of a login, what it is (for errors), and which replies mean it worked.
pub struct LoginStep {
    pub request: Bytes,
    pub what: &'static str,
    pub accept: fn(&[u8]) -> bool,
}

impl Login {
    /// No login: the connection acts as Redis's `default` user.
    pub fn none() -> Self {
        Self {
            id: 0,
            steps: Arc::from(Vec::new()),
        }
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("id", &self.id)
            .field(
                "steps",
                &self.steps.iter().map(|s| s.what).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A `+OK` reply.
pub fn is_ok(r: &[u8]) -> bool {
    r == b"+OK\r\n"
}
