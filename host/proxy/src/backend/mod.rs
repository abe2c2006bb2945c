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

pub use conn::{
    BackendConn, BackendOptions, BackendStats, ConnEvent, ConnectError, Events, LateStep, ReplyRx,
    connect_logged_in,
};
pub use dedicated::{Dedicated, DedicatedLimit, DedicatedPool, Reporting};
pub use pool::{Lane, Pool};

use bytes::Bytes;

use tessera_model::error::DataError;

/// A backend's reply (exact bytes) or why there is none.
pub type ReplyResult = Result<Bytes, DataError>;
