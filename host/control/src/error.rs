//! The control plane's own error: what went wrong and on whose side, kept typed from where
//! it happens to the API edge, where `api::error` turns it into an HTTP answer (status and
//! stable code) in one place. Callers (automatic failover, the migration driver, the
//! background loops) match on the variant or its [`Side`], never on a message.

use tessera_model::redis_client::ClientError;
use tessera_store::StoreError;

/// Why a dashboard operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed, or a value is out of range.
    #[error("{0}")]
    Invalid(String),
    /// A user change or users table that cannot be used (a bad name, password, class or
    /// prefix).
    #[error(transparent)]
    User(tessera_model::users::UsersError),
    /// The request names something the cluster does not have (a group, server, proxy,
    /// plugin, user or token).
    #[error("{0}")]
    NotFound(String),
    /// The request contradicts the cluster's state (a non-empty group, a slot moving, a name
    /// taken, a migration in progress).
    #[error("{0}")]
    Conflict(String),
    /// A Redis server of the cluster could not be reached (or was lost mid-command).
    #[error("cannot reach server {addr}: {source}")]
    ServerUnreachable {
        addr: String,
        #[source]
        source: ClientError,
    },
    /// A Redis server refused a command. `command` is its name only: arguments may hold a
    /// password (CONFIG SET masterauth).
    #[error("server {addr} refused {command}: {reply}")]
    ServerRefused {
        addr: String,
        command: String,
        reply: String,
    },
    /// The control plane's own Redis user cannot be had on a server (`admin_user`).
    #[error(transparent)]
    AdminUser(crate::dashboard::admin_user::AdminUserError),
    /// A plugin module is not a Tessera plugin, or the plugin's own `init` refused its
    /// config (the message is the plugin's).
    #[error("{0}")]
    PluginRefused(String),
    /// The store failed: nothing was changed, or the change is not known to be saved.
    #[error(transparent)]
    StoreUnavailable(#[from] StoreError),
    /// A document the store holds cannot be used until it is repaired (the message names
    /// its key).
    #[error("{0}")]
    DocumentUnusable(String),
    /// The plugin catalog, or a module of it, could not be read or written.
    #[error("{0}")]
    CatalogUnavailable(anyhow::Error),
    /// The change was persisted, but some proxies did not acknowledge it.
    #[error(transparent)]
    PushIncomplete(#[from] crate::dashboard::PushError),
    /// One proxy did not take what it was sent (a proxy put back online).
    #[error("proxy {token}: {failure}")]
    ProxyUnreachable {
        token: String,
        failure: crate::dashboard::ProxyFailure,
    },
    /// The dashboard is doing another operation of this kind that it does one at a time (a
    /// plugin module upload): call again once it ends.
    #[error("{0}")]
    Busy(String),
    /// Something the dashboard relies on is missing or broken (its meta document, the
    /// plugin runtime): not the caller's doing.
    #[error("{0}")]
    Internal(String),
}

/// Whose side an [`Error`] is on: what a caller may do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The request itself: fix it and call again.
    Caller,
    /// The cluster's state: change it first (or ask for something else).
    Cluster,
    /// A Redis server: reach or repair it.
    Server,
    /// The store: retry once it answers (or repair a document).
    Store,
    /// A proxy: the change may be in force everywhere else already.
    Proxy,
    /// The dashboard itself.
    Internal,
}

impl Error {
    /// Who caused it.
    pub fn side(&self) -> Side {
        match self {
            Error::Invalid(_) | Error::User(_) | Error::PluginRefused(_) => Side::Caller,
            Error::NotFound(_) | Error::Conflict(_) => Side::Cluster,
            Error::ServerUnreachable { .. } | Error::ServerRefused { .. } | Error::AdminUser(_) => {
                Side::Server
            }
            Error::StoreUnavailable(_)
            | Error::DocumentUnusable(_)
            | Error::CatalogUnavailable(_) => Side::Store,
            Error::PushIncomplete(_) | Error::ProxyUnreachable { .. } => Side::Proxy,
            Error::Busy(_) | Error::Internal(_) => Side::Internal,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Invalid(message.into())
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Error::NotFound(message.into())
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Error::Conflict(message.into())
    }

    /// A server that could not be worked on as the control plane's user.
    pub fn server(addr: &str, e: crate::dashboard::admin_user::AdminUserError) -> Self {
        use crate::dashboard::admin_user::AdminUserError;
        match e {
            AdminUserError::Client(source) => Error::ServerUnreachable {
                addr: addr.into(),
                source,
            },
            refused => Error::AdminUser(refused),
        }
    }
}

/// The control plane's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_knows_its_side() {
        assert_eq!(Error::invalid("x").side(), Side::Caller);
        assert_eq!(Error::conflict("x").side(), Side::Cluster);
        let refused = Error::ServerRefused {
            addr: "h:1".into(),
            command: "REPLICAOF".into(),
            reply: "ERR no".into(),
        };
        assert_eq!(refused.side(), Side::Server);
        assert_eq!(refused.to_string(), "server h:1 refused REPLICAOF: ERR no");
        assert_eq!(Error::Internal("x".into()).side(), Side::Internal);
    }
}
