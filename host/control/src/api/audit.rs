//! The dashboard API's audit layer and `GET /api/audit`. Every mutating call (POST, PUT,
//! PATCH, DELETE) that passed the token check is recorded after it completes, with who (the
//! token's name and role, and the `X-Tessera-Actor` it claims), what (method, path, body) and
//! how it ended (status, a 403 for a role too low included). Calls refused for their token
//! (401) are recorded too, but at most one entry per [`REFUSED_INTERVAL`], counting every
//! refusal since the previous one by address ([`Unauthorized`]), so that strangers cannot
//! flood the log (it keeps the newest 1000 entries). Storing and trimming the log is
//! `dashboard::audit`'s.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::dashboard::audit::AuditLog;
use crate::dashboard::{Caller, Dashboard};
use tessera_http::error::ApiError;
use tessera_model::clock::now_ms;
use tessera_wire::LimitQuery;
use tessera_wire::audit::{ACTOR_HEADER, AuditEntry};
use tessera_wire::error::ErrorBody;

/// Recorded when the caller sends no [`ACTOR_HEADER`].
const DEFAULT_ACTOR: &str = "api";

/// Bodies recorded as text are cut to this many characters.
const DETAIL_CHARS: usize = 500;

/// The most of a body the layer buffers to show it; a larger body goes on to its handler as
/// it arrives (the handler bounds it) and is shown by its size. Bodies the log shows are
/// JSON settings, far smaller.
const MAX_SHOWN_BODY: usize = 64 * 1024;

/// 401s are recorded at most this often.
pub(super) const REFUSED_INTERVAL: Duration = Duration::from_secs(10);
/// Addresses an entry of refusals names; the others are counted together.
const REFUSED_ADDRS: usize = 8;

/// Middleware: runs the call, then appends it to the log if it was a mutation.
pub(super) async fn record(State(log): State<Arc<AuditLog>>, req: Request, next: Next) -> Response {
    if !is_mutation(req.method()) {
        return next.run(req).await;
    }
    let caller = req.extensions().get::<Caller>().cloned();
    let (parts, body) = req.into_parts();
    let (body, shown) = match head_of(body).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::bad_request(format!("reading the request body: {e}")).into_response();
        }
    };
    let mut actor = actor(&parts.headers);
    if let Some(c) = &caller
        && (actor == "cli" || actor == "cli:unknown")
    {
        // The CLI did not know its user: the token's name says who.
        actor = format!("cli:{}", c.name);
    }
    let who = match &caller {
        Some(c) => named(c, &parts.headers),
        None => actor.clone(),
    };
    let body_json: Option<serde_json::Value> =
        shown.as_ref().and_then(|b| serde_json::from_slice(b).ok());
    let mut entry = AuditEntry {
        time_ms: now_ms(),
        actor,
        token: caller.as_ref().map(|c| c.name.clone()),
        role: caller.map(|c| c.role),
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned()),
        detail: match &shown {
            Some(bytes) => detail(&parts.headers, bytes),
            None => format!("<over {MAX_SHOWN_BODY} bytes>"),
        },
        status: 0,
        summary: String::new(),
        reason: None,
    };
    let resp = next.run(Request::from_parts(parts, body)).await;
    entry.status = resp.status().as_u16();
    let resp = if entry.status >= 400 {
        let (head, body) = resp.into_parts();
        // An error answer is a small JSON envelope; anything larger is not read for a reason.
        match axum::body::to_bytes(body, MAX_SHOWN_BODY).await {
            Ok(bytes) => {
                entry.reason = serde_json::from_slice::<ErrorBody>(&bytes)
                    .ok()
                    .map(|e| e.error.message.chars().take(DETAIL_CHARS).collect());
                Response::from_parts(head, axum::body::Body::from(bytes))
            }
            Err(_) => Response::from_parts(head, axum::body::Body::empty()),
        }
    } else {
        resp
    };
    entry.summary = super::audit_sentence::sentence(
        &who,
        &entry.method,
        &entry.path,
        body_json.as_ref(),
        entry.status,
        entry.reason.as_deref(),
    );
    if let Err(e) = log.append(&entry).await {
        tracing::warn!(error = %e, path = %entry.path, "could not record the call in the audit log");
    }
    resp
}

/// Reads at most [`MAX_SHOWN_BODY`] bytes of `body`. Returns the body to hand on (the same
/// bytes, then the rest still unread) and the whole body if it was no longer than that.
async fn head_of(
    body: axum::body::Body,
) -> Result<(axum::body::Body, Option<bytes::Bytes>), axum::Error> {
    use futures_util::StreamExt as _;
    let mut stream = body.into_data_stream();
    let mut head = bytes::BytesMut::new();
    while head.len() <= MAX_SHOWN_BODY {
        match stream.next().await {
            Some(chunk) => head.extend_from_slice(&chunk?),
            None => {
                let whole = head.freeze();
                return Ok((axum::body::Body::from(whole.clone()), Some(whole)));
            }
        }
    }
    let first = futures_util::stream::once(async move { Ok::<_, axum::Error>(head.freeze()) });
    Ok((axum::body::Body::from_stream(first.chain(stream)), None))
}

