//! The console's OpenAPI document (`tessera openapi --api console`,
//! `docs/openapi-console.json`): its own routes, and every dashboard route it relays, rooted
//! at `/api/clusters/{cluster}/…` with the dashboard's shapes, so the web app (whose only
//! backend is the console) has one document for everything it calls. The role each relayed
//! call needs comes from the same table the relay enforces (`tessera_http::access`).

use utoipa::PartialSchema;
use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityScheme};
use utoipa::openapi::{OpenApi, Required};

use tessera_http::openapi::{Access, apply_roles, error_response, finish, frame, operations};

/// The name of the session-cookie scheme in the document.
const SESSION: &str = "sessionCookie";

/// Where relayed paths start.
const RELAYED: &str = "/api/clusters/{cluster}/";

const DESCRIPTION: &str = "The federation console's API, served by `tessera console`: login and \
the session, the clusters of its stores, their audit logs merged, its login log, and every \
dashboard route of each cluster, relayed as `/api/clusters/{cluster}/…` to that cluster's \
dashboard with the console's token for it. Every route but `/health` and `/auth/login` needs \
the session cookie (an address that presents 20 unknown ones in a row is answered 429 \
`too_many_requests` for a while), and a change also the session's CSRF token in `X-CSRF-Token` (403 `csrf` \
otherwise). A relayed call needs the role its dashboard route needs (`x-tessera-role`, checked \
against the console user's role); its answer is the dashboard's, except that a dashboard's 401 \
becomes a 403 `cluster_token` (a 401 from the console means: log in again) and an answer that \
is not JSON becomes a 502 `bad_gateway`. Every failure is `{\"error\": {\"code\", \
\"message\"}}`.";

const TAGS: &[(&str, &str)] = &[
    ("session", "Login, logout and the session."),
    (
        "console",
        "The clusters and stores the console finds, merged logs.",
    ),
    (
        "cluster",
        "Relayed: the cluster at a glance and its traffic.",
    ),
    (
        "groups",
        "Relayed: replica groups, their servers and promotions.",
    ),
    (
        "slots",
        "Relayed: slots, their owners, per-slot load and hot keys.",
    ),
    (
        "proxies",
        "Relayed: registered proxies and their command logs.",
    ),
    (
        "migrations",
        "Relayed: slots moving online, aborts and rebalances.",
    ),
    (
        "failover",
        "Relayed: automatic failover and where reads go.",
    ),
    ("routes", "Relayed: key prefixes routed to other clusters."),
    ("mirror", "Relayed: mirroring to a shadow target."),
    ("plugins", "Relayed: the cluster's WebAssembly plugins."),
    (
        "users",
        "Relayed: the users clients AUTH to the proxies as.",
    ),
    ("tokens", "Relayed: the dashboard's API tokens."),
    ("audit", "Relayed: the cluster's log of every change."),
    (
        "backups",
        "Relayed: whole-cluster backups and their progress.",
    ),
    ("meta", "Relayed: the dashboard's own API description."),
];

/// The relay's 403s.
const RELAY_FORBIDDEN: &str = "The console user's role is below the one this operation needs \
(`forbidden`), the change lacks its CSRF token (`csrf`), or the dashboard refused the \
console's token for the cluster (`cluster_token`).";

/// How the console's session refuses a call.
const ACCESS: Access<'static> = Access {
    scheme: SESSION,
    unauthorized: "Not logged in, or the session expired (`unauthorized`): POST /auth/login.",
    forbidden: "The console user's role is below the one this operation needs (`forbidden`).",
    throttled: "This address presented 20 unknown session ids in a row (then one a second earns \
                one more try): `too_many_requests`, with `Retry-After`, before any session is \
                looked up.",
    everywhere: true,
};

/// The document: the console's routes and `dashboard`'s relayed ones (the dashboard's own
/// document, `tessera_control::api::document`, passed in: the console does not depend on
/// the control plane).
pub fn document(dashboard: &OpenApi) -> OpenApi {
    let mut doc = frame("Tessera console API", DESCRIPTION, TAGS);
    let (_, public) = super::public().split_for_parts();
    let (_, private) = super::private().split_for_parts();
    let mut private = private;
    for item in private.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            op.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
                SESSION,
                Vec::<String>::new(),
            )]);
            let r = &mut op.responses.responses;
            r.insert("401".into(), error_response(ACCESS.unauthorized));
            r.insert("429".into(), error_response(ACCESS.throttled));
        }
    }
    doc.merge(public);
    doc.merge(private);
    doc.merge(relayed(dashboard));
    apply_roles(&mut doc, &ACCESS, |path| {
        path.strip_prefix(RELAYED)
            .map(|rest| format!("/api/{rest}"))
    });
    // A relayed call may be refused for more than its role, whatever the role.
    for (path, item) in doc.paths.paths.iter_mut() {
        if path.starts_with(RELAYED) {
            for (_, op) in operations(item) {
                op.responses
                    .responses
                    .insert("403".into(), error_response(RELAY_FORBIDDEN));
            }
        }
    }
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        SESSION,
        SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
            crate::auth::COOKIE,
            "The session cookie `POST /auth/login` sets (HttpOnly, SameSite=Strict).",
        ))),
    );
    finish(&mut doc);
    doc
}

/// The dashboard's `/api/…` routes rooted at `/api/clusters/{cluster}/…`, each with the
/// `cluster` parameter and the relay's own refusals; their schemas come along.
fn relayed(dashboard: &OpenApi) -> OpenApi {
    let mut out = dashboard.clone();
    out.info = Default::default();
    out.tags = None;
    out.paths.paths = std::mem::take(&mut out.paths.paths)
        .into_iter()
        .filter_map(|(path, mut item)| {
            let rest = path.strip_prefix("/api/")?;
            for (_, op) in operations(&mut item) {
                let cluster = ParameterBuilder::new()
                    .name("cluster")
                    .parameter_in(ParameterIn::Path)
                    .required(Required::True)
                    .description(Some("The cluster's name, as `GET /api/clusters` lists it."))
                    .schema(Some(<String as PartialSchema>::schema()))
                    .build();
                op.parameters
                    .get_or_insert_with(Vec::new)
                    .insert(0, cluster.into());
                // The relay checks the role itself, then presents its own token.
                op.security = None;
                op.extensions = None;
                let r = &mut op.responses.responses;
                r.entry("404".into()).or_insert_with(|| {
                    error_response("No cluster of that name in the console's stores.")
                });
                r.insert(
                    "502".into(),
                    error_response(
                        "The cluster's dashboard is unreachable or answered no JSON \
                         (`bad_gateway`), or, for a change, some proxies did not acknowledge \
                         it (`push_incomplete`).",
                    ),
                );
                r.entry("503".into()).or_insert_with(|| {
                    error_response("The cluster has no dashboard (or its store is down).")
                });
            }
            Some((format!("{RELAYED}{rest}"), item))
        })
        .collect();
    out.components
        .get_or_insert_with(Default::default)
        .security_schemes
        .clear();
    out
}
