//! A proxy in cluster mode: it registers itself in the store as an ephemeral node, takes its
//! routing table from the store at start, and from then on from the dashboard's pushes on its
//! admin API. The dashboard may go away: the proxy keeps serving its last table. The store
//! may go away for less than the registration's TTL less `FENCE_MARGIN`; past that the proxy
//! fences itself (`fence::Fence`): once its registration may have lapsed, the dashboard may
//! move slots without it. When the store answers again it registers afresh, reloads its
//! table, and serves again.
//!
//! Order matters: the admin API is up and the node registered *before* the table is loaded,
//! so a dashboard change made in between reaches this proxy by a push (and the older table
//! read from the store is then refused by its epoch), never lost.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tracing::{info, warn};

use super::Proxy;
use crate::admin::ProxyAdmin;
use crate::config::ProxyConfig;
use tessera_model::fence::FENCE_MARGIN;
use tessera_model::router::{Router, SlotTableBuilder, Topology};
use tessera_model::secret::{random_token, sha256_hex};
use tessera_store::Holder;
use tessera_store::model::{self, ClusterMeta, ProxyModel, ProxyState, SCHEMA_VERSION};

/// How long a crashed proxy's node outlives it.
pub const PROXY_NODE_TTL: Duration = Duration::from_secs(10);
/// How often the fence follows the registration's renewals.
const FENCE_STEP: Duration = Duration::from_millis(100);
/// How often a fenced proxy tries to register again and reload its table.
const RETRY: Duration = Duration::from_secs(1);
/// How often the peers shown to cluster clients are read from the store.
const PEERS_EVERY: Duration = Duration::from_secs(2);
/// How long a starting proxy looks for its prefix routes' targets before it serves.
const ROUTES_AT_START: Duration = Duration::from_secs(2);

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
    let config = ProxyConfig {
        cluster_mode: true,
        ..config
    };
    let (store, paths) = tessera_store::open_cluster(&opts.cluster, &opts.store_url).await?;
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
    let probes = tokio::spawn(super::replica_probe::run(
        router.clone(),
        meta.backend_admin.clone(),
    ));
    let proxy = Proxy::bind_with_router(config, router)?;
    let admin_listener = tokio::net::TcpListener::bind(&opts.admin_listen)
        .await
        .with_context(|| format!("binding the admin API on {}", opts.admin_listen))?;
    let admin_addr = admin_listener.local_addr()?.to_string();
    let token = random_token();
    proxy.shared().name_backend_connections(&token);
    proxy.shared().fleet.set_secret(meta.proxy_secret.clone());
    let admin = ProxyAdmin::new(
        proxy.shared().clone(),
        token.clone(),
        admin_addr.clone(),
        Some(sha256_hex(&meta.proxy_secret)),
    );
    let (stop_admin, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    // The admin port listens for as long as this proxy may route: the dashboard reads a
    // refused connection there as "routes nothing" (`docs/operations.md`, "Stopping
    // proxies"). Should the server ever end early, the guard closes the fence with it.
    let fence_guard = FenceOnDrop(proxy.shared().router.fence.clone());
    let admin_server = tokio::spawn(tessera_http::server::serve(
        admin_listener,
        admin.clone().router(),
        async move {
            let _ = admin_stopped.await;
            drop(fence_guard);
        },
    ));
    tokio::spawn(admin.clone().sample_ops());

    let model = ProxyModel {
        schema: SCHEMA_VERSION,
        token: token.clone(),
        addr: proxy.local_addr().to_string(),
        admin_addr: admin_addr.clone(),
        pid: std::process::id(),
        host: tessera_store::hostname(),
        start_unix: model::now_unix(),
        state: ProxyState::Online,
        version: env!("CARGO_PKG_VERSION").into(),
    };
    proxy
        .shared()
        .peers
        .set_me(crate::peers::Peer::new(&token, &model.addr).context("the proxy's own address")?);
    let holder = Holder {
        pid: model.pid,
        host: model.host.clone(),
        payload: serde_json::to_value(&model)?,
    };
    let node = store
        .create_ephemeral(&paths.proxy(&token), &holder, PROXY_NODE_TTL)
        .await
        .context("registering the proxy")?;
    let topo = stored_topology(&*store, &paths).await?;
    let _ = admin.catalog_source.set((store.clone(), paths.clone()));
    let _ = admin.client_addr.set(model.addr.clone());
    let (catalog, _) = tessera_store::catalog::read(&*store, &paths)
        .await
        .context("reading the plugin catalog")?;
    if !catalog.plugins.is_empty() {
        crate::admin::apply_catalog(&admin, &catalog)
            .await
            .map_err(|e| anyhow::anyhow!("loading the cluster's plugins: {e}"))?;
        info!(
            version = catalog.version,
            plugins = catalog.plugins.iter().filter(|p| p.enabled).count(),
            "plugins loaded from the catalog"
        );
    }
    load_users(&admin, &*store, &paths).await?;
    let mirror = tessera_store::mirror::read_doc(&*store, &paths)
        .await
        .context("reading the mirror settings")?;
    // Once the cluster has mirror settings they replace proxy.toml's `[mirror]`.
    if mirror.version > 0
        && let Err(e) = admin.shared.mirror.apply(&mirror)
    {
        warn!(error = %e, "the cluster's mirror settings were not applied");
    }
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
    // Targets for the prefix routes before the first client, within a bound: a route whose
    // cluster does not answer yet gets its target from the keeper's next rounds.
    let keeper = super::routes::Keeper::new(admin.clone(), store.clone());
    let _ = tokio::time::timeout(ROUTES_AT_START, keeper.check()).await;
    let route_keeper = tokio::spawn(keeper.run());
    serve_within(&admin, &node);
    let (stop_registration, registration_stopped) = tokio::sync::oneshot::channel();
    let registration = tokio::spawn(keep_registered(
        admin.clone(),
        store.clone(),
        paths.clone(),
        holder,
        node,
        registration_stopped,
    ));

    let peers = tokio::spawn(follow_peers(
        admin.shared.clone(),
        store.clone(),
        paths.clone(),
        token.clone(),
    ));

    // Draining starts when `shutdown` completes: this proxy leaves the cluster it presents at
    // once, and marks itself draining in the store so that its peers leave it out too.
    let (marking_tx, marking) = tokio::sync::oneshot::channel();
    let shutdown = {
        let (shared, store) = (admin.shared.clone(), store.clone());
        let key = paths.proxy_draining(&token);
        async move {
            shutdown.await;
            shared.peers.leave();
            let _ = marking_tx.send(tokio::spawn(mark_draining(store, key)));
        }
    };
    let result = proxy.run(shutdown).await;
    if let Err(e) = &result {
        warn!(error = %e, "proxy stopped with an error");
    }
    // Every session has ended. Stop following the registration (which would reopen the
    // fence), close the fence for good, then leave the store, and only then close the admin
    // port. Until the registration is gone, pushes still reach this proxy and are
    // acknowledged; after it, no push waits for it.
    let _ = stop_registration.send(());
    let node = registration.await.ok().flatten();
    admin.shared.router.fence.close();
    admin
        .stopped
        .store(true, std::sync::atomic::Ordering::Release);
    deregister(node).await;
    // The mark is written before it is deleted with the rest, or it would outlive the proxy.
    if let Ok(marked) = marking.await {
        let _ = marked.await;
    }
    leave_the_list(&*store, &paths, &token).await;
    probes.abort();
    route_keeper.abort();
    peers.abort();
    let _ = stop_admin.send(());
    // Answers in progress finish (a push's drain is bounded too), within a bound of its own.
    let _ = tokio::time::timeout(ADMIN_CLOSE_WITHIN, admin_server).await;
    result
}

