//! Events the dashboard finds by watching rather than doing: a proxy's health changing (up,
//! fenced, draining, lost, back), the store slow to confirm this dashboard's lock heartbeat,
//! and a migration step held past [`HOLD_BOUND`]. Each compares what it sees with what it saw
//! and records the change once (`events::EventLog::record`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tessera_wire::cluster::ProxyHealthState;
use tessera_wire::events::{EventKind, Severity};

use super::Dashboard;

/// A migration held this long is an event.
pub(super) const HOLD_BOUND: Duration = Duration::from_secs(30);
/// No heartbeat confirmed for this long is an event (proxies fence themselves 3 s before
/// their 10 s lease can end).
pub(super) const SLOW_HEARTBEAT: Duration = Duration::from_secs(3);

/// What the watchers saw last.
#[derive(Default)]
pub(crate) struct Watch {
    /// Each proxy's state and address, by token.
    proxies: Mutex<Option<HashMap<String, (ProxyHealthState, String)>>>,
    /// The migration's hold: its reason, since when, whether recorded.
    hold: Mutex<Option<(String, Instant, bool)>>,
}

fn state_name(s: ProxyHealthState) -> &'static str {
    match s {
        ProxyHealthState::Up => "up",
        ProxyHealthState::Fenced => "fenced",
        ProxyHealthState::Draining => "draining",
        ProxyHealthState::Lost => "lost",
    }
}

impl Dashboard {
    /// Records the changes of the proxies' health: `now` is every known or registered
    /// proxy's (token, address, state), after a health round.
    pub(super) fn proxies_observed(&self, now: Vec<(String, String, ProxyHealthState)>) {
        let mut seen = self
            .event_watch
            .proxies
            .lock()
            .expect("watch lock poisoned");
        let first = seen.is_none();
        let before = seen.take().unwrap_or_default();
        let lost_addrs: Vec<&str> = before
            .values()
            .filter(|(s, _)| *s == ProxyHealthState::Lost)
            .map(|(_, a)| a.as_str())
            .collect();
        for (token, addr, state) in &now {
            let was = before.get(token).map(|(s, _)| *s);
            let was = match was {
                // A new registration where a lost proxy was: that proxy, restarted.
                None if lost_addrs.contains(&addr.as_str()) => Some(ProxyHealthState::Lost),
                None if first => None,
                None => Some(ProxyHealthState::Up),
                w => w,
            };
            if was == Some(*state) {
                continue;
            }
            let (severity, kind, detail) = match state {
                ProxyHealthState::Lost => (
                    Severity::Critical,
                    EventKind::ProxyLost,
                    format!(
                        "proxy {addr} is lost: it does not answer its health checks or its \
                         registration lapsed; its clients get no answers"
                    ),
                ),
                ProxyHealthState::Fenced => (
                    Severity::Warning,
                    EventKind::ProxyFenced,
                    format!(
                        "proxy {addr} fenced itself: it refuses commands until its \
                         registration in the store is renewed"
                    ),
                ),
                ProxyHealthState::Draining => (
                    Severity::Warning,
                    EventKind::ProxyDraining,
                    format!("proxy {addr} is draining: it takes no new connections and stops"),
                ),
                ProxyHealthState::Up => match was {
                    // Seen up at the first round: nothing happened.
                    None => continue,
                    Some(w) => (
                        Severity::Info,
                        EventKind::ProxyBack,
                        format!("proxy {addr} is back up (it was {})", state_name(w)),
                    ),
                },
            };
            self.events.record(severity, kind, detail);
        }
        *seen = Some(
            now.into_iter()
                .map(|(t, a, s)| (t, (s, a)))
                .collect::<HashMap<_, _>>(),
        );
    }

    /// Records a migration held past [`HOLD_BOUND`] (once per reason), with the reason the
    /// driver gives; `None`: not held.
    pub(crate) fn migration_hold(&self, reason: Option<&str>) {
        let mut hold = self.event_watch.hold.lock().expect("watch lock poisoned");
        let Some(reason) = reason else {
            *hold = None;
            return;
        };
        match &mut *hold {
            Some((r, since, recorded)) if r == reason => {
                if !*recorded && since.elapsed() >= HOLD_BOUND {
                    *recorded = true;
                    self.events.record(
                        Severity::Warning,
                        EventKind::MigrationHeld,
                        format!(
                            "the migration has been held for {} s: {reason}",
                            since.elapsed().as_secs()
                        ),
                    );
                }
            }
            _ => *hold = Some((reason.to_owned(), Instant::now(), false)),
        }
    }
}

impl Dashboard {
    /// Records the end of a migration run of `slots` slots, `aborted` of them aborted,
    /// having copied `keys` keys.
    pub(crate) fn migration_ended(&self, slots: usize, aborted: usize, keys: u64) {
        if aborted > 0 {
            self.events.record(
                Severity::Warning,
                EventKind::MigrationAborted,
                format!(
                    "a migration of {slots} slots ended with {aborted} aborted ({} moved, {keys} keys copied)",
                    slots - aborted
                ),
            );
        } else {
            self.events.record(
                Severity::Info,
                EventKind::MigrationFinished,
                format!("a migration of {slots} slots finished: {keys} keys copied"),
            );
        }
    }
}

/// Records the store's slowness to confirm this dashboard's lock heartbeat, and its
/// recovery; `slow`: whether it was slow at the last call. Returns whether it is now.
pub(super) fn store_heartbeat(d: &Dashboard, slow: bool) -> bool {
    let clock = d._lock.lock().expect("lock poisoned").clock();
    let left = clock
        .valid_until()
        .saturating_duration_since(Instant::now());
    let since = super::LOCK_TTL.saturating_sub(left);
    let now_slow = since >= SLOW_HEARTBEAT;
    if now_slow && !slow {
        d.events.record(
            Severity::Warning,
            EventKind::StoreSlow,
            format!(
                "the store {} has not confirmed the dashboard's lock heartbeat for {} s; \
                 proxies fence themselves when theirs go unconfirmed for 7 s",
                d.store.describe(),
                since.as_secs()
            ),
        );
    } else if slow && !now_slow {
        d.events.record(
            Severity::Info,
            EventKind::StoreRecovered,
            format!(
                "the store {} confirms the dashboard's lock heartbeat again",
                d.store.describe()
            ),
        );
    }
    now_slow
}
