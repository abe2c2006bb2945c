//! `tessera up` itself: a SIGINT or SIGTERM at any step of its set-up (servers starting, the
//! dashboard being set up, proxies loading plugins, the console) stops every child it started
//! and exits; a SIGKILL of it stops them too (the kernel's parent-death signal); and a server port it remembered, now held by another process, is named in a
//! clear error rather than taken for its own server; SIGHUP restarts its proxies under load
//! without a failed or lost write; a dashboard, proxy or console that dies is started again.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::{Api, Up, consecutive_free_ports, free_port};

/// Arguments for a `tessera up` on free ports.
fn up_args() -> Vec<String> {
    let proxy = consecutive_free_ports(2);
    let admin = consecutive_free_ports(2);
    [
        ("--port", proxy),
        ("--dashboard-port", free_port()),
        ("--admin-port", admin),
        ("--console-port", free_port()),
    ]
    .iter()
    .flat_map(|(k, v)| [(*k).to_owned(), v.to_string()])
    .collect()
}

/// Whether process `pid` still exists and is not a zombie. (Its PID being reused within the
/// test's seconds is unlikely enough; its command line cannot tell, as a child seen between
/// fork and exec still shows its parent's.)
fn still_runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // `pid (comm) state …`: the state follows the last `)`.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Starts `tessera up`, sends it `sig` as soon as it has a child whose command line contains
/// `stage`, and checks that it exits and that every child it ever had is gone.
fn signal_during(stage: &str, sig: &str) {
    let data = tempfile::tempdir().expect("temp dir");
    let mut up = Up::spawn(data.path(), &up_args());
    let mut seen: BTreeMap<u32, String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let reached = loop {
        seen.extend(up.children());
        if seen.values().any(|c| c.contains(stage)) {
            break true;
        }
        if Instant::now() > deadline
            || up
                .line(Duration::ZERO, |l| l.contains("tessera is up"))
                .is_some()
        {
            break false;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        reached,
        "tessera up never started a {stage:?} child: {seen:?}\n{}",
        up.output()
    );
    let status = up.signal_and_wait(sig, Duration::from_secs(60));
    assert!(
        status.is_some(),
        "tessera up still runs 60 s after {sig} while starting {stage}\n{}",
        up.output()
    );
    assert!(
        !up.output().contains("tessera is up") || stage.contains("console"),
        "the signal came during the set-up\n{}",
        up.output()
    );
    let survivors: Vec<_> = seen.iter().filter(|(pid, _)| still_runs(**pid)).collect();
    assert!(
        survivors.is_empty(),
        "children of tessera up outlived its exit after {sig} at {stage:?}: {survivors:?}\n{}",
        up.output()
    );
    assert!(seen.len() >= 2 || stage.contains("redis"), "{seen:?}");
}

#[test]
fn a_sigkill_of_tessera_up_stops_every_child_it_had() {
    let data = tempfile::tempdir().expect("temp dir");
    let mut up = Up::start_with(data.path(), &up_args());
    let children = up.children();
    // 2 groups of 2 servers, the dashboard, 2 proxies, the console.
    assert!(children.len() >= 8, "{children:?}\n{}", up.output());
    assert!(
        up.signal_and_wait("-KILL", Duration::from_secs(10))
            .is_some(),
        "SIGKILL stops tessera up"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut survivors = children.clone();
    while !survivors.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        survivors.retain(|(pid, _)| still_runs(*pid));
    }
    assert!(
        survivors.is_empty(),
        "children of tessera up outlived its SIGKILL by 30 s: {survivors:?}"
    );
}

#[test]
fn a_signal_while_servers_start_stops_every_child() {
    signal_during("redis-server", "-INT");
}

#[test]
fn a_signal_while_the_dashboard_is_set_up_stops_every_child() {
    // Spaced: a child between fork and exec shows `tessera up`'s own command line, whose
    // `--dashboard-port` would match a bare "dashboard".
    signal_during(" dashboard ", "-TERM");
}

#[test]
fn a_signal_while_proxies_start_stops_every_child() {
    signal_during(" proxy ", "-INT");
}

#[test]
fn a_signal_while_the_console_starts_stops_every_child() {
    signal_during(" console ", "-TERM");
}

#[test]
fn a_remembered_server_port_held_by_another_process_is_named() {
    let data = tempfile::tempdir().expect("temp dir");
    // Something else holds the port `redis-1a` had last time.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("binding");
    let port = squatter.local_addr().unwrap().port();
    let dir = data.path().join("redis-1a");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("port"), port.to_string()).unwrap();
    let mut up = Up::spawn(data.path(), &up_args());
    let mut seen: BTreeMap<u32, String> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        seen.extend(up.children());
        if let Some(s) = up.wait_exit(Duration::from_millis(50)) {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
    };
    let out = up.output();
    let status =
        status.unwrap_or_else(|| panic!("tessera up did not give up on a taken port\n{out}"));
    assert!(!status.success(), "{out}");
    assert!(
        out.contains(&format!("127.0.0.1:{port}")) && out.contains("is taken by"),
        "the error names the port and says it is taken\n{out}"
    );
    let survivors: Vec<_> = seen.iter().filter(|(p, _)| still_runs(**p)).collect();
    assert!(survivors.is_empty(), "{survivors:?}\n{out}");
    drop(squatter);
}

