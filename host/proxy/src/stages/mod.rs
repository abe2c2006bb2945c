//! The data path's pure stages: each a function of its input and the state it is given, with
//! no I/O and no session state, so each is tested in-process. A command meets them in order:
//!
//! 1. decode — `resp::RequestDecoder` (bytes → `Request`)
//! 2. [`classify`] — the command table, authentication, the proxy's policy, the user's rights,
//!    the reserved namespace (`Request` → `Classified`, or the client's error)
//! 3. the plugin layer — `session::plugins` (it needs the worker's plugin instances)
//! 4. [`plan`] — routing by slot against the table in force (`Classified` → `Plan`)
//! 5. send — `session::send`, on the worker's backend connections
//! 6. [`merge`] — the replies of a split or fanned-out command become one
//! 7. encode — the session's output buffer
//!
//! Errors at any stage are `error::DataError`, rendered once.

pub mod classify;
pub mod info;
pub mod merge;
pub mod plan;
