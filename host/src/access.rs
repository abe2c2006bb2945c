//! Who may call what on a dashboard's API: the three roles and the one table that says which
//! role each route needs. The dashboard checks it against the caller's token (`api::tokens`),
//! the console against its logged-in user before relaying (`console::relay`); both ask the
//! same function about the same path, so they cannot disagree.

use std::fmt;
use std::str::FromStr;

use axum::http::Method;
use serde::{Deserialize, Serialize};

/// What a token (or a console user) may do; each role may do everything the one before it may.
///
/// ```text
/// viewer    reads (GET, HEAD)
/// operator  + migrations, aborts, rebalances, plugins
/// admin     + groups, servers, promotions, slot assignment, proxies, users, tokens
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Viewer,
    Operator,
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    /// The role's name as the API, console.toml and the CLI spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown role {s:?}: viewer, operator or admin"))
    }
}

/// Routes open to anyone: the liveness probe, the Prometheus scrape (gauges only, no bodies,
/// configs or tokens, and cheap: no fan-out) and the static API description.
const OPEN: [&str; 3] = ["/health", "/metrics", "/api/openapi.json"];

/// The role a call of `method` on the dashboard's `path` (still percent-encoded, without the
/// query) needs; `None` for the open routes.
///
/// Reads need a viewer, except the token list (admin). A mutation needs an operator for
/// migrations, rebalances and plugins, and an admin for everything else, including routes
/// that do not exist: an unknown mutation is refused rather than guessed at.
pub fn required(method: &Method, path: &str) -> Option<Role> {
    if OPEN.contains(&path) {
        return None;
    }
    let tokens = path == "/api/tokens" || path.starts_with("/api/tokens/");
    if *method == Method::GET || *method == Method::HEAD {
        // The command log shows clients' keys and values, not just counts.
        if path == "/api/commandlog" {
            return Some(Role::Operator);
        }
        return Some(if tokens { Role::Admin } else { Role::Viewer });
    }
    let operator = matches!(
        path,
        "/api/migrations"
            | "/api/migrations/abort"
            | "/api/migrations/throttle"
            | "/api/rebalance"
            | "/api/plugins"
    ) || path.starts_with("/api/plugins/");
    Some(if operator {
        Role::Operator
    } else {
        Role::Admin
    })
}

/// The text of a 403: who is refused, what they have, what the call needs.
pub fn refusal(who: &str, has: Role, method: &Method, path: &str, needs: Role) -> String {
    format!("{who} has the role {has}; {method} {path} needs {needs} or above")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_parse_case_insensitively() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
        assert_eq!("Operator".parse::<Role>(), Ok(Role::Operator));
        assert!("root".parse::<Role>().is_err());
        assert_eq!(serde_json::to_string(&Role::Admin).unwrap(), "\"admin\"");
    }

    #[test]
    fn each_route_needs_the_role_the_docs_give() {
        let (get, post, put, del) = (Method::GET, Method::POST, Method::PUT, Method::DELETE);
        assert_eq!(required(&get, "/health"), None);
        assert_eq!(required(&get, "/metrics"), None);
        for path in ["/api/overview", "/api/stats", "/api/audit", "/api/plugins"] {
            assert_eq!(required(&get, path), Some(Role::Viewer), "{path}");
        }
        assert_eq!(required(&get, "/api/tokens"), Some(Role::Admin));
        assert_eq!(required(&get, "/api/commandlog"), Some(Role::Operator));
        for (m, path) in [
            (&post, "/api/migrations"),
            (&post, "/api/migrations/abort"),
            (&put, "/api/migrations/throttle"),
            (&post, "/api/rebalance"),
            (&put, "/api/plugins/filter/module"),
            (&post, "/api/plugins/filter/enable"),
            (&del, "/api/plugins/filter"),
            (&put, "/api/plugins/order"),
        ] {
            assert_eq!(required(m, path), Some(Role::Operator), "{m} {path}");
        }
        for (m, path) in [
            (&post, "/api/groups"),
            (&del, "/api/groups/1"),
            (&post, "/api/groups/1/servers"),
            (&post, "/api/groups/1/promote"),
            (&post, "/api/slots/assign"),
            (&post, "/api/proxies/abc/offline"),
            (&put, "/api/users/alice"),
            (&post, "/api/tokens"),
            (&del, "/api/tokens/ci"),
            (&post, "/api/no-such-route"),
            // Not a plugin route: the prefix is the whole segment.
            (&post, "/api/pluginsx"),
            (&post, "/api/migrations/abort/x"),
        ] {
            assert_eq!(required(m, path), Some(Role::Admin), "{m} {path}");
        }
    }
}
