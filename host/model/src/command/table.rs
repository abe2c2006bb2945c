//! Lookup by name (and subcommand), the proxy's policy for each command, and key extraction
//! that follows Redis's key specs exactly (numkeys commands, `STREAMS`, `STORE` …).

use std::sync::LazyLock;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::generated::COMMANDS;
use super::spec::*;
use crate::error::DataError;
use tessera_resp::{Request, parse_i64};

/// Dense index of a command in the table, stable for one build: per-command counters and
/// plugin hook bitmaps are arrays indexed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommandId(pub u16);

/// What the proxy does with a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Routed by its keys, which must all share one slot (or to slot 0 when it has none).
    Keyed,
    /// Split by backend and merged in order.
    Split(Split),
    /// Answered by the proxy itself.
    Local(Local),
    /// Sent to every backend; allowed only with `admin_commands = true`.
    Admin(Admin),
    /// Routed by key, but allowed only with `admin_commands = true`: MEMORY USAGE, and the
    /// keyed commands Redis marks `@dangerous` (RESTORE, PFDEBUG; SORT with BY or GET).
    AdminKeyed,
    /// SCRIPT KILL, FUNCTION KILL: sent to every master on the proxy's own connections, not
    /// behind the busy script on the shared ones.
    ScriptKill,
    /// MULTI EXEC DISCARD WATCH UNWATCH: the session's transaction state.
    Transaction(Tx),
    /// May hold its connection until answered (BLPOP, BZPOPMIN, BLMOVE …; XREAD and
    /// XREADGROUP are `Keyed` with `Options::Block`): routed by key like a keyed command, on a
    /// dedicated backend connection.
    Blocking,
    /// WAIT: on every master, after the client's earlier writes.
    Wait,
    /// Script and function libraries (SCRIPT LOAD/EXISTS, FUNCTION LOAD/DELETE/LIST/DUMP):
    /// sent to every master whatever `admin_commands` says, so a script is everywhere.
    Library(Admin),
    /// Publish/subscribe (see `pubsub` and `session::pubsub`).
    PubSub(PubSub),
    /// A Redis feature Tessera does not offer yet.
    Unsupported,
    /// Never passed through a shared proxy (server administration, replication, cluster).
    Refused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tx {
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// MGET: array of values in key order.
    Mget,
    /// MSET: +OK when every part is.
    Mset,
    /// DEL UNLINK EXISTS TOUCH: the sum of the integer replies.
    Sum,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    Ping,
    Echo,
    Quit,
    Hello,
    Auth,
    Select,
    Client,
    Info,
    /// COMMAND and its subcommands: command metadata, the same on every backend.
    Command,
    Time,
    Dbsize,
    /// RESET: the connection back to its state at connect.
    Reset,
    /// SLOWLOG and COMMANDLOG: the proxy's own command log (`telemetry::CommandLog`).
    CommandLog,
    /// CLUSTER SLOTS, SHARDS, NODES, MYID, INFO, and READONLY / READWRITE: the proxies
    /// presented as a Redis Cluster (`proxy::peers`).
    Cluster,
}

/// The pub/sub commands: subscriptions are the session's (through its worker's hub), the rest
/// go to the backends on the proxy's own connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PubSub {
    Subscribe,
    Unsubscribe,
    PSubscribe,
    PUnsubscribe,
    SSubscribe,
    SUnsubscribe,
    /// PUBLISH: to the master of the channel's slot.
    Publish,
    /// SPUBLISH: to the master of the channel's slot (CROSSSLOT rules as for keys).
    SPublish,
    /// PUBSUB CHANNELS, PUBSUB SHARDCHANNELS: the union over every backend.
    Channels,
    /// PUBSUB NUMSUB, PUBSUB SHARDNUMSUB: counts summed per channel over every backend.
    NumSub,
    /// PUBSUB NUMPAT: the sum over every backend.
    NumPat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admin {
    /// Every backend must answer +OK.
    AllOk,
    /// Every backend runs it; the first reply is returned (SCRIPT LOAD gives one SHA).
    First,
    /// Arrays concatenated (KEYS).
    Concat,
    /// SCRIPT EXISTS: an element is 1 only if every backend has the script.
    AllExist,
    /// SCAN with a cursor that encodes the backend index.
    Scan,
    /// RANDOMKEY: a random backend, falling back to the others while they are empty.
    RandomKey,
}

/// One entry of the table.
#[derive(Debug)]
pub struct Command {
    /// Upper-case name; subcommands are `CONTAINER|SUB` (as Redis's ACL names them).
    pub name: &'static str,
    pub id: CommandId,
    pub kind: Kind,
    /// The command may modify data (`write` flag).
    pub write: bool,
    /// Options the policy looks at (found once, when the table is built).
    pub options: Options,
    /// Redis puts it in `@dangerous`.
    pub dangerous: bool,
    /// A keyed read with no side effect that a replica may answer under the read policy
    /// (docs/replica-reads.md): never a script or function, a blocking command, or a write.
    pub replica_read: bool,
    /// Runs a Lua script or a function (EVAL, EVALSHA, FCALL and their `_RO` forms), which
    /// may keep its server busy for as long as it runs.
    pub runs_script: bool,
    /// Redis refuses it inside MULTI (`no-multi`).
    pub no_multi: bool,
    keys_by: KeysBy,
    raw: &'static RawCommand,
}

