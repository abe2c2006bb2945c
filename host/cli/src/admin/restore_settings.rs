//! A restore's settings (docs/backup.md): the backup's users, plugins, prefix routes, read
//! policy and failover settings, applied to the new cluster through its dashboard's API before
//! any key is written. First every conflict with what the target already has is found (read
//! only); then the changes are made one call at a time, each printed, and a failed call says
//! what was applied and what was not. The `default` user's entry is applied after the keys,
//! since the restore itself writes as that user.

use std::net::SocketAddr;

use anyhow::{Context, bail};
use reqwest::Method;

use super::client::{Client, NOTHING, Send};
use crate::import::progress::line;
use crate::import::settings::{PluginToRestore, Settings};
use tessera_model::users::{DEFAULT_USER, MAX_USERS, UserEntry};
use tessera_wire::Empty;
use tessera_wire::cluster::ProxyView;
use tessera_wire::failover::{FailoverChange, FailoverSettings, FailoverView};
use tessera_wire::plugins::{
    ListedPlugin, MAX_ENABLED, MAX_PLUGINS, PluginConfigChange, PluginEntry,
};
use tessera_wire::read_policy::{ReadPolicy, ReadPolicyChange, ReadPolicyView};
use tessera_wire::routes::{RouteChange, RoutesChange, RoutesView};
use tessera_wire::users::{UserChange, UserView};

/// The target as read before anything is changed.
pub(super) struct Target {
    users: Vec<UserView>,
    plugins: Vec<ListedPlugin>,
    routes: RoutesView,
    read_policy: ReadPolicy,
    failover: FailoverSettings,
}

/// Reads the target's settings, and checks that the dashboard is the one of the proxy the
/// keys go to (`--dashboard` has a default: a restore must not configure another cluster).
///
/// # Errors
/// The dashboard is unreachable or refuses (a token too low), or does not know the proxy.
pub(super) async fn read_target(c: &Client, proxy: &str) -> anyhow::Result<Target> {
    let proxies: Vec<ProxyView> = c.get(&["api", "proxies"]).await?;
    let wanted = resolve(proxy).await?;
    let mut known = false;
    for p in &proxies {
        // A proxy listening on every address registers 0.0.0.0:PORT (or [::]:PORT): its port
        // tells.
        let same = |x: &SocketAddr| {
            wanted
                .iter()
                .any(|w| w == x || (x.ip().is_unspecified() && w.port() == x.port()))
        };
        if resolve(&p.addr).await.is_ok_and(|a| a.iter().any(same)) {
            known = true;
            break;
        }
    }
    if !known {
        let addrs: Vec<&str> = proxies.iter().map(|p| p.addr.as_str()).collect();
        bail!(
            "the proxy {proxy} is not one of this dashboard's proxies ({}): point --dashboard \
             at the dashboard of the cluster being restored into; nothing was applied or written",
            if addrs.is_empty() {
                "it has none".to_owned()
            } else {
                addrs.join(", ")
            }
        );
    }
    let rp: ReadPolicyView = c.get(&["api", "read-policy"]).await?;
    let fo: FailoverView = c.get(&["api", "failover"]).await?;
    Ok(Target {
        users: c.get(&["api", "users"]).await?,
        plugins: c.get(&["api", "plugins"]).await?,
        routes: c.get(&["api", "routes"]).await?,
        read_policy: rp.policy,
        failover: fo.settings,
    })
}

async fn resolve(addr: &str) -> anyhow::Result<Vec<SocketAddr>> {
    Ok(tokio::net::lookup_host(addr)
        .await
        .with_context(|| format!("resolving {addr}"))?
        .collect())
}

