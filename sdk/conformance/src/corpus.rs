//! The commands the suite sends, described as a proxy describes them to plugins: the ABI id
//! and class bits from the proxy's own command table (`tessera-model`, through the mapping the
//! proxy uses), key flags from the same key extraction, values elided unless the manifest asks.

use tessera_model::command::CommandTable;
use tessera_plugin_abi::ArgIn;
use tessera_resp::Request;

/// One client command as the host hands it to a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    pub args: Vec<Vec<u8>>,
    pub id: u16,
    pub class: u32,
    pub keys: Vec<bool>,
}

impl Described {
    /// Describes `args` as the proxy would; `None` for a command the proxy refuses before any
    /// plugin sees it (unknown, wrong arity).
    pub fn new<A: AsRef<[u8]>>(args: &[A]) -> Option<Self> {
        let req = Request::from_args(args);
        let cmd = CommandTable::get().lookup(&req).ok()?;
        let mut keys = vec![false; args.len()];
        for i in cmd.key_indices(&req) {
            if let Some(k) = keys.get_mut(i as usize) {
                *k = true;
            }
        }
        Some(Self {
            args: args.iter().map(|a| a.as_ref().to_vec()).collect(),
            // What the proxy's `plugins::abi_of` computes for it.
            id: tessera_plugin_abi::command_id(cmd.name),
            class: cmd.abi_class(),
            keys,
        })
    }

    /// A command the proxy does not know (ABI id 0, no class, no keys): only a plugin that
    /// hooks every command sees one.
    pub fn unknown<A: AsRef<[u8]>>(args: &[A]) -> Self {
        Self {
            args: args.iter().map(|a| a.as_ref().to_vec()).collect(),
            id: 0,
            class: 0,
            keys: vec![false; args.len()],
        }
    }

    /// The argument table: names and keys always copied, other arguments only with `values`
    /// (the proxy's rule, `session::plugins::args_iter`).
    pub fn table(&self, values: bool) -> Vec<ArgIn<'_>> {
        self.args
            .iter()
            .zip(&self.keys)
            .enumerate()
            .map(|(i, (a, &key))| ArgIn {
                bytes: a,
                key,
                elide: !values && i != 0 && !key,
            })
            .collect()
    }

    /// The keys.
    pub fn key_args(&self) -> impl Iterator<Item = &[u8]> {
        self.args
            .iter()
            .zip(&self.keys)
            .filter(|(_, k)| **k)
            .map(|(a, _)| a.as_slice())
    }

    /// How the report names it: the arguments, long ones cut.
    pub fn label(&self) -> String {
        let words: Vec<String> = self
            .args
            .iter()
            .take(6)
            .map(|a| {
                // Escaped: keys may be binary, and the report goes to a terminal.
                let s = a[..a.len().min(24)].escape_ascii().to_string();
                if a.len() > 24 {
                    format!("{s}…({} B)", a.len())
                } else {
                    s
                }
            })
            .collect();
        let more = if self.args.len() > 6 { " …" } else { "" };
        format!("{}{more}", words.join(" "))
    }
}

