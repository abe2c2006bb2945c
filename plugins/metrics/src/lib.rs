//! Tessera metrics plugin: counts commands and error replies and records latency by command,
//! tenant (the first key up to a delimiter) and client name, through the host's metrics. The
//! time a blocking command (BLPOP …, XREAD with BLOCK, WAIT) waits for its reply is recorded
//! apart, in `command_blocked_seconds`: it is the client's choice, not the cluster's latency.
//!
//! Hot path: `on_command` resolves three small indexes (command id, tenant, client) to a cached
//! series slot and returns OBSERVE with `slot << 32 | start µs`; `on_reply` makes three import
//! calls (count, latency, errors when the reply is one). It asks for reply heads only
//! (`observe_heads`): a reply's first byte says whether it is an error, and a large reply
//! is not copied into the plugin. Times are the proxy's own readings
//! (`stage_us`: the batch's dispatch, the reply's arrival), so no clock is read here. Series handles are resolved once per
//! label combination; tenant and client sets are capped (overflow → `other`).

use rustc_hash::FxHashMap;
use serde::Deserialize;
use tessera_plugin_sdk::host::{self, Metric, Series};
use tessera_plugin_sdk::{
    Action, Command, Conn, Manifest, Out, Plugin, Replies, ReplyAction, ReplyOut, class, cmd,
    command_name,
};

/// Set in an observe context: the command was a blocking one.
const BLOCKED: u64 = 1 << 63;

#[cfg(test)]
mod tests;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Config {
    tenant_delimiter: String,
    max_tenants: usize,
    client_names: bool,
    max_clients: usize,
    latency_buckets: Vec<f64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            tenant_delimiter: ":".into(),
            max_tenants: 100,
            client_names: true,
            max_clients: 50,
            latency_buckets: vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0,
            ],
        }
    }
}

/// Label value index 0 is `none` (no key / no name), 1 is `other` (over the cap).
const NONE: u16 = 0;
const OTHER: u16 = 1;

/// Distinct label values, capped.
#[derive(Debug)]
struct Labels {
    names: Vec<String>,
    index: FxHashMap<Box<[u8]>, u16>,
    max: usize,
}

impl Labels {
    fn new(max: usize) -> Self {
        Self {
            names: vec!["none".into(), "other".into()],
            index: FxHashMap::default(),
            max,
        }
    }

    fn get(&mut self, value: &[u8]) -> u16 {
        if let Some(&i) = self.index.get(value) {
            return i;
        }
        if self.index.len() >= self.max {
            return OTHER;
        }
        let i = self.names.len() as u16;
        self.names.push(String::from_utf8_lossy(value).into_owned());
        self.index.insert(value.into(), i);
        i
    }
}

/// The series of one (command, tenant, client).
#[derive(Debug, Clone, Copy)]
struct Slot {
    count: Series,
    errors: Series,
    duration: Series,
    blocked: Series,
}

/// The plugin.
#[derive(Debug)]
pub struct Metrics {
    delimiter: Vec<u8>,
    client_names: bool,
    commands: Metric,
    errors: Metric,
    duration: Metric,
    blocked: Metric,
    tenants: Labels,
    clients: Labels,
    /// Client label index per connection (fetched once, refreshed after CLIENT / HELLO).
    conns: FxHashMap<u64, u16>,
    /// (command id, tenant, client) → index in `slots`.
    slot_of: FxHashMap<u64, u32>,
    slots: Vec<Slot>,
}

