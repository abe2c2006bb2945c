//! The filter's JSON config and its compilation into [`Rules`]; every mistake is an init error
//! naming the offending value.

use serde::Deserialize;
use tessera_plugin_sdk::{class, cmd, command_id, command_name};

use crate::rules::{Cidr, Glob};

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    deny_commands: Vec<String>,
    #[serde(default)]
    deny_classes: Vec<String>,
    #[serde(default)]
    read_only_keys: Vec<String>,
    #[serde(default)]
    allow_addrs: Vec<String>,
    #[serde(default)]
    allow_users: Vec<String>,
    max_value_bytes: Option<u64>,
    rate_limit: Option<RateLimit>,
    #[serde(default)]
    messages: Messages,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimit {
    per_second: u32,
    burst: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Messages {
    denied: Option<String>,
    read_only: Option<String>,
    too_large: Option<String>,
    rate_limited: Option<String>,
    client_not_allowed: Option<String>,
}

/// Error texts; `{command}`, `{key}` and `{max}` are replaced when the error is sent.
#[derive(Debug, Clone)]
pub(crate) struct Texts {
    pub(crate) denied: String,
    pub(crate) read_only: String,
    pub(crate) too_large: String,
    pub(crate) rate_limited: String,
    pub(crate) client_not_allowed: String,
}

/// Who may use the proxy at all.
#[derive(Debug, Clone, Default)]
pub(crate) struct Allow {
    pub(crate) nets: Vec<Cidr>,
    pub(crate) users: Vec<String>,
}

/// The compiled config.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// Denied command ids (index = id).
    pub(crate) deny_ids: Vec<bool>,
    /// Denied subcommands: (container id, upper-case subcommand).
    pub(crate) deny_subs: Vec<(u16, Vec<u8>)>,
    pub(crate) deny_classes: u32,
    pub(crate) read_only: Vec<Glob>,
    pub(crate) max_value: Option<usize>,
    pub(crate) allow: Option<Allow>,
    /// (per second, burst).
    pub(crate) rate: Option<(u32, u32)>,
    pub(crate) texts: Texts,
}

fn text(custom: Option<String>, default: &str) -> String {
    let t = custom.unwrap_or_else(|| default.to_owned());
    // An error reply starts with an upper-case code (ERR, NOPERM …); add one if missing.
    match t.split(' ').next() {
        Some(w) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_uppercase()) => t,
        _ => format!("ERR {t}"),
    }
}

impl Rules {
    /// Parses and checks the config.
    pub(crate) fn parse(config: &[u8]) -> Result<Rules, String> {
        let cfg: Config = if config.iter().all(u8::is_ascii_whitespace) {
            Config::default()
        } else {
            serde_json::from_slice(config).map_err(|e| format!("filter: bad config: {e}"))?
        };
        let mut deny_ids = vec![false; tessera_plugin_sdk::abi::COMMAND_NAMES.len()];
        let mut deny_subs = Vec::new();
        for entry in &cfg.deny_commands {
            let mut words = entry.split([' ', '|']).filter(|w| !w.is_empty());
            let name = words.next().unwrap_or("");
            let id = command_id(name);
            if id == 0 {
                return Err(format!("filter: unknown command {entry:?}"));
            }
            match (words.next(), words.next()) {
                (None, _) => deny_ids[usize::from(id)] = true,
                (Some(sub), None) => deny_subs.push((id, sub.to_ascii_uppercase().into_bytes())),
                _ => return Err(format!("filter: bad command {entry:?}")),
            }
        }
        let mut deny_classes = 0;
        for name in &cfg.deny_classes {
            deny_classes |=
                class::by_name(name).ok_or_else(|| format!("filter: unknown class {name:?}"))?;
        }
        let read_only = cfg
            .read_only_keys
            .iter()
            .map(|p| Glob::new(p).ok_or_else(|| format!("filter: empty key pattern {p:?}")))
            .collect::<Result<Vec<_>, _>>()?;
        let nets = cfg
            .allow_addrs
            .iter()
            .map(|a| Cidr::parse(a).ok_or_else(|| format!("filter: bad address {a:?}")))
            .collect::<Result<Vec<_>, _>>()?;
        let allow = (!nets.is_empty() || !cfg.allow_users.is_empty()).then(|| Allow {
            nets,
            users: cfg.allow_users.clone(),
        });
        let rate = match cfg.rate_limit {
            Some(RateLimit { per_second: 0, .. }) => {
                return Err("filter: rate_limit.per_second must be at least 1".into());
            }
            Some(r) => Some((r.per_second, r.burst.unwrap_or(r.per_second).max(1))),
            None => None,
        };
        let max_value = match cfg.max_value_bytes {
            Some(0) => return Err("filter: max_value_bytes must be at least 1".into()),
            m => m.map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
        };
        let m = cfg.messages;
        Ok(Rules {
            deny_ids,
            deny_subs,
            deny_classes,
            read_only,
            max_value,
            allow,
            rate,
            texts: Texts {
                denied: text(m.denied, "ERR command '{command}' is not allowed"),
                read_only: text(m.read_only, "ERR key '{key}' is read-only"),
                too_large: text(m.too_large, "ERR value is larger than {max} bytes"),
                rate_limited: text(m.rate_limited, "ERR rate limit exceeded"),
                client_not_allowed: text(m.client_not_allowed, "ERR client not allowed"),
            },
        })
    }

    /// Whether any rule needs to see every command (client rules).
    pub(crate) fn per_client(&self) -> bool {
        self.allow.is_some() || self.rate.is_some()
    }

    /// What this config refuses to every client, for the manifest's declaration: the name,
    /// subcommand and class rules, which hold for everyone. Address, user, key, size and rate
    /// rules depend on the client and are never declared. With a user allow-list, AUTH and
    /// HELLO pass before the name rules (so a client can log in), so they and their classes
    /// (connection, fast, keyless) are left out: declaring less is always safe.
    pub(crate) fn denied_to_all(&self) -> (Vec<String>, u32) {
        let auth_passes = self.allow.as_ref().is_some_and(|a| !a.users.is_empty());
        let exempt = |id: u16| auth_passes && (id == cmd::AUTH || id == cmd::HELLO);
        let mut names = Vec::new();
        for (id, denied) in self.deny_ids.iter().enumerate() {
            let id = id as u16;
            if *denied && !exempt(id) {
                names.push(command_name(id).to_owned());
            }
        }
        for (id, sub) in &self.deny_subs {
            if !exempt(*id) {
                names.push(format!(
                    "{}|{}",
                    command_name(*id),
                    String::from_utf8_lossy(sub)
                ));
            }
        }
        let mut classes = self.deny_classes;
        if auth_passes {
            classes &= !(class::CONNECTION | class::FAST | class::KEYLESS);
        }
        (names, classes)
    }
}
