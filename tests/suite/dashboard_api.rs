//! The dashboard's REST API (docs/api.md) from the outside: the admin token, the error shape
//! and statuses, the `tessera admin` CLI over it, and the Prometheus text of the dashboard and
//! of a proxy.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use tessera_wire::cluster::{GroupView, Overview, SlotView};
use tessera_wire::telemetry::ProxyStats;
use tessera_wire::tokens::CreatedToken;
use tessera_wire::topology::GroupId;

use crate::support::{Api, ControlPlane, Frame, Reply, TOKEN, cli_stdout, keys_on, wait_until};

/// Every mutating route of the API, with a body that would be valid.
fn mutations() -> Vec<(&'static str, &'static str, Option<Value>)> {
    vec![
        ("POST", "/api/groups", Some(json!({"id": 1}))),
        ("DELETE", "/api/groups/1", None),
        (
            "POST",
            "/api/groups/1/servers",
            Some(json!({"addr": "127.0.0.1:1"})),
        ),
        ("DELETE", "/api/groups/1/servers/127.0.0.1:1", None),
        (
            "POST",
            "/api/groups/1/promote",
            Some(json!({"addr": "127.0.0.1:1"})),
        ),
        (
            "POST",
            "/api/slots/assign",
            Some(json!({"from": 0, "to": 1, "group": 1})),
        ),
        ("POST", "/api/proxies/abc/online", None),
        ("POST", "/api/proxies/abc/offline", None),
    ]
}

fn call(api: &Api, method: &str, path: &str, body: Option<&Value>) -> Reply {
    let bytes = body.map(Value::to_string);
    api.request(method, path, bytes.as_deref().map(str::as_bytes))
}

#[test]
fn mutating_calls_without_the_token_get_401() {
    let cp = ControlPlane::builder().start();
    let api = cp.api();
    for (who, client) in [
        ("no token", api.without_token()),
        ("a wrong token", api.with_token("not-the-token")),
        (
            "a token with a suffix",
            api.with_token(&format!("{TOKEN}x")),
        ),
    ] {
        for (method, path, body) in mutations() {
            let reply = call(&client, method, path, body.as_ref());
            let message = reply.expect_error(401, "unauthorized");
            assert!(
                message.contains("Bearer"),
                "{method} {path} with {who}: the message says what to send: {message:?}"
            );
        }
    }
    // Nothing happened.
    assert!(api.get("/api/groups").ok_as::<Vec<GroupView>>().is_empty());
    // With the token, the same call works.
    let created = api.post("/api/groups", &json!({"id": 1}));
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.parse::<GroupView>().id, GroupId(1));
}

#[test]
fn reads_need_a_token_by_default_and_a_viewer_token_is_enough() {
    let cp = ControlPlane::builder().start();
    let api = cp.api();
    let created = api.post("/api/tokens", &json!({"name": "dash", "role": "viewer"}));
    assert_eq!(created.status, 201, "{}", created.body);
    let viewer = api.with_token(&created.parse::<CreatedToken>().token);
    for path in [
        "/api/groups",
        "/api/slots",
        "/api/proxies",
        "/api/overview",
        "/api/stats",
        "/api/audit",
        "/api/plugins",
        "/api/migrations",
        "/api/users",
    ] {
        let message = api
            .without_token()
            .get(path)
            .expect_error(401, "unauthorized");
        assert!(message.contains("Bearer"), "GET {path}: {message}");
        api.with_token("wrong")
            .get(path)
            .expect_error(401, "unauthorized");
        for (who, client) in [("the admin token", &api), ("a viewer token", &viewer)] {
            let reply = client.get(path);
            assert_eq!(reply.status, 200, "GET {path} with {who}: {}", reply.body);
        }
    }
    // Liveness, metrics and the API description stay open.
    for path in ["/health", "/metrics", "/api/openapi.json"] {
        let reply = api.without_token().get(path);
        assert_eq!(
            reply.status, 200,
            "GET {path} without a token: {}",
            reply.body
        );
    }
    // Mutations still need it too.
    api.without_token()
        .post("/api/groups", &json!({"id": 1}))
        .expect_error(401, "unauthorized");
}

