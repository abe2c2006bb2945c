//! The proxy's command log (Valkey 8.1's `COMMANDLOG`, Redis's `SLOWLOG`): the latest commands
//! that were slow, sent a large request or got a large reply, measured by this proxy. One log
//! per type for the whole proxy (every worker thread writes into it), newest first, each entry
//! bounded (32 arguments of 128 bytes, as Redis keeps them) and each log bounded by its
//! `max_len`. The session measures and asks [`CommandLog::wants`]; `SLOWLOG`/`COMMANDLOG`
//! replies are rendered by `session::commandlog`, the JSON of `GET /api/proxy/commandlog` here.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::clients::ClientInfo;
use tessera_wire::telemetry::{EntryView, LogType};

/// Arguments kept per entry; past it the last one says how many more there were (Redis's
/// `SLOWLOG_ENTRY_MAX_ARGC`).
const MAX_ARGS: usize = 32;
/// Bytes kept per argument; a longer one ends with how many more bytes it had (Redis's
/// `SLOWLOG_ENTRY_MAX_STRING`).
const MAX_ARG_BYTES: usize = 128;
/// The most entries one log may be configured to keep: with the bounds above, one entry holds
/// at most ~6 KiB, so the three logs together at most ~180 MiB (~2.3 MiB at the default 128).
pub const COMMANDLOG_MAX_LEN: usize = 10_000;

/// Thresholds and lengths, from proxy.toml. A negative threshold or a zero length disables a
/// log; a threshold of 0 logs every command.
#[derive(Debug, Clone, Copy)]
pub struct CommandLogSettings {
    pub slow_us: i64,
    pub slow_max_len: usize,
    pub request_bytes: i64,
    pub request_max_len: usize,
    pub reply_bytes: i64,
    pub reply_max_len: usize,
}

/// One logged command: what the three logs share of it.
#[derive(Debug)]
pub struct Call {
    /// The arguments, truncated as Redis truncates them (passwords redacted).
    pub args: Vec<Bytes>,
    pub client_addr: SocketAddr,
    pub client_name: Bytes,
    /// The user the client ran as: a user confined to a key prefix is shown only its own
    /// user's entries (`CommandLog::get_of`).
    pub user: Bytes,
}

/// One entry of one log.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Unique in its log for the life of the proxy (RESET does not restart it).
    pub id: u64,
    /// Unix time in seconds when the reply was complete.
    pub time: u64,
    /// µs for `slow`, bytes for the others.
    pub value: u64,
    pub call: Arc<Call>,
}

/// What the session measured of one command.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// From dispatch to the reply complete in the proxy; `None` for a command that waits by
    /// design (blocking commands, WAIT), which the slow log leaves out.
    pub duration: Option<Duration>,
    pub bytes_in: usize,
    pub bytes_out: usize,
}

struct Log {
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// The three logs of a proxy.
pub struct CommandLog {
    slow: Duration,
    request: u64,
    reply: u64,
    max_len: [usize; 3],
    logs: [Mutex<Log>; 3],
}

impl CommandLog {
    pub fn new(s: &CommandLogSettings) -> Self {
        let max_len =
            [s.slow_max_len, s.request_max_len, s.reply_max_len].map(|n| n.min(COMMANDLOG_MAX_LEN));
        let size = |t: i64, len: usize| match u64::try_from(t) {
            Ok(t) if len > 0 => t,
            _ => u64::MAX,
        };
        let slow = match u64::try_from(s.slow_us) {
            Ok(us) if max_len[0] > 0 => Duration::from_micros(us),
            _ => Duration::MAX,
        };
        Self {
            slow,
            request: size(s.request_bytes, max_len[1]),
            reply: size(s.reply_bytes, max_len[2]),
            max_len,
            logs: std::array::from_fn(|_| {
                Mutex::new(Log {
                    entries: VecDeque::new(),
                    next_id: 0,
                })
            }),
        }
    }

    /// Whether any log wants this command: the whole cost on the hot path when nothing is
    /// slow or large (a disabled log's threshold is one no command reaches).
    #[inline]
    pub fn wants(&self, m: &Measured) -> bool {
        m.bytes_in as u64 >= self.request
            || m.bytes_out as u64 >= self.reply
            || m.duration.is_some_and(|d| d >= self.slow)
    }