/// What the backup would change that the target already has, one line each; and what it
/// cannot apply at all (a route to a cluster the target's store does not hold, a table over
/// its limits), which no flag overrides.
///
/// # Errors
/// Settings the target cannot take.
pub(super) fn conflicts(s: &Settings, t: &Target) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut new_users = 0;
    for u in &s.users {
        if t.users.iter().any(|v| v.name == u.name) {
            out.push(format!("user {} exists", u.name));
        } else {
            new_users += 1;
        }
    }
    if t.users.len() + new_users > MAX_USERS {
        bail!(
            "the target has {} users and the backup {new_users} more: over the {MAX_USERS} a \
             table may hold",
            t.users.len()
        );
    }
    let mut new_plugins = 0;
    for p in &s.plugins {
        if t.plugins.iter().any(|v| v.entry.name == p.entry.name) {
            out.push(format!("plugin {} exists", p.entry.name));
        } else {
            new_plugins += 1;
        }
    }
    if t.plugins.len() + new_plugins > MAX_PLUGINS {
        bail!(
            "the target has {} plugins and the backup {new_plugins} more: over the \
             {MAX_PLUGINS} a catalog may hold",
            t.plugins.len()
        );
    }
    let enabled = t
        .plugins
        .iter()
        .filter(|v| v.entry.enabled && !s.plugins.iter().any(|p| p.entry.name == v.entry.name))
        .count()
        + s.plugins.iter().filter(|p| p.entry.enabled).count();
    if enabled > MAX_ENABLED {
        bail!("this would enable {enabled} plugins, over the {MAX_ENABLED} a proxy runs");
    }
    for r in &s.routes {
        if !t.routes.clusters.contains(&r.cluster) {
            bail!(
                "the backup routes prefix {:?} to cluster {}, which is not in the target's \
                 store (it has {}): create it first, or restore with --no-settings",
                r.prefix,
                r.cluster,
                if t.routes.clusters.is_empty() {
                    "no other cluster".to_owned()
                } else {
                    t.routes.clusters.join(", ")
                }
            );
        }
        if t.routes.routes.iter().any(|v| v.prefix == r.prefix) {
            out.push(format!("prefix route {:?} exists", r.prefix));
        }
    }
    if let Some(p) = &s.read_policy
        && !t.read_policy.is_default()
        && t.read_policy != *p
    {
        out.push(format!(
            "the read policy is {} (max lag {} ms), the backup's {} ({} ms)",
            t.read_policy.mode.as_str(),
            t.read_policy.max_lag_ms,
            p.mode.as_str(),
            p.max_lag_ms
        ));
    }
    if let Some(f) = &s.failover
        && t.failover != FailoverSettings::default()
        && t.failover != *f
    {
        out.push("failover's settings were changed and differ from the backup's".to_owned());
    }
    Ok(out)
}

/// The steps applied so far, for the message of a failure.
#[derive(Default)]
pub(super) struct Applied {
    done: Vec<String>,
}

impl Applied {
    fn step(&mut self, what: String, fields: &[(&str, String)]) {
        println!("{}", line("restore settings", fields));
        self.done.push(what);
    }

    /// The steps done, as a sentence part.
    pub(super) fn list(&self) -> String {
        if self.done.is_empty() {
            "nothing".to_owned()
        } else {
            self.done.join(", ")
        }
    }
}

/// One change of the target.
#[derive(Clone, Copy)]
enum Step {
    ReadPolicy,
    Failover,
    Routes,
    /// `Settings::users[i]`.
    User(usize),
    /// `Settings::plugins[i]`.
    Plugin(usize),
}

impl Step {
    fn name(self, s: &Settings) -> String {
        match self {
            Step::ReadPolicy => "the read policy".to_owned(),
            Step::Failover => "failover's settings".to_owned(),
            Step::Routes => "the prefix routes".to_owned(),
            Step::User(i) => format!("user {}", s.users[i].name),
            Step::Plugin(i) => format!("plugin {}", s.plugins[i].entry.name),
        }
    }
}

/// Everything but the `default` user, in this order: the read policy, failover's settings,
/// the routes, the users, the plugins (each: module, config, enabled).
///
/// # Errors
/// The first call that failed, with what was applied before it and what was not.
pub(super) async fn apply(
    c: &Client,
    s: &Settings,
    t: &Target,
    applied: &mut Applied,
) -> anyhow::Result<()> {
    let mut todo = Vec::new();
    if s.read_policy.is_some_and(|p| p != t.read_policy) {
        todo.push(Step::ReadPolicy);
    }
    if s.failover.as_ref().is_some_and(|f| *f != t.failover) {
        todo.push(Step::Failover);
    }
    if !s.routes.is_empty() {
        todo.push(Step::Routes);
    }
    for (i, u) in s.users.iter().enumerate() {
        if u.name != DEFAULT_USER {
            todo.push(Step::User(i));
        }
    }
    todo.extend((0..s.plugins.len()).map(Step::Plugin));
    for (i, &step) in todo.iter().enumerate() {
        if let Err(e) = apply_one(c, s, t, step, applied).await {
            let left: Vec<String> = todo[i..].iter().map(|st| st.name(s)).collect();
            return Err(e.context(format!(
                "applying {} to the target failed; applied: {}; not applied: {}; no key was \
                 written",
                step.name(s),
                applied.list(),
                left.join(", ")
            )));
        }
    }
    Ok(())
}