/// The OpenAPI document a dashboard serves is the committed `docs/openapi.json`, byte for
/// byte (both are derived from the code; `tessera openapi` writes the file).
#[test]
fn the_dashboard_serves_the_committed_openapi_document() {
    let cp = ControlPlane::builder().servers(0).proxies(0).start();
    let served = cp.api().without_token().get("/api/openapi.json");
    assert_eq!(served.status, 200, "{}", served.body);
    assert!(
        served.content_type.starts_with("application/json"),
        "{}",
        served.content_type
    );
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    let committed = std::fs::read_to_string(path).expect("docs/openapi.json is committed");
    assert!(
        served.body == committed,
        "the served document differs from docs/openapi.json: regenerate it with \
         `cargo run -q -p tessera -- openapi --api dashboard > docs/openapi.json`"
    );
    // And it is a document of this API: every route the tests call is in it.
    let doc: Value = serde_json::from_str(&served.body).expect("JSON");
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1"))
    );
    for path in [
        "/api/overview",
        "/api/groups/{id}/servers",
        "/api/migrations",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is described");
    }
}

#[test]
fn api_errors_have_status_and_code() {
    let cp = ControlPlane::builder().servers(2).start();
    cp.group(1, &[0]);
    cp.assign(0, 511, 1);
    cp.group(2, &[1]);
    let api = cp.api();

    // 404: unknown group, server, proxy, route.
    api.delete("/api/groups/99").expect_error(404, "not_found");
    let m = api
        .post("/api/groups/99/servers", &json!({"addr": "127.0.0.1:1"}))
        .expect_error(404, "not_found");
    assert!(m.contains("99"), "the message names the group: {m}");
    api.post(
        "/api/slots/assign",
        &json!({"from": 600, "to": 700, "group": 99}),
    )
    .expect_error(404, "not_found");
    api.post("/api/groups/2/promote", &json!({"addr": "127.0.0.1:1"}))
        .expect_error(404, "not_found");
    api.delete("/api/groups/1/servers/127.0.0.1:1")
        .expect_error(404, "not_found");
    api.post_raw("/api/proxies/no-such-token/offline", "")
        .expect_error(404, "not_found");
    api.get("/api/no-such-route").expect_error(404, "not_found");

    // 409: a group with slots, an id taken, a slot owned by another group.
    let m = api.delete("/api/groups/1").expect_error(409, "conflict");
    assert!(m.contains("not empty"), "says why: {m}");
    api.post("/api/groups", &json!({"id": 1}))
        .expect_error(409, "conflict");
    let m = api
        .post(
            "/api/slots/assign",
            &json!({"from": 500, "to": 600, "group": 2}),
        )
        .expect_error(409, "conflict");
    assert!(
        m.contains("slot 500") && m.contains("group 1"),
        "names the slot and its owner: {m}"
    );
    let owners: Vec<Option<GroupId>> = api
        .get("/api/slots")
        .ok_as::<Vec<SlotView>>()
        .iter()
        .map(|s| s.group)
        .collect();
    assert!(
        owners[512..=600].iter().all(Option::is_none),
        "a refused assign changes nothing"
    );
    let m = api
        .post("/api/groups/1/servers", &json!({"addr": cp.server_addr(1)}))
        .expect_error(409, "conflict");
    assert!(
        m.contains("group 2"),
        "a server already in another group: {m}"
    );

    // 400: malformed JSON, a bad path, a bad value.
    api.post_raw("/api/slots/assign", "{not json")
        .expect_error(400, "bad_request");
    api.post_raw("/api/groups/1/servers", "{\"addr\": ")
        .expect_error(400, "bad_request");
    api.post_raw("/api/groups/1/promote", "{\"addr\" \"127.0.0.1:1\"}")
        .expect_error(400, "bad_request");
    api.delete("/api/groups/abc")
        .expect_error(400, "bad_request");
    api.post("/api/groups/abc/servers", &json!({"addr": "127.0.0.1:1"}))
        .expect_error(400, "bad_request");
    api.post(
        "/api/slots/assign",
        &json!({"from": 10, "to": 5, "group": 1}),
    )
    .expect_error(400, "bad_request");
    api.post(
        "/api/slots/assign",
        &json!({"from": 1000, "to": 1024, "group": 2}),
    )
    .expect_error(400, "bad_request");
    api.post("/api/groups/2/servers", &json!({"addr": "no-port"}))
        .expect_error(400, "bad_request");
    api.post("/api/groups", &json!({"id": 0}))
        .expect_error(400, "bad_request");
}

