//! Automatic failover's decision, from what is already known: whether a down group's best
//! replica may be promoted (checks, cooldown, migrations, role, lag), whether the proxies'
//! answers make a quorum, and whether one answer counts. No I/O: acting is `failover`'s.

use std::time::Instant;

use super::{FailoverSettings, MAX_ANSWER_BYTES};
use tessera_model::router::GroupId;
use tessera_model::router::MastersSeen;

/// What the dashboard knows of one down group, taken under the state lock.
#[derive(Debug, Clone)]
pub(super) struct Snapshot {
    pub(super) group: GroupId,
    pub(super) master: String,
    pub(super) master_failures: u32,
    pub(super) master_last_offset: Option<i64>,
    pub(super) failing_since: Option<Instant>,
    /// (addr, up, role reported, offset)
    pub(super) replicas: Vec<(String, bool, Option<String>, Option<i64>)>,
    pub(super) migrating: usize,
}

/// A replica fit to be promoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Candidate {
    pub(super) addr: String,
    pub(super) offset: i64,
    pub(super) lag: i64,
}

/// Why not (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) kind: &'static str,
    pub(super) waiting: bool,
    pub(super) reason: String,
}

impl Refusal {
    pub(super) fn refused(kind: &'static str, reason: String) -> Self {
        Self {
            kind,
            waiting: false,
            reason,
        }
    }
    pub(super) fn waiting(kind: &'static str, reason: String) -> Self {
        Self {
            kind,
            waiting: true,
            reason,
        }
    }
}

/// The replica to promote, from what the dashboard itself knows; no network.
pub(super) fn choose(
    s: &Snapshot,
    settings: &FailoverSettings,
    last_failover_ms: Option<u64>,
    now_ms: u64,
) -> Result<Candidate, Refusal> {
    let g = s.group;
    if s.master_failures < settings.down_after_checks {
        return Err(Refusal::waiting(
            "confirming",
            format!(
                "master {} failed {} of the {} checks in a row that failover waits for",
                s.master, s.master_failures, settings.down_after_checks
            ),
        ));
    }
    if let Some(t) = last_failover_ms {
        let since = now_ms.saturating_sub(t) / 1000;
        if since < settings.cooldown_secs {
            return Err(Refusal::waiting(
                "cooldown",
                format!(
                    "group {g} failed over {since} s ago; the next failover may come after {} s (cooldown_secs)",
                    settings.cooldown_secs
                ),
            ));
        }
    }
    if s.migrating > 0 {
        return Err(Refusal::refused(
            "migration",
            format!(
                "{} slots from or to group {g} are migrating: automatic failover does not run \
                 during a migration of the group; abort it (POST /api/migrations/abort) or promote by hand",
                s.migrating
            ),
        ));
    }
    let Some(master_offset) = s.master_last_offset else {
        return Err(Refusal::refused(
            "unknown_offset",
            format!(
                "the last replication offset of master {} is unknown (it has not answered a check \
                 of this dashboard), so no replica's lag can be bounded: promote by hand",
                s.master
            ),
        ));
    };
    let best = s
        .replicas
        .iter()
        .filter(|(_, up, role, off)| *up && role.as_deref() == Some("slave") && off.is_some())
        .max_by_key(|(_, _, _, off)| *off);
    let Some((addr, _, _, Some(offset))) = best else {
        let seen: Vec<String> = s
            .replicas
            .iter()
            .map(|(a, up, role, _)| match (up, role) {
                (false, _) => format!("{a} is down"),
                (true, r) => format!("{a} reports role {}", r.as_deref().unwrap_or("unknown")),
            })
            .collect();
        return Err(Refusal::refused(
            "no_replica",
            if seen.is_empty() {
                format!("group {g} has no replica")
            } else {
                format!(
                    "group {g} has no replica that is up and replicating: {}",
                    seen.join(", ")
                )
            },
        ));
    };
    let lag = (master_offset - offset).max(0);
    if u64::try_from(lag).unwrap_or(u64::MAX) > settings.max_lag_bytes {
        return Err(Refusal::refused(
            "lag",
            format!(
                "the best replica, {addr} (offset {offset}), lags the old master's last known \
                 offset {master_offset} by {lag} bytes, more than max_lag_bytes {}: promoting it \
                 would lose up to that much acknowledged data. Bring master {} back, or promote \
                 by hand (POST /api/groups/{g}/promote) to accept the loss",
                settings.max_lag_bytes, s.master
            ),
        ));
    }
    Ok(Candidate {
        addr: addr.clone(),
        offset: *offset,
        lag,
    })
}

