//! The audit log's sentences: a recorded call as an operator reads it — "ops-token moved
//! slots 400-511 to group 2" — from who made it, its method, path and body, and, for a
//! refused call, its status and the API's reason. A route not named here reads as
//! "<who> called <METHOD> <path>". The body is the caller's: every field is read as
//! optional, and anything unexpected falls back to the plain form.

use serde_json::Value;

/// The sentence of one call. `body` is its JSON body, if it had one that parsed.
pub(super) fn sentence(
    who: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    status: u16,
    reason: Option<&str>,
) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let segs: Vec<&str> = path
        .trim_start_matches("/api/")
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let num = |k: &str| body.and_then(|b| b.get(k)).and_then(Value::as_u64);
    let text = |k: &str| body.and_then(|b| b.get(k)).and_then(Value::as_str);
    let slots = |from: Option<u64>, to: Option<u64>| match (from, to) {
        (Some(f), Some(t)) if f == t => format!("slot {f}"),
        (Some(f), Some(t)) => format!("slots {f}-{t}"),
        _ => "slots".to_owned(),
    };
    let what: Option<String> = match (method, segs.as_slice()) {
        ("POST", ["migrations"]) => Some(format!(
            "move {} to group {}{}",
            slots(num("from"), num("to")),
            num("group").map_or("?".into(), |g| g.to_string()),
            num("max_keys_per_sec").map_or(String::new(), |k| format!(" at most {k} keys/s")),
        )),
        ("POST", ["migrations", "abort"]) => Some(
            match body.and_then(|b| b.get("slots")).and_then(Value::as_array) {
                Some(s) => format!("abort the migration of {} slot(s)", s.len()),
                None => "abort every migration".to_owned(),
            },
        ),
        ("PUT", ["migrations", "throttle"]) => Some(match num("max_keys_per_sec") {
            Some(k) => format!("set the migration's speed cap to {k} keys/s"),
            None if body.and_then(|b| b.get("max_mb_per_sec")).is_some() => {
                "set the migration's speed cap".to_owned()
            }
            None => "lift the migration's speed cap".to_owned(),
        }),
        ("POST", ["rebalance"]) => Some(
            if body.and_then(|b| b.get("dry_run")).and_then(Value::as_bool) == Some(true) {
                "plan a rebalance".to_owned()
            } else {
                format!(
                    "rebalance the slots{}",
                    text("by").map_or(String::new(), |b| format!(" by {b}"))
                )
            },
        ),
        ("POST", ["slots", "assign"]) => Some(format!(
            "assign {} to group {}",
            slots(num("from"), num("to")),
            num("group").map_or("?".into(), |g| g.to_string())
        )),
        ("POST", ["groups"]) => Some(match num("id") {
            Some(id) => format!("create group {id}"),
            None => "create a group".to_owned(),
        }),
        ("DELETE", ["groups", g]) => Some(format!("delete group {g}")),
        ("POST", ["groups", g, "servers"]) => Some(format!(
            "add server {} to group {g}",
            text("addr").unwrap_or("?")
        )),
        ("DELETE", ["groups", g, "servers", addr]) => {
            Some(format!("remove server {addr} from group {g}"))
        }
        ("POST", ["groups", g, "promote"]) => Some(format!(
            "promote {} to master of group {g}",
            text("addr").unwrap_or("a replica")
        )),
        ("PUT", ["read-policy"]) => Some("change the read policy".to_owned()),
        ("PUT", ["failover"]) => Some("change the failover settings".to_owned()),
        ("POST", ["tokens"]) => Some(format!(
            "create token {}{}",
            text("name").unwrap_or("?"),
            text("role").map_or(String::new(), |r| format!(" ({r})"))
        )),
        ("DELETE", ["tokens", name]) => Some(format!("revoke token {name}")),
        ("PUT", ["users", name]) => Some(format!("set user {name}")),
        ("DELETE", ["users", name]) => Some(format!("delete user {name}")),
        ("DELETE", ["proxies", token]) => Some(format!("remove proxy {token}")),
        ("POST", ["proxies", token, "online"]) => Some(format!("put proxy {token} online")),
        ("POST", ["proxies", token, "offline"]) => Some(format!("take proxy {token} offline")),
        ("POST" | "PUT", ["plugins", name, "config"]) => {
            Some(format!("change plugin {name}'s config"))
        }
        ("POST", ["plugins", name, "enable"]) => Some(format!("enable plugin {name}")),
        ("POST", ["plugins", name, "disable"]) => Some(format!("disable plugin {name}")),
        ("DELETE", ["plugins", name]) => Some(format!("remove plugin {name}")),
        ("POST", ["plugins", name, "canary"]) => Some(format!(
            "start a canary of plugin {name}{}",
            num("percent").map_or(String::new(), |p| format!(" on {p} % of proxies"))
        )),
        ("PUT", ["plugins", name, "canary", "module"]) => {
            Some(format!("upload a canary module of plugin {name}"))
        }
        ("POST", ["plugins", name, "canary", "promote"]) => {
            Some(format!("promote plugin {name}'s canary"))
        }
        ("POST", ["plugins", name, "canary", "rollback"]) => {
            Some(format!("roll back plugin {name}'s canary"))
        }
        _ => None,
    };
    let done = status < 400;
    let mut out = match what {
        Some(w) if done => format!("{who} {}", past(&w)),
        Some(w) => format!("{who} tried to {w}"),
        None => format!("{who} called {method} {path}"),
    };
    if !done {
        out.push_str(&format!(": refused ({status})"));
        if let Some(r) = reason.filter(|r| !r.is_empty()) {
            out.push_str(&format!(", {r}"));
        }
    }
    out
}