/// How long a stopping proxy lets its admin API finish the answers in progress.
const ADMIN_CLOSE_WITHIN: Duration = Duration::from_secs(2);

/// How long a stopping proxy waits for the store to confirm it is deregistered.
const DEREGISTER_WITHIN: Duration = Duration::from_secs(3);

/// Removes the registration and waits (at most [`DEREGISTER_WITHIN`]) for the store to
/// confirm, so that no push started after this proxy exits waits for it. Says how it went.
async fn deregister(node: Option<tessera_store::Ephemeral>) {
    let Some(node) = node else {
        return info!("stopping while fenced: no registration to remove");
    };
    let key = node.key.clone();
    let started = std::time::Instant::now();
    match tokio::time::timeout(DEREGISTER_WITHIN, node.release_confirmed()).await {
        Ok(Ok(())) => info!(
            key = %key,
            took_ms = started.elapsed().as_millis() as u64,
            "deregistered from the store"
        ),
        Ok(Err(e)) => warn!(
            key = %key,
            error = %e,
            ttl_secs = PROXY_NODE_TTL.as_secs(),
            "deregistering failed; the registration expires by itself within its TTL"
        ),
        Err(_) => warn!(
            key = %key,
            within_ms = DEREGISTER_WITHIN.as_millis() as u64,
            ttl_secs = PROXY_NODE_TTL.as_secs(),
            "the store did not confirm the deregistration in time; the registration expires by itself within its TTL"
        ),
    }
}

