//! The cluster settings a backup's `store.json` holds that a restore applies to the new
//! cluster (docs/backup.md): users (password hashes), plugins (module, config, enabled),
//! prefix routes, the read policy and failover's settings, read whole and checked before
//! anything is applied. The file is hostile input: bounded by its entries, every document
//! parsed with no unknown field, every value checked against the limits the dashboard
//! enforces, every module reassembled from its chunks and checked against its SHA-256.
//!
//! The topology (groups, slots) is a record only: the new cluster has its own.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};

use tessera_model::router::prefix::check_bounds;
use tessera_model::users::{MAX_USERS, UserEntry, Users, UsersDoc};
use tessera_wire::backup::{STORE_FILE, StoreDocs, StoreEntry};
use tessera_wire::failover::FailoverSettings;
use tessera_wire::plugins::{
    Catalog, MAX_CATALOG_BYTES, MAX_ENABLED, MAX_MODULE, MAX_PLUGINS, PluginEntry,
    valid_plugin_name,
};
use tessera_wire::read_policy::ReadPolicy;
use tessera_wire::routes::PrefixRoute;

/// The most entries a `store.json` may hold: 1024 slots, the groups, and every module's
/// chunks (64 plugins of at most 8 MiB in 512 KiB chunks) fit well under it.
pub const MAX_ENTRIES: usize = 8192;
/// The most chunks one module may be stored in.
const MAX_CHUNKS: u64 = 1024;

/// One plugin to restore: its catalog entry (config, fail policy, limits, enabled) and its
/// module, whose SHA-256 is the entry's.
pub struct PluginToRestore {
    pub entry: PluginEntry,
    pub module: Vec<u8>,
}

/// What a restore applies, checked whole.
#[derive(Default)]
pub struct Settings {
    /// The users table's entries, as a valid table (hashes, never clear passwords).
    pub users: Vec<UserEntry>,
    /// The catalog's plugins in chain order.
    pub plugins: Vec<PluginToRestore>,
    /// Plugins whose canary (a candidate version on some proxies) is not restored.
    pub canaries_skipped: Vec<String>,
    pub routes: Vec<PrefixRoute>,
    /// `None`: the backup has no read policy document (the cluster's default).
    pub read_policy: Option<ReadPolicy>,
    /// `None`: no failover document (failover's defaults).
    pub failover: Option<FailoverSettings>,
}

impl Settings {
    /// Reads and checks every document of `store.json` a restore applies.
    ///
    /// # Errors
    /// What is wrong, naming the document (never a secret it holds).
    pub fn from_store(store: &StoreDocs) -> anyhow::Result<Settings> {
        if store.entries.len() > MAX_ENTRIES {
            bail!(
                "{STORE_FILE} holds {} entries, over the {MAX_ENTRIES} a backup writes at most",
                store.entries.len()
            );
        }
        let mut docs: BTreeMap<&str, &StoreEntry> = BTreeMap::new();
        for e in &store.entries {
            if !known_key(&e.key) {
                bail!(
                    "{STORE_FILE} holds an entry {:?} that no backup writes",
                    cut(&e.key)
                );
            }
            if docs.insert(&e.key, e).is_some() {
                bail!("{STORE_FILE} holds {:?} twice", cut(&e.key));
            }
        }
        let mut s = Settings::default();
        if let Some(e) = docs.get("users") {
            s.users = users(json_of(e)?)?;
        }
        if let Some(e) = docs.get("plugin/catalog") {
            let cat = catalog(json_of(e)?)?;
            for entry in cat.plugins {
                if entry.canary.is_some() {
                    s.canaries_skipped.push(entry.name.clone());
                }
                let module = module(&docs, &entry)?;
                s.plugins.push(PluginToRestore { entry, module });
            }
        }
        if let Some(e) = docs.get("routes") {
            s.routes = routes(json_of(e)?)?;
        }
        if let Some(e) = docs.get("read-policy") {
            let v = json_of(e)?;
            only_fields("read-policy", v, &["mode", "max_lag_ms"])?;
            let p: ReadPolicy = typed("read-policy", v)?;
            p.validate()
                .map_err(|e| anyhow::anyhow!("read-policy: {e}"))?;
            s.read_policy = Some(p);
        }
        if let Some(e) = docs.get("failover") {
            s.failover = Some(failover(json_of(e)?)?);
        }
        Ok(s)
    }
}

