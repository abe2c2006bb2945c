//! Progress lines, once a second: counters read from the load and the writer, rates from
//! their change since the last line. Printed on stdout as `key=value` pairs, so scripts and
//! tests can read them.

use std::time::Instant;

/// Turns a growing counter into a per-second rate between two reports.
#[derive(Debug)]
pub struct Rate {
    last: u64,
    at: Instant,
}

impl Rate {
    /// Starts at `value` now.
    pub fn new(value: u64) -> Self {
        Self {
            last: value,
            at: Instant::now(),
        }
    }

    /// The rate since the last call, per second.
    pub fn update(&mut self, value: u64) -> u64 {
        let secs = self.at.elapsed().as_secs_f64();
        let delta = value.saturating_sub(self.last);
        self.last = value;
        self.at = Instant::now();
        if secs > 0.0 {
            (delta as f64 / secs) as u64
        } else {
            0
        }
    }
}

/// A line of `key=value` pairs, prefixed with the phase.
pub fn line(phase: &str, fields: &[(&str, String)]) -> String {
    let mut s = format!("port {phase}:");
    for (k, v) in fields {
        s.push(' ');
        s.push_str(k);
        s.push('=');
        s.push_str(v);
    }
    s
}
