//! Console login: users from `console.toml` (argon2id hashes), sessions in a store behind an
//! HTTP-only `SameSite=Strict` cookie (`session`), a CSRF token per session for mutating
//! calls, and a lockout per (client address, user name) that parallel attempts cannot pass
//! (`throttle`). Password checks run on a few threads of their own behind a short queue
//! (`hasher`), so a login flood costs bounded CPU and memory.
//!
//! Secrets are compared in constant time: the session is looked up by the sha256 of its id,
//! the CSRF token with [`tessera_model::secret::same`], passwords by argon2. An unknown user name is
//! checked against a dummy hash with the first user's costs, through the same queue, so it
//! costs what a known name costs and answers alike.

mod hasher;
mod session;
mod throttle;

pub use session::{MAX_PER_USER, PREFIX as SESSION_PREFIX};

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Console;
use super::config::ConsoleConfig;
use super::logins::LoginOutcome;
use hasher::Hasher;
use session::Sessions;
use tessera_http::error::{ApiError, refuse_unread};
use tessera_store::StoreError;
use tessera_wire::Empty;
use tessera_wire::console::{LoginRequest, Session};
use tessera_wire::error::ErrorBody;
use throttle::{Refusal, Throttle, Verdict, client_key};

/// The session cookie's name.
pub const COOKIE: &str = "tessera_session";
/// The header carrying the session's CSRF token on mutating calls.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// User names are cut to this many characters before anything else.
const MAX_NAME_CHARS: usize = 64;

/// The logged-in user of a request, put there by [`require_session`].
#[derive(Debug, Clone)]
pub struct SessionUser {
    pub user: String,
    pub csrf: String,
}

/// Users, the password checks, the lockout table and the sessions.
pub struct Auth {
    users: HashMap<String, Arc<str>>,
    /// Verified against when the name is unknown, to spend the same time.
    dummy_hash: Arc<str>,
    hasher: Hasher,
    throttle: Throttle,
    /// Unknown session ids presented, by address (`auth_throttle`): each costs a store lookup.
    refused_sessions: tessera_http::auth_throttle::AuthThrottle,
    sessions: Sessions,
    ttl: Duration,
    secure_cookie: bool,
}

impl Auth {
    /// Starts the verification threads; opens no store yet.
    ///
    /// # Errors
    /// No store to keep sessions in, or hashing the dummy password fails (no random source).
    pub fn new(config: &ConsoleConfig) -> anyhow::Result<Self> {
        let Some(store) = config
            .session_store
            .clone()
            .or_else(|| config.stores.first().cloned())
        else {
            anyhow::bail!("no store to keep sessions in: set session_store or stores");
        };
        let like = config
            .users
            .first()
            .map_or("", |u| u.password_hash.as_str());
        let ttl = Duration::from_secs(config.session_ttl_secs);
        Ok(Self {
            users: config
                .users
                .iter()
                .map(|u| (u.name.clone(), Arc::from(u.password_hash.as_str())))
                .collect(),
            dummy_hash: super::config::hash_like(like)?.into(),
            hasher: Hasher::for_this_machine(),
            throttle: Throttle::new(
                config.lockout_failures,
                Duration::from_secs(config.lockout_secs),
            ),
            refused_sessions: tessera_http::auth_throttle::AuthThrottle::new("console session"),
            sessions: Sessions::new(store, ttl),
            ttl,
            secure_cookie: config.secure_cookie,
        })
    }

    /// The store URL that keeps the sessions.
    pub fn session_store(&self) -> &str {
        self.sessions.url()
    }

    /// (verification threads, queue length).
    pub fn hashing_capacity(&self) -> (usize, usize) {
        self.hasher.capacity()
    }

    /// The live session named by the request's cookie, of a user console.toml still has.
    async fn session(&self, headers: &HeaderMap) -> Result<Option<SessionUser>, StoreError> {
        let Some(id) = cookie(headers, COOKIE) else {
            return Ok(None);
        };
        let live = self.sessions.find(&id).await?;
        Ok(live
            .filter(|l| self.users.contains_key(&l.user))
            .map(|l| SessionUser {
                user: l.user,
                csrf: l.csrf,
            }))
    }

    fn set_cookie(&self, id: &str, max_age: u64) -> HeaderValue {
        let secure = if self.secure_cookie { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}"
        ))
        .expect("cookie value is ASCII")
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_owned())
}

