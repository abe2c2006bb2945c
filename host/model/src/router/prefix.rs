//! Routing by key prefix (docs/prefix-routes.md): keys that start with a configured prefix
//! belong to another Tessera cluster, and this proxy forwards their commands to one of that
//! cluster's proxies, which routes them by its own slot table. In a `SlotTable` each prefix
//! is one more slot past the cluster's 1024 (`SLOTS + i`), whose "master" is the proxy of the
//! other cluster this one forwards to, reached with the route's own login.
//!
//! What is pushed (the prefixes, their clusters and credentials) is the dashboard's, part of
//! the topology; where each prefix goes now (which of the other cluster's proxies) is each
//! proxy's own finding (`proxy::routes`), kept in [`RouteTargets`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::login::Login;

pub use tessera_wire::routes::{PrefixRoute, RouteStatus};

/// At most this many prefix routes per cluster: every key of every command is compared with
/// each prefix.
pub const MAX_ROUTES: usize = 32;
/// A prefix's longest length, in bytes.
pub const MAX_PREFIX_LEN: usize = 128;
/// How many distinct prefixes one proxy process routes in its life (each keeps its slot
/// number for good, see [`RouteTargets::slot_index`]).
pub const MAX_PREFIX_SLOTS: usize = 1024;

/// The bounds every table keeps to, whoever sent the routes (the dashboard checks more before
/// it stores them: `dashboard::routes::validate`).
///
/// # Errors
/// Too many routes, an empty, over-long or control-character prefix, or one listed twice.
pub fn check_bounds(routes: &[PrefixRoute]) -> Result<(), String> {
    if routes.len() > MAX_ROUTES {
        return Err(format!(
            "{} prefix routes; at most {MAX_ROUTES} are allowed",
            routes.len()
        ));
    }
    for (i, r) in routes.iter().enumerate() {
        if r.prefix.is_empty() {
            return Err("a prefix route needs a non-empty prefix".into());
        }
        if r.prefix.len() > MAX_PREFIX_LEN {
            return Err(format!(
                "prefix {:?} is {} bytes long; at most {MAX_PREFIX_LEN} are allowed",
                r.prefix,
                r.prefix.len()
            ));
        }
        if r.prefix.chars().any(char::is_control) {
            return Err(format!("prefix {:?} holds a control character", r.prefix));
        }
        if routes[..i].iter().any(|o| o.prefix == r.prefix) {
            return Err(format!("prefix {:?} is listed twice", r.prefix));
        }
    }
    Ok(())
}

/// A target chosen for a prefix: the address, and the login used there.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: Arc<str>,
    pub login: Login,
}

/// Each prefix's current target, as this proxy's route keeper (`proxy::routes`) found it,
/// and each prefix's slot number; read whenever a table is built.
#[derive(Debug, Default)]
pub struct RouteTargets {
    by_prefix: Mutex<HashMap<String, (RouteStatus, Option<Target>)>>,
    /// Prefix `i` is slot `SLOTS + i`, for the life of the process.
    slots: Mutex<Vec<String>>,
}

impl RouteTargets {
    /// The slot number of `prefix`, past the cluster's 1024: the same in every table this
    /// process builds, and never another prefix's. A session may keep a slot across tables
    /// (a transaction's, a blocked command's): whatever the routes became meanwhile, that slot
    /// still means this prefix, and is unserved once the prefix is no longer routed.
    /// `None` once [`MAX_PREFIX_SLOTS`] distinct prefixes were routed.
    pub fn slot_index(&self, prefix: &str) -> Option<usize> {
        let mut s = self.slots.lock().expect("route slots lock poisoned");
        if let Some(i) = s.iter().position(|p| p == prefix) {
            return Some(i);
        }
        if s.len() >= MAX_PREFIX_SLOTS {
            return None;
        }
        s.push(prefix.into());
        Some(s.len() - 1)
    }

    /// The target of `prefix` now.
    pub fn get(&self, prefix: &str) -> Option<Target> {
        let m = self.by_prefix.lock().expect("route targets lock poisoned");
        m.get(prefix).and_then(|(_, t)| t.clone())
    }

