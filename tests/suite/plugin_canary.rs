//! A plugin's canary with real proxies: a candidate module and config run by the proxies its
//! share selects (by address, or by percentage through the hash every proxy computes), told
//! apart in `/api/proxy/plugins`, on `/metrics` and in the dashboard's metrics by track;
//! promoted (every proxy runs it) or rolled back (none does), by the API and the admin CLI;
//! bad canary bodies refused with the reason and nothing changed; a forged push of a canary a
//! proxy cannot run refused by the proxy, which keeps its plugins.

use serde_json::{Value, json};
use tessera_wire::plugin_canary::{CANARY, STABLE, bucket_of};
use tessera_wire::plugins::{ListedPlugin, PluginEntry, PluginMetrics, ProxyPlugins};

use crate::support::{ControlPlane, Frame, metric, plugin_wasm};

/// The track and module `gate` runs in each proxy.
fn tracks(cp: &ControlPlane) -> Vec<(String, String)> {
    cp.proxies
        .iter()
        .map(|p| {
            let l: ProxyPlugins = p.admin().get("/api/proxy/plugins").ok_as();
            let g = l
                .plugins
                .into_iter()
                .find(|g| g.name == "gate")
                .unwrap_or_else(|| panic!("gate is not loaded in {}", p.addr()));
            (g.track, g.sha256)
        })
        .collect()
}

/// Whether `INCR n` is denied through proxy `i` (the candidate's filter denies it; the
/// stable metrics plugin lets it through).
fn incr_denied(cp: &ControlPlane, i: usize) -> bool {
    match cp.proxies[i].raw().cmd(&["INCR", "n"]) {
        Frame::Error(e) => {
            assert!(e.contains("INCR"), "denied with another reason: {e}");
            true
        }
        Frame::Integer(_) => false,
        other => panic!("INCR answered {other:?}"),
    }
}

fn catalog(cp: &ControlPlane) -> Value {
    cp.api().get("/api/plugins").ok_as()
}

fn entry(cp: &ControlPlane) -> PluginEntry {
    let l: Vec<ListedPlugin> = cp.api().get("/api/plugins").ok_as();
    l.into_iter()
        .find(|l| l.entry.name == "gate")
        .unwrap()
        .entry
}

