//! How long a replication source may keep its replica (`tessera import sync`, a migration's
//! capture) waiting: the read bounds
//! (`--timeout-s`, `--rdb-wait-s`) and the clock of each connection. Two clocks, as Redis's
//! own replicas keep one (`repl-timeout`): the last byte received (silence) and the last
//! progress. Keepalive newlines are bytes but not progress, so a source that sends only them
//! is cut off once the progress deadline passes; `replica` says what progress is for each
//! read (a status line's text, RDB bytes, bytes of a command).

use std::time::{Duration, Instant};

/// The read bounds of `port sync`'s connection to its source.
#[derive(Debug, Clone, Copy)]
pub struct ReadBounds {
    /// Longest silence (no byte at all), and longest time without progress except while the
    /// source prepares its RDB (`--timeout-s`; Redis's `repl-timeout` is 60 s). A source pings
    /// its replicas every 10 s (`repl-ping-replica-period`), so a live one never comes near.
    pub timeout: Duration,
    /// Longest wait for the RDB after a full resync is announced, during which the source
    /// sends only keepalive newlines while it saves (`--rdb-wait-s`).
    pub rdb_wait: Duration,
    /// Largest command of the stream, in bytes (`--max-command-mb`).
    pub max_command: usize,
}

/// Why a read gave up waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// No byte for `timeout`.
    Silent(Duration),
    /// Bytes, but none that were progress (keepalive newlines only) for this long.
    Stalled(Duration),
}

/// One connection's clocks.
#[derive(Debug)]
pub struct Watch {
    progress: Instant,
    last_byte: Instant,
}

impl Watch {
    /// Both clocks start at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            progress: now,
            last_byte: now,
        }
    }

    /// Something that is not a keepalive arrived (or a phase starts that owes nothing yet).
    pub fn progressed(&mut self, now: Instant) {
        self.progress = now;
    }

    /// A read returned bytes.
    pub fn received(&mut self, now: Instant) {
        self.last_byte = now;
    }

    /// The instant a read starting at `now` gives up, and why it would: at `now + timeout`
    /// without a byte, or `stall` after the last progress, whichever is first.
    pub fn deadline(&self, now: Instant, timeout: Duration, stall: Duration) -> (Instant, Expired) {
        let silent = now + timeout;
        let stalled = self.progress + stall;
        if stalled <= silent {
            (stalled, Expired::Stalled(stall))
        } else {
            (silent, Expired::Silent(timeout))
        }
    }

    /// Words a [`Expired::Stalled`] for the operator: a source that sent nothing since its
    /// last progress is silent, not chatty.
    pub fn describe(&self, e: Expired) -> String {
        match e {
            Expired::Stalled(d) if self.last_byte > self.progress => {
                format!("sent only keepalive newlines for {} s", d.as_secs())
            }
            Expired::Stalled(d) | Expired::Silent(d) => {
                format!("sent nothing for {} s", d.as_secs())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(60);
    const S: Duration = Duration::from_secs(1);

    #[test]
    fn keepalives_do_not_move_the_progress_deadline() {
        let start = Instant::now();
        let mut w = Watch::new(start);
        assert_eq!(w.deadline(start, T, T), (start + T, Expired::Stalled(T)));
        // A newline every second for 59 s: bytes, not progress.
        let mut now = start;
        for _ in 0..59 {
            now += S;
            w.received(now);
        }
        assert_eq!(w.deadline(now, T, T), (start + T, Expired::Stalled(T)));
        assert_eq!(
            w.describe(Expired::Stalled(T)),
            "sent only keepalive newlines for 60 s"
        );
        w.progressed(now);
        assert_eq!(w.deadline(now, T, T).0, now + T);
    }

    #[test]
    fn a_longer_stall_allowance_is_still_cut_by_silence() {
        let start = Instant::now();
        let w = Watch::new(start);
        let long = Duration::from_secs(3600);
        let (at, why) = w.deadline(start, T, long);
        assert_eq!((at, why), (start + T, Expired::Silent(T)));
        assert_eq!(w.describe(why), "sent nothing for 60 s");
        // Near the end of the allowance, the stall deadline comes first.
        let late = start + long - S;
        assert_eq!(
            w.deadline(late, T, long),
            (start + long, Expired::Stalled(long))
        );
        assert_eq!(
            w.describe(Expired::Stalled(long)),
            "sent nothing for 3600 s"
        );
    }
}
