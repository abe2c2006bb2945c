//! Inline commands (`SET k "a b"\r\n`, as telnet and health checks send them), split into
//! arguments exactly as Redis 7.0's `sdssplitargs` does, so the proxy sees what Redis would.

use crate::ProtocolError;

/// C `isspace` in the "C" locale: what Redis skips between arguments. Note that inside an
/// unquoted argument only space, tab, `\r` and `\n` end it (`a\x0bb` is one argument).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Splits one inline line (without its line end; the caller has refused NUL bytes, which
/// end the line for Redis's C string functions).
///
/// Outside quotes, bytes are literal; `"` or `'` may start a quoted part anywhere in an
/// argument (`a'b c'` is `ab c`). In double quotes: `\xHH` (two hex digits), `\n \r \t \b \a`,
/// any other `\c` is `c`. In single quotes only `\'` is an escape. A closing quote must be
/// followed by a blank or the end of the line.
///
/// # Errors
/// `UnbalancedQuotes` for an unclosed quote or a closing quote followed by something else.
pub(super) fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i == line.len() {
            return Ok(out);
        }
        // Literal bytes up to a separator or a quote, copied as one run; a quoted part, if
        // one follows, ends the argument.
        let run = line[i..]
            .iter()
            .position(|&c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\''))
            .map_or(line.len(), |p| i + p);
        let mut arg = line[i..run].to_vec();
        i = match line.get(run) {
            Some(&q @ (b'"' | b'\'')) => quoted(line, run + 1, q, &mut arg)?,
            Some(_) => run + 1, // the separator
            None => run,
        };
        out.push(arg);
    }
}

/// Appends the quoted part that starts at `i`, just after the opening quote `q`; returns
/// where the argument ends, just after the closing quote.
fn quoted(line: &[u8], mut i: usize, q: u8, arg: &mut Vec<u8>) -> Result<usize, ProtocolError> {
    loop {
        match line.get(i) {
            None => return Err(ProtocolError::UnbalancedQuotes),
            Some(&c) if c == q => {
                if line.get(i + 1).is_some_and(|&n| !is_space(n)) {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                return Ok(i + 1);
            }
            Some(b'\\') if q == b'"' => i += 1 + double_quoted_escape(&line[i + 1..], arg),
            Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                arg.push(b'\'');
                i += 2;
            }
            Some(&c) => {
                arg.push(c);
                i += 1;
            }
        }
    }
}

/// After a `\` in double quotes: pushes what the escape means and returns how many bytes of
/// `rest` it used. A `\` at the end of the line is literal; the quote is then unclosed.
fn double_quoted_escape(rest: &[u8], arg: &mut Vec<u8>) -> usize {
    match rest {
        [b'x', h, l, ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
            arg.push((hex(*h) << 4) | hex(*l));
            3
        }
        [e, ..] => {
            arg.push(match e {
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'b' => 0x08,
                b'a' => 0x07,
                other => *other,
            });
            1
        }
        [] => {
            arg.push(b'\\');
            0
        }
    }
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}
