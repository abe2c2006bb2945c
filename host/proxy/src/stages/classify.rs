//! Stage 2 of the data path: a decoded request becomes a [`Classified`] command, or the error
//! its client gets. Everything about *whether* a command may run is decided here, in this
//! order: the command exists with a valid arity; the client is authenticated; the proxy's
//! policy allows the command (admin, dangerous, refused, unsupported, scripts); the user's
//! rights allow it (command classes, key prefix); no key is in Tessera's reserved namespace.
//! Pure: no I/O, no session state, testable in-process.

use smallvec::SmallVec;
use tessera_plugin_abi::class;

use tessera_model::command::{Command, CommandTable, Kind, Local, Options};
use tessera_model::error::{DataError, display_name};
use tessera_model::migration::INTERNAL_PREFIX;
use tessera_model::router::{SlotId, SlotTable};
use tessera_model::users::{KEYSPACE, User, command_classes};
use tessera_resp::Request;

/// The proxy-wide rules, from the proxy's config and what its backends allow.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// `admin_commands`: cluster-wide admin commands and Redis's `@dangerous` keyed ones.
    pub admin_commands: bool,
    /// Backend connections run as a confined ACL user, so a script can do no more than its
    /// caller may (see `acl`). Without that, scripts and functions are refused.
    pub scripts_confined: bool,
    /// The databases clients may use (`SELECT`, `MOVE`, `COPY … DB`, `SWAPDB`).
    pub databases: u32,
}

impl Policy {
    /// A client's database argument, checked.
    ///
    /// # Errors
    /// Redis's texts for one that is not an integer or out of range.
    pub fn client_db(&self, arg: &[u8]) -> Result<u32, DataError> {
        use tessera_model::databases::{DbArgError, parse_client_db};
        match parse_client_db(arg, self.databases) {
            Ok(db) => Ok(db),
            Err(DbArgError::NotAnInteger) => Err(DataError::Invalid(
                "value is not an integer or out of range".into(),
            )),
            Err(DbArgError::OutOfRange) => Err(DataError::DbOutOfRange),
        }
    }
}

/// A command that may run: its table entry, the request (borrowed: it stays where the decoder
/// put it), and where its keys are.
#[derive(Debug)]
pub struct Classified<'r> {
    pub cmd: &'static Command,
    pub req: &'r Request,
    pub keys: SmallVec<[u32; 4]>,
    /// The hash slot of its first key (slot 0 when it has none), computed once here: the
    /// plan, the hot-key cache and the per-slot counters all read it.
    pub hashed: SlotId,
}

impl Classified<'_> {
    /// Key `i` of the command (an index into `keys`).
    pub fn key(&self, i: usize) -> &[u8] {
        self.req.arg(self.keys[i] as usize)
    }

    pub fn key_args(&self) -> impl Iterator<Item = &[u8]> {
        self.keys.iter().map(|&i| self.req.arg(i as usize))
    }

    /// The one slot every key is in under `table` (slot 0 for a command without keys).
    ///
    /// # Errors
    /// `CROSSSLOT`: keys in different slots, or in different clusters (prefix routes).
    pub fn slot_in(&self, table: &SlotTable) -> Result<SlotId, DataError> {
        let slot = self.first_slot(table);
        let mut others = self.key_args().skip(1).map(|k| table.slot_of(k));
        if others.any(|s| s != slot) {
            return Err(self.cross_cluster(table).unwrap_or(DataError::CrossSlot));
        }
        Ok(slot)
    }

    /// The slot of the first key under `table`: its hash slot, or the slot of the prefix route
    /// that takes it (slot 0 for a command without keys).
    #[inline]
    pub fn first_slot(&self, table: &SlotTable) -> SlotId {
        match self.keys.first() {
            Some(&k) if table.has_routes() => table.slot_of(self.req.arg(k as usize)),
            _ => self.hashed,
        }
    }

    /// `CROSSSLOT` naming the clusters, when the keys are not all in one cluster.
    #[cold]
    pub fn cross_cluster(&self, table: &SlotTable) -> Option<DataError> {
        if !table.has_routes() {
            return None;
        }
        let mut names: Vec<String> = Vec::new();
        for k in self.key_args() {
            let name = table.describe_cluster(table.slot_of(k));
            if !names.contains(&name) {
                names.push(name);
            }
        }
        (names.len() > 1).then(|| DataError::CrossCluster(names.join(", ")))
    }

    /// The command may hold its connection until answered: a blocking command, or XREAD and
    /// XREADGROUP given `BLOCK`.
    pub fn blocks(&self) -> bool {
        match self.cmd.kind {
            Kind::Blocking => true,
            _ => self.cmd.options == Options::Block && Command::xread_blocks(self.req),
        }
    }
}

