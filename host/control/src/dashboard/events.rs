//! The cluster's events: what happened to it, one sentence each with a severity
//! (`tessera_wire::events`). Anything in the dashboard records one with
//! [`EventLog::record`]:
//!
//! ```ignore
//! d.events.record(Severity::Info, EventKind::BackupTaken, format!("backup {name} taken: {n} keys"));
//! ```
//!
//! The newest [`CAPACITY`] are kept in memory; the newest [`PERSISTED`] are written to the
//! store as one document (`<cluster>/events`), at most once per [`FLUSH_EVERY`] and only when
//! something was recorded since, so a dashboard that restarts (or its successor) shows them
//! and goes on numbering after them. What is read back is checked like any input: a document
//! that does not parse is ignored (logged), entries are capped in number and length.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::Dashboard;
use tessera_model::clock::now_ms;
use tessera_store::Store;
use tessera_store::model::{self, Paths};
use tessera_wire::events::{Event, EventKind, EventsPage, Severity};

/// Events kept in memory, events kept in the store, and the longest detail kept.
pub const CAPACITY: usize = 1000;
pub const PERSISTED: usize = 500;
pub const MAX_DETAIL: usize = 1000;
/// The most one page of `GET /api/events` holds, and the longest a caller may wait.
pub const MAX_PAGE: usize = 1000;
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// Long polls one token may hold open at once: `tessera admin events --follow` holds one, so
/// 8 lets a few followers share a token while one token cannot take the HTTP server's
/// connections from every other caller.
pub const MAX_WAITS_PER_CALLER: usize = 8;
/// How often recorded events are written to the store (at most).
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The stored document.
#[derive(Serialize, Deserialize)]
struct Stored {
    events: Vec<Event>,
}

fn key(paths: &Paths) -> String {
    format!("{}events", paths.cluster_prefix())
}

/// The cluster's event log.
pub struct EventLog {
    /// The cluster's name, for `/metrics`.
    cluster: String,
    ring: Mutex<(VecDeque<Event>, u64)>,
    /// Wakes long polls.
    added: tokio::sync::watch::Sender<u64>,
    dirty: AtomicBool,
    /// Long polls open, by caller (bounded by the tokens there are: an entry is removed when
    /// its last poll ends).
    waiting: Arc<Mutex<HashMap<String, usize>>>,
}

/// One caller's open long poll; ends it when dropped (the poll answered, or its client gone).
pub struct WaitSlot {
    caller: String,
    waiting: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut w = self.waiting.lock().expect("waiting lock poisoned");
        if let Some(n) = w.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                w.remove(&self.caller);
            }
        }
    }
}

impl EventLog {
    /// The log as the store holds it (empty when it holds none or an unreadable one).
    pub(crate) async fn load(store: &dyn Store, paths: &Paths, cluster: &str) -> Self {
        let mut events = match model::read::<Stored>(store, &key(paths)).await {
            Ok(Some((doc, _))) => doc.events,
            Ok(None) => vec![],
            Err(e) => {
                warn!(error = %e, "the stored events are unreadable; starting a new log");
                vec![]
            }
        };
        events.sort_by_key(|e| e.id);
        events.dedup_by_key(|e| e.id);
        let skip = events.len().saturating_sub(PERSISTED);
        let ring: VecDeque<Event> = events
            .into_iter()
            .skip(skip)
            .map(|mut e| {
                truncate(&mut e.detail);
                e
            })
            .collect();
        let last = ring.back().map_or(0, |e| e.id);
        // From 0, so that `increase()` counts the first of each.
        for s in Severity::ALL {
            ::metrics::counter!("tessera_events_total", "cluster" => cluster.to_owned(), "severity" => s.as_str())
                .absolute(0);
        }
        Self {
            cluster: cluster.to_owned(),
            ring: Mutex::new((ring, last)),
            added: tokio::sync::watch::channel(last).0,
            dirty: AtomicBool::new(false),
            waiting: Arc::default(),
        }
    }

    /// A long poll for `caller`, unless it holds [`MAX_WAITS_PER_CALLER`] already.
    pub fn enter_wait(&self, caller: &str) -> Option<WaitSlot> {
        let mut w = self.waiting.lock().expect("waiting lock poisoned");
        let n = w.entry(caller.to_owned()).or_default();
        if *n >= MAX_WAITS_PER_CALLER {
            return None;
        }
        *n += 1;
        Some(WaitSlot {
            caller: caller.to_owned(),
            waiting: self.waiting.clone(),
        })
    }