async fn apply_one(
    c: &Client,
    s: &Settings,
    t: &Target,
    step: Step,
    applied: &mut Applied,
) -> anyhow::Result<()> {
    let fields = match step {
        Step::ReadPolicy => {
            let p = s.read_policy.unwrap_or_default();
            let body = ReadPolicyChange {
                mode: Some(p.mode),
                max_lag_ms: Some(p.max_lag_ms),
            };
            let _: ReadPolicyView = c
                .call(Method::PUT, &["api", "read-policy"], Send::Json(&body))
                .await?;
            vec![
                ("read_policy", p.mode.as_str().to_owned()),
                ("max_lag_ms", p.max_lag_ms.to_string()),
            ]
        }
        Step::Failover => {
            let f = s.failover.clone().unwrap_or_default();
            let body = FailoverChange {
                enabled: Some(f.enabled),
                max_lag_bytes: Some(f.max_lag_bytes),
                quorum: Some(f.quorum),
                down_after_checks: Some(f.down_after_checks),
                cooldown_secs: Some(f.cooldown_secs),
            };
            let _: FailoverView = c
                .call(Method::PUT, &["api", "failover"], Send::Json(&body))
                .await?;
            vec![("failover_enabled", f.enabled.to_string())]
        }
        Step::Routes => {
            // The target's own routes stay (a user without a password keeps its stored one);
            // a prefix of the backup's replaces the target's (only with --replace-settings).
            let mut routes: Vec<RouteChange> = t
                .routes
                .routes
                .iter()
                .filter(|v| !s.routes.iter().any(|r| r.prefix == v.prefix))
                .map(|v| RouteChange {
                    prefix: v.prefix.clone(),
                    cluster: v.cluster.clone(),
                    user: v.user.clone(),
                    password: None,
                })
                .collect();
            routes.extend(s.routes.iter().map(|r| RouteChange {
                prefix: r.prefix.clone(),
                cluster: r.cluster.clone(),
                user: r.credential.as_ref().map(|c| c.user.clone()),
                password: r.credential.as_ref().map(|c| c.password.clone()),
            }));
            let _: RoutesView = c
                .call(
                    Method::PUT,
                    &["api", "routes"],
                    Send::Json(&RoutesChange { routes }),
                )
                .await?;
            let prefixes: Vec<&str> = s.routes.iter().map(|r| r.prefix.as_str()).collect();
            vec![("routes", format!("{:?}", prefixes.join(",")))]
        }
        Step::User(i) => {
            set_user(c, t, &s.users[i]).await?;
            vec![("user", s.users[i].name.clone())]
        }
        Step::Plugin(i) => set_plugin(c, t, &s.plugins[i]).await?,
    };
    applied.step(step.name(s), &fields);
    Ok(())
}

/// Creates or replaces a user from its entry: its password hash, classes, prefix, state.
async fn set_user(c: &Client, t: &Target, u: &UserEntry) -> anyhow::Result<()> {
    let path = ["api", "users", u.name.as_str()];
    // Only `default` may lack a password; a change cannot remove one, so the target's entry
    // goes first.
    if u.password.is_none() && t.users.iter().any(|v| v.name == u.name && v.password_set) {
        let _: Empty = c.call(Method::DELETE, &path, NOTHING).await?;
    }
    let body = UserChange {
        password: None,
        password_hash: u.password.clone(),
        commands: Some(u.commands.clone()),
        key_prefix: Some(u.key_prefix.clone()),
        databases: Some(u.databases.clone()),
        enabled: Some(u.enabled),
    };
    let _: UserView = c.call(Method::PUT, &path, Send::Json(&body)).await?;
    Ok(())
}

/// Uploads a plugin's module, sets its config and limits, enables it if it was: the fields
/// of its progress line.
async fn set_plugin(
    c: &Client,
    t: &Target,
    p: &PluginToRestore,
) -> anyhow::Result<Vec<(&'static str, String)>> {
    let e = &p.entry;
    let name = e.name.as_str();
    // A plugin of the target replaced: off first, so that neither its config with the new
    // module nor the new config with its module is probed.
    if t.plugins
        .iter()
        .any(|v| v.entry.name == name && v.entry.enabled)
    {
        let _: PluginEntry = c
            .call(Method::POST, &["api", "plugins", name, "disable"], NOTHING)
            .await?;
    }
    let _: PluginEntry = c
        .call(
            Method::PUT,
            &["api", "plugins", name, "module"],
            Send::<()>::Wasm(p.module.clone()),
        )
        .await?;
    let body = PluginConfigChange {
        config: Some(e.config.clone()),
        fail: Some(e.fail.clone()),
        cpu_budget_ms: e.cpu_budget_ms,
        memory_mb: e.memory_mb,
        max_input_kb: e.max_input_kb,
    };
    let configured: anyhow::Result<PluginEntry> = c
        .call(
            Method::PUT,
            &["api", "plugins", name, "config"],
            Send::Json(&body),
        )
        .await;
    configured.context("its module is uploaded (disabled); setting its config failed")?;
    if e.enabled {
        let enabled: anyhow::Result<PluginEntry> = c
            .call(Method::POST, &["api", "plugins", name, "enable"], NOTHING)
            .await;
        enabled.context("its module and config are set (disabled); enabling it failed")?;
    }
    Ok(vec![
        ("plugin", name.to_owned()),
        ("sha256", e.sha256.chars().take(12).collect()),
        ("enabled", e.enabled.to_string()),
    ])
}

