//! The Redis ACL users the proxy's backend connections act as, so that what a client may not do
//! directly it cannot do through a script or a function either: the proxy cannot look inside
//! Lua, but Redis checks every `redis.call` against the rights of the connection's user.
//!
//! - The **data user** runs clients' commands. Its rules are derived from the proxy's policy:
//!   exactly the commands the proxy forwards (no admin commands unless `admin_commands`, none
//!   that a plugin denies to every client, none outside a confined user's classes), and every
//!   key except Tessera's reserved namespace (`__tessera:*`), or only a confined user's prefix.
//!   Its name is a digest of its rules, so proxies with the same policy share one user and a
//!   policy change makes a new one.
//! - The **control user** runs the proxy's own requests (INFO, moving keys of migrating
//!   slots, SCRIPT KILL) and sets the data user up: the cluster's backend admin user, or in
//!   static mode the configured one (Redis's `default` user when none is).
//!
//! A data connection's login runs, at every connect: AUTH as the control user, `ACL SETUSER`
//! of the data user (idempotent), AUTH as the data user. A backend that refuses any step
//! serves no data commands (clear errors, never an unconfined fallback).

use std::sync::Arc;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use tessera_model::command::{CommandTable, Kind, Local};
use tessera_model::login::{Login, LoginStep, is_ok};
use tessera_model::migration::INTERNAL_PREFIX;
use tessera_model::redis_client::Credential;
use tessera_model::users::{KEYSPACE, User, command_classes};
use tessera_plugin_abi::class;
use tessera_resp::encode_request;
use tessera_wasm::DeniedToAll;

/// What the data user's rules are derived from.
#[derive(Debug, Clone, Copy)]
pub struct PolicyInputs<'a> {
    pub admin_commands: bool,
    /// Commands (`NAME` or `CONTAINER|SUB`, upper case) and classes some plugin of the chain
    /// denies to every client.
    pub denied: &'a DeniedToAll,
    /// A confined user's rights; `None` for users with every right.
    pub rights: Option<&'a User>,
}

/// No plugin denies anything.
static NO_DENIALS: DeniedToAll = DeniedToAll {
    commands: Vec::new(),
    classes: 0,
};

impl Default for PolicyInputs<'_> {
    /// No admin commands, no plugin denials, every right.
    fn default() -> Self {
        Self {
            admin_commands: false,
            denied: &NO_DENIALS,
            rights: None,
        }
    }
}

/// A data user: its name, password and `ACL SETUSER` rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataUser {
    pub name: String,
    pub password: String,
    pub rules: Vec<String>,
}

/// The data user for `policy`. `control` keys its password (so it is not guessable where the
/// backends have a secret at all).
pub fn data_user(policy: &PolicyInputs<'_>, control: Option<&Credential>) -> DataUser {
    let mut rules = key_rules(policy.rights);
    rules.push("resetchannels".into());
    rules.push("-@all".into());
    rules.extend(command_rules(policy));
    let digest = Sha256::digest(rules.join(" ").as_bytes());
    let name = format!("tessera-data-{}", hex::encode(&digest[..6]));
    let mut keyed = Sha256::new();
    keyed.update(control.map_or(&b""[..], |c| c.password.as_bytes()));
    keyed.update([0]);
    keyed.update(digest);
    DataUser {
        name,
        password: hex::encode(keyed.finalize()),
        rules,
    }
}

/// The key patterns: a confined user's prefix, or every key but the reserved namespace.
fn key_rules(rights: Option<&User>) -> Vec<String> {
    if let Some(prefix) = rights.and_then(|r| r.key_prefix.as_ref()) {
        return vec![format!("~{}*", glob_escape(prefix))];
    }
    not_prefixed(INTERNAL_PREFIX)
}

/// Glob patterns matching exactly the keys that do not start with `prefix`: those that leave
/// it at some byte (`pre[^c]*`) and its proper prefixes themselves (ACL has no negation).
fn not_prefixed(prefix: &[u8]) -> Vec<String> {
    let mut out = Vec::with_capacity(prefix.len() * 2);
    for i in 0..prefix.len() {
        let head = glob_escape(&prefix[..i]);
        out.push(format!("~{head}[^{}]*", glob_escape(&prefix[i..=i])));
        out.push(format!("~{head}"));
    }
    out
}