/// Classifies `req` for a session authenticated as `user` (`None`: not authenticated).
///
/// # Errors
/// The `DataError` the client gets: unknown command or arity, `NOAUTH`, a policy refusal,
/// `NOPERM`, or a reserved key.
pub fn classify<'r>(
    req: &'r Request,
    policy: &Policy,
    user: Option<&User>,
) -> Result<Classified<'r>, DataError> {
    let cmd = CommandTable::get().lookup(req)?;
    let Some(user) = user else {
        return match cmd.kind {
            Kind::Local(Local::Auth | Local::Hello | Local::Quit) => Ok(Classified {
                cmd,
                req,
                keys: SmallVec::new(),
                hashed: SlotId(0),
            }),
            _ => Err(DataError::NoAuth),
        };
    };
    check_policy(cmd, req, policy)?;
    let keys = cmd.key_indices(req);
    let hashed = keys
        .first()
        .map_or(SlotId(0), |&k| SlotId::of_key(req.arg(k as usize)));
    let c = Classified {
        cmd,
        req,
        keys,
        hashed,
    };
    check_rights(&c, user)?;
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
    match cmd.options {
        Options::Plain => {}
        Options::Sort if !policy.admin_commands && sort_reads_patterns(req) => {
            return Err(DataError::DangerousDisabled(format!("{} BY/GET", name())));
        }
        Options::Copy | Options::Db => {
            for i in db_args(cmd.options, req) {
                policy.client_db(req.arg(i))?;
            }
        }
        Options::Block | Options::Sort | Options::ScriptCall | Options::ScriptLoad => {}
    }
    if !policy.scripts_confined && cmd.abi_class() & class::SCRIPTING != 0 {
        return Err(DataError::ScriptsUnconfined(name()));
    }
    Ok(())
}

/// What the user's rights forbid: a command class, a key outside the user's prefix, or a
/// command that reaches keys the proxy cannot check (the whole keyspace, or a script's
/// undeclared keys) for a user confined to a prefix.
fn check_rights(c: &Classified<'_>, user: &User) -> Result<(), DataError> {
    if user.allowed_classes.is_none() && user.key_prefix.is_none() && user.databases.is_none() {
        return Ok(());
    }
    // The databases a command names (the session's own is the session's to check).
    if user.databases.is_some() && matches!(c.cmd.options, Options::Copy | Options::Db) {
        for i in db_args(c.cmd.options, c.req) {
            let db = std::str::from_utf8(c.req.arg(i))
                .ok()
                .and_then(|s| s.parse::<u32>().ok());
            if let Some(db) = db.filter(|&db| !user.may_use_db(db)) {
                return Err(DataError::NoPermDb {
                    user: user.name.as_str().into(),
                    db,
                });
            }
        }
    }
    let no_perm = || DataError::NoPermCommand {
        user: user.name.as_str().into(),
        command: display_name(c.cmd.name).to_lowercase().into(),
    };
    let classes = command_classes(c.cmd.abi_class(), c.cmd.name);
    if !user.allows(classes) {
        return Err(no_perm());
    }
    if let Some(prefix) = &user.key_prefix {
        // Channels are not keys: a confined user's prefix says nothing about them, and the
        // proxy's hub connections are shared (see docs/pubsub.md). What it may follow is the
        // keyspace notifications of its own keys.
        if classes & (KEYSPACE | class::SCRIPTING) != 0
            || (classes & class::PUBSUB != 0 && !own_keyspace_events(c, prefix))
        {
            return Err(no_perm());
        }
        if let Some(k) = c.key_args().find(|k| !user.may_touch(k)) {
            return Err(DataError::NoPermKey {
                user: user.name.as_str().into(),
                key: lossy(k).into(),
            });
        }
    }
    Ok(())
}