/// The backup's `default` user, if it has one: applied after the keys (the restore writes as
/// the default user, whom the entry may disable or give another password).
///
/// # Errors
/// The call failed.
pub(super) async fn apply_default(
    c: &Client,
    s: &Settings,
    t: &Target,
    applied: &mut Applied,
) -> anyhow::Result<()> {
    if let Some(u) = s.users.iter().find(|u| u.name == DEFAULT_USER) {
        set_user(c, t, u).await?;
        applied.step("user default".to_owned(), &[("user", u.name.clone())]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tessera_wire::read_policy::ReadMode;
    use tessera_wire::routes::PrefixRoute;

    fn target(read_policy: ReadPolicy) -> Target {
        let entry = json!({"name": "filter", "sha256": "ab", "size": 1, "config": {},
                           "enabled": true, "fail": "closed", "updated_unix": 0, "order": 0});
        Target {
            users: serde_json::from_value(
                json!([{"name": "alice", "enabled": true, "password_set": true}]),
            )
            .unwrap(),
            plugins: serde_json::from_value(json!([entry])).unwrap(),
            routes: serde_json::from_value(json!({
                "routes": [{"prefix": "ext:", "cluster": "b", "user": null}],
                "clusters": ["b"], "proxies": []}))
            .unwrap(),
            read_policy,
            failover: FailoverSettings::default(),
        }
    }

    fn backup(user: &str, plugin: &str, prefix: &str) -> Settings {
        let entry = serde_json::from_value(json!({"name": plugin, "sha256": "cd", "size": 1,
            "config": {}, "enabled": true, "fail": "closed", "updated_unix": 0}))
        .unwrap();
        Settings {
            users: vec![UserEntry {
                name: user.into(),
                password: None,
                commands: None,
                key_prefix: None,
                databases: None,
                enabled: true,
            }],
            plugins: vec![PluginToRestore {
                entry,
                module: Vec::new(),
            }],
            routes: vec![PrefixRoute::new(prefix, "b")],
            read_policy: Some(ReadPolicy {
                mode: ReadMode::PreferReplica,
                max_lag_ms: 500,
            }),
            ..Settings::default()
        }
    }

    #[test]
    fn names_taken_and_settings_changed_in_the_target_are_conflicts() {
        let changed = ReadPolicy {
            mode: ReadMode::ReplicaOnly,
            max_lag_ms: 900,
        };
        let found = conflicts(&backup("alice", "filter", "ext:"), &target(changed)).unwrap();
        assert_eq!(
            found,
            [
                "user alice exists",
                "plugin filter exists",
                "prefix route \"ext:\" exists",
                "the read policy is replica-only (max lag 900 ms), the backup's prefer-replica \
                 (500 ms)",
            ]
        );
        // Other names, and a read policy the target left at its default: nothing to replace.
        let none = conflicts(
            &backup("bob", "metrics", "other:"),
            &target(ReadPolicy::default()),
        )
        .unwrap();
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn a_route_to_a_cluster_the_target_lacks_or_too_many_plugins_cannot_be_replaced() {
        let mut s = backup("bob", "metrics", "other:");
        s.routes = vec![PrefixRoute::new("other:", "elsewhere")];
        let e = conflicts(&s, &target(ReadPolicy::default())).unwrap_err();
        assert!(e.to_string().contains("cluster elsewhere"), "{e}");
        let mut s = backup("bob", "metrics", "other:");
        let one = s.plugins.pop().unwrap();
        for i in 0..MAX_ENABLED {
            let mut entry = one.entry.clone();
            entry.name = format!("p{i}");
            s.plugins.push(PluginToRestore {
                entry,
                module: Vec::new(),
            });
        }
        let e = conflicts(&s, &target(ReadPolicy::default())).unwrap_err();
        assert!(e.to_string().contains("would enable 17 plugins"), "{e}");
    }
}