/// The keys a backup writes (`dashboard::backup_job`'s list): the documents applied, the
/// modules' blobs, and the topology kept as a record.
fn known_key(key: &str) -> bool {
    matches!(
        key,
        "topology" | "users" | "routes" | "read-policy" | "failover" | "plugin/catalog"
    ) || key.starts_with("group/")
        || key.starts_with("slots/")
        || key.starts_with("blob/")
}

/// A key as an error may show it: at most 80 characters.
fn cut(s: &str) -> String {
    s.chars().take(80).collect()
}

fn json_of(e: &StoreEntry) -> anyhow::Result<&Value> {
    e.json
        .as_ref()
        .with_context(|| format!("{STORE_FILE}: {} is not a JSON document", e.key))
}

/// `v` is an object whose fields are all among `known`.
fn only_fields(what: &str, v: &Value, known: &[&str]) -> anyhow::Result<()> {
    let obj = v
        .as_object()
        .with_context(|| format!("{what} is not a JSON object"))?;
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        bail!(
            "{what} has an unknown field {:?} (known: {})",
            cut(k),
            known.join(", ")
        );
    }
    Ok(())
}

fn typed<T: DeserializeOwned>(what: &str, v: &Value) -> anyhow::Result<T> {
    T::deserialize(v).with_context(|| format!("{what} is not a valid document"))
}

/// The users document: a table the proxies would compile (names, hashes, classes, prefixes,
/// no duplicate, a password hash for every named user).
fn users(v: &Value) -> anyhow::Result<Vec<UserEntry>> {
    only_fields("users", v, &["schema", "version", "users"])?;
    // Bounded before it is read into entries (each entry refuses unknown fields itself).
    let n = v["users"].as_array().map_or(0, Vec::len);
    if n > MAX_USERS {
        bail!("users holds {n} users, over the {MAX_USERS} a table may");
    }
    let doc: UsersDoc = typed("users", v)?;
    Users::from_document(&doc, None).map_err(|e| anyhow::anyhow!("users: {e}"))?;
    Ok(doc.users)
}

