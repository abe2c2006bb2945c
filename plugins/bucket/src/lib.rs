//! Tessera bucket plugin: a big hash, set or sorted set under a configured key prefix is stored
//! as N bucket keys spread over slots (naming in `naming.rs`), and clients still see one key.
//! Field commands go to one bucket or are split per bucket; whole-key commands fan out and are
//! merged (by the host where a generic merge is exact, in `on_reply` otherwise). Commands whose
//! result could not be kept exact are refused with `ERR bucket: …`. README.md has the list.

use serde::Deserialize;
use tessera_plugin_sdk::{
    Action, Command, Conn, Manifest, Merge, Out, Plugin, Replies, ReplyAction, ReplyOut, cmd,
};

mod naming;
mod ops;
mod reply;
#[cfg(test)]
mod tests;
mod zrange;

use naming::{BucketHead, Pattern};
use zrange::Pending;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    patterns: Vec<PatternConfig>,
    #[serde(default)]
    expire: ExpireMode,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PatternConfig {
    prefix: String,
    buckets: u32,
}

/// What EXPIRE-family commands do on a bucketed key (README: "Expiry").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ExpireMode {
    /// Set the timeout on every bucket that exists.
    #[default]
    Buckets,
    /// Refuse them.
    Refuse,
}

/// Most buckets per key: a whole-key command becomes one command per bucket.
const MAX_BUCKETS: u32 = 1024;

/// The plugin.
#[derive(Debug)]
pub struct Bucket {
    /// Longest prefix first, so the most specific pattern wins.
    patterns: Vec<Pattern>,
    expire: ExpireMode,
    /// Scratch for splitting (bucket of each element, elements ordered by bucket): kept to
    /// avoid allocating per command.
    of: Vec<u32>,
    order: Vec<u32>,
    starts: Vec<u32>,
    next: Vec<u32>,
    /// ZRANGE-family queries waiting for their replies.
    pending: Pending,
}

/// The bucketed key of a command.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key<'a> {
    pub(crate) name: &'a [u8],
    pub(crate) crc: u32,
    pub(crate) n: u32,
}

impl Key<'_> {
    pub(crate) fn head(&self, i: u32) -> BucketHead {
        BucketHead::new(i, self.crc)
    }
}

/// Operations merged in `on_reply`: the low byte of ctx.
pub(crate) mod op {
    pub(crate) const ANY: u8 = 1;
    pub(crate) const TTL: u8 = 2;
    pub(crate) const TYPE: u8 = 3;
    pub(crate) const SCAN: u8 = 4;
    pub(crate) const ZRANGE: u8 = 5;
}

pub(crate) fn ctx(op: u8, param: u64) -> u64 {
    u64::from(op) | (param << 8)
}

impl Plugin for Bucket {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        let cfg: Config =
            serde_json::from_slice(config).map_err(|e| format!("bucket: bad config: {e}"))?;
        if cfg.patterns.is_empty() {
            return Err("bucket: no patterns".into());
        }
        let mut patterns = Vec::new();
        for p in cfg.patterns {
            if p.prefix.is_empty() {
                return Err("bucket: empty prefix".into());
            }
            if !(1..=MAX_BUCKETS).contains(&p.buckets) {
                return Err(format!(
                    "bucket: prefix {:?}: buckets must be 1..={MAX_BUCKETS}, not {}",
                    p.prefix, p.buckets
                ));
            }
            if patterns
                .iter()
                .any(|q: &Pattern| q.prefix == p.prefix.as_bytes())
            {
                return Err(format!("bucket: prefix {:?} given twice", p.prefix));
            }
            patterns.push(Pattern {
                prefix: p.prefix.into_bytes(),
                buckets: p.buckets,
            });
        }
        patterns.sort_by_key(|p| std::cmp::Reverse(p.prefix.len()));
        // Every command naming a matching key, with its field bytes (they pick the bucket);
        // close events free pending range queries.
        let mut m = Manifest::new().hook_all().class_values().want_close();
        for p in &patterns {
            m = m.prefix(&p.prefix);
        }
        let plugin = Bucket {
            patterns,
            expire: cfg.expire,
            of: Vec::new(),
            order: Vec::new(),
            starts: Vec::new(),
            next: Vec::new(),
            pending: Pending::default(),
        };
        Ok((plugin, m))
    }

    fn on_command(&mut self, conn: Conn, c: &Command<'_>, out: Out<'_>) -> Action {
        let mut nkeys = 0;
        let mut found = None;
        for (i, k) in c.keys() {
            nkeys += 1;
            if found.is_none()
                && let Some(p) = self.patterns.iter().find(|p| k.starts_with(&p.prefix))
            {
                found = Some((i, k, p.buckets));
            }
        }
        let Some((at, name, n)) = found else {
            return Action::PASS;
        };
        if at != 1 && nkeys == 1 {
            return out.deny_fmt(format_args!(
                "ERR bucket: {} is not supported on bucketed key '{}'",
                Upper(c.name()),
                String::from_utf8_lossy(name)
            ));
        }
        if nkeys > 1 {
            return out.deny_fmt(format_args!(
                "ERR bucket: {} naming several keys is not supported with bucketed key '{}'",
                Upper(c.name()),
                String::from_utf8_lossy(name)
            ));
        }
        let key = Key {
            name,
            crc: crc32fast::hash(name),
            n,
        };
        self.route(conn, c, key, out)
    }

    fn on_reply(
        &mut self,
        _conn: Conn,
        ctx: u64,
        replies: &Replies<'_>,
        out: ReplyOut<'_>,
    ) -> ReplyAction {
        reply::merge(self, ctx, replies, out)
    }

    fn on_close(&mut self, conn: Conn) {
        self.pending.drop_conn(conn.0);
    }
}

