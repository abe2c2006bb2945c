//! A cluster's plugin catalog as the store keeps it: one document with the plugins in chain
//! order (config, enabled, fail policy, limits, module hash), and the modules as
//! content-addressed blobs split into chunks small enough for etcd's request limit.
//!
//! ```text
//! /tessera/<cluster>/plugin/catalog            Catalog (JSON)
//! /tessera/<cluster>/blob/<sha256>/meta        {"size": N, "chunks": K}
//! /tessera/<cluster>/blob/<sha256>/chunk-0000  raw bytes, at most 512 KiB each
//! ```

use std::sync::Arc;

use anyhow::{Context, bail};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tessera_wasm::{FailPolicy, PluginSpec};

use crate::coordinator::Store;
use crate::coordinator::model::{self, Paths};
use crate::secret::sha256_hex;

/// Chunk size of stored modules (etcd refuses requests over 1.5 MiB by default).
pub const CHUNK: usize = 512 * 1024;
/// The largest module the catalog accepts. The plugins shipped are 140–230 KiB; every byte
/// costs compile time on the dashboard (its check) and on each proxy at every push (about
/// 0.4 s of one core per MiB: a 28 MB module took 9–13 s), so the cap leaves ample room for
/// real plugins and keeps one compile to a few seconds.
pub const MAX_MODULE: usize = 8 << 20;
/// The most plugins a catalog may enable. Every proxy sizes its pool of plugin instances for
/// this many (`PluginHost`: one warm instance per plugin per worker thread, two during a
/// reload), so the dashboard refuses a catalog over it before persisting or pushing it, and a
/// proxy refuses one pushed anyway and keeps the plugins in force.
pub const MAX_ENABLED: usize = 16;
/// The most plugins a catalog holds, enabled or not: each is a module of up to
/// [`MAX_MODULE`] in the store, read back by every proxy that enables it.
pub const MAX_PLUGINS: usize = 64;
/// The largest catalog document (configs included): under etcd's request limit (1.5 MiB, the
/// document is one key) and the 2 MB a proxy's admin API accepts for a push, so a catalog the
/// dashboard saves is one every store keeps and every proxy takes.
pub const MAX_CATALOG_BYTES: usize = 1 << 20;

/// One plugin in a cluster's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginEntry {
    pub name: String,
    pub sha256: String,
    pub size: u64,
    /// The plugin's own configuration (JSON), handed to its `init`.
    pub config: serde_json::Value,
    pub enabled: bool,
    /// "closed" or "open".
    pub fail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<usize>,
    /// The most bytes of one command or observed reply copied into the plugin, KiB (default:
    /// a quarter of the memory limit); a larger one fails alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_kb: Option<usize>,
    pub updated_unix: u64,
}

/// The catalog document: plugins in chain order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub version: u64,
    pub plugins: Vec<PluginEntry>,
}

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

impl PluginEntry {
    /// The runtime spec of this entry with its module bytes.
    ///
    /// # Errors
    /// A bad fail policy.
    pub fn spec(&self, wasm: Arc<Vec<u8>>) -> anyhow::Result<PluginSpec> {
        let mut spec = PluginSpec::new(self.name.clone(), Vec::new(), Vec::new());
        spec.wasm = wasm;
        spec.config = serde_json::to_vec(&self.config)?;
        spec.fail = FailPolicy::parse(&self.fail).with_context(|| {
            format!("plugin {}: fail must be \"open\" or \"closed\"", self.name)
        })?;
        Ok(spec
            .with_limits(self.cpu_budget_ms, self.memory_mb)
            .with_input_limit(self.max_input_kb))
    }
}

/// A proxy's cache of modules by hash (a reload of a config does not fetch the module again).
/// Holds the modules of the last catalog applied and those fetched since ([`BlobCache::keep`]
/// drops the others once a catalog is in force), so it does not grow with every upload.
#[derive(Default)]
pub struct BlobCache(std::sync::Mutex<rustc_hash::FxHashMap<String, Arc<Vec<u8>>>>);

impl BlobCache {
    /// Keeps only the modules `catalog` enables.
    pub fn keep(&self, catalog: &Catalog) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|sha, _| {
                catalog
                    .plugins
                    .iter()
                    .any(|e| e.enabled && e.sha256 == *sha)
            });
    }

    /// Modules held now.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The enabled plugins of `catalog`, in order, as runtime specs.
    ///
    /// # Errors
    /// A module cannot be read from the store.
    pub async fn specs(
        &self,
        store: &dyn Store,
        paths: &Paths,
        catalog: &Catalog,
    ) -> anyhow::Result<Vec<PluginSpec>> {
        let mut specs = Vec::new();
        for e in catalog.plugins.iter().filter(|e| e.enabled) {
            let cached = self
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&e.sha256)
                .cloned();
            let wasm = match cached {
                Some(w) => w,
                None => {
                    let w = Arc::new(get_blob(store, paths, &e.sha256).await?);
                    self.0
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(e.sha256.clone(), w.clone());
                    w
                }
            };
            specs.push(e.spec(wasm)?);
        }
        Ok(specs)
    }
}