/// What the online proxies said about one master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Votes {
    pub(super) online: usize,
    /// Answered, and cannot reach it.
    pub(super) down: usize,
    /// Answered, and reach it.
    pub(super) up: usize,
}

/// Proxies needed to see the master down, of `online`.
pub(super) fn needed(settings: &FailoverSettings, online: usize) -> usize {
    if settings.quorum > 0 {
        settings.quorum as usize
    } else {
        online / 2 + 1
    }
}

/// Whether the proxies' answers make a quorum.
pub(super) fn check_quorum(
    v: &Votes,
    settings: &FailoverSettings,
    master: &str,
) -> Result<(), Refusal> {
    let need = needed(settings, v.online);
    if v.online == 0 {
        return Err(Refusal::waiting(
            "quorum",
            format!("no proxy is online to confirm that master {master} is down"),
        ));
    }
    if need > v.online {
        return Err(Refusal::refused(
            "quorum",
            format!(
                "quorum is {need} proxies but only {} are online: set a lower quorum",
                v.online
            ),
        ));
    }
    if v.down >= need {
        return Ok(());
    }
    Err(Refusal::waiting(
        "quorum",
        format!(
            "{} of {} online proxies see master {master} down, {need} needed ({} still reach it, {} did not answer)",
            v.down,
            v.online,
            v.up,
            v.online - v.down - v.up
        ),
    ))
}