/// How a command's keys are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeysBy {
    /// Redis's key specs, which match the command's own parse.
    Specs,
    /// SORT: the key, then every `STORE` argument (its spec for STORE is "unknown").
    Sort,
    /// GEORADIUS, GEORADIUSBYMEMBER: the key, then every `STORE`/`STOREDIST` argument from
    /// `options_from` on (the spec's keyword search takes the first; Redis writes the last).
    GeoRadius { options_from: usize },
    /// XREAD, XREADGROUP: the streams after the first `STREAMS` option, found by parsing the
    /// options (a group or consumer named `STREAMS` fools the spec's keyword search).
    Xread,
}

/// A command whose options change what the policy allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Options {
    Plain,
    /// XREAD, XREADGROUP: `BLOCK` makes them blocking.
    Block,
    /// SORT, SORT_RO: `BY` and `GET` read keys by pattern.
    Sort,
    /// COPY: `DB` names another database.
    Copy,
    /// MOVE, SWAPDB: arguments that are database numbers (checked against the databases
    /// clients may use, and mapped to the backends' own).
    Db,
    /// EVALSHA, EVALSHA_RO, FCALL, FCALL_RO: a script or function missing on the server
    /// that answers is recovered (see `session::scripts`).
    ScriptCall,
    /// SCRIPT LOAD: the script's body is kept on every master too (see `session::scripts`).
    ScriptLoad,
}

/// The whole table, built once.
pub struct CommandTable {
    commands: Vec<Command>,
    by_name: FxHashMap<&'static [u8], u16>,
}

static TABLE: LazyLock<CommandTable> = LazyLock::new(CommandTable::build);

/// Names are at most this long; anything longer is unknown without a lookup.
const MAX_NAME: usize = 48;