/// SIGHUP restarts `tessera up`'s proxies one at a time (a new one on the same address with
/// `--reuse-port`, then SIGTERM to the old), then its dashboard and its console, under a load
/// of INCRs through both proxies: every one of those processes is replaced, no INCR fails,
/// none is lost or counted twice, and the clients go on through the new processes.
#[test]
fn sighup_restarts_the_proxies_under_load_without_a_failed_or_lost_write() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let data = tempfile::tempdir().expect("temp dir");
    let args = up_args();
    let port: u16 = args[1].parse().expect("--port");
    let up = Up::start_with(data.path(), &args);
    let pids_of = |up: &Up, what: &str| -> Vec<u32> {
        let mut pids: Vec<u32> = up
            .children()
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(what))
            .map(|(pid, _)| pid)
            .collect();
        pids.sort_unstable();
        pids
    };
    let before = pids_of(&up, " proxy ");
    assert_eq!(before.len(), 2, "{}", up.output());
    let dashboard_before = pids_of(&up, " dashboard ");
    assert_eq!(dashboard_before.len(), 1, "{}", up.output());
    let console_before = pids_of(&up, " console ");
    assert_eq!(console_before.len(), 1, "{}", up.output());

    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|i| {
            let url = format!("redis://127.0.0.1:{}/", port + (i % 2));
            let (stop, restarted) = (stop.clone(), restarted.clone());
            std::thread::spawn(move || crate::shutdown::incr_client(url, stop, restarted))
        })
        .collect();
    // redis-py and ioredis with their usual reconnect settings, one on each proxy, and
    // node-redis in RESP3 with maintenance notifications and no reconnect at all.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/clients");
    let stop_file = data.path().join("stop-clients");
    let apps: Vec<_> = [
        ("/usr/bin/python3", "redis_py_incr.py", "up:py", port),
        ("node", "ioredis_incr.js", "up:io", port + 1),
        // RESP3 with maintenance notifications and no reconnect: moved by MOVING pushes.
        ("node", "node_redis_incr.js", "up:nr", port),
    ]
    .into_iter()
    .map(|(program, script, key, on)| {
        let child = std::process::Command::new(program)
            .current_dir(dir)
            .args([script, &format!("127.0.0.1:{on}"), key])
            .arg(&stop_file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} {script}: {e}"));
        (script, key, child)
    })
    .collect();
    // Every client is connected to the old proxies and writing before the restart starts:
    // one that connected later could land on a successor (the kernel spreads connections over
    // both) and never see a restart at all.
    let mut probe = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("a connection to the proxy");
    let writing = crate::support::wait_until(Duration::from_secs(30), || {
        apps.iter().all(|(_, key, _)| {
            redis::cmd("GET")
                .arg(*key)
                .query::<Option<u64>>(&mut probe)
                .ok()
                .flatten()
                .is_some_and(|n| n > 0)
        })
    });
    assert!(writing, "the Python and Node clients never started writing");
    drop(probe);
    std::thread::sleep(Duration::from_millis(500));
    up.signal("-HUP");
    let done = up.line(Duration::from_secs(120), |l| {
        l.starts_with("proxies restarted")
    });
    assert!(done.is_some(), "{}", up.output());
    restarted.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    std::fs::write(&stop_file, b"").expect("the stop file");
    let mut answered = 0;
    for c in clients {
        let (ok, after, _, errors) = c.join().expect("a client");
        assert!(errors.is_empty(), "error replies: {errors:?}");
        assert!(after > 0, "a client was served by the new proxies");
        answered += ok;
    }
    let after = pids_of(&up, " proxy ");
    assert_eq!(after.len(), 2, "{}", up.output());
    let dashboard_after = pids_of(&up, " dashboard ");
    assert!(
        dashboard_after.len() == 1 && dashboard_after != dashboard_before,
        "the dashboard was replaced: {dashboard_before:?} then {dashboard_after:?}"
    );
    let console_after = pids_of(&up, " console ");
    assert!(
        console_after.len() == 1 && console_after != console_before,
        "the console was replaced: {console_before:?} then {console_after:?}"
    );
    assert!(
        after.iter().all(|p| !before.contains(p)),
        "every proxy process was replaced: {before:?} then {after:?}"
    );
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("a connection to the new proxy");
    let counter: u64 = redis::cmd("GET")
        .arg("upgrade:counter")
        .query(&mut c)
        .expect("GET");
    assert_eq!(counter, answered, "INCRs answered");
    for (script, key, child) in apps {
        let out = crate::support::wait_output(child, Duration::from_secs(60), script);
        let text = String::from_utf8_lossy(&out.stdout);
        let counts: Vec<u64> = text
            .lines()
            .find_map(|l| l.strip_prefix("answered "))
            .unwrap_or_else(|| panic!("{script}: {text}"))
            .split(" failed ")
            .map(|n| n.trim().parse().expect("a count"))
            .collect();
        assert_eq!(counts[1], 0, "{script} saw failures: {text}");
        if script == "node_redis_incr.js" {
            let moved: u64 = text
                .lines()
                .find_map(|l| l.strip_prefix("moved "))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{script}: {text}"));
            assert!(moved >= 1, "{script} was never told MOVING: {text}");
        }
        assert!(counts[0] > 0, "{script}: {text}");
        let held: u64 = redis::cmd("GET").arg(key).query(&mut c).expect("GET");
        assert_eq!(
            held, counts[0],
            "{script}: its INCRs answered, each counted once"
        );
    }
}

