//! The control plane's own Redis user, `tessera-admin`: full rights, a random password kept
//! in the cluster meta (`backend_admin`), created on every server the dashboard adds (and at
//! its start on servers that lack it). Every connection the dashboard makes to a server
//! (health checks, REPLICAOF, the mover) authenticates as it, so the proxies' own backend
//! user can be cut down to the proxies' policy without cutting down the control plane.
//!
//! The user is created as `default` with no password, the stock setting of a new server, or
//! as a login the operator gives when adding a server with a password (`requirepass` or an
//! ACL user: used once, never stored; the server keeps the user across restarts only with an
//! ACL file, which is then saved). A server whose default user has a password and no
//! `tessera-admin`, added without a login, is refused with the reason; the dashboard never
//! falls back to working as another user.

use std::time::Duration;

use tracing::{info, warn};

use tessera_model::redis_client::{ClientError, Credential, RedisClient, Value};
use tessera_model::secret::random_token;

/// The name of the control plane's user on every server.
pub const ADMIN_USER: &str = "tessera-admin";

/// A new credential for a new cluster (or an old one that had none).
pub fn new_credential() -> Credential {
    Credential {
        user: ADMIN_USER.into(),
        password: random_token(),
    }
}

/// Why a server cannot be worked on as the admin user.
#[derive(Debug, thiserror::Error)]
pub enum AdminUserError {
    #[error("{0}")]
    Client(#[from] ClientError),
    /// The user is missing (or has another password) and the server refused to create it.
    #[error(
        "server {addr} refused AUTH as {user} ({auth}) and refused to create that user ({reason}); \
         the dashboard creates it as the `default` user without a password, the stock setting; \
         on a server whose default user has a password, create it by hand with the password \
         stored in the cluster meta (backend_admin): ACL SETUSER {user} on >PASSWORD ~* &* +@all"
    )]
    Refused {
        addr: String,
        user: String,
        auth: String,
        reason: String,
    },
}

/// What [`provision`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provisioned {
    /// The user was there with its password.
    Present,
    /// It was created now.
    Created,
}

/// `ACL SETUSER` with full rights. `reset` first, so a user of that name left with other
/// rights or passwords ends up exactly as wanted. skip-sanitize-payload: the mover's
/// RESTOREs (through MIGRATE) carry our own data, deep checks would only slow them.
fn setuser_command(cred: &Credential) -> Vec<String> {
    [
        "ACL",
        "SETUSER",
        &cred.user,
        "reset",
        "on",
        "skip-sanitize-payload",
        &format!(">{}", cred.password),
        "~*",
        "&*",
        "+@all",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Makes sure `addr` has the admin user: AUTH as it, else create it as `default`.
///
/// # Errors
/// Unreachable, or the user is missing and cannot be created ([`AdminUserError::Refused`]).
pub async fn provision(
    addr: &str,
    cred: &Credential,
    login: Option<&Credential>,
    timeout: Duration,
) -> Result<Provisioned, AdminUserError> {
    let mut c = RedisClient::connect(addr, timeout).await?;
    let auth = match c.auth(cred).await {
        Ok(()) => return Ok(Provisioned::Present),
        Err(ClientError::AuthRefused { message, .. }) => message,
        Err(e) => return Err(e.into()),
    };
    // The refused AUTH left the connection as it was: `default`, if that needs no password.
    let refused = |reason: String| AdminUserError::Refused {
        addr: addr.into(),
        user: cred.user.clone(),
        auth: auth.clone(),
        reason,
    };
    if let Some(login) = login {
        c.auth(login)
            .await
            .map_err(|e| refused(format!("the login given to create it: {e}")))?;
    }
    match c.cmd(&setuser_command(cred)).await? {
        Value::Error(e) => return Err(refused(e)),
        Value::Ok(_) => {}
        other => return Err(refused(format!("unexpected reply {other:?}"))),
    }
    if login.is_some() {
        // Kept across a restart only in an ACL file; a server without one refuses ACL SAVE.
        if let Value::Error(e) = c.cmd(&["ACL", "SAVE"]).await? {
            warn!(server = %addr, reason = %e, "the control plane's user is not saved: the server forgets it when it restarts (give it an aclfile)");
        }
    }
    c.auth(cred).await.map_err(|e| refused(e.to_string()))?;
    info!(server = %addr, user = %cred.user, "created the control plane's user on the server");
    Ok(Provisioned::Created)
}

/// A connection to `addr` authenticated as the admin user. A server that lost the user (a
/// restart without an ACL file forgets it) gets it again first.
///
/// # Errors
/// Unreachable, or the user cannot be had (the reason says why).
pub async fn connect(
    addr: &str,
    cred: &Credential,
    timeout: Duration,
) -> Result<RedisClient, AdminUserError> {
    match RedisClient::connect_as(addr, timeout, Some(cred)).await {
        Ok(c) => return Ok(c),
        Err(ClientError::AuthRefused { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    if provision(addr, cred, None, timeout).await? == Provisioned::Created {
        warn!(server = %addr, user = %cred.user, "the server had lost the control plane's user (restarted?): created it again");
    }
    Ok(RedisClient::connect_as(addr, timeout, Some(cred)).await?)
}

/// Points `addr` at `master` (`host:port`): the replica authenticates to it as the admin
/// user (`masteruser`/`masterauth`), so replication survives a password on `default`.
///
/// # Errors
/// Unreachable, or the server refused a command (the reply is in the error).
pub async fn replicate(
    addr: &str,
    master: (&str, &str),
    cred: &Credential,
    timeout: Duration,
) -> Result<(), crate::Error> {
    let mut c = connect(addr, cred, timeout)
        .await
        .map_err(|e| crate::Error::server(addr, e))?;
    let commands: [&[&str]; 2] = [
        &[
            "CONFIG",
            "SET",
            "masteruser",
            &cred.user,
            "masterauth",
            &cred.password,
        ],
        &["REPLICAOF", master.0, master.1],
    ];
    for args in commands {
        let reply = c
            .cmd(args)
            .await
            .map_err(|source| crate::Error::ServerUnreachable {
                addr: addr.into(),
                source,
            })?;
        if let Value::Error(reply) = reply {
            // Never echo the CONFIG SET arguments: they hold the password.
            return Err(crate::Error::ServerRefused {
                addr: addr.into(),
                command: args[0].into(),
                reply,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_gets_full_rights_and_only_its_one_password() {
        let cred = Credential {
            user: ADMIN_USER.into(),
            password: "pw".into(),
        };
        assert_eq!(
            setuser_command(&cred).join(" "),
            "ACL SETUSER tessera-admin reset on skip-sanitize-payload >pw ~* &* +@all"
        );
        let c = new_credential();
        assert_eq!(c.user, ADMIN_USER);
        assert_eq!(c.password.len(), 32);
        assert!(!format!("{c:?}").contains(&c.password));
    }
}