/// One proxy's answer, validated: `Some(true)` when it is JSON of the expected shape, from
/// `token`, and says `master` of `group` is unreachable; `Some(false)` when it says reachable.
pub(super) fn read_answer(body: &[u8], token: &str, group: GroupId, master: &str) -> Option<bool> {
    if body.len() > MAX_ANSWER_BYTES {
        return None;
    }
    let seen: MastersSeen = serde_json::from_slice(body).ok()?;
    if seen.token != token {
        return None;
    }
    seen.masters
        .iter()
        .find(|m| m.group == group.0 && m.addr == master)
        .map(|m| !m.reachable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::failover::FailoverDoc;

    fn snapshot(replicas: &[(&str, bool, &str, i64)]) -> Snapshot {
        Snapshot {
            group: GroupId(1),
            master: "m:1".into(),
            master_failures: 3,
            master_last_offset: Some(1000),
            failing_since: None,
            replicas: replicas
                .iter()
                .map(|(a, up, role, off)| (a.to_string(), *up, Some(role.to_string()), Some(*off)))
                .collect(),
            migrating: 0,
        }
    }

    fn on() -> FailoverSettings {
        FailoverSettings {
            enabled: true,
            max_lag_bytes: 100,
            ..FailoverSettings::default()
        }
    }

    #[test]
    fn the_replica_with_the_highest_offset_is_chosen() {
        let s = snapshot(&[("a:1", true, "slave", 950), ("b:1", true, "slave", 990)]);
        let c = choose(&s, &on(), None, 0).unwrap();
        assert_eq!((c.addr.as_str(), c.offset, c.lag), ("b:1", 990, 10));
    }

    #[test]
    fn a_down_replica_or_one_that_reports_master_is_never_chosen() {
        let s = snapshot(&[("a:1", false, "slave", 999), ("b:1", true, "master", 1000)]);
        let r = choose(&s, &on(), None, 0).unwrap_err();
        assert_eq!(r.kind, "no_replica", "{r:?}");
        assert!(r.reason.contains("a:1 is down"), "{}", r.reason);
        assert!(r.reason.contains("b:1 reports role master"), "{}", r.reason);
    }

    #[test]
    fn a_replica_lagging_past_the_bound_is_refused_with_the_numbers() {
        let s = snapshot(&[("a:1", true, "slave", 800)]);
        let r = choose(&s, &on(), None, 0).unwrap_err();
        assert_eq!(r.kind, "lag");
        assert!(!r.waiting);
        assert!(r.reason.contains("by 200 bytes"), "{}", r.reason);
        assert!(r.reason.contains("max_lag_bytes 100"), "{}", r.reason);
    }

    #[test]
    fn no_failover_during_a_migration_in_cooldown_or_before_enough_checks() {
        let mut s = snapshot(&[("a:1", true, "slave", 1000)]);
        s.migrating = 3;
        assert_eq!(choose(&s, &on(), None, 0).unwrap_err().kind, "migration");
        s.migrating = 0;
        let r = choose(&s, &on(), Some(10_000), 20_000).unwrap_err();
        assert_eq!(r.kind, "cooldown");
        assert!(choose(&s, &on(), Some(10_000), 80_000).is_ok());
        s.master_failures = 2;
        assert_eq!(choose(&s, &on(), None, 0).unwrap_err().kind, "confirming");
        s.master_failures = 3;
        s.master_last_offset = None;
        assert_eq!(
            choose(&s, &on(), None, 0).unwrap_err().kind,
            "unknown_offset"
        );
    }

    #[test]
    fn quorum_is_a_majority_of_online_proxies_unless_set() {
        let v = |online, down, up| Votes { online, down, up };
        let s = on();
        assert!(check_quorum(&v(1, 1, 0), &s, "m").is_ok());
        assert!(check_quorum(&v(3, 2, 0), &s, "m").is_ok());
        let r = check_quorum(&v(3, 1, 1), &s, "m").unwrap_err();
        assert!(r.waiting && r.reason.contains("1 of 3"), "{}", r.reason);
        assert!(r.reason.contains("1 did not answer"), "{}", r.reason);
        assert!(check_quorum(&v(0, 0, 0), &s, "m").is_err());
        let three = FailoverSettings { quorum: 3, ..on() };
        assert!(!check_quorum(&v(2, 2, 0), &three, "m").unwrap_err().waiting);
        assert!(check_quorum(&v(4, 3, 1), &three, "m").is_ok());
    }

    #[test]
    fn a_proxy_answer_counts_only_when_well_formed_its_own_and_about_this_master() {
        let answer = |token: &str, addr: &str, reachable: bool| {
            serde_json::json!({"token": token, "epoch": 3, "masters": [
                {"group": 1, "addr": addr, "reachable": reachable}]})
            .to_string()
        };
        let g = GroupId(1);
        let read = |b: &str| read_answer(b.as_bytes(), "p1", g, "m:1");
        assert_eq!(read(&answer("p1", "m:1", false)), Some(true));
        assert_eq!(read(&answer("p1", "m:1", true)), Some(false));
        assert_eq!(
            read(&answer("p2", "m:1", false)),
            None,
            "another proxy's token"
        );
        assert_eq!(
            read(&answer("p1", "other:1", false)),
            None,
            "another address"
        );
        assert_eq!(read_answer(b"{}", "p1", g, "m:1"), None);
        assert_eq!(read_answer(b"\xff not json", "p1", g, "m:1"), None);
        let huge = format!(
            "{}{}",
            answer("p1", "m:1", false),
            " ".repeat(MAX_ANSWER_BYTES)
        );
        assert_eq!(read(&huge), None, "oversized");
    }

    #[test]
    fn an_old_document_without_failover_fields_loads_as_off() {
        let d: FailoverDoc = serde_json::from_str(r#"{"schema": 1}"#).unwrap();
        assert_eq!(d, FailoverDoc::default());
        let s: FailoverSettings = serde_json::from_str(r#"{"enabled": true}"#).unwrap();
        assert_eq!(s.max_lag_bytes, 1 << 20);
        assert_eq!(s.down_after_checks, 3);
    }
}