/// "move slots 1-2 to group 3" → "moved slots 1-2 to group 3": the first word to its past.
fn past(what: &str) -> String {
    let (verb, rest) = what.split_once(' ').unwrap_or((what, ""));
    let done = match verb {
        "set" => "set".to_owned(),
        "take" => "took".to_owned(),
        "put" => "put".to_owned(),
        "plan" => "planned".to_owned(),
        v if v.ends_with('e') => format!("{v}d"),
        v => format!("{v}ed"),
    };
    if rest.is_empty() {
        done
    } else {
        format!("{done} {rest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_changes_read_as_sentences_with_who_made_them() {
        let b = json!({"from": 400, "to": 511, "group": 2});
        assert_eq!(
            sentence("ops-token", "POST", "/api/migrations", Some(&b), 200, None),
            "ops-token moved slots 400-511 to group 2"
        );
        assert_eq!(
            sentence("console:ada", "DELETE", "/api/groups/3", None, 200, None),
            "console:ada deleted group 3"
        );
        let cap = json!({"max_keys_per_sec": 300});
        assert_eq!(
            sentence(
                "t",
                "PUT",
                "/api/migrations/throttle",
                Some(&cap),
                200,
                None
            ),
            "t set the migration's speed cap to 300 keys/s"
        );
        assert_eq!(
            sentence("t", "POST", "/api/migrations/abort", None, 200, None),
            "t aborted every migration"
        );
        assert_eq!(
            sentence("t", "POST", "/api/proxies/p1/offline", None, 200, None),
            "t took proxy p1 offline"
        );
        assert_eq!(
            sentence(
                "t",
                "POST",
                "/api/plugins/f/canary",
                Some(&json!({"percent": 30})),
                200,
                None
            ),
            "t started a canary of plugin f on 30 % of proxies"
        );
        assert_eq!(
            sentence(
                "t",
                "POST",
                "/api/plugins/f/canary/rollback",
                None,
                200,
                None
            ),
            "t rolled back plugin f's canary"
        );
        assert_eq!(
            sentence(
                "t",
                "POST",
                "/api/plugins/f/canary/promote",
                None,
                409,
                Some("no canary")
            ),
            "t tried to promote plugin f's canary: refused (409), no canary"
        );
        let dry = json!({"dry_run": true});
        assert_eq!(
            sentence("t", "POST", "/api/rebalance", Some(&dry), 200, None),
            "t planned a rebalance"
        );
    }

    #[test]
    fn refusals_say_so_with_their_reason_and_unknown_calls_stay_plain() {
        let b = json!({"from": 1, "to": 1, "group": 2});
        assert_eq!(
            sentence(
                "ops",
                "POST",
                "/api/migrations",
                Some(&b),
                409,
                Some("nothing to move")
            ),
            "ops tried to move slot 1 to group 2: refused (409), nothing to move"
        );
        assert_eq!(
            sentence("ops", "PATCH", "/api/odd?x=1", None, 404, None),
            "ops called PATCH /api/odd: refused (404)"
        );
        // A hostile body: wrong types read as absent.
        let odd = json!({"from": "x", "to": [1], "group": {"a": 1}});
        assert_eq!(
            sentence("o", "POST", "/api/slots/assign", Some(&odd), 200, None),
            "o assigned slots to group ?"
        );
    }
}
