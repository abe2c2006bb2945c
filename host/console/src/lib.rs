//! `tessera console`: the federation web console. It finds every cluster in its stores
//! ([`discovery`]), relays the browser's calls to each cluster's dashboard ([`relay`]), merges
//! their audit logs ([`audit`]), keeps its own login events apart ([`logins`]), and serves the
//! single-page app ([`assets`]) to logged-in users ([`auth`], sessions kept in a store), each
//! relayed call bounded by the user's role. It keeps no cluster state of its own; the
//! dashboards own their clusters. Routes and shapes: docs/console.md; the OpenAPI document
//! ([`openapi`]) describes the console's own routes and every relayed one.

mod assets;
pub mod audit;
pub mod auth;
pub mod config;
pub mod discovery;
mod fetch;
pub mod logins;
pub mod openapi;
pub mod relay;

pub use config::{ConsoleConfig, User, hash_password, verify_password};

use std::sync::Arc;

use anyhow::{Context, bail};
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use tessera_http::error::ApiError;

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9090";

/// Settings of `tessera console`.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    pub config: ConsoleConfig,
    /// Added to the config's stores.
    pub stores: Vec<String>,
    /// Wins over the config's.
    pub listen: Option<String>,
}

/// A running console's state, shared by its handlers.
pub struct Console {
    pub(crate) config: ConsoleConfig,
    pub(crate) auth: auth::Auth,
    pub(crate) discovery: discovery::Discovery,
    pub(crate) logins: logins::Logins,
    pub(crate) http: reqwest::Client,
}

impl Console {
    /// # Errors
    /// No users, no stores, or an invalid config.
    pub fn new(opts: ConsoleOptions) -> anyhow::Result<Arc<Self>> {
        let mut config = opts.config;
        config.check()?;
        if config.users.is_empty() {
            bail!(
                "no users: add a [[users]] entry to console.toml with a password_hash from \
                 `tessera console hash-password`"
            );
        }
        for s in opts.stores {
            if !config.stores.contains(&s) {
                config.stores.push(s);
            }
        }
        if config.stores.is_empty() {
            bail!(
                "no store to search for clusters: give --store URL (or stores = [...] in console.toml)"
            );
        }
        for u in config.users.iter().filter(|u| u.role.is_none()) {
            tracing::warn!(
                user = %u.name,
                "console user has no role and is a viewer: set role = \"operator\" or \"admin\" in console.toml for changes"
            );
        }
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(2))
            .build()
            .context("building the HTTP client")?;
        Ok(Arc::new(Self {
            auth: auth::Auth::new(&config)?,
            discovery: discovery::Discovery::new(config.stores.clone(), http.clone()),
            logins: logins::Logins::default(),
            http,
            config,
        }))
    }

    /// The stores searched.
    pub fn stores(&self) -> &[String] {
        &self.config.stores
    }

    /// The role of console user `name` (a viewer when console.toml no longer lists it).
    pub(crate) fn role_of(&self, name: &str) -> tessera_wire::access::Role {
        self.config
            .users
            .iter()
            .find(|u| u.name == name)
            .map_or(tessera_wire::access::Role::Viewer, User::role)
    }
}

/// The routes anyone may call.
fn public() -> OpenApiRouter<Arc<Console>> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(auth::login))
}

/// The routes that need a session (and the CSRF token on mutations). The relay's catch-all
/// is described in the document by every dashboard route it relays (`openapi`).
fn private() -> OpenApiRouter<Arc<Console>> {
    OpenApiRouter::new()
        .routes(routes!(auth::logout))
        .routes(routes!(auth::me))
        .routes(routes!(relay::clusters))
        .route("/api/clusters/{name}/{*rest}", any(relay::relay))
        .routes(routes!(relay::stores))
        .routes(routes!(audit::merged))
        .routes(routes!(logins::list))
        .route("/api", any(api_not_found))
        .route("/api/{*rest}", any(api_not_found))
}

/// The console's routes (docs/console.md). Serve them with `http_server::serve`, as [`run`]
/// does (or `into_make_service_with_connect_info::<SocketAddr>()`): login and logout read the
/// peer's address, for the lockout and the login log.
pub fn router(c: Arc<Console>) -> Router {
    // route_layer: only the private routes, not the public ones merged below.
    let (private, _) = private().split_for_parts();
    let private = private.route_layer(middleware::from_fn_with_state(
        c.clone(),
        auth::require_session,
    ));
    let (public, _) = public().split_for_parts();
    public
        .merge(private)
        .fallback(assets::serve)
        .layer(middleware::map_response(security_headers))
        .with_state(c)
}

/// Liveness
#[utoipa::path(
    get,
    path = "/health",
    tag = "session",
    operation_id = "consoleHealth",
    security(()),
    responses((status = 200, description = "The console is serving.", body = String, content_type = "text/plain"))
)]
async fn health() -> &'static str {
    "ok"
}

async fn api_not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no console route {}", uri.path()))
}

/// Headers for every answer: no framing, no sniffing, scripts and data from this origin only.
async fn security_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
             frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r.into_response()
}

/// Runs the console until `shutdown` completes.
///
/// # Errors
/// The address cannot be bound, or the config is invalid.
pub async fn run(
    opts: ConsoleOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let listen = opts
        .listen
        .clone()
        .or_else(|| opts.config.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.into());
    let tls = match (&opts.config.tls_cert, &opts.config.tls_key) {
        (Some(cert), Some(key)) => Some(
            tessera_model::tls::ServerTls::load(tessera_model::tls::ServerTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: None,
                client_auth: tessera_model::tls::ClientAuth::default(),
            })
            .context("the console's tls_cert/tls_key")?,
        ),
        (None, None) => None,
        _ => anyhow::bail!("tls_cert and tls_key go together"),
    };
    let mut opts = opts;
    // Served over TLS, the session cookie never travels in clear text.
    opts.config.secure_cookie |= tls.is_some();
    let console = Console::new(opts)?;
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let listener = tessera_http::tls::HttpListener::new(listener, tls)?;
    if !assets::built() {
        tracing::warn!(
            "the front end is not built: / shows how (cd web && npm ci && npm run build); the API works"
        );
    }
    if !console.config.secure_cookie && !addr.ip().is_loopback() {
        tracing::warn!(
            %addr,
            "the console serves plain HTTP on a non-loopback address: give it tls_cert and \
             tls_key, or put it behind an HTTPS proxy and set secure_cookie = true in console.toml"
        );
    }
    let (threads, queue) = console.auth.hashing_capacity();
    tracing::info!(
        %addr,
        stores = ?console.stores(),
        session_store = console.auth.session_store(),
        https = listener.is_tls(),
        password_checks = threads,
        password_queue = queue,
        "console listening"
    );
    // The server gives every request its peer's address: the login lockout counts by it.
    tessera_http::server::serve(listener, router(console), shutdown).await?;
    Ok(())
}
