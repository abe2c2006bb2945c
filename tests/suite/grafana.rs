//! The shipped Grafana dashboard (ops/grafana/tessera-cluster.json) against a real Prometheus:
//! Prometheus scrapes a real dashboard and real proxies under load, and every query of every
//! panel, with the dashboard's variables filled in as Grafana would, must come back with data.
//! A query naming a metric or label no Tessera process exports, or PromQL that does not parse,
//! fails here. The JSON's shape (ids, grid, data source) is checked too; Grafana itself is not
//! run (it is not packaged for Debian).

use std::collections::BTreeSet;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::alerts::{Exporting, a_cluster_exporting_everything};
use crate::support::{RawClient, bin_from_env, free_port, wait_until};

fn dashboard_json() -> Value {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../ops/grafana/tessera-cluster.json"
    ));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?} is not JSON: {e}"))
}

/// Every panel's queries, as `(panel title, expr)`.
fn queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().expect("a target's expr");
            out.push((
                p["title"].as_str().unwrap_or("").to_owned(),
                expr.to_owned(),
            ));
        }
    }
    out
}

/// `expr` with the dashboard's variables as Grafana fills them with their defaults ("All"
/// for the proxy and cluster pickers) and a rate window of 20 scrapes.
fn filled(expr: &str) -> String {
    let out = expr
        .replace("$__rate_interval", "20s")
        .replace("$proxy_job", "tessera-proxy")
        .replace("$dashboard_job", "tessera-dashboard")
        .replace("$proxy", ".*")
        .replace("$cluster", ".*");
    assert!(
        !out.contains('$'),
        "a variable the test does not know: {expr}"
    );
    out
}

#[test]
fn the_dashboards_json_is_well_formed() {
    let d = dashboard_json();
    assert_eq!(d["uid"], "tessera-cluster");
    let panels = d["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().expect("every panel has a title");
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "id twice: {title}"
        );
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().unwrap(), g["w"].as_u64().unwrap());
        assert!(x + w <= 24, "{title} is wider than the grid");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{title}");
        assert!(
            p["fieldConfig"]["defaults"]["unit"].is_string(),
            "{title} has a unit"
        );
        assert!(p["description"].is_string(), "{title} says what it shows");
        assert!(!p["targets"].as_array().unwrap().is_empty(), "{title}");
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            assert_eq!(
                v["query"]["query"], v["definition"],
                "a picker's query and its definition (what the test asks Prometheus) agree"
            );
        }
    }
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for (title, expr) in queries(&d) {
        for v in ["proxy_job", "dashboard_job", "proxy", "cluster"] {
            if expr.contains(&format!("${v}")) {
                assert!(vars.contains(&v), "{title} uses ${v}, not defined");
            }
        }
    }
}

/// A Prometheus server on loopback scraping `targets` every second; killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(dashboard: &str, proxies: &[String]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let list = |v: &[String]| {
            v.iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n\
             - job_name: tessera-dashboard\n  static_configs:\n  - targets: [{}]\n\
             - job_name: tessera-proxy\n  static_configs:\n  - targets: [{}]\n",
            list(&[dashboard.to_owned()]),
            list(proxies)
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let log = File::create(dir.path().join("log")).unwrap();
        let bin = bin_from_env("PROMETHEUS_BIN", "prometheus");
        let child = Command::new(&bin)
            .arg(format!(
                "--config.file={}",
                dir.path().join("prometheus.yml").display()
            ))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{bin}: {e} (install Debian's prometheus package, as tools/test.sh does, or set PROMETHEUS_BIN)")
            });
        let p = Prometheus { child, port, dir };
        let ready = wait_until(Duration::from_secs(30), || {
            ureq::get(&p.url("/-/ready"))
                .call()
                .is_ok_and(|r| r.status() == 200)
        });
        assert!(ready, "prometheus did not get ready:\n{}", p.log());
        p
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The values of `label` on the series `selector` matches (what Grafana's
    /// `label_values(selector, label)` lists), or the error Prometheus gave.
    fn label_values(&self, selector: &str, label: &str) -> Result<Vec<Value>, String> {
        let data = self.get(
            &format!("/api/v1/label/{label}/values"),
            "match[]",
            selector,
        )?;
        Ok(data.as_array().cloned().unwrap_or_default())
    }

    /// An instant query: its `data.result`, or the error Prometheus gave.
    fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let data = self.get("/api/v1/query", "query", expr)?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// `GET path?param=value` of Prometheus's HTTP API: its `data`, or the error it gave.
    fn get(&self, path: &str, param: &str, value: &str) -> Result<Value, String> {
        let mut r = ureq::get(&self.url(path))
            .config()
            .http_status_as_error(false)
            .build()
            .query(param, value)
            .call()
            .map_err(|e| e.to_string())?;
        let text = r.body_mut().read_to_string().map_err(|e| e.to_string())?;
        let body: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if body["status"] != "success" {
            return Err(body.to_string());
        }
        Ok(body["data"].clone())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends SETs, GETs and one refused command through `proxy` until `stop`.
fn load(proxy: std::net::SocketAddr, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut c = RawClient::connect(proxy);
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let k = format!("g:{}", i % 500);
            c.cmd(&["SET", &k, "v"]);
            c.cmd(&["GET", &k]);
            if i.is_multiple_of(100) {
                c.cmd(&["NO-SUCH-COMMAND"]);
            }
            i += 1;
            thread::sleep(Duration::from_millis(2));
        }
    })
}