/// `tessera up` supervises what it started: a dashboard, a proxy and the console killed with
/// SIGKILL are each started again on their ports (a dashboard whose lock lapsed in a store
/// outage stops the same way), and the cluster serves and takes changes after.
#[test]
fn a_dashboard_proxy_or_console_that_dies_is_started_again() {
    let data = tempfile::tempdir().expect("temp dir");
    let args = up_args();
    let port: u16 = args[1].parse().expect("--port");
    let dashboard_port: u16 = args[3].parse().expect("--dashboard-port");
    let console_port: u16 = args[7].parse().expect("--console-port");
    let up = Up::start_with(data.path(), &args);
    let pid_of = |what: &str, also: &str| -> Option<u32> {
        up.children()
            .into_iter()
            .find(|(_, cmd)| cmd.contains(what) && cmd.contains(also))
            .map(|(pid, _)| pid)
    };
    let http_ok = |port: u16| {
        move || Api::new(std::net::SocketAddr::from(([127, 0, 0, 1], port)), None).healthy()
    };
    for (what, also, answers) in [
        (
            " dashboard ",
            "",
            Box::new(http_ok(dashboard_port)) as Box<dyn Fn() -> bool>,
        ),
        (
            " proxy ",
            &format!("127.0.0.1:{port}"),
            Box::new(move || crate::support::answers_on(port)),
        ),
        (" console ", "", Box::new(http_ok(console_port))),
    ] {
        let pid = pid_of(what, also).unwrap_or_else(|| panic!("no{what}child: {}", up.output()));
        let kill = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(kill.success());
        let line = up
            .line(Duration::from_secs(30), |l| {
                l.contains(&format!("(pid {pid}) exited")) && l.contains("started again")
            })
            .unwrap_or_else(|| panic!("up did not start{what}again: {}", up.output()));
        // Between fork and exec a child still shows `tessera up`'s command line.
        assert!(
            crate::support::wait_until(Duration::from_secs(10), || {
                pid_of(what, also).is_some_and(|n| n != pid)
            }),
            "{line}: {:?}",
            up.children()
        );
        assert!(
            crate::support::wait_until(Duration::from_secs(60), &*answers),
            "{what}answers again after: {line}\n{}",
            up.output()
        );
    }
    // The restarted dashboard holds the cluster's lock and answers with it; the proxy serves.
    let token = std::fs::read_to_string(data.path().join("admin-token"))
        .unwrap_or_else(|e| panic!("the first cluster's admin-token: {e}"));
    let api = Api::new(
        std::net::SocketAddr::from(([127, 0, 0, 1], dashboard_port)),
        Some(token.trim()),
    );
    assert_eq!(api.get("/api/overview").status, 200);
    let mut c =
        crate::support::RawClient::connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(
        c.cmd(&["SET", "revived", "yes"]),
        crate::support::Frame::Simple("OK".into())
    );
    assert_eq!(
        c.cmd(&["GET", "revived"]),
        crate::support::Frame::bulk("yes")
    );
}