fn is_mutation(m: &Method) -> bool {
    matches!(
        *m,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// 401 for the console's own routes: the caller must log in.
pub fn login_needed() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "not logged in (or the session expired): POST /auth/login",
    )
}

/// 503 when the session store fails: the session may well be fine, so not a 401.
fn store_failed(c: &Console, e: &StoreError) -> ApiError {
    ApiError::unavailable(format!(
        "the session store {} failed: {e}",
        c.auth.session_store()
    ))
}

/// Middleware of every route but the login: a live session, and for a mutating method the
/// session's CSRF token in `X-CSRF-Token`.
pub async fn require_session(
    State(c): State<Arc<Console>>,
    mut req: Request,
    next: Next,
) -> Response {
    let ip = match c.auth.refused_sessions.admit(&req) {
        Ok(ip) => ip,
        Err(refused) => return *refused,
    };
    let user = match c.auth.session(req.headers()).await {
        Ok(Some(user)) => user,
        Ok(None) => {
            // Only a session id that was looked up and not found counts against the address:
            // no cookie (a browser not logged in yet) costs no lookup.
            if cookie(req.headers(), COOKIE).is_some() {
                c.auth.refused_sessions.refused(ip);
            }
            return refuse_unread(&req, login_needed());
        }
        Err(e) => return refuse_unread(&req, store_failed(&c, &e)),
    };
    if is_mutation(req.method()) {
        let sent = req
            .headers()
            .get(CSRF_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !tessera_model::secret::same(sent, user.csrf.as_bytes()) {
            let refusal = ApiError::new(
                StatusCode::FORBIDDEN,
                "csrf",
                "missing or wrong X-CSRF-Token header: send the csrf value from /auth/login or /auth/me",
            );
            return refuse_unread(&req, refusal);
        }
    }
    req.extensions_mut().insert(user);
    next.run(req).await
}

/// An error with `Retry-After: secs`.
fn retry_after(e: ApiError, secs: u64) -> Response {
    let mut resp = e.into_response();
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    resp
}

/// Whole seconds, rounded up.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Log in
///
/// Answers the session's user and CSRF token, and sets the session cookie (`HttpOnly`,
/// `SameSite=Strict`). The attempt first reserves its place in the lockout table (refused at
/// once: 429, with `Retry-After`), then waits for a password check (every check busy: 503 at
/// once), then counts its result.
#[utoipa::path(
    post,
    path = "/auth/login",
    tag = "session",
    operation_id = "login",
    security(()),
    request_body = LoginRequest,
    responses(
        (status = 200, description = "Logged in; the cookie is set.", body = Session),
        (status = 400, description = "A malformed body.", body = ErrorBody),
        (status = 401, description = "A wrong user name or password (`unauthorized`).", body = ErrorBody),
        (status = 429, description = "Locked out after failed logins (`locked_out`), or earlier attempts are still being checked (`too_many_attempts`).", body = ErrorBody),
        (status = 503, description = "Every password check is busy (`busy`), or the session store failed.", body = ErrorBody),
    )
)]
pub async fn login(
    State(c): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    body: Result<Json<LoginRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(b) = match body {
        Ok(b) => b,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let name: String = b.user.chars().take(MAX_NAME_CHARS).collect();
    let addr = client_key(peer.ip());
    let reservation = match c.auth.throttle.reserve(addr, &name) {
        Ok(r) => r,
        Err(refusal) => return refused(&c, &name, addr, refusal),
    };
    let (hash, known) = match c.auth.users.get(&name) {
        Some(h) => (h.clone(), true),
        None => (c.auth.dummy_hash.clone(), false),
    };
    let Ok(matched) = c.auth.hasher.verify(b.password, hash).await else {
        drop(reservation);
        let (threads, queue) = c.auth.hasher.capacity();
        let e = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "every password check is busy ({threads} running, {queue} waiting): try again \
                 in a second"
            ),
        );
        c.logins
            .record(&name, addr, LoginOutcome::Busy, 503, &e.message);
        return retry_after(e, 1);
    };
    match reservation.finish(matched && known) {
        Verdict::Ok => logged_in(&c, &name, addr).await,
        Verdict::Wrong => {
            c.logins.record(
                &name,
                addr,
                LoginOutcome::Failed,
                401,
                "wrong name or password",
            );
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "wrong user name or password",
            )
            .into_response()
        }
        Verdict::LockedNow(left) => refused(&c, &name, addr, Refusal::Locked(left)),
    }
}

