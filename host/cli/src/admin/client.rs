//! `tessera admin`'s HTTP: one dashboard at one base URL, each answer read into the
//! `tessera-wire` type the API documents for it, and a failure read from the API's error
//! envelope, so a message names what the dashboard said (and a hint, for the usual causes).

use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use tessera_wire::error::ErrorBody;

/// Per-request deadline. Promotions and topology pushes wait for every proxy's
/// acknowledgement, which can take a few seconds; a hung dashboard must not hang scripts.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Who this is, for the dashboard's audit log: `cli:<unix user>`, or `cli` alone when no user
/// is known (a container, a cron job): the dashboard then records the token's name.
fn cli_actor() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .map_or_else(|| "cli".to_owned(), |user| format!("cli:{user}"))
}

/// A dashboard's API at one base URL.
pub(super) struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
}

/// What a request carries.
pub(super) enum Send<'a, B> {
    Nothing,
    Json(&'a B),
    /// A module upload, as `application/wasm`.
    Wasm(Vec<u8>),
}

/// A request without a body.
pub(super) const NOTHING: Send<'static, ()> = Send::Nothing;

impl Client {
    pub(super) fn new(dashboard: &str, token: Option<String>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            http,
            base: base_url(dashboard)?,
            token,
        })
    }

    /// `GET`s `segments` and reads the answer as `T`.
    pub(super) async fn get<T: DeserializeOwned>(&self, segments: &[&str]) -> anyhow::Result<T> {
        self.call(Method::GET, segments, NOTHING).await
    }

    /// `GET`s `segments` with the query `pairs` and reads the answer as `T`.
    pub(super) async fn get_query<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        pairs: &[(&str, &str)],
    ) -> anyhow::Result<T> {
        self.send(Method::GET, segments, pairs, NOTHING).await
    }

    /// Sends one request and reads the body of a 2xx answer as `T` (an empty body as `{}`).
    ///
    /// # Errors
    /// The dashboard is unreachable, answered an error ([`ApiFailure`]), or answered a body
    /// that is not a `T` (a dashboard of another version, or not a dashboard at all).
    pub(super) async fn call<T: DeserializeOwned, B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        body: Send<'_, B>,
    ) -> anyhow::Result<T> {
        self.send(method, segments, &[], body).await
    }

    /// `call` with a query.
    async fn send<T: DeserializeOwned, B: Serialize>(
        &self,
        method: Method,
        segments: &[&str],
        pairs: &[(&str, &str)],
        body: Send<'_, B>,
    ) -> anyhow::Result<T> {
        let mut url = endpoint(&self.base, segments);
        if !pairs.is_empty() {
            url.query_pairs_mut().extend_pairs(pairs);
        }
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .header(tessera_wire::audit::ACTOR_HEADER, cli_actor());
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        req = match body {
            Send::Nothing => req,
            Send::Json(b) => req.json(b),
            Send::Wasm(bytes) => req
                .header(reqwest::header::CONTENT_TYPE, "application/wasm")
                .body(bytes),
        };
        let resp = req
            .send()
            .await
            .map_err(|e| self.transport_error(&e, &method))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.transport_error(&e, &method))?;
        if !(200..300).contains(&status) {
            let failure = ApiFailure::from_response(status, &bytes, self.token.is_some());
            if failure.is_the_consoles_login() {
                bail!(
                    "{} is the Tessera console (the web app over every cluster), not a \
                     dashboard: it asks for a browser login. Point --dashboard (or \
                     TESSERA_DASHBOARD) at the cluster's dashboard: the console's cluster list \
                     names its address, and `tessera up` prints it",
                    self.base
                );
            }
            return Err(failure.into());
        }
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(bytes).with_context(|| {
            format!(
                "{method} {url} answered HTTP {status} with a body that is not a {} (a dashboard \
                 of another version?)",
                short_type_name::<T>()
            )
        })
    }

    fn transport_error(&self, e: &reqwest::Error, method: &Method) -> anyhow::Error {
        let cause = root_cause(e);
        let host = self.base.host_str().unwrap_or("?");
        let addr = format!("{host}:{}", self.base.port_or_known_default().unwrap_or(80));
        if e.is_timeout() {
            return anyhow::anyhow!(timeout_message(&addr, method));
        }
        if e.is_connect() {
            anyhow::anyhow!(
                "cannot reach the dashboard at {addr} ({}): {cause}\n\
                 hint: is `tessera dashboard` running there? Point at it with --dashboard or TESSERA_DASHBOARD",
                self.base
            )
        } else {
            anyhow::anyhow!("talking to the dashboard at {addr}: {cause}")
        }
    }
}

