//! The wall time of calls into a plugin's hooks: a fixed-bucket histogram per hook
//! (`tessera_wire::plugin_hooks::BOUNDS_NS`), shared by every worker's instance of the plugin
//! and kept across reloads. Recording is two relaxed atomic adds (the bucket and the sum): no
//! lock, no allocation; the count is the sum of the buckets, so `+Inf` always equals `_count`.
//!
//! The hot hooks (`on_command`, `on_commands`, `on_reply`) are sampled: each instance times
//! one call in [`HookLatencies::sample`] of each, its first included ([`SampleTicks`]). Timing
//! every call cost a hooked command ~50 ns (a clock pair and two atomic adds on lines every
//! worker shares) against ~110 ns for the call itself; one in 16 costs a countdown. `on_close`
//! and `on_tick` are rare and timed every time.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tessera_wire::plugin_hooks::{BOUNDS_NS, BUCKETS, HOOKS, HookLatency, bucket_of};

/// A hook the host calls (an index into [`HOOKS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `tp_on_command`: one command.
    OnCommand = 0,
    /// `tp_on_commands`: several commands of one pipeline, one guest call.
    OnCommands = 1,
    /// `tp_on_reply`: replies, or one reply's head.
    OnReply = 2,
    OnClose = 3,
    OnTick = 4,
}

/// One hook's histogram, on its own cache lines (workers calling different hooks do not
/// contend).
#[derive(Debug, Default)]
#[repr(align(64))]
struct HookHistogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// One call in this many of a hot hook is timed, by default.
pub const DEFAULT_SAMPLE: u32 = 16;

/// Every hook's histogram of one plugin.
#[derive(Debug)]
pub struct HookLatencies {
    hooks: [HookHistogram; HOOKS.len()],
    sample: u32,
}

impl Default for HookLatencies {
    fn default() -> Self {
        Self::new(DEFAULT_SAMPLE)
    }
}

/// One instance's countdown to its next timed call of each hot hook.
#[derive(Debug)]
pub(crate) struct SampleTicks([u32; 3]);

impl Default for SampleTicks {
    /// The first call of each hook is timed.
    fn default() -> Self {
        Self([1; 3])
    }
}

impl SampleTicks {
    /// Whether this call of `hook` is to be timed, one in `every` of a hot hook (every call
    /// of the others).
    #[inline]
    pub(crate) fn take(&mut self, hook: Hook, every: u32) -> bool {
        let Some(t) = self.0.get_mut(hook as usize) else {
            return true;
        };
        *t -= 1;
        if *t > 0 {
            return false;
        }
        *t = every.max(1);
        true
    }
}

impl HookLatencies {
    /// Histograms timing one call in `sample` of each hot hook (at least 1: every call).
    pub fn new(sample: u32) -> Self {
        Self {
            hooks: Default::default(),
            sample: sample.max(1),
        }
    }

    /// One call in this many of a hot hook is timed.
    pub fn sample(&self) -> u32 {
        self.sample
    }

    /// Records one guest call of `hook` that took `took`.
    #[inline]
    pub fn observe(&self, hook: Hook, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let h = &self.hooks[hook as usize];
        h.buckets[bucket_of(ns)].fetch_add(1, Relaxed);
        h.sum_ns.fetch_add(ns, Relaxed);
    }

    /// Each hook called at least once, with its per-bucket counts and percentiles.
    pub fn snapshot(&self) -> Vec<HookLatency> {
        HOOKS
            .iter()
            .zip(&self.hooks)
            .filter_map(|(name, h)| {
                let counts: Vec<u64> = h.buckets.iter().map(|b| b.load(Relaxed)).collect();
                counts.iter().any(|&c| c > 0).then(|| {
                    let sum = h.sum_ns.load(Relaxed) as f64 / 1e9;
                    HookLatency::from_buckets(name, &counts, sum)
                })
            })
            .collect()
    }

