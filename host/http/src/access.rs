//! Who may call what on a dashboard's API: the three roles and the one table that says which
//! role each route needs. The dashboard checks it against the caller's token (`api::tokens`),
//! the console against its logged-in user before relaying (`console::relay`); both ask the
//! same function about the same path, so they cannot disagree.

use axum::http::Method;
pub use tessera_wire::access::Role;

/// What a call of one route needs: nothing (open) or a role.
type Need = Option<Role>;
const OPEN: Need = None;
const VIEWER: Need = Some(Role::Viewer);
const OPERATOR: Need = Some(Role::Operator);
const ADMIN: Need = Some(Role::Admin);

/// One route of the dashboard's API as its router spells it (`{x}` matches one segment), the
/// role a read (GET, HEAD) needs and the role a change (any other method) needs.
struct Rule {
    path: &'static str,
    read: Need,
    change: Need,
}

const fn rule(path: &'static str, read: Need, change: Need) -> Rule {
    Rule { path, read, change }
}

/// Every route of the dashboard's API, the only place that says who may call it.
///
/// Reads need a viewer, except those that show clients' data (key names, values, commands or
/// replies), which need an operator as the command log always did, and the token list
/// (admin). Changes need an operator for migrations, rebalances and plugins, an admin for
/// everything else. The open reads are the liveness probe, the Prometheus scrape (gauges
/// only, no bodies, configs or tokens, and cheap: no fan-out) and the static API description.
/// A route not listed here, read or change, needs an admin: refused rather than guessed at.
/// `docs/api.md` ("Tokens and roles") prints this table; the OpenAPI document's
/// `x-tessera-role` of each operation must agree with it (a unit test checks).
const RULES: &[Rule] = &[
    rule("/health", OPEN, ADMIN),
    rule("/metrics", OPEN, ADMIN),
    rule("/api/openapi.json", OPEN, ADMIN),
    rule("/api/whoami", VIEWER, ADMIN),
    rule("/api/overview", VIEWER, ADMIN),
    rule("/api/groups", VIEWER, ADMIN),
    rule("/api/groups/{id}", VIEWER, ADMIN),
    rule("/api/groups/{id}/servers", VIEWER, ADMIN),
    rule("/api/groups/{id}/servers/{addr}", VIEWER, ADMIN),
    rule("/api/groups/{id}/promote", VIEWER, ADMIN),
    rule("/api/failover", VIEWER, ADMIN),
    rule("/api/slots", VIEWER, ADMIN),
    rule("/api/slots/assign", VIEWER, ADMIN),
    // Per-slot rates and key counts; no key names.
    rule("/api/slots/stats", VIEWER, ADMIN),
    rule("/api/proxies", VIEWER, ADMIN),
    rule("/api/proxies/{token}", VIEWER, ADMIN),
    rule("/api/proxies/{token}/online", VIEWER, ADMIN),
    rule("/api/proxies/{token}/offline", VIEWER, ADMIN),
    // Per-command counts; no arguments.
    rule("/api/stats", VIEWER, ADMIN),
    // Who changed what, with the bodies of changes (passwords redacted); no client data.
    rule("/api/audit", VIEWER, ADMIN),
    rule("/api/read-policy", VIEWER, ADMIN),
    // Metrics sampled each second (rates, latency, memory, lag, plugins' series); no keys.
    rule("/api/history", VIEWER, ADMIN),
    rule("/api/history/series", VIEWER, ADMIN),
    // What happened to the cluster, in sentences naming proxies, groups and servers.
    rule("/api/events", VIEWER, ADMIN),
    // Routes and their users, never a password.
    rule("/api/routes", VIEWER, ADMIN),
    // Users, their command classes and key prefixes, never a hash.
    rule("/api/users", VIEWER, ADMIN),
    rule("/api/users/{name}", VIEWER, ADMIN),
    rule("/api/migrations", VIEWER, OPERATOR),
    rule("/api/migrations/abort", VIEWER, OPERATOR),
    rule("/api/migrations/history", VIEWER, OPERATOR),
    rule("/api/migrations/throttle", VIEWER, OPERATOR),
    rule("/api/rebalance", VIEWER, OPERATOR),
    // Backup jobs: directory names, sizes, sources; a backup writes under --backup-root only.
    rule("/api/backups", VIEWER, OPERATOR),
    // The catalog and plugins' configs (the operator's settings) and their metric samples
    // (the same series every proxy's open /metrics shows).
    rule("/api/plugins", VIEWER, OPERATOR),
    rule("/api/plugins/order", VIEWER, OPERATOR),
    rule("/api/plugins/{name}", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/module", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/config", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/enable", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/disable", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/metrics", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/canary", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/canary/module", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/canary/promote", VIEWER, OPERATOR),
    rule("/api/plugins/{name}/canary/rollback", VIEWER, OPERATOR),
    // Clients' data: the slow and command logs hold commands with their keys and values; hot
    // keys are key names; the mirror's samples hold commands and both sides' replies.
    rule("/api/commandlog", OPERATOR, ADMIN),
    rule("/api/hotkeys", OPERATOR, ADMIN),
    rule("/api/mirror", OPERATOR, ADMIN),
    rule("/api/tokens", ADMIN, ADMIN),
    rule("/api/tokens/{name}", ADMIN, ADMIN),
];

