//! How a shadow's reply is held against the primary's. Both are in the client's protocol
//! (the shadow connection speaks it), so most replies compare byte for byte; replies whose
//! element order is the server's business (set members, hash fields) compare as multisets;
//! replies that differ by nature (random picks, clocks, cursors, generated ids, TTLs that
//! tick) are not compared at all. Pure: no I/O, no counters.

use tessera_resp::ReplyScanner;

/// How a command's replies are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Byte for byte.
    Exact,
    /// The top-level elements as a multiset (SMEMBERS, HKEYS …).
    Unordered,
    /// The top-level elements as a multiset of (field, value) pairs (HGETALL).
    UnorderedPairs,
    /// Sent, not compared: the reply differs between two correct servers.
    Skip,
}

/// The rule for a command (its upper-case table name, `CONTAINER|SUB` for subcommands).
pub fn rule(name: &str) -> Rule {
    match name {
        // Random, time or server-state dependent.
        "RANDOMKEY" | "SPOP" | "SRANDMEMBER" | "HRANDFIELD" | "ZRANDMEMBER" | "TIME"
        | "LASTSAVE" | "SCAN" | "SSCAN" | "HSCAN" | "ZSCAN" | "INFO" | "TTL" | "PTTL"
        | "OBJECT|IDLETIME" | "OBJECT|FREQ" | "OBJECT|ENCODING" | "MEMORY|USAGE" | "XADD"
        | "XAUTOCLAIM" | "XCLAIM" | "XINFO|STREAM" | "XINFO|GROUPS" | "XINFO|CONSUMERS"
        | "XPENDING" | "DEBUG" | "DUMP" => Rule::Skip,
        _ if name.starts_with("CLIENT") || name.starts_with("CONFIG") => Rule::Skip,
        "SMEMBERS" | "SINTER" | "SUNION" | "SDIFF" | "HKEYS" | "HVALS" | "KEYS" => Rule::Unordered,
        "HGETALL" => Rule::UnorderedPairs,
        _ => Rule::Exact,
    }
}

/// Whether two replies are the same under `rule` (`Skip` never reaches here: true).
pub fn same(rule: Rule, primary: &[u8], shadow: &[u8]) -> bool {
    match rule {
        Rule::Exact | Rule::Skip => primary == shadow,
        Rule::Unordered | Rule::UnorderedPairs => {
            if primary == shadow {
                return true;
            }
            let pairs = rule == Rule::UnorderedPairs;
            match (elements(primary, pairs), elements(shadow, pairs)) {
                (Some((hp, mut a)), Some((hs, mut b))) if hp == hs => {
                    a.sort_unstable();
                    b.sort_unstable();
                    a == b
                }
                _ => false,
            }
        }
    }
}

/// An aggregate reply's header byte and its elements (pairs joined when `pairs`): `*` and `~`
/// count elements, `%` counts pairs (RESP3 maps, always taken as pairs).
fn elements(reply: &[u8], pairs: bool) -> Option<(u8, Vec<&[u8]>)> {
    let kind = *reply.first()?;
    if !matches!(kind, b'*' | b'~' | b'%') {
        return None;
    }
    let end = reply.windows(2).position(|w| w == b"\r\n")?;
    let n: usize = std::str::from_utf8(&reply[1..end]).ok()?.parse().ok()?;
    let (items, group) = match kind {
        b'%' => (n.checked_mul(2)?, 2),
        _ if pairs => (n, 2),
        _ => (n, 1),
    };
    let mut out = Vec::with_capacity(items.min(4096) / group);
    let mut at = end + 2;
    let mut start = at;
    for i in 0..items {
        let len = ReplyScanner::default().next_len(&reply[at..]).ok()??;
        at += len;
        if (i + 1) % group == 0 {
            out.push(&reply[start..at]);
            start = at;
        }
    }
    (at == reply.len() && start == at).then_some((kind, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_and_clock_replies_are_not_compared() {
        for n in [
            "SPOP",
            "RANDOMKEY",
            "TIME",
            "SCAN",
            "CLIENT|ID",
            "XADD",
            "PTTL",
        ] {
            assert_eq!(rule(n), Rule::Skip, "{n}");
        }
        assert_eq!(rule("GET"), Rule::Exact);
    }

    #[test]
    fn set_members_compare_in_any_order() {
        let a = b"*2\r\n$1\r\na\r\n$1\r\nb\r\n";
        let b = b"*2\r\n$1\r\nb\r\n$1\r\na\r\n";
        let c = b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n";
        assert!(same(Rule::Unordered, a, b));
        assert!(!same(Rule::Unordered, a, c));
        assert!(!same(Rule::Exact, a, b));
        let set3 = b"~2\r\n$1\r\nb\r\n$1\r\na\r\n";
        assert!(!same(Rule::Unordered, a, set3), "RESP2 array vs RESP3 set");
    }

    #[test]
    fn hash_pairs_compare_as_pairs() {
        let a = b"*4\r\n$1\r\nf\r\n$1\r\n1\r\n$1\r\ng\r\n$1\r\n2\r\n";
        let b = b"*4\r\n$1\r\ng\r\n$1\r\n2\r\n$1\r\nf\r\n$1\r\n1\r\n";
        let swapped = b"*4\r\n$1\r\nf\r\n$1\r\n2\r\n$1\r\ng\r\n$1\r\n1\r\n";
        assert!(same(Rule::UnorderedPairs, a, b));
        assert!(!same(Rule::UnorderedPairs, a, swapped));
        let m1 = b"%2\r\n$1\r\nf\r\n:1\r\n$1\r\ng\r\n:2\r\n";
        let m2 = b"%2\r\n$1\r\ng\r\n:2\r\n$1\r\nf\r\n:1\r\n";
        assert!(same(Rule::UnorderedPairs, m1, m2));
    }

    #[test]
    fn garbage_never_panics_and_never_matches() {
        for g in [
            &b"*"[..],
            b"*9\r\n",
            b"*-1\r\n",
            b"%99999999999999999999\r\n",
            b"*1\r\n$5\r\nab",
        ] {
            assert!(!same(Rule::Unordered, g, b"*0\r\n"));
        }
    }
}