    /// Adds the command to each log whose threshold it reached. `raw` is the request as the
    /// client sent it (multibulk: the decoder re-encodes inline commands).
    #[cold]
    pub fn record(&self, m: &Measured, raw: &[u8], client: &ClientInfo) {
        let call = Arc::new(Call {
            args: truncated_args(raw),
            client_addr: client.addr,
            client_name: client.name(),
            user: client.user(),
        });
        let time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let values = [
            m.duration
                .filter(|d| *d >= self.slow)
                .map(|d| d.as_micros() as u64),
            (m.bytes_in as u64 >= self.request).then_some(m.bytes_in as u64),
            (m.bytes_out as u64 >= self.reply).then_some(m.bytes_out as u64),
        ];
        for (i, value) in values.into_iter().enumerate() {
            let Some(value) = value else { continue };
            let mut log = self.logs[i].lock().expect("command log lock poisoned");
            let id = log.next_id;
            log.next_id += 1;
            log.entries.push_front(Entry {
                id,
                time,
                value,
                call: call.clone(),
            });
            log.entries.truncate(self.max_len[i]);
        }
    }

    /// The newest `count` entries of a log (all of them for `None`), newest first.
    pub fn get(&self, t: LogType, count: Option<usize>) -> Vec<Entry> {
        let log = self.logs[t as usize]
            .lock()
            .expect("command log lock poisoned");
        let n = count.map_or(log.entries.len(), |c| c.min(log.entries.len()));
        log.entries.iter().take(n).cloned().collect()
    }

    /// The newest `count` entries of a log made by `user`'s clients, newest first: what a user
    /// confined to a key prefix may see (other users' entries hold their keys and values).
    pub fn get_of(&self, t: LogType, count: Option<usize>, user: &[u8]) -> Vec<Entry> {
        let log = self.logs[t as usize]
            .lock()
            .expect("command log lock poisoned");
        log.entries
            .iter()
            .filter(|e| e.call.user == user)
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    /// How many entries of a log `user`'s clients made.
    pub fn len_of(&self, t: LogType, user: &[u8]) -> usize {
        self.logs[t as usize]
            .lock()
            .expect("command log lock poisoned")
            .entries
            .iter()
            .filter(|e| e.call.user == user)
            .count()
    }

    /// A log's threshold (µs for `slow`, bytes for the others); `None` when it is disabled.
    pub fn threshold(&self, t: LogType) -> Option<u64> {
        let v = match t {
            LogType::Slow => u64::try_from(self.slow.as_micros()).unwrap_or(u64::MAX),
            LogType::LargeRequest => self.request,
            LogType::LargeReply => self.reply,
        };
        (v != u64::MAX).then_some(v)
    }

    /// The most entries a log keeps.
    pub fn max_len(&self, t: LogType) -> usize {
        self.max_len[t as usize]
    }

    pub fn len(&self, t: LogType) -> usize {
        self.logs[t as usize]
            .lock()
            .expect("command log lock poisoned")
            .entries
            .len()
    }

    /// Empties a log; ids go on from where they were.
    pub fn reset(&self, t: LogType) {
        self.logs[t as usize]
            .lock()
            .expect("command log lock poisoned")
            .entries
            .clear();
    }
}

impl From<&Entry> for EntryView {
    fn from(e: &Entry) -> Self {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        Self {
            id: e.id,
            time: e.time,
            value: e.value,
            args: e.call.args.iter().map(text).collect(),
            client_addr: e.call.client_addr.to_string(),
            client_name: text(&e.call.client_name),
        }
    }
}

/// The arguments of a multibulk request as a log keeps them: at most [`MAX_ARGS`] (the last
/// then saying how many more there were), each at most [`MAX_ARG_BYTES`] followed by how many
/// more bytes it had; AUTH's arguments and HELLO's password redacted. Reads only what it
/// keeps, so a request of a million arguments costs 32.
fn truncated_args(raw: &[u8]) -> Vec<Bytes> {
    let mut cur = Cursor { raw, at: 0 };
    let Some(argc) = cur.header(b'*') else {
        return Vec::new();
    };
    let kept = argc.min(MAX_ARGS);
    let mut out = Vec::with_capacity(kept);
    for i in 0..kept {
        if i == MAX_ARGS - 1 && argc > MAX_ARGS {
            out.push(Bytes::from(format!("... ({} more arguments)", argc - i)));
            break;
        }
        let Some(arg) = cur.bulk() else { break };
        out.push(if arg.len() > MAX_ARG_BYTES {
            let mut b = arg[..MAX_ARG_BYTES].to_vec();
            b.extend_from_slice(
                format!("... ({} more bytes)", arg.len() - MAX_ARG_BYTES).as_bytes(),
            );
            Bytes::from(b)
        } else {
            Bytes::copy_from_slice(arg)
        });
    }
    redact(&mut out);
    out
}

/// Passwords never reach a log (Redis redacts the same arguments).
fn redact(args: &mut [Bytes]) {
    const REDACTED: Bytes = Bytes::from_static(b"(redacted)");
    let Some(name) = args.first() else { return };
    if name.eq_ignore_ascii_case(b"AUTH") {
        args[1..].iter_mut().for_each(|a| *a = REDACTED);
    } else if name.eq_ignore_ascii_case(b"HELLO") {
        let (n, mut i) = (args.len(), 2);
        while i < n {
            if args[i].eq_ignore_ascii_case(b"AUTH") {
                args[i + 1..n.min(i + 3)]
                    .iter_mut()
                    .for_each(|a| *a = REDACTED);
                i += 3;
            } else {
                i += 1;
            }
        }
    }
}

/// Walks a multibulk request; `None` on anything unexpected (never panics).
struct Cursor<'a> {
    raw: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn header(&mut self, kind: u8) -> Option<usize> {
        let rest = self.raw.get(self.at..)?;
        if rest.first() != Some(&kind) {
            return None;
        }
        let end = memchr::memchr(b'\r', rest)?;
        let n = std::str::from_utf8(&rest[1..end]).ok()?.parse().ok()?;
        self.at += end + 2;
        Some(n)
    }