#[test]
fn a_canary_runs_on_its_share_of_proxies_then_is_rolled_back_or_promoted() {
    let cp = ControlPlane::builder().servers(2).proxies(3).start();
    cp.split_over_two_groups();
    let api = cp.api();
    let metrics_wasm = std::fs::read(plugin_wasm("metrics")).unwrap();
    let filter_wasm = std::fs::read(plugin_wasm("filter")).unwrap();
    let metrics_sha = tessera_model::secret::sha256_hex(&metrics_wasm);
    let filter_sha = tessera_model::secret::sha256_hex(&filter_wasm);
    api.request("PUT", "/api/plugins/gate/module", Some(&metrics_wasm))
        .ok();
    api.post("/api/plugins/gate/enable", &json!({})).ok();
    let addrs: Vec<String> = cp.proxies.iter().map(|p| p.addr().to_string()).collect();

    // Bad canary bodies: refused with the reason, and nothing changes.
    let before = catalog(&cp);
    let msg = api
        .post("/api/plugins/nope/canary", &json!({"percent": 10}))
        .expect_error(404, "not_found");
    assert!(msg.contains("nope"), "{msg}");
    let msg = api
        .post("/api/plugins/gate/canary", &json!({"percent": 101}))
        .expect_error(400, "bad_request");
    assert!(msg.contains("0 to 100"), "{msg}");
    let many: Vec<String> = (0..257).map(|i| format!("10.0.0.1:{i}")).collect();
    let msg = api
        .post("/api/plugins/gate/canary", &json!({ "proxies": many }))
        .expect_error(400, "bad_request");
    assert!(msg.contains("at most 256"), "{msg}");
    let msg = api
        .post("/api/plugins/gate/canary", &json!({"percnt": 10}))
        .expect_error(400, "bad_request");
    assert!(msg.contains("percnt"), "{msg}");
    let huge = json!({"config": {"pad": "x".repeat(300 << 10)}, "percent": 1});
    let r = api.post("/api/plugins/gate/canary", &huge);
    assert_eq!(r.status, 413, "{}", r.body);
    let msg = api
        .request("PUT", "/api/plugins/gate/canary/module", Some(b"not wasm"))
        .expect_error(400, "bad_request");
    assert!(msg.contains("WebAssembly"), "{msg}");
    // The stable config ({}) given to a module that refuses it.
    let faulty = std::fs::read(plugin_wasm("faulty")).unwrap();
    let msg = api
        .request("PUT", "/api/plugins/gate/canary/module", Some(&faulty))
        .expect_error(400, "bad_request");
    assert!(msg.contains("faulty: bad config"), "{msg}");
    let msg = api
        .post("/api/plugins/gate/canary/promote", &json!({}))
        .expect_error(409, "conflict");
    assert!(msg.contains("no canary"), "{msg}");
    assert_eq!(catalog(&cp), before, "a refused canary changed the catalog");
    for (track, sha) in tracks(&cp) {
        assert_eq!(
            (track.as_str(), sha.as_str()),
            (STABLE, metrics_sha.as_str())
        );
    }

    // A candidate module: stored beside the stable one, on no proxy yet.
    let e: PluginEntry = api
        .request("PUT", "/api/plugins/gate/canary/module", Some(&filter_wasm))
        .ok_as();
    let c = e.canary.expect("a canary was started");
    assert_eq!((c.sha256.as_str(), c.percent), (filter_sha.as_str(), 0));
    assert_eq!(e.sha256, metrics_sha, "the stable module was replaced");
    // Its config, refused by the candidate's own init.
    let msg = api
        .post(
            "/api/plugins/gate/canary",
            &json!({"config": {"deny_classes": ["admn"]}, "proxies": [addrs[0]]}),
        )
        .expect_error(400, "bad_request");
    assert!(msg.contains("filter: unknown class"), "{msg}");
    assert!(tracks(&cp).iter().all(|(t, _)| t == STABLE));

    // On proxy 0 alone: it denies INCR, the others do not.
    api.post(
        "/api/plugins/gate/canary",
        &json!({"config": {"deny_commands": ["INCR"]}, "proxies": [addrs[0]]}),
    )
    .ok();
    let seen = tracks(&cp);
    assert_eq!(seen[0], (CANARY.to_owned(), filter_sha.clone()), "{seen:?}");
    assert_eq!(
        seen[1],
        (STABLE.to_owned(), metrics_sha.clone()),
        "{seen:?}"
    );
    assert_eq!(
        seen[2],
        (STABLE.to_owned(), metrics_sha.clone()),
        "{seen:?}"
    );
    for _ in 0..3 {
        assert!(incr_denied(&cp, 0));
    }
    assert!(!incr_denied(&cp, 1) && !incr_denied(&cp, 2));
    let mut c = cp.proxies[1].raw();
    for i in 0..5 {
        assert_eq!(
            c.cmd(&["SET", &format!("acme:{i}"), "v"]),
            Frame::Simple("OK".into())
        );
    }
    // /metrics names each proxy's version; the existing series are as they were.
    let m0 = cp.proxies[0].metrics();
    let canary_series =
        format!(r#"tessera_plugin_track{{plugin="gate",track="canary",sha256="{filter_sha}"}}"#);
    assert_eq!(metric(&m0, &canary_series), Some(1.0), "{m0}");
    assert!(
        metric(&m0, r#"tessera_plugin_denies_total{plugin="gate"}"#).is_some_and(|n| n >= 3.0),
        "{m0}"
    );
    let m1 = cp.proxies[1].metrics();
    let stable_series =
        format!(r#"tessera_plugin_track{{plugin="gate",track="stable",sha256="{metrics_sha}"}}"#);
    assert_eq!(metric(&m1, &stable_series), Some(1.0), "{m1}");
    assert!(metric(&m1, r#"tessera_plugin_calls_total{plugin="gate"}"#).is_some_and(|n| n >= 5.0));
    assert_eq!(
        metric(&m1, r#"tessera_plugin_denies_total{plugin="gate"}"#),
        Some(0.0)
    );

    // The dashboard's metrics by track: stable beside canary.
    let pm: PluginMetrics = api.get("/api/plugins/gate/metrics").ok_as();
    assert_eq!(pm.tracks.len(), 2, "{pm:?}");
    let (stable, canary) = (&pm.tracks[0], &pm.tracks[1]);
    assert_eq!(
        (stable.track.as_str(), canary.track.as_str()),
        (STABLE, CANARY)
    );
    assert_eq!(canary.proxies, vec![addrs[0].clone()]);
    let mut stable_proxies = stable.proxies.clone();
    stable_proxies.sort();
    let mut others = vec![addrs[1].clone(), addrs[2].clone()];
    others.sort();
    assert_eq!(stable_proxies, others);
    assert!(canary.denies >= 3 && stable.denies == 0, "{pm:?}");
    assert_eq!(
        (stable.sha256.as_str(), canary.sha256.as_str()),
        (metrics_sha.as_str(), filter_sha.as_str())
    );
    // The stable metrics plugin's own series count the SETs; the canary's filter has none.
    let sets: f64 = stable
        .samples
        .iter()
        .filter(|s| {
            s.name == "commands_total" && s.labels.get("command").is_some_and(|c| c == "set")
        })
        .map(|s| s.value)
        .sum();
    assert!(sets >= 5.0, "{:?}", stable.samples);

    // By percentage: each proxy decides from its address's hash, as the dashboard computes it.
    api.post(
        "/api/plugins/gate/canary",
        &json!({"percent": 50, "proxies": []}),
    )
    .ok();
    for (i, (track, _)) in tracks(&cp).into_iter().enumerate() {
        let want = if bucket_of(&addrs[i]) < 50 {
            CANARY
        } else {
            STABLE
        };
        assert_eq!(
            track,
            want,
            "proxy {} (bucket {})",
            addrs[i],
            bucket_of(&addrs[i])
        );
        assert_eq!(incr_denied(&cp, i), want == CANARY);
    }
    api.post("/api/plugins/gate/canary", &json!({"percent": 100}))
        .ok();
    assert!(tracks(&cp).iter().all(|(t, _)| t == CANARY));

    // Rolled back: every proxy runs the stable version again; a second rollback has nothing.
    let e: PluginEntry = api
        .post("/api/plugins/gate/canary/rollback", &json!({}))
        .ok_as();
    assert!(e.canary.is_none());
    for (i, (track, sha)) in tracks(&cp).into_iter().enumerate() {
        assert_eq!(
            (track.as_str(), sha.as_str()),
            (STABLE, metrics_sha.as_str())
        );
        assert!(!incr_denied(&cp, i));
    }
    api.post("/api/plugins/gate/canary/rollback", &json!({}))
        .expect_error(409, "conflict");

    // A hostile push to a proxy (a forged or corrupt catalog): a canary whose module is not in
    // the store, or whose share is not a percentage, is refused; the plugins in force stay.
    let p = &cp.proxies[0];
    let state: ProxyPlugins = p.admin().get("/api/proxy/plugins").ok_as();
    let mut forged: Value = cp.api().get("/api/plugins").ok_as();
    for e in forged.as_array_mut().unwrap() {
        e.as_object_mut().unwrap().remove("order");
        e["canary"] = json!({"sha256": "00".repeat(32), "size": 1, "config": {}, "fail": "closed",
            "percent": 100, "proxies": [], "started_unix": 0});
    }
    let mut push = json!({"version": state.catalog_version + 1, "plugins": forged});
    let msg = p
        .admin()
        .request(
            "PUT",
            "/api/proxy/plugins",
            Some(push.to_string().as_bytes()),
        )
        .expect_error(503, "unavailable");
    assert!(msg.contains("not in the store"), "{msg}");
    push["plugins"][0]["canary"]["percent"] = json!(300);
    let r = p.admin().request(
        "PUT",
        "/api/proxy/plugins",
        Some(push.to_string().as_bytes()),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    let after: ProxyPlugins = p.admin().get("/api/proxy/plugins").ok_as();
    assert_eq!(after.catalog_version, state.catalog_version);
    assert_eq!(after.plugins[0].track, STABLE);
    assert_eq!(after.plugins[0].sha256, metrics_sha);
    assert!(!incr_denied(&cp, 0));

    // Through the admin CLI: start on proxy 1, see it side by side, promote.
    let cli = |args: &[&str]| {
        let out = cp.admin_cli(crate::support::TOKEN, args);
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {text}");
        text
    };
    let filter_path = plugin_wasm("filter");
    cli(&[
        "plugin",
        "canary",
        "start",
        "gate",
        "--module",
        filter_path.to_str().unwrap(),
        "--inline",
        r#"{"deny_commands":["INCR"]}"#,
        "--proxy",
        &addrs[1],
    ]);
    assert!(incr_denied(&cp, 1) && !incr_denied(&cp, 0) && !incr_denied(&cp, 2));
    let status = cli(&["plugin", "canary", "status", "gate"]);
    let proxies_row: Vec<&str> = status
        .lines()
        .find(|l| l.starts_with("proxies"))
        .unwrap_or_else(|| panic!("{status}"))
        .split_whitespace()
        .collect();
    assert_eq!(proxies_row, ["proxies", "2", "1"], "{status}");
    assert!(status.contains(&addrs[1]), "{status}");
    let out = cli(&["plugin", "canary", "promote", "gate"]);
    assert!(out.contains("no canary"), "{out}");
    let e = entry(&cp);
    assert_eq!(
        (e.sha256.as_str(), e.canary.is_none()),
        (filter_sha.as_str(), true)
    );
    assert_eq!(e.config, json!({"deny_commands": ["INCR"]}));
    for (i, (track, sha)) in tracks(&cp).into_iter().enumerate() {
        assert_eq!(
            (track.as_str(), sha.as_str()),
            (STABLE, filter_sha.as_str())
        );
        assert!(incr_denied(&cp, i));
    }
    let pm: PluginMetrics = api.get("/api/plugins/gate/metrics").ok_as();
    assert_eq!(pm.tracks.len(), 1, "{pm:?}");
    assert_eq!(pm.tracks[0].proxies.len(), 3);
    let out = cp.admin_cli(
        crate::support::TOKEN,
        &["plugin", "canary", "rollback", "gate"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no canary"));
}
