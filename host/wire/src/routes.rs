//! Routing by key prefix (docs/prefix-routes.md): a route as the topology carries it to the
//! proxies, where one proxy forwards each prefix now (`GET /api/proxy/routes`), and the
//! dashboard's `GET`/`PUT /api/routes`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::credential::Credential;

/// One prefix route as the dashboard pushes it, in the topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PrefixRoute {
    /// Keys starting with these bytes go to `cluster`.
    pub prefix: String,
    /// A cluster in the same store.
    pub cluster: String,
    /// The user this cluster's proxies log in as at the other cluster's proxies (none: they
    /// send no AUTH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<Credential>,
}

impl PrefixRoute {
    /// A route without a credential.
    pub fn new(prefix: &str, cluster: &str) -> Self {
        Self {
            prefix: prefix.into(),
            cluster: cluster.into(),
            credential: None,
        }
    }
}

/// Where one prefix goes from this proxy now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouteStatus {
    pub prefix: String,
    pub cluster: String,
    /// The other cluster's proxy this one forwards to; `None` when none answers.
    #[schema(required = true)]
    pub target: Option<String>,
    /// Why there is no target (or why the last one was left).
    #[schema(required = true)]
    pub error: Option<String>,
}

/// A new list of routes, replacing the whole list (`PUT /api/routes`).
///
/// ```text
/// {"routes": [{"prefix": "user:", "cluster": "b", "user": "front", "password": "…"}]}
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoutesChange {
    pub routes: Vec<RouteChange>,
}

/// One route of a change. A `user` without a `password` keeps the password stored for the
/// same prefix and user (so a list read back can be sent again without knowing passwords).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RouteChange {
    pub prefix: String,
    pub cluster: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// The routes (never a password), the clusters a route may name, and where each proxy
/// routes each prefix now (`GET /api/routes`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RoutesView {
    pub routes: Vec<RouteView>,
    /// The other clusters of the store.
    pub clusters: Vec<String>,
    pub proxies: Vec<ProxyRoutes>,
}

/// One route as the API shows it: the user it logs in as, never the password.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RouteView {
    pub prefix: String,
    pub cluster: String,
    #[schema(required = true)]
    pub user: Option<String>,
}

/// One proxy's answer: what it routes where, or why it did not answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProxyRoutes {
    pub addr: String,
    #[schema(required = true)]
    pub error: Option<String>,
    pub routes: Vec<RouteStatus>,
}

/// A route as the overview names it: the prefix and its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RouteRef {
    pub prefix: String,
    pub cluster: String,
}
