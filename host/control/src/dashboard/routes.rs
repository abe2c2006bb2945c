//! The cluster's key prefix routes (docs/prefix-routes.md): one document in the store, a
//! copy in the dashboard, pushed to every proxy with the topology (a change is a topology
//! commit, so when the call returns every online proxy routes the new way). Where each proxy
//! forwards a prefix now is its own finding; the view gathers it from them.

use std::time::Duration;

use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Dashboard;
use crate::Error;
use tessera_model::redis_client::Credential;
use tessera_model::router::prefix::{PrefixRoute, RouteStatus, check_bounds};
use tessera_store::Store;
use tessera_store::model::{self, Paths};
pub use tessera_wire::routes::{ProxyRoutes, RouteChange, RouteView, RoutesChange, RoutesView};

/// How long a proxy has to say where it routes.
const PROXY_TIMEOUT: Duration = Duration::from_secs(2);

/// The stored document.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RoutesDoc {
    pub routes: Vec<PrefixRoute>,
}

/// The stored routes; an absent document is none. An unreadable one is none too, loudly: a
/// route sends keys elsewhere, so a damaged document must not invent one.
pub async fn load(store: &dyn Store, paths: &Paths) -> Vec<PrefixRoute> {
    match model::read::<RoutesDoc>(store, &paths.prefix_routes()).await {
        Ok(doc) => doc.map(|(d, _)| d.routes).unwrap_or_default(),
        Err(e) => {
            warn!(error = %e, "the prefix routes document is unreadable: no key prefix is routed to another cluster until it is set again");
            Vec::new()
        }
    }
}

/// Everything a route list must be before it is stored: within every table's bounds, every
/// cluster a valid name other than `own`, and no prefix that takes Tessera's reserved
/// namespace along.
///
/// # Errors
/// Why not, for a 400.
pub fn validate(routes: &[PrefixRoute], own: &str) -> Result<(), Error> {
    check_bounds(routes).map_err(Error::Invalid)?;
    for r in routes {
        if !model::valid_cluster_name(&r.cluster) {
            return Err(Error::Invalid(format!(
                "prefix {:?}: {:?} is not a cluster name (letters, digits, '-' and '_')",
                r.prefix, r.cluster
            )));
        }
        if r.cluster == own {
            return Err(Error::Invalid(format!(
                "prefix {:?} names this cluster ({own}); a route leads to another cluster",
                r.prefix
            )));
        }
        if tessera_model::migration::INTERNAL_PREFIX.starts_with(r.prefix.as_bytes()) {
            return Err(Error::Invalid(format!(
                "prefix {:?} would route Tessera's reserved namespace '__tessera:' too",
                r.prefix
            )));
        }
        if let Some(c) = &r.credential
            && (c.user.is_empty() || c.user.len() > 128 || c.password.len() > 512)
        {
            return Err(Error::Invalid(format!(
                "prefix {:?}: a route's user needs a name of 1–128 bytes and a password of at most 512",
                r.prefix
            )));
        }
    }
    Ok(())
}

impl Dashboard {
    pub fn prefix_routes(&self) -> Vec<PrefixRoute> {
        self.prefix_routes
            .lock()
            .expect("routes lock poisoned")
            .clone()
    }

