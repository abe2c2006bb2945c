//! A cluster's plugin catalog as the store keeps it: one document with the plugins in chain
//! order (config, enabled, fail policy, limits, module hash), and the modules as
//! content-addressed blobs split into chunks small enough for etcd's request limit.
//!
//! ```text
//! /tessera/<cluster>/plugin/catalog            Catalog (JSON)
//! /tessera/<cluster>/blob/<sha256>/meta        {"size": N, "chunks": K}
//! /tessera/<cluster>/blob/<sha256>/chunk-0000  raw bytes, at most 512 KiB each
//! ```

use anyhow::{Context, bail};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use tessera_wire::plugins::{Catalog, MAX_MODULE};

use crate::Store;
use crate::model::{self, Paths};
use tessera_model::secret::sha256_hex;

/// Chunk size of stored modules (etcd refuses requests over 1.5 MiB by default).
pub const CHUNK: usize = 512 * 1024;
#[derive(Debug, Serialize, Deserialize)]
struct BlobMeta {
    size: u64,
    chunks: u32,
}

pub fn catalog_key(paths: &Paths) -> String {
    format!("{}catalog", paths.plugins_prefix())
}

fn blob_key(paths: &Paths, sha: &str, part: &str) -> String {
    format!("{}{sha}/{part}", paths.blob_prefix())
}

/// Reads the catalog (empty if there is none yet) and its store version.
///
/// # Errors
/// The store failed or the document is not a catalog.
pub async fn read(store: &dyn Store, paths: &Paths) -> anyhow::Result<(Catalog, u64)> {
    Ok(model::read::<Catalog>(store, &catalog_key(paths))
        .await?
        .unwrap_or_default())
}

/// Stores a module under its sha256 (chunks first, then the meta that makes it visible).
///
/// # Errors
/// Too big, or the store failed.
pub async fn put_blob(store: &dyn Store, paths: &Paths, wasm: &[u8]) -> anyhow::Result<String> {
    if wasm.len() > MAX_MODULE {
        bail!(
            "module of {} bytes is over the {} MiB limit",
            wasm.len(),
            MAX_MODULE >> 20
        );
    }
    let sha = sha256_hex(wasm);
    if store.get(&blob_key(paths, &sha, "meta")).await?.is_some() {
        return Ok(sha);
    }
    let chunks: Vec<&[u8]> = wasm.chunks(CHUNK).collect();
    for (i, c) in chunks.iter().enumerate() {
        store
            .put(
                &blob_key(paths, &sha, &format!("chunk-{i:04}")),
                Bytes::copy_from_slice(c),
            )
            .await?;
    }
    let meta = BlobMeta {
        size: wasm.len() as u64,
        chunks: chunks.len() as u32,
    };
    model::write(store, &blob_key(paths, &sha, "meta"), &meta).await?;
    Ok(sha)
}

/// Reads a module back and checks its hash.
///
/// # Errors
/// Missing, incomplete or corrupt.
pub async fn get_blob(store: &dyn Store, paths: &Paths, sha: &str) -> anyhow::Result<Vec<u8>> {
    let (meta, _) = model::read::<BlobMeta>(store, &blob_key(paths, sha, "meta"))
        .await?
        .with_context(|| format!("module {sha} is not in the store"))?;
    let mut out = Vec::with_capacity(meta.size as usize);
    for i in 0..meta.chunks {
        let v = store
            .get(&blob_key(paths, sha, &format!("chunk-{i:04}")))
            .await?
            .with_context(|| format!("module {sha}: chunk {i} is missing"))?;
        out.extend_from_slice(&v.value);
    }
    if sha256_hex(&out) != sha {
        bail!("module {sha}: stored bytes do not match their hash");
    }
    Ok(out)
}

/// Deletes a module's blob.
///
/// # Errors
/// The store failed.
pub async fn delete_blob(store: &dyn Store, paths: &Paths, sha: &str) -> anyhow::Result<()> {
    if let Some((meta, _)) = model::read::<BlobMeta>(store, &blob_key(paths, sha, "meta")).await? {
        store.delete(&blob_key(paths, sha, "meta")).await?;
        for i in 0..meta.chunks {
            store
                .delete(&blob_key(paths, sha, &format!("chunk-{i:04}")))
                .await?;
        }
    }
    Ok(())
}
