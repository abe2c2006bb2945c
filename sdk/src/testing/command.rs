//! [`TestCommand`]: a client command as the host would describe it (key flags, class bits,
//! ABI id), built from strings with a small key-position and class rule for common commands.

use tessera_plugin_abi::{class, command_id};

/// A command to feed to a [`super::Harness`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCommand {
    pub(crate) args: Vec<Vec<u8>>,
    pub(crate) keys: Vec<bool>,
    pub(crate) class: u32,
    pub(crate) id: u16,
}

/// Builds a command from strings: `command(&["SET", "k", "v"])`. Keys and classes follow
/// [`key_positions`] and [`classes`]; override them with [`TestCommand::with_keys`] /
/// [`TestCommand::with_class`].
pub fn command(args: &[&str]) -> TestCommand {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    command_bytes(&args)
}

/// [`command`] with byte arguments.
pub fn command_bytes(args: &[&[u8]]) -> TestCommand {
    let name = String::from_utf8_lossy(args.first().copied().unwrap_or_default()).to_uppercase();
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    let positions = key_positions(&name, &args);
    let mut keys = vec![false; args.len()];
    for &p in &positions {
        if let Some(k) = keys.get_mut(p) {
            *k = true;
        }
    }
    let mut class = classes(&name);
    if positions.is_empty() {
        class |= class::KEYLESS;
    }
    if positions.len() > 1 || is_multi_key(&name) {
        class |= class::MULTI_KEY;
    }
    TestCommand {
        id: command_id(&name),
        args,
        keys,
        class,
    }
}

impl TestCommand {
    /// Marks exactly these argument indexes as keys.
    pub fn with_keys(mut self, idx: &[usize]) -> Self {
        self.keys = (0..self.args.len()).map(|i| idx.contains(&i)).collect();
        self
    }

    /// Replaces the class bits.
    pub fn with_class(mut self, bits: u32) -> Self {
        self.class = bits;
        self
    }

    /// The ABI command id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The class bits.
    pub fn class(&self) -> u32 {
        self.class
    }

    /// The arguments, the name first.
    pub fn args(&self) -> &[Vec<u8>] {
        &self.args
    }

    /// The keys.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.args
            .iter()
            .zip(&self.keys)
            .filter(|(_, k)| **k)
            .map(|(a, _)| a.as_slice())
    }

    /// The lengths of its values: the arguments after the name that are not keys.
    pub fn value_lens(&self) -> impl Iterator<Item = usize> + '_ {
        (1..self.args.len())
            .filter(|&i| !self.is_key(i))
            .map(|i| self.args[i].len())
    }

    /// Whether argument `i` is a key.
    pub fn is_key(&self, i: usize) -> bool {
        self.keys.get(i).copied().unwrap_or(false)
    }
}

const KEYLESS: &[&str] = &[
    "ACL",
    "AUTH",
    "BGREWRITEAOF",
    "BGSAVE",
    "CLIENT",
    "CLUSTER",
    "COMMAND",
    "CONFIG",
    "DBSIZE",
    "DEBUG",
    "DISCARD",
    "ECHO",
    "EXEC",
    "FAILOVER",
    "FLUSHALL",
    "FLUSHDB",
    "FUNCTION",
    "HELLO",
    "INFO",
    "KEYS",
    "LASTSAVE",
    "LATENCY",
    "MODULE",
    "MONITOR",
    "MULTI",
    "PING",
    "PSUBSCRIBE",
    "PUBLISH",
    "PUNSUBSCRIBE",
    "QUIT",
    "RANDOMKEY",
    "REPLICAOF",
    "RESET",
    "ROLE",
    "SAVE",
    "SCAN",
    "SCRIPT",
    "SELECT",
    "SHUTDOWN",
    "SLAVEOF",
    "SLOWLOG",
    "SUBSCRIBE",
    "SWAPDB",
    "TIME",
    "UNSUBSCRIBE",
    "UNWATCH",
    "WAIT",
];
const ALL_KEYS: &[&str] = &[
    "DEL",
    "EXISTS",
    "MGET",
    "PFCOUNT",
    "PFMERGE",
    "SDIFF",
    "SDIFFSTORE",
    "SINTER",
    "SINTERSTORE",
    "SUNION",
    "SUNIONSTORE",
    "TOUCH",
    "UNLINK",
    "WATCH",
];
const TWO_KEYS: &[&str] = &[
    "BLMOVE",
    "COPY",
    "LMOVE",
    "RENAME",
    "RENAMENX",
    "RPOPLPUSH",
    "SMOVE",
];