/// The pub/sub a user confined to `prefix` may do: follow the keyspace notifications of its
/// own keys, in any database. `SUBSCRIBE` to `__keyspace@<db>__:<a key under the prefix>` or
/// to a `__keyevent@<db>__:<event>` channel, `PSUBSCRIBE` to a pattern whose literal start
/// (before any wildcard) is one of those, and any unsubscribe; a key event's message (its
/// key) is delivered only when the key is under the prefix (`session::pubsub`).
fn own_keyspace_events(c: &Classified<'_>, prefix: &[u8]) -> bool {
    let mut names = (1..c.req.argc()).map(|i| c.req.arg(i));
    let ours = |head: &[u8]| match tessera_model::databases::keyspace_parts(head) {
        Some((kind, _, rest)) => rest
            .strip_prefix(b"__:")
            .is_some_and(|after| kind == b"__keyevent@" || after.starts_with(prefix)),
        None => false,
    };
    match c.cmd.name {
        "UNSUBSCRIBE" | "PUNSUBSCRIBE" => true,
        "SUBSCRIBE" => names.all(ours),
        "PSUBSCRIBE" => names.all(|p| {
            let literal = p
                .iter()
                .position(|b| matches!(b, b'*' | b'?' | b'[' | b'\\'))
                .unwrap_or(p.len());
            ours(&p[..literal])
        }),
        _ => false,
    }
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
/// The arguments of a command that name a client database: `MOVE key db`, `SWAPDB a b`,
/// `COPY src dst DB db` (checked by the policy, mapped to the backends' numbers by the plan).
pub fn db_args(options: Options, req: &Request) -> smallvec::SmallVec<[usize; 2]> {
    let mut out = smallvec::SmallVec::new();
    match options {
        Options::Db if req.arg(0).eq_ignore_ascii_case(b"SWAPDB") => out.extend([1, 2]),
        Options::Db => out.push(2),
        Options::Copy => {
            if let Some(i) = (3..req.argc()).find(|&i| req.arg(i).eq_ignore_ascii_case(b"DB"))
                && i + 1 < req.argc()
            {
                out.push(i + 1);
            }
        }
        _ => {}
    }
    out
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
        databases: 16,
    };

    fn run(args: &[&str], policy: &Policy, user: Option<&User>) -> Result<&'static str, DataError> {
        classify(&Request::from_args(args), policy, user).map(|c| c.cmd.name)
    }

    fn user(name: &str, allowed_classes: Option<u32>, key_prefix: Option<&'static [u8]>) -> User {
        User {
            name: name.into(),
            allowed_classes,
            key_prefix: key_prefix.map(bytes::Bytes::from_static),
            databases: None,
        }
    }

    fn anyone() -> User {
        user("default", None, None)
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
        // SWAPDB is an admin command; database arguments are checked as Redis checks them.
        assert!(matches!(
            run(&["SWAPDB", "0", "1"], &OPEN, Some(&r)),
            Err(DataError::AdminDisabled(_))
        ));
        assert_eq!(
            run(&["COPY", "a", "b", "DB", "1"], &OPEN, Some(&r)),
            Ok("COPY")
        );
        assert_eq!(
            run(&["COPY", "a", "b", "DB", "16"], &OPEN, Some(&r)),
            Err(DataError::DbOutOfRange)
        );
        assert_eq!(run(&["MOVE", "a", "15"], &OPEN, Some(&r)), Ok("MOVE"));
        assert_eq!(
            run(&["MOVE", "a", "-1"], &OPEN, Some(&r)),
            Err(DataError::DbOutOfRange)
        );
        assert!(matches!(
            run(&["MOVE", "a", "x"], &OPEN, Some(&r)),
            Err(DataError::Invalid(_))
        ));
        let one = Policy {
            databases: 1,
            ..OPEN
        };
        assert_eq!(
            run(&["MOVE", "a", "1"], &one, Some(&r)),
            Err(DataError::DbOutOfRange)
        );
        assert_eq!(
            run(&["COPY", "a", "b", "DB", "0"], &one, Some(&r)),
            Ok("COPY")
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
        let reader = user("ro", Some(class::READ), None);
        assert_eq!(run(&["GET", "k"], &OPEN, Some(&reader)), Ok("GET"));
        assert_eq!(run(&["PING"], &OPEN, Some(&reader)), Ok("PING"));
        assert!(matches!(
            run(&["SET", "k", "v"], &OPEN, Some(&reader)),
            Err(DataError::NoPermCommand { .. })
        ));
        let tenant = user("t1", None, Some(b"t1:"));
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
        // Channels are not keys: pub/sub is refused to a user confined to a prefix, but for
        // the keyspace notifications of its own keys.
        for cmd in [
            &["SUBSCRIBE", "__keyspace@0__:t1:k", "__keyevent@0__:set"][..],
            &["PSUBSCRIBE", "__keyspace@0__:t1:*", "__keyevent@0__:*"],
            // Client databases: client 1 is the backends' 2, never the internal database.
            &["SUBSCRIBE", "__keyspace@1__:t1:k", "__keyevent@15__:del"],
            &["UNSUBSCRIBE"],
            &["PUNSUBSCRIBE", "anything"],
        ] {
            assert!(run(cmd, &OPEN, Some(&tenant)).is_ok(), "{cmd:?}");
        }
        for cmd in [
            &["SUBSCRIBE", "t1:c"][..],
            &["SUBSCRIBE", "__keyspace@0__:t1:k", "__keyspace@0__:t2:k"],
            &["SUBSCRIBE", "__keyspace@1__:t2:k"],
            &["PSUBSCRIBE", "__keyspace@*__:t1:*"],
            &["PSUBSCRIBE", "__keyspace@0__:*"],
            &["PSUBSCRIBE", "__keyspace@0__:t*"],
            &["PSUBSCRIBE", "__keyspace@0__:t1?x"],
            &["PSUBSCRIBE", "__keyevent@0__*"],
            &["PSUBSCRIBE", "*"],
            &["PUBLISH", "__keyspace@0__:t1:k", "m"],
            &["PUBLISH", "t1:c", "m"],
            &["SSUBSCRIBE", "t1:c"],
            &["PUBSUB", "CHANNELS"],
        ] {
            assert!(
                matches!(
                    run(cmd, &OPEN, Some(&tenant)),
                    Err(DataError::NoPermCommand { .. })
                ),
                "{cmd:?}"
            );
        }
        assert_eq!(
            run(&["SUBSCRIBE", "c"], &OPEN, Some(&user("all", None, None))),
            Ok("SUBSCRIBE")
        );
    }
}