impl CommandTable {
    pub fn get() -> &'static CommandTable {
        &TABLE
    }

    fn build() -> Self {
        let mut commands = Vec::new();
        for raw in COMMANDS.iter().chain(super::commandlog::COMMANDS) {
            commands.push(Command::new(raw, commands.len()));
            for sub in raw.subcommands {
                commands.push(Command::new(sub, commands.len()));
            }
        }
        for sub in super::newer::SUBCOMMANDS {
            commands.push(Command::new(sub, commands.len()));
        }
        let by_name = commands
            .iter()
            .map(|c| (c.name.as_bytes(), c.id.0))
            .collect();
        Self { commands, by_name }
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    pub fn by_id(&self, id: CommandId) -> &Command {
        &self.commands[id.0 as usize]
    }

    pub fn by_name(&self, name: &str) -> Option<&Command> {
        self.by_name
            .get(name.as_bytes())
            .map(|&i| &self.commands[i as usize])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Command> {
        self.commands.iter()
    }

    /// Finds the command a request names and checks its arity.
    ///
    /// # Errors
    /// Unknown command or subcommand, or a wrong number of arguments, worded as Redis words them.
    pub fn lookup(&self, req: &Request) -> Result<&Command, DataError> {
        let name = req.arg(0);
        let mut buf = [0u8; MAX_NAME * 2 + 1];
        if name.len() > MAX_NAME {
            return Err(DataError::UnknownCommand(
                String::from_utf8_lossy(name).into_owned(),
            ));
        }
        buf[..name.len()].copy_from_slice(name);
        buf[..name.len()].make_ascii_uppercase();
        let Some(&i) = self.by_name.get(&buf[..name.len()]) else {
            return Err(DataError::UnknownCommand(
                String::from_utf8_lossy(name).into_owned(),
            ));
        };
        let mut cmd = &self.commands[i as usize];
        if !cmd.raw.subcommands.is_empty() && req.argc() >= 2 {
            let sub = req.arg(1);
            let full = name.len() + 1 + sub.len();
            let found = (sub.len() <= MAX_NAME)
                .then(|| {
                    buf[name.len()] = b'|';
                    buf[name.len() + 1..full].copy_from_slice(sub);
                    buf[name.len() + 1..full].make_ascii_uppercase();
                    self.by_name.get(&buf[..full])
                })
                .flatten();
            match found {
                Some(&j) => cmd = &self.commands[j as usize],
                None => {
                    return Err(DataError::UnknownSubcommand {
                        container: cmd.name.into(),
                        sub: String::from_utf8_lossy(sub).into(),
                    });
                }
            }
        }
        let arity = cmd.raw.arity;
        let argc = req.argc() as i32;
        if (arity > 0 && argc != arity) || (arity < 0 && argc < -arity) {
            return Err(DataError::WrongArity(
                cmd.name.to_ascii_lowercase().replace('|', " "),
            ));
        }
        Ok(cmd)
    }
}

impl Command {
    fn new(raw: &'static RawCommand, id: usize) -> Self {
        let kind = classify(raw);
        let options = match raw.name {
            "XREAD" | "XREADGROUP" => Options::Block,
            "SORT" | "SORT_RO" => Options::Sort,
            "COPY" => Options::Copy,
            "MOVE" | "SWAPDB" => Options::Db,
            "EVALSHA" | "EVALSHA_RO" | "FCALL" | "FCALL_RO" => Options::ScriptCall,
            "SCRIPT|LOAD" => Options::ScriptLoad,
            _ => Options::Plain,
        };
        let keys_by = match raw.name {
            "SORT" => KeysBy::Sort,
            "GEORADIUS" => KeysBy::GeoRadius { options_from: 6 },
            "GEORADIUSBYMEMBER" => KeysBy::GeoRadius { options_from: 5 },
            "XREAD" | "XREADGROUP" => KeysBy::Xread,
            _ => KeysBy::Specs,
        };
        Self {
            name: raw.name,
            id: CommandId(id as u16),
            kind,
            write: raw.flags & F_WRITE != 0,
            options,
            dangerous: raw.acl & A_DANGEROUS != 0,
            replica_read: replica_read(raw, kind, options),
            runs_script: matches!(
                raw.name,
                "EVAL" | "EVAL_RO" | "EVALSHA" | "EVALSHA_RO" | "FCALL" | "FCALL_RO"
            ),
            no_multi: raw.flags & F_NO_MULTI != 0,
            keys_by,
            raw,
        }
    }

    /// Indices of the key arguments.
    ///
    /// Most commands follow Redis's key specs (`getKeysUsingKeySpecs`). The commands whose
    /// keys sit after an option word are parsed as the command itself parses them, because a
    /// spec's keyword search can disagree with the command: `GEORADIUS … STORE a STORE b`
    /// writes `b` while the spec names `a` (see [`KeysBy`]). Where the command's own parse
    /// and the spec could differ, every candidate is returned, so the prefix check and the
    /// slot check see at least the keys Redis touches.
    ///
    /// Counts a client sends (numkeys) are checked: a count past the arguments names only the
    /// arguments there are, and never overflows.
    pub fn key_indices(&self, req: &Request) -> SmallVec<[u32; 4]> {
        let mut out = SmallVec::new();
        match self.keys_by {
            KeysBy::Specs => self.keys_from_specs(req, &mut out),
            KeysBy::Sort => {
                out.push(1);
                sort_store_keys(req, &mut out);
            }
            KeysBy::GeoRadius { options_from } => {
                out.push(1);
                geo_store_keys(req, options_from, &mut out);
            }
            KeysBy::Xread => {
                if let Some(x) = xread_options(req) {
                    out.extend(x.keys());
                }
            }
        }
        out
    }

    /// Whether XREAD/XREADGROUP is given `BLOCK` (as the command parses its options).
    pub fn xread_blocks(req: &Request) -> bool {
        xread_options(req).is_some_and(|x| x.block)
    }

    fn keys_from_specs(&self, req: &Request, out: &mut SmallVec<[u32; 4]>) {
        let argc = req.argc() as i64;
        for spec in self.raw.keys {
            let first: i64 = match spec.begin {
                Begin::Index(i) => i as i64,
                Begin::Keyword { keyword, startfrom } => {
                    let found = if startfrom >= 0 {
                        (startfrom as i64..argc)
                            .find(|&i| req.arg(i as usize).eq_ignore_ascii_case(keyword.as_bytes()))
                    } else {
                        (1..=argc + startfrom as i64)
                            .rev()
                            .find(|&i| req.arg(i as usize).eq_ignore_ascii_case(keyword.as_bytes()))
                    };
                    match found {
                        Some(i) => i + 1,
                        None => continue,
                    }
                }
                // Only SORT's BY/GET/STORE specs are unknown in 7.0, and SORT is parsed by
                // `sort_store_keys`.
                Begin::Unknown => continue,
            };
            let (first, last, step) = match spec.find {
                Find::Range {
                    lastkey,
                    step,
                    limit,
                } => {
                    let last = if lastkey >= 0 {
                        first + lastkey as i64
                    } else if limit == 0 {
                        argc + lastkey as i64
                    } else {
                        first + (argc - first) / limit as i64 + lastkey as i64
                    };
                    (first, last, step as i64)
                }
                Find::Keynum {
                    keynumidx,
                    firstkey,
                    step,
                } => {
                    let Some(n) = req
                        .get((first + keynumidx as i64) as usize)
                        .and_then(parse_i64)
                    else {
                        continue;
                    };
                    if n <= 0 {
                        continue;
                    }
                    let first = first + firstkey as i64;
                    // A client's count: checked, and never past the arguments there are.
                    let last = (n - 1)
                        .checked_mul(step as i64)
                        .and_then(|span| first.checked_add(span))
                        .unwrap_or(i64::MAX);
                    (first, last, step as i64)
                }
                Find::Unknown => continue,
            };
            let last = last.min(argc - 1);
            let mut i = first.max(1);
            while i <= last && step > 0 {
                out.push(i as u32);
                i += step;
            }
        }
    }

    /// The plugin ABI's class bits (`tessera_plugin_abi::class`) of this command.
    pub fn abi_class(&self) -> u32 {
        use tessera_plugin_abi::class as c;
        let (f, a) = (self.raw.flags, self.raw.acl);
        let mut bits = 0;
        let mut set = |cond: bool, bit: u32| {
            if cond {
                bits |= bit;
            }
        };
        set(f & F_READONLY != 0 || a & A_READ != 0, c::READ);
        set(f & F_WRITE != 0 || a & A_WRITE != 0, c::WRITE);
        set(f & F_ADMIN != 0 || a & A_ADMIN != 0, c::ADMIN);
        set(f & F_PUBSUB != 0 || a & A_PUBSUB != 0, c::PUBSUB);
        set(f & F_BLOCKING != 0 || a & A_BLOCKING != 0, c::BLOCKING);
        set(a & A_SCRIPTING != 0, c::SCRIPTING);
        set(a & A_TRANSACTION != 0, c::TRANSACTION);
        set(a & A_CONNECTION != 0, c::CONNECTION);
        set(self.raw.keys.is_empty(), c::KEYLESS);
        let multi = self.raw.keys.len() > 1
            || self.raw.keys.iter().any(|k| {
                matches!(k.find, Find::Keynum { .. })
                    || matches!(k.find, Find::Range { lastkey, .. } if lastkey != 0)
            });
        set(multi, c::MULTI_KEY);
        set(f & F_FAST != 0 || a & A_FAST != 0, c::FAST);
        set(a & A_DANGEROUS != 0, c::DANGEROUS);
        bits
    }

    /// The command has no key spec at all (as opposed to one that found no keys this time).
    pub fn has_key_specs(&self) -> bool {
        !self.raw.keys.is_empty()
    }
}

/// Whether a replica may answer the command: Redis flags it read-only and not a write, it is
/// routed by key (or an MGET or EXISTS split by key), and nothing about it makes its reply
/// depend on more than its keys (no script, no blocking, no options that read other keys).
/// TOUCH is flagged read-only but exists for its side effect (the keys' access time).
fn replica_read(raw: &RawCommand, kind: Kind, options: Options) -> bool {
    raw.name != "TOUCH"
        && raw.flags & F_READONLY != 0
        && raw.flags & (F_WRITE | F_BLOCKING | F_NOSCRIPT) == 0
        && raw.acl & (A_SCRIPTING | A_BLOCKING | A_DANGEROUS | A_WRITE) == 0
        && options == Options::Plain
        && matches!(
            kind,
            Kind::Keyed | Kind::Split(Split::Mget) | Kind::Split(Split::Sum)
        )
}

/// SORT's `STORE dest` arguments, skipping the arguments of LIMIT, BY and GET (as SORT and
/// Redis's `sortGetKeys` parse them). SORT writes the last one; every one is returned, so a
/// repeated `STORE` cannot hide its real destination from the checks.
fn sort_store_keys(req: &Request, out: &mut SmallVec<[u32; 4]>) {
    let mut i = 2;
    while i < req.argc() {
        let a = req.arg(i);
        if a.eq_ignore_ascii_case(b"LIMIT") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"GET") || a.eq_ignore_ascii_case(b"BY") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"STORE") && i + 1 < req.argc() {
            out.push(i as u32 + 1);
            i += 1;
        }
        i += 1;
    }
}

