//! The cluster's routes: the overview and traffic stats, groups and their servers, slots and
//! their assignment, proxies and their state. HTTP to `Dashboard` and back; the views are
//! `dashboard::views`, the stats `dashboard::stats`.
//!
//! ```text
//! GET    /api/overview                     GET /api/stats
//! GET    /api/groups                       POST /api/groups {"id"?, "tls"?}
//! DELETE /api/groups/{id}                  POST /api/groups/{id}/servers {"addr", …}
//! DELETE /api/groups/{id}/servers/{addr}   POST /api/groups/{id}/promote {"addr"}
//! GET    /api/slots                        POST /api/slots/assign {"from", "to", "group"}
//! GET    /api/proxies                      POST /api/proxies/{token}/online|offline
//! ```

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, body::Bytes};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::Body;
use crate::dashboard::Dashboard;
use tessera_http::error::{ApiError, optional_json};
use tessera_model::redis_client::Credential;
use tessera_model::router::GroupId;
use tessera_wire::Empty;
use tessera_wire::cluster::{
    AddServer, AssignSlots, Assigned, CreateGroup, GroupView, Overview, Promote, ProxyView,
    SlotView, Stats,
};
use tessera_wire::error::ErrorBody;

pub(super) fn routes() -> OpenApiRouter<Arc<Dashboard>> {
    OpenApiRouter::new()
        .routes(routes!(overview))
        .routes(routes!(stats))
        .routes(routes!(groups, create_group))
        .routes(routes!(delete_group))
        .routes(routes!(add_server))
        .routes(routes!(remove_server))
        .routes(routes!(promote))
        .routes(routes!(slots))
        .routes(routes!(assign_slots))
        .routes(routes!(proxies))
        .routes(routes!(proxy_online))
        .routes(routes!(proxy_offline))
        .routes(routes!(remove_proxy))
}

fn parse_group(id: &str) -> Result<GroupId, ApiError> {
    id.parse::<u32>()
        .map(GroupId)
        .map_err(|_| ApiError::bad_request(format!("group id {id:?} is not a number")))
}

/// Cluster summary
///
/// Counts, the topology epoch, the dashboard itself and traffic summed over the proxies. The
/// proxies' stats in it are fetched at most once a second (one fetch shared by concurrent
/// calls), so they may be up to a second old.
#[utoipa::path(
    get,
    path = "/api/overview",
    tag = "cluster",
    operation_id = "getOverview",
    responses(
        (status = 200, description = "The overview.", body = Overview),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn overview(State(d): State<Arc<Dashboard>>) -> Result<Json<Overview>, ApiError> {
    Ok(Json(d.overview().await?))
}

/// Traffic statistics
///
/// Every registered proxy's stats (1 s limit each) and their sums; a proxy that did not
/// answer appears as `{token, error}`. The answer is kept for a second and shared: calls
/// meanwhile, and calls arriving while one fetch is under way, get the same stats, so
/// polling costs the proxies one call a second however many clients poll.
#[utoipa::path(
    get,
    path = "/api/stats",
    tag = "cluster",
    operation_id = "getStats",
    responses(
        (status = 200, description = "Totals, per command and per proxy.", body = Stats),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn stats(State(d): State<Arc<Dashboard>>) -> Result<Json<Stats>, ApiError> {
    Ok(Json(d.stats().await?))
}

/// List groups
#[utoipa::path(
    get,
    path = "/api/groups",
    tag = "groups",
    operation_id = "listGroups",
    responses((status = 200, description = "Every group with its servers' last health check.", body = Vec<GroupView>))
)]
async fn groups(State(d): State<Arc<Dashboard>>) -> Json<Vec<GroupView>> {
    Json(d.group_views())
}