/// The rate-limited record of calls refused for their token.
pub(super) struct Unauthorized {
    log: Arc<AuditLog>,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    /// When the last entry was written.
    written: Option<Instant>,
    since_ms: u64,
    count: u64,
    by_addr: BTreeMap<IpAddr, u64>,
    /// Refusals from addresses past the first [`REFUSED_ADDRS`], and from no known address.
    others: u64,
}

impl Unauthorized {
    pub(super) fn new(log: Arc<AuditLog>) -> Self {
        Self {
            log,
            pending: Mutex::default(),
        }
    }

    /// Counts a refused call; when an entry is due, appends it before the 401 is answered
    /// (at most once per [`REFUSED_INTERVAL`], so the store write costs little, and a caller
    /// that reads the log after its 401 finds it).
    pub(super) async fn note(&self, ip: Option<IpAddr>, method: &Method, path: &str) {
        let entry = {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match p.add(ip, method, path) {
                Some(e) => e,
                None => return,
            }
        };
        if let Err(e) = self.log.append(&entry).await {
            tracing::warn!(error = %e, "could not record refused calls in the audit log");
        }
    }
}

impl Pending {
    /// Adds a refusal; the entry to write if one is due (then counting starts over).
    fn add(&mut self, ip: Option<IpAddr>, method: &Method, path: &str) -> Option<AuditEntry> {
        if self.count == 0 {
            self.since_ms = now_ms();
        }
        self.count += 1;
        match ip {
            Some(ip) if self.by_addr.contains_key(&ip) || self.by_addr.len() < REFUSED_ADDRS => {
                *self.by_addr.entry(ip).or_default() += 1;
            }
            _ => self.others += 1,
        }
        if self.written.is_some_and(|t| t.elapsed() < REFUSED_INTERVAL) {
            return None;
        }
        let entry = refused_entry(self, method, path);
        *self = Pending {
            written: Some(Instant::now()),
            ..Pending::default()
        };
        Some(entry)
    }
}

/// The entry for the refusals counted in `p`; the latest call gives method and path.
fn refused_entry(p: &Pending, method: &Method, path: &str) -> AuditEntry {
    let mut addrs: Vec<String> = p
        .by_addr
        .iter()
        .map(|(ip, n)| format!("{ip} ×{n}"))
        .collect();
    if p.others > 0 {
        addrs.push(format!("others ×{}", p.others));
    }
    let path: String = path.chars().take(DETAIL_CHARS).collect();
    AuditEntry {
        time_ms: now_ms(),
        actor: "unauthenticated".into(),
        token: None,
        role: None,
        method: method.to_string(),
        summary: format!(
            "{} call(s) refused for a wrong, revoked or missing token (the latest {method} {path})",
            p.count
        ),
        reason: Some("a wrong, revoked or missing token".into()),
        path,
        detail: format!(
            "{} call(s) refused for a wrong, revoked or missing token since {} (unix ms): {}",
            p.count,
            p.since_ms,
            addrs.join(", ")
        ),
        status: 401,
    }
}

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new().routes(routes!(list))
}

