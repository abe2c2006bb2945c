//! The single-page app from `web/dist`. Release builds embed the files (rust-embed), so the
//! binary alone serves the console; debug builds read them from `web/dist` at run time, so a
//! front-end rebuild shows without recompiling. Unknown paths get `index.html` (the app routes
//! in the browser); missing assets get a page saying how to build them.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{Html, IntoResponse, Response};

use tessera_http::error::ApiError;

#[derive(rust_embed::RustEmbed)]
#[folder = "../../web/dist"]
// Debug builds and tests run before the front end is built; the page below says what to do.
#[allow_missing = true]
struct Assets;

const NOT_BUILT: &str = "<!doctype html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tessera console</title></head>
<body style=\"font-family: sans-serif; max-width: 40em; margin: 4em auto\">
<h1>Tessera console</h1>
<p>The console's front end is not built. Build it (Node.js 20.19 or later):</p>
<pre>cd web &amp;&amp; npm ci &amp;&amp; npm run build</pre>
<p>A debug build serves it at once; a release build embeds it when built again
(<code>cargo build --release -p tessera</code>).</p>
<p>The API answers meanwhile: <code>POST /auth/login</code>, <code>GET /api/clusters</code>.</p>
</body></html>
";

/// Whether the front end is there (embedded, or on disk for a debug build).
pub(super) fn built() -> bool {
    Assets::get("index.html").is_some()
}

/// Fallback of the console's router: a file of the app, else `index.html`.
pub(super) async fn serve(method: Method, uri: Uri, headers: HeaderMap) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{method} {} is not a console route", uri.path()),
        )
        .into_response();
    }
    let path = uri.path().trim_start_matches('/');
    if let Some(r) = file(path, &headers) {
        return r;
    }
    // A missing script or style is a 404, not the app's HTML under a .js name.
    if path.starts_with("assets/") {
        return ApiError::not_found(format!("no asset {path}")).into_response();
    }
    file("index.html", &headers)
        .unwrap_or_else(|| (StatusCode::SERVICE_UNAVAILABLE, Html(NOT_BUILT)).into_response())
}

fn file(path: &str, headers: &HeaderMap) -> Option<Response> {
    let path = if path.is_empty() { "index.html" } else { path };
    let f = Assets::get(path)?;
    let etag = format!("\"{}\"", hex::encode(f.metadata.sha256_hash()));
    // Vite names every file under assets/ by its content hash: cache them forever. The HTML
    // that points at them must be revalidated.
    let cache = if path.starts_with("assets/") {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mut out = HeaderMap::new();
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    out.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex is a valid header"),
    );
    if headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == etag.as_bytes())
    {
        return Some((StatusCode::NOT_MODIFIED, out).into_response());
    }
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(f.metadata.mimetype())
            .unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    Some((out, f.data.into_owned()).into_response())
}
