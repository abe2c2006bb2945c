//! A deliberately misbehaving Tessera plugin for the proxy's containment tests: on commands
//! whose key starts with `key_prefix` it traps, loops forever, exhausts memory, burns CPU for a
//! while, or answers with a tag (to tell plugin versions apart during a hot reload). Config and
//! modes in README.md. Never load it into a real cluster.

use serde::Deserialize;
use tessera_plugin_sdk::{
    Action, Command, Conn, Manifest, Out, Plugin, Replies, ReplyAction, ReplyOut, cmd, host,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Mode {
    /// Pass everything (same hooks as the faulty modes: a baseline).
    Ok,
    /// Panic → `unreachable` trap.
    Trap,
    /// Spin forever (the host's deadline must stop it).
    Loop,
    /// Allocate until memory runs out (the host's memory cap must stop it).
    Oom,
    /// Spin for `ms` milliseconds of the host clock, then pass.
    Slow,
    /// Refuse the config in init.
    Refuse,
    /// Trap inside init.
    InitTrap,
    /// OBSERVE the command, then trap in on_reply.
    ReplyTrap,
    /// Answer GET directly with `+<tag>` (or `+faulty:<name>` without a tag).
    Echo,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    mode: Mode,
    #[serde(default = "default_prefix")]
    key_prefix: String,
    tag: Option<String>,
    #[serde(default)]
    ms: u64,
    /// Misbehave only on keys starting with this (within `key_prefix`); the other hooked
    /// commands pass, so they share a batch with the ones that fault.
    fault_prefix: Option<String>,
}

fn default_prefix() -> String {
    "boom".into()
}

/// The plugin.
#[derive(Debug)]
pub struct Faulty {
    mode: Mode,
    prefix: Vec<u8>,
    tag: Option<String>,
    ms: u64,
    fault_prefix: Option<Vec<u8>>,
}

impl Plugin for Faulty {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        let cfg: Config =
            serde_json::from_slice(config).map_err(|e| format!("faulty: bad config: {e}"))?;
        match cfg.mode {
            Mode::Refuse => return Err("faulty: refusing this config".into()),
            Mode::InitTrap => panic!("faulty: trap in init"),
            _ => {}
        }
        let manifest = match cfg.mode {
            Mode::Echo => Manifest::new().hook(cmd::GET),
            _ => Manifest::new().hook_all(),
        }
        .prefix(&cfg.key_prefix);
        let plugin = Faulty {
            mode: cfg.mode,
            prefix: cfg.key_prefix.into_bytes(),
            tag: cfg.tag,
            ms: cfg.ms,
            fault_prefix: cfg.fault_prefix.map(String::into_bytes),
        };
        Ok((plugin, manifest))
    }

    fn on_command(&mut self, _conn: Conn, c: &Command<'_>, out: Out<'_>) -> Action {
        // The host already filtered by prefix; check again so native tests see the same.
        if !c.keys().any(|(_, k)| k.starts_with(&self.prefix)) {
            return Action::PASS;
        }
        if let Some(p) = &self.fault_prefix
            && !c.keys().any(|(_, k)| k.starts_with(p))
        {
            return Action::PASS;
        }
        match self.mode {
            Mode::Ok | Mode::Refuse | Mode::InitTrap => Action::PASS,
            Mode::Trap => panic!("faulty: trap on command"),
            Mode::Loop => spin_forever(),
            Mode::Oom => exhaust_memory(),
            Mode::Slow => {
                let until = host::now_us() + self.ms * 1000;
                while host::now_us() < until {
                    std::hint::spin_loop();
                }
                Action::PASS
            }
            Mode::ReplyTrap => out.observe(0),
            Mode::Echo => match &self.tag {
                Some(tag) => out.reply(|w| {
                    w.simple(tag);
                }),
                None => out.reply(|w| {
                    w.simple(&format!("faulty:{}", String::from_utf8_lossy(c.name())));
                }),
            },
        }
    }

    fn on_reply(&mut self, _: Conn, _: u64, _: &Replies<'_>, _: ReplyOut<'_>) -> ReplyAction {
        if self.mode == Mode::ReplyTrap {
            panic!("faulty: trap on reply");
        }
        ReplyAction::PASS
    }
}

fn spin_forever() -> ! {
    let mut n: u64 = 0;
    loop {
        n = std::hint::black_box(n.wrapping_add(1));
    }
}

fn exhaust_memory() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // Written, not just reserved, so the pages are really used.
        let chunk = vec![0xA5u8; 1 << 20];
        hoard.push(std::hint::black_box(chunk));
    }
}

tessera_plugin_sdk::export_plugin!(Faulty);

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_plugin_sdk::testing::{self, Harness, Outcome, command};

    #[test]
    fn ok_mode_passes_and_hooks_only_the_prefix() {
        testing::reset();
        let mut h = Harness::<Faulty>::new(r#"{"mode":"ok"}"#);
        assert_eq!(h.manifest().prefixes, vec![b"boom".to_vec()]);
        assert_eq!(h.on_command(1, &command(&["GET", "boom:1"])), Outcome::Pass);
        assert_eq!(
            h.on_command(1, &command(&["GET", "calm"])),
            Outcome::NotHooked
        );
    }

    #[test]
    fn refuse_mode_fails_init_with_a_fixed_message() {
        let err = Harness::<Faulty>::try_new(r#"{"mode":"refuse"}"#).unwrap_err();
        assert_eq!(err, "faulty: refusing this config");
    }

    #[test]
    fn echo_mode_answers_get_with_the_tag() {
        testing::reset();
        let mut h = Harness::<Faulty>::new(r#"{"mode":"echo","key_prefix":"v:","tag":"gen2"}"#);
        assert_eq!(
            h.on_command(1, &command(&["GET", "v:1"])),
            Outcome::Reply(b"+gen2\r\n".to_vec())
        );
        assert_eq!(
            h.on_command(1, &command(&["SET", "v:1", "x"])),
            Outcome::NotHooked
        );
        let mut h = Harness::<Faulty>::new(r#"{"mode":"echo"}"#);
        assert_eq!(
            h.on_command(1, &command(&["get", "boom"])),
            Outcome::Reply(b"+faulty:get\r\n".to_vec())
        );
    }

    #[test]
    fn slow_mode_spins_on_the_host_clock() {
        testing::reset();
        let mut h = Harness::<Faulty>::new(r#"{"mode":"slow","ms":0}"#);
        assert_eq!(h.on_command(1, &command(&["GET", "boom"])), Outcome::Pass);
    }

    #[test]
    #[should_panic(expected = "faulty: trap on command")]
    fn trap_mode_traps_on_prefixed_keys() {
        testing::reset();
        let mut h = Harness::<Faulty>::new(r#"{"mode":"trap"}"#);
        assert_eq!(
            h.on_command(1, &command(&["GET", "calm"])),
            Outcome::NotHooked
        );
        let _ = h.on_command(1, &command(&["GET", "boom:x"]));
    }
}
