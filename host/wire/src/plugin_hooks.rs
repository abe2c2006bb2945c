//! The latency of a plugin's hook calls as the API carries it: a fixed-bucket histogram per
//! hook (the buckets every proxy uses), histograms of several proxies merged by adding
//! buckets, and percentiles read from the buckets (a bucket's upper bound, never an average).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The hooks the host calls, by the guest export they run: `on_command` one command
/// (`tp_on_command`), `on_commands` several commands of one pipeline (`tp_on_commands`),
/// `on_reply` a reply or a reply's head (`tp_on_reply`), `on_close`, `on_tick`.
pub const HOOKS: [&str; 5] = [
    "on_command",
    "on_commands",
    "on_reply",
    "on_close",
    "on_tick",
];

/// The upper bounds of the latency buckets, nanoseconds: 250 ns to 10 ms in 1-2.5-5 steps, then
/// 100 ms. A warm call of the shipped plugins takes 0.1–1 µs (a batch of 16 about 2 µs); the
/// default CPU budget stops a call at 5 ms of CPU (wall time may be longer on a loaded host).
/// One more bucket, over 100 ms, is Prometheus' `+Inf`.
pub const BOUNDS_NS: [u64; 16] = [
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    100_000_000,
];

/// Buckets of a histogram: one per bound and the one over the top bound.
pub const BUCKETS: usize = BOUNDS_NS.len() + 1;

/// The bucket of a call that took `ns`: the first whose bound is at least `ns` (Prometheus'
/// `le`), or the last, over the top bound.
#[inline]
#[must_use]
pub fn bucket_of(ns: u64) -> usize {
    BOUNDS_NS.partition_point(|&b| b < ns)
}

/// One hook's calls in one proxy, or summed over proxies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HookLatency {
    /// One of [`HOOKS`].
    pub hook: String,
    /// Guest calls: a batch of several commands (`on_commands`) is one.
    pub count: u64,
    /// Their wall time, seconds.
    pub sum_seconds: f64,
    /// Calls per bucket, not cumulative: bucket `i` holds the calls over bound `i - 1` and at
    /// most bound `i` ([`BOUNDS_NS`]); the last bucket the calls over 100 ms.
    pub buckets: Vec<u64>,
    /// The median: the upper bound of the bucket it falls in, seconds. `null` without calls,
    /// or when it is over the top bound (100 ms).
    #[schema(required = true)]
    pub p50_seconds: Option<f64>,
    /// The 99th percentile, read as `p50_seconds` is.
    #[schema(required = true)]
    pub p99_seconds: Option<f64>,
}

impl HookLatency {
    /// A hook's figures from its per-bucket counts (any length: missing buckets are empty,
    /// extra ones are counted in the last) and its total time.
    #[must_use]
    pub fn from_buckets(hook: &str, counts: &[u64], sum_seconds: f64) -> Self {
        let mut buckets = vec![0u64; BUCKETS];
        for (i, &c) in counts.iter().enumerate() {
            let b = &mut buckets[i.min(BUCKETS - 1)];
            *b = b.saturating_add(c);
        }
        let count = buckets.iter().fold(0u64, |a, &c| a.saturating_add(c));
        Self {
            hook: hook.to_owned(),
            count,
            sum_seconds,
            p50_seconds: quantile(&buckets, 0.50),
            p99_seconds: quantile(&buckets, 0.99),
            buckets,
        }
    }
}

/// The `q` quantile (0 < q ≤ 1) of per-bucket counts: the upper bound, in seconds, of the
/// bucket holding the call of rank ⌈q·count⌉. `None` without calls or over the top bound.
#[must_use]
pub fn quantile(buckets: &[u64], q: f64) -> Option<f64> {
    let count = buckets.iter().fold(0u64, |a, &c| a.saturating_add(c));
    if count == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for (i, &c) in buckets.iter().enumerate() {
        seen = seen.saturating_add(c);
        if seen >= rank {
            return BOUNDS_NS.get(i).map(|&ns| ns as f64 / 1e9);
        }
    }
    None
}

