//! Automatic failover, opt-in per cluster (docs/failover.md): when the health checks find a
//! group's master down and a quorum of proxies cannot reach it either, the replica with the
//! highest replication offset is promoted (by `ops::promote_locked`, the manual promote) unless
//! it lags the master's last known offset by more than the bound; the old master is made a
//! replica of the new one when it returns. Each step is logged, audited and shown by the API.
//! The rules themselves, without I/O, are in `decide`; this file keeps the settings and state
//! and does the asking and acting.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

mod decide;

use decide::{Refusal, Snapshot, Votes, check_quorum, choose, read_answer};

use super::Dashboard;
use crate::Error;
use tessera_model::clock::now_ms;
use tessera_model::router::GroupId;
use tessera_store::model::{self, ProxyModel, SCHEMA_VERSION};
use tessera_store::{Store, StoreError};
use tessera_wire::audit::AuditEntry;
pub use tessera_wire::failover::{
    FailoverChange, FailoverEvent, FailoverSettings, FailoverState, FailoverView, GroupStatus,
    Pending, Rejoin,
};

/// How long the dashboard waits for one proxy's answer to "do you reach this master?".
pub const ASK_TIMEOUT: Duration = Duration::from_secs(2);
/// A proxy's answer larger than this is not an answer (it names one master).
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Events kept in the document (the audit log keeps them longer).
const KEEP_EVENTS: usize = 20;
/// Servers that may still take themselves for a master, waiting to be told otherwise.
const MAX_REJOIN: usize = 64;

/// The audit log's actor for what failover does.
pub const ACTOR: &str = "failover";

// === the document ===

/// The `failover` document of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverDoc {
    pub schema: u32,
    #[serde(default)]
    pub settings: FailoverSettings,
    #[serde(default)]
    pub pending: Option<Pending>,
    #[serde(default)]
    pub rejoin: Vec<Rejoin>,
    /// Oldest first, at most `KEEP_EVENTS` (20).
    #[serde(default)]
    pub events: Vec<FailoverEvent>,
}

impl Default for FailoverDoc {
    fn default() -> Self {
        Self {
            schema: SCHEMA_VERSION,
            settings: FailoverSettings::default(),
            pending: None,
            rejoin: Vec::new(),
            events: Vec::new(),
        }
    }
}

// === state ===

/// The dashboard's copy of the document and the status of each down group.
#[derive(Debug, Default)]
pub(crate) struct Failover {
    // std Mutexes: never held across an await; changes happen under `ops`.
    doc: Mutex<FailoverDoc>,
    status: Mutex<BTreeMap<GroupId, GroupStatus>>,
    /// When each (group, cause) of refusal was last audited: a flapping master must not
    /// fill the audit log (it keeps 1000 entries) with the same refusal.
    audited: Mutex<std::collections::HashMap<(GroupId, &'static str), Instant>>,
}

/// The same refusal of the same group is audited at most once in this long.
const REAUDIT_AFTER: Duration = Duration::from_secs(600);

impl Failover {
    /// Reads the cluster's document (an absent one is the defaults: off).
    ///
    /// # Errors
    /// The store fails or holds a document that is not one.
    pub(crate) async fn load(store: &dyn Store, paths: &model::Paths) -> Result<Self, StoreError> {
        let doc = model::read::<FailoverDoc>(store, &paths.failover())
            .await?
            .map(|(d, _)| d)
            .unwrap_or_default();
        if let Some(p) = &doc.pending {
            warn!(group = %p.group, to = %p.to, "a failover was decided and not completed: completing it");
        }
        Ok(Self {
            doc: Mutex::new(doc),
            status: Mutex::default(),
            audited: Mutex::default(),
        })
    }

    fn doc(&self) -> FailoverDoc {
        self.doc.lock().expect("failover lock poisoned").clone()
    }

    /// The status of group `id`, if it is down and not failing over.
    pub(crate) fn group_status(&self, id: GroupId) -> Option<GroupStatus> {
        self.status
            .lock()
            .expect("failover lock poisoned")
            .get(&id)
            .cloned()
    }
}

impl Dashboard {
    /// Settings, the status of down groups, and recent failovers.
    pub fn failover_view(&self) -> FailoverView {
        let doc = self.failover.doc();
        FailoverView {
            settings: doc.settings,
            groups: self
                .failover
                .status
                .lock()
                .expect("failover lock poisoned")
                .values()
                .cloned()
                .collect(),
            pending: doc.pending,
            rejoin: doc.rejoin,
            events: doc.events.into_iter().rev().collect(),
        }
    }

