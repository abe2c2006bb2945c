//! What the OpenAPI documents of the three servers share (docs/api.md, "The schema"): the
//! error envelope as a response, and the role each dashboard route needs written into its
//! operations (`x-tessera-role`, its security, its 401 and 403) from [`access::required`],
//! the table the dashboard and the console enforce, so the document cannot disagree with
//! them. Each server derives its own document from its handlers; this only completes it.

use axum::http::Method;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::server::ServerBuilder;
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, LicenseBuilder, OpenApi, OpenApiBuilder, RefOr, Response,
    ResponseBuilder,
};
use utoipa::{PartialSchema, ToSchema};

use crate::access;
use tessera_wire::access::Role;
use tessera_wire::error::ErrorBody;

/// The extension naming the role an operation needs.
pub const ROLE_EXTENSION: &str = "x-tessera-role";

/// A document's frame, before the routes fill it: its title, its description (the API's
/// rules that hold for every route), Tessera's version and license, and its tags (name and
/// what the routes under it concern), in the order a reader should meet them.
pub fn frame(title: &str, description: &str, tags: &[(&str, &str)]) -> OpenApi {
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title(title)
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(description))
                .license(Some(
                    LicenseBuilder::new()
                        .name("Apache-2.0")
                        .identifier(Some("Apache-2.0"))
                        .build(),
                )),
        )
        // Relative: whichever address the server listens on, the one the document came from.
        .servers(Some([ServerBuilder::new()
            .url("/")
            .description(Some(
                "The server this document describes, where it listens.",
            ))
            .build()]))
        .tags(Some(tags.iter().map(|(name, what)| {
            TagBuilder::new()
                .name(*name)
                .description(Some(*what))
                .build()
        })))
        .build()
}

/// A failure answer: `description` and the error envelope.
pub fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(utoipa::openapi::Ref::from_schema_name(
                    ErrorBody::name(),
                )))
                .build(),
        )
        .into()
}

/// How the operations that need a role are authenticated, and what their refusals say.
pub struct Access<'a> {
    /// The security scheme (in the document's components) a caller presents.
    pub scheme: &'a str,
    /// The 401: no credential, or one that is not (or no longer) valid.
    pub unauthorized: &'a str,
    /// The 403: the caller's role is below the one the operation names.
    pub forbidden: &'a str,
    /// The 429: the caller's address presented too many refused credentials
    /// (`auth_throttle`), answered before any credential is checked.
    pub throttled: &'a str,
    /// Whether the routes the table leaves open need the credential too (the console's
    /// session guards every call it relays, the dashboard's open ones included).
    pub everywhere: bool,
}

/// Writes the role every operation of `doc` needs, as [`access::required`] says for the
/// dashboard route `route(path)` is (`None`: not a dashboard route, left alone): the
/// `x-tessera-role` extension, the security requirement (none for an open route) and the
/// refusals that follow (401, 429, and 403 for a role above viewer).
pub fn apply_roles(doc: &mut OpenApi, access: &Access<'_>, route: impl Fn(&str) -> Option<String>) {
    for (path, item) in doc.paths.paths.iter_mut() {
        let Some(route) = route(path) else { continue };
        for (method, op) in operations(item) {
            let role = access::required(&method, &route);
            if role.is_none() && !access.everywhere {
                op.security = Some(vec![SecurityRequirement::default()]);
                continue;
            }
            op.security = Some(vec![SecurityRequirement::new(
                access.scheme,
                Vec::<String>::new(),
            )]);
            let responses = &mut op.responses.responses;
            responses.insert("401".into(), error_response(access.unauthorized));
            responses.insert("429".into(), error_response(access.throttled));
            if let Some(role) = role {
                if role > Role::Viewer {
                    responses.insert("403".into(), error_response(access.forbidden));
                }
                op.extensions
                    .get_or_insert_with(Default::default)
                    .insert(ROLE_EXTENSION.into(), role.as_str().into());
            }
        }
    }
}

/// Completes a document every server serves: [`ErrorBody`] (and what it names) among the
/// schemas, and on every operation a `default` answer, the error envelope of a failure the
/// operation does not list (a 500 `internal`, a 413 for a body over the limit, …).
pub fn finish(doc: &mut OpenApi) {
    for item in doc.paths.paths.values_mut() {
        for (_, op) in operations(item) {
            op.responses
                .responses
                .entry("default".into())
                .or_insert_with(|| error_response("Any other failure."));
        }
    }
    let components = doc.components.get_or_insert_with(Default::default);
    components
        .schemas
        .insert(ErrorBody::name().into_owned(), ErrorBody::schema());
    let mut named = Vec::new();
    ErrorBody::schemas(&mut named);
    components.schemas.extend(named);
}

/// Every operation of a path item, with its method.
pub fn operations(item: &mut PathItem) -> impl Iterator<Item = (Method, &mut Operation)> {
    [
        (Method::GET, item.get.as_mut()),
        (Method::PUT, item.put.as_mut()),
        (Method::POST, item.post.as_mut()),
        (Method::DELETE, item.delete.as_mut()),
        (Method::OPTIONS, item.options.as_mut()),
        (Method::HEAD, item.head.as_mut()),
        (Method::PATCH, item.patch.as_mut()),
        (Method::TRACE, item.trace.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
}

/// The document as the servers serve it and `tessera openapi` prints it: pretty JSON with a
/// final newline (the committed copies are byte for byte this).
pub fn to_json(doc: &OpenApi) -> String {
    let mut text = serde_json::to_string_pretty(doc).expect("an OpenAPI document serializes");
    text.push('\n');
    text
}