impl Bucket {
    fn route(&mut self, conn: Conn, c: &Command<'_>, k: Key<'_>, out: Out<'_>) -> Action {
        let n = c.len();
        let arity = |ok: bool| ok.then_some(());
        let check = match c.id() {
            cmd::HSET | cmd::HMSET => arity(n >= 4 && n.is_multiple_of(2)),
            cmd::HSETNX | cmd::HINCRBY | cmd::HINCRBYFLOAT | cmd::ZINCRBY | cmd::ZCOUNT => {
                arity(n == 4)
            }
            cmd::HGET | cmd::HEXISTS | cmd::HSTRLEN | cmd::SISMEMBER | cmd::ZSCORE => arity(n == 3),
            cmd::HDEL
            | cmd::HMGET
            | cmd::SADD
            | cmd::SREM
            | cmd::SMISMEMBER
            | cmd::ZREM
            | cmd::ZMSCORE
            | cmd::HSCAN
            | cmd::SSCAN
            | cmd::ZSCAN => arity(n >= 3),
            cmd::EXPIRE | cmd::PEXPIRE | cmd::EXPIREAT | cmd::PEXPIREAT => arity(n >= 3),
            cmd::ZADD
            | cmd::ZRANGE
            | cmd::ZREVRANGE
            | cmd::ZRANGEBYSCORE
            | cmd::ZREVRANGEBYSCORE => arity(n >= 4),
            _ => arity(n == 2),
        };
        if check.is_none() && ops::supported(c.id()) {
            return out.deny_fmt(format_args!(
                "ERR wrong number of arguments for '{}' command",
                Lower(c.name())
            ));
        }
        match c.id() {
            cmd::HSET | cmd::HDEL | cmd::SADD | cmd::SREM | cmd::ZREM => {
                let width = if c.is(cmd::HSET) { 2 } else { 1 };
                self.split(c, k, 2, width, 0, Merge::Sum, out)
            }
            cmd::HMSET => self.split(c, k, 2, 2, 0, Merge::AllOk, out),
            cmd::HSETNX
            | cmd::HGET
            | cmd::HEXISTS
            | cmd::HSTRLEN
            | cmd::HINCRBY
            | cmd::HINCRBYFLOAT
            | cmd::SISMEMBER
            | cmd::ZSCORE => ops::single(c, k, 2, out),
            cmd::ZINCRBY => ops::single(c, k, 3, out),
            cmd::HMGET | cmd::SMISMEMBER | cmd::ZMSCORE => self.runs(c, k, out),
            cmd::ZADD => self.zadd(c, k, out),
            cmd::HGETALL | cmd::HKEYS | cmd::HVALS | cmd::SMEMBERS => {
                ops::fanout(c, k, Merge::Concat, 0, out)
            }
            cmd::HLEN | cmd::SCARD | cmd::ZCARD | cmd::ZCOUNT => {
                ops::fanout(c, k, Merge::Sum, 0, out)
            }
            cmd::DEL | cmd::UNLINK | cmd::EXISTS | cmd::PERSIST => {
                ops::fanout(c, k, Merge::Plugin, ctx(op::ANY, 0), out)
            }
            cmd::EXPIRE | cmd::PEXPIRE | cmd::EXPIREAT | cmd::PEXPIREAT => {
                if self.expire == ExpireMode::Refuse {
                    return out.deny_fmt(format_args!(
                        "ERR bucket: {} is disabled on bucketed keys (expire: refuse)",
                        Upper(c.name())
                    ));
                }
                if n > 3 {
                    return out.deny_fmt(format_args!(
                        "ERR bucket: {} options (NX XX GT LT) are not supported on bucketed keys",
                        Upper(c.name())
                    ));
                }
                ops::fanout(c, k, Merge::Plugin, ctx(op::ANY, 0), out)
            }
            cmd::TTL | cmd::PTTL | cmd::EXPIRETIME | cmd::PEXPIRETIME => {
                ops::fanout(c, k, Merge::Plugin, ctx(op::TTL, 0), out)
            }
            cmd::TYPE => ops::fanout(c, k, Merge::Plugin, ctx(op::TYPE, 0), out),
            cmd::HSCAN | cmd::SSCAN | cmd::ZSCAN => ops::scan(c, k, out),
            cmd::ZRANGE | cmd::ZREVRANGE | cmd::ZRANGEBYSCORE | cmd::ZREVRANGEBYSCORE => {
                zrange::start(&mut self.pending, conn, c, k, out)
            }
            _ => out.deny_fmt(format_args!(
                "ERR bucket: {} is not supported on bucketed key '{}'",
                Upper(c.name()),
                String::from_utf8_lossy(k.name)
            )),
        }
    }
}

/// Displays bytes upper-cased (command names in errors).
pub(crate) struct Upper<'a>(pub(crate) &'a [u8]);

impl std::fmt::Display for Upper<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0
            .iter()
            .try_for_each(|b| write!(f, "{}", b.to_ascii_uppercase() as char))
    }
}

/// Displays bytes lower-cased (Redis's arity errors use the lower-case name).
pub(crate) struct Lower<'a>(pub(crate) &'a [u8]);

impl std::fmt::Display for Lower<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0
            .iter()
            .try_for_each(|b| write!(f, "{}", b.to_ascii_lowercase() as char))
    }
}

tessera_plugin_sdk::export_plugin!(Bucket);
