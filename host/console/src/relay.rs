//! Calls to clusters: `GET /api/clusters` (every cluster with its overview, fetched in
//! parallel, and the role the user has there) and `ANY /api/clusters/{name}/{*rest}`, relayed
//! to that cluster's dashboard as `/api/{rest}` with the console's token for it and
//! `X-Tessera-Actor: console:<user>`, if the user's role allows the call (`access`). Status,
//! JSON body and `X-Tessera-Role` come back as the dashboard sent them, with two exceptions: a
//! dashboard's 401 becomes a 403 `cluster_token`, because a 401 from the console means "log in
//! again"; and an answer that is not JSON becomes a 502 (nothing else is served on the
//! console's origin). A cluster's token goes only to the cluster of that name in the store the
//! token is bound to ([`super::config::ConsoleConfig::token`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::join_all;

use super::Console;
use super::auth::SessionUser;
use super::discovery::Cluster;
use super::fetch::MAX_BODY;
use tessera_http::access;
use tessera_http::error::ApiError;
use tessera_wire::access::Role;
use tessera_wire::audit::{ACTOR_HEADER, ROLE_HEADER};
use tessera_wire::cluster::Overview;
use tessera_wire::console::{ClusterView, StoreView};
use tessera_wire::error::ErrorBody;

/// How long a cluster's overview may take in `/api/clusters`.
const OVERVIEW_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a relayed call may take: promotions and pushes wait for every proxy.
const RELAY_TIMEOUT: Duration = Duration::from_secs(35);

/// The clusters
///
/// Every cluster of the console's stores, with its overview (fetched from its dashboard in
/// parallel, 2 s each), whether the console has a token for it, and the role the user has
/// there: the lower of the user's own and the token's.
#[utoipa::path(
    get,
    path = "/api/clusters",
    tag = "console",
    operation_id = "listClusters",
    responses((status = 200, description = "Every cluster found.", body = Vec<ClusterView>))
)]
pub async fn clusters(
    State(c): State<Arc<Console>>,
    axum::Extension(user): axum::Extension<SessionUser>,
) -> Json<Vec<ClusterView>> {
    let clusters = c.discovery.clusters().await;
    let user_role = c.role_of(&user.user);
    let views = join_all(clusters.iter().map(|cl| view(&c, cl, user_role))).await;
    Json(views)
}

async fn view(c: &Console, cl: &Cluster, user_role: Role) -> ClusterView {
    let mut v = ClusterView {
        name: cl.name.clone(),
        store: cl.store.clone(),
        dashboard: cl.dashboard.clone(),
        reachable: false,
        overview: None,
        error: cl.error.clone(),
        has_token: c.config.token(&cl.name, &cl.store).is_some(),
        token_role: None,
        role: None,
        last_dashboard: cl.last_dashboard.clone(),
    };
    if !cl.relayable() {
        return v;
    }
    let addr = &cl.dashboard.as_ref().expect("relayable has one").admin_addr;
    let mut req = c
        .http
        .get(format!("http://{addr}/api/overview"))
        .timeout(OVERVIEW_TIMEOUT);
    if let Some(t) = c.config.token(&cl.name, &cl.store) {
        req = req.bearer_auth(t);
    }
    let fetched = async {
        let resp = req
            .send()
            .await
            .map_err(|e| unreachable(&cl.name, addr, &e))?;
        let status = resp.status();
        let token_role: Option<Role> = resp
            .headers()
            .get(ROLE_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let body: serde_json::Value = super::fetch::json(resp, super::fetch::MAX_PAGE)
            .await
            .map_err(|e| format!("dashboard at {addr} answered no JSON overview: {e}"))?;
        if !status.is_success() {
            let message = serde_json::from_value::<ErrorBody>(body)
                .map(|e| e.error.message)
                .unwrap_or_default();
            return Err(format!(
                "dashboard at {addr} answered HTTP {}: {message}",
                status.as_u16(),
            ));
        }
        let overview: Overview = serde_json::from_value(body).map_err(|e| {
            format!(
                "dashboard at {addr} answered an overview of another shape (another version?): {e}"
            )
        })?;
        Ok((overview, token_role))
    }
    .await;
    match fetched {
        Ok((o, token_role)) => {
            v.reachable = true;
            v.overview = Some(o);
            v.token_role = token_role;
            v.role = token_role.map(|t| t.min(user_role));
        }
        Err(e) => v.error = Some(e),
    }
    v
}

/// The stores searched
///
/// Each store and what its last scan found, or why it failed.
#[utoipa::path(
    get,
    path = "/api/stores",
    tag = "console",
    operation_id = "listStores",
    responses((status = 200, description = "Every store.", body = Vec<StoreView>))
)]
pub async fn stores(State(c): State<Arc<Console>>) -> Json<Vec<StoreView>> {
    Json(c.discovery.stores().await.to_vec())
}