    /// Changes the settings and persists them.
    ///
    /// # Errors
    /// 400 for a value out of range; the store fails.
    pub async fn set_failover(&self, change: FailoverChange) -> Result<FailoverView, Error> {
        let _ops = self.ops.lock().await;
        let mut doc = self.failover.doc();
        let s = &mut doc.settings;
        if let Some(v) = change.enabled {
            s.enabled = v;
        }
        if let Some(v) = change.max_lag_bytes {
            s.max_lag_bytes = v;
        }
        if let Some(v) = change.quorum {
            s.quorum = v;
        }
        if let Some(v) = change.down_after_checks {
            s.down_after_checks = v;
        }
        if let Some(v) = change.cooldown_secs {
            s.cooldown_secs = v;
        }
        validate(s)?;
        self.save_failover(doc).await?;
        info!(settings = ?self.failover.doc().settings, "failover settings changed");
        Ok(self.failover_view())
    }

    /// Writes the document, then the dashboard's copy of it.
    async fn save_failover(&self, doc: FailoverDoc) -> Result<(), StoreError> {
        model::write(&*self.store, &self.paths.failover(), &doc).await?;
        *self.failover.doc.lock().expect("failover lock poisoned") = doc;
        Ok(())
    }
}

fn validate(s: &FailoverSettings) -> Result<(), Error> {
    s.validate().map_err(Error::Invalid)
}

// === asking the proxies (the rules are in `decide`) ===

/// Reads one proxy's answer about `master` of `group`: `Some(true)` it cannot reach it,
/// `Some(false)` it can, `None` no usable answer (unreachable, an error, oversized, not
/// about this master, or signed with another proxy's token: it does not count).
async fn ask_proxy(d: &Dashboard, p: &ProxyModel, group: GroupId, master: &str) -> Option<bool> {
    let path = format!("/api/proxy/masters?group={}", group.0);
    let mut resp = d
        .proxy_call(reqwest::Method::GET, &p.admin_addr, &path)
        .timeout(ASK_TIMEOUT)
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            warn!(token = %p.token, "ignoring an oversized answer about the masters");
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    read_answer(&body, &p.token, group, master)
}

async fn ask_proxies(d: &Dashboard, group: GroupId, master: &str) -> Result<Votes, Refusal> {
    let online = d
        .online_proxies("failover quorum", 0)
        .await
        .map_err(|e| Refusal::waiting("quorum", format!("cannot list the proxies: {e}")))?;
    let answers =
        futures_util::future::join_all(online.iter().map(|p| ask_proxy(d, p, group, master))).await;
    Ok(Votes {
        online: online.len(),
        down: answers.iter().filter(|a| **a == Some(true)).count(),
        up: answers.iter().filter(|a| **a == Some(false)).count(),
    })
}

fn elapsed_ms(since: Option<Instant>) -> Option<u64> {
    since.map(|t| u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX))
}

impl Dashboard {
    /// The down groups (master failing), with what failover needs to know of each.
    fn down_snapshots(&self) -> Vec<Snapshot> {
        let st = self.state.lock().expect("state lock poisoned");
        st.groups
            .values()
            .filter(|g| st.down.contains(&g.id))
            .filter_map(|g| {
                let master = g.master()?.to_string();
                let mh = st.servers.get(&master).cloned().unwrap_or_default();
                let replicas = g
                    .servers
                    .iter()
                    .skip(1)
                    .map(|s| {
                        let h = st.servers.get(&s.addr).cloned().unwrap_or_default();
                        let up = h.up && h.failures == 0;
                        (s.addr.clone(), up, h.role_reported, h.repl_offset)
                    })
                    .collect();
                let migrating = st
                    .slots
                    .iter()
                    .filter(|s| {
                        s.action
                            .as_ref()
                            .is_some_and(|a| a.source == g.id || a.target == g.id)
                    })
                    .count();
                Some(Snapshot {
                    group: g.id,
                    master,
                    master_failures: mh.failures,
                    master_last_offset: mh.last_offset,
                    failing_since: mh.failing_since,
                    replicas,
                    migrating,
                })
            })
            .collect()
    }

