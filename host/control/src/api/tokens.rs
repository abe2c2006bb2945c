//! Who calls the dashboard's API and whether they may: the two middlewares every route runs
//! behind (the bearer token → [`Caller`], then the caller's role against `access::required`),
//! and the token routes. The tokens themselves are `dashboard::tokens`'. A token that is
//! refused counts against its client's address (`auth_throttle`: past the burst, 429 before
//! any check) and the refusal is audited, rate-limited (`audit::Unauthorized`).
//!
//! ```text
//! GET    /api/whoami          {"token": name, "role": role} of the caller's token
//! GET    /api/tokens          [Token]                                  (admin)
//! POST   /api/tokens          {"name", "role"} → 201 Token + "token"   (admin; shown once)
//! DELETE /api/tokens/{name}   {}                                       (admin)
//! ```

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Path, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::audit::Unauthorized;
use crate::dashboard::audit::AuditLog;
use crate::dashboard::{Caller, Dashboard};
use tessera_http::access;
use tessera_http::auth_throttle::AuthThrottle;
use tessera_http::error::{ApiError, bearer, optional_json, refuse_unread};
use tessera_wire::Empty;
use tessera_wire::audit::{ROLE_HEADER, TOKEN_HEADER};
use tessera_wire::error::ErrorBody;
use tessera_wire::tokens::{CreateToken, CreatedToken, TokenView, WhoAmI};

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(whoami))
        .routes(routes!(list, create))
        .routes(routes!(revoke))
}

/// What stands at the door of the dashboard's API: its tokens, the throttle of refused ones
/// by address, and the audit of refusals.
pub(super) struct Gate {
    d: Arc<Dashboard>,
    throttle: AuthThrottle,
    unauthorized: Unauthorized,
}

impl Gate {
    pub(super) fn new(d: Arc<Dashboard>, audit: Arc<AuditLog>) -> Arc<Self> {
        Arc::new(Self {
            d,
            throttle: AuthThrottle::new("API token"),
            unauthorized: Unauthorized::new(audit),
        })
    }
}

/// Middleware (outermost): every route but the open ones needs a token of the cluster; 401
/// otherwise (429 while the caller's address is throttled for refused tokens). The token's
/// [`Caller`] goes into the request for the audit log and the handlers.
pub(super) async fn authenticate(
    State(gate): State<Arc<Gate>>,
    mut req: Request,
    next: Next,
) -> Response {
    if access::required(req.method(), req.uri().path()).is_none() {
        return next.run(req).await;
    }
    let ip = match gate.throttle.admit(&req) {
        Ok(ip) => ip,
        Err(refused) => return *refused,
    };
    let presented = bearer(req.headers());
    let Some(caller) = presented.and_then(|t| gate.d.authenticate(t)) else {
        // A missing token costs no check: only a wrong one counts against the address.
        if presented.is_some() {
            gate.throttle.refused(ip);
        }
        gate.unauthorized
            .note(ip, req.method(), req.uri().path())
            .await;
        return refuse_unread(&req, ApiError::unauthorized());
    };
    req.extensions_mut().insert(caller.clone());
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(ROLE_HEADER, HeaderValue::from_static(caller.role.as_str()));
    if let Ok(name) = HeaderValue::from_str(&caller.name) {
        h.insert(TOKEN_HEADER, name);
    }
    resp
}

/// Middleware (inside the audit layer, so refusals are recorded with the token that was
/// refused): 403 when the caller's role is below what the route needs.
pub(super) async fn permit(req: Request, next: Next) -> Response {
    if let Some(caller) = req.extensions().get::<Caller>() {
        let needs = access::required(req.method(), req.uri().path())
            .expect("only calls that need a role carry a caller");
        if caller.role < needs {
            let who = format!("token {}", caller.name);
            let refusal = access::refusal(&who, caller.role, req.method(), req.uri().path(), needs);
            return refuse_unread(&req, ApiError::forbidden(refusal));
        }
    }
    next.run(req).await
}

/// The token sent: its name and role
#[utoipa::path(
    get,
    path = "/api/whoami",
    tag = "tokens",
    operation_id = "whoami",
    responses((status = 200, description = "The caller's token.", body = WhoAmI))
)]
async fn whoami(Extension(caller): Extension<Caller>) -> Json<WhoAmI> {
    Json(WhoAmI {
        token: caller.name,
        role: caller.role,
    })
}

/// The API tokens
///
/// Every token, sorted by name, never a secret nor its HMAC.
#[utoipa::path(
    get,
    path = "/api/tokens",
    tag = "tokens",
    operation_id = "listTokens",
    responses((status = 200, description = "The tokens.", body = Vec<TokenView>))
)]
async fn list(State(d): State<Arc<Dashboard>>) -> Json<Vec<TokenView>> {
    Json(d.list_tokens())
}

/// Make a token
///
/// A random token (128 bits) with this name (1–64 letters, digits, `.`, `_` and `-`) and
/// role. Its secret is in this answer only.
#[utoipa::path(
    post,
    path = "/api/tokens",
    tag = "tokens",
    operation_id = "createToken",
    request_body = CreateToken,
    responses(
        (status = 201, description = "Created.", body = CreatedToken),
        (status = 400, description = "No body, a bad name or role, or a cluster holding 100 tokens.", body = ErrorBody),
        (status = 409, description = "The name is taken.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn create(
    State(d): State<Arc<Dashboard>>,
    Extension(caller): Extension<Caller>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b: CreateToken = optional_json(&body)?.ok_or_else(|| {
        ApiError::bad_request(
            "body must be {\"name\": ..., \"role\": \"viewer\"|\"operator\"|\"admin\"}",
        )
    })?;
    let (view, secret) = d.create_token(&b.name, b.role, &caller).await?;
    let created = CreatedToken::new(view, secret);
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// Revoke a token
///
/// From now on calls with it get 401. The last admin token cannot be revoked (409).
#[utoipa::path(
    delete,
    path = "/api/tokens/{name}",
    tag = "tokens",
    operation_id = "revokeToken",
    params(("name" = String, Path, description = "The token's name.")),
    responses(
        (status = 200, description = "Revoked.", body = Empty),
        (status = 404, description = "No token has that name.", body = ErrorBody),
        (status = 409, description = "The last admin token.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn revoke(
    State(d): State<Arc<Dashboard>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    d.revoke_token(&name, &caller).await?;
    Ok(Json(Empty {}))
}