/// Create a group
///
/// Creates an empty group; without `id`, the next free id is used. `tls`: its servers speak
/// TLS only (docs/tls.md).
#[utoipa::path(
    post,
    path = "/api/groups",
    tag = "groups",
    operation_id = "createGroup",
    request_body = Option<CreateGroup>,
    responses(
        (status = 201, description = "The new group.", body = GroupView),
        (status = 400, description = "A malformed body, or id 0.", body = ErrorBody),
        (status = 409, description = "The id is taken.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn create_group(State(d): State<Arc<Dashboard>>, body: Bytes) -> Result<Response, ApiError> {
    let b = optional_json::<CreateGroup>(&body)?.unwrap_or_default();
    let g = d.create_group(b.id, b.tls).await?;
    Ok((StatusCode::CREATED, Json(d.group_view(g.id)?)).into_response())
}

/// Delete a group
///
/// Only a group with no slots and no servers can be deleted (409 otherwise).
#[utoipa::path(
    delete,
    path = "/api/groups/{id}",
    tag = "groups",
    operation_id = "deleteGroup",
    params(("id" = u32, Path, description = "Group id.")),
    responses(
        (status = 200, description = "Deleted.", body = Empty),
        (status = 400, description = "The id is not a number.", body = ErrorBody),
        (status = 404, description = "No such group.", body = ErrorBody),
        (status = 409, description = "The group still has slots or servers.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn delete_group(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    d.delete_group(parse_group(&id)?).await?;
    Ok(Json(Empty {}))
}

/// Add a server
///
/// The first server of a group is its master; every later one is sent `REPLICAOF` the
/// master. First the dashboard's own Redis user (`tessera-admin`) is created there: a server
/// that refuses it is a 409 saying why. For a server with a password, `password` (and
/// `user`, default `default`) is a login that may create users, used once and never stored.
/// Routing changes are pushed to every online proxy before the call returns.
#[utoipa::path(
    post,
    path = "/api/groups/{id}/servers",
    tag = "groups",
    operation_id = "addServer",
    params(("id" = u32, Path, description = "Group id.")),
    request_body = AddServer,
    responses(
        (status = 200, description = "The group as it stands after the change.", body = GroupView),
        (status = 400, description = "A malformed body, or an address that is not host:port.", body = ErrorBody),
        (status = 404, description = "No such group.", body = ErrorBody),
        (status = 409, description = "The server is in a group already, unreachable, or refuses the control plane's user.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge the new topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn add_server(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    body: Body<AddServer>,
) -> Result<Json<GroupView>, ApiError> {
    let Json(b) = body?;
    let login = b.password.map(|password| Credential {
        user: b.user.unwrap_or_else(|| "default".into()),
        password,
    });
    let g = d
        .add_server(parse_group(&id)?, &b.addr, login.as_ref())
        .await?;
    Ok(Json(d.group_view(g.id)?))
}

/// Remove a server
///
/// 409 for the master of a group that still has slots and replicas (promote a replica
/// first).
#[utoipa::path(
    delete,
    path = "/api/groups/{id}/servers/{addr}",
    tag = "groups",
    operation_id = "removeServer",
    params(
        ("id" = u32, Path, description = "Group id."),
        ("addr" = String, Path, description = "Server address, host:port (percent-encode what a path segment cannot hold)."),
    ),
    responses(
        (status = 200, description = "The group as it stands after the change.", body = GroupView),
        (status = 400, description = "The id is not a number.", body = ErrorBody),
        (status = 404, description = "No such group, or the server is not in it.", body = ErrorBody),
        (status = 409, description = "The master of a group that still has slots and replicas.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge the new topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn remove_server(
    State(d): State<Arc<Dashboard>>,
    Path((id, addr)): Path<(String, String)>,
) -> Result<Json<GroupView>, ApiError> {
    let g = d.remove_server(parse_group(&id)?, &addr).await?;
    Ok(Json(d.group_view(g.id)?))
}

/// Promote a replica
///
/// `REPLICAOF NO ONE` on the replica, `REPLICAOF` it on the group's other servers (an
/// unreachable old master is told when it returns), then the new master is pushed to every
/// online proxy.
#[utoipa::path(
    post,
    path = "/api/groups/{id}/promote",
    tag = "groups",
    operation_id = "promoteServer",
    params(("id" = u32, Path, description = "Group id.")),
    request_body = Promote,
    responses(
        (status = 200, description = "The group as it stands after the change.", body = GroupView),
        (status = 400, description = "A malformed body or id.", body = ErrorBody),
        (status = 404, description = "No such group, or the server is not in it.", body = ErrorBody),
        (status = 409, description = "The server is the master already, or cannot be reached.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge the new topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn promote(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    body: Body<Promote>,
) -> Result<Json<GroupView>, ApiError> {
    let Json(b) = body?;
    let g = d.promote(parse_group(&id)?, &b.addr).await?;
    Ok(Json(d.group_view(g.id)?))
}

/// List slots
#[utoipa::path(
    get,
    path = "/api/slots",
    tag = "slots",
    operation_id = "listSlots",
    responses((status = 200, description = "All 1024 slots, by id.", body = Vec<SlotView>))
)]
async fn slots(State(d): State<Arc<Dashboard>>) -> Json<Vec<SlotView>> {
    Json(d.slot_views())
}

/// Assign slots to a group
///
/// Assigns the unassigned slots `from`..=`to` to `group`, increments the topology epoch and
/// pushes it to every online proxy. Moving a slot another group owns is a migration.
#[utoipa::path(
    post,
    path = "/api/slots/assign",
    tag = "slots",
    operation_id = "assignSlots",
    request_body = AssignSlots,
    responses(
        (status = 200, description = "Assigned and acknowledged by every online proxy.", body = Assigned),
        (status = 400, description = "A malformed body, or a range outside 0-1023.", body = ErrorBody),
        (status = 404, description = "No such group.", body = ErrorBody),
        (status = 409, description = "A slot of the range is owned by another group.", body = ErrorBody),
        (status = 502, description = "Saved, but some proxies did not acknowledge the new topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn assign_slots(
    State(d): State<Arc<Dashboard>>,
    body: Body<AssignSlots>,
) -> Result<Json<Assigned>, ApiError> {
    let Json(b) = body?;
    let (epoch, assigned) = d.assign_slots(b.from, b.to, GroupId(b.group)).await?;
    Ok(Json(Assigned { epoch, assigned }))
}

/// List proxies
#[utoipa::path(
    get,
    path = "/api/proxies",
    tag = "proxies",
    operation_id = "listProxies",
    responses(
        (status = 200, description = "Every registered proxy.", body = Vec<ProxyView>),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn proxies(State(d): State<Arc<Dashboard>>) -> Result<Json<Vec<ProxyView>>, ApiError> {
    Ok(Json(d.proxy_views().await?))
}

/// Remove a lost proxy
///
/// A proxy whose registration is gone or that does not answer stays listed (as `lost`) until
/// it comes back or is removed here.
#[utoipa::path(
    delete,
    path = "/api/proxies/{token}",
    tag = "proxies",
    operation_id = "removeProxy",
    params(("token" = String, Path, description = "The proxy's registration token.")),
    responses(
        (status = 200, description = "The proxy removed, as it was last known.", body = ProxyView),
        (status = 404, description = "No proxy is known by that token.", body = ErrorBody),
        (status = 409, description = "The proxy is registered and answers: only a lost proxy is removed.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn remove_proxy(
    State(d): State<Arc<Dashboard>>,
    Path(token): Path<String>,
) -> Result<Json<ProxyView>, ApiError> {
    let before = d
        .proxy_views()
        .await?
        .into_iter()
        .find(|p| p.token == token);
    let p = d.remove_proxy(&token).await?;
    Ok(Json(before.unwrap_or_else(|| {
        crate::dashboard::views::proxy_view(p, crate::dashboard::views::Seen::removed())
    })))
}

/// Put a proxy online
///
/// The proxy is included in topology pushes again; the current topology is pushed to it.
#[utoipa::path(
    post,
    path = "/api/proxies/{token}/online",
    tag = "proxies",
    operation_id = "proxyOnline",
    params(("token" = String, Path, description = "The proxy's registration token.")),
    responses(
        (status = 200, description = "The proxy.", body = ProxyView),
        (status = 404, description = "No registered proxy has that token.", body = ErrorBody),
        (status = 502, description = "The proxy did not take the topology.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn proxy_online(
    State(d): State<Arc<Dashboard>>,
    Path(token): Path<String>,
) -> Result<Json<ProxyView>, ApiError> {
    d.set_proxy_online(&token, true).await?;
    Ok(Json(d.proxy_view(&token).await?))
}

/// Take a proxy offline
///
/// The proxy is left out of topology pushes (and of their barrier), once it has surely
/// stopped routing: its registration is revoked, it fences itself and stays fenced while it is
/// marked offline, and its connections are closed on every server. The call takes about 10 s.
#[utoipa::path(
    post,
    path = "/api/proxies/{token}/offline",
    tag = "proxies",
    operation_id = "proxyOffline",
    params(("token" = String, Path, description = "The proxy's registration token.")),
    responses(
        (status = 200, description = "The proxy.", body = ProxyView),
        (status = 404, description = "No registered proxy has that token.", body = ErrorBody),
        (status = 503, description = "The store is unreachable.", body = ErrorBody),
    )
)]
async fn proxy_offline(
    State(d): State<Arc<Dashboard>>,
    Path(token): Path<String>,
) -> Result<Json<ProxyView>, ApiError> {
    d.set_proxy_online(&token, false).await?;
    Ok(Json(d.proxy_view(&token).await?))
}
