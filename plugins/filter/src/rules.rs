//! Matchers: key globs, CIDR networks, and error texts with placeholders.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// A key pattern: `*` matches any run of bytes, `?` one byte, everything else itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glob {
    pattern: Vec<u8>,
}

impl Glob {
    pub(crate) fn new(p: &str) -> Option<Self> {
        (!p.is_empty()).then(|| Self {
            pattern: p.as_bytes().to_vec(),
        })
    }

    /// `Some(prefix)` if the pattern is `prefix*` with no other wildcard: the host can then
    /// select keys by prefix without calling the plugin.
    pub(crate) fn as_prefix(&self) -> Option<&[u8]> {
        let (last, head) = self.pattern.split_last()?;
        (*last == b'*' && !head.iter().any(|&b| b == b'*' || b == b'?')).then_some(head)
    }

    /// Iterative matching with one backtrack point (the last `*`): linear in practice, never
    /// exponential.
    pub(crate) fn matches(&self, s: &[u8]) -> bool {
        let p = &self.pattern;
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            match p.get(pi) {
                Some(b'*') => {
                    star = Some((pi, si));
                    pi += 1;
                }
                Some(&c) if c == b'?' || c == s[si] => {
                    pi += 1;
                    si += 1;
                }
                _ => match star {
                    Some((sp, ss)) => {
                        pi = sp + 1;
                        si = ss + 1;
                        star = Some((sp, ss + 1));
                    }
                    None => return false,
                },
            }
        }
        p[pi..].iter().all(|&b| b == b'*')
    }
}

/// An IP network (`10.0.0.0/8`, `2001:db8::/32`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cidr {
    net: u128,
    mask: u128,
    v4: bool,
}

fn bits(ip: IpAddr) -> (u128, bool) {
    match ip {
        IpAddr::V4(a) => (u128::from(u32::from(a)), true),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => (u128::from(u32::from(v4)), true),
            None => (u128::from(a), false),
        },
    }
}

impl Cidr {
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let (ip, len) = match s.split_once('/') {
            Some((ip, len)) => (ip, Some(len.parse::<u32>().ok()?)),
            None => (s, None),
        };
        let ip: IpAddr = ip.parse().ok()?;
        let (net, v4) = bits(ip);
        let width = if v4 { 32 } else { 128 };
        let len = len.unwrap_or(width);
        if len > width {
            return None;
        }
        let mask = if len == 0 {
            0
        } else {
            (u128::MAX << (width - len)) & (u128::MAX >> (128 - width))
        };
        Some(Self {
            net: net & mask,
            mask,
            v4,
        })
    }

    pub(crate) fn contains(&self, ip: IpAddr) -> bool {
        let (b, v4) = bits(ip);
        v4 == self.v4 && b & self.mask == self.net
    }
}

/// The IP of a client address as the host reports it (`1.2.3.4:5`, `[::1]:5`, or a bare IP).
pub(crate) fn client_ip(addr: &str) -> Option<IpAddr> {
    addr.parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| addr.parse::<IpAddr>())
        .ok()
}

/// An error text with `{command}`, `{key}` and `{max}` filled in, written without allocating.
pub(crate) struct Msg<'a> {
    pub(crate) template: &'a str,
    pub(crate) command: &'a [u8],
    pub(crate) key: &'a [u8],
    pub(crate) max: usize,
}

impl fmt::Display for Msg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.template;
        while let Some(open) = rest.find('{') {
            f.write_str(&rest[..open])?;
            let tail = &rest[open..];
            let (done, skip) = if tail.starts_with("{command}") {
                for &b in self.command {
                    write!(f, "{}", b.to_ascii_uppercase() as char)?;
                }
                (true, 9)
            } else if tail.starts_with("{key}") {
                f.write_str(&String::from_utf8_lossy(self.key))?;
                (true, 5)
            } else if tail.starts_with("{max}") {
                write!(f, "{}", self.max)?;
                (true, 5)
            } else {
                (false, 1)
            };
            if !done {
                f.write_str("{")?;
            }
            rest = &tail[skip..];
        }
        f.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_prefixes_suffixes_and_middles() {
        let g = |p: &str| Glob::new(p).unwrap();
        assert!(g("config:*").matches(b"config:a"));
        assert!(g("config:*").matches(b"config:"));
        assert!(!g("config:*").matches(b"xconfig:a"));
        assert!(g("*:frozen").matches(b"user:1:frozen"));
        assert!(!g("*:frozen").matches(b"user:1:frozen:x"));
        assert!(g("a*b*c").matches(b"aXXbYYc"));
        assert!(!g("a*b*c").matches(b"aXXbYY"));
        assert!(g("user:?").matches(b"user:1"));
        assert!(g("exact").matches(b"exact") && !g("exact").matches(b"exact2"));
        assert_eq!(g("config:*").as_prefix(), Some(&b"config:"[..]));
        assert_eq!(g("*:frozen").as_prefix(), None);
        assert!(g(&"*a".repeat(20)).matches(&b"a".repeat(40)));
        assert!(!g(&"*a".repeat(20)).matches(&b"b".repeat(4000)));
    }

    #[test]
    fn cidrs_match_v4_v6_and_mapped_addresses() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains(client_ip("10.1.2.3:6379").unwrap()));
        assert!(!c.contains(client_ip("11.1.2.3:6379").unwrap()));
        assert!(c.contains(client_ip("[::ffff:10.0.0.1]:1").unwrap()));
        let c6 = Cidr::parse("2001:db8::/32").unwrap();
        assert!(c6.contains(client_ip("[2001:db8::1]:5000").unwrap()));
        assert!(!c6.contains(client_ip("[2001:db9::1]:5000").unwrap()));
        assert!(!c6.contains(client_ip("10.0.0.1:1").unwrap()));
        assert!(Cidr::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("1.2.3.4".parse().unwrap())
        );
        assert!(Cidr::parse("1.2.3.4/33").is_none());
        assert!(Cidr::parse("10.0.0/8").is_none());
    }
}