    /// Records an event now; returns its id. Cheap and synchronous: the store write happens
    /// later (`run`).
    pub fn record(&self, severity: Severity, kind: EventKind, detail: impl Into<String>) -> u64 {
        let mut detail = detail.into();
        truncate(&mut detail);
        match severity {
            Severity::Info => info!(?kind, %detail, "event"),
            _ => warn!(?kind, severity = severity.as_str(), %detail, "event"),
        }
        ::metrics::counter!("tessera_events_total", "cluster" => self.cluster.clone(), "severity" => severity.as_str())
            .increment(1);
        let id = {
            let mut st = self.ring.lock().expect("events lock poisoned");
            st.1 += 1;
            let id = st.1;
            st.0.push_back(Event {
                id,
                time_ms: now_ms(),
                severity,
                kind,
                detail,
            });
            while st.0.len() > CAPACITY {
                st.0.pop_front();
            }
            id
        };
        self.dirty.store(true, Ordering::Release);
        self.added.send_replace(id);
        id
    }

    /// Events after `after` (the newest `limit` when absent), oldest first.
    pub fn page(&self, after: Option<u64>, limit: usize) -> EventsPage {
        let st = self.ring.lock().expect("events lock poisoned");
        let events: Vec<Event> = match after {
            Some(a) => {
                st.0.iter()
                    .filter(|e| e.id > a)
                    .take(limit)
                    .cloned()
                    .collect()
            }
            None => {
                let skip = st.0.len().saturating_sub(limit);
                st.0.iter().skip(skip).cloned().collect()
            }
        };
        EventsPage {
            events,
            last_id: st.1,
            capacity: CAPACITY,
        }
    }

    /// Waits up to `wait` for an event after `after`.
    pub async fn wait_after(&self, after: u64, wait: Duration) {
        let mut rx = self.added.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|last| *last > after)).await;
    }

    /// Writes the newest events to the store if any were recorded since the last write.
    async fn flush(&self, store: &dyn Store, paths: &Paths) {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        let events: Vec<Event> = {
            let st = self.ring.lock().expect("events lock poisoned");
            let skip = st.0.len().saturating_sub(PERSISTED);
            st.0.iter().skip(skip).cloned().collect()
        };
        if let Err(e) = model::write(store, &key(paths), &Stored { events }).await {
            warn!(error = %e, "could not write the events to the store; trying again");
            self.dirty.store(true, Ordering::Release);
        }
    }
}

fn truncate(s: &mut String) {
    if s.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
}

/// The background work: writing recorded events to the store, watching this dashboard's
/// lock (its heartbeat's delays, its loss).
pub(super) async fn run(d: Arc<Dashboard>) {
    let lost = {
        let d = d.clone();
        async move {
            d.lock_lost().await;
            d.events.record(
                Severity::Critical,
                EventKind::LockLost,
                format!(
                    "the dashboard at {} lost the lock of cluster {}: it stops",
                    d.info.admin_addr, d.cluster
                ),
            );
        }
    };
    let flush = async {
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut slow = false;
        loop {
            tick.tick().await;
            slow = super::events_watch::store_heartbeat(&d, slow);
            d.events.flush(&*d.store, &d.paths).await;
        }
    };
    tokio::select! {
        () = lost => {}
        () = flush => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log() -> EventLog {
        EventLog {
            cluster: "c".into(),
            ring: Mutex::new((VecDeque::new(), 0)),
            added: tokio::sync::watch::channel(0).0,
            dirty: AtomicBool::new(false),
            waiting: Arc::default(),
        }
    }

    #[test]
    fn a_caller_holds_at_most_its_share_of_waits_and_gets_them_back() {
        let l = log();
        let held: Vec<WaitSlot> = (0..MAX_WAITS_PER_CALLER)
            .map(|_| l.enter_wait("a").expect("under the cap"))
            .collect();
        assert!(l.enter_wait("a").is_none(), "past the cap");
        let other = l.enter_wait("b").expect("another caller has its own share");
        drop(held);
        drop(other);
        assert!(
            l.waiting.lock().unwrap().is_empty(),
            "no entry outlives its waits"
        );
        assert!(l.enter_wait("a").is_some());
    }

    #[test]
    fn the_ring_is_bounded_and_pages_follow_ids() {
        let l = log();
        for i in 0..CAPACITY + 5 {
            l.record(Severity::Info, EventKind::ProxyBack, format!("e{i}"));
        }
        let p = l.page(None, 10);
        assert_eq!(p.last_id, (CAPACITY + 5) as u64);
        assert_eq!(p.events.len(), 10);
        assert_eq!(p.events[9].id, p.last_id);
        assert_eq!(l.page(Some(0), MAX_PAGE).events.len(), CAPACITY);
        assert_eq!(l.page(Some(0), MAX_PAGE).events[0].id, 6);
        assert!(l.page(Some(p.last_id), 10).events.is_empty());
    }

    #[test]
    fn a_long_detail_is_cut() {
        let l = log();
        l.record(
            Severity::Warning,
            EventKind::StoreSlow,
            "é".repeat(MAX_DETAIL),
        );
        let e = &l.page(None, 1).events[0];
        assert!(e.detail.len() <= MAX_DETAIL + 3);
    }
}