    fn bulk(&mut self) -> Option<&'a [u8]> {
        let len = self.header(b'$')?;
        let arg = self.raw.get(self.at..self.at.checked_add(len)?)?;
        self.at += len + 2;
        Some(arg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_resp::Request;

    fn raw(args: &[&[u8]]) -> Bytes {
        Request::from_args(args).as_bytes().clone()
    }

    #[test]
    fn long_arguments_and_long_argument_lists_are_cut_as_redis_cuts_them() {
        let big = vec![b'x'; 300];
        let mut args: Vec<&[u8]> = vec![b"RPUSH", &big];
        args.extend(std::iter::repeat_n(&b"v"[..], 40));
        let kept = truncated_args(&raw(&args));
        assert_eq!(kept.len(), MAX_ARGS);
        assert_eq!(&kept[1][..MAX_ARG_BYTES], &big[..MAX_ARG_BYTES]);
        assert_eq!(&kept[1][MAX_ARG_BYTES..], b"... (172 more bytes)");
        assert_eq!(&kept[31][..], b"... (11 more arguments)");
        assert_eq!(&kept[30][..], b"v");
    }

    #[test]
    fn passwords_are_redacted() {
        let a = truncated_args(&raw(&[b"AUTH", b"alice", b"secret"]));
        assert_eq!(a, vec!["AUTH", "(redacted)", "(redacted)"]);
        let h = truncated_args(&raw(&[
            b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n",
        ]));
        assert_eq!(
            h,
            vec![
                "HELLO",
                "3",
                "AUTH",
                "(redacted)",
                "(redacted)",
                "SETNAME",
                "n"
            ]
        );
    }

    #[test]
    fn garbage_yields_no_arguments_rather_than_a_panic() {
        for g in [
            &b""[..],
            b"*",
            b"*3\r\n$999\r\nab",
            b"*-1\r\n",
            b"$3\r\nabc\r\n",
            b"*2\r\n$x\r\n",
        ] {
            assert!(truncated_args(g).len() <= 2, "{g:?}");
        }
    }

    fn settings(slow_us: i64, max: usize) -> CommandLogSettings {
        CommandLogSettings {
            slow_us,
            slow_max_len: max,
            request_bytes: 100,
            request_max_len: max,
            reply_bytes: -1,
            reply_max_len: max,
        }
    }

    #[test]
    fn logs_keep_the_newest_and_ids_survive_a_reset() {
        let log = CommandLog::new(&settings(0, 2));
        let reg = std::sync::Arc::new(crate::clients::ClientRegistry::default());
        let c = reg.register(([127, 0, 0, 1], 1).into(), ([127, 0, 0, 1], 2).into());
        let m = Measured {
            duration: Some(Duration::from_micros(5)),
            bytes_in: 10,
            bytes_out: 1 << 30,
        };
        assert!(log.wants(&m));
        for _ in 0..3 {
            log.record(&m, &raw(&[b"GET", b"k"]), &c.info);
        }
        let got = log.get(LogType::Slow, None);
        assert_eq!(got.iter().map(|e| e.id).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(log.len(LogType::LargeRequest), 0, "10 bytes < 100");
        assert_eq!(log.len(LogType::LargeReply), 0, "disabled");
        log.reset(LogType::Slow);
        assert_eq!(log.len(LogType::Slow), 0);
        log.record(&m, &raw(&[b"GET", b"k"]), &c.info);
        assert_eq!(log.get(LogType::Slow, Some(5))[0].id, 3);
    }

    #[test]
    fn thresholds_are_told_as_configured_and_a_disabled_log_has_none() {
        let log = CommandLog::new(&settings(2500, 7));
        assert_eq!(log.threshold(LogType::Slow), Some(2500));
        assert_eq!(log.threshold(LogType::LargeRequest), Some(100));
        assert_eq!(
            log.threshold(LogType::LargeReply),
            None,
            "a negative threshold"
        );
        assert_eq!(log.max_len(LogType::Slow), 7);
        let off = CommandLog::new(&settings(2500, 0));
        assert_eq!(
            off.threshold(LogType::Slow),
            None,
            "a zero length disables it"
        );
        assert_eq!(
            CommandLog::new(&settings(0, 1)).threshold(LogType::Slow),
            Some(0)
        );
    }

    #[test]
    fn a_user_sees_only_its_own_entries_when_asked_for_them() {
        let log = CommandLog::new(&settings(0, 10));
        let reg = std::sync::Arc::new(crate::clients::ClientRegistry::default());
        let a = reg.register(([127, 0, 0, 1], 1).into(), ([127, 0, 0, 1], 2).into());
        let b = reg.register(([127, 0, 0, 1], 3).into(), ([127, 0, 0, 1], 2).into());
        b.info.set_user(Bytes::from_static(b"tenant"));
        let m = Measured {
            duration: Some(Duration::from_micros(5)),
            bytes_in: 10,
            bytes_out: 10,
        };
        log.record(&m, &raw(&[b"SET", b"victim:k", b"secret"]), &a.info);
        log.record(&m, &raw(&[b"GET", b"t1:k"]), &b.info);
        log.record(&m, &raw(&[b"GET", b"victim:k"]), &a.info);
        let own = log.get_of(LogType::Slow, None, b"tenant");
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].call.args[1], "t1:k");
        assert_eq!(log.len_of(LogType::Slow, b"tenant"), 1);
        assert_eq!(log.len_of(LogType::Slow, b"default"), 2);
        assert_eq!(log.get_of(LogType::Slow, Some(1), b"default")[0].id, 2);
        assert_eq!(log.get(LogType::Slow, None).len(), 3);
    }

    #[test]
    fn a_disabled_log_wants_nothing() {
        let log = CommandLog::new(&settings(-1, 128));
        let m = Measured {
            duration: Some(Duration::from_secs(100)),
            bytes_in: 0,
            bytes_out: 1 << 40,
        };
        assert!(!log.wants(&m));
        let zero_len = CommandLog::new(&settings(0, 0));
        assert!(!zero_len.wants(&m));
    }
}
