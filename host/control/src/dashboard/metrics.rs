//! The dashboard's Prometheus text: per-group and per-server health, the topology epoch, the
//! slots assigned and automatic failover's state, on the process-wide recorder (`tessera_http::metrics`).

use std::sync::OnceLock;

use metrics::gauge;

use super::Dashboard;
use tessera_http::metrics::recorder;
use tessera_wire::failover::FailoverState;

/// Renders the Prometheus text of a dashboard: per-group health and the topology epoch.
pub fn render(d: &Dashboard) -> String {
    describe();
    let handle = recorder();
    let cluster = d.cluster.clone();
    if let Ok(epoch) = d.ops.try_lock() {
        gauge!("tessera_dashboard_epoch", "cluster" => cluster.clone()).set(*epoch as f64);
    }
    let failover = d.failover_view();
    gauge!("tessera_failover_enabled", "cluster" => cluster.clone())
        .set(failover.settings.enabled as u8 as f64);
    if let Some(ms) = failover.events.first().and_then(|e| e.failover_ms) {
        gauge!("tessera_failover_last_seconds", "cluster" => cluster.clone())
            .set(ms as f64 / 1000.0);
    }
    let st = d.state.lock().expect("state lock poisoned");
    for g in st.groups.values() {
        // 1 while the group is down and automatic failover refuses (not merely waits).
        let refused = failover
            .groups
            .iter()
            .any(|f| f.group == g.id && f.state == FailoverState::Refused);
        gauge!("tessera_group_failover_refused", "cluster" => cluster.clone(), "group" => g.id.to_string())
            .set(refused as u8 as f64);
        let up = !st.down.contains(&g.id);
        gauge!("tessera_group_up", "cluster" => cluster.clone(), "group" => g.id.to_string())
            .set(up as u8 as f64);
        for s in &g.servers {
            let h = st.servers.get(&s.addr);
            gauge!("tessera_server_up", "cluster" => cluster.clone(), "group" => g.id.to_string(), "addr" => s.addr.clone())
                .set(h.is_some_and(|h| h.up) as u8 as f64);
        }
    }
    let assigned = st.slots.iter().filter(|s| s.group.is_some()).count();
    gauge!("tessera_slots_assigned", "cluster" => cluster).set(assigned as f64);
    handle.render()
}

/// Installs the process's recorder and describes the dashboard's series, once: called at
/// start, so that counters bumped before the first scrape are kept.
pub(crate) fn describe() {
    static DESCRIBED: OnceLock<()> = OnceLock::new();
    recorder();
    DESCRIBED.get_or_init(describe_series);
}

/// HELP text of the dashboard's series (`promtool check metrics` wants it).
fn describe_series() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "tessera_dashboard_stale_proxies_removed_total",
        "Proxies whose registration the dashboard removed: stale, and their admin address refused connections (gone without deregistering)"
    );
    describe_gauge!(
        "tessera_dashboard_epoch",
        "Topology epoch last committed by the dashboard"
    );
    describe_gauge!(
        "tessera_group_up",
        "1 when the group's master answers health checks"
    );
    describe_gauge!(
        "tessera_server_up",
        "1 when the server answers health checks"
    );
    describe_gauge!("tessera_slots_assigned", "Slots assigned to a group");
    describe_gauge!(
        "tessera_failover_enabled",
        "1 when automatic failover is on for the cluster"
    );
    describe_gauge!(
        "tessera_group_failover_refused",
        "1 while the group is down and automatic failover refuses to promote (see /api/failover)"
    );
    describe_gauge!(
        "tessera_failover_last_seconds",
        "The last failover's time from the master's first failed check to the new topology acknowledged"
    );
}
