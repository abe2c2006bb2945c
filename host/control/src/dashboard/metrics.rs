//! The dashboard's Prometheus text: per-group and per-server health, the topology epoch, the
//! slots assigned and automatic failover's state, on the process-wide recorder (`tessera_http::metrics`).

use std::sync::OnceLock;

use metrics::{counter, gauge};

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
    gauge!("tessera_slots_assigned", "cluster" => cluster.clone()).set(assigned as f64);
    for g in st.groups.values() {
        for s in &g.servers {
            if let Some(bytes) = st.servers.get(&s.addr).and_then(|h| h.memory_bytes) {
                gauge!("tessera_server_memory_bytes", "cluster" => cluster.clone(), "group" => g.id.to_string(), "addr" => s.addr.clone())
                    .set(bytes as f64);
            }
        }
    }
    // The registered proxies as the last health round found them (`tessera_proxy_up` per
    // proxy would leave a series behind for every proxy that ever stopped).
    let up = st.proxies.values().filter(|h| h.up).count();
    gauge!("tessera_proxies_registered", "cluster" => cluster.clone()).set(st.proxies.len() as f64);
    gauge!("tessera_proxies_up", "cluster" => cluster.clone()).set(up as f64);
    drop(st);
    render_migration(d, &cluster);
    render_backup(d, &cluster);
    handle.render()
}

/// The migration's gauges: slots waiting and moving, whether the driver says it waits, and
/// the write pause of the last handoff and the largest of the recent ones.
fn render_migration(d: &Dashboard, cluster: &str) {
    let m = d.migration_status();
    let c = cluster.to_owned();
    gauge!("tessera_migration_slots_pending", "cluster" => c.clone()).set(m.pending as f64);
    gauge!("tessera_migration_slots_in_flight", "cluster" => c.clone()).set(m.in_flight as f64);
    gauge!("tessera_migration_blocked", "cluster" => c.clone())
        .set(m.blocked.is_some() as u8 as f64);
    counter!("tessera_migration_keys_moved_total", "cluster" => c.clone()).absolute(m.keys_moved);
    if let Some(p) = &m.write_pause {
        gauge!("tessera_migration_write_pause_last_seconds", "cluster" => c.clone())
            .set(p.last_ms / 1000.0);
        gauge!("tessera_migration_write_pause_max_seconds", "cluster" => c).set(p.max_ms / 1000.0);
    }
}

/// The backups' gauges: whether this dashboard takes backups, and when the last good one
/// finished (also after a restart: it is kept in the store).
fn render_backup(d: &Dashboard, cluster: &str) {
    gauge!("tessera_backup_enabled", "cluster" => cluster.to_owned())
        .set(d.backups.enabled() as u8 as f64);
    if let Some(ms) = d.backups.last_success_ms() {
        backup_done(d, ms);
    }
}

/// A backup finished well at `unix_ms`.
pub(crate) fn backup_done(d: &Dashboard, unix_ms: u64) {
    gauge!("tessera_backup_last_success_timestamp_seconds", "cluster" => d.cluster.clone())
        .set(unix_ms as f64 / 1000.0);
}

/// A backup failed.
pub(crate) fn backup_failed(d: &Dashboard) {
    counter!("tessera_backups_failed_total", "cluster" => d.cluster.clone()).increment(1);
}

/// A one-instant backup paused writes for `ms`.
pub(crate) fn backup_pause(d: &Dashboard, ms: f64) {
    gauge!("tessera_backup_write_pause_last_seconds", "cluster" => d.cluster.clone())
        .set(ms / 1000.0);
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
    describe_gauge!(
        "tessera_server_memory_bytes",
        "Memory the server reports using (INFO used_memory) at the last health check"
    );
    describe_gauge!(
        "tessera_proxies_registered",
        "Proxies registered in the store at the last health round"
    );
    describe_gauge!(
        "tessera_proxies_up",
        "Registered proxies whose admin API answered the last health round"
    );
    describe_gauge!(
        "tessera_migration_slots_pending",
        "Slots queued to move, not started yet"
    );
    describe_gauge!(
        "tessera_migration_slots_in_flight",
        "Slots being copied or handed off"
    );
    describe_gauge!(
        "tessera_migration_blocked",
        "1 while the migration driver says why it waits (GET /api/migrations: blocked)"
    );
    describe_counter!(
        "tessera_migration_keys_moved_total",
        "Keys copied by this dashboard's migrations since it started"
    );
    describe_gauge!(
        "tessera_migration_write_pause_last_seconds",
        "Write pause of the last slot handoff: from the push that held the slots to the one that routed them to their target"
    );
    describe_gauge!(
        "tessera_migration_write_pause_max_seconds",
        "The largest write pause among the recent handoffs"
    );
    describe_counter!(
        "tessera_dashboard_stale_proxies_removed_total",
        "Proxies whose registration the dashboard removed: stale, and their admin address refused connections (gone without deregistering)"
    );
    describe_counter!(
        "tessera_events_total",
        "Events the dashboard recorded since it started, by severity (GET /api/events)"
    );
    describe_gauge!(
        "tessera_backup_enabled",
        "1 when this dashboard takes backups (--backup-root given)"
    );
    describe_gauge!(
        "tessera_backup_last_success_timestamp_seconds",
        "Unix time the last whole-cluster backup that finished well finished (kept in the store)"
    );
    describe_counter!(
        "tessera_backups_failed_total",
        "Whole-cluster backups that failed (their directory is removed)"
    );
    describe_gauge!(
        "tessera_backup_write_pause_last_seconds",
        "Write pause of the last one-instant backup: from the first CLIENT PAUSE sent to the last CLIENT UNPAUSE answered"
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