/// Merges hooks of several proxies: per hook, buckets and sums added and the percentiles
/// read again from the merged buckets. In [`HOOKS`] order; hooks no proxy called are left out.
#[must_use]
pub fn merge<'a>(all: impl IntoIterator<Item = &'a HookLatency>) -> Vec<HookLatency> {
    let mut acc: Vec<(Vec<u64>, f64)> = vec![(vec![0; BUCKETS], 0.0); HOOKS.len()];
    for h in all {
        let Some(i) = HOOKS.iter().position(|n| *n == h.hook) else {
            continue;
        };
        let (b, sum) = &mut acc[i];
        for (j, &c) in h.buckets.iter().enumerate() {
            let slot = &mut b[j.min(BUCKETS - 1)];
            *slot = slot.saturating_add(c);
        }
        if h.sum_seconds.is_finite() && h.sum_seconds > 0.0 {
            *sum += h.sum_seconds;
        }
    }
    HOOKS
        .iter()
        .zip(acc)
        .filter(|(_, (b, _))| b.iter().any(|&c| c > 0))
        .map(|(name, (b, sum))| HookLatency::from_buckets(name, &b, sum))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_on_a_bound_is_in_that_bound_s_bucket() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(250), 0);
        assert_eq!(bucket_of(251), 1);
        assert_eq!(bucket_of(1_000), 2);
        assert_eq!(bucket_of(1_001), 3);
        assert_eq!(bucket_of(2_500), 3);
        assert_eq!(bucket_of(10_000_001), BOUNDS_NS.len() - 1);
        assert_eq!(bucket_of(100_000_000), BOUNDS_NS.len() - 1);
        assert_eq!(bucket_of(100_000_001), BUCKETS - 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert!(BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn percentiles_are_the_upper_bound_of_their_bucket() {
        let mut b = vec![0u64; BUCKETS];
        assert_eq!(quantile(&b, 0.5), None);
        // 98 calls up to 1 µs, 2 up to 25 µs: the median is 1 µs, the 99th 25 µs.
        b[bucket_of(800)] = 98;
        b[bucket_of(20_000)] = 2;
        assert_eq!(quantile(&b, 0.5), Some(1e-6));
        assert_eq!(quantile(&b, 0.99), Some(25e-6));
        // Exactly at the rank: 50 of 100 in the first bucket makes it the median.
        let mut c = vec![0u64; BUCKETS];
        c[2] = 50;
        c[5] = 50;
        assert_eq!(quantile(&c, 0.5), Some(1e-6));
        assert_eq!(quantile(&c, 0.51), Some(10e-6));
        // Over the top bound: no finite answer.
        let mut d = vec![0u64; BUCKETS];
        d[BUCKETS - 1] = 1;
        assert_eq!(quantile(&d, 0.5), None);
        let h = HookLatency::from_buckets("on_tick", &d, 0.2);
        assert_eq!((h.count, h.p50_seconds, h.p99_seconds), (1, None, None));
    }

    #[test]
    fn merging_adds_buckets_and_reads_percentiles_again() {
        // Proxy a: 100 fast calls; proxy b: 100 slow ones. Averaging their p99 (1 µs and
        // 5 ms) would say 2.5 ms; the merged buckets say 5 ms.
        let mut fast = vec![0u64; BUCKETS];
        fast[bucket_of(900)] = 100;
        let mut slow = vec![0u64; BUCKETS];
        slow[bucket_of(4_000_000)] = 100;
        let a = HookLatency::from_buckets("on_command", &fast, 0.0001);
        let b = HookLatency::from_buckets("on_command", &slow, 0.4);
        let tick = HookLatency::from_buckets("on_tick", &fast, 0.0001);
        let m = merge([&a, &tick, &b]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].hook, "on_command");
        assert_eq!(m[0].count, 200);
        assert_eq!(m[0].buckets[bucket_of(1_000)], 100);
        assert_eq!(m[0].buckets[bucket_of(4_000_000)], 100);
        assert!((m[0].sum_seconds - 0.4001).abs() < 1e-9);
        assert_eq!(m[0].p50_seconds, Some(1e-6));
        assert_eq!(m[0].p99_seconds, Some(5e-3));
        assert_eq!(m[1].hook, "on_tick");
        // Hostile input: unknown hooks skipped, too many buckets folded into the last,
        // a negative or infinite sum ignored.
        let bad = HookLatency {
            hook: "on_nothing".into(),
            count: 1,
            sum_seconds: 1.0,
            buckets: vec![1],
            p50_seconds: None,
            p99_seconds: None,
        };
        let long = HookLatency {
            hook: "on_close".into(),
            count: 0,
            sum_seconds: f64::INFINITY,
            buckets: vec![1; BUCKETS + 3],
            p50_seconds: None,
            p99_seconds: None,
        };
        let m = merge([&bad, &long]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].buckets.len(), BUCKETS);
        assert_eq!(m[0].buckets[BUCKETS - 1], 4);
        assert_eq!(m[0].count, BUCKETS as u64 + 3);
        assert_eq!(m[0].sum_seconds, 0.0);
    }
}
