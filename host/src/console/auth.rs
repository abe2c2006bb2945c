//! Console login: users from `console.toml` (argon2id hashes), server-side sessions behind an
//! HTTP-only `SameSite=Strict` cookie, a CSRF token per session for mutating calls, and a
//! lockout after repeated failures. Sessions live in memory: restarting the console logs
//! everyone out, which is also how to revoke every session at once.
//!
//! Secrets are compared in constant time: the session id is looked up by its sha256 (a
//! timing difference in the map reveals nothing about the id), the CSRF token with
//! [`crate::secret::same`], passwords by argon2. An unknown user name costs the same argon2 verification
//! as a known one, so response times do not tell which names exist.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::Console;
use super::config::{ConsoleConfig, verify_password};
use crate::http_error::ApiError;
use crate::secret::sha256_hex;

/// The session cookie's name.
pub const COOKIE: &str = "tessera_session";
/// The header carrying the session's CSRF token on mutating calls.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Sessions kept at most; the oldest go first (a login needs a valid password, so this only
/// bounds memory against a user logging in in a loop).
const MAX_SESSIONS: usize = 10_000;
/// User names whose failures are tracked at most (names need not exist).
const MAX_TRACKED_NAMES: usize = 10_000;

/// The logged-in user of a request, put there by [`require_session`].
#[derive(Debug, Clone)]
pub struct SessionUser {
    pub user: String,
    pub csrf: String,
}

struct Session {
    user: String,
    csrf: String,
    expires: Instant,
}

#[derive(Default)]
struct Failures {
    count: u32,
    locked_until: Option<Instant>,
    last: Option<Instant>,
}

/// Users, sessions and failure counts.
pub struct Auth {
    users: HashMap<String, String>,
    /// Verified against when the name is unknown, to spend the same time.
    dummy_hash: String,
    /// sha256(session id) → session.
    sessions: Mutex<HashMap<String, Session>>,
    failures: Mutex<HashMap<String, Failures>>,
    ttl: Duration,
    lockout_failures: u32,
    lockout: Duration,
    secure_cookie: bool,
}

/// How a login attempt ended.
enum Outcome {
    Ok,
    Wrong,
    /// Locked out for this much longer.
    Locked(Duration),
}

impl Auth {
    /// # Errors
    /// Hashing the dummy password fails (no random source).
    pub fn new(config: &ConsoleConfig) -> anyhow::Result<Self> {
        Ok(Self {
            users: config
                .users
                .iter()
                .map(|u| (u.name.clone(), u.password_hash.clone()))
                .collect(),
            dummy_hash: super::config::hash_password(&hex::encode(rand::random::<[u8; 16]>()))?,
            sessions: Mutex::default(),
            failures: Mutex::default(),
            ttl: Duration::from_secs(config.session_ttl_secs),
            lockout_failures: config.lockout_failures,
            lockout: Duration::from_secs(config.lockout_secs),
            secure_cookie: config.secure_cookie,
        })
    }

    /// Checks a password, counting failures per user name.
    async fn attempt(&self, user: &str, password: &str) -> Outcome {
        if let Some(left) = self.locked_for(user) {
            return Outcome::Locked(left);
        }
        let (hash, known) = match self.users.get(user) {
            Some(h) => (h.clone(), true),
            None => (self.dummy_hash.clone(), false),
        };
        let password = password.to_owned();
        // argon2 takes tens of milliseconds of CPU: off the async workers.
        let matched = tokio::task::spawn_blocking(move || verify_password(&password, &hash))
            .await
            .unwrap_or(false);
        let mut failures = self.failures.lock().expect("failures lock poisoned");
        if matched && known {
            failures.remove(user);
            return Outcome::Ok;
        }
        if failures.len() >= MAX_TRACKED_NAMES && !failures.contains_key(user) {
            let now = Instant::now();
            failures.retain(|_, f| f.locked_until.is_some_and(|t| t > now));
        }
        let f = failures.entry(user.to_owned()).or_default();
        f.count += 1;
        f.last = Some(Instant::now());
        if f.count >= self.lockout_failures {
            f.count = 0;
            f.locked_until = Some(Instant::now() + self.lockout);
            return Outcome::Locked(self.lockout);
        }
        Outcome::Wrong
    }

    /// How much longer `user` is locked out, if it is.
    fn locked_for(&self, user: &str) -> Option<Duration> {
        let mut failures = self.failures.lock().expect("failures lock poisoned");
        let f = failures.get_mut(user)?;
        let until = f.locked_until?;
        let now = Instant::now();
        if until > now {
            return Some(until - now);
        }
        f.locked_until = None;
        None
    }

    /// Creates a session; returns (session id, csrf token).
    fn create_session(&self, user: &str) -> (String, String) {
        let id = hex::encode(rand::random::<[u8; 32]>());
        let csrf = hex::encode(rand::random::<[u8; 32]>());
        let now = Instant::now();
        let mut sessions = self.sessions.lock().expect("sessions lock poisoned");
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            sha256_hex(&id),
            Session {
                user: user.to_owned(),
                csrf: csrf.clone(),
                expires: now + self.ttl,
            },
        );
        (id, csrf)
    }

    /// The live session named by the request's cookie.
    fn session(&self, headers: &HeaderMap) -> Option<SessionUser> {
        let id = cookie(headers, COOKIE)?;
        let key = sha256_hex(&id);
        let mut sessions = self.sessions.lock().expect("sessions lock poisoned");
        let s = sessions.get(&key)?;
        if s.expires <= Instant::now() {
            sessions.remove(&key);
            return None;
        }
        Some(SessionUser {
            user: s.user.clone(),
            csrf: s.csrf.clone(),
        })
    }

    fn end_session(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, COOKIE) {
            self.sessions
                .lock()
                .expect("sessions lock poisoned")
                .remove(&sha256_hex(&id));
        }
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