/// Commands of every class and shape. AUTH, HELLO and QUIT are absent: the proxy answers them
/// itself and never shows them to plugins.
const COMMANDS: &[&[&str]] = &[
    &["GET", "k"],
    &["get", "user:1000:name"],
    &["SET", "k", "v"],
    &["SET", "user:1000:name", "alice", "EX", "60"],
    &["SET", "frozen:1", "x"],
    &["APPEND", "k", "more"],
    &["GETRANGE", "k", "0", "3"],
    &["MGET", "k1", "k2", "k3"],
    &["MSET", "k1", "v1", "k2", "v2"],
    &["DEL", "k1", "k2"],
    &["EXISTS", "k"],
    &["INCR", "counter"],
    &["INCRBY", "counter", "5"],
    &["EXPIRE", "k", "10"],
    &["TTL", "k"],
    &["TYPE", "k"],
    &["HSET", "h", "f1", "v1", "f2", "v2"],
    &["HGET", "h", "f1"],
    &["HGETALL", "h"],
    &["LPUSH", "l", "a", "b"],
    &["LRANGE", "l", "0", "-1"],
    &["BLPOP", "l", "1"],
    &["SADD", "s", "m"],
    &["SMEMBERS", "s"],
    &["ZADD", "z", "1", "m"],
    &["ZRANGE", "z", "0", "-1"],
    &["XADD", "st", "*", "f", "v"],
    &["XREAD", "COUNT", "1", "STREAMS", "st", "0"],
    &["XREAD", "BLOCK", "10", "STREAMS", "st", "0"],
    &["PUBLISH", "ch", "msg"],
    &["EVAL", "return 1", "0"],
    &["MULTI"],
    &["EXEC"],
    &["WAIT", "0", "0"],
    &["PING"],
    &["ECHO", "hi"],
    &["DBSIZE"],
    &["INFO"],
    &["KEYS", "*"],
    &["SCAN", "0", "MATCH", "*", "COUNT", "10"],
    &["FLUSHALL"],
    &["FLUSHDB"],
    &["CONFIG", "GET", "maxmemory"],
    &["CONFIG", "SET", "maxmemory", "1mb"],
    &["CLIENT", "SETNAME", "app"],
    &["CLIENT", "LIST"],
    &["SELECT", "0"],
];

/// The corpus: [`COMMANDS`], plus keyed commands on keys under each of the manifest's
/// prefixes (a plugin that hooks only `big:` keys must be reached too).
pub fn corpus(prefixes: &[Vec<u8>]) -> Vec<Described> {
    let mut out: Vec<Described> = COMMANDS.iter().filter_map(|c| Described::new(c)).collect();
    for p in prefixes {
        let key = |s: &str| [p.as_slice(), s.as_bytes()].concat();
        let shapes: [Vec<Vec<u8>>; 4] = [
            vec![b"GET".to_vec(), key("k")],
            vec![b"SET".to_vec(), key("k"), b"v".to_vec()],
            vec![b"DEL".to_vec(), key("k1"), key("k2")],
            vec![b"HSET".to_vec(), key("h"), b"f".to_vec(), b"v".to_vec()],
        ];
        out.extend(shapes.iter().filter_map(|a| Described::new(a)));
    }
    out
}

/// Awkward but valid commands: empty and binary keys, a thousand arguments, a mixed-case
/// name, a command the proxy does not know.
pub fn hostile(prefixes: &[Vec<u8>]) -> Vec<Described> {
    let mut keys: Vec<Vec<u8>> = vec![Vec::new(), b"\0\xff\r\n".to_vec()];
    for p in prefixes {
        keys.push(p.clone());
        keys.push([p.as_slice(), b"\0\xff"].concat());
    }
    let mut out = Vec::new();
    for k in &keys {
        out.extend(Described::new(&[b"GET".as_slice(), k]));
        out.extend(Described::new(&[b"SET".as_slice(), k, b"\0\xff\xfe"]));
        let mut del = vec![b"DEL".to_vec()];
        del.extend((0..1000).map(|i| [k.as_slice(), format!("{i}").as_bytes()].concat()));
        out.extend(Described::new(&del));
    }
    out.extend(Described::new(&["sEt", "MixedCase", ""]));
    out.push(Described::unknown(&["NOSUCHCOMMAND", "a", "b"]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_corpus_command_is_one_the_proxy_accepts() {
        for c in COMMANDS {
            assert!(Described::new(c).is_some(), "{c:?}");
        }
        let set = Described::new(&["SET", "k", "v"]).unwrap();
        assert_eq!(set.keys, [false, true, false]);
        assert_eq!(set.id, tessera_plugin_abi::cmd::SET);
        assert!(set.class & tessera_plugin_abi::class::WRITE != 0);
        let elided = set.table(false);
        assert!(elided[2].elide && !elided[1].elide && !elided[0].elide);
        assert_eq!(corpus(&[b"p:".to_vec()]).len(), COMMANDS.len() + 4);
    }
}
