//! Stage 2 of the data path: a decoded request becomes a [`Classified`] command, or the error
//! its client gets. Everything about *whether* a command may run is decided here, in this
//! order: the command exists with a valid arity; the client is authenticated; the proxy's
//! policy allows the command (admin, dangerous, refused, unsupported, scripts); the user's
//! rights allow it (command classes, key prefix); no key is in Tessera's reserved namespace.
//! Pure: no I/O, no session state, testable in-process.

use bytes::Bytes;
use smallvec::SmallVec;
use tessera_plugin_abi::class;

use crate::command::{Admin, Command, CommandTable, Kind, Local};
use crate::error::{DataError, display_name};
use crate::migrate::INTERNAL_PREFIX;
use crate::resp::Request;

/// The proxy-wide rules, from the proxy's config and what its backends allow.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// `admin_commands`: cluster-wide admin commands and Redis's `@dangerous` keyed ones.
    pub admin_commands: bool,
    /// Backend connections run as a confined ACL user, so a script can do no more than its
    /// caller may (see `acl`). Without that, scripts and functions are refused.
    pub scripts_confined: bool,
}

/// What an authenticated session's user may do.
#[derive(Debug, Clone, Default)]
pub struct Rights {
    /// The user name (for error texts).
    pub user: Bytes,
    /// Command classes the user may use (bits of `tessera_plugin_abi::class` and
    /// [`KEYSPACE`]); `None`: every class.
    pub classes: Option<u32>,
    /// Every key the user names must start with this; `None`: any key.
    pub key_prefix: Option<Bytes>,
}

/// Class bit of the commands that read or change the whole keyspace rather than named keys
/// (KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHALL, FLUSHDB). Outside the plugin ABI's bits.
pub const KEYSPACE: u32 = 1 << 31;

/// The classes a user's rights are checked against; the others (fast, keyless, multi-key,
/// connection) describe a command rather than what it may do.
const GATED: u32 = class::READ
    | class::WRITE
    | class::ADMIN
    | class::PUBSUB
    | class::BLOCKING
    | class::SCRIPTING
    | class::TRANSACTION
    | class::DANGEROUS
    | KEYSPACE;

/// A command that may run: its table entry, the request, and where its keys are.
#[derive(Debug)]
pub struct Classified {
    pub cmd: &'static Command,
    pub req: Request,
    pub keys: SmallVec<[u32; 4]>,
}

impl Classified {
    /// Key `i` of the command (an index into `keys`).
    pub fn key(&self, i: usize) -> &[u8] {
        self.req.arg(self.keys[i] as usize)
    }

    pub fn key_args(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.iter().map(|&i| self.req.arg(i as usize))
    }
}

/// Classifies `req` for a session authenticated with `rights` (`None`: not authenticated).
///
/// # Errors
/// The `DataError` the client gets: unknown command or arity, `NOAUTH`, a policy refusal,
/// `NOPERM`, or a reserved key.
pub fn classify(
    req: Request,
    policy: &Policy,
    rights: Option<&Rights>,
) -> Result<Classified, DataError> {
    let cmd = CommandTable::get().lookup(&req)?;
    let Some(rights) = rights else {
        return match cmd.kind {
            Kind::Local(Local::Auth | Local::Hello | Local::Quit) => Ok(Classified {
                cmd,
                req,
                keys: SmallVec::new(),
            }),
            _ => Err(DataError::NoAuth),
        };
    };
    check_policy(cmd, &req, policy)?;
    let keys = cmd.key_indices(&req);
    let c = Classified { cmd, req, keys };
    check_rights(&c, rights)?;
    if let Some(k) = c.key_args().find(|k| k.starts_with(INTERNAL_PREFIX)) {
        return Err(DataError::ReservedKey(lossy(k)));
    }
    Ok(c)
}

/// A command the proxy's policy does not let through, and why.
fn check_policy(cmd: &Command, req: &Request, policy: &Policy) -> Result<(), DataError> {
    let name = || display_name(cmd.name);
    match cmd.kind {
        Kind::Admin(_) if !policy.admin_commands => return Err(DataError::AdminDisabled(name())),
        Kind::AdminKeyed if !policy.admin_commands => {
            return Err(if cmd.dangerous {
                DataError::DangerousDisabled(name())
            } else {
                DataError::AdminDisabled(name())
            });
        }
        Kind::Unsupported => return Err(DataError::Unsupported(name())),
        Kind::Refused => return Err(DataError::Refused(name())),
        _ => {}
    }
    if cmd.block_option && has_block_option(req) {
        return Err(DataError::Unsupported(name()));
    }
    if matches!(cmd.name, "SORT" | "SORT_RO") && !policy.admin_commands && sort_reads_patterns(req)
    {
        return Err(DataError::DangerousDisabled(format!("{} BY/GET", name())));
    }
    if cmd.name == "COPY" && copy_names_another_db(req) {
        return Err(DataError::DbOutOfRange);
    }
    if !policy.scripts_confined && cmd.abi_class() & class::SCRIPTING != 0 {
        return Err(DataError::ScriptsUnconfined(name()));
    }
    Ok(())
}

