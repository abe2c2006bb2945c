//! Plugins written in C and AssemblyScript (`sdk/c`, `sdk/assemblyscript`), as a proxy runs
//! them: the built `.wasm` modules (`sdk/build-languages.sh`, run by tools/test.sh) loaded by a
//! real `tessera proxy` over real redis-servers. The filter denies what its config says and
//! nothing reaches Redis, in a pipeline too (the SDKs' `tp_on_commands`), and a write no rule
//! touches never enters it (the SDKs' gate); the metrics plugin's
//! counters and histograms appear on /metrics under the plugin's name.

use serde_json::json;

use crate::support::{Frame, Proxy, RedisServer, encode, metric, plugin_toml};

fn error_of(f: &Frame) -> String {
    f.error()
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("expected an error reply, got {f:?}"))
}

#[test]
fn the_filter_in_c_and_assemblyscript_denies_through_a_proxy_and_nothing_reaches_redis() {
    for name in ["filter_c", "filter_as"] {
        let a = RedisServer::start();
        let b = RedisServer::start();
        let config = json!({
            "deny_commands": ["FLUSHALL", "CONFIG SET"],
            "read_only_keys": ["frozen:*"],
            "max_value_bytes": 100,
        });
        // Cluster-wide admin commands allowed, so that FLUSHALL reaches the plugin (the proxy
        // refuses it by default before any plugin runs).
        let proxy = Proxy::builder(&[&a, &b])
            .config(&format!(
                "admin_commands = true\n{}",
                plugin_toml(name, &config, "")
            ))
            .admin()
            .start();
        let mut c = proxy.raw();
        assert_eq!(
            error_of(&c.cmd(&["flushall"])),
            "ERR command 'FLUSHALL' is not allowed",
            "{name}"
        );
        assert_eq!(
            error_of(&c.cmd(&["SET", "frozen:1", "x"])),
            "ERR key 'frozen:1' is read-only",
            "{name}"
        );
        let big = "v".repeat(200);
        assert_eq!(
            error_of(&c.cmd(&["SET", "k", &big])),
            "ERR value is larger than 100 bytes",
            "{name}"
        );
        assert_eq!(c.cmd(&["SET", "k", "small"]), Frame::Simple("OK".into()));
        assert_eq!(c.cmd(&["GET", "frozen:1"]), Frame::NullBulk, "{name}");
        assert!(!a.has("frozen:1") && !b.has("frozen:1"), "{name}");

        // A pipeline: the hooked SETs reach the plugin in one batch call; each answer is the
        // one it would get alone, in order.
        let mut pipeline = Vec::new();
        for i in 0..32 {
            let key = if i % 4 == 0 {
                format!("frozen:{i}")
            } else {
                format!("p{i}")
            };
            pipeline.extend(encode(&["SET", &key, "v"]));
        }
        c.send(&pipeline);
        for i in 0..32 {
            let reply = c.read_frame();
            if i % 4 == 0 {
                assert_eq!(
                    error_of(&reply),
                    format!("ERR key 'frozen:{i}' is read-only")
                );
            } else {
                assert_eq!(reply, Frame::Simple("OK".into()), "{name} #{i}");
            }
        }
        assert_eq!(a.dbsize() + b.dbsize(), 1 + 24, "{name}");
        let m = proxy.metrics();
        let batches = metric(
            &m,
            &format!("tessera_plugin_batches_total{{plugin=\"{name}\"}}"),
        );
        assert!(
            batches.is_some_and(|n| n >= 1.0),
            "{name}: no batch call\n{m}"
        );
        // Its gate (read-only prefixes, the value bound) kept every write no rule touches
        // from it: FLUSHALL, the two refused SETs and the pipeline's 8 frozen keys only.
        assert_eq!(
            metric(
                &m,
                &format!("tessera_plugin_calls_total{{plugin=\"{name}\"}}"),
            ),
            Some(11.0),
            "{name}\n{m}"
        );
        let faults: f64 = ["trap", "cpu_budget", "memory", "bad_output"]
            .iter()
            .filter_map(|r| {
                metric(
                    &m,
                    &format!("tessera_plugin_faults_total{{plugin=\"{name}\",reason=\"{r}\"}}"),
                )
            })
            .sum();
        assert_eq!(faults, 0.0, "{name}\n{m}");
    }
}

#[test]
fn the_metrics_plugin_in_c_and_assemblyscript_counts_through_a_proxy() {
    for name in ["metrics_c", "metrics_as"] {
        let a = RedisServer::start();
        let proxy = Proxy::builder(&[&a])
            .config(&plugin_toml(name, &json!({"client_names": false}), ""))
            .admin()
            .start();
        let mut c = proxy.raw();
        assert_eq!(c.cmd(&["SET", "acme:1", "x"]), Frame::Simple("OK".into()));
        assert_eq!(c.cmd(&["GET", "acme:1"]), Frame::bulk("x"));
        assert_eq!(c.cmd(&["GET", "acme:2"]), Frame::NullBulk);
        // An error reply from Redis, counted as one.
        error_of(&c.cmd(&["INCR", "acme:1"]));
        let m = proxy.metrics();
        let series = |s: &str| metric(&m, &format!("tessera_plugin_{name}_{s}"));
        assert_eq!(
            series("commands_total{command=\"get\",tenant=\"acme\",client=\"all\"}"),
            Some(2.0),
            "{name}\n{m}"
        );
        assert_eq!(
            series("command_errors_total{command=\"incr\",tenant=\"acme\",client=\"all\"}"),
            Some(1.0),
            "{name}\n{m}"
        );
        assert_eq!(
            series("command_duration_seconds_count{command=\"set\",tenant=\"acme\"}"),
            Some(1.0),
            "{name}\n{m}"
        );
        assert!(
            m.contains(&format!(
                "# TYPE tessera_plugin_{name}_command_duration_seconds histogram"
            )),
            "{name}\n{m}"
        );
    }
}
