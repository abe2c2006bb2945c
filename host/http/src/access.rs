//! Who may call what on a dashboard's API: the three roles and the one table that says which
//! role each route needs. The dashboard checks it against the caller's token (`api::tokens`),
//! the console against its logged-in user before relaying (`console::relay`); both ask the
//! same function about the same path, so they cannot disagree.

use axum::http::Method;
pub use tessera_wire::access::Role;

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
