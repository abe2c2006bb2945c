//! A proxy's side of the plugin catalog: the enabled plugins as runtime specs (each plugin's
//! canary version where its canary selects this proxy), with a cache of modules by hash so
//! that a config change does not fetch the module again. The catalog's
//! shape is `tessera_wire::plugins`; reading and writing it, `tessera_store::catalog`.

use std::sync::Arc;

use tessera_store::Store;
use tessera_store::catalog::get_blob;
use tessera_store::model::Paths;
use tessera_wasm::PluginSpec;
use tessera_wire::plugins::Catalog;

/// A proxy's cache of modules by hash (a reload of a config does not fetch the module again).
/// Holds the modules of the last catalog applied and those fetched since ([`BlobCache::keep`]
/// drops the others once a catalog is in force), so it does not grow with every upload.
#[derive(Default)]
pub struct BlobCache(std::sync::Mutex<rustc_hash::FxHashMap<String, Arc<Vec<u8>>>>);

impl BlobCache {
    /// Keeps only the modules `catalog` enables (stable or canary versions).
    pub fn keep(&self, catalog: &Catalog) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|sha, _| {
                catalog.plugins.iter().any(|e| {
                    e.enabled
                        && (e.sha256 == *sha || e.canary.as_ref().is_some_and(|c| c.sha256 == *sha))
                })
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

    /// The enabled plugins of `catalog`, in order, as runtime specs, each in the version the
    /// proxy whose client address is `addr` runs; and the names of those it runs as canary.
    ///
    /// # Errors
    /// A module cannot be read from the store.
    pub async fn specs(
        &self,
        store: &dyn Store,
        paths: &Paths,
        catalog: &Catalog,
        addr: &str,
    ) -> anyhow::Result<(Vec<PluginSpec>, Vec<String>)> {
        let mut specs = Vec::new();
        let mut canaries = Vec::new();
        for e in catalog.plugins.iter().filter(|e| e.enabled) {
            let (e, track) = e.for_proxy(addr);
            if track == tessera_wire::plugin_canary::CANARY {
                canaries.push(e.name.clone());
            }
            let e = &e;
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
            specs.push(PluginSpec::from_entry(e, wasm)?);
        }
        Ok((specs, canaries))
    }
}