    /// Records why group `group` (of master `master`) is not failing over; logs and audits
    /// a new cause once.
    async fn set_status(&self, group: GroupId, master: &str, r: Refusal) {
        let changed = {
            let mut status = self.failover.status.lock().expect("failover lock poisoned");
            let old = status.get(&group);
            let changed = old.is_none_or(|o| o.kind != r.kind || o.master != master);
            let since_ms = match old {
                Some(o) if !changed => o.since_ms,
                _ => now_ms(),
            };
            status.insert(
                group,
                GroupStatus {
                    group,
                    master: master.to_string(),
                    state: match (r.kind, r.waiting) {
                        ("off", _) => FailoverState::Off,
                        (_, true) => FailoverState::Waiting,
                        (_, false) => FailoverState::Refused,
                    },
                    kind: r.kind.to_owned(),
                    reason: r.reason.clone(),
                    since_ms,
                },
            );
            changed
        };
        // "confirming" and "cooldown" pass by themselves, and "off" is the operator's choice:
        // the log says them, the audit log keeps what an operator must act on.
        if changed {
            warn!(%group, %master, kind = r.kind, reason = %r.reason, "not failing over");
            if !r.waiting && r.kind != "off" {
                self.events.record(
                    tessera_wire::events::Severity::Critical,
                    tessera_wire::events::EventKind::FailoverRefused,
                    format!("group {group}'s master {master} is down and automatic failover refuses: {}", r.reason),
                );
            }
            if !matches!(r.kind, "off" | "confirming" | "cooldown")
                && self.first_audit(group, r.kind)
            {
                self.audit_failover(group, 409, format!("not failing over: {}", r.reason))
                    .await;
            }
        }
    }

    /// Whether a refusal of `group` for `kind` is to be audited now (not in the last
    /// [`REAUDIT_AFTER`]); records that it is.
    fn first_audit(&self, group: GroupId, kind: &'static str) -> bool {
        let mut audited = self
            .failover
            .audited
            .lock()
            .expect("failover lock poisoned");
        let now = Instant::now();
        audited.retain(|_, t| now.duration_since(*t) < REAUDIT_AFTER);
        match audited.entry((group, kind)) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(now);
                true
            }
        }
    }

    async fn audit_failover(&self, group: GroupId, status: u16, detail: String) {
        let entry = AuditEntry {
            time_ms: now_ms(),
            actor: ACTOR.into(),
            token: None,
            role: None,
            method: "FAILOVER".into(),
            path: format!("/api/groups/{group}"),
            summary: format!("automatic failover of group {group}: {detail}"),
            reason: None,
            detail,
            status,
        };
        if let Err(e) = self.audit_log().append(&entry).await {
            warn!(error = %e, "could not record the failover in the audit log");
        }
    }
}

// === acting ===

/// One round, after each round of health checks: completes a persisted decision, makes
/// returned old masters replicas, then considers every down group.
pub(super) async fn tick(d: &Dashboard) {
    let doc = d.failover.doc();
    if let Some(p) = doc.pending {
        resume(d, p).await;
        return;
    }
    if !doc.rejoin.is_empty() {
        rejoin(d, &doc).await;
    }
    let snapshots = d.down_snapshots();
    d.failover
        .status
        .lock()
        .expect("failover lock poisoned")
        .retain(|g, _| snapshots.iter().any(|s| s.group == *g));
    for s in snapshots {
        if !doc.settings.enabled {
            let r = Refusal::refused(
                "off",
                format!(
                    "automatic failover is off (PUT /api/failover {{\"enabled\": true}}): promote a replica by hand (POST /api/groups/{}/promote)",
                    s.group
                ),
            );
            d.set_status(s.group, &s.master, r).await;
            continue;
        }
        if let Err(r) = consider(d, &s, &doc).await {
            d.set_status(s.group, &s.master, r).await;
        }
    }
}

