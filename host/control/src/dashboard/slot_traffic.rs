//! Per-slot traffic rates: the dashboard reads every online proxy's cumulative slot counters
//! (`GET /api/proxy/slots`) every `slot_sample` and keeps the reads of the last
//! `slot_window`; a slot's ops/s and bytes/s are the growth of its counters over that window.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tracing::debug;

use super::Dashboard;
use tessera_model::router::SLOTS;
use tessera_wire::telemetry::SlotCounts;

/// One proxy's counters at one read: ops, bytes in, bytes out per slot.
type Counters = Box<[[u64; 3]]>;

/// The reads of the window, oldest first.
#[derive(Default)]
pub(crate) struct SlotTraffic {
    samples: Mutex<VecDeque<Sample>>,
}

struct Sample {
    at: Instant,
    /// Proxy token → its counters.
    proxies: HashMap<String, Arc<Counters>>,
}

/// Rates per slot over the window.
#[derive(Debug, Clone)]
pub(crate) struct Rates {
    pub(crate) ops_per_sec: Vec<f64>,
    pub(crate) bytes_per_sec: Vec<f64>,
    /// The span the rates are measured over (0 before two reads).
    pub(crate) window: Duration,
    /// Proxies counted in both reads.
    pub(crate) proxies: usize,
}

impl SlotTraffic {
    /// Adds a read and drops those older than `window` (keeping one at or before its start).
    fn push(&self, sample: Sample, window: Duration) {
        let mut s = self.samples.lock().expect("slot samples lock poisoned");
        s.push_back(sample);
        let now = s.back().expect("just pushed").at;
        while s.len() > 2 && now.duration_since(s[1].at) >= window {
            s.pop_front();
        }
    }

    /// Rates per proxy from its oldest usable read of the window to the newest read, summed.
    /// A proxy's oldest usable read is the first that holds it with counters no higher than
    /// now: a proxy that registered late counts from its first read, a restarted one from its
    /// first read after the restart.
    pub(crate) fn rates(&self) -> Rates {
        let s = self.samples.lock().expect("slot samples lock poisoned");
        let mut r = Rates {
            ops_per_sec: vec![0.0; SLOTS],
            bytes_per_sec: vec![0.0; SLOTS],
            window: Duration::ZERO,
            proxies: 0,
        };
        let Some(last) = s.back() else {
            return r;
        };
        for (token, new) in &last.proxies {
            let Some((at, old)) = s.iter().find_map(|read| {
                let old = read.proxies.get(token)?;
                let behind = new.iter().zip(old.iter()).all(|(n, o)| n[0] >= o[0]);
                behind.then_some((read.at, old))
            }) else {
                continue;
            };
            let span = last.at.duration_since(at);
            if span.is_zero() {
                continue;
            }
            let secs = span.as_secs_f64();
            r.window = r.window.max(span);
            r.proxies += 1;
            for (slot, (n, o)) in new.iter().zip(old.iter()).enumerate() {
                r.ops_per_sec[slot] += (n[0] - o[0]) as f64 / secs;
                r.bytes_per_sec[slot] +=
                    (n[1].saturating_sub(o[1]) + n[2].saturating_sub(o[2])) as f64 / secs;
            }
        }
        r
    }
}

fn expand(c: &SlotCounts) -> Counters {
    let mut out: Counters = vec![[0u64; 3]; SLOTS].into_boxed_slice();
    for (i, &slot) in c.slots.iter().enumerate() {
        if let Some(cell) = out.get_mut(slot as usize) {
            *cell = [
                c.ops.get(i).copied().unwrap_or(0),
                c.bytes_in.get(i).copied().unwrap_or(0),
                c.bytes_out.get(i).copied().unwrap_or(0),
            ];
        }
    }
    out
}

/// Reads every online proxy's counters once.
async fn sample(d: &Dashboard) -> Sample {
    let proxies = match d.registered_proxies().await {
        Ok(p) => p,
        Err(e) => {
            debug!(error = %e, "slot sampling: the store did not list the proxies");
            Vec::new()
        }
    };
    let offline = d.state.lock().expect("state lock poisoned").offline.clone();
    let online: Vec<_> = proxies
        .into_iter()
        .filter(|p| !offline.contains(&p.token))
        .collect();
    let read = join_all(online.iter().map(|p| async move {
        let r = d
            .proxy_call(reqwest::Method::GET, &p.admin_addr, "/api/proxy/slots")
            .timeout(Duration::from_secs(1))
            .send()
            .await
            .ok()?;
        r.json::<SlotCounts>().await.ok()
    }))
    .await;
    let proxies = online
        .iter()
        .zip(read)
        .filter_map(|(p, c)| Some((p.token.clone(), Arc::new(expand(&c?)))))
        .collect();
    Sample {
        at: Instant::now(),
        proxies,
    }
}

/// The sampling loop.
pub(super) async fn run(d: Arc<Dashboard>) {
    let mut tick = tokio::time::interval(d.opts.slot_sample);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let s = sample(&d).await;
        d.slot_traffic.push(s, d.opts.slot_window);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(at: Instant, token: &str, slot: u16, ops: u64) -> Sample {
        let c = SlotCounts {
            slots: vec![slot],
            ops: vec![ops],
            bytes_in: vec![ops * 10],
            bytes_out: vec![ops * 5],
        };
        Sample {
            at,
            proxies: [(token.to_string(), Arc::new(expand(&c)))].into(),
        }
    }

    #[test]
    fn rates_are_the_growth_over_the_window() {
        let t = SlotTraffic::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(60);
        t.push(read(t0, "a", 3, 100), w);
        t.push(read(t0 + Duration::from_secs(5), "a", 3, 200), w);
        t.push(read(t0 + Duration::from_secs(10), "a", 3, 600), w);
        let r = t.rates();
        assert_eq!(r.ops_per_sec[3], 50.0);
        assert_eq!(r.bytes_per_sec[3], 750.0);
        assert_eq!(r.proxies, 1);
    }

    #[test]
    fn old_reads_leave_the_window_and_a_restart_counts_from_its_next_read() {
        let t = SlotTraffic::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(10);
        for i in 0..5u64 {
            t.push(read(t0 + Duration::from_secs(5 * i), "a", 1, 100 * i), w);
        }
        assert_eq!(t.rates().window, Duration::from_secs(10));
        assert_eq!(t.rates().ops_per_sec[1], 20.0);
        t.push(read(t0 + Duration::from_secs(25), "a", 1, 3), w);
        assert_eq!(
            t.rates().proxies,
            0,
            "a restarted proxy needs a second read"
        );
        t.push(read(t0 + Duration::from_secs(30), "a", 1, 53), w);
        assert_eq!(
            t.rates().ops_per_sec[1],
            10.0,
            "counted from its first read after the restart"
        );
    }

    #[test]
    fn a_proxy_that_registered_late_counts_from_its_first_read() {
        let t = SlotTraffic::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(60);
        t.push(
            Sample {
                at: t0,
                proxies: HashMap::new(),
            },
            w,
        );
        t.push(read(t0 + Duration::from_secs(5), "a", 2, 0), w);
        t.push(read(t0 + Duration::from_secs(7), "a", 2, 40), w);
        let r = t.rates();
        assert_eq!((r.proxies, r.ops_per_sec[2]), (1, 20.0));
        assert_eq!(r.window, Duration::from_secs(2));
    }
}