/// `ANY /api/clusters/{name}/{*rest}`.
pub async fn relay(
    State(c): State<Arc<Console>>,
    axum::Extension(user): axum::Extension<SessionUser>,
    req: Request,
) -> Response {
    match relay_call(&c, &user, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn relay_call(c: &Console, user: &SessionUser, req: Request) -> Result<Response, ApiError> {
    let (name, rest) = split_path(req.uri().path())?;
    let api_path = format!("/api/{rest}");
    let role = c.role_of(&user.user);
    if let Some(needs) = access::required(req.method(), &api_path)
        && role < needs
    {
        let who = format!("console user {}", user.user);
        return Err(ApiError::forbidden(access::refusal(
            &who,
            role,
            req.method(),
            &api_path,
            needs,
        )));
    }
    let query = req.uri().query().map(str::to_owned);
    let cluster = match c.discovery.find(&name, false).await {
        Some(cl) => cl,
        // Not in the cached scan: maybe created since.
        None => c.discovery.find(&name, true).await.ok_or_else(|| {
            ApiError::not_found(format!("no cluster {name:?} in the console's stores"))
        })?,
    };
    let Some(dashboard) = cluster.dashboard.as_ref().filter(|_| cluster.relayable()) else {
        return Err(ApiError::unavailable(
            cluster
                .error
                .unwrap_or_else(|| format!("cluster {name} has no dashboard")),
        ));
    };
    let mut url = format!("http://{}{api_path}", dashboard.admin_addr);
    if let Some(q) = query {
        url.push('?');
        url.push_str(&q);
    }
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("request bodies are limited to {MAX_BODY} bytes"),
        )
    })?;
    let mut out = c
        .http
        .request(parts.method.clone(), &url)
        .timeout(RELAY_TIMEOUT)
        .header(ACTOR_HEADER, format!("console:{}", user.user))
        .body(body);
    for h in [header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(v) = parts.headers.get(&h) {
            out = out.header(h, v);
        }
    }
    let token = c.config.token(&name, &cluster.store);
    if let Some(t) = token {
        out = out.bearer_auth(t);
    }
    let resp = match out.send().await {
        Ok(r) => r,
        Err(e) => {
            if e.is_connect() {
                // The dashboard may have moved (a successor on another port): scan anew
                // next time rather than in CACHE_FOR.
                let _ = c.discovery.find(&name, true).await;
            }
            return Err(ApiError::new(
                StatusCode::BAD_GATEWAY,
                "bad_gateway",
                unreachable(&name, &dashboard.admin_addr, &e),
            ));
        }
    };
    let status = resp.status();
    if status == StatusCode::UNAUTHORIZED {
        let why = if token.is_some() {
            "refused the console's token for it (revoked?): fix it under [tokens] in console.toml"
        } else {
            "needs a token: add one under [tokens] in console.toml, bound to its store \
             (`tessera admin token create`)"
        };
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cluster_token",
            format!("the dashboard of cluster {name} {why}"),
        ));
    }
    let token_role: Option<Role> = resp
        .headers()
        .get(ROLE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    // Only JSON comes back: a dashboard (or whatever answers at the address a store names)
    // must not serve HTML or script on the console's origin.
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        // An error keeps its status (a 404 for a route the dashboard lacks stays a 404).
        let code = if status.is_client_error() || status.is_server_error() {
            status
        } else {
            StatusCode::BAD_GATEWAY
        };
        return Err(ApiError::new(
            code,
            "bad_gateway",
            format!(
                "the dashboard of cluster {name} answered HTTP {} with no JSON; not relayed",
                status.as_u16()
            ),
        ));
    }
    let bytes = super::fetch::body(resp, MAX_BODY).await.map_err(|e| {
        ApiError::new(
            StatusCode::BAD_GATEWAY,
            "bad_gateway",
            format!("reading the answer of cluster {name}'s dashboard: {e}"),
        )
    })?;
    let mut r = Response::new(Body::from(bytes));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    if let Some(role) = token_role {
        r.headers_mut().insert(
            ROLE_HEADER,
            axum::http::HeaderValue::from_static(role.as_str()),
        );
    }
    Ok(r)
}

/// `/api/clusters/{name}/{rest}` → (name, rest), `rest` still percent-encoded as sent (so
/// `127.0.0.1%3A7000` reaches the dashboard as it left the browser). `.` and `..` segments are
/// refused: a relayed call stays under the dashboard's `/api/`.
fn split_path(path: &str) -> Result<(String, String), ApiError> {
    let rest = path
        .strip_prefix("/api/clusters/")
        .ok_or_else(|| ApiError::not_found("not a cluster path"))?;
    let (name, rest) = rest
        .split_once('/')
        .ok_or_else(|| ApiError::not_found("expected /api/clusters/{name}/{api path}"))?;
    if rest.split('/').any(|s| {
        let decoded = s.replace("%2e", ".").replace("%2E", ".");
        decoded == "." || decoded == ".."
    }) {
        return Err(ApiError::bad_request(
            "path segments `.` and `..` are not relayed",
        ));
    }
    Ok((name.to_owned(), rest.to_owned()))
}

/// The message of a failed connection to a dashboard.
fn unreachable(name: &str, addr: &str, e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let what = if e.is_timeout() {
        "did not answer in time".to_owned()
    } else {
        format!("is unreachable ({cause})")
    };
    format!("the dashboard of cluster {name} at {addr} {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_path_keeps_encoding_and_refuses_dot_segments() {
        assert_eq!(
            split_path("/api/clusters/c1/groups/1/servers/127.0.0.1%3A7000").unwrap(),
            ("c1".into(), "groups/1/servers/127.0.0.1%3A7000".into())
        );
        assert!(split_path("/api/clusters/c1/../health").is_err());
        assert!(split_path("/api/clusters/c1/%2E%2e/health").is_err());
        assert!(split_path("/api/clusters/c1").is_err());
    }
}