/// The plugin catalog, checked as the dashboard would keep it.
fn catalog(v: &Value) -> anyhow::Result<Catalog> {
    only_fields("plugin/catalog", v, &["version", "plugins"])?;
    let plugins = v["plugins"].as_array().map_or(&[][..], Vec::as_slice);
    if plugins.len() > MAX_PLUGINS {
        bail!(
            "plugin/catalog holds {} plugins, over the {MAX_PLUGINS} a catalog may",
            plugins.len()
        );
    }
    for p in plugins {
        only_fields(
            "a plugin of plugin/catalog",
            p,
            &[
                "name",
                "sha256",
                "size",
                "config",
                "enabled",
                "fail",
                "cpu_budget_ms",
                "memory_mb",
                "max_input_kb",
                "updated_unix",
                "canary",
            ],
        )?;
    }
    let cat: Catalog = typed("plugin/catalog", v)?;
    let bytes = serde_json::to_vec(&cat).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_CATALOG_BYTES {
        bail!("plugin/catalog is {bytes} bytes, over the {MAX_CATALOG_BYTES} a catalog may");
    }
    let mut names = BTreeSet::new();
    for e in &cat.plugins {
        if !valid_plugin_name(&e.name) {
            bail!(
                "plugin/catalog: {:?} is not a plugin name (letters, digits, '-' and '_', at most 64)",
                cut(&e.name)
            );
        }
        if !names.insert(e.name.as_str()) {
            bail!("plugin/catalog lists plugin {} twice", e.name);
        }
        if !is_sha256_hex(&e.sha256) {
            bail!("plugin {}: sha256 is not 64 hex characters", e.name);
        }
        if e.fail != "open" && e.fail != "closed" {
            bail!("plugin {}: fail must be open or closed", e.name);
        }
    }
    let enabled = cat.plugins.iter().filter(|e| e.enabled).count();
    if enabled > MAX_ENABLED {
        bail!("plugin/catalog enables {enabled} plugins, over the {MAX_ENABLED} a proxy runs");
    }
    Ok(cat)
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A plugin's module, put together from its blob's chunks and checked against its hash.
fn module(docs: &BTreeMap<&str, &StoreEntry>, e: &PluginEntry) -> anyhow::Result<Vec<u8>> {
    let sha = e.sha256.to_ascii_lowercase();
    let what = format!("plugin {}'s module (blob/{sha})", e.name);
    let meta = docs
        .get(format!("blob/{sha}/meta").as_str())
        .with_context(|| format!("{what} is not in {STORE_FILE}"))?;
    let meta = json_of(meta)?;
    only_fields(&format!("{what}: its meta"), meta, &["size", "chunks"])?;
    let (Some(size), Some(chunks)) = (meta["size"].as_u64(), meta["chunks"].as_u64()) else {
        bail!("{what}: its meta needs a size and a number of chunks");
    };
    if size > MAX_MODULE as u64 || size != e.size {
        bail!(
            "{what} is {size} bytes: the catalog says {}, a module is at most {MAX_MODULE}",
            e.size
        );
    }
    if chunks > MAX_CHUNKS {
        bail!("{what} is in {chunks} chunks, over {MAX_CHUNKS}");
    }
    let mut out = Vec::with_capacity(size as usize);
    for i in 0..chunks {
        let key = format!("blob/{sha}/chunk-{i:04}");
        let chunk = docs
            .get(key.as_str())
            .with_context(|| format!("{what}: chunk {i} is missing"))?;
        let bytes = match (&chunk.hex, &chunk.json) {
            (Some(h), None) => {
                if h.len() as u64 / 2 > size.saturating_sub(out.len() as u64) {
                    bail!("{what}: chunk {i} runs past the module's size");
                }
                hex::decode(h).with_context(|| format!("{what}: chunk {i} is not hex"))?
            }
            // A chunk whose bytes happen to be JSON was stored as JSON; its hash tells.
            (None, Some(j)) => serde_json::to_vec(j)?,
            _ => bail!("{what}: chunk {i} has no bytes"),
        };
        out.extend_from_slice(&bytes);
        if out.len() as u64 > size {
            bail!("{what}: its chunks run past its size");
        }
    }
    if out.len() as u64 != size {
        bail!("{what}: its chunks hold {} bytes of {size}", out.len());
    }
    if hex::encode(Sha256::digest(&out)) != sha {
        bail!("{what}: its bytes do not match its SHA-256");
    }
    Ok(out)
}

/// The prefix routes: within the tables' bounds.
fn routes(v: &Value) -> anyhow::Result<Vec<PrefixRoute>> {
    only_fields("routes", v, &["routes"])?;
    for r in v["routes"].as_array().map_or(&[][..], Vec::as_slice) {
        only_fields("a route of routes", r, &["prefix", "cluster", "credential"])?;
        if let Some(c) = r.get("credential").filter(|c| !c.is_null()) {
            only_fields("a route's credential", c, &["user", "password"])?;
        }
    }
    #[derive(serde::Deserialize)]
    struct RoutesDoc {
        routes: Vec<PrefixRoute>,
    }
    let doc: RoutesDoc = typed("routes", v)?;
    check_bounds(&doc.routes).map_err(|e| anyhow::anyhow!("routes: {e}"))?;
    Ok(doc.routes)
}

/// Failover's document: only its settings are applied (its pending promotion, servers to
/// rejoin and events are about the old cluster's servers).
fn failover(v: &Value) -> anyhow::Result<FailoverSettings> {
    only_fields(
        "failover",
        v,
        &["schema", "settings", "pending", "rejoin", "events"],
    )?;
    let settings = v
        .get("settings")
        .cloned()
        .unwrap_or(Value::Object(serde_json::Map::default()));
    only_fields(
        "failover's settings",
        &settings,
        &[
            "enabled",
            "max_lag_bytes",
            "quorum",
            "down_after_checks",
            "cooldown_secs",
        ],
    )?;
    let s: FailoverSettings = typed("failover's settings", &settings)?;
    s.validate()
        .map_err(|e| anyhow::anyhow!("failover's settings: {e}"))?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hash() -> String {
        tessera_model::users::hash_password("pw")
    }

    /// A store.json with a user, a plugin of two chunks, a route, a read policy and failover.
    fn good() -> (StoreDocs, Vec<u8>) {
        let module: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        let sha = hex::encode(Sha256::digest(&module));
        let entries = vec![
            json!({"key": "topology", "json": {"anything": 1}}),
            json!({"key": "users", "json": {"schema": 1, "version": 3, "users": [
                {"name": "alice", "password": hash(), "commands": ["read"], "key_prefix": "t:",
                 "enabled": true}]}}),
            json!({"key": "plugin/catalog", "json": {"version": 2, "plugins": [
                {"name": "filter", "sha256": sha, "size": 1000, "config": {"deny_commands": ["KEYS"]},
                 "enabled": true, "fail": "closed", "updated_unix": 0}]}}),
            json!({"key": format!("blob/{sha}/meta"), "json": {"size": 1000, "chunks": 2}}),
            json!({"key": format!("blob/{sha}/chunk-0000"), "hex": hex::encode(&module[..600])}),
            json!({"key": format!("blob/{sha}/chunk-0001"), "hex": hex::encode(&module[600..])}),
            json!({"key": "routes", "json": {"routes": [{"prefix": "ext:", "cluster": "b",
                "credential": {"user": "u", "password": "p"}}]}}),
            json!({"key": "read-policy", "json": {"mode": "prefer-replica", "max_lag_ms": 500}}),
            json!({"key": "failover", "json": {"schema": 1, "settings": {"enabled": false,
                "max_lag_bytes": 4096, "quorum": 0, "down_after_checks": 3, "cooldown_secs": 60},
                "pending": null, "rejoin": [], "events": []}}),
        ];
        let docs = serde_json::from_value(json!({"cluster": "c", "entries": entries})).unwrap();
        (docs, module)
    }

    fn refused(edit: impl FnOnce(&mut Value)) -> String {
        let mut v = serde_json::to_value(good().0).unwrap();
        edit(&mut v);
        let docs: StoreDocs = serde_json::from_value(v).unwrap();
        match Settings::from_store(&docs) {
            Ok(_) => panic!("accepted"),
            Err(e) => format!("{e:#}"),
        }
    }

    fn doc<'a>(v: &'a mut Value, key: &str) -> &'a mut Value {
        v["entries"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|e| e["key"] == key)
            .unwrap()
    }

    #[test]
    fn a_backups_settings_are_read_whole() {
        let (docs, module) = good();
        let s = Settings::from_store(&docs).unwrap();
        assert_eq!(s.users.len(), 1);
        assert_eq!(s.users[0].key_prefix.as_deref(), Some("t:"));
        assert_eq!(s.plugins.len(), 1);
        assert_eq!(s.plugins[0].module, module);
        assert_eq!(
            s.plugins[0].entry.config,
            json!({"deny_commands": ["KEYS"]})
        );
        assert_eq!(s.routes[0].prefix, "ext:");
        assert_eq!(s.read_policy.unwrap().max_lag_ms, 500);
        assert_eq!(s.failover.as_ref().unwrap().max_lag_bytes, 4096);
        assert!(s.canaries_skipped.is_empty());
    }

    #[test]
    fn unknown_fields_bad_values_and_damaged_modules_are_refused_naming_the_document() {
        let m = refused(|v| doc(v, "users")["json"]["extra"] = json!(1));
        assert!(m.contains("users has an unknown field \"extra\""), "{m}");
        let m = refused(|v| doc(v, "users")["json"]["users"][0]["admin"] = json!(true));
        assert!(m.contains("users"), "{m}");
        let m = refused(|v| doc(v, "users")["json"]["users"][0]["password"] = json!("pw"));
        assert!(m.contains("users"), "{m}");
        assert!(!m.contains("\"pw\""), "no secret shown: {m}");
        let m = refused(|v| doc(v, "users")["json"]["users"][0]["commands"] = json!(["rede"]));
        assert!(m.contains("rede"), "{m}");
        let m = refused(|v| doc(v, "plugin/catalog")["json"]["plugins"][0]["owner"] = json!(1));
        assert!(m.contains("unknown field \"owner\""), "{m}");
        let m = refused(|v| doc(v, "plugin/catalog")["json"]["plugins"][0]["fail"] = json!("x"));
        assert!(m.contains("fail must be open or closed"), "{m}");
        let m = refused(|v| doc(v, "plugin/catalog")["json"]["plugins"][0]["name"] = json!("a/b"));
        assert!(m.contains("not a plugin name"), "{m}");
        let m = refused(|v| {
            let entries = v["entries"].as_array_mut().unwrap();
            entries.retain(|e| !e["key"].as_str().unwrap().ends_with("chunk-0001"));
        });
        assert!(m.contains("chunk 1 is missing"), "{m}");
        let m = refused(|v| {
            let e = v["entries"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|e| e["key"].as_str().unwrap().ends_with("chunk-0000"))
                .unwrap();
            e["hex"] = json!(hex::encode([7u8; 600]));
        });
        assert!(m.contains("do not match its SHA-256"), "{m}");
        let m = refused(|v| doc(v, "routes")["json"]["routes"][0]["via"] = json!("x"));
        assert!(m.contains("unknown field \"via\""), "{m}");
        let m = refused(|v| doc(v, "routes")["json"]["routes"][0]["prefix"] = json!(""));
        assert!(m.contains("non-empty prefix"), "{m}");
        let m = refused(|v| doc(v, "read-policy")["json"]["max_lag_ms"] = json!(1));
        assert!(m.contains("max_lag_ms"), "{m}");
        let m = refused(|v| doc(v, "failover")["json"]["settings"]["quorum"] = json!(5000));
        assert!(m.contains("quorum"), "{m}");
        let m = refused(|v| doc(v, "failover")["json"]["settings"]["auto"] = json!(true));
        assert!(m.contains("unknown field \"auto\""), "{m}");
        let m = refused(|v| {
            v["entries"]
                .as_array_mut()
                .unwrap()
                .push(json!({"key": "meta", "json": {}}))
        });
        assert!(m.contains("no backup writes"), "{m}");
        let m = refused(|v| {
            let users = doc(v, "users").clone();
            v["entries"].as_array_mut().unwrap().push(users);
        });
        assert!(m.contains("twice"), "{m}");
    }

    #[test]
    fn a_store_of_too_many_entries_or_users_is_refused_before_it_is_read() {
        let m = refused(|v| {
            let many: Vec<Value> = (0..=MAX_ENTRIES)
                .map(|i| json!({"key": format!("slots/slot-{i}"), "json": {}}))
                .collect();
            v["entries"] = json!(many);
        });
        assert!(m.contains("entries"), "{m}");
        let m = refused(|v| {
            let h = hash();
            let many: Vec<Value> = (0..=MAX_USERS)
                .map(|i| json!({"name": format!("u{i}"), "password": h}))
                .collect();
            doc(v, "users")["json"]["users"] = json!(many);
        });
        assert!(m.contains("over the 1000"), "{m}");
    }

    #[test]
    fn a_canary_is_noted_not_restored() {
        let (docs, _) = good();
        let mut v = serde_json::to_value(docs).unwrap();
        doc(&mut v, "plugin/catalog")["json"]["plugins"][0]["canary"] = json!({
            "sha256": "ab".repeat(32), "size": 10, "config": {}, "fail": "closed",
            "percent": 10, "started_unix": 0
        });
        let docs: StoreDocs = serde_json::from_value(v).unwrap();
        let s = Settings::from_store(&docs).unwrap();
        assert_eq!(s.canaries_skipped, vec!["filter".to_owned()]);
        // The stable module is restored; the candidate's blob is not even looked for.
        assert_eq!(s.plugins.len(), 1);
    }
}
