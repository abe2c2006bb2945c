//! Reading a dashboard's answer with a cap on its size: whatever answers at an address a store
//! names may send an endless body, and the console must not hold it.

use bytes::{Bytes, BytesMut};

/// Largest body relayed, either way: the largest request a dashboard accepts (a plugin
/// module, `catalog::MAX_MODULE`) and a little room. A larger one the dashboard would refuse
/// anyway, so the console does not hold it first (the limit is the dashboard's, named once).
pub(super) const MAX_BODY: usize = tessera_wire::plugins::MAX_MODULE + (64 << 10);
/// Largest overview or audit page the console fetches for its own pages.
pub(super) const MAX_PAGE: usize = 4 * 1024 * 1024;

/// The body of `resp`, or why not: a transport error, or more than `limit` bytes (said before
/// reading when the length is announced, else as soon as the body passes it).
pub(super) async fn body(mut resp: reqwest::Response, limit: usize) -> Result<Bytes, String> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(format!("an answer of more than {limit} bytes"));
    }
    let mut out = BytesMut::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if out.len() + chunk.len() > limit {
            return Err(format!("an answer of more than {limit} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out.freeze())
}

/// The body of `resp` as JSON, within `limit` bytes.
pub(super) async fn json<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
    limit: usize,
) -> Result<T, String> {
    let bytes = body(resp, limit).await?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}
