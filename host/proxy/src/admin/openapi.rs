//! The admin API's OpenAPI document (`tessera openapi --api proxy`, `docs/openapi-proxy.json`):
//! its frame, the routes' operations, and the proxy secret every `/api/proxy/…` route needs
//! in cluster mode.

use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};

use tessera_http::openapi::{error_response, finish, frame, operations};

/// The name of the proxy-secret scheme in the document.
const SECRET: &str = "proxySecret";

const DESCRIPTION: &str = "A proxy's admin API, served on its `--admin-listen`: liveness, \
metrics and its own views for the dashboard, and the pushes (topology, plugins, users, mirror) \
a dashboard's barrier waits on. In cluster mode every `/api/proxy/…` route, reads included, \
needs `Authorization: Bearer <the cluster's proxy secret>` (401 otherwise; 429 for an \
address after 20 wrong ones in a row); `/health` and \
`/metrics` need nothing. A static proxy has no secret and its reads are open: bind its admin \
listener to an address only operators reach. Every failure is `{\"error\": {\"code\", \
\"message\"}}`.";

const TAGS: &[(&str, &str)] = &[
    ("meta", "Liveness and metrics: open to anyone."),
    ("proxy", "The proxy's own views and the dashboard's pushes."),
];

/// The document, derived from the routes.
pub fn document() -> OpenApi {
    let mut doc = frame("Tessera proxy admin API", DESCRIPTION, TAGS);
    let (_, mut open) = super::routes::open().split_for_parts();
    for item in open.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            op.security = Some(vec![SecurityRequirement::default()]);
        }
    }
    let (_, mut secret) = super::routes::secret().split_for_parts();
    for item in secret.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            op.security = Some(vec![SecurityRequirement::new(SECRET, Vec::<String>::new())]);
            let r = &mut op.responses.responses;
            r.insert(
                "401".into(),
                error_response("Cluster mode: no proxy secret, or a wrong one (`unauthorized`)."),
            );
            r.insert(
                "429".into(),
                error_response(
                    "Cluster mode: this address sent 20 wrong secrets in a row (then one a \
                     second earns one more try): `too_many_requests`, with `Retry-After`, \
                     before any secret is checked.",
                ),
            );
        }
    }
    doc.merge(open);
    doc.merge(secret);
    let scheme = Http::builder()
        .scheme(HttpAuthScheme::Bearer)
        .description(Some(
            "The cluster's proxy secret (`proxy_secret` in its meta document); the dashboard \
             sends it.",
        ))
        .build();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(SECRET, SecurityScheme::Http(scheme));
    finish(&mut doc);
    doc
}
