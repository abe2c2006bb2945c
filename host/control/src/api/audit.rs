//! The dashboard API's audit layer and `GET /api/audit`. Every mutating call (POST, PUT,
//! PATCH, DELETE) that passed the token check is recorded after it completes, with who (the
//! token's name and role, and the `X-Tessera-Actor` it claims), what (method, path, body) and
//! how it ended (status, a 403 for a role too low included). Storing and trimming the log is
//! `dashboard::audit`'s.

use std::sync::Arc;

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
use tessera_wire::LimitQuery;
use tessera_wire::audit::{ACTOR_HEADER, AuditEntry};
use tessera_wire::error::ErrorBody;

/// Recorded when the caller sends no [`ACTOR_HEADER`].
const DEFAULT_ACTOR: &str = "api";

/// Bodies recorded as text are cut to this many characters.
const DETAIL_CHARS: usize = 500;

/// Largest body the layer buffers (plugin modules are the big ones); larger is a 413.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Middleware: runs the call, then appends it to the log if it was a mutation.
pub(super) async fn record(State(log): State<Arc<AuditLog>>, req: Request, next: Next) -> Response {
    if !is_mutation(req.method()) {
        return next.run(req).await;
    }
    let caller = req.extensions().get::<Caller>().cloned();
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("request bodies are limited to {MAX_BODY} bytes"),
            )
            .into_response();
        }
    };
    let mut entry = AuditEntry {
        time_ms: now_ms(),
        actor: actor(&parts.headers),
        token: caller.as_ref().map(|c| c.name.clone()),
        role: caller.map(|c| c.role),
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned()),
        detail: detail(&parts.headers, &bytes),
        status: 0,
    };
    let resp = next
        .run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await;
    entry.status = resp.status().as_u16();
    if let Err(e) = log.append(&entry).await {
        tracing::warn!(error = %e, path = %entry.path, "could not record the call in the audit log");
    }
    resp
}

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new().routes(routes!(list))
}

/// The audit log
///
/// Every mutating call (POST, PUT, PATCH, DELETE) made with a valid token, recorded after it
/// completed whatever its status (a 403 for a role too low included), with the token's name
/// and role, newest first. Calls refused for a missing, wrong or revoked token are not
/// recorded. The newest 1000 are kept in the store. `detail` is the request body, cut to 500
/// characters, every `password` as `<redacted>`, a binary body as `<N bytes>`.
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

/// A JSON body with the value of every `password` field replaced, cut like any detail;
/// `None` when it is not JSON (then nothing of it is shown).
fn redacted(text: &str) -> Option<String> {
    fn scrub(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k.eq_ignore_ascii_case("password") {
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

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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
}
