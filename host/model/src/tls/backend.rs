//! The client side, toward Redis servers: the one connector every backend connection goes
//! through (the proxy's shared, dedicated and pub/sub connections via
//! `backend::connect_logged_in`, the control plane's `RedisClient`: health checks, admin
//! user provisioning, REPLICAOF, the migration mover). It opens TLS to the addresses of the
//! groups marked `tls` and plain TCP to the rest.
//!
//! Which addresses are TLS is process-wide state fed from the topology (each proxy's pushed
//! table, the dashboard's groups) or, in static mode, from `backend_tls`: the connect sites
//! are many and deep in the control plane, and the answer depends only on the address.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};

use arc_swap::{ArcSwap, ArcSwapOption};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use super::{Stream, TlsError, pem, provider};

/// Where the backend CA (and an optional client certificate for servers that require one)
/// are.
#[derive(Debug, Clone, Default)]
pub struct BackendTlsFiles {
    pub ca: Option<std::path::PathBuf>,
    pub cert: Option<std::path::PathBuf>,
    pub key: Option<std::path::PathBuf>,
}

/// Which backends speak TLS and how their certificates are verified.
pub struct BackendTls {
    config: ArcSwapOption<ClientConfig>,
    /// Address → TLS or not, as last told; an address never told is plain.
    addrs: ArcSwap<HashMap<String, bool>>,
}

static BACKENDS: LazyLock<BackendTls> = LazyLock::new(|| BackendTls {
    config: ArcSwapOption::empty(),
    addrs: ArcSwap::from_pointee(HashMap::new()),
});

/// This process's backend TLS settings.
pub fn backends() -> &'static BackendTls {
    &BACKENDS
}

impl BackendTls {
    /// Sets the CA that backends' certificates are verified against (and the client
    /// certificate presented to them, when given). Without a CA, a TLS group cannot be
    /// reached: there are no default roots for Redis servers.
    ///
    /// # Errors
    /// A file is missing or invalid, or only one of cert and key is given.
    pub fn configure(&self, files: &BackendTlsFiles) -> Result<(), TlsError> {
        let Some(ca) = &files.ca else {
            if files.cert.is_some() || files.key.is_some() {
                return Err(TlsError::Config(
                    "a backend client certificate needs the backend CA too".into(),
                ));
            }
            return Ok(());
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_root_certificates(pem::roots(ca)?);
        let config = match (&files.cert, &files.key) {
            (Some(c), Some(k)) => builder
                .with_client_auth_cert(pem::certs(c)?, pem::key(k)?)
                .map_err(|e| TlsError::bad(k, e))?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(TlsError::Config(
                    "the backend client certificate needs both cert and key".into(),
                ));
            }
        };
        self.config.store(Some(Arc::new(config)));
        Ok(())
    }

    /// Records, for each address, whether it speaks TLS (later calls win per address).
    pub fn mark<'a>(&self, addrs: impl IntoIterator<Item = (&'a str, bool)>) {
        let addrs: Vec<_> = addrs.into_iter().collect();
        if addrs.iter().all(|(a, t)| self.uses_tls(a) == *t) {
            return;
        }
        self.addrs.rcu(|m| {
            let mut m = HashMap::clone(m);
            for (a, t) in &addrs {
                m.insert((*a).to_string(), *t);
            }
            m
        });
    }

    pub fn uses_tls(&self, addr: &str) -> bool {
        self.addrs.load().get(addr).copied().unwrap_or(false)
    }

    /// Opens a connection to `addr`, with TLS if it is marked so (no timeout of its own:
    /// callers bound the whole connect and login).
    ///
    /// # Errors
    /// The TCP connect or the handshake failed, or `addr` is TLS and no CA is configured.
    pub async fn connect(&self, addr: &str) -> Result<Stream, String> {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        if !self.uses_tls(addr) {
            return Ok(Stream::Plain(tcp));
        }
        let Some(config) = self.config.load_full() else {
            return Err(
                "the group is marked tls but no backend CA is configured (backend_tls_ca)".into(),
            );
        };
        let name = server_name(addr)?;
        let s = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        Ok(Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(s))))
    }
}

/// The name a backend's certificate must hold: the host part of `host:port` (an IP address
/// is checked against the certificate's IP SANs).
fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| format!("server name {host:?}: {e}"))
}

/// Loads the files into [`backends`] (a shorthand for the command line).
///
/// # Errors
/// As [`BackendTls::configure`].
pub fn configure(
    ca: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<(), TlsError> {
    backends().configure(&BackendTlsFiles {
        ca: ca.map(Path::to_path_buf),
        cert: cert.map(Path::to_path_buf),
        key: key.map(Path::to_path_buf),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names_come_from_the_host_part() {
        assert!(matches!(
            server_name("127.0.0.1:6379"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("[::1]:6379"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(
            server_name("redis-1.local:6379"),
            Ok(ServerName::DnsName(_))
        ));
    }

    #[test]
    fn addresses_are_plain_until_marked() {
        let b = backends();
        assert!(!b.uses_tls("10.9.9.9:1"));
        b.mark([("10.9.9.9:1", true)]);
        assert!(b.uses_tls("10.9.9.9:1"));
        b.mark([("10.9.9.9:1", false)]);
        assert!(!b.uses_tls("10.9.9.9:1"));
    }
}