fn glob_escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        if matches!(c, b'*' | b'?' | b'[' | b']' | b'\\' | b'^') {
            s.push('\\');
        }
        s.push(c as char);
    }
    s
}

/// `+command` for every command a client's request may run on a backend under `policy`.
fn command_rules(policy: &PolicyInputs<'_>) -> Vec<String> {
    let table = CommandTable::get();
    let mut out = Vec::new();
    for cmd in table.iter() {
        let forwarded = match cmd.kind {
            // A transaction runs on the shared connections as one block; blocking commands
            // on dedicated ones (and inside scripts and transactions they do not block).
            Kind::Keyed | Kind::Split(_) | Kind::Blocking | Kind::Transaction(_) => true,
            Kind::Library(_) => true,
            Kind::AdminKeyed | Kind::Admin(_) => policy.admin_commands,
            // Harmless in scripts, and answered alike by any server.
            Kind::Local(Local::Ping | Local::Echo | Local::Time | Local::Dbsize) => true,
            // CLIENT ID: a dedicated connection learns its id, for CLIENT UNBLOCK by the
            // proxy's control user should its blocked command have to move.
            Kind::Local(Local::Client) => cmd.name == "CLIENT|ID",
            // Pub/sub runs on the proxy's own connections (see `pubsub`): data users keep
            // `resetchannels`, so a script cannot publish either.
            Kind::Local(_)
            | Kind::ScriptKill
            | Kind::Wait
            | Kind::PubSub(_)
            | Kind::Unsupported
            | Kind::Refused => false,
        };
        let denied = policy.denied.commands.iter().any(|d| d == cmd.name)
            || cmd.abi_class() & policy.denied.classes != 0;
        if !forwarded || denied {
            continue;
        }
        if let Some(r) = policy.rights {
            let needs = command_classes(cmd.abi_class(), cmd.name);
            if !r.allows(needs) {
                continue;
            }
            if r.key_prefix.is_some() && needs & (KEYSPACE | class::SCRIPTING) != 0 {
                continue;
            }
        }
        out.push(format!("+{}", cmd.name.to_lowercase()));
    }
    out
}

/// The control login: AUTH as `control`, or nothing (Redis's `default` user); then, in
/// cluster mode, the connection's `name` (see [`named`]).
pub fn control_login(control: Option<&Credential>, name: Option<&str>) -> Login {
    login(named(control, name))
}

/// A data connection's login: as the control user (and named, see [`named`]), set the data
/// user up, then become it. A database is selected before the data user (which may not) is
/// logged in as.
pub fn data_login(user: &DataUser, control: Option<&Credential>, name: Option<&str>) -> Login {
    let mut steps = named(control, name);
    let mut args: Vec<&[u8]> = vec![b"ACL", b"SETUSER", user.name.as_bytes(), b"reset", b"on"];
    let pass = format!(">{}", user.password);
    args.push(pass.as_bytes());
    args.extend(user.rules.iter().map(|r| r.as_bytes()));
    steps.push(LoginStep {
        request: request(&args),
        what: "setting up the confined backend user (ACL SETUSER)",
        accept: is_ok,
        confines: false,
    });
    steps.push(LoginStep {
        confines: true,
        ..auth_step(&Credential {
            user: user.name.clone(),
            password: user.password.clone(),
        })
    });
    login(steps)
}

/// AUTH as `control`, then `CLIENT SETNAME name` while the connection still has the
/// control user's rights (the data user has none for it). A cluster-mode proxy names every
/// backend connection after its registration, so that the dashboard can close them at the
/// servers should the proxy lapse (`tessera_model::fence::backend_connection_name`).
fn named(control: Option<&Credential>, name: Option<&str>) -> Vec<LoginStep> {
    let mut steps: Vec<LoginStep> = control.map(auth_step).into_iter().collect();
    if let Some(name) = name {
        steps.push(LoginStep {
            request: request(&[b"CLIENT", b"SETNAME", name.as_bytes()]),
            what: "naming the connection (CLIENT SETNAME)",
            accept: is_ok,
            confines: false,
        });
    }
    steps
}

fn auth_step(c: &Credential) -> LoginStep {
    LoginStep {
        request: request(&[b"AUTH", c.user.as_bytes(), c.password.as_bytes()]),
        what: "AUTH",
        accept: is_ok,
        confines: false,
    }
}

