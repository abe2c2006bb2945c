//! `INFO` through the proxy: the proxy's own server and clients sections, and the backends'
//! sections with numeric fields summed (keyspace per database), so the reply describes the
//! cluster as one server.

/// What the proxy adds to the merged reply, captured when the command is dispatched.
#[derive(Debug)]
pub struct InfoRequest {
    /// Sections asked for, lower-case; empty means the default set.
    pub sections: Vec<String>,
    pub server: Vec<(String, String)>,
    pub clients: Vec<(String, String)>,
    /// Asked by a user confined to a key prefix: the proxy's own sections only. The
    /// backends' (keyspace, commandstats, memory, stats …) describe every tenant's data and
    /// traffic together.
    pub confined: bool,
}

/// Sections that describe one server and would mislead when summed.
const SKIPPED: [&str; 2] = ["replication", "persistence"];

impl InfoRequest {
    fn wants(&self, section: &str) -> bool {
        self.sections.is_empty()
            || self
                .sections
                .iter()
                .any(|s| s == section || s == "all" || s == "everything" || s == "default")
    }
}

type Sections = Vec<(String, Vec<(String, String)>)>;

/// A backend's keyspace line (`dbN`) as clients number it (`tessera_model::databases`);
/// `None` for Tessera's internal database, left out of every reply.
fn client_keyspace_field(k: &str) -> Option<String> {
    match k.strip_prefix("db").and_then(|n| n.parse::<u32>().ok()) {
        Some(db) => tessera_model::databases::client_db(db).map(|c| format!("db{c}")),
        None => Some(k.to_owned()),
    }
}

fn parse(text: &str) -> Sections {
    let mut out: Sections = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        if let Some(name) = line.strip_prefix("# ") {
            out.push((name.to_string(), Vec::new()));
        } else if let Some((k, v)) = line.split_once(':')
            && let Some((_, fields)) = out.last_mut()
        {
            fields.push((k.to_string(), v.to_string()));
        }
    }
    out
}

/// Counts of what Tessera keeps on every master (`SCRIPT LOAD` goes to each): the largest
/// backend's, not the sum, which would count one script once per master.
const ON_EVERY_MASTER: [&str; 1] = ["number_of_cached_scripts"];

/// The larger of `a` and `b` if both are numbers, else `a`.
fn larger(a: &str, b: &str) -> String {
    match (a.parse::<i64>(), b.parse::<i64>()) {
        (Ok(x), Ok(y)) => x.max(y).to_string(),
        _ => a.to_string(),
    }
}

/// Sums `a` and `b` if both are numbers, else keeps `a`.
fn add(a: &str, b: &str) -> String {
    if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
        return (x + y).to_string();
    }
    if let (Ok(x), Ok(y)) = (a.parse::<f64>(), b.parse::<f64>())
        && a.contains('.')
    {
        return format!("{:.2}", x + y);
    }
    a.to_string()
}

