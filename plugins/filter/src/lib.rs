//! Tessera filter plugin: denies commands by name or class, protects read-only keys, admits
//! clients by address or user, caps value sizes and rate-limits each client address.
//! Config keys are in README.md; the manifest hooks only what the config needs.

use rustc_hash::FxHashMap;
use tessera_plugin_sdk::host::{self, ClientInfo};
use tessera_plugin_sdk::{Action, Command, Conn, Manifest, Out, Plugin, class, cmd};

mod config;
mod rules;
#[cfg(test)]
mod tests;

use config::Rules;
use rules::{Msg, client_ip};

/// What the filter remembers about a connection (cached at its first command).
#[derive(Debug)]
struct Client {
    allowed: bool,
    /// The token bucket of the client's IP: `rl:<ip>`.
    bucket: Vec<u8>,
}

/// The plugin.
#[derive(Debug)]
pub struct Filter {
    rules: Rules,
    clients: FxHashMap<u64, Client>,
}

fn manifest(rules: &Rules) -> Manifest {
    let mut m = Manifest::new();
    for (id, denied) in rules.deny_ids.iter().enumerate() {
        if *denied {
            m = m.hook(id as u16);
        }
    }
    for (id, _) in &rules.deny_subs {
        // The subcommand is not a key: ask for the argument bytes.
        m = m.hook_with_values(*id);
    }
    m = m.hook_class(rules.deny_classes);
    if !rules.read_only.is_empty() || rules.max_value.is_some() {
        m = m.hook_class(class::WRITE);
        m = gate_writes(rules, m);
    }
    if rules.per_client() {
        m = m.hook_all().want_close();
    }
    // What every client is refused, declared for the proxy (scripts must not run it either).
    let (names, classes) = rules.denied_to_all();
    for name in &names {
        m = m.deny_to_all(name);
    }
    m = m.deny_classes_to_all(classes);
    m
}

/// Read-only `prefix*` patterns and a value bound are checked by the host: the filter is
/// entered for a write only when a key is under one of the prefixes or a value is over the
/// bound, not for every write. A pattern that is not a prefix, or per-client rules (which
/// hook every command), keep every write coming.
fn gate_writes(rules: &Rules, mut m: Manifest) -> Manifest {
    let prefixes: Option<Vec<&[u8]>> = rules.read_only.iter().map(|g| g.as_prefix()).collect();
    let Some(prefixes) = prefixes else {
        return m;
    };
    if rules.per_client() || rules.deny_classes & class::WRITE != 0 {
        return m;
    }
    m = m.gate_classes(class::WRITE);
    for p in prefixes {
        m = m.gate_prefix(p);
    }
    if let Some(max) = rules.max_value {
        // A bound past u32 is no bound: no value of a Redis command is that large.
        m = m.gate_max_value(u32::try_from(max).unwrap_or(u32::MAX));
    }
    m
}

impl Plugin for Filter {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        let rules = Rules::parse(config)?;
        let m = manifest(&rules);
        let clients = FxHashMap::default();
        Ok((Filter { rules, clients }, m))
    }

    fn on_command(&mut self, conn: Conn, c: &Command<'_>, out: Out<'_>) -> Action {
        let r = &self.rules;
        let msg = |template| Msg {
            template,
            command: c.name(),
            key: b"",
            max: r.max_value.unwrap_or(0),
        };
        if r.per_client() {
            // AUTH / HELLO change the user: forget the cached facts, let them through so a
            // user allow-list can be satisfied.
            if c.is(cmd::AUTH) || c.is(cmd::HELLO) {
                self.clients.remove(&conn.0);
                if r.allow.as_ref().is_some_and(|a| !a.users.is_empty()) {
                    return Action::PASS;
                }
            }
            let client = self
                .clients
                .entry(conn.0)
                .or_insert_with(|| admit(r, host::client_info(conn)));
            if !client.allowed {
                return out.deny_fmt(format_args!("{}", msg(&r.texts.client_not_allowed)));
            }
            if let Some((per_second, burst)) = r.rate
                && !host::ratelimit_acquire(&client.bucket, 1, per_second, burst)
            {
                return out.deny_fmt(format_args!("{}", msg(&r.texts.rate_limited)));
            }
        }
        let id = usize::from(c.id());
        let sub_denied = r.deny_subs.iter().any(|(cid, sub)| {
            c.is(*cid) && c.bytes(1).is_some_and(|b| b.eq_ignore_ascii_case(sub))
        });
        if r.deny_ids.get(id).copied().unwrap_or(false) || c.has_class(r.deny_classes) || sub_denied
        {
            return out.deny_fmt(format_args!("{}", msg(&r.texts.denied)));
        }
        if c.has_class(class::WRITE) {
            if let Some((_, key)) = c
                .keys()
                .find(|(_, k)| r.read_only.iter().any(|g| g.matches(k)))
            {
                let m = Msg {
                    key,
                    ..msg(&r.texts.read_only)
                };
                return out.deny_fmt(format_args!("{m}"));
            }
            if let Some(max) = r.max_value
                && c.max_value_len() > max
            {
                return out.deny_fmt(format_args!("{}", msg(&r.texts.too_large)));
            }
        }
        Action::PASS
    }

    fn on_close(&mut self, conn: Conn) {
        self.clients.remove(&conn.0);
    }
}

/// Decides once per connection whether the client is admitted, and names its token bucket.
fn admit(rules: &Rules, info: Option<ClientInfo>) -> Client {
    let info = info.unwrap_or_default();
    let ip = client_ip(&info.addr);
    let allowed = rules.allow.as_ref().is_none_or(|a| {
        let addr_ok =
            a.nets.is_empty() || ip.is_some_and(|ip| a.nets.iter().any(|n| n.contains(ip)));
        let user_ok = a.users.is_empty()
            || info
                .user
                .as_deref()
                .is_some_and(|u| a.users.iter().any(|x| x == u));
        addr_ok && user_ok
    });
    let bucket = match ip {
        Some(ip) => format!("rl:{ip}").into_bytes(),
        None => format!("rl:{}", info.addr).into_bytes(),
    };
    Client { allowed, bucket }
}

tessera_plugin_sdk::export_plugin!(Filter);