/// Whether `path` (no query) is spelled by `pattern`, segment by segment.
fn matches(pattern: &str, path: &str) -> bool {
    let mut want = pattern.split('/');
    let mut got = path.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w.starts_with('{') && w.ends_with('}') => {
                if g.is_empty() {
                    return false;
                }
            }
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

/// The role a call of `method` on the dashboard's `path` (still percent-encoded, without the
/// query) needs; `None` for the open routes. From `RULES`; admin for a route it does not
/// list.
pub fn required(method: &Method, path: &str) -> Option<Role> {
    let read = *method == Method::GET || *method == Method::HEAD;
    match RULES.iter().find(|r| matches(r.path, path)) {
        Some(r) if read => r.read,
        Some(r) => r.change,
        None => ADMIN,
    }
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
        assert_eq!(required(&Method::HEAD, "/api/openapi.json"), None);
        for path in [
            "/api/overview",
            "/api/stats",
            "/api/audit",
            "/api/plugins",
            "/api/plugins/filter/metrics",
            "/api/slots/stats",
            "/api/users",
            "/api/history",
            "/api/history/series",
            "/api/events",
        ] {
            assert_eq!(required(&get, path), Some(Role::Viewer), "{path}");
        }
        assert_eq!(required(&get, "/api/tokens"), Some(Role::Admin));
        // Reads of clients' data (issue 25: a viewer read the mirror's samples).
        for path in ["/api/commandlog", "/api/hotkeys", "/api/mirror"] {
            assert_eq!(required(&get, path), Some(Role::Operator), "{path}");
            assert_eq!(
                required(&Method::HEAD, path),
                Some(Role::Operator),
                "{path}"
            );
        }
        for (m, path) in [
            (&post, "/api/migrations"),
            (&post, "/api/migrations/abort"),
            (&put, "/api/migrations/throttle"),
            (&post, "/api/rebalance"),
            (&put, "/api/plugins/filter/module"),
            (&post, "/api/plugins/filter/enable"),
            (&del, "/api/plugins/filter"),
            (&put, "/api/plugins/order"),
            (&post, "/api/plugins/filter/canary"),
            (&put, "/api/plugins/filter/canary/module"),
            (&post, "/api/plugins/filter/canary/promote"),
            (&post, "/api/plugins/filter/canary/rollback"),
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
            (&put, "/api/mirror"),
            (&post, "/api/no-such-route"),
            (&post, "/health"),
            // Not a plugin route: the prefix is the whole segment.
            (&post, "/api/pluginsx"),
            (&post, "/api/migrations/abort/x"),
            // Unknown reads, too: refused rather than guessed at.
            (&get, "/api/no-such-route"),
            (&get, "/api/plugins/filter/metrics/x"),
            (&get, "/api/mirror/"),
            (&get, "/api/groups//servers"),
        ] {
            assert_eq!(required(m, path), Some(Role::Admin), "{m} {path}");
        }
    }

    /// The dashboard's OpenAPI document lists the same routes as [`RULES`], and each
    /// operation's `x-tessera-role` is the one `required` gives (absent for the open routes).
    /// The document is derived from the dashboard's handlers (`tessera openapi`); this reads
    /// the committed copy, which `the_committed_documents_are_the_derived_ones` keeps equal to
    /// it (this crate cannot derive it: the dashboard is above it).
    #[test]
    fn the_openapi_roles_are_the_table_route_by_route() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/openapi.json"))
                .expect("docs/openapi.json parses");
        let paths = doc["paths"].as_object().expect("paths");
        let mut documented: Vec<&str> = paths.keys().map(String::as_str).collect();
        let mut ruled: Vec<&str> = RULES.iter().map(|r| r.path).collect();
        documented.sort_unstable();
        ruled.sort_unstable();
        assert_eq!(
            documented, ruled,
            "openapi.json and RULES list different routes"
        );
        let mut operations = 0;
        for (path, ops) in paths {
            for (method, op) in ops.as_object().expect("operations") {
                let Ok(m) = method.to_ascii_uppercase().parse::<Method>() else {
                    continue;
                };
                if !matches!(m, Method::GET | Method::PUT | Method::POST | Method::DELETE) {
                    continue;
                }
                operations += 1;
                let documented = op.get("x-tessera-role").and_then(|r| r.as_str());
                assert_eq!(
                    documented,
                    required(&m, path).map(Role::as_str),
                    "{method} {path}"
                );
            }
        }
        assert!(operations > RULES.len(), "{operations} operations");
    }
}