impl Plugin for Metrics {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        let cfg: Config = if config.iter().all(u8::is_ascii_whitespace) {
            Config::default()
        } else {
            serde_json::from_slice(config).map_err(|e| format!("metrics: bad config: {e}"))?
        };
        if cfg.tenant_delimiter.is_empty() {
            return Err("metrics: tenant_delimiter must not be empty".into());
        }
        if cfg.latency_buckets.windows(2).any(|w| w[0] >= w[1]) {
            return Err("metrics: latency_buckets must increase".into());
        }
        let labels = ["command", "tenant", "client"];
        let metric = |r: Result<Metric, host::HostError>| r.map_err(|e| format!("metrics: {e}"));
        let commands = metric(Metric::counter(
            "commands_total",
            "Commands by command, tenant and client",
            &labels,
        ))?;
        let errors = metric(Metric::counter(
            "command_errors_total",
            "Error replies by command, tenant and client",
            &labels,
        ))?;
        let duration = metric(Metric::histogram(
            "command_duration_seconds",
            "Time from the plugin seeing a command to its reply, by command and tenant",
            &["command", "tenant"],
            &cfg.latency_buckets,
        ))?;
        let blocked = metric(Metric::histogram(
            "command_blocked_seconds",
            "Time a blocking command (BLPOP, XREAD BLOCK, WAIT …) waited for its reply, by command and tenant",
            &["command", "tenant"],
            &cfg.latency_buckets,
        ))?;
        let plugin = Metrics {
            delimiter: cfg.tenant_delimiter.into_bytes(),
            client_names: cfg.client_names,
            commands,
            errors,
            duration,
            blocked,
            tenants: Labels::new(cfg.max_tenants),
            clients: Labels::new(cfg.max_clients),
            conns: FxHashMap::default(),
            slot_of: FxHashMap::default(),
            slots: Vec::new(),
        };
        // XREAD and XREADGROUP block only with BLOCK: their arguments (ids, counts) are read.
        let manifest = Manifest::new()
            .hook_all()
            .hook_with_values(cmd::XREAD)
            .hook_with_values(cmd::XREADGROUP)
            .observe_heads()
            .want_close();
        Ok((plugin, manifest))
    }

    fn on_command(&mut self, conn: Conn, c: &Command<'_>, out: Out<'_>) -> Action {
        let start = host::stage_us();
        let tenant = match c.first_key() {
            Some(k) => match find(k, &self.delimiter) {
                Some(end) => self.tenants.get(&k[..end]),
                None => NONE,
            },
            None => NONE,
        };
        let client = self.client(conn);
        if c.is(cmd::CLIENT) || c.is(cmd::HELLO) {
            // The name may change with this command: look it up again next time.
            self.conns.remove(&conn.0);
        }
        let slot = self.slot(c.id(), tenant, client);
        let blocked = if blocks(c) { BLOCKED } else { 0 };
        out.observe(blocked | (u64::from(slot) << 32) | u64::from(start as u32))
    }

    fn on_reply(
        &mut self,
        _conn: Conn,
        ctx: u64,
        replies: &Replies<'_>,
        _out: ReplyOut<'_>,
    ) -> ReplyAction {
        let Some(slot) = self.slots.get(((ctx & !BLOCKED) >> 32) as usize) else {
            return ReplyAction::PASS;
        };
        // Microseconds modulo 2^32 (71 minutes): fine for a command's latency.
        let elapsed = (host::stage_us() as u32).wrapping_sub(ctx as u32);
        slot.count.inc();
        let histogram = if ctx & BLOCKED != 0 {
            slot.blocked
        } else {
            slot.duration
        };
        histogram.observe(f64::from(elapsed) / 1e6);
        if replies.get(0).is_some_and(|r| r.first() == Some(&b'-')) {
            slot.errors.inc();
        }
        ReplyAction::PASS
    }

    fn on_close(&mut self, conn: Conn) {
        self.conns.remove(&conn.0);
    }
}

/// A command that waits for something to happen: blocking ones, XREAD/XREADGROUP given
/// BLOCK, WAIT.
fn blocks(c: &Command<'_>) -> bool {
    if c.is(cmd::XREAD) || c.is(cmd::XREADGROUP) {
        return (1..c.len())
            .map_while(|i| c.bytes(i))
            .take_while(|a| !a.eq_ignore_ascii_case(b"STREAMS"))
            .any(|a| a.eq_ignore_ascii_case(b"BLOCK"));
    }
    c.has_class(class::BLOCKING) || c.is(cmd::WAIT)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Metrics {
    fn client(&mut self, conn: Conn) -> u16 {
        if !self.client_names {
            return NONE;
        }
        if let Some(&i) = self.conns.get(&conn.0) {
            return i;
        }
        let i = match host::client_info(conn).and_then(|c| c.name) {
            Some(name) if !name.is_empty() => self.clients.get(name.as_bytes()),
            _ => NONE,
        };
        self.conns.insert(conn.0, i);
        i
    }

    fn slot(&mut self, id: u16, tenant: u16, client: u16) -> u32 {
        let key = (u64::from(id) << 32) | (u64::from(tenant) << 16) | u64::from(client);
        if let Some(&s) = self.slot_of.get(&key) {
            return s;
        }
        let command = match id {
            0 => "unknown".to_owned(),
            _ => command_name(id).to_ascii_lowercase(),
        };
        let tenant = &self.tenants.names[usize::from(tenant)];
        let client = if self.client_names {
            self.clients.names[usize::from(client)].as_str()
        } else {
            "all"
        };
        let values = [command.as_str(), tenant.as_str(), client];
        let series = |m: &Metric, v: &[&str]| m.series(v).unwrap_or(Series::NONE);
        let slot = Slot {
            count: series(&self.commands, &values),
            errors: series(&self.errors, &values),
            duration: series(&self.duration, &values[..2]),
            blocked: series(&self.blocked, &values[..2]),
        };
        self.slots.push(slot);
        let s = self.slots.len() as u32 - 1;
        self.slot_of.insert(key, s);
        s
    }
}

tessera_plugin_sdk::export_plugin!(Metrics);