    /// Replaces the routes: checked, persisted, then pushed to every proxy with the next
    /// epoch.
    ///
    /// # Errors
    /// 400 for a list that cannot be used (a cluster not in this store among them); the
    /// store's errors; a push not acknowledged by all.
    pub async fn set_prefix_routes(&self, change: RoutesChange) -> Result<RoutesView, Error> {
        let mut epoch = self.ops.lock().await;
        let before = self.prefix_routes();
        let mut routes = Vec::with_capacity(change.routes.len());
        for r in change.routes {
            let credential = match (r.user, r.password) {
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(Error::invalid(format!(
                        "prefix {:?}: a password goes with a user",
                        r.prefix
                    )));
                }
                (Some(user), Some(password)) => Some(Credential { user, password }),
                (Some(user), None) => {
                    let kept = before.iter().find_map(|b| {
                        b.credential
                            .as_ref()
                            .filter(|c| b.prefix == r.prefix && c.user == user)
                    });
                    match kept {
                        Some(c) => Some(c.clone()),
                        None => {
                            return Err(Error::invalid(format!(
                                "prefix {:?}: user {user:?} needs a password (none is stored for this prefix and user)",
                                r.prefix
                            )));
                        }
                    }
                }
            };
            routes.push(PrefixRoute {
                prefix: r.prefix,
                cluster: r.cluster,
                credential,
            });
        }
        validate(&routes, &self.cluster)?;
        let clusters = self.store.children(&format!("{}/", model::ROOT)).await?;
        if let Some(r) = routes.iter().find(|r| !clusters.contains(&r.cluster)) {
            return Err(Error::invalid(format!(
                "prefix {:?}: cluster {} is not in this store ({})",
                r.prefix,
                r.cluster,
                self.store.describe()
            )));
        }
        model::write(
            &*self.store,
            &self.paths.prefix_routes(),
            &RoutesDoc {
                routes: routes.clone(),
            },
        )
        .await?;
        let summary: Vec<String> = routes
            .iter()
            .map(|r| format!("{} → {}", r.prefix, r.cluster))
            .collect();
        *self.prefix_routes.lock().expect("routes lock poisoned") = routes;
        info!(routes = ?summary, "prefix routes changed");
        self.commit(&mut epoch).await?;
        drop(epoch);
        self.prefix_routes_view().await
    }

    /// The routes, the clusters they may name, and each proxy's targets.
    ///
    /// # Errors
    /// The store cannot list the clusters or the proxies.
    pub async fn prefix_routes_view(&self) -> Result<RoutesView, Error> {
        let routes = self
            .prefix_routes()
            .into_iter()
            .map(|r| RouteView {
                prefix: r.prefix,
                cluster: r.cluster,
                user: r.credential.map(|c| c.user),
            })
            .collect();
        let mut clusters = self.store.children(&format!("{}/", model::ROOT)).await?;
        clusters.retain(|c| *c != self.cluster);
        let registered = self.registered_proxies().await?;
        let answers = join_all(registered.iter().map(|p| {
            let call = self.proxy_call(reqwest::Method::GET, &p.admin_addr, "/api/proxy/routes");
            async move {
                let r = call
                    .timeout(PROXY_TIMEOUT)
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                let r = r.error_for_status().map_err(|e| e.to_string())?;
                r.json::<Vec<RouteStatus>>()
                    .await
                    .map_err(|e| e.to_string())
            }
        }))
        .await;
        let proxies = registered
            .iter()
            .zip(answers)
            .map(|(p, a)| match a {
                Ok(routes) => ProxyRoutes {
                    addr: p.addr.clone(),
                    error: None,
                    routes,
                },
                Err(e) => ProxyRoutes {
                    addr: p.addr.clone(),
                    error: Some(e),
                    routes: Vec::new(),
                },
            })
            .collect();
        Ok(RoutesView {
            routes,
            clusters,
            proxies,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(prefix: &str, cluster: &str) -> PrefixRoute {
        PrefixRoute::new(prefix, cluster)
    }

    /// Beyond `check_bounds` (tested with it, and run first here).
    #[test]
    fn a_route_list_is_checked_before_it_is_stored() {
        assert!(validate(&[route("user:", "b"), route("order:", "c")], "a").is_ok());
        let bad = [
            (vec![route("", "b")], "non-empty"),
            (vec![route("u", "a")], "this cluster"),
            (vec![route("__", "b")], "reserved"),
            (vec![route("x", "no/such")], "not a cluster name"),
        ];
        for (routes, why) in bad {
            let e = validate(&routes, "a").unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        let mut with_user = route("u", "b");
        with_user.credential = Some(Credential {
            user: String::new(),
            password: "p".into(),
        });
        assert!(
            validate(&[with_user], "a")
                .unwrap_err()
                .to_string()
                .contains("user")
        );
    }
}
