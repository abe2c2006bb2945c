//! The metrics plugin through the SDK's fake host.

use tessera_plugin_sdk::testing::{self, ClientInfo, Harness, Outcome, command};

use crate::Metrics;

fn run(h: &mut Harness<Metrics>, conn: u64, args: &[&str], reply: &[u8], took_us: u64) {
    let ctx = match h.on_command(conn, &command(args)) {
        Outcome::Observe(ctx) => ctx,
        other => panic!("expected OBSERVE, got {other:?}"),
    };
    testing::advance_us(took_us);
    assert_eq!(
        h.on_observed_reply(conn, ctx, reply),
        testing::ReplyOutcome::Pass
    );
}

#[test]
fn commands_are_counted_and_timed_by_command_tenant_and_client() {
    testing::reset();
    let mut h = Harness::<Metrics>::new("{}");
    testing::set_client(1, ClientInfo::new("10.0.0.1:1").name("web"));
    run(&mut h, 1, &["GET", "acme:user:1"], b"$-1\r\n", 250);
    run(&mut h, 1, &["get", "acme:user:2"], b"$1\r\nx\r\n", 750);
    run(&mut h, 2, &["SET", "globex:k", "v"], b"+OK\r\n", 100);
    run(&mut h, 2, &["PING"], b"+PONG\r\n", 10);
    run(&mut h, 2, &["GET", "nodelimiter"], b"$-1\r\n", 10);
    run(
        &mut h,
        2,
        &["INCR", "globex:k"],
        b"-ERR value is not an integer\r\n",
        10,
    );
    assert_eq!(
        testing::counter("commands_total", &["get", "acme", "web"]),
        Some(2)
    );
    assert_eq!(
        testing::counter("commands_total", &["set", "globex", "none"]),
        Some(1)
    );
    assert_eq!(
        testing::counter("commands_total", &["ping", "none", "none"]),
        Some(1)
    );
    assert_eq!(
        testing::counter("commands_total", &["get", "none", "none"]),
        Some(1)
    );
    assert_eq!(
        testing::counter("command_errors_total", &["incr", "globex", "none"]),
        Some(1)
    );
    assert_eq!(
        testing::counter("command_errors_total", &["get", "acme", "web"]),
        Some(0)
    );
    assert_eq!(
        testing::histogram("command_duration_seconds", &["get", "acme"]),
        vec![0.00025, 0.00075]
    );
    // Values are never copied: the plugin needs names and keys only.
    assert!(!h.manifest().copies_values(&command(&["SET", "k", "v"])));
}

#[test]
fn blocked_time_is_recorded_apart_from_latency() {
    testing::reset();
    let mut h = Harness::<Metrics>::new("{}");
    run(&mut h, 1, &["BLPOP", "q", "0"], b"*-1\r\n", 2_000_000);
    run(
        &mut h,
        1,
        &["XREAD", "BLOCK", "100", "STREAMS", "s", "$"],
        b"*-1\r\n",
        100_000,
    );
    run(
        &mut h,
        1,
        &["XREAD", "COUNT", "1", "STREAMS", "s", "0"],
        b"*-1\r\n",
        50,
    );
    run(&mut h, 1, &["WAIT", "1", "10"], b":0\r\n", 10_000);
    assert_eq!(
        testing::histogram("command_blocked_seconds", &["blpop", "none"]),
        vec![2.0]
    );
    assert_eq!(
        testing::histogram("command_duration_seconds", &["blpop", "none"]),
        Vec::<f64>::new()
    );
    assert_eq!(
        testing::histogram("command_blocked_seconds", &["xread", "none"]),
        vec![0.1]
    );
    assert_eq!(
        testing::histogram("command_duration_seconds", &["xread", "none"]),
        vec![0.00005]
    );
    assert_eq!(
        testing::histogram("command_blocked_seconds", &["wait", "none"]),
        vec![0.01]
    );
    assert_eq!(
        testing::counter("commands_total", &["blpop", "none", "none"]),
        Some(1)
    );
}

#[test]
fn tenants_and_clients_are_capped_and_client_info_is_cached() {
    testing::reset();
    let mut h =
        Harness::<Metrics>::new(r#"{"max_tenants": 2, "max_clients": 1, "tenant_delimiter": "/"}"#);
    testing::set_client(1, ClientInfo::new("10.0.0.1:1").name("a"));
    testing::set_client(2, ClientInfo::new("10.0.0.1:2").name("b"));
    for t in ["t1/x", "t2/x", "t3/x", "t4/x"] {
        run(&mut h, 1, &["GET", t], b"$-1\r\n", 1);
    }
    run(&mut h, 2, &["GET", "t1/y"], b"$-1\r\n", 1);
    assert_eq!(
        testing::counter("commands_total", &["get", "t1", "a"]),
        Some(1)
    );
    assert_eq!(
        testing::counter("commands_total", &["get", "other", "a"]),
        Some(2)
    );
    assert_eq!(
        testing::counter("commands_total", &["get", "t1", "other"]),
        Some(1)
    );
    assert_eq!(testing::client_info_calls(), 2, "once per connection");
    // CLIENT SETNAME: the name is looked up again after it.
    run(&mut h, 1, &["CLIENT", "SETNAME", "z"], b"+OK\r\n", 1);
    run(&mut h, 1, &["GET", "t1/x"], b"$-1\r\n", 1);
    assert_eq!(testing::client_info_calls(), 3);
}

#[test]
fn the_hot_path_resolves_each_series_once() {
    testing::reset();
    let mut h = Harness::<Metrics>::new(r#"{"client_names": false}"#);
    for _ in 0..100 {
        run(&mut h, 1, &["GET", "acme:1"], b"$-1\r\n", 1);
    }
    assert_eq!(h.plugin().slots.len(), 1);
    assert_eq!(
        testing::counter("commands_total", &["get", "acme", "all"]),
        Some(100)
    );
    assert_eq!(testing::client_info_calls(), 0);
}

#[test]
fn bad_configs_are_refused() {
    let err = |c: &str| Harness::<Metrics>::try_new(c).unwrap_err();
    assert_eq!(
        err(r#"{"tenant_delimiter": ""}"#),
        "metrics: tenant_delimiter must not be empty"
    );
    assert_eq!(
        err(r#"{"latency_buckets": [1, 0.5]}"#),
        "metrics: latency_buckets must increase"
    );
    assert!(err(r#"{"tenants": 3}"#).starts_with("metrics: bad config: unknown field `tenants`"));
}

#[global_allocator]
static ALLOC: testing::CountingAlloc = testing::CountingAlloc;

#[test]
fn observing_a_known_command_allocates_nothing() {
    testing::reset();
    let mut h = Harness::<Metrics>::new("{}");
    testing::set_client(1, ClientInfo::new("10.0.0.1:1").name("web"));
    let get = command(&["GET", "acme:user:1"]);
    run(&mut h, 1, &["GET", "acme:user:1"], b"$-1\r\n", 1); // first: resolves the series
    let before = testing::allocations();
    for _ in 0..100 {
        assert!(matches!(h.on_command(1, &get), Outcome::Observe(_)));
    }
    assert_eq!(testing::allocations() - before, 0);
}
