//! Backend connections: per worker thread, a small fixed set of multiplexed connections per
//! (address, protocol). Requests from every session on the thread are pipelined onto them and
//! replies matched in FIFO order. A broken connection fails only the requests in flight on
//! it; the next request reconnects, with backoff while the server stays down.
//!
//! Protocol choice: a RESP3 session uses connections that sent `HELLO 3` at connect, a RESP2
//! session plain ones, so every reply is forwarded byte for byte, never converted.

mod conn;
mod pool;

pub use conn::{BackendConn, BackendOptions, BackendStats, ReplyRx};
pub use pool::Pool;

use std::sync::Arc;

/// Why a backend could not answer. Client-visible text comes from `Display`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("backend {addr} unavailable: {reason}")]
    Unavailable { addr: Arc<str>, reason: Arc<str> },
}

/// A backend's reply (exact bytes) or why there is none.
pub type ReplyResult = Result<bytes::Bytes, BackendError>;