fn is_multi_key(name: &str) -> bool {
    ALL_KEYS.contains(&name)
        || TWO_KEYS.contains(&name)
        || matches!(
            name,
            "MSET" | "MSETNX" | "EVAL" | "EVALSHA" | "BLPOP" | "BRPOP"
        )
}

/// The key positions the fake uses: keyless admin/connection commands have none; DEL, EXISTS,
/// MGET … take every argument; MSET every other one; RENAME-like commands two; EVAL / EVALSHA /
/// FCALL `numkeys`; BLPOP / BRPOP all but the timeout; OBJECT / MEMORY argument 2; ZUNIONSTORE-like the destination and
/// `numkeys`; anything else argument 1.
pub fn key_positions(name: &str, args: &[Vec<u8>]) -> Vec<usize> {
    let n = args.len();
    let numkeys = |at: usize| -> usize {
        args.get(at)
            .and_then(|a| std::str::from_utf8(a).ok()?.parse().ok())
            .unwrap_or(0)
    };
    match name {
        _ if KEYLESS.contains(&name) || n < 2 => Vec::new(),
        _ if ALL_KEYS.contains(&name) => (1..n).collect(),
        _ if TWO_KEYS.contains(&name) => (1..n.min(3)).collect(),
        "MSET" | "MSETNX" => (1..n).step_by(2).collect(),
        "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO" | "FCALL" | "FCALL_RO" => {
            (3..(3 + numkeys(2)).min(n)).collect()
        }
        "BLPOP" | "BRPOP" | "BZPOPMIN" | "BZPOPMAX" => (1..n - 1).collect(),
        "OBJECT" | "MEMORY" => (2..n.min(3)).collect(),
        "ZUNIONSTORE" | "ZINTERSTORE" | "ZDIFFSTORE" => std::iter::once(1)
            .chain(3..(3 + numkeys(2)).min(n))
            .collect(),
        _ => vec![1],
    }
}