/// Middleware of every route but the login: a live session, and for a mutating method the
/// session's CSRF token in `X-CSRF-Token`.
pub async fn require_session(
    State(c): State<Arc<Console>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(user) = c.auth.session(req.headers()) else {
        return login_needed().into_response();
    };
    if is_mutation(req.method()) {
        let sent = req
            .headers()
            .get(CSRF_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !crate::secret::same(sent, user.csrf.as_bytes()) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "csrf",
                "missing or wrong X-CSRF-Token header: send the csrf value from /auth/login or /auth/me",
            )
            .into_response();
        }
    }
    req.extensions_mut().insert(user);
    next.run(req).await
}

#[derive(Deserialize)]
pub struct LoginBody {
    user: String,
    password: String,
}

/// `POST /auth/login {"user","password"}` → `{"user","csrf"}` and the session cookie.
pub async fn login(
    State(c): State<Arc<Console>>,
    body: Result<Json<LoginBody>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(b) = match body {
        Ok(b) => b,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let name: String = b.user.chars().take(64).collect();
    let actor = format!("console:{name}");
    match c.auth.attempt(&name, &b.password).await {
        Outcome::Ok => {
            let (id, csrf) = c.auth.create_session(&name);
            c.events.record(&actor, "POST", "/auth/login", "login", 200);
            let mut resp = Json(json!({"user": name, "csrf": csrf})).into_response();
            resp.headers_mut().insert(
                header::SET_COOKIE,
                c.auth.set_cookie(&id, c.auth.ttl.as_secs()),
            );
            resp
        }
        Outcome::Wrong => {
            c.events
                .record(&actor, "POST", "/auth/login", "login failed", 401);
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "wrong user name or password",
            )
            .into_response()
        }
        Outcome::Locked(left) => {
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            c.events.record(
                &actor,
                "POST",
                "/auth/login",
                &format!("locked out for {secs} s after repeated failures"),
                429,
            );
            let mut resp = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "locked_out",
                format!("too many failed logins for {name:?}: locked out, try again in {secs} s"),
            )
            .into_response();
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            resp
        }
    }
}

/// `POST /auth/logout` (session + CSRF) → `{}` and an expired cookie.
pub async fn logout(
    State(c): State<Arc<Console>>,
    axum::Extension(user): axum::Extension<SessionUser>,
    headers: HeaderMap,
) -> Response {
    c.auth.end_session(&headers);
    c.events.record(
        &format!("console:{}", user.user),
        "POST",
        "/auth/logout",
        "logout",
        200,
    );
    let mut resp = Json(json!({})).into_response();
    resp.headers_mut()
        .insert(header::SET_COOKIE, c.auth.set_cookie("", 0));
    resp
}

/// `GET /auth/me` → `{"user","csrf"}` of the session.
pub async fn me(axum::Extension(user): axum::Extension<SessionUser>) -> Json<serde_json::Value> {
    Json(json!({"user": user.user, "csrf": user.csrf}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::config::{User, hash_password};

    fn auth(failures: u32) -> Auth {
        let config = ConsoleConfig {
            users: vec![User {
                name: "ada".into(),
                password_hash: hash_password("right").unwrap(),
                role: None,
            }],
            lockout_failures: failures,
            lockout_secs: 60,
            ..ConsoleConfig::default()
        };
        Auth::new(&config).unwrap()
    }

    #[tokio::test]
    async fn lockout_after_consecutive_failures_even_with_the_right_password() {
        let a = auth(3);
        assert!(matches!(a.attempt("ada", "wrong").await, Outcome::Wrong));
        assert!(matches!(a.attempt("ada", "right").await, Outcome::Ok));
        // The success reset the count: three more failures lock.
        assert!(matches!(a.attempt("ada", "x").await, Outcome::Wrong));
        assert!(matches!(a.attempt("ada", "x").await, Outcome::Wrong));
        assert!(matches!(a.attempt("ada", "x").await, Outcome::Locked(_)));
        assert!(matches!(
            a.attempt("ada", "right").await,
            Outcome::Locked(_)
        ));
        // Unknown names are counted the same way, and never log in.
        assert!(matches!(a.attempt("bob", "right").await, Outcome::Wrong));
    }

    #[test]
    fn sessions_are_found_by_cookie_and_end() {
        let a = auth(3);
        let (id, csrf) = a.create_session("ada");
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            format!("other=1; {COOKIE}={id}").parse().unwrap(),
        );
        let s = a.session(&h).expect("a live session");
        assert_eq!((s.user.as_str(), s.csrf.as_str()), ("ada", csrf.as_str()));
        a.end_session(&h);
        assert!(a.session(&h).is_none());
        let cookie = a.set_cookie(&id, 5);
        let cookie = cookie.to_str().unwrap();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    }
}
