//! TLS for every connection Tessera serves or opens (docs/tls.md): PEM loading ([`pem`]),
//! server configs that reload their files without a restart ([`server`]), the one connector
//! every backend connection uses, TLS for the groups marked so ([`backend`]), the stream type
//! the session and backend code run over ([`stream`]), and the HTTPS listener of the
//! dashboard and console ([`http`]). rustls with the `ring` provider; no OpenSSL.

pub mod backend;
pub mod pem;
pub mod server;
pub mod stream;

pub use backend::BackendTls;
pub use server::{ClientAuth, ServerTls, ServerTlsFiles};
pub use stream::Stream;

use std::sync::Arc;

/// Why a TLS setting could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}: {reason}")]
    BadFile { path: String, reason: String },
    #[error("TLS settings: {0}")]
    Config(String),
}

impl TlsError {
    fn bad(path: &std::path::Path, reason: impl std::fmt::Display) -> Self {
        Self::BadFile {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}

/// The crypto provider every config is built with (explicit, so nothing depends on a
/// process-wide default being installed).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