/// What a request that timed out may have left behind: a read nothing, a change perhaps
/// something.
fn timeout_message(addr: &str, method: &Method) -> String {
    let secs = REQUEST_TIMEOUT.as_secs();
    if method == Method::GET {
        format!(
            "the dashboard at {addr} did not answer within {secs}s (it may be overloaded or \
             stopped; nothing was changed)"
        )
    } else {
        format!(
            "the dashboard at {addr} did not answer within {secs}s; the change may still \
             complete: check with `tessera admin overview`"
        )
    }
}

/// `GroupView` for `tessera_wire::cluster::GroupView`, `Vec<GroupView>` for a list.
fn short_type_name<T>() -> String {
    let full = std::any::type_name::<T>();
    let mut out = String::new();
    for part in full.split_inclusive(['<', '>', ',']) {
        out.push_str(part.rsplit("::").next().unwrap_or(part));
    }
    out
}

/// `host:port` or an `http://` URL (optionally with a path prefix, behind a reverse proxy).
pub(super) fn base_url(dashboard: &str) -> anyhow::Result<Url> {
    let with_scheme = if dashboard.contains("://") {
        dashboard.to_string()
    } else {
        format!("http://{dashboard}")
    };
    let url = Url::parse(&with_scheme).with_context(|| {
        format!("--dashboard {dashboard:?} is neither host:port nor an http:// URL")
    })?;
    if url.scheme() != "http" {
        bail!("--dashboard {dashboard}: only http:// is supported");
    }
    Ok(url)
}

/// `base` + path segments, each percent-encoded (a server address or token is one segment).
pub(super) fn endpoint(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    url.path_segments_mut()
        .expect("http URLs have a path")
        .pop_if_empty()
        .extend(segments);
    url
}

/// The innermost error: reqwest's own message only says "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// A non-2xx answer. The API sends `{"error": {"code", "message"}}` ([`ErrorBody`]);
/// anything else (a reverse proxy's page, an empty body) keeps its text and has no code.
#[derive(Debug, PartialEq)]
pub(super) struct ApiFailure {
    pub(super) status: u16,
    pub(super) code: Option<String>,
    pub(super) message: String,
    pub(super) hint: Option<&'static str>,
}

impl ApiFailure {
    /// The console's answer to a call without a browser session: its 401 points at its own
    /// login route, which no dashboard has (`host/console/src/auth.rs`).
    pub(super) fn is_the_consoles_login(&self) -> bool {
        self.status == 401
            && self.code.as_deref() == Some("unauthorized")
            && self.message.contains("/auth/login")
    }