/// Decides for one down group and, when everything agrees, promotes.
async fn consider(d: &Dashboard, s: &Snapshot, doc: &FailoverDoc) -> Result<(), Refusal> {
    let last = doc
        .events
        .iter()
        .rev()
        .find(|e| e.group == s.group)
        .map(|e| e.time_ms);
    let cand = choose(s, &doc.settings, last, now_ms())?;
    let votes = ask_proxies(d, s.group, &s.master).await?;
    check_quorum(&votes, &doc.settings, &s.master)?;

    let mut epoch = d.ops.lock().await;
    // Anything may have changed while the proxies were asked (a manual promote, the master
    // back): decide again on what is true now, under `ops`.
    let Some(now) = d
        .down_snapshots()
        .into_iter()
        .find(|n| n.group == s.group && n.master == s.master)
    else {
        return Ok(());
    };
    let doc = d.failover.doc();
    if doc.pending.is_some() {
        return Ok(());
    }
    let again = choose(&now, &doc.settings, last, now_ms())?;
    if again.addr != cand.addr {
        return Ok(()); // the next round decides with what it sees then
    }
    let pending = Pending {
        group: s.group,
        from: s.master.clone(),
        to: again.addr.clone(),
        offset: again.offset,
        lag_bytes: again.lag,
        votes: votes.down,
        proxies: votes.online,
        decided_ms: now_ms(),
        detect_ms: elapsed_ms(now.failing_since),
    };
    // Persisted before acting: a successor completes this promotion rather than choosing
    // another replica, so the group never ends with two masters the topology both names.
    let mut next = doc.clone();
    next.pending = Some(pending.clone());
    if let Err(e) = d.save_failover(next).await {
        return Err(Refusal::waiting(
            "promote_failed",
            format!(
                "could not persist the decision to promote {}: {e}",
                cand.addr
            ),
        ));
    }
    info!(group = %s.group, from = %s.master, to = %again.addr, offset = again.offset, lag_bytes = again.lag, votes = votes.down, proxies = votes.online, "failing over");
    let result = d.promote_locked(&mut epoch, s.group, &again.addr).await;
    drop(epoch);
    finish(d, pending, result, now.failing_since, false).await
}

/// Records the outcome of a promotion of `p` (completed or not).
async fn finish(
    d: &Dashboard,
    p: Pending,
    result: Result<tessera_store::model::GroupModel, Error>,
    failing_since: Option<Instant>,
    resumed: bool,
) -> Result<(), Refusal> {
    let _ops = d.ops.lock().await;
    let promoted = match &result {
        Ok(_) => true,
        // A push that some proxy did not acknowledge still changed the topology (as after a
        // manual promote): the group's model names the new master.
        Err(_) => {
            d.state
                .lock()
                .expect("state lock poisoned")
                .groups
                .get(&p.group)
                .and_then(|g| g.master())
                == Some(p.to.as_str())
        }
    };
    if !promoted {
        let e = result.err().map(|e| e.to_string()).unwrap_or_default();
        // Kept pending: the next round tries the same replica again (REPLICAOF NO ONE twice
        // is harmless) until it is down, then gives it up.
        return Err(Refusal::waiting(
            "promote_failed",
            format!("promoting {} failed: {e}; trying again", p.to),
        ));
    }
    let event = FailoverEvent {
        time_ms: now_ms(),
        group: p.group,
        old_master: p.from.clone(),
        new_master: p.to.clone(),
        offset: p.offset,
        lag_bytes: p.lag_bytes,
        votes: p.votes,
        proxies: p.proxies,
        failover_ms: if resumed {
            None
        } else {
            elapsed_ms(failing_since)
        },
        detect_ms: p.detect_ms,
        resumed,
    };
    let mut doc = d.failover.doc();
    doc.pending = None;
    doc.rejoin.retain(|r| r.addr != p.from && r.addr != p.to);
    doc.rejoin.push(Rejoin {
        group: p.group,
        addr: p.from.clone(),
    });
    while doc.rejoin.len() > MAX_REJOIN {
        doc.rejoin.remove(0);
    }
    doc.events.push(event.clone());
    while doc.events.len() > KEEP_EVENTS {
        doc.events.remove(0);
    }
    if let Err(e) = d.save_failover(doc).await {
        warn!(error = %e, "could not record the completed failover in the store");
    }
    d.failover
        .status
        .lock()
        .expect("failover lock poisoned")
        .remove(&p.group);
    let push_note = match &result {
        Err(e) => format!("; push incomplete: {e}"),
        Ok(_) => String::new(),
    };
    let timing = event.failover_ms.map_or_else(
        || "completed after a dashboard restart".to_string(),
        |ms| {
            format!("{ms} ms from the master's first failed check to the new topology acknowledged")
        },
    );
    info!(group = %p.group, old_master = %p.from, new_master = %p.to, failover_ms = ?event.failover_ms, "failed over");
    d.events.record(
        tessera_wire::events::Severity::Warning,
        tessera_wire::events::EventKind::FailoverDone,
        format!(
            "group {} failed over: {} promoted in place of master {}; {timing}{push_note}",
            p.group, p.to, p.from
        ),
    );
    d.audit_failover(
        p.group,
        if result.is_ok() { 200 } else { 502 },
        format!(
            "promoted {} (offset {}, {} bytes behind) in place of master {}, seen down by {} of {} proxies; {timing}{push_note}",
            p.to, p.offset, p.lag_bytes, p.from, p.votes, p.proxies
        ),
    )
    .await;
    Ok(())
}