const WRITE: &[&str] = &[
    "APPEND",
    "COPY",
    "DECR",
    "DECRBY",
    "DEL",
    "EXPIRE",
    "EXPIREAT",
    "FLUSHALL",
    "FLUSHDB",
    "GETDEL",
    "GETEX",
    "GETSET",
    "HDEL",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HMSET",
    "HSET",
    "HSETNX",
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "LINSERT",
    "LMOVE",
    "LPOP",
    "LPUSH",
    "LREM",
    "LSET",
    "LTRIM",
    "MOVE",
    "MSET",
    "MSETNX",
    "PERSIST",
    "PEXPIRE",
    "PEXPIREAT",
    "PFADD",
    "PFMERGE",
    "PSETEX",
    "RENAME",
    "RENAMENX",
    "RESTORE",
    "RPOP",
    "RPOPLPUSH",
    "RPUSH",
    "SADD",
    "SDIFFSTORE",
    "SET",
    "SETBIT",
    "SETEX",
    "SETNX",
    "SETRANGE",
    "SINTERSTORE",
    "SMOVE",
    "SPOP",
    "SREM",
    "SUNIONSTORE",
    "UNLINK",
    "XADD",
    "ZADD",
    "ZDIFFSTORE",
    "ZINCRBY",
    "ZINTERSTORE",
    "ZPOPMAX",
    "ZPOPMIN",
    "ZREM",
    "ZUNIONSTORE",
];
const READ: &[&str] = &[
    "DBSIZE",
    "DUMP",
    "EXISTS",
    "EXPIRETIME",
    "GET",
    "GETRANGE",
    "HEXISTS",
    "HGET",
    "HGETALL",
    "HKEYS",
    "HLEN",
    "HMGET",
    "HRANDFIELD",
    "HSCAN",
    "HSTRLEN",
    "HVALS",
    "KEYS",
    "LINDEX",
    "LLEN",
    "LRANGE",
    "MGET",
    "PTTL",
    "RANDOMKEY",
    "SCAN",
    "SCARD",
    "SDIFF",
    "SINTER",
    "SISMEMBER",
    "SMEMBERS",
    "SMISMEMBER",
    "SRANDMEMBER",
    "SSCAN",
    "STRLEN",
    "SUNION",
    "TTL",
    "TYPE",
    "ZCARD",
    "ZCOUNT",
    "ZMSCORE",
    "ZRANGE",
    "ZRANGEBYLEX",
    "ZRANGEBYSCORE",
    "ZRANK",
    "ZREVRANGE",
    "ZREVRANGEBYSCORE",
    "ZSCAN",
    "ZSCORE",
];
const ADMIN: &[&str] = &[
    "ACL",
    "BGREWRITEAOF",
    "BGSAVE",
    "CLUSTER",
    "CONFIG",
    "DEBUG",
    "FAILOVER",
    "LASTSAVE",
    "LATENCY",
    "MODULE",
    "MONITOR",
    "REPLICAOF",
    "SAVE",
    "SHUTDOWN",
    "SLAVEOF",
    "SLOWLOG",
];
const DANGEROUS: &[&str] = &[
    "ACL",
    "BGREWRITEAOF",
    "BGSAVE",
    "CLUSTER",
    "CONFIG",
    "DEBUG",
    "FAILOVER",
    "FLUSHALL",
    "FLUSHDB",
    "INFO",
    "KEYS",
    "LASTSAVE",
    "LATENCY",
    "MIGRATE",
    "MODULE",
    "MONITOR",
    "REPLICAOF",
    "RESTORE",
    "ROLE",
    "SAVE",
    "SHUTDOWN",
    "SLAVEOF",
    "SLOWLOG",
    "SORT",
    "SWAPDB",
];
const CONNECTION: &[&str] = &[
    "AUTH", "CLIENT", "ECHO", "HELLO", "PING", "QUIT", "RESET", "SELECT",
];
const FAST: &[&str] = &[
    "EXISTS",
    "GET",
    "HEXISTS",
    "HGET",
    "HLEN",
    "HSET",
    "INCR",
    "PING",
    "SADD",
    "SCARD",
    "SET",
    "SISMEMBER",
    "TTL",
    "TYPE",
    "ZADD",
    "ZCARD",
    "ZSCORE",
];

/// The class bits the fake gives a command (besides KEYLESS / MULTI_KEY, which come from the
/// key positions): a reduced copy of Redis's command flags and ACL categories.
pub fn classes(name: &str) -> u32 {
    let mut c = 0;
    for (list, bit) in [
        (WRITE, class::WRITE),
        (READ, class::READ),
        (ADMIN, class::ADMIN),
        (DANGEROUS, class::DANGEROUS),
        (CONNECTION, class::CONNECTION),
        (FAST, class::FAST),
    ] {
        if list.contains(&name) {
            c |= bit;
        }
    }
    match name {
        "BLPOP" | "BRPOP" | "BLMOVE" | "BZPOPMIN" | "BZPOPMAX" => c |= class::BLOCKING,
        "SUBSCRIBE" | "PSUBSCRIBE" | "PUBLISH" | "UNSUBSCRIBE" | "PUNSUBSCRIBE" => {
            c |= class::PUBSUB
        }
        "EVAL" | "EVALSHA" | "FCALL" | "SCRIPT" | "FUNCTION" => c |= class::SCRIPTING,
        "MULTI" | "EXEC" | "DISCARD" | "WATCH" | "UNWATCH" => c |= class::TRANSACTION,
        _ => {}
    }
    c
}