/// `keys=1,expires=0,avg_ttl=0` summed field by field (avg_ttl: the larger).
fn add_keyspace(a: &str, b: &str) -> String {
    let parse = |s: &str| -> Vec<(String, i64)> {
        s.split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.parse().unwrap_or(0)))
            .collect()
    };
    let mut fields = parse(a);
    for (k, v) in parse(b) {
        match fields.iter_mut().find(|(fk, _)| *fk == k) {
            Some((_, fv)) if k == "avg_ttl" => *fv = (*fv).max(v),
            Some((_, fv)) => *fv += v,
            None => fields.push((k, v)),
        }
    }
    fields
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The merged INFO text.
pub(crate) fn merge(req: &InfoRequest, backends: &[String]) -> String {
    let mut merged: Sections = Vec::new();
    for text in backends {
        for (name, fields) in parse(text) {
            let lname = name.to_ascii_lowercase();
            if req.confined
                || lname == "server"
                || lname == "clients"
                || lname == "cluster"
                || SKIPPED.contains(&lname.as_str())
            {
                continue;
            }
            let keyspace = lname == "keyspace";
            let slot = match merged.iter_mut().position(|(n, _)| *n == name) {
                Some(i) => &mut merged[i].1,
                None => {
                    merged.push((name.clone(), Vec::new()));
                    &mut merged.last_mut().expect("just pushed").1
                }
            };
            for (k, v) in fields {
                // Tessera's own database (big keys' copies) is no client's; the others are
                // named by their client numbers.
                let k = if keyspace {
                    match client_keyspace_field(&k) {
                        Some(k) => k,
                        None => continue,
                    }
                } else {
                    k
                };
                match slot.iter_mut().find(|(sk, _)| *sk == k) {
                    Some((_, sv)) => {
                        *sv = if keyspace {
                            add_keyspace(sv, &v)
                        } else if ON_EVERY_MASTER.contains(&k.as_str()) {
                            larger(sv, &v)
                        } else {
                            add(sv, &v)
                        }
                    }
                    None => slot.push((k, v)),
                }
            }
        }
    }
    // The proxy's own: it answers CLUSTER SLOTS and the like for cluster clients (which check
    // this field first), whatever the backends are (`proxy::peers`). Before Keyspace, as
    // Redis orders its sections.
    if req.wants("cluster") {
        let at = merged
            .iter()
            .position(|(n, _)| n.eq_ignore_ascii_case("keyspace"))
            .unwrap_or(merged.len());
        let fields = vec![("cluster_enabled".to_owned(), "1".to_owned())];
        merged.insert(at, ("Cluster".to_owned(), fields));
    }
    let mut out = String::new();
    let mut section = |name: &str, fields: &[(String, String)]| {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        out.push_str("# ");
        out.push_str(name);
        out.push_str("\r\n");
        for (k, v) in fields {
            out.push_str(k);
            out.push(':');
            out.push_str(v);
            out.push_str("\r\n");
        }
    };
    if req.wants("server") {
        let mut server = req.server.clone();
        if let Some(v) = backends.first().and_then(|t| field(t, "redis_version")) {
            server.insert(0, ("redis_version".into(), v.into()));
        }
        section("Server", &server);
    }
    if req.wants("clients") {
        section("Clients", &req.clients);
    }
    for (name, fields) in &merged {
        section(name, fields);
    }
    out
}

/// The redis_version a backend reports (clients check it), from its INFO text.
pub(crate) fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim_end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_fields_and_keyspace_are_summed() {
        let a = "# Server\r\nredis_version:7.0.15\r\n\r\n# Memory\r\nnumber_of_cached_scripts:4\r\n\r\n# Stats\r\ntotal_commands_processed:10\r\nmem_fragmentation_ratio:1.50\r\nrole_name:x\r\n\r\n# Keyspace\r\ndb0:keys=3,expires=1,avg_ttl=5\r\n";
        let b = "# Memory\r\nnumber_of_cached_scripts:3\r\n\r\n# Stats\r\ntotal_commands_processed:5\r\nmem_fragmentation_ratio:1.00\r\nrole_name:y\r\n\r\n# Keyspace\r\ndb0:keys=4,expires=0,avg_ttl=9\r\ndb1:keys=1,expires=0,avg_ttl=0\r\ndb3:keys=2,expires=0,avg_ttl=0\r\n";
        let req = InfoRequest {
            sections: vec![],
            server: vec![("tessera_version".into(), "1".into())],
            clients: vec![],
            confined: false,
        };
        let text = merge(&req, &[a.into(), b.into()]);
        assert!(text.contains("total_commands_processed:15\r\n"));
        assert!(text.contains("mem_fragmentation_ratio:2.50\r\n"));
        assert!(text.contains("role_name:x\r\n"));
        // Scripts are loaded on every master: the largest count, not the sum.
        assert!(text.contains("number_of_cached_scripts:4\r\n"), "{text}");
        assert!(text.contains("db0:keys=7,expires=1,avg_ttl=9\r\n"));
        // The internal database (backend 1) is no client's; backend 3 is client 2's.
        assert!(
            text.contains("db0:keys=7,expires=1,avg_ttl=9\r\ndb2:keys=2,expires=0,avg_ttl=0\r\n"),
            "the internal database is no client's: {text}"
        );
        assert!(!text.contains("db1:"), "{text}");
        assert!(!text.contains("db3:"), "{text}");
        // The proxies answer CLUSTER SLOTS: cluster clients read this first.
        assert!(
            text.contains("# Cluster\r\ncluster_enabled:1\r\n\r\n# Keyspace"),
            "{text}"
        );
        assert!(
            text.contains("# Server\r\nredis_version:7.0.15\r\ntessera_version:1\r\n"),
            "{text}"
        );
        assert_eq!(text.matches("# Server").count(), 1);
        assert_eq!(field(a, "redis_version"), Some("7.0.15"));
        let confined = InfoRequest {
            confined: true,
            ..req
        };
        let text = merge(&confined, &[a.into(), b.into()]);
        assert!(text.contains("redis_version:7.0.15"), "{text}");
        assert!(
            !text.contains("Keyspace") && !text.contains("Stats"),
            "{text}"
        );
    }
}