/// GEORADIUS's and GEORADIUSBYMEMBER's `STORE key` and `STOREDIST key`: Redis writes the
/// last one given (its key spec names the first, the hole the issue-25 review found), so every
/// one is returned.
fn geo_store_keys(req: &Request, from: usize, out: &mut SmallVec<[u32; 4]>) {
    let mut i = from;
    while i + 1 < req.argc() {
        let a = req.arg(i);
        if a.eq_ignore_ascii_case(b"STORE") || a.eq_ignore_ascii_case(b"STOREDIST") {
            out.push(i as u32 + 1);
            i += 1;
        }
        i += 1;
    }
}

/// XREAD's and XREADGROUP's options, parsed as the command parses them (and as Redis's
/// `xreadGetKeys` does): the first `STREAMS` *option*, which a group, consumer or count
/// argument named `STREAMS` is not.
struct XreadOptions {
    streams_at: usize,
    argc: usize,
    block: bool,
}

impl XreadOptions {
    /// The stream keys: the first half of what follows `STREAMS` (the rest are their ids).
    fn keys(&self) -> impl Iterator<Item = u32> + use<> {
        let n = (self.argc - self.streams_at - 1) / 2;
        let first = self.streams_at as u32 + 1;
        first..first + n as u32
    }
}

/// `None` when the command has no well-formed `STREAMS` section (the server answers its own
/// syntax error, and the command touches no key).
fn xread_options(req: &Request) -> Option<XreadOptions> {
    let argc = req.argc();
    let mut block = false;
    let mut i = 1;
    while i < argc {
        let a = req.arg(i);
        if a.eq_ignore_ascii_case(b"BLOCK") {
            block = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"COUNT") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"GROUP") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"NOACK") {
        } else if a.eq_ignore_ascii_case(b"STREAMS") {
            let rest = argc - i - 1;
            return (rest > 0 && rest.is_multiple_of(2)).then_some(XreadOptions {
                streams_at: i,
                argc,
                block,
            });
        } else {
            return None;
        }
        i += 1;
    }
    None
}

