//! A proxy's mirror counters (relaxed atomics, per command by `CommandId`), its queue gauges,
//! and the last mismatches kept as samples; rendered as Prometheus text for `/metrics` and as
//! JSON for `GET /api/proxy/mirror`. Written by the workers and the link thread, read by the
//! admin API.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use tessera_model::command::{CommandId, CommandTable};
use tessera_wire::mirror::{CommandFigures, Figures, Sample};

/// Mismatches kept per proxy (the newest replace the oldest).
pub(super) const SAMPLES: usize = 32;
/// Arguments of a sampled command kept, and bytes of each argument and of each reply.
const SAMPLE_ARGS: usize = 8;
const SAMPLE_ARG_BYTES: usize = 64;
const SAMPLE_REPLY_BYTES: usize = 256;

/// Why a command was not mirrored although it qualified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drop {
    /// The proxy's queue holds `max_queue` commands.
    QueueFull,
    /// The proxy's queue holds `max_queue_bytes`.
    QueueBytes,
    /// The command is larger than `max_command_bytes`.
    TooLarge,
    /// The shadow's reply was larger than `max_command_bytes`: not read to its end (its
    /// connection was closed), not compared.
    ReplyTooLarge,
}

impl Drop {
    const ALL: [Drop; 4] = [
        Drop::QueueFull,
        Drop::QueueBytes,
        Drop::TooLarge,
        Drop::ReplyTooLarge,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Drop::QueueFull => "queue_full",
            Drop::QueueBytes => "queue_bytes",
            Drop::TooLarge => "too_large",
            Drop::ReplyTooLarge => "reply_too_large",
        }
    }
}

/// One command's counters.
#[derive(Default)]
struct PerCommand {
    sent: AtomicU64,
    compared: AtomicU64,
    mismatched: AtomicU64,
    /// Answered by the shadow, not compared (nondeterministic, or the primary's reply was
    /// too large to keep).
    uncompared: AtomicU64,
}

/// Counters of one proxy.
pub struct MirrorStats {
    commands: Vec<PerCommand>,
    dropped: [AtomicU64; 4],
    /// Shadow replies that never came: connection refused, lost or timed out.
    errors: AtomicU64,
    /// The queue now, all workers together.
    queue_entries: AtomicU64,
    queue_bytes: AtomicU64,
    samples: Mutex<VecDeque<Sample>>,
}

impl Default for MirrorStats {
    fn default() -> Self {
        Self {
            commands: (0..CommandTable::get().len())
                .map(|_| PerCommand::default())
                .collect(),
            dropped: Default::default(),
            errors: AtomicU64::new(0),
            queue_entries: AtomicU64::new(0),
            queue_bytes: AtomicU64::new(0),
            samples: Mutex::new(VecDeque::with_capacity(SAMPLES)),
        }
    }
}

impl MirrorStats {
    fn of(&self, id: CommandId) -> &PerCommand {
        &self.commands[id.0 as usize]
    }

    pub(super) fn sent(&self, id: CommandId) {
        self.of(id).sent.fetch_add(1, Relaxed);
    }

    pub(super) fn dropped(&self, why: Drop) {
        self.dropped[why as usize].fetch_add(1, Relaxed);
    }

    pub(super) fn error(&self) {
        self.errors.fetch_add(1, Relaxed);
    }

    pub(super) fn uncompared(&self, id: CommandId) {
        self.of(id).uncompared.fetch_add(1, Relaxed);
    }

    pub(super) fn compared(&self, id: CommandId, matched: bool) {
        let c = self.of(id);
        c.compared.fetch_add(1, Relaxed);
        if !matched {
            c.mismatched.fetch_add(1, Relaxed);
        }
    }

    pub(super) fn queued(&self, bytes: usize) {
        self.queue_entries.fetch_add(1, Relaxed);
        self.queue_bytes.fetch_add(bytes as u64, Relaxed);
    }

    pub(super) fn unqueued(&self, bytes: usize) {
        self.queue_entries.fetch_sub(1, Relaxed);
        self.queue_bytes.fetch_sub(bytes as u64, Relaxed);
    }

    /// Keeps a mismatch (rare: a lock is fine).
    pub(super) fn sample(&self, name: &str, args: &[&[u8]], primary: &[u8], shadow: &[u8]) {
        let s = Sample {
            command: name.to_owned(),
            args: args
                .iter()
                .skip(1)
                .take(SAMPLE_ARGS)
                .map(|a| printable(a, SAMPLE_ARG_BYTES))
                .collect(),
            primary: printable(primary, SAMPLE_REPLY_BYTES),
            shadow: printable(shadow, SAMPLE_REPLY_BYTES),
            unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        };
        let mut q = self.samples.lock().expect("mirror samples lock poisoned");
        if q.len() == SAMPLES {
            q.pop_front();
        }
        q.push_back(s);
    }

    /// The samples, newest first.
    pub fn samples(&self) -> Vec<Sample> {
        let q = self.samples.lock().expect("mirror samples lock poisoned");
        q.iter().rev().cloned().collect()
    }

