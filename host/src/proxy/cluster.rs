//! A proxy in cluster mode: it registers itself in the store as an ephemeral node, takes its
//! routing table from the store at start, and from then on from the dashboard's pushes on its
//! admin API. The store and the dashboard may go away: the proxy keeps serving its last table.
//!
//! Order matters: the admin API is up and the node registered *before* the table is loaded,
//! so a dashboard change made in between reaches this proxy by a push (and the older table
//! read from the store is then refused by its epoch), never lost.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tracing::{info, warn};

use super::Proxy;
use crate::api::proxy::ProxyAdmin;
use crate::config::ProxyConfig;
use crate::coordinator::model::{self, ClusterMeta, ProxyModel, ProxyState, SCHEMA_VERSION};
use crate::coordinator::{self, Holder};
use crate::router::{Router, SlotTableBuilder, Topology};
use crate::secret::{random_token, sha256_hex};

/// How long a crashed proxy's node outlives it.
pub const PROXY_NODE_TTL: Duration = Duration::from_secs(10);

/// Where a cluster-mode proxy finds its cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub cluster: String,
    pub store_url: String,
    pub admin_listen: String,
}

/// Runs a cluster-mode proxy until `shutdown`.
///
/// # Errors
/// The store cannot be read at start, the cluster does not exist, or a port is taken.
pub async fn run(
    config: ProxyConfig,
    opts: ClusterOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if !config.users.is_empty() {
        bail!(
            "a cluster-mode proxy takes its users from the cluster (tessera admin user …), not from [[users]]"
        );
    }
    let (store, paths) = coordinator::open_cluster(&opts.cluster, &opts.store_url).await?;
    let Some((meta, _)) = model::read::<ClusterMeta>(&*store, &paths.meta()).await? else {
        bail!(
            "cluster {} not found in {}: start its dashboard first (tessera dashboard --cluster {} --store {})",
            opts.cluster,
            store.describe(),
            opts.cluster,
            opts.store_url
        );
    };
    // An empty table until the store's is loaded below; no client is accepted before that.
    let router = Arc::new(Router::new(SlotTableBuilder::default().build(0)));
    let proxy = Proxy::bind_with_router(config, router)?;
    let admin_listener = tokio::net::TcpListener::bind(&opts.admin_listen)
        .await
        .with_context(|| format!("binding the admin API on {}", opts.admin_listen))?;
    let admin_addr = admin_listener.local_addr()?.to_string();
    let token = random_token();
    let admin = ProxyAdmin::new(
        proxy.shared().clone(),
        token.clone(),
        admin_addr.clone(),
        Some(sha256_hex(&meta.proxy_secret)),
    );
    let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(crate::api::serve(
        admin_listener,
        admin.clone().router(),
        async {
            let _ = admin_stopped.await;
        },
    ));
    tokio::spawn(admin.clone().sample_ops());

    let model = ProxyModel {
        schema: SCHEMA_VERSION,
        token: token.clone(),
        addr: proxy.local_addr().to_string(),
        admin_addr: admin_addr.clone(),
        pid: std::process::id(),
        host: coordinator::hostname(),
        start_unix: model::now_unix(),
        state: ProxyState::Online,
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let holder = Holder {
        pid: model.pid,
        host: model.host.clone(),
        payload: serde_json::to_value(&model)?,
    };
    let node = store
        .create_ephemeral(&paths.proxy(&token), &holder, PROXY_NODE_TTL)
        .await
        .context("registering the proxy")?;

    // The topology last committed; before the first commit, what the models describe.
    let topo = match model::read::<Topology>(&*store, &paths.topology()).await? {
        Some((t, _)) => t,
        None => {
            let (groups, slots) = model::load_layout(&*store, &paths)
                .await
                .context("loading the slot table")?;
            model::topology(meta.epoch, &groups, &slots, &Default::default())
        }
    };
    let _ = admin.catalog_source.set((store.clone(), paths.clone()));
    let (catalog, _) = crate::plugins::catalog::read(&*store, &paths)
        .await
        .context("reading the plugin catalog")?;
    if !catalog.plugins.is_empty() {
        crate::api::plugins_apply(&admin, &catalog)
            .await
            .map_err(|e| anyhow::anyhow!("loading the cluster's plugins: {e}"))?;
        info!(
            version = catalog.version,
            plugins = catalog.plugins.iter().filter(|p| p.enabled).count(),
            "plugins loaded from the catalog"
        );
    }
    load_users(&admin, &*store, &paths).await?;
    // Before a client is served: the data connections' confined user is set up with it, and
    // the proxy's own requests (moving keys, INFO) run as it.
    match &meta.backend_admin {
        Some(cred) => admin.shared.set_backend_admin(Some(cred.clone())),
        None => warn!(
            "the cluster meta has no backend admin user yet (its dashboard adds one at its next start)"
        ),
    }
    let meta_epoch = topo.epoch;
    match admin.apply(topo, false).await {
        Ok(_) => info!(epoch = meta_epoch, "slot table loaded from the store"),
        Err(e) => info!(reason = %e, "kept the newer table the dashboard pushed during start-up"),
    }
    info!(cluster = %opts.cluster, %token, admin = %admin_addr, "proxy registered");

    let result = proxy.run(shutdown).await;
    if let Err(e) = &result {
        warn!(error = %e, "proxy stopped with an error");
    }
    node.release();
    let _ = stop_admin.send(());
    result
}

/// Loads the cluster's users table before any client is accepted. A document that cannot
/// be read as a table fails closed (no one can AUTH) until the dashboard pushes a good one:
/// hostile or broken store contents must neither stop the proxy nor open it.
///
/// # Errors
/// The store cannot be read at all.
async fn load_users(
    admin: &ProxyAdmin,
    store: &dyn coordinator::Store,
    paths: &model::Paths,
) -> anyhow::Result<()> {
    let key = paths.users();
    let Some(raw) = store.get(&key).await.context("reading the users table")? else {
        return Ok(()); // no table yet: proxy.toml's default user (session_password)
    };
    let doc: crate::users::UsersDoc = match serde_json::from_slice(&raw.value) {
        Ok(d) => d,
        Err(e) => {
            admin.refuse_users(format!(
                "the users document {key} is not valid JSON for a users table: {e}"
            ));
            return Ok(());
        }
    };
    match admin.apply_users(&doc) {
        Ok(v) => info!(
            version = v,
            users = doc.users.len(),
            "users loaded from the store"
        ),
        Err(e) if e.status == axum::http::StatusCode::CONFLICT => {
            info!(reason = %e, "kept the newer users table the dashboard pushed during start-up")
        }
        Err(e) => admin.refuse_users(e.message),
    }
    Ok(())
}