    /// Sets what `status.prefix` goes to; returns whether the target changed (a table must
    /// then be built afresh).
    pub fn set(&self, status: RouteStatus, target: Option<Target>) -> bool {
        let mut m = self.by_prefix.lock().expect("route targets lock poisoned");
        let before = m
            .get(&status.prefix)
            .map(|(_, t)| t.as_ref().map(|t| (t.addr.clone(), t.login.id)));
        let after = target.as_ref().map(|t| (t.addr.clone(), t.login.id));
        let changed = before != Some(after);
        m.insert(status.prefix.clone(), (status, target));
        changed
    }

    /// Forgets prefixes no longer routed.
    pub fn retain(&self, live: impl Fn(&str) -> bool) {
        let mut m = self.by_prefix.lock().expect("route targets lock poisoned");
        m.retain(|p, _| live(p));
    }

    /// Prometheus text: `tessera_prefix_route_up{prefix, cluster}`, 1 while this proxy has a
    /// target for the prefix (a proxy of that cluster answers it), else 0. Nothing without
    /// routes.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let statuses = self.statuses();
        if statuses.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "# HELP tessera_prefix_route_up Whether a proxy of the cluster a key prefix is routed to answers this proxy\n# TYPE tessera_prefix_route_up gauge"
        );
        for s in statuses {
            let _ = writeln!(
                out,
                "tessera_prefix_route_up{{prefix=\"{}\",cluster=\"{}\"}} {}",
                label_value(&s.prefix),
                label_value(&s.cluster),
                u8::from(s.target.is_some())
            );
        }
    }

    /// Every prefix's status, in prefix order.
    pub fn statuses(&self) -> Vec<RouteStatus> {
        let m = self.by_prefix.lock().expect("route targets lock poisoned");
        let mut v: Vec<RouteStatus> = m.values().map(|(s, _)| s.clone()).collect();
        v.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        v
    }
}

/// A Prometheus label value: backslash, double quote and line feed escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(prefix: &str, cluster: &str) -> PrefixRoute {
        PrefixRoute::new(prefix, cluster)
    }

    #[test]
    fn every_table_keeps_to_the_bounds() {
        assert!(check_bounds(&[route("user:", "b"), route("order:", "c")]).is_ok());
        let bad = [
            (vec![route("", "b")], "non-empty"),
            (vec![route("u", "b"), route("u", "c")], "twice"),
            (vec![route("x\n", "b")], "control"),
            (vec![route(&"k".repeat(129), "b")], "129 bytes"),
        ];
        for (routes, why) in bad {
            let e = check_bounds(&routes).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
        let many: Vec<_> = (0..=MAX_ROUTES)
            .map(|i| route(&format!("p{i}:"), "b"))
            .collect();
        assert!(check_bounds(&many).unwrap_err().contains("at most"));
    }

    #[test]
    fn a_target_change_is_reported_once() {
        let t = RouteTargets::default();
        let status = |target: Option<&str>| RouteStatus {
            prefix: "u:".into(),
            cluster: "b".into(),
            target: target.map(Into::into),
            error: None,
        };
        let target = |a: &str| Target {
            addr: a.into(),
            login: Login::none(),
        };
        assert!(t.set(status(None), None), "a new prefix is a change");
        assert!(!t.set(status(None), None));
        assert!(t.set(status(Some("p:1")), Some(target("p:1"))));
        assert!(!t.set(status(Some("p:1")), Some(target("p:1"))));
        assert!(t.set(status(Some("p:2")), Some(target("p:2"))));
        assert_eq!(t.get("u:").unwrap().addr.as_ref(), "p:2");
        let mut text = String::new();
        t.render(&mut text);
        assert!(
            text.contains("tessera_prefix_route_up{prefix=\"u:\",cluster=\"b\"} 1"),
            "{text}"
        );
        t.retain(|_| false);
        assert!(t.statuses().is_empty());
        let mut none = String::new();
        t.render(&mut none);
        assert!(none.is_empty());
        assert_eq!(label_value(r#"a"b\c"#), r#"a\"b\\c"#);
    }

    #[test]
    fn a_prefix_keeps_its_slot_number_for_good() {
        let t = RouteTargets::default();
        assert_eq!(t.slot_index("a:"), Some(0));
        assert_eq!(t.slot_index("b:"), Some(1));
        assert_eq!(t.slot_index("a:"), Some(0));
        for i in 2..MAX_PREFIX_SLOTS {
            assert_eq!(t.slot_index(&format!("p{i}")), Some(i));
        }
        assert_eq!(t.slot_index("one-too-many"), None);
        assert_eq!(t.slot_index("b:"), Some(1));
    }
}