#[test]
fn malformed_bodies_get_400_and_the_error_shape_on_every_route() {
    let cp = ControlPlane::builder().servers(1).start();
    cp.group(1, &[0]);
    let api = cp.api();
    let routes = [
        "/api/groups",
        "/api/groups/1/servers",
        "/api/groups/1/promote",
        "/api/slots/assign",
    ];
    for path in routes {
        api.post_raw(path, "{not json")
            .expect_error(400, "bad_request");
    }
    // Well-formed JSON with a value of the wrong type: docs/api.md says 400 bad_request.
    for (path, body) in [
        ("/api/groups", json!({"id": "one"})),
        ("/api/groups/1/servers", json!({"addr": 7})),
        ("/api/groups/1/promote", json!({"addr": []})),
        (
            "/api/slots/assign",
            json!({"from": "x", "to": 1, "group": 1}),
        ),
    ] {
        api.post(path, &body).expect_error(400, "bad_request");
    }
}

/// Runs `tessera admin --dashboard <addr> --token <token> <args>`.
fn admin(cp: &ControlPlane, args: &[&str]) -> std::process::Output {
    cp.admin_cli(TOKEN, args)
}

#[test]
fn admin_cli_prints_tables_and_json() {
    let cp = ControlPlane::builder().servers(3).proxies(1).start();
    cp.group(1, &[0, 1]);
    cp.group(2, &[2]);
    cp.assign(0, 511, 1);
    cp.assign(512, 1023, 2);

    let groups = cli_stdout(&admin(&cp, &["group", "list"]), "group list");
    assert!(groups.contains("GROUP"), "a table with a header:\n{groups}");
    for i in 0..3 {
        assert!(
            groups.contains(&cp.server_addr(i)),
            "lists server {}:\n{groups}",
            cp.server_addr(i)
        );
    }
    assert!(
        groups.contains("master") && groups.contains("replica"),
        "shows roles:\n{groups}"
    );

    let slots = cli_stdout(&admin(&cp, &["slots", "list"]), "slots list");
    assert!(
        slots.contains("0-511") && slots.contains("512-1023"),
        "slot ranges:\n{slots}"
    );

    let proxies = cli_stdout(&admin(&cp, &["proxy", "list"]), "proxy list");
    assert!(
        proxies.contains(&cp.proxies[0].addr().to_string()),
        "lists the proxy:\n{proxies}"
    );

    let overview = cli_stdout(&admin(&cp, &["--json", "overview"]), "--json overview");
    let v: Overview = serde_json::from_str(&overview)
        .unwrap_or_else(|e| panic!("--json overview is not an Overview ({e}):\n{overview}"));
    assert_eq!(v.cluster, cp.options().cluster, "{overview}");
    assert_eq!(v.groups, 2, "{overview}");
    assert_eq!(v.slots_assigned, 1024, "{overview}");
    assert_eq!(v.proxies, 1, "{overview}");

    let groups_json = cli_stdout(
        &admin(&cp, &["--json", "group", "list"]),
        "--json group list",
    );
    let g: Vec<GroupView> =
        serde_json::from_str(&groups_json).expect("group list --json is a list of groups");
    assert_eq!(g.len(), 2, "{groups_json}");

    // A refusal exits non-zero with the API's message and code.
    let out = admin(&cp, &["group", "delete", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "deleting a group with slots must fail"
    );
    assert!(
        stderr.contains("not empty") && stderr.contains("409"),
        "the API's message and status: {stderr}"
    );
}

/// The value of the sample `name{labels}` in Prometheus text, if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn proxy_metrics_count_every_command() {
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 511, 1);
    let epoch = cp.assign(512, 1023, 2);
    let proxy = &cp.proxies[0];
    let mut session = proxy.raw();
    let keys: Vec<String> = (0..2).flat_map(|h| keys_on(h, "metrics:", 6)).collect();
    for key in &keys {
        assert_eq!(session.cmd(&["SET", key, "v"]), Frame::Simple("OK".into()));
    }
    for key in keys.iter().take(5) {
        assert_eq!(session.cmd(&["GET", key]), Frame::bulk("v"));
    }

    let text = proxy.metrics();
    assert_eq!(
        sample(&text, "tessera_commands_total{command=\"set\"}"),
        Some(keys.len() as f64),
        "{} SETs counted:\n{text}",
        keys.len()
    );
    assert_eq!(
        sample(&text, "tessera_commands_total{command=\"get\"}"),
        Some(5.0),
        "5 GETs counted:\n{text}"
    );
    assert_eq!(
        sample(&text, "tessera_slot_table_epoch"),
        Some(epoch as f64),
        "the epoch in force:\n{text}"
    );
    let stats: ProxyStats = proxy.admin().get("/api/proxy/stats").ok_as();
    let set = stats
        .commands
        .iter()
        .find(|c| c.command == "set")
        .unwrap_or_else(|| panic!("stats count SET: {stats:?}"));
    assert_eq!(set.calls, keys.len() as u64, "{stats:?}");

    let dashboard = cp.api().without_token().get("/metrics");
    assert_eq!(dashboard.status, 200, "{}", dashboard.body);
    assert_eq!(
        sample(&dashboard.body, "tessera_slots_assigned{cluster=\"testc\"}"),
        Some(1024.0),
        "dashboard metrics:\n{}",
        dashboard.body
    );
}

