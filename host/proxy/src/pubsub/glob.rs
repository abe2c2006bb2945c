//! Redis's glob-style matching of a channel against a pattern (`stringmatchlen` in Redis's
//! `util.c`, case-sensitive): `*` any run, `?` any byte, `[abc]`, `[^abc]`, `[a-z]` (ends
//! swapped when reversed), `\x` the byte x. An unterminated class ends with the pattern, as in
//! Redis. Used to count the pattern subscriptions a published message reaches; the servers
//! still do the matching that delivers it.
//!
//! Linear in the pattern times the channel at worst: a `*` remembers only the last one, which
//! is enough because every other token matches exactly one byte.

/// Whether `channel` matches `pattern`.
pub(crate) fn matches(pattern: &[u8], channel: &[u8]) -> bool {
    let (mut p, mut s) = (0, 0);
    // After the last `*`: where the pattern goes on, and the byte of the channel it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while s < channel.len() {
        if pattern.get(p) == Some(&b'*') {
            while pattern.get(p) == Some(&b'*') {
                p += 1;
            }
            star = Some((p, s));
            continue;
        }
        if p < pattern.len() {
            let (hit, len) = token(pattern, p, channel[s]);
            if hit {
                p += len;
                s += 1;
                continue;
            }
        }
        match star {
            // The last `*` takes one more byte, and the rest is tried again after it.
            Some((after, at)) => {
                p = after;
                s = at + 1;
                star = Some((after, at + 1));
            }
            None => return false,
        }
    }
    while pattern.get(p) == Some(&b'*') {
        p += 1;
    }
    p == pattern.len()
}

/// Whether byte `c` matches the one-byte token at `pattern[at..]`, and the token's length.
fn token(pattern: &[u8], at: usize, c: u8) -> (bool, usize) {
    match pattern[at] {
        b'?' => (true, 1),
        b'\\' if at + 1 < pattern.len() => (pattern[at + 1] == c, 2),
        b'[' => class(pattern, at, c),
        x => (x == c, 1),
    }
}

/// A `[…]` class at `pattern[at]`.
fn class(pattern: &[u8], at: usize, c: u8) -> (bool, usize) {
    let mut i = at + 1;
    let not = pattern.get(i) == Some(&b'^');
    if not {
        i += 1;
    }
    let mut hit = false;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 < pattern.len() => {
                hit |= pattern[i + 1] == c;
                i += 2;
            }
            b']' => {
                i += 1;
                break;
            }
            lo if i + 2 < pattern.len() && pattern[i + 1] == b'-' => {
                let hi = pattern[i + 2];
                hit |= (lo.min(hi)..=lo.max(hi)).contains(&c);
                i += 3;
            }
            x => {
                hit |= x == c;
                i += 1;
            }
        }
    }
    (hit != not, i - at)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn matches_as_redis_does() {
        let yes: &[(&str, &str)] = &[
            ("*", ""),
            ("*", "news"),
            ("news.*", "news.art"),
            ("news.*", "news."),
            ("n?ws", "news"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("h[b-a]llo", "hallo"),
            ("a*b*c", "axxbyyc"),
            ("*a*a*a", "aaaa"),
            ("\\*x", "*x"),
            ("a\\", "a\\"),
            ("[\\]]", "]"),
            ("h[ab", "hb"),
            ("**x", "x"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes()), "{p} should match {s}");
        }
        let no: &[(&str, &str)] = &[
            ("news.*", "news"),
            ("n?ws", "nws"),
            ("h[^e]llo", "hello"),
            ("h[a-b]llo", "hcllo"),
            ("a*b*c", "axxbyy"),
            ("\\*x", "ax"),
            ("[]", "a"),
            ("?", ""),
            ("abc", "abcd"),
            ("News", "news"),
        ];
        for (p, s) in no {
            assert!(
                !matches(p.as_bytes(), s.as_bytes()),
                "{p} should not match {s}"
            );
        }
    }
}