    /// Every counter, the commands with any traffic only.
    pub fn figures(&self) -> Figures {
        let table = CommandTable::get();
        let mut f = Figures {
            errors: self.errors.load(Relaxed),
            queue_entries: self.queue_entries.load(Relaxed),
            queue_bytes: self.queue_bytes.load(Relaxed),
            ..Figures::default()
        };
        for d in Drop::ALL {
            f.dropped
                .insert(d.as_str().into(), self.dropped[d as usize].load(Relaxed));
        }
        for (i, c) in self.commands.iter().enumerate() {
            let sent = c.sent.load(Relaxed);
            if sent == 0 {
                continue;
            }
            let cf = CommandFigures {
                command: table.by_id(CommandId(i as u16)).name.to_ascii_lowercase(),
                sent,
                compared: c.compared.load(Relaxed),
                mismatched: c.mismatched.load(Relaxed),
                uncompared: c.uncompared.load(Relaxed),
            };
            f.sent += cf.sent;
            f.compared += cf.compared;
            f.mismatched += cf.mismatched;
            f.uncompared += cf.uncompared;
            f.commands.push(cf);
        }
        f
    }

    /// Appends the `tessera_mirror_*` series to a Prometheus text exposition.
    pub fn render(&self, out: &mut String) {
        let f = self.figures();
        let series: [Series; 4] = [
            (
                "sent",
                "counter",
                "Commands sent to the mirror's shadow",
                |c| c.sent,
            ),
            (
                "compared",
                "counter",
                "Shadow replies compared with the primary's",
                |c| c.compared,
            ),
            (
                "mismatched",
                "counter",
                "Shadow replies that differed from the primary's",
                |c| c.mismatched,
            ),
            (
                "uncompared",
                "counter",
                "Shadow replies not compared (nondeterministic or too large)",
                |c| c.uncompared,
            ),
        ];
        for (name, kind, help, get) in series {
            let _ = writeln!(out, "# HELP tessera_mirror_{name}_total {help}");
            let _ = writeln!(out, "# TYPE tessera_mirror_{name}_total {kind}");
            for c in &f.commands {
                let _ = writeln!(
                    out,
                    "tessera_mirror_{name}_total{{command=\"{}\"}} {}",
                    c.command,
                    get(c)
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP tessera_mirror_dropped_total Commands not mirrored to bound the queue\n# TYPE tessera_mirror_dropped_total counter"
        );
        for (reason, n) in &f.dropped {
            let _ = writeln!(
                out,
                "tessera_mirror_dropped_total{{reason=\"{reason}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP tessera_mirror_errors_total Mirrored commands the shadow never answered\n# TYPE tessera_mirror_errors_total counter\ntessera_mirror_errors_total {}",
            f.errors
        );
        let _ = writeln!(
            out,
            "# HELP tessera_mirror_queue_entries Mirrored commands awaiting the shadow's reply\n# TYPE tessera_mirror_queue_entries gauge\ntessera_mirror_queue_entries {}",
            f.queue_entries
        );
        let _ = writeln!(
            out,
            "# HELP tessera_mirror_queue_bytes Bytes held for mirrored commands awaiting the shadow's reply\n# TYPE tessera_mirror_queue_bytes gauge\ntessera_mirror_queue_bytes {}",
            f.queue_bytes
        );
    }
}

/// A per-command series: name, type, help, and its value in a command's figures.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&CommandFigures) -> u64,
);

/// `bytes` as text, cut at `max` (marked with `…`), with CR, LF and non-printable bytes
/// escaped so a sample is one readable line.
fn printable(bytes: &[u8], max: usize) -> String {
    let mut s = String::with_capacity(bytes.len().min(max) + 8);
    for &b in bytes.iter().take(max) {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    if bytes.len() > max {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_bounded_and_truncated() {
        let s = MirrorStats::default();
        let big = vec![b'x'; 10_000];
        for _ in 0..SAMPLES + 5 {
            s.sample("GET", &[b"GET", &big], b"$1\r\na\r\n", &big);
        }
        let got = s.samples();
        assert_eq!(got.len(), SAMPLES);
        assert_eq!(got[0].args[0].len(), SAMPLE_ARG_BYTES + '…'.len_utf8());
        assert_eq!(got[0].primary, "$1\\r\\na\\r\\n");
        assert!(got[0].shadow.len() <= SAMPLE_REPLY_BYTES + 3);
    }

    #[test]
    fn the_exposition_names_commands_and_reasons() {
        let s = MirrorStats::default();
        let get = CommandTable::get()
            .iter()
            .find(|c| c.name == "GET")
            .unwrap()
            .id;
        s.sent(get);
        s.compared(get, false);
        s.dropped(Drop::QueueFull);
        let mut out = String::new();
        s.render(&mut out);
        assert!(
            out.contains("tessera_mirror_mismatched_total{command=\"get\"} 1"),
            "{out}"
        );
        assert!(out.contains("tessera_mirror_dropped_total{reason=\"queue_full\"} 1"));
    }
}