#[test]
fn every_panel_of_the_grafana_dashboard_has_data_from_a_real_prometheus() {
    let d = dashboard_json();
    let all = queries(&d);
    assert!(all.len() >= 25, "the dashboard's queries: {all:?}");
    let Exporting {
        cp, with_plugin, ..
    } = &a_cluster_exporting_everything();
    let proxies = vec![
        cp.proxies[0].admin_addr().to_string(),
        with_plugin.admin().to_string(),
    ];
    let prom = Prometheus::start(&cp.dashboard.addr().to_string(), &proxies);
    let stop = Arc::new(AtomicBool::new(false));
    let loads = [
        load(cp.proxies[0].addr(), stop.clone()),
        load(with_plugin.addr(), stop.clone()),
    ];
    // Every target scraped (up == 1 for all three) ...
    let scraped = wait_until(Duration::from_secs(60), || {
        prom.query("up == 1").is_ok_and(|r| r.len() == 3)
    });
    assert!(
        scraped,
        "prometheus scrapes the dashboard and both proxies: {:?}\n{}",
        prom.query("up"),
        prom.log()
    );
    // ... then every query has data (rates need two scrapes in their window), and the
    // numbers are the cluster's: commands/s by proxy names both proxies, each with a rate
    // (asked while the load runs: a scrape delayed on a loaded machine only takes longer).
    let mut empty: Vec<(String, String, String)> = Vec::new();
    let mut by_proxy = Vec::new();
    let answered = wait_until(Duration::from_secs(90), || {
        empty.clear();
        for (title, expr) in &all {
            let q = filled(expr);
            match prom.query(&q) {
                Ok(r) if !r.is_empty() => {}
                Ok(_) => empty.push((title.clone(), q, "no series".into())),
                Err(e) => empty.push((title.clone(), q, e)),
            }
        }
        by_proxy = prom.query(&filled(&all[0].1)).unwrap_or_default();
        let rated = by_proxy.len() == 2
            && by_proxy.iter().all(|s| {
                s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
            });
        empty.is_empty() && rated
    });
    stop.store(true, Ordering::Relaxed);
    for l in loads {
        l.join().expect("load");
    }
    assert!(
        answered,
        "panels whose queries come back empty or refused: {empty:#?}\n\
         commands/s by proxy: {by_proxy:?}"
    );
    // The pickers list the proxies and the cluster.
    for v in d["templating"]["list"].as_array().unwrap() {
        let Some(def) = v["definition"].as_str() else {
            continue;
        };
        let args = def
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("a variable query the test does not know: {def}"));
        let (selector, label) = args
            .rsplit_once(',')
            .expect("label_values(selector, label)");
        let values = prom
            .label_values(&filled(selector.trim()), label.trim())
            .unwrap_or_else(|e| panic!("{def}: {e}"));
        assert!(!values.is_empty(), "the picker {def} lists nothing");
    }
}