/// The proxy's policy, from the command's name first and then from Redis's own flags.
fn classify(raw: &RawCommand) -> Kind {
    match raw.name {
        "PING" => Kind::Local(Local::Ping),
        "ECHO" => Kind::Local(Local::Echo),
        "QUIT" => Kind::Local(Local::Quit),
        "HELLO" => Kind::Local(Local::Hello),
        "AUTH" => Kind::Local(Local::Auth),
        "SELECT" => Kind::Local(Local::Select),
        "INFO" => Kind::Local(Local::Info),
        "TIME" => Kind::Local(Local::Time),
        "DBSIZE" => Kind::Local(Local::Dbsize),
        "CLIENT|SETNAME"
        | "CLIENT|GETNAME"
        | "CLIENT|ID"
        | "CLIENT|SETINFO"
        | "CLIENT|INFO"
        | "CLIENT|LIST"
        | "CLIENT|NO-EVICT"
        | "CLIENT|NO-TOUCH"
        | "CLIENT|REPLY"
        | "CLIENT|MAINT_NOTIFICATIONS"
        | "CLIENT|TRACKING"
        | "CLIENT|CACHING"
        | "CLIENT|GETREDIR"
        | "CLIENT|TRACKINGINFO"
        | "CLIENT|UNBLOCK" => Kind::Local(Local::Client),
        "RESET" => Kind::Local(Local::Reset),
        n if n.starts_with("SLOWLOG|") || n.starts_with("COMMANDLOG|") => {
            Kind::Local(Local::CommandLog)
        }
        n if n == "COMMAND" || n.starts_with("COMMAND|") => Kind::Local(Local::Command),
        "MGET" => Kind::Split(Split::Mget),
        "MSET" => Kind::Split(Split::Mset),
        "DEL" | "UNLINK" | "EXISTS" | "TOUCH" => Kind::Split(Split::Sum),
        "FLUSHALL" | "FLUSHDB" | "SCRIPT|FLUSH" | "FUNCTION|FLUSH" | "FUNCTION|RESTORE"
        | "CONFIG|SET" | "CONFIG|RESETSTAT" => Kind::Admin(Admin::AllOk),
        "CONFIG|GET" => Kind::Admin(Admin::First),
        "SCRIPT|LOAD" | "FUNCTION|LOAD" | "FUNCTION|LIST" | "FUNCTION|DUMP" | "FUNCTION|STATS" => {
            Kind::Library(Admin::First)
        }
        "FUNCTION|DELETE" => Kind::Library(Admin::AllOk),
        "SCRIPT|EXISTS" => Kind::Library(Admin::AllExist),
        "KEYS" => Kind::Admin(Admin::Concat),
        "SCAN" => Kind::Admin(Admin::Scan),
        "RANDOMKEY" => Kind::Admin(Admin::RandomKey),
        "MEMORY|USAGE" => Kind::AdminKeyed,
        "SCRIPT|KILL" | "FUNCTION|KILL" => Kind::ScriptKill,
        "MULTI" => Kind::Transaction(Tx::Multi),
        "EXEC" => Kind::Transaction(Tx::Exec),
        "DISCARD" => Kind::Transaction(Tx::Discard),
        "WATCH" => Kind::Transaction(Tx::Watch),
        "UNWATCH" => Kind::Transaction(Tx::Unwatch),
        "WAIT" => Kind::Wait,
        "SUBSCRIBE" => Kind::PubSub(PubSub::Subscribe),
        "UNSUBSCRIBE" => Kind::PubSub(PubSub::Unsubscribe),
        "PSUBSCRIBE" => Kind::PubSub(PubSub::PSubscribe),
        "PUNSUBSCRIBE" => Kind::PubSub(PubSub::PUnsubscribe),
        "SSUBSCRIBE" => Kind::PubSub(PubSub::SSubscribe),
        "SUNSUBSCRIBE" => Kind::PubSub(PubSub::SUnsubscribe),
        "PUBLISH" => Kind::PubSub(PubSub::Publish),
        "SPUBLISH" => Kind::PubSub(PubSub::SPublish),
        "PUBSUB|CHANNELS" | "PUBSUB|SHARDCHANNELS" => Kind::PubSub(PubSub::Channels),
        "PUBSUB|NUMSUB" | "PUBSUB|SHARDNUMSUB" => Kind::PubSub(PubSub::NumSub),
        "PUBSUB|NUMPAT" => Kind::PubSub(PubSub::NumPat),
        "CLUSTER|SLOTS" | "CLUSTER|SHARDS" | "CLUSTER|NODES" | "CLUSTER|MYID" | "CLUSTER|INFO"
        | "READONLY" | "READWRITE" => Kind::Local(Local::Cluster),
        // On every master, with the admin commands (Redis marks it @dangerous).
        "SWAPDB" => Kind::Admin(Admin::AllOk),
        // The mover's own tools.
        "MIGRATE" | "RESTORE-ASKING" | "ASKING" => Kind::Refused,
        n if n.starts_with("CLUSTER") => Kind::Refused,
        _ if raw.flags & F_PUBSUB != 0 || raw.acl & A_PUBSUB != 0 => Kind::Unsupported,
        "XREAD" | "XREADGROUP" => Kind::Keyed,
        _ if (raw.flags & F_BLOCKING != 0 || raw.acl & A_BLOCKING != 0) && !raw.keys.is_empty() => {
            Kind::Blocking
        }
        // SORT is dangerous for its BY and GET patterns only (they read keys by pattern, in
        // any slot); without them it is a keyed read or write like any other (the policy stage
        // looks at the options).
        "SORT" | "SORT_RO" => Kind::Keyed,
        _ if !raw.keys.is_empty() && raw.acl & A_DANGEROUS != 0 => Kind::AdminKeyed,
        _ if !raw.keys.is_empty() => Kind::Keyed,
        _ if raw.flags & F_ADMIN != 0 || raw.acl & (A_ADMIN | A_DANGEROUS) != 0 => Kind::Refused,
        _ => Kind::Unsupported,
    }
}