/// Marks this proxy draining in the store (`Paths::proxy_draining`), bounded like the
/// deregistration; if the mark fails, peers list this proxy until it leaves the store.
async fn mark_draining(store: Arc<dyn tessera_store::Store>, key: String) {
    let since = serde_json::json!({ "since_unix": model::now_unix() }).to_string();
    match tokio::time::timeout(DEREGISTER_WITHIN, store.put(&key, since.into())).await {
        Ok(Ok(_)) => info!(%key, "marked draining: peers leave this proxy out of their cluster"),
        Ok(Err(e)) => warn!(%key, error = %e, "could not mark this proxy draining"),
        Err(_) => warn!(%key, "the store did not confirm the draining mark in time"),
    }
}

/// Deletes the dashboard's memory of this proxy (`Paths::proxy_known`), and its draining mark:
/// a proxy that stopped cleanly is gone, not lost. Bounded like the deregistration; if it
/// fails, the proxy stays listed as lost until an operator removes it.
async fn leave_the_list(store: &dyn tessera_store::Store, paths: &model::Paths, token: &str) {
    for key in [paths.proxy_known(token), paths.proxy_draining(token)] {
        match tokio::time::timeout(DEREGISTER_WITHIN, store.delete(&key)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!(%key, error = %e, "could not leave the store's lists of proxies"),
            Err(_) => warn!(%key, "the store did not confirm leaving its lists of proxies in time"),
        }
    }
}

/// Closes the fence when dropped: held by the admin server's task, so a proxy whose admin
/// port stopped listening for any reason routes nothing either.
struct FenceOnDrop(Arc<tessera_model::fence::Fence>);

impl Drop for FenceOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The topology last committed; before the first commit, what the models describe.
///
/// # Errors
/// The store cannot be read, or holds no cluster meta.
async fn stored_topology(
    store: &dyn tessera_store::Store,
    paths: &model::Paths,
) -> anyhow::Result<Topology> {
    if let Some((t, _)) = model::read::<Topology>(store, &paths.topology()).await? {
        return Ok(t);
    }
    let Some((meta, _)) = model::read::<ClusterMeta>(store, &paths.meta()).await? else {
        bail!("the cluster's meta document is gone from the store");
    };
    let (groups, slots) = model::load_layout(store, paths)
        .await
        .context("loading the slot table")?;
    Ok(model::topology(
        meta.epoch,
        &groups,
        &slots,
        &Default::default(),
    ))
}

/// Keeps the peers cluster clients are shown (`peers`), and those asked for pub/sub counts
/// (`fleet`), in step with the proxies registered in the store, every `PEERS_EVERY`; a store
/// that does not answer leaves them as they were. `token`: this proxy's.
async fn follow_peers(
    shared: Arc<crate::worker::Shared>,
    store: Arc<dyn tessera_store::Store>,
    paths: model::Paths,
    token: String,
) {
    loop {
        let read = tokio::time::timeout(PEERS_EVERY, async {
            let proxies = model::registered_proxies(&*store, &paths).await?;
            Ok::<_, tessera_store::StoreError>((
                proxies,
                model::draining_tokens(&*store, &paths).await?,
            ))
        });
        if let Ok(Ok((proxies, draining))) = read.await {
            // Subscribers of a proxy that is stopping still count: ask every one registered.
            shared.fleet.set_others(
                proxies
                    .iter()
                    .filter(|p| p.token != token)
                    .map(|p| p.admin_addr.clone())
                    .take(crate::peers::MAX_PEERS)
                    .collect(),
            );
            shared.peers.set(
                proxies
                    .iter()
                    .filter(|p| p.state == ProxyState::Online && !draining.contains(&p.token))
                    .filter_map(|p| crate::peers::Peer::new(&p.token, &p.addr)),
            );
        }
        tokio::time::sleep(PEERS_EVERY).await;
    }
}

/// Lets the proxy serve up to `FENCE_MARGIN` before the registration could expire. Returns
/// false once it may have lapsed.
fn serve_within(admin: &ProxyAdmin, node: &tessera_store::Ephemeral) -> bool {
    let clock = node.clock();
    if clock.lapsed() {
        return false;
    }
    let until = clock.valid_until().checked_sub(FENCE_MARGIN);
    match until {
        Some(at) => admin.shared.router.fence.serve_until(at),
        None => admin.shared.router.fence.close(),
    }
    true
}