    pub(super) fn from_response(status: u16, body: &[u8], sent_token: bool) -> Self {
        let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
            Ok(e) => (Some(e.error.code), e.error.message),
            Err(_) => {
                let raw = String::from_utf8_lossy(body);
                let raw = raw.trim();
                let message = if raw.is_empty() {
                    "the dashboard gave no reason".into()
                } else {
                    truncate(raw, 200)
                };
                (None, message)
            }
        };
        let hint = match status {
            401 if !sent_token => {
                Some("no token was sent: pass --token or set TESSERA_ADMIN_TOKEN")
            }
            403 => Some("the token's role is too low: use a token with the role named above"),
            502 => Some("the change is saved; check the proxies with `tessera admin proxy list`"),
            _ => None,
        };
        Self {
            status,
            code,
            message,
            hint,
        }
    }
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.code {
            Some(code) => write!(f, "{} ({code}, HTTP {})", self.message, self.status)?,
            None => write!(f, "{} (HTTP {})", self.message, self.status)?,
        }
        if let Some(hint) = self.hint {
            write!(f, "\nhint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiFailure {}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_error_body_gives_message_code_and_status() {
        let body = br#"{"error":{"code":"conflict","message":"group 2 still owns 512 slots"}}"#;
        let f = ApiFailure::from_response(409, body, true);
        assert_eq!(f.code.as_deref(), Some("conflict"));
        assert_eq!(
            f.to_string(),
            "group 2 still owns 512 slots (conflict, HTTP 409)"
        );
    }

    #[test]
    fn non_json_error_body_keeps_its_text() {
        let f = ApiFailure::from_response(404, b"  Not Found\n", true);
        assert_eq!(f.to_string(), "Not Found (HTTP 404)");
        let f = ApiFailure::from_response(500, b"", true);
        assert_eq!(f.to_string(), "the dashboard gave no reason (HTTP 500)");
        let f = ApiFailure::from_response(400, &[b'x'; 300], true);
        assert_eq!(f.message.chars().count(), 201);
    }

    #[test]
    fn unauthorized_without_a_token_hints_at_the_flag() {
        let body = br#"{"error":{"code":"unauthorized","message":"missing or wrong token"}}"#;
        let f = ApiFailure::from_response(401, body, false);
        assert!(
            f.to_string()
                .starts_with("missing or wrong token (unauthorized, HTTP 401)\nhint: ")
        );
        assert!(f.to_string().contains("--token"));
        assert_eq!(ApiFailure::from_response(401, body, true).hint, None);
    }

    #[test]
    fn the_consoles_login_answer_is_told_apart_from_a_dashboards() {
        let console = br#"{"error":{"code":"unauthorized","message":"not logged in (or the session expired): POST /auth/login"}}"#;
        assert!(ApiFailure::from_response(401, console, true).is_the_consoles_login());
        let dashboard = br#"{"error":{"code":"unauthorized","message":"missing, wrong or revoked token: send `Authorization: Bearer <token>`"}}"#;
        assert!(!ApiFailure::from_response(401, dashboard, true).is_the_consoles_login());
    }

    #[test]
    fn a_read_that_timed_out_does_not_say_a_change_may_complete() {
        let read = timeout_message("h:1", &Method::GET);
        assert!(!read.contains("change may"), "{read}");
        assert!(read.contains("nothing was changed"), "{read}");
        let write = timeout_message("h:1", &Method::POST);
        assert!(write.contains("the change may still complete"), "{write}");
    }

    #[test]
    fn dashboard_address_accepts_host_port_and_urls() {
        assert_eq!(
            base_url("127.0.0.1:18080").unwrap().as_str(),
            "http://127.0.0.1:18080/"
        );
        let prefixed = base_url("http://admin.example/tessera/").unwrap();
        assert_eq!(
            endpoint(&prefixed, &["api", "groups"]).as_str(),
            "http://admin.example/tessera/api/groups"
        );
        assert!(base_url("https://x:1").is_err());
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        let base = base_url("127.0.0.1:18080").unwrap();
        let url = endpoint(&base, &["api", "groups", "1", "servers", "a/b c:7000"]);
        assert_eq!(url.path(), "/api/groups/1/servers/a%2Fb%20c:7000");
    }

    #[test]
    fn a_type_is_named_without_its_path() {
        assert_eq!(
            short_type_name::<Vec<tessera_wire::cluster::GroupView>>(),
            "Vec<GroupView>"
        );
    }
}