/// The bytes of `key` that choose its slot: between the first `{` and the first `}` after
/// it, even when empty; otherwise the whole key (Codis's rule, so data and clients can move).
#[inline]
pub fn hash_key(key: &[u8]) -> &[u8] {
    if let Some(open) = memchr::memchr(b'{', key)
        && let Some(close) = memchr::memchr(b'}', &key[open + 1..])
    {
        return &key[open + 1..open + 1 + close];
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(args: &[&str]) -> Request {
        Request::from_args(args)
    }

    #[test]
    fn only_plain_keyed_reads_may_go_to_a_replica() {
        let t = CommandTable::get();
        let replica = |name: &str| t.by_name(name).unwrap().replica_read;
        for name in [
            "GET", "HGETALL", "ZRANGE", "MGET", "EXISTS", "STRLEN", "XRANGE",
        ] {
            assert!(replica(name), "{name}");
        }
        for name in [
            "SET",
            "INCR",
            "DEL",
            "TOUCH",
            "EVAL_RO",
            "EVALSHA_RO",
            "FCALL_RO",
            "EVAL",
            "BLPOP",
            "XREAD",
            "SORT_RO",
            "MEMORY|USAGE",
            "KEYS",
            "SCAN",
            "WAIT",
        ] {
            assert!(!replica(name), "{name}");
        }
    }

    fn keys(args: &[&str]) -> Vec<String> {
        let r = req(args);
        let cmd = CommandTable::get().lookup(&r).unwrap();
        cmd.key_indices(&r)
            .iter()
            .map(|&i| String::from_utf8_lossy(r.arg(i as usize)).into_owned())
            .collect()
    }

    #[test]
    fn hash_tags_follow_codis_vectors() {
        let cases: [(&str, &str); 10] = [
            ("{abc}", "abc"),
            ("{{{abc1}abc2}", "{{abc1"),
            ("abc1{abc2{abc3}", "abc2{abc3"),
            ("{{{{abc", "{{{{abc"),
            ("{{{{abc}", "{{{abc"),
            ("{{}{{abc", "{"),
            ("abc}{abc", "abc}{abc"),
            ("abc}{123}456", "123"),
            ("{}abc", ""),
            ("plain", "plain"),
        ];
        for (key, want) in cases {
            assert_eq!(hash_key(key.as_bytes()), want.as_bytes(), "key {key}");
        }
    }

    #[test]
    fn keys_follow_each_commands_definition() {
        assert_eq!(keys(&["GET", "a"]), ["a"]);
        assert_eq!(keys(&["SET", "a", "1", "EX", "10"]), ["a"]);
        assert_eq!(keys(&["MSET", "a", "1", "b", "2"]), ["a", "b"]);
        assert_eq!(
            keys(&["EVAL", "return 1", "2", "k1", "k2", "arg"]),
            ["k1", "k2"]
        );
        assert_eq!(
            keys(&["EVAL", "return 1", "0", "arg"]),
            Vec::<String>::new()
        );
        assert_eq!(
            keys(&["ZUNION", "2", "a", "b", "WEIGHTS", "1", "2"]),
            ["a", "b"]
        );
        assert_eq!(keys(&["ZUNIONSTORE", "d", "2", "a", "b"]), ["d", "a", "b"]);
        assert_eq!(
            keys(&["ZINTERCARD", "2", "a", "b", "LIMIT", "1"]),
            ["a", "b"]
        );
        assert_eq!(keys(&["SINTERCARD", "3", "a", "b", "c"]), ["a", "b", "c"]);
        assert_eq!(keys(&["LMPOP", "2", "a", "b", "LEFT"]), ["a", "b"]);
        assert_eq!(keys(&["ZMPOP", "1", "a", "MIN"]), ["a"]);
        assert_eq!(
            keys(&["XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"]),
            ["s1", "s2"]
        );
        assert_eq!(
            keys(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", ">"]),
            ["s1"]
        );
        assert_eq!(keys(&["SORT", "a", "STORE", "b"]), ["a", "b"]);
        assert_eq!(
            keys(&["SORT", "a", "BY", "store", "LIMIT", "0", "1", "GET", "#"]),
            ["a"]
        );
        assert_eq!(keys(&["SORT_RO", "a", "ALPHA"]), ["a"]);
        assert_eq!(keys(&["RENAME", "a", "b"]), ["a", "b"]);
        assert_eq!(keys(&["SMOVE", "a", "b", "m"]), ["a", "b"]);
        assert_eq!(keys(&["LMOVE", "a", "b", "LEFT", "RIGHT"]), ["a", "b"]);
        assert_eq!(keys(&["OBJECT", "ENCODING", "k"]), ["k"]);
        assert_eq!(keys(&["XINFO", "STREAM", "s"]), ["s"]);
        assert_eq!(keys(&["MEMORY", "USAGE", "k"]), ["k"]);
        assert_eq!(keys(&["LCS", "a", "b"]), ["a", "b"]);
        assert_eq!(
            keys(&["GEORADIUS", "g", "0", "0", "1", "km", "STORE", "d"]),
            ["g", "d"]
        );
        assert_eq!(keys(&["BITOP", "AND", "d", "a", "b"]), ["d", "a", "b"]);
        assert_eq!(keys(&["PFMERGE", "d", "a", "b"]), ["d", "a", "b"]);
    }

    /// Issue 25, item 1: a repeated `STORE`/`STOREDIST` names every destination, since Redis
    /// writes the last one while the key spec names the first.
    #[test]
    fn every_store_destination_is_a_key() {
        assert_eq!(
            keys(&[
                "GEORADIUS",
                "t1:{X}g",
                "0",
                "0",
                "1",
                "km",
                "STORE",
                "t1:{X}x",
                "STORE",
                "victim:secret"
            ]),
            ["t1:{X}g", "t1:{X}x", "victim:secret"]
        );
        assert_eq!(
            keys(&[
                "GEORADIUSBYMEMBER",
                "t1:g",
                "m",
                "1",
                "km",
                "STOREDIST",
                "t1:x",
                "STORE",
                "victim"
            ]),
            ["t1:g", "t1:x", "victim"]
        );
        assert_eq!(
            keys(&[
                "GEORADIUS",
                "g",
                "0",
                "0",
                "1",
                "km",
                "COUNT",
                "3",
                "STOREDIST",
                "d"
            ]),
            ["g", "d"]
        );
        // A member named STORE is not an option (BYMEMBER's options start after the unit).
        assert_eq!(keys(&["GEORADIUSBYMEMBER", "g", "STORE", "1", "km"]), ["g"]);
        assert_eq!(
            keys(&["SORT", "a", "STORE", "b", "STORE", "victim"]),
            ["a", "b", "victim"]
        );
        assert_eq!(keys(&["GEORADIUS_RO", "g", "0", "0", "1", "km"]), ["g"]);
    }

    /// XREADGROUP's group or consumer may be named `STREAMS`: the keys follow the `STREAMS`
    /// option the command parses, not the first word that reads `STREAMS`.
    #[test]
    fn xread_keys_follow_the_commands_own_parse() {
        assert_eq!(
            keys(&[
                "XREADGROUP",
                "COUNT",
                "1",
                "GROUP",
                "STREAMS",
                "c",
                "STREAMS",
                "victim",
                "0"
            ]),
            ["victim"]
        );
        assert_eq!(
            keys(&["XREADGROUP", "GROUP", "g", "STREAMS", "STREAMS", "s", ">"]),
            ["s"]
        );
        assert_eq!(
            keys(&["XREAD", "STREAMS", "STREAMS", "victim", "0", "0"]),
            ["STREAMS", "victim"]
        );
        // Malformed: no keys (the server answers its own error).
        assert!(keys(&["XREAD", "STREAMS", "a", "b", "c"]).is_empty());
        assert!(keys(&["XREAD", "BOGUS", "STREAMS", "a", "0"]).is_empty());
        let blocks = |args: &[&str]| Command::xread_blocks(&req(args));
        assert!(blocks(&[
            "XREADGROUP",
            "GROUP",
            "STREAMS",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">"
        ]));
        assert!(!blocks(&["XREAD", "COUNT", "1", "STREAMS", "BLOCK", "0"]));
    }

    /// Issue 25, item 7: a client's numkeys never overflows and never walks past the
    /// arguments (in a debug build it panicked; in release it wrapped, or looped for ages).
    #[test]
    fn numkeys_counts_are_checked() {
        let max = i64::MAX.to_string();
        for args in [
            vec!["SINTERCARD", max.as_str(), "a"],
            vec!["LMPOP", max.as_str(), "a", "LEFT"],
            vec!["ZUNIONSTORE", "d", max.as_str(), "a"],
            vec!["EVAL", "return 1", max.as_str(), "a"],
            vec!["ZINTERCARD", "4611686018427387904", "a"],
            vec!["FCALL", "f", max.as_str(), "a", "b"],
        ] {
            let got = keys(&args);
            assert!(got.len() <= args.len(), "{args:?}: {got:?}");
            assert!(got.iter().all(|k| args.contains(&k.as_str())), "{args:?}");
        }
        assert_eq!(keys(&["SINTERCARD", "5", "a", "b"]), ["a", "b"]);
        assert!(keys(&["SINTERCARD", "-1", "a"]).is_empty());
        assert!(keys(&["SINTERCARD", "0", "a"]).is_empty());
    }

    #[test]
    fn policy_per_command() {
        let t = CommandTable::get();
        let kind = |n: &str| t.by_name(n).unwrap_or_else(|| panic!("{n} missing")).kind;
        assert_eq!(kind("GET"), Kind::Keyed);
        assert_eq!(kind("MGET"), Kind::Split(Split::Mget));
        assert_eq!(kind("UNLINK"), Kind::Split(Split::Sum));
        assert_eq!(kind("FLUSHALL"), Kind::Admin(Admin::AllOk));
        assert_eq!(kind("SCAN"), Kind::Admin(Admin::Scan));
        assert_eq!(kind("BLPOP"), Kind::Blocking);
        assert_eq!(kind("BZMPOP"), Kind::Blocking);
        assert_eq!(kind("BLMOVE"), Kind::Blocking);
        assert_eq!(kind("WAIT"), Kind::Wait);
        assert_eq!(kind("EXEC"), Kind::Transaction(Tx::Exec));
        assert_eq!(kind("SCRIPT|LOAD"), Kind::Library(Admin::First));
        assert_eq!(kind("SCRIPT|FLUSH"), Kind::Admin(Admin::AllOk));
        assert_eq!(kind("RESET"), Kind::Local(Local::Reset));
        assert_eq!(kind("SUBSCRIBE"), Kind::PubSub(PubSub::Subscribe));
        assert_eq!(kind("PUBLISH"), Kind::PubSub(PubSub::Publish));
        assert_eq!(kind("PUBSUB|SHARDNUMSUB"), Kind::PubSub(PubSub::NumSub));
        assert_eq!(kind("PUBSUB|HELP"), Kind::Unsupported);
        assert_eq!(kind("SHUTDOWN"), Kind::Refused);
        assert_eq!(kind("DEBUG"), Kind::Refused);
        assert_eq!(kind("CONFIG|REWRITE"), Kind::Refused);
        assert_eq!(kind("MIGRATE"), Kind::Refused);
        assert_eq!(kind("CLIENT|KILL"), Kind::Refused);
        assert_eq!(kind("XREAD"), Kind::Keyed);
        assert_eq!(kind("EVAL"), Kind::Keyed);
        assert_eq!(kind("RESTORE"), Kind::AdminKeyed);
        assert_eq!(kind("PFDEBUG"), Kind::AdminKeyed);
        assert_eq!(kind("SORT"), Kind::Keyed);
        assert_eq!(kind("SCRIPT|KILL"), Kind::ScriptKill);
        assert_eq!(kind("COMMAND|DOCS"), Kind::Local(Local::Command));
        assert_eq!(kind("SLOWLOG|GET"), Kind::Local(Local::CommandLog));
        assert_eq!(kind("COMMANDLOG|RESET"), Kind::Local(Local::CommandLog));
        assert!(t.len() > 300, "{} commands", t.len());
    }

    #[test]
    fn lookup_is_case_insensitive_and_checks_arity() {
        let t = CommandTable::get();
        assert_eq!(t.lookup(&req(&["get", "k"])).unwrap().name, "GET");
        assert_eq!(
            t.lookup(&req(&["config", "get", "x"])).unwrap().name,
            "CONFIG|GET"
        );
        assert_eq!(
            t.lookup(&req(&["get"])).unwrap_err().to_string(),
            "ERR wrong number of arguments for 'get' command"
        );
        assert!(matches!(
            t.lookup(&req(&["nosuch"])),
            Err(DataError::UnknownCommand(_))
        ));
        assert!(matches!(
            t.lookup(&req(&["config", "nope"])),
            Err(DataError::UnknownSubcommand { .. })
        ));
    }
}