    /// Appends the `tessera_plugin_hook_duration_seconds` series of `plugin` (its hooks
    /// called at least once); the caller writes `# HELP` and `# TYPE` once for all plugins.
    pub fn render(&self, plugin: &str, out: &mut String) {
        const NAME: &str = "tessera_plugin_hook_duration_seconds";
        let names = ["plugin".to_owned(), "hook".to_owned()];
        for h in self.snapshot() {
            let values = [plugin.to_owned(), h.hook.clone()];
            let mut cum = 0u64;
            for (i, c) in h.buckets.iter().enumerate() {
                cum = cum.saturating_add(*c);
                let le = BOUNDS_NS
                    .get(i)
                    .map_or_else(|| "+Inf".to_owned(), |&ns| (ns as f64 / 1e9).to_string());
                let l = crate::metrics::label_text(&names, &values, Some(&le));
                let _ = writeln!(out, "{NAME}_bucket{l} {cum}");
            }
            let l = crate::metrics::label_text(&names, &values, None);
            let _ = writeln!(out, "{NAME}_sum{l} {}", h.sum_seconds);
            let _ = writeln!(out, "{NAME}_count{l} {}", h.count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_hooks_are_sampled_from_their_first_call_and_the_others_always_timed() {
        let mut t = SampleTicks::default();
        let timed: Vec<usize> = (1..=40).filter(|_| t.take(Hook::OnCommand, 16)).collect();
        assert_eq!(timed.len(), 3, "calls 1, 17 and 33 of 40");
        // Each hot hook counts on its own.
        assert!(t.take(Hook::OnReply, 16));
        assert!(!t.take(Hook::OnReply, 16));
        assert!((0..5).all(|_| t.take(Hook::OnTick, 16) && t.take(Hook::OnClose, 16)));
        let mut every = SampleTicks::default();
        assert!((0..5).all(|_| every.take(Hook::OnCommands, 1)));
    }

    #[test]
    fn observations_land_in_their_bucket_and_render_cumulative() {
        let l = HookLatencies::default();
        assert!(l.snapshot().is_empty());
        l.observe(Hook::OnCommands, Duration::from_nanos(1_000));
        l.observe(Hook::OnCommands, Duration::from_nanos(1_001));
        l.observe(Hook::OnCommands, Duration::from_millis(200));
        l.observe(Hook::OnTick, Duration::from_micros(30));
        let s = l.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].hook.as_str(), s[0].count), ("on_commands", 3));
        assert_eq!(&s[0].buckets[2..4], &[1, 1]);
        assert_eq!(s[0].buckets[BUCKETS - 1], 1);
        assert_eq!(s[0].p50_seconds, Some(2.5e-6));
        assert_eq!(s[0].p99_seconds, None);
        assert_eq!(s[1].hook, "on_tick");
        let mut out = String::new();
        l.render("my\"p", &mut out);
        let first = r#"tessera_plugin_hook_duration_seconds_bucket{plugin="my\"p",hook="on_commands",le="0.00000025"} 0"#;
        assert!(out.contains(first), "{out}");
        let one = r#"tessera_plugin_hook_duration_seconds_bucket{plugin="my\"p",hook="on_commands",le="0.000001"} 1"#;
        assert!(out.contains(one), "{out}");
        let top = r#"tessera_plugin_hook_duration_seconds_bucket{plugin="my\"p",hook="on_commands",le="0.1"} 2"#;
        assert!(out.contains(top), "{out}");
        let inf = r#"tessera_plugin_hook_duration_seconds_bucket{plugin="my\"p",hook="on_commands",le="+Inf"} 3"#;
        assert!(out.contains(inf), "{out}");
        let count =
            r#"tessera_plugin_hook_duration_seconds_count{plugin="my\"p",hook="on_commands"} 3"#;
        assert!(out.contains(count), "{out}");
        assert!(!out.contains("on_reply"), "{out}");
        // Per hook: every bound, +Inf, _sum and _count.
        assert_eq!(out.lines().count(), 2 * (BUCKETS + 2));
    }
}