/// Keeps the fence in step with the registration's renewals (a renewal that comes late
/// fences the proxy by the clock alone, see `fence::Fence`). Once the registration may
/// have lapsed, the proxy registers again, then reloads its table from the store (in that
/// order, as at start: a change committed after the new registration reaches it by a push),
/// and serves again. On `stop` it returns the node (`None` while it is not registered), for
/// the caller to release; dropping this future releases it too, without waiting.
async fn keep_registered(
    admin: Arc<ProxyAdmin>,
    store: Arc<dyn tessera_store::Store>,
    paths: model::Paths,
    holder: Holder,
    mut node: tessera_store::Ephemeral,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Option<tessera_store::Ephemeral> {
    let key = node.key.clone();
    let offline = paths.proxy_offline(&admin.token);
    let fence = &admin.shared.router.fence;
    loop {
        // Closed by the clock alone while a renewal is late; open again once it comes.
        let mut late = false;
        loop {
            let clock = node.clock();
            // Registered before the clock is read: a renewal confirmed meanwhile opens the
            // fence at once, not a step later.
            let renewal = clock.next_renewal();
            if !serve_within(&admin, &node) {
                break;
            }
            if late == fence.serving() {
                late = !late;
                if late {
                    warn!(
                        "fenced: the registration's renewal is late (the store answers slowly); \
                         not serving until it is renewed"
                    );
                } else {
                    info!("the registration was renewed; serving again");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(FENCE_STEP) => {}
                () = renewal => {}
                _ = &mut stop => return Some(node),
            }
        }
        fence.close();
        warn!(
            "fenced: this proxy's registration in the store lapsed (the store was out of reach \
             for longer than its lease); not serving until it is registered again"
        );
        node.release();
        node = tokio::select! {
            n = register_again(&admin, &*store, &paths, &key, &holder, &offline) => n,
            // Dropping the half-done registration releases whatever it created.
            _ = &mut stop => return None,
        };
        if serve_within(&admin, &node) {
            info!("registered again with a fresh table; serving");
        }
    }
}

/// A fenced proxy's way back: registers again, waits while it is marked offline, then
/// reloads its table from the store (in that order, as at start), retrying each every
/// [`RETRY`].
///
/// The dashboard marks a proxy offline before it revokes its registration, and skips it in
/// pushes only once it has surely fenced itself; so the mark is read after the new
/// registration exists, and while it is there the proxy stays fenced (registered, so that
/// `online` can find it and push it the table before lifting the mark).
async fn register_again(
    admin: &ProxyAdmin,
    store: &dyn tessera_store::Store,
    paths: &model::Paths,
    key: &str,
    holder: &Holder,
    offline: &str,
) -> tessera_store::Ephemeral {
    let node = loop {
        match store.create_ephemeral(key, holder, PROXY_NODE_TTL).await {
            Ok(n) => break n,
            Err(e) => warn!(error = %e, "fenced: registering again failed; retrying"),
        }
        tokio::time::sleep(RETRY).await;
    };
    let mut told = false;
    loop {
        match store.get(offline).await {
            Ok(None) => break,
            Ok(Some(_)) if !told => {
                told = true;
                warn!(
                    "fenced: this proxy is marked offline; not serving until it is put back online"
                );
            }
            Ok(Some(_)) => {}
            Err(e) => {
                warn!(error = %e, "fenced: reading whether this proxy is marked offline failed; retrying")
            }
        }
        tokio::time::sleep(RETRY).await;
    }
    if told {
        info!("this proxy was put back online");
    }
    loop {
        match stored_topology(store, paths).await {
            Ok(topo) => {
                let epoch = topo.epoch;
                match admin.apply(topo, false).await {
                    Ok(_) => info!(epoch, "slot table reloaded from the store"),
                    Err(e) => info!(reason = %e, "kept the newer table pushed meanwhile"),
                }
                return node;
            }
            Err(e) => warn!(error = %e, "fenced: reloading the slot table failed; retrying"),
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Loads the cluster's users table before any client is accepted. A document that cannot
/// be read as a table fails closed (no one can AUTH) until the dashboard pushes a good one:
/// hostile or broken store contents must neither stop the proxy nor open it.
///
/// # Errors
/// The store cannot be read at all.
async fn load_users(
    admin: &ProxyAdmin,
    store: &dyn tessera_store::Store,
    paths: &model::Paths,
) -> anyhow::Result<()> {
    let key = paths.users();
    let Some(raw) = store.get(&key).await.context("reading the users table")? else {
        return Ok(()); // no table yet: proxy.toml's default user (session_password)
    };
    let doc: tessera_model::users::UsersDoc = match serde_json::from_slice(&raw.value) {
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