const NO_PROMTOOL: &str = "promtool is not installed, so the metrics cannot be checked: \
    install it (Debian/Ubuntu: apt-get install prometheus, as tools/test.sh does; or put a \
    Prometheus release's promtool on PATH)";

/// Runs `promtool check metrics` on `text`.
///
/// # Panics
/// If promtool is not installed: this check is the test's whole point, so a missing tool
/// fails it rather than letting it pass unchecked.
pub(crate) fn promtool_check(text: &str) -> std::process::Output {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{NO_PROMTOOL}"),
        Err(e) => panic!("spawning promtool: {e}"),
    };
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .expect("writing to promtool");
    let exited = wait_until(Duration::from_secs(30), || {
        child.try_wait().expect("try_wait").is_some()
    });
    if !exited {
        let _ = child.kill();
    }
    child.wait_with_output().expect("promtool output")
}

#[test]
fn metrics_pass_promtool_check() {
    // Fail before starting a cluster, not after.
    if let Err(e) = Command::new("promtool").arg("--version").output() {
        panic!("{NO_PROMTOOL} ({e})");
    }
    let cp = ControlPlane::builder().servers(2).proxies(1).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    let mut session = cp.proxies[0].raw();
    for i in 0..20 {
        let key = format!("promtool:{i}");
        assert_eq!(session.cmd(&["SET", &key, "v"]), Frame::Simple("OK".into()));
        assert_eq!(session.cmd(&["GET", &key]), Frame::bulk("v"));
    }
    assert!(session.cmd(&["NOSUCHCOMMAND"]).error().is_some());
    // Wait for a health round so the dashboard has server gauges to show.
    let api = cp.api();
    assert!(wait_until(Duration::from_secs(5), || {
        api.get("/api/groups").ok_as::<Vec<GroupView>>()[0].servers[0].up
    }));

    let texts = [
        ("proxy", cp.proxies[0].metrics()),
        ("dashboard", api.get("/metrics").body),
    ];
    for (what, text) in &texts {
        let out = promtool_check(text);
        assert!(
            out.status.success(),
            "promtool check metrics on the {what}'s /metrics exited {}:\n{}{}\n--- metrics:\n{text}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
