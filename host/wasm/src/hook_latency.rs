//! The wall time of every call into a plugin's hooks: a fixed-bucket histogram per hook
//! (`tessera_wire::plugin_hooks::BOUNDS_NS`), shared by every worker's instance of the plugin
//! and kept across reloads. Recording is two relaxed atomic adds (the bucket and the sum): no
//! lock, no allocation; the count is the sum of the buckets, so `+Inf` always equals `_count`.

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

/// Every hook's histogram of one plugin.
#[derive(Debug, Default)]
pub struct HookLatencies {
    hooks: [HookHistogram; HOOKS.len()],
}

impl HookLatencies {
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
