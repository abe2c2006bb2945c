//! Which proxies the dashboard knows and how each is: up, fenced, lost or draining. A proxy
//! is remembered from its first registration (`proxy-known/<token>` in the store, so a
//! successor dashboard remembers it too) until it comes back under a new registration at the
//! same address, it stops cleanly (it deletes its own entry as it leaves the store), or an
//! operator removes it. So a frozen, crashed or cut-off proxy, whose
//! registration lapses after its lease, stays listed as lost instead of vanishing (the
//! clusters list used to read "healthy, 1/1 proxies" while clients of a frozen proxy hung).

use std::collections::BTreeMap;

use serde::Serialize;
use tracing::{info, warn};

use super::Dashboard;
use crate::Error;
use tessera_store::Store;
use tessera_store::model::{self, Paths, ProxyModel};
use tessera_wire::cluster::ProxyHealthState;

/// What the last check of a proxy found (`health`'s probe).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProxyHealth {
    pub up: bool,
    /// It answered, refusing commands: its registration may have lapsed.
    pub fenced: bool,
    /// It answered, shutting down.
    pub draining: bool,
    pub epoch: Option<u64>,
    /// Version of the users table in force there.
    #[serde(skip)]
    pub users_version: Option<u64>,
    pub error: Option<String>,
}

fn key(paths: &Paths, token: &str) -> String {
    paths.proxy_known(token)
}

/// The proxies a predecessor remembered (at start).
///
/// # Errors
/// The store fails.
pub(super) async fn load_known(
    store: &dyn Store,
    paths: &Paths,
) -> Result<BTreeMap<String, ProxyModel>, tessera_store::StoreError> {
    let mut out = BTreeMap::new();
    for (k, v) in store
        .list(&format!("{}proxy-known/", paths.cluster_prefix()))
        .await?
    {
        match serde_json::from_slice::<ProxyModel>(&v.value) {
            Ok(p) => {
                out.insert(p.token.clone(), p);
            }
            Err(e) => warn!(key = %k, error = %e, "a remembered proxy is unreadable; ignored"),
        }
    }
    Ok(out)
}

/// How a proxy is: `registered` now, and what its last health check found (`None`: never
/// checked since it registered).
pub(crate) fn health_of(registered: bool, h: Option<&ProxyHealth>) -> ProxyHealthState {
    match h {
        _ if !registered => ProxyHealthState::Lost,
        None => ProxyHealthState::Up,
        Some(h) if !h.up => ProxyHealthState::Lost,
        Some(h) if h.draining => ProxyHealthState::Draining,
        Some(h) if h.fenced => ProxyHealthState::Fenced,
        Some(_) => ProxyHealthState::Up,
    }
}

impl Dashboard {
    /// Remembers proxies seen registered for the first time, and forgets a lost one whose
    /// address a new registration took (the same proxy, restarted). Called with every
    /// health round's list of registered proxies.
    pub(super) async fn remember_proxies(&self, registered: &[ProxyModel]) {
        let (new, superseded): (Vec<ProxyModel>, Vec<String>) = {
            let st = self.state.lock().expect("state lock poisoned");
            let new = registered
                .iter()
                .filter(|p| !st.known.contains_key(&p.token))
                .cloned()
                .collect();
            let superseded = st
                .known
                .values()
                .filter(|k| !registered.iter().any(|p| p.token == k.token))
                .filter(|k| registered.iter().any(|p| p.addr == k.addr))
                .map(|k| k.token.clone())
                .collect();
            (new, superseded)
        };
        for p in new {
            match model::write(&*self.store, &key(&self.paths, &p.token), &p).await {
                Ok(_) => {
                    self.state
                        .lock()
                        .expect("state lock poisoned")
                        .known
                        .insert(p.token.clone(), p);
                }
                Err(e) => warn!(token = %p.token, error = %e, "could not remember a proxy"),
            }
        }
        for token in superseded {
            if self.forget_proxy(&token).await.is_ok() {
                info!(%token, "a lost proxy came back under a new registration at its address");
            }
        }
        // A proxy that stopped cleanly deleted its own entry as it left: not lost, gone.
        let unregistered: Vec<String> = {
            let st = self.state.lock().expect("state lock poisoned");
            st.known
                .keys()
                .filter(|t| !registered.iter().any(|p| &p.token == *t))
                .cloned()
                .collect()
        };
        for token in unregistered {
            if let Ok(None) = self.store.get(&key(&self.paths, &token)).await
                && self.forget_proxy(&token).await.is_ok()
            {
                info!(%token, "a proxy stopped cleanly and left the list");
            }
        }
    }

    async fn forget_proxy(&self, token: &str) -> Result<(), Error> {
        self.store.delete(&key(&self.paths, token)).await?;
        self.store.delete(&self.paths.proxy_offline(token)).await?;
        // Left behind by a proxy gone in the middle of draining.
        self.store.delete(&self.paths.proxy_draining(token)).await?;
        let mut st = self.state.lock().expect("state lock poisoned");
        st.known.remove(token);
        st.offline.remove(token);
        Ok(())
    }

    /// Removes a lost proxy from the list (`DELETE /api/proxies/{token}`).
    ///
    /// # Errors
    /// 404 no proxy known by that token; 409 it is registered and answers (stop it first);
    /// the store fails.
    pub async fn remove_proxy(&self, token: &str) -> Result<ProxyModel, Error> {
        let registered = self.registered_proxies().await?;
        let (known, health) = {
            let st = self.state.lock().expect("state lock poisoned");
            let reg = registered.iter().any(|p| p.token == token);
            (
                st.known
                    .get(token)
                    .cloned()
                    .or_else(|| registered.iter().find(|p| p.token == token).cloned()),
                health_of(reg, st.proxies.get(token)),
            )
        };
        let Some(p) = known else {
            return Err(Error::not_found(format!(
                "no proxy is known by token {token}"
            )));
        };
        if health != ProxyHealthState::Lost {
            return Err(Error::conflict(format!(
                "proxy {} is registered and answers its health checks ({}): only a lost \
                 proxy is removed; stop it first",
                p.addr,
                match health {
                    ProxyHealthState::Fenced => "fenced",
                    ProxyHealthState::Draining => "draining",
                    _ => "up",
                }
            )));
        }
        self.forget_proxy(token).await?;
        info!(%token, addr = %p.addr, "lost proxy removed");
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_is_lost_without_a_registration_or_an_answer() {
        let ok = ProxyHealth {
            up: true,
            ..ProxyHealth::default()
        };
        assert_eq!(health_of(true, Some(&ok)), ProxyHealthState::Up);
        assert_eq!(health_of(false, Some(&ok)), ProxyHealthState::Lost);
        assert_eq!(
            health_of(true, Some(&ProxyHealth::default())),
            ProxyHealthState::Lost
        );
        let fenced = ProxyHealth {
            fenced: true,
            ..ok.clone()
        };
        assert_eq!(health_of(true, Some(&fenced)), ProxyHealthState::Fenced);
        let draining = ProxyHealth {
            draining: true,
            ..fenced
        };
        assert_eq!(health_of(true, Some(&draining)), ProxyHealthState::Draining);
        assert_eq!(health_of(true, None), ProxyHealthState::Up);
    }
}
