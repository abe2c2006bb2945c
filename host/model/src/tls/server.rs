//! The server side: a `rustls::ServerConfig` built from PEM files, optional client
//! certificates, and reload without a restart. A task polls the files' modification time and
//! length every [`RELOAD_EVERY`]; on a change it builds a new config and swaps it in (new
//! handshakes use it, connections already open keep theirs). A new set of files that does not
//! load (unreadable, key not matching the certificate, …) is logged and the old config stays.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use serde::Deserialize;
use tokio::net::TcpStream;
use tracing::{info, warn};

use super::{Stream, TlsError, pem, provider};

/// How often the files are checked for changes.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);
/// A client that has not finished its handshake this long after connecting is dropped (the
/// default; the proxy's `tls_handshake_timeout_ms` sets its own).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether clients must present a certificate signed by the client CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// Without a certificate the handshake fails.
    #[default]
    Required,
    /// A certificate is verified if sent; clients without one are served too.
    Optional,
}

impl ClientAuth {
    /// `"required"` or `"optional"`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "required" => Some(Self::Required),
            "optional" => Some(Self::Optional),
            _ => None,
        }
    }
}

/// Where a server's certificate, key and (optional) client CA are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Verify clients' certificates against this CA bundle.
    pub client_ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

impl ServerTlsFiles {
    fn paths(&self) -> impl Iterator<Item = &PathBuf> {
        [&self.cert, &self.key].into_iter().chain(&self.client_ca)
    }

    /// What the reload task compares: each file's modification time and length.
    fn stamp(&self) -> Vec<Option<(SystemTime, u64)>> {
        self.paths()
            .map(|p| {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len()))
            })
            .collect()
    }

    fn build(&self) -> Result<ServerConfig, TlsError> {
        let certs = pem::certs(&self.cert)?;
        let key = pem::key(&self.key)?;
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let v = WebPkiClientVerifier::builder_with_provider(pem::roots(ca)?, provider());
                let v = match self.client_auth {
                    ClientAuth::Required => v,
                    ClientAuth::Optional => v.allow_unauthenticated(),
                };
                let v = v.build().map_err(|e| TlsError::bad(ca, e))?;
                builder.with_client_cert_verifier(v)
            }
        };
        builder
            .with_single_cert(certs, key)
            .map_err(|e| TlsError::bad(&self.key, e))
    }
}

/// A server config that follows its files. Cheap to share (`Arc`).
pub struct ServerTls {
    files: ServerTlsFiles,
    config: ArcSwap<ServerConfig>,
    stamp: std::sync::Mutex<Vec<Option<(SystemTime, u64)>>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.files)
            .finish()
    }
}

impl ServerTls {
    /// Loads the files once.
    ///
    /// # Errors
    /// A file is missing or invalid, or the key does not fit the certificate.
    pub fn load(files: ServerTlsFiles) -> Result<Arc<Self>, TlsError> {
        let stamp = files.stamp();
        let config = files.build()?;
        Ok(Arc::new(Self {
            files,
            config: ArcSwap::from_pointee(config),
            stamp: std::sync::Mutex::new(stamp),
        }))
    }

    /// The config new handshakes use.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.load_full()
    }

    /// Reloads if a file changed since the last look; `Some(result)` when it tried.
    pub fn reload_if_changed(&self) -> Option<Result<(), TlsError>> {
        let now = self.files.stamp();
        {
            let mut seen = self.stamp.lock().expect("stamp lock poisoned");
            if *seen == now {
                return None;
            }
            // Remembered even if the build fails: the next try is at the next change, not
            // every poll (a half-written pair is retried once its other file is written).
            *seen = now;
        }
        Some(self.files.build().map(|c| self.config.store(Arc::new(c))))
    }

    /// Polls the files every [`RELOAD_EVERY`] for as long as the runtime runs.
    pub fn spawn_reload(self: &Arc<Self>, what: &'static str) {
        let tls = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(RELOAD_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(tls) = tls.upgrade() else { return };
                match tls.reload_if_changed() {
                    None => {}
                    Some(Ok(())) => {
                        info!(what, cert = %tls.files.cert.display(), "TLS certificate reloaded")
                    }
                    Some(Err(e)) => warn!(
                        what, error = %e,
                        "TLS files changed but do not load; still serving the previous certificate"
                    ),
                }
            }
        });
    }

    /// Runs the server handshake on `tcp`, within `timeout`.
    ///
    /// # Errors
    /// The handshake failed (not TLS, a refused or missing client certificate, …) or
    /// timed out; the socket is closed.
    pub async fn accept(
        &self,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<Stream, std::io::Error> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.config());
        match tokio::time::timeout(timeout, acceptor.accept(tcp)).await {
            Ok(Ok(s)) => Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s)))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "TLS handshake not finished after {} ms",
                    timeout.as_millis()
                ),
            )),
        }
    }
}