/// Completes a decision persisted by this dashboard or a predecessor.
async fn resume(d: &Dashboard, p: Pending) {
    let (master, to_health) = {
        let st = d.state.lock().expect("state lock poisoned");
        let g = st
            .groups
            .get(&p.group)
            .filter(|g| g.servers.iter().any(|s| s.addr == p.to));
        (
            g.and_then(|g| g.master().map(str::to_string)),
            st.servers.get(&p.to).cloned(),
        )
    };
    let settings = d.failover.doc().settings;
    let Some(master) = master else {
        let reason = format!("{} is no longer in group {}", p.to, p.group);
        let _ = clear_pending(d, &p, &reason).await;
        return;
    };
    let mut epoch = d.ops.lock().await;
    let result = if master == p.to {
        // Saved before a crash, perhaps not pushed: push (one more epoch is harmless).
        let g = d.group(p.group);
        match d.commit(&mut epoch).await {
            Ok(_) => g,
            Err(e) => Err(e),
        }
    } else if to_health.is_some_and(|h| h.failures >= settings.down_after_checks) {
        drop(epoch);
        // It went down before its promotion completed: give it up. If it took itself for a
        // master meanwhile, it is told otherwise when it answers again.
        let reason = format!("{} went down during its promotion", p.to);
        let _ = clear_pending(d, &p, &reason).await;
        return;
    } else {
        d.promote_locked(&mut epoch, p.group, &p.to).await
    };
    drop(epoch);
    if let Err(r) = finish(d, p.clone(), result, None, true).await {
        d.set_status(p.group, &p.from, r).await;
    }
}

async fn clear_pending(d: &Dashboard, p: &Pending, reason: &str) -> Result<(), StoreError> {
    let _ops = d.ops.lock().await;
    let mut doc = d.failover.doc();
    doc.pending = None;
    if !doc.rejoin.iter().any(|r| r.addr == p.to) {
        doc.rejoin.push(Rejoin {
            group: p.group,
            addr: p.to.clone(),
        });
    }
    d.save_failover(doc).await?;
    warn!(group = %p.group, to = %p.to, %reason, "gave up a decided failover");
    d.audit_failover(
        p.group,
        409,
        format!("gave up promoting {}: {reason}", p.to),
    )
    .await;
    Ok(())
}

/// Servers that were masters (or were being promoted) and are replicas in the model: once
/// one answers, it is pointed at its group's master (REPLICAOF, which a replica already
/// following that master takes as a no-op). A restarted old master may come back with data
/// the new master never had: REPLICAOF discards it, which is the loss the lag bound limits.
async fn rejoin(d: &Dashboard, doc: &FailoverDoc) {
    let _ops = d.ops.lock().await;
    let mut done = Vec::new();
    for r in &doc.rejoin {
        let (master, health) = {
            let st = d.state.lock().expect("state lock poisoned");
            let g = st.groups.get(&r.group);
            let in_group = g.is_some_and(|g| g.servers.iter().any(|s| s.addr == r.addr));
            let master = g.and_then(|g| g.master()).map(str::to_string);
            (
                master.filter(|m| in_group && *m != r.addr),
                st.servers.get(&r.addr).cloned(),
            )
        };
        let Some(master) = master else {
            done.push(r.addr.clone()); // removed, or its group's master now
            continue;
        };
        if !health.is_some_and(|h| h.up) {
            continue;
        }
        match d.replicate(&r.addr, &master).await {
            Ok(()) => {
                info!(group = %r.group, addr = %r.addr, %master, "old master rejoined as a replica");
                d.audit_failover(
                    r.group,
                    200,
                    format!("{} answers again: now a replica of {master}", r.addr),
                )
                .await;
                done.push(r.addr.clone());
            }
            Err(e) => warn!(addr = %r.addr, error = %e, "could not make the old master a replica"),
        }
    }
    if done.is_empty() {
        return;
    }
    let mut doc = d.failover.doc();
    doc.rejoin.retain(|r| !done.contains(&r.addr));
    if let Err(e) = d.save_failover(doc).await {
        warn!(error = %e, "could not update the failover document");
    }
}