/// The audit log
///
/// Every mutating call (POST, PUT, PATCH, DELETE) made with a valid token, recorded after it
/// completed whatever its status (a 403 for a role too low included), with the token's name
/// and role, newest first. Calls refused for a missing, wrong or revoked token (401) are
/// recorded at most once per 10 s: one entry (actor `unauthenticated`, status 401) counts the
/// refusals since the previous one by address. The newest 1000 are kept in the store. `detail`
/// is the request body, cut to 500 characters, every `password` (and `password_hash`) as `<redacted>`, a binary
/// body as `<N bytes>`, a body over 64 KiB as `<over 65536 bytes>`.
#[utoipa::path(
    get,
    path = "/api/audit",
    tag = "audit",
    operation_id = "listAudit",
    params(LimitQuery),
    responses(
        (status = 200, description = "Entries, newest first.", body = Vec<AuditEntry>),
        (status = 400, description = "A limit that is not a number.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn list(
    State(d): State<Arc<Dashboard>>,
    query: Result<Query<LimitQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let entries = d.audit_log().list(q.limit.unwrap_or(100)).await;
    Ok(Json(entries.map_err(crate::Error::from)?))
}

fn is_mutation(m: &Method) -> bool {
    matches!(
        *m,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// The caller's name from [`ACTOR_HEADER`]: printable ASCII, at most 100 characters.
fn actor(headers: &HeaderMap) -> String {
    let given: String = headers
        .get(ACTOR_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim()
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(100)
        .collect();
    if given.is_empty() {
        DEFAULT_ACTOR.to_owned()
    } else {
        given
    }
}

/// Who a change is recorded as having made it, beyond the audit log (a migration's job):
/// the console's user when the call came through the console (`console:<user>`), else the
/// name of the token it carried. Never the token itself.
pub(super) fn named(caller: &Caller, headers: &HeaderMap) -> String {
    let claimed = actor(headers);
    if claimed.starts_with("console:") {
        claimed
    } else {
        caller.name.clone()
    }
}

/// The body as the log shows it: UTF-8 text (JSON) cut to [`DETAIL_CHARS`], else its size.
/// Passwords never reach the log (`PUT /api/users/{name}` carries one in clear).
fn detail(headers: &HeaderMap, body: &[u8]) -> String {
    if body.is_empty() {
        return String::new();
    }
    let binary = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| {
            ct.starts_with("application/wasm") || ct.starts_with("application/octet-stream")
        });
    match std::str::from_utf8(body) {
        Ok(text) if !binary && text.to_ascii_lowercase().contains("password") => {
            redacted(text).unwrap_or_else(|| format!("<{} bytes, not JSON>", body.len()))
        }
        Ok(text) if !binary => {
            let mut cut: String = text.chars().take(DETAIL_CHARS).collect();
            if cut.len() < text.len() {
                cut.push('…');
            }
            cut
        }
        _ => format!("<{} bytes>", body.len()),
    }
}

/// A JSON body with the value of every `password…` field (`password`, `password_hash`) replaced, cut like any detail;
/// `None` when it is not JSON (then nothing of it is shown).
fn redacted(text: &str) -> Option<String> {
    fn scrub(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    // `password` in clear, and `password_hash` (a fast hash: leaked, it
                    // is attacked offline).
                    if k.to_ascii_lowercase().starts_with("password") {
                        *v = serde_json::Value::String("<redacted>".into());
                    } else {
                        scrub(v);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    scrub(&mut v);
    let text = v.to_string();
    let mut cut: String = text.chars().take(DETAIL_CHARS).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_is_text_cut_to_500_chars_or_a_size() {
        let h = HeaderMap::new();
        assert_eq!(detail(&h, b""), "");
        assert_eq!(detail(&h, br#"{"id":3}"#), r#"{"id":3}"#);
        let long = "x".repeat(600);
        let d = detail(&h, long.as_bytes());
        assert_eq!(d.chars().count(), DETAIL_CHARS + 1);
        assert!(d.ends_with('…'));
        assert_eq!(detail(&h, &[0, 159, 146, 150]), "<4 bytes>");
        let mut wasm = HeaderMap::new();
        wasm.insert(header::CONTENT_TYPE, "application/wasm".parse().unwrap());
        assert_eq!(detail(&wasm, b"\0asm"), "<4 bytes>");
    }

    #[test]
    fn passwords_never_reach_the_log() {
        let h = HeaderMap::new();
        let d = detail(&h, br#"{"password":"hunter2","enabled":true}"#);
        assert_eq!(d, r#"{"enabled":true,"password":"<redacted>"}"#);
        let d = detail(&h, br#"{"password":"hunter2",}"#);
        assert_eq!(d, "<23 bytes, not JSON>");
        let d = detail(&h, br#"{"a":[{"Password":"hunter2"}]}"#);
        assert!(!d.contains("hunter2"), "{d}");
        let d = detail(&h, br#"{"password_hash":"sha256$00$ab","enabled":true}"#);
        assert_eq!(d, r#"{"enabled":true,"password_hash":"<redacted>"}"#);
    }

    #[test]
    fn actor_defaults_to_api_and_is_cleaned() {
        let mut h = HeaderMap::new();
        assert_eq!(actor(&h), "api");
        h.insert(ACTOR_HEADER, "console:ada".parse().unwrap());
        assert_eq!(actor(&h), "console:ada");
        h.insert(ACTOR_HEADER, "cli:bob\t".parse().unwrap());
        assert_eq!(actor(&h), "cli:bob");
    }

    #[test]
    fn refusals_make_one_entry_per_interval_counting_them_by_address() {
        let mut p = Pending::default();
        let get = Method::GET;
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let first = p
            .add(Some(a), &get, "/api/overview")
            .expect("the first is written");
        assert_eq!(
            (first.status, first.actor.as_str()),
            (401, "unauthenticated")
        );
        assert!(
            first.detail.starts_with("1 call(s) refused"),
            "{}",
            first.detail
        );
        // Within the interval: counted, not written, whatever the number and addresses.
        for i in 0..1000u32 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0100 + i % 20));
            assert!(p.add(Some(ip), &get, "/api/x").is_none());
        }
        assert!(p.add(None, &get, "/api/x").is_none());
        assert_eq!(p.count, 1001);
        assert_eq!(
            p.by_addr.len(),
            REFUSED_ADDRS,
            "addresses named are bounded"
        );
        assert_eq!(p.by_addr.values().sum::<u64>() + p.others, 1001);
        // The next one after the interval writes them all.
        p.written = Some(Instant::now() - REFUSED_INTERVAL);
        let next = p.add(Some(a), &get, "/api/y").expect("due");
        assert!(
            next.detail.starts_with("1002 call(s) refused"),
            "{}",
            next.detail
        );
        assert!(next.detail.contains("others ×"), "{}", next.detail);
        assert_eq!(p.count, 0);
    }
}