/// What the user's rights forbid: a command class, a key outside the user's prefix, or a
/// command that reaches keys the proxy cannot check (the whole keyspace, or a script's
/// undeclared keys) for a user confined to a prefix.
fn check_rights(c: &Classified, rights: &Rights) -> Result<(), DataError> {
    if rights.classes.is_none() && rights.key_prefix.is_none() {
        return Ok(());
    }
    let no_perm = || DataError::NoPermCommand {
        user: lossy(&rights.user),
        command: display_name(c.cmd.name).to_lowercase(),
    };
    let needs = classes_of(c.cmd) & GATED;
    if let Some(allowed) = rights.classes
        && needs & !allowed != 0
    {
        return Err(no_perm());
    }
    if let Some(prefix) = &rights.key_prefix {
        if needs & (KEYSPACE | class::SCRIPTING) != 0 {
            return Err(no_perm());
        }
        if let Some(k) = c.key_args().find(|k| !k.starts_with(prefix)) {
            return Err(DataError::NoPermKey {
                user: lossy(&rights.user),
                key: lossy(k),
            });
        }
    }
    Ok(())
}

/// The ABI class bits of `cmd`, plus [`KEYSPACE`] for keyspace-wide commands.
pub fn classes_of(cmd: &Command) -> u32 {
    let keyspace = matches!(
        cmd.kind,
        Kind::Admin(Admin::Concat | Admin::Scan | Admin::RandomKey) | Kind::Local(Local::Dbsize)
    ) || matches!(cmd.name, "FLUSHALL" | "FLUSHDB");
    cmd.abi_class() | if keyspace { KEYSPACE } else { 0 }
}

/// XREAD/XREADGROUP with `BLOCK` before `STREAMS`.
fn has_block_option(req: &Request) -> bool {
    req.args()
        .skip(1)
        .take_while(|a| !a.eq_ignore_ascii_case(b"STREAMS"))
        .any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
}

/// SORT's BY (other than `BY nosort`-style constants without `*`) or GET options, which read
/// keys by pattern from anywhere in the keyspace.
fn sort_reads_patterns(req: &Request) -> bool {
    let mut i = 2;
    while i < req.argc() {
        let a = req.arg(i);
        if a.eq_ignore_ascii_case(b"GET") {
            return true;
        }
        if a.eq_ignore_ascii_case(b"BY") {
            if req.get(i + 1).is_some_and(|p| p.contains(&b'*')) {
                return true;
            }
            i += 1;
        } else if a.eq_ignore_ascii_case(b"LIMIT") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"STORE") {
            i += 1;
        }
        i += 1;
    }
    false
}

