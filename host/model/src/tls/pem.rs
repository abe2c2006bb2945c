//! Reading PEM files: a certificate chain, its private key, and CA bundles (the roots a
//! peer's certificate is verified against). Errors name the file and what was wrong.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

/// The certificates of a PEM file, leaf first.
///
/// # Errors
/// Unreadable, not PEM, or no certificate in it.
pub fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::bad(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::bad(path, "no CERTIFICATE block"));
    }
    Ok(certs)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
///
/// # Errors
/// Unreadable, or no key in it.
pub fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::bad(path, e))
}

/// A root store holding every certificate of a CA bundle.
///
/// # Errors
/// As [`certs`], or a certificate rustls cannot use as a root.
pub fn roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut store = RootCertStore::empty();
    for c in certs(path)? {
        store.add(c).map_err(|e| TlsError::bad(path, e))?;
    }
    Ok(Arc::new(store))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}
