//! A plugin's canary: a candidate version (a module uploaded beside the stable one, and/or a
//! config, fail policy, limits) that a share of the proxies runs first, then promoted (it
//! becomes the plugin) or rolled back (cleared). Each change is checked like any catalog
//! change (the candidate's `init` runs with its config in a probe instance), persisted, and
//! pushed to every online proxy with the barrier; each proxy picks its version from the
//! catalog (`tessera_wire::plugin_canary`).

use tracing::info;

use super::Dashboard;
use super::plugins::{check_name, checked_module, entry_mut};
use crate::Error;
use tessera_model::secret::sha256_hex;
use tessera_store::catalog;
use tessera_store::model;
use tessera_wire::plugin_canary::{CanaryStart, PluginCanary};
use tessera_wire::plugins::{Catalog, PluginEntry};

fn no_canary(name: &str) -> Error {
    Error::conflict(format!(
        "plugin {name} has no canary: start one with POST /api/plugins/{name}/canary"
    ))
}

/// The canary as it stands, or one that starts from the stable version on no proxy.
fn canary_or_stable(e: &PluginEntry) -> PluginCanary {
    e.canary.clone().unwrap_or_else(|| PluginCanary {
        sha256: e.sha256.clone(),
        size: e.size,
        config: e.config.clone(),
        fail: e.fail.clone(),
        cpu_budget_ms: e.cpu_budget_ms,
        memory_mb: e.memory_mb,
        max_input_kb: e.max_input_kb,
        percent: 0,
        proxies: Vec::new(),
        started_unix: model::now_unix(),
    })
}

impl Dashboard {
    /// Stores a candidate module for `name`'s canary: it replaces the running canary's module
    /// (its share and config kept), or starts a canary with the stable version's settings on
    /// no proxy yet (`start_canary` then gives it a share). The stable version is unchanged.
    ///
    /// # Errors
    /// 404 unknown plugin, 400 a module that is not a plugin or refuses the config.
    pub async fn upload_canary_module(
        &self,
        name: &str,
        wasm: Vec<u8>,
    ) -> Result<PluginEntry, Error> {
        check_name(name)?;
        let wasm = checked_module(wasm).await?;
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let e = entry_mut(&mut cat, name)?;
        let mut canary = canary_or_stable(e);
        let replaced = canary.sha256.clone();
        canary.sha256 = sha256_hex(wasm.as_slice());
        canary.size = wasm.len() as u64;
        // Probed before the module is stored: a refused upload leaves nothing behind.
        self.probe(&e.as_candidate(&canary), wasm.clone()).await?;
        catalog::put_blob(&*self.store, &self.paths, &wasm)
            .await
            .map_err(Error::CatalogUnavailable)?;
        e.canary = Some(canary);
        let out = e.clone();
        let cat = self.save_catalog(cat).await?;
        self.drop_unused_blob(&cat, &replaced).await;
        info!(plugin = name, sha256 = %out.canary.as_ref().map_or("", |c| c.sha256.as_str()), "plugin canary module uploaded");
        Ok(out)
    }

    /// Starts `name`'s canary, or changes the running one: its candidate config, fail policy
    /// and limits, and its share of proxies.
    ///
    /// # Errors
    /// 404 unknown plugin, 400 a share out of bounds, a bad fail policy, or a candidate the
    /// plugin's `init` refuses.
    pub async fn start_canary(&self, name: &str, start: CanaryStart) -> Result<PluginEntry, Error> {
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let e = entry_mut(&mut cat, name)?;
        let mut canary = canary_or_stable(e);
        if let Some(c) = start.config {
            canary.config = c;
        }
        if let Some(f) = start.fail {
            if tessera_wasm::FailPolicy::parse(&f).is_none() {
                return Err(Error::invalid(format!(
                    "fail must be \"open\" or \"closed\", not {f:?}"
                )));
            }
            canary.fail = f;
        }
        if start.cpu_budget_ms.is_some() {
            canary.cpu_budget_ms = start.cpu_budget_ms;
        }
        if start.memory_mb.is_some() {
            canary.memory_mb = start.memory_mb;
        }
        if start.max_input_kb.is_some() {
            canary.max_input_kb = start.max_input_kb;
        }
        let percent = start.percent.unwrap_or(u32::from(canary.percent));
        let proxies = start.proxies.unwrap_or(canary.proxies);
        PluginCanary::check_share(percent, &proxies).map_err(Error::invalid)?;
        canary.percent = u8::try_from(percent).unwrap_or(100);
        canary.proxies = proxies;
        self.probe_stored(&e.as_candidate(&canary)).await?;
        e.canary = Some(canary);
        let out = e.clone();
        self.save_catalog(cat).await?;
        let c = out.canary.as_ref();
        info!(
            plugin = name,
            percent = c.map_or(0, |c| c.percent),
            proxies = ?c.map(|c| &c.proxies),
            "plugin canary started"
        );
        Ok(out)
    }

    /// Makes `name`'s canary its version on every proxy and clears the canary.
    ///
    /// # Errors
    /// 404 unknown plugin, 409 no canary, 400 the candidate no longer loads.
    pub async fn promote_canary(&self, name: &str) -> Result<PluginEntry, Error> {
        let _ops = self.ops.lock().await;
        let mut cat = self.plugins().await?;
        let e = entry_mut(&mut cat, name)?;
        let canary = e.canary.take().ok_or_else(|| no_canary(name))?;
        let old = e.sha256.clone();
        let mut next = e.as_candidate(&canary);
        next.updated_unix = model::now_unix();
        if next.enabled {
            self.probe_stored(&next).await?;
        }
        *e = next.clone();
        let cat = self.save_catalog(cat).await?;
        self.drop_unused_blob(&cat, &old).await;
        info!(plugin = name, sha256 = %next.sha256, "plugin canary promoted");
        Ok(next)
    }

    /// Clears `name`'s canary: every proxy runs the stable version again.
    ///
    /// # Errors
    /// 404 unknown plugin, 409 no canary.
    pub async fn rollback_canary(&self, name: &str) -> Result<PluginEntry, Error> {
        let _ops = self.ops.lock().await;
        let mut cat: Catalog = self.plugins().await?;
        let e = entry_mut(&mut cat, name)?;
        let canary = e.canary.take().ok_or_else(|| no_canary(name))?;
        let out = e.clone();
        let cat = self.save_catalog(cat).await?;
        self.drop_unused_blob(&cat, &canary.sha256).await;
        info!(plugin = name, "plugin canary rolled back");
        Ok(out)
    }
}