/// `COPY src dst DB n` with `n` other than 0: clients only ever see database 0.
fn copy_names_another_db(req: &Request) -> bool {
    (3..req.argc()).any(|i| {
        req.arg(i).eq_ignore_ascii_case(b"DB") && req.get(i + 1).is_some_and(|db| db != b"0")
    })
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPEN: Policy = Policy {
        admin_commands: false,
        scripts_confined: true,
    };

    fn run(
        args: &[&str],
        policy: &Policy,
        rights: Option<&Rights>,
    ) -> Result<&'static str, DataError> {
        classify(Request::from_args(args), policy, rights).map(|c| c.cmd.name)
    }

    fn anyone() -> Rights {
        Rights {
            user: Bytes::from_static(b"default"),
            ..Rights::default()
        }
    }

    #[test]
    fn unauthenticated_clients_may_only_authenticate() {
        assert_eq!(run(&["AUTH", "p"], &OPEN, None), Ok("AUTH"));
        assert_eq!(run(&["HELLO", "3"], &OPEN, None), Ok("HELLO"));
        assert_eq!(run(&["GET", "k"], &OPEN, None), Err(DataError::NoAuth));
        assert_eq!(run(&["PING"], &OPEN, None), Err(DataError::NoAuth));
        // An unknown command is still unknown before AUTH (as Redis answers).
        assert!(matches!(
            run(&["NOPE"], &OPEN, None),
            Err(DataError::UnknownCommand(_))
        ));
    }

    #[test]
    fn policy_refuses_admin_dangerous_and_unconfined_scripts() {
        let r = anyone();
        assert!(matches!(
            run(&["FLUSHALL"], &OPEN, Some(&r)),
            Err(DataError::AdminDisabled(_))
        ));
        assert!(matches!(
            run(&["RESTORE", "k", "0", "x"], &OPEN, Some(&r)),
            Err(DataError::DangerousDisabled(_))
        ));
        assert!(matches!(
            run(&["SORT", "l", "BY", "w_*"], &OPEN, Some(&r)),
            Err(DataError::DangerousDisabled(_))
        ));
        assert!(matches!(
            run(&["SORT", "l", "GET", "#"], &OPEN, Some(&r)),
            Err(DataError::DangerousDisabled(_))
        ));
        assert_eq!(
            run(&["SORT", "l", "LIMIT", "0", "5", "ALPHA"], &OPEN, Some(&r)),
            Ok("SORT")
        );
        assert_eq!(
            run(&["SORT", "l", "BY", "nosort"], &OPEN, Some(&r)),
            Ok("SORT")
        );
        assert!(matches!(
            run(&["MIGRATE", "h", "1", "k", "0", "1"], &OPEN, Some(&r)),
            Err(DataError::Refused(_))
        ));
        assert!(matches!(
            run(&["SWAPDB", "0", "1"], &OPEN, Some(&r)),
            Err(DataError::Refused(_))
        ));
        assert_eq!(
            run(&["COPY", "a", "b", "DB", "1"], &OPEN, Some(&r)),
            Err(DataError::DbOutOfRange)
        );
        assert_eq!(
            run(&["COPY", "a", "b", "DB", "0"], &OPEN, Some(&r)),
            Ok("COPY")
        );
        let unconfined = Policy {
            scripts_confined: false,
            ..OPEN
        };
        assert!(matches!(
            run(&["EVAL", "return 1", "0"], &unconfined, Some(&r)),
            Err(DataError::ScriptsUnconfined(_))
        ));
        assert_eq!(run(&["EVAL", "return 1", "0"], &OPEN, Some(&r)), Ok("EVAL"));
        let admin = Policy {
            admin_commands: true,
            ..OPEN
        };
        assert_eq!(
            run(&["RESTORE", "k", "0", "x"], &admin, Some(&r)),
            Ok("RESTORE")
        );
    }

    #[test]
    fn reserved_keys_are_refused_wherever_they_appear() {
        let r = anyone();
        for args in [
            &["SET", "__tessera:marker:k", "1"][..],
            &["MGET", "a", "__tessera:staging:k"],
            &["EVAL", "return 1", "1", "__tessera:temp:x"],
            &["RENAME", "a", "__tessera:marker:a"],
        ] {
            assert!(
                matches!(run(args, &OPEN, Some(&r)), Err(DataError::ReservedKey(_))),
                "{args:?}"
            );
        }
        assert_eq!(run(&["SET", "__tesserax", "1"], &OPEN, Some(&r)), Ok("SET"));
    }

    #[test]
    fn rights_confine_classes_and_keys() {
        let reader = Rights {
            user: Bytes::from_static(b"ro"),
            classes: Some(class::READ),
            key_prefix: None,
        };
        assert_eq!(run(&["GET", "k"], &OPEN, Some(&reader)), Ok("GET"));
        assert_eq!(run(&["PING"], &OPEN, Some(&reader)), Ok("PING"));
        assert!(matches!(
            run(&["SET", "k", "v"], &OPEN, Some(&reader)),
            Err(DataError::NoPermCommand { .. })
        ));
        let tenant = Rights {
            user: Bytes::from_static(b"t1"),
            classes: None,
            key_prefix: Some(Bytes::from_static(b"t1:")),
        };
        assert_eq!(run(&["SET", "t1:k", "v"], &OPEN, Some(&tenant)), Ok("SET"));
        assert!(matches!(
            run(&["MGET", "t1:a", "t2:b"], &OPEN, Some(&tenant)),
            Err(DataError::NoPermKey { .. })
        ));
        assert!(matches!(
            run(&["EVAL", "return 1", "1", "t1:a"], &OPEN, Some(&tenant)),
            Err(DataError::NoPermCommand { .. })
        ));
        assert!(matches!(
            run(&["DBSIZE"], &OPEN, Some(&tenant)),
            Err(DataError::NoPermCommand { .. })
        ));
    }
}