/// The password was right: a session and its cookie.
async fn logged_in(c: &Console, name: &str, addr: IpAddr) -> Response {
    match c.auth.sessions.create(name).await {
        Ok((id, csrf)) => {
            c.logins
                .record(name, addr, LoginOutcome::Login, 200, "logged in");
            let session = Session {
                user: name.to_owned(),
                csrf,
            };
            let mut resp = Json(session).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                c.auth.set_cookie(&id, c.auth.ttl.as_secs()),
            );
            resp
        }
        Err(e) => {
            let e = store_failed(c, &e);
            c.logins
                .record(name, addr, LoginOutcome::Busy, 503, &e.message);
            e.into_response()
        }
    }
}

/// The answer to an attempt refused by the lockout table (recorded).
fn refused(c: &Console, name: &str, addr: IpAddr, refusal: Refusal) -> Response {
    let (outcome, code, message, secs) = match refusal {
        Refusal::Locked(left) => {
            let secs = ceil_secs(left);
            (
                LoginOutcome::LockedOut,
                "locked_out",
                format!(
                    "too many failed logins for {name:?} from {addr}: locked out, try again in \
                     {secs} s"
                ),
                secs,
            )
        }
        Refusal::PairBusy => (
            LoginOutcome::TooManyAttempts,
            "too_many_attempts",
            format!(
                "earlier login attempts for {name:?} from {addr} are still being checked: wait \
                 for their answers"
            ),
            1,
        ),
        Refusal::AddrBusy => (
            LoginOutcome::TooManyAttempts,
            "too_many_attempts",
            format!(
                "{} login attempts from {addr} are already being checked: wait for their \
                 answers",
                throttle::MAX_IN_FLIGHT_PER_ADDR
            ),
            1,
        ),
    };
    c.logins.record(name, addr, outcome, 429, &message);
    retry_after(
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message),
        secs,
    )
}

/// Log out
///
/// The session is deleted from the store and the cookie expired.
#[utoipa::path(
    post,
    path = "/auth/logout",
    tag = "session",
    operation_id = "logout",
    responses(
        (status = 200, description = "Logged out.", body = Empty),
        (status = 503, description = "The session store failed.", body = ErrorBody),
    )
)]
pub async fn logout(
    State(c): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    axum::Extension(user): axum::Extension<SessionUser>,
    headers: HeaderMap,
) -> Response {
    if let Some(id) = cookie(&headers, COOKIE)
        && let Err(e) = c.auth.sessions.end(&id).await
    {
        return store_failed(&c, &e).into_response();
    }
    c.logins.record(
        &user.user,
        client_key(peer.ip()),
        LoginOutcome::Logout,
        200,
        "logged out",
    );
    let mut resp = Json(Empty {}).into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, c.auth.set_cookie("", 0));
    resp
}

/// The session
///
/// Its user and the CSRF token every change must carry in `X-CSRF-Token`.
#[utoipa::path(
    get,
    path = "/auth/me",
    tag = "session",
    operation_id = "me",
    responses((status = 200, description = "The session.", body = Session))
)]
pub async fn me(axum::Extension(user): axum::Extension<SessionUser>) -> Json<Session> {
    Json(Session {
        user: user.user,
        csrf: user.csrf,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{User, hash_password};

    fn auth(secure_cookie: bool) -> Auth {
        let config = ConsoleConfig {
            stores: vec!["fs:///nonexistent/never-opened".into()],
            users: vec![User {
                name: "ada".into(),
                password_hash: hash_password("right").unwrap(),
                role: None,
            }],
            secure_cookie,
            ..ConsoleConfig::default()
        };
        Auth::new(&config).unwrap()
    }

    #[test]
    fn the_cookie_is_found_among_others_and_carries_its_flags() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            format!("other=1; {COOKIE}=abc ; x=y").parse().unwrap(),
        );
        assert_eq!(cookie(&h, COOKIE).as_deref(), Some("abc"));
        let plain = auth(false).set_cookie("abc", 5);
        let plain = plain.to_str().unwrap();
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Strict"));
        assert!(!plain.contains("Secure"), "{plain}");
        let secure = auth(true).set_cookie("abc", 5);
        assert!(secure.to_str().unwrap().ends_with("; Secure"));
    }

    #[test]
    fn the_dummy_hash_has_the_first_users_costs() {
        let a = auth(false);
        let params = |h: &str| h.split('$').nth(3).unwrap().to_owned();
        assert_eq!(params(&a.dummy_hash), params(&a.users["ada"]));
    }
}
