//! The frame of the dashboard's OpenAPI document (its description, tags and security), and
//! its completion once the routes have filled it: the role each operation needs, from the
//! one table the API enforces (`tessera_http::access`). `tessera openapi` prints the result;
//! `docs/openapi.json` is that output, and a test fails when it is out of date.

use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

use tessera_http::openapi::{Access, apply_roles, frame};

/// The name of the bearer-token scheme in the document.
pub const BEARER: &str = "bearerAuth";

const DESCRIPTION: &str = "One cluster's control-plane API, served by `tessera dashboard`. \
JSON in and out. Every route but `/health`, `/metrics` and `/api/openapi.json` needs \
`Authorization: Bearer <token>`, a token of the cluster whose role allows the call: `viewer` \
reads, `operator` also migrates, rebalances and manages plugins, `admin` does everything (each \
operation's `x-tessera-role` names the role it needs). No token, or a wrong or revoked one, is \
a 401 (audited, at most one entry per 10 s counting the refusals since the last); after 20 wrong \
or revoked tokens in a row from one address (then one a second), that address is answered 429 \
`too_many_requests` with `Retry-After` before any token is checked; a role too low a 403 \
`forbidden` naming the token, its role and the role needed. Every \
failure is `{\"error\": {\"code\", \"message\"}}`. A JSON body is at most 2 MB, a plugin \
module at most 8 MiB (413 `too_large`). Every routing change is persisted, the \
topology epoch incremented, and the topology pushed to every online proxy; the call returns \
once all have acknowledged, or fails with 502 `push_incomplete` naming those that did not.";

const TAGS: &[(&str, &str)] = &[
    (
        "meta",
        "Liveness, metrics and this document: open to anyone.",
    ),
    ("cluster", "The cluster at a glance and its traffic."),
    ("groups", "Replica groups, their servers and promotions."),
    (
        "slots",
        "The 1024 slots, their owners, per-slot load and hot keys.",
    ),
    (
        "proxies",
        "Registered proxies: their state and command logs.",
    ),
    (
        "migrations",
        "Slots moving online, their speed cap, aborts and rebalances.",
    ),
    (
        "failover",
        "Automatic failover and where reads go (docs/failover.md, docs/replica-reads.md).",
    ),
    (
        "routes",
        "Key prefixes routed to other clusters (docs/prefix-routes.md).",
    ),
    (
        "mirror",
        "Mirroring commands to a shadow target (docs/mirroring.md).",
    ),
    (
        "plugins",
        "The cluster's WebAssembly plugins (docs/plugins.md).",
    ),
    (
        "users",
        "The users clients AUTH to the proxies as (docs/users.md).",
    ),
    ("tokens", "API tokens and their roles."),
    ("audit", "The log of every change."),
    (
        "backups",
        "Whole-cluster backups taken by the dashboard (docs/backup.md).",
    ),
];

/// The document before the routes fill it.
pub fn base() -> OpenApi {
    let mut doc = frame("Tessera dashboard API", DESCRIPTION, TAGS);
    let scheme = Http::builder()
        .scheme(HttpAuthScheme::Bearer)
        .description(Some(
            "An API token of the cluster: the token named `admin`, printed once when its first \
             dashboard starts (or given with `--admin-token`), or one made with \
             `POST /api/tokens` (`tessera admin token create`).",
        ))
        .build();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(BEARER, SecurityScheme::Http(scheme));
    doc
}

/// The roles, their refusals and the error envelope, once the routes have filled `doc`.
pub fn finish(mut doc: OpenApi) -> OpenApi {
    apply_roles(&mut doc, &ACCESS, |path| Some(path.to_owned()));
    tessera_http::openapi::finish(&mut doc);
    doc
}

/// How the dashboard's routes are refused.
pub const ACCESS: Access<'static> = Access {
    scheme: BEARER,
    unauthorized: "No token, or a wrong or revoked one (`unauthorized`).",
    forbidden: "The token's role is below the one this operation needs (`forbidden`); the \
                message names the token, its role and the role needed.",
    throttled: "This address sent 20 wrong or revoked tokens in a row (then one a second \
                earns one more try): `too_many_requests`, with `Retry-After`, before any token \
                is checked.",
    everywhere: false,
};