fn request(args: &[&[u8]]) -> Bytes {
    let size = args.iter().map(|a| a.len()).sum();
    encode_request(args.len(), args.iter().copied(), size)
}

/// A login whose id is a digest of its steps: equal logins share connections.
fn login(steps: Vec<LoginStep>) -> Login {
    let mut h = Sha256::new();
    for s in &steps {
        h.update(&s.request);
    }
    let d = h.finalize();
    let id = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
    Login {
        id: if steps.is_empty() { 0 } else { id | 1 },
        steps: Arc::from(steps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches_glob(pattern: &str, key: &str) -> bool {
        // Enough of Redis's glob for the patterns made here: literal bytes, `\x`, `[^c]`, `*`.
        fn m(p: &[u8], k: &[u8]) -> bool {
            match p.first() {
                None => k.is_empty(),
                Some(b'*') => (0..=k.len()).any(|i| m(&p[1..], &k[i..])),
                Some(b'[') if p.get(1) == Some(&b'^') => {
                    let (c, rest) = if p[2] == b'\\' {
                        (p[3], &p[5..])
                    } else {
                        (p[2], &p[4..])
                    };
                    !k.is_empty() && k[0] != c && m(rest, &k[1..])
                }
                Some(b'\\') => !k.is_empty() && k[0] == p[1] && m(&p[2..], &k[1..]),
                Some(&c) => !k.is_empty() && k[0] == c && m(&p[1..], &k[1..]),
            }
        }
        m(pattern.as_bytes(), key.as_bytes())
    }

    #[test]
    fn key_patterns_admit_every_key_but_the_reserved_ones() {
        let pats = not_prefixed(INTERNAL_PREFIX);
        let admitted = |k: &str| pats.iter().any(|p| matches_glob(&p[1..], k));
        for k in [
            "",
            "a",
            "_",
            "__",
            "__t",
            "__tessera",
            "__tesserax",
            "user:1",
            "__tessera;x",
        ] {
            assert!(admitted(k), "{k:?} should be admitted");
        }
        for k in ["__tessera:", "__tessera:marker:k", "__tessera:staging:x"] {
            assert!(!admitted(k), "{k:?} should be refused");
        }
    }

    #[test]
    fn data_user_follows_the_policy() {
        let denied = DeniedToAll {
            commands: vec!["DEL".to_string()],
            classes: 0,
        };
        let base = data_user(&PolicyInputs::default(), None);
        assert!(base.rules.contains(&"+get".to_string()));
        assert!(base.rules.contains(&"+eval".to_string()));
        assert!(!base.rules.contains(&"+flushall".to_string()));
        assert!(!base.rules.contains(&"+migrate".to_string()));
        assert!(!base.rules.contains(&"+select".to_string()));
        assert!(!base.rules.contains(&"+restore".to_string()));
        let admin = data_user(
            &PolicyInputs {
                admin_commands: true,
                denied: &denied,
                rights: None,
            },
            None,
        );
        assert!(admin.rules.contains(&"+flushall".to_string()));
        assert!(!admin.rules.contains(&"+del".to_string()));
        assert_ne!(base.name, admin.name, "another policy, another user");
        assert_eq!(
            base,
            data_user(&PolicyInputs::default(), None),
            "deterministic"
        );
        let keyed = data_user(
            &PolicyInputs::default(),
            Some(&Credential {
                user: "a".into(),
                password: "secret".into(),
            }),
        );
        assert_eq!(keyed.name, base.name);
        assert_ne!(
            keyed.password, base.password,
            "the control secret keys the password"
        );
    }

    #[test]
    fn a_confined_user_gets_its_prefix_and_no_scripts() {
        let r = User {
            name: "t".into(),
            allowed_classes: None,
            key_prefix: Some(Bytes::from_static(b"t1*:")),
            databases: None,
        };
        let u = data_user(
            &PolicyInputs {
                rights: Some(&r),
                ..PolicyInputs::default()
            },
            None,
        );
        assert!(u.rules.contains(&"~t1\\*:*".to_string()));
        assert!(!u.rules.contains(&"+eval".to_string()));
        assert!(u.rules.contains(&"+get".to_string()));
    }
}
