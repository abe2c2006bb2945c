//! The console's login log: logins, failed logins, refused attempts and logouts, in memory
//! and bounded, served by `GET /api/logins`. Kept apart from the audit of changes
//! (`/api/audit`, the dashboards' logs), so a flood of failed logins can push out only older
//! login events, never a record of a change. A run of identical events (same user, address
//! and outcome) is one entry with a count, so a flood from one address takes one entry.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::Console;
use axum::Json;
use axum::extract::{Query, State};
use tessera_http::error::ApiError;
use tessera_wire::LimitQuery;
use tessera_wire::error::ErrorBody;

/// Entries kept.
pub const KEEP: usize = 1000;

pub use tessera_wire::console::{LoginEvent, LoginOutcome};

/// The login log, newest last.
#[derive(Default)]
pub struct Logins {
    entries: Mutex<VecDeque<LoginEvent>>,
}

impl Logins {
    /// Records one event; also to the console's log, unless it repeats the newest entry.
    pub fn record(
        &self,
        user: &str,
        addr: IpAddr,
        outcome: LoginOutcome,
        status: u16,
        detail: &str,
    ) {
        let addr = addr.to_string();
        let time_ms = now_ms();
        let mut entries = self.entries.lock().expect("logins lock poisoned");
        if let Some(last) = entries.back_mut()
            && last.user == user
            && last.addr == addr
            && last.outcome == outcome
            && last.status == status
        {
            last.count += 1;
            last.time_ms = time_ms;
            last.detail = detail.to_owned();
            return;
        }
        tracing::info!(%user, %addr, ?outcome, status, %detail, "console login event");
        if entries.len() >= KEEP {
            entries.pop_front();
        }
        entries.push_back(LoginEvent {
            time_ms,
            user: user.to_owned(),
            addr,
            outcome,
            status,
            detail: detail.to_owned(),
            count: 1,
        });
    }

    fn newest(&self, limit: usize) -> Vec<LoginEvent> {
        let entries = self.entries.lock().expect("logins lock poisoned");
        entries.iter().rev().take(limit).cloned().collect()
    }
}

/// The console's login log
///
/// Logins, failed logins, refused attempts and logouts, newest first (`limit` default 100,
/// at most 1000 are kept). A run of identical events is one entry with a count.
#[utoipa::path(
    get,
    path = "/api/logins",
    tag = "console",
    operation_id = "listLogins",
    params(LimitQuery),
    responses(
        (status = 200, description = "Login events, newest first.", body = Vec<LoginEvent>),
        (status = 400, description = "A limit that is not a number.", body = ErrorBody),
    )
)]
pub async fn list(
    State(c): State<Arc<Console>>,
    query: Result<Query<LimitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<LoginEvent>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(Json(c.logins.newest(q.limit.unwrap_or(100).min(KEEP))))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_counted_and_the_log_is_bounded() {
        let l = Logins::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        for _ in 0..3 {
            l.record("admin", a, LoginOutcome::LockedOut, 429, "locked");
        }
        l.record("admin", a, LoginOutcome::Login, 200, "login");
        let newest = l.newest(10);
        assert_eq!(newest.len(), 2);
        assert_eq!(newest[0].outcome, LoginOutcome::Login);
        assert_eq!(newest[1].count, 3);
        for i in 0..KEEP + 10 {
            l.record(&format!("u{i}"), a, LoginOutcome::Failed, 401, "wrong");
        }
        assert_eq!(l.newest(usize::MAX).len(), KEEP);
    }
}
