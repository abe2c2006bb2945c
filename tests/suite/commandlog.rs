//! SLOWLOG and COMMANDLOG answered by the proxy from its own measurements, with real
//! redis-servers behind it and real clients (raw RESP, the redis crate): what each entry holds,
//! ids and order, LEN and RESET, a slow script, large requests and replies, a hostile client's
//! entries staying bounded, and the cluster's log merged by the dashboard across two proxies.

use std::collections::HashSet;

use redis::Value as RValue;
use tessera_wire::telemetry::{ClusterLog, LogSettings, ProxyLog};

use crate::support::{
    Cluster, ClusterProxy, ControlPlane, Frame, RawClient, RedisServer, tessera_bin,
};
use crate::support::{free_port, run_with_timeout};

/// Every command is slow enough for the slow log.
const LOG_ALL: &str = "slowlog_log_slower_than = 0\nadmin_commands = true\n";

fn int(f: &Frame) -> i64 {
    match f {
        Frame::Integer(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn items(f: &Frame) -> &[Frame] {
    match f {
        Frame::Array(v) => v,
        other => panic!("expected an array, got {other:?}"),
    }
}

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

/// One entry's arguments as strings.
fn args(entry: &Frame) -> Vec<String> {
    items(&items(entry)[3]).iter().map(text).collect()
}

/// The address the proxy sees for this client (`CLIENT INFO`'s `addr=`).
fn client_addr(raw: &mut RawClient) -> String {
    let info = raw
        .cmd(&["CLIENT", "INFO"])
        .text()
        .expect("CLIENT INFO text");
    info.split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .expect("addr= in CLIENT INFO")
        .to_string()
}

#[test]
fn threshold_zero_logs_every_command_with_its_arguments_client_and_name_newest_first() {
    let cluster = Cluster::with_config(LOG_ALL);
    let mut raw = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["SLOWLOG", "RESET"]), Frame::Simple("OK".into()));
    assert_eq!(
        raw.cmd(&["CLIENT", "SETNAME", "reporter"]),
        Frame::Simple("OK".into())
    );
    let addr = client_addr(&mut raw);
    raw.cmd(&["SET", "user:1", "ada"]);
    raw.cmd(&["GET", "user:1"]);
    raw.cmd(&["MGET", "user:1", "user:2", "user:3"]);

    let got = raw.cmd(&["SLOWLOG", "GET", "3"]);
    let entries = items(&got);
    assert_eq!(entries.len(), 3);
    assert_eq!(args(&entries[0]), ["MGET", "user:1", "user:2", "user:3"]);
    assert_eq!(args(&entries[1]), ["GET", "user:1"]);
    assert_eq!(args(&entries[2]), ["SET", "user:1", "ada"]);
    let ids: Vec<i64> = entries.iter().map(|e| int(&items(e)[0])).collect();
    assert!(
        ids[0] == ids[1] + 1 && ids[1] == ids[2] + 1,
        "consecutive ids, newest first: {ids:?}"
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for e in entries {
        let e = items(e);
        assert_eq!(e.len(), 6, "id, time, duration, args, addr, name: {e:?}");
        assert!((now - int(&e[1])).abs() <= 60, "a unix time: {:?}", e[1]);
        assert!(int(&e[2]) >= 0, "a duration in µs");
        assert_eq!(text(&e[4]), addr);
        assert_eq!(text(&e[5]), "reporter");
    }
    // Each command is logged once its reply is complete: the RESET itself, CLIENT SETNAME,
    // CLIENT INFO, the three commands and the GET.
    assert_eq!(int(&raw.cmd(&["SLOWLOG", "LEN"])), 7);
    // The default count is 10, -1 is all, and a bad count is refused in Redis's words.
    assert_eq!(items(&raw.cmd(&["SLOWLOG", "GET"])).len(), 8);
    assert_eq!(items(&raw.cmd(&["SLOWLOG", "GET", "-1"])).len(), 9);
    assert_eq!(
        raw.cmd(&["SLOWLOG", "GET", "-2"]),
        Frame::Error("ERR count should be greater than or equal to -1".into())
    );
    let help = raw.cmd(&["SLOWLOG", "HELP"]);
    assert!(
        matches!(&items(&help)[0], Frame::Simple(l) if l.starts_with("SLOWLOG <subcommand>")),
        "{help:?}"
    );

    assert_eq!(raw.cmd(&["SLOWLOG", "RESET"]), Frame::Simple("OK".into()));
    // The RESET itself is the first entry after it, with the next id.
    let after = raw.cmd(&["SLOWLOG", "GET"]);
    let after = items(&after);
    assert_eq!(after.len(), 1);
    assert_eq!(args(&after[0]), ["SLOWLOG", "RESET"]);
    assert!(int(&items(&after[0])[0]) > ids[0], "ids go on after RESET");
}

#[test]
fn resp3_entries_have_the_same_shape_and_the_redis_crate_reads_them() {
    let cluster = Cluster::with_config(LOG_ALL);
    let mut raw = cluster.proxy.raw();
    raw.cmd(&["HELLO", "3"]);
    raw.cmd(&["SET", "k", "v"]);
    let got = raw.cmd(&["SLOWLOG", "GET", "1"]);
    let e = items(&items(&got)[0]);
    assert_eq!(args(&items(&got)[0]), ["SET", "k", "v"]);
    assert!(matches!(e[0], Frame::Integer(_)) && matches!(e[5], Frame::Bulk(_)));

    // A RESP2 client library parses the entries as it parses Redis's.
    let mut c = cluster.proxy.client();
    let _: () = redis::cmd("SET").arg("k2").arg("v2").query(&mut c).unwrap();
    let v: RValue = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query(&mut c)
        .unwrap();
    let RValue::Array(entries) = v else {
        panic!("an array: {v:?}")
    };
    let RValue::Array(e) = &entries[0] else {
        panic!("an entry array: {entries:?}")
    };
    assert_eq!(e.len(), 6);
    assert_eq!(
        e[3],
        RValue::Array(vec![
            RValue::BulkString(b"SET".to_vec()),
            RValue::BulkString(b"k2".to_vec()),
            RValue::BulkString(b"v2".to_vec()),
        ])
    );
}

#[test]
fn a_slow_script_is_logged_and_a_fast_command_is_not() {
    let cluster = Cluster::with_config("slowlog_log_slower_than = 50000\n");
    let mut raw = cluster.proxy.raw();
    // Busy-loops about 100 ms on the server.
    let script = "local s = redis.call('TIME') local t0 = s[1] * 1000000 + s[2] \
                  while true do local n = redis.call('TIME') \
                  if n[1] * 1000000 + n[2] - t0 >= 100000 then break end end return 1";
    raw.cmd(&["SET", "fast", "1"]);
    assert_eq!(raw.cmd(&["EVAL", script, "0"]), Frame::Integer(1));
    raw.cmd(&["GET", "fast"]);
    let got = raw.cmd(&["SLOWLOG", "GET", "-1"]);
    let entries = items(&got);
    assert_eq!(entries.len(), 1, "only the script: {entries:?}");
    assert_eq!(args(&entries[0])[0], "EVAL");
    assert!(
        int(&items(&entries[0])[2]) >= 100_000,
        "the duration covers the script's 100 ms: {entries:?}"
    );
    // RESET empties the log for everyone: only with admin_commands.
    let refused = raw.cmd(&["SLOWLOG", "RESET"]);
    assert!(
        refused
            .error()
            .is_some_and(|e| e.contains("admin_commands")),
        "{refused:?}"
    );
    assert_eq!(int(&raw.cmd(&["SLOWLOG", "LEN"])), 1);
}

#[test]
fn large_requests_and_replies_are_logged_by_size() {
    let cluster = Cluster::with_config(
        "commandlog_request_larger_than = 1048576\ncommandlog_reply_larger_than = 1048576\n\
         slowlog_log_slower_than = -1\n",
    );
    let mut raw = cluster.proxy.raw();
    let big = "x".repeat(2 << 20);
    raw.cmd(&["SET", "big", &big]);
    raw.cmd(&["SET", "small", "1"]);
    let fetched = raw.cmd(&["GET", "big"]);
    assert_eq!(fetched, Frame::Bulk(big.clone().into_bytes()));
    raw.cmd(&["GET", "small"]);

    let req = raw.cmd(&["COMMANDLOG", "GET", "-1", "large-request"]);
    let req = items(&req);
    assert_eq!(req.len(), 1, "{req:?}");
    let a = args(&req[0]);
    assert_eq!(a[..2], ["SET", "big"]);
    assert_eq!(
        a[2],
        format!("{}... ({} more bytes)", "x".repeat(128), (2 << 20) - 128)
    );
    assert!(
        int(&items(&req[0])[2]) > 2 << 20,
        "the request's size in bytes"
    );

    let rep = raw.cmd(&["COMMANDLOG", "GET", "10", "LARGE-REPLY"]);
    let rep = items(&rep);
    assert_eq!(rep.len(), 1, "{rep:?}");
    assert_eq!(args(&rep[0]), ["GET", "big"]);
    assert!(
        int(&items(&rep[0])[2]) > 2 << 20,
        "the reply's size in bytes"
    );

    assert_eq!(int(&raw.cmd(&["COMMANDLOG", "LEN", "large-reply"])), 1);
    assert_eq!(
        int(&raw.cmd(&["COMMANDLOG", "LEN", "slow"])),
        0,
        "a negative threshold turns the slow log off"
    );
    assert_eq!(
        raw.cmd(&["COMMANDLOG", "LEN", "huge"]),
        Frame::Error(
            "ERR type should be one of the following: slow, large-request, large-reply".into()
        )
    );
    let help = raw.cmd(&["COMMANDLOG", "HELP"]);
    assert!(items(&help).len() > 4, "{help:?}");
}

#[test]
fn a_hostile_client_with_huge_and_many_arguments_gets_bounded_entries() {
    let cluster = Cluster::with_config(LOG_ALL);
    let mut raw = cluster.proxy.raw();
    // 5000 arguments of 1 KiB each (5 MB), then one of 8 MB.
    let value = "v".repeat(1024);
    let mut many: Vec<String> = vec!["RPUSH".into(), "list".into()];
    many.extend((0..5000).map(|i| format!("{i}{value}")));
    assert_eq!(raw.cmd(&many), Frame::Integer(5000));
    let huge = "h".repeat(8 << 20);
    raw.cmd(&["SET", "huge", &huge]);
    let got = raw.cmd(&["SLOWLOG", "GET", "2"]);
    let entries = items(&got);
    let set = args(&entries[0]);
    assert_eq!(set.len(), 3);
    assert_eq!(
        set[2].len(),
        128 + format!("... ({} more bytes)", (8 << 20) - 128).len()
    );
    let rpush = args(&entries[1]);
    assert_eq!(rpush.len(), 32, "31 arguments and how many more");
    assert_eq!(rpush[31], "... (4971 more arguments)");
    let stored: usize = rpush.iter().map(String::len).sum();
    assert!(
        stored < 32 * 160,
        "the entry holds {stored} bytes of arguments"
    );
    for (j, a) in rpush.iter().enumerate().take(31).skip(2) {
        let full = &many[j];
        assert_eq!(
            *a,
            format!("{}... ({} more bytes)", &full[..128], full.len() - 128)
        );
    }
    // The proxy goes on serving this client and others.
    assert_eq!(raw.cmd(&["PING"]), Frame::Simple("PONG".into()));
    assert_eq!(
        cluster.proxy.raw().cmd(&["PING"]),
        Frame::Simple("PONG".into())
    );
}

#[test]
fn the_dashboard_merges_the_logs_of_two_proxies_naming_each_proxy() {
    let mut cp = ControlPlane::builder().servers(2).start();
    cp.split_over_two_groups();
    let dir = tempfile::tempdir().unwrap();
    // The second proxy also logs large requests from 5000 bytes and keeps at most 64.
    let configs = [
        LOG_ALL.to_owned(),
        format!("{LOG_ALL}slowlog_max_len = 64\ncommandlog_request_larger_than = 5000\n"),
    ];
    let opts = cp.options();
    let (cluster, store) = (opts.cluster.clone(), opts.store.clone());
    for (i, text) in configs.iter().enumerate() {
        let config = dir.path().join(format!("proxy{i}.toml"));
        std::fs::write(&config, text).unwrap();
        let config = config.to_str().unwrap();
        let p = ClusterProxy::start_with_args(&cluster, &store, &["--config", config]);
        cp.proxies.push(p);
    }
    let tokens: Vec<String> = cp.proxies.iter().map(|p| p.info().token).collect();
    for (i, p) in cp.proxies.iter().enumerate() {
        let mut raw = p.raw();
        raw.cmd(&["SET", &format!("via:{i}"), "1"]);
    }
    // Each proxy's own log, through its admin API.
    let own: ProxyLog = cp.proxies[0]
        .admin()
        .get("/api/proxy/commandlog?type=slow")
        .ok_as();
    assert!(
        own.entries.iter().any(|e| e.args == ["SET", "via:0", "1"]),
        "{own:?}"
    );

    assert_eq!((own.threshold, own.max_len), (Some(0), 128), "{own:?}");

    let merged: ClusterLog = cp.api().get("/api/commandlog?type=slow").ok_as();
    assert_eq!(merged.proxies, 2, "{merged:?}");
    // Each proxy's settings, as its proxy.toml set them: the console shows them above the log.
    let addrs: Vec<String> = cp.proxies.iter().map(|p| p.info().addr).collect();
    let settings = |t: Option<u64>, len: usize, on: &[String]| LogSettings {
        threshold: t,
        max_len: len,
        proxies: on.to_vec(),
    };
    let mut got = merged.settings.clone();
    got.sort_by_key(|s| s.max_len);
    assert_eq!(
        got,
        [
            settings(Some(0), 64, &addrs[1..]),
            settings(Some(0), 128, &addrs[..1])
        ],
        "{merged:?}"
    );
    let large: ClusterLog = cp.api().get("/api/commandlog?type=large-request").ok_as();
    let mut got = large.settings.clone();
    got.sort_by_key(|s| s.threshold);
    assert_eq!(
        got,
        [
            settings(Some(5000), 128, &addrs[1..]),
            settings(Some(1 << 20), 128, &addrs[..1])
        ],
        "{large:?}"
    );
    let entries = &merged.entries;
    for (i, token) in tokens.iter().enumerate() {
        let set = ["SET".to_owned(), format!("via:{i}"), "1".to_owned()];
        let e = entries
            .iter()
            .find(|e| e.entry.args == set)
            .unwrap_or_else(|| panic!("proxy {i}'s SET in {merged:?}"));
        assert_eq!(&e.proxy, token, "{e:?}");
        assert!(e.entry.client_addr.starts_with("127.0.0.1:"));
    }
    let proxies: HashSet<&str> = entries.iter().map(|e| e.proxy.as_str()).collect();
    assert_eq!(proxies.len(), 2);
    let times: Vec<u64> = entries.iter().map(|e| e.entry.time).collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    // A bad type is a 400 with the reason.
    let m = cp
        .api()
        .get("/api/commandlog?type=huge")
        .expect_error(400, "bad_request");
    assert!(m.contains("large-request"), "{m}");
}

#[test]
fn a_log_longer_than_the_cap_is_refused_at_start_with_the_reason() {
    let backend = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("proxy.toml");
    std::fs::write(&config, "slowlog_max_len = 20000\n").unwrap();
    let out = run_with_timeout(
        std::process::Command::new(tessera_bin())
            .arg("proxy")
            .args(["--listen", &format!("127.0.0.1:{}", free_port())])
            .args(["--backends", &backend.addr().to_string()])
            .arg("--config")
            .arg(&config),
        std::time::Duration::from_secs(20),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("slowlog_max_len"), "{err}");
}
