//! SLOWLOG and COMMANDLOG, answered from the proxy's own command log (`telemetry::CommandLog`)
//! with Redis's and Valkey's reply shapes; and the one call the session makes once a reply is
//! complete to have the command logged. RESET empties a log for every client of the proxy, so
//! it needs `admin_commands` (as CLIENT UNBLOCK does); GET and LEN need the user's `admin`
//! class, like any command Redis marks `@admin`. A user confined to a key prefix sees only the
//! entries of its own user's clients (the others hold other tenants' keys and values) and may
//! not RESET (docs/users.md, "What a confined user can and cannot see").

use bytes::Bytes;

use super::Session;
use crate::telemetry::{Entry, Measured};
use tessera_model::error::DataError;
use tessera_resp::{Frame, Request};
use tessera_wire::telemetry::LogType;

/// SLOWLOG GET's count when none is given (Redis's).
const DEFAULT_COUNT: usize = 10;

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return the newest <count> entries of the slow log (default: 10, -1 for all).",
    "    Each entry is: id, unix time, duration in microseconds, the arguments,",
    "    the client's address and port, the client's name.",
    "LEN",
    "    Return the number of entries in the slow log.",
    "RESET",
    "    Empty the slow log.",
    "HELP",
    "    Print this help.",
];

const COMMANDLOG_HELP: &[&str] = &[
    "COMMANDLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <count> <type>",
    "    Return the newest <count> entries of the log of <type> (-1 for all), where <type>",
    "    is slow, large-request or large-reply. Each entry is: id, unix time, the value",
    "    (duration in microseconds for slow, request or reply size in bytes for the others),",
    "    the arguments, the client's address and port, the client's name.",
    "LEN <type>",
    "    Return the number of entries in the log of <type>.",
    "RESET <type>",
    "    Empty the log of <type>.",
    "HELP",
    "    Print this help.",
];

impl Session {
    /// `SLOWLOG …` and `COMMANDLOG …` (`name` is the table's `CONTAINER|SUB`).
    pub(super) fn command_log(&self, name: &str, req: &Request) -> Result<Frame, DataError> {
        let log = &self.worker.shared.command_log;
        let (container, sub) = name.split_once('|').unwrap_or((name, ""));
        let slowlog = container == "SLOWLOG";
        let ty = |i: usize| -> Result<LogType, DataError> {
            if slowlog {
                return Ok(LogType::Slow);
            }
            LogType::parse(req.arg(i)).ok_or_else(|| {
                DataError::Invalid(
                    "type should be one of the following: slow, large-request, large-reply".into(),
                )
            })
        };
        match sub {
            "HELP" => {
                let lines = if slowlog {
                    SLOWLOG_HELP
                } else {
                    COMMANDLOG_HELP
                };
                Ok(Frame::Array(
                    lines.iter().map(|l| Frame::Simple(l)).collect(),
                ))
            }
            "LEN" => {
                let t = ty(2)?;
                Ok(Frame::Integer(match self.confined_user() {
                    Some(user) => log.len_of(t, user),
                    None => log.len(t),
                } as i64))
            }
            "RESET" => {
                let t = ty(2)?;
                if let Some(user) = self.confined_user() {
                    return Err(DataError::NoPermCommand {
                        user: String::from_utf8_lossy(user).into(),
                        command: format!("{} reset", container.to_lowercase()).into(),
                    });
                }
                if !self.worker.shared.config.admin_commands {
                    return Err(DataError::AdminDisabled(format!("{container} RESET")));
                }
                log.reset(t);
                Ok(Frame::ok())
            }
            _ => {
                // SLOWLOG GET [count]; COMMANDLOG GET count type (arity checked by the table).
                if slowlog && req.argc() > 3 {
                    return Err(DataError::Invalid(format!(
                        "unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
                        String::from_utf8_lossy(req.arg(1))
                    )));
                }
                let count = match req.get(2) {
                    None => Some(DEFAULT_COUNT),
                    Some(c) => parse_count(c)?,
                };
                let t = ty(3)?;
                let entries = match self.confined_user() {
                    Some(user) => log.get_of(t, count, user),
                    None => log.get(t, count),
                };
                Ok(Frame::Array(entries.iter().map(entry_frame).collect()))
            }
        }
    }

    /// The session's user name when it is confined to a key prefix: what it sees of the
    /// proxy's shared views is its own user's share.
    pub(super) fn confined_user(&self) -> Option<&[u8]> {
        self.rights
            .as_deref()
            .filter(|u| u.key_prefix.is_some())
            .map(|u| u.name.as_bytes())
    }

    /// Logs the command whose reply just completed, when a log wants it (`wants` was true).
    #[cold]
    #[inline(never)]
    pub(super) fn log_command(&self, m: &Measured, raw: &Bytes) {
        self.worker
            .shared
            .command_log
            .record(m, raw, &self.reg.info);
    }
}

/// A count of at least -1 (-1: all), in Redis's words otherwise.
fn parse_count(c: &[u8]) -> Result<Option<usize>, DataError> {
    let bad = || DataError::Invalid("count should be greater than or equal to -1".into());
    let n: i64 = std::str::from_utf8(c)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    match n {
        -1 => Ok(None),
        n if n < -1 => Err(bad()),
        n => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
    }
}

/// `[id, time, value, [args…], "addr:port", "name"]`, as Redis and Valkey reply.
fn entry_frame(e: &Entry) -> Frame {
    Frame::Array(vec![
        Frame::Integer(e.id as i64),
        Frame::Integer(e.time as i64),
        Frame::Integer(e.value as i64),
        Frame::Array(e.call.args.iter().cloned().map(Frame::Bulk).collect()),
        Frame::Bulk(Bytes::from(e.call.client_addr.to_string())),
        Frame::Bulk(e.call.client_name.clone()),
    ])
}
