//! The one error type of every HTTP API (dashboard, proxy admin, console): `{"error": {"code",
//! "message"}}` (`tessera_wire::error::ErrorBody`) with a status code. Each server's own
//! errors become it at its API edge (the control plane's in `tessera_control::api::error`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tessera_wire::error::{ErrorBody, ErrorDetail};

/// An API failure; `code` is a stable machine-readable word, `message` says what to do.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing, wrong or revoked token: send `Authorization: Bearer <token>`",
        )
    }

    /// The caller is known but its role does not allow the call; `message` says which it has
    /// and which the call needs.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

/// Rejections of malformed JSON bodies and paths become our error shape, not axum's text.
/// Every malformed body is a 400 (axum says 415 for a missing content type and 422 for a
/// value of the wrong type; the API documents one status for "your request is malformed").
impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(e: axum::extract::rejection::JsonRejection) -> Self {
        Self::bad_request(e.body_text())
    }
}

/// A refusal answered before the request's body was read (a middleware's 401 or 403): the
/// body may still be on its way, so the connection is closed after the answer and says so
/// (`Connection: close`). Without it the server closes the connection anyway, and a client
/// that pooled it sends its next request into a closed socket.
pub fn refuse_unread(req: &axum::extract::Request, err: ApiError) -> Response {
    let mut resp = err.into_response();
    let has_body = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || req
            .headers()
            .contains_key(axum::http::header::TRANSFER_ENCODING);
    if has_body {
        resp.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
    }
    resp
}

/// Reads a request body of at most `limit` bytes, for handlers that take the body as it
/// arrives instead of through an extractor (so they can decide something first).
///
/// # Errors
/// 413 `too_large` naming `what` and the limit as soon as the body passes it; 400 when the
/// body cannot be read (the client went away, a malformed chunk).
pub async fn body_within(
    body: axum::body::Body,
    limit: usize,
    what: &str,
) -> Result<bytes::Bytes, ApiError> {
    use futures_util::StreamExt as _;
    let mut stream = body.into_data_stream();
    let mut out = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the body: {e}")))?;
        if out.len() + chunk.len() > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("{what} is at most {limit} bytes"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// A JSON body that may be absent or empty.
///
/// # Errors
/// 400 when there is a body and it is not valid JSON for `T`.
pub fn optional_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<Option<T>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(e: axum::extract::rejection::PathRejection) -> Self {
        Self::new(e.status(), "bad_request", e.body_text())
    }
}

/// The token of `Authorization: Bearer <token>`, if the request has one.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Checks `Authorization: Bearer <token>` against a sha256 hex digest.
pub fn bearer_matches(headers: &axum::http::HeaderMap, sha256_hex: &str) -> bool {
    bearer(headers)
        .is_some_and(|token| tessera_model::secret::matches_sha256_hex(token, sha256_hex))
}
