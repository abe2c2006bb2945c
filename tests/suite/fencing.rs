//! A proxy cut off from the store (here frozen with SIGSTOP, so it cannot renew its
//! registration) must not write with its old table once the dashboard has moved on without
//! it: it fences itself before its registration can expire, the dashboard waits past that
//! before it pushes without the proxy, and when the proxy wakes it refuses what its clients
//! sent until it is registered again with the current table.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_wire::cluster::{Overview, ProxyView};

use crate::migration::{idle, owners};

use crate::support::{ControlPlane, Frame, RawClient, encode, keys_on, slot, wait_until};

#[test]
fn a_proxy_cut_off_from_the_store_fences_itself_and_loses_no_acknowledged_write() {
    let cp = two_groups_and_two_current_proxies();
    let key = keys_on(0, "fence:", 1).remove(0);
    let s = slot(key.as_bytes());
    let (cut, other) = (&cp.proxies[0], &cp.proxies[1]);
    let mut client = RawClient::connect(cut.addr());
    assert_eq!(client.cmd(&["SET", &key, "v1"]), Frame::Simple("OK".into()));

    let frozen = Instant::now();
    freeze_and_move(&cp, s);
    assert!(
        cp.servers[1].has(&key) && !cp.servers[0].has(&key),
        "the key moved"
    );
    let mut c = redis::Client::open(format!("redis://{}", other.addr()))
        .and_then(|c| c.get_connection())
        .expect("the other proxy");
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("v2")
        .query(&mut c)
        .expect("SET through the other proxy");

    // Its client's write was sent while it was frozen; it wakes with its old table.
    client.send(&encode(&["SET", &key, "stale"]));
    std::thread::sleep(Duration::from_millis(100));
    cut.signal("-CONT");
    let reply = client.read_frame();
    eprintln!(
        "frozen for {:.1} s; the woken proxy answered {reply:?}",
        frozen.elapsed().as_secs_f64()
    );
    let now: String = redis::cmd("GET").arg(&key).query(&mut c).expect("GET");
    match &reply {
        Frame::Error(e) => assert!(e.starts_with("TRYAGAIN") && e.contains("store"), "{e}"),
        Frame::Simple(ok) if ok == "OK" => assert_eq!(
            now, "stale",
            "the woken proxy acknowledged a write that is not where the key lives"
        ),
        other => panic!("unexpected reply {other:?}"),
    }
    assert!(
        !cp.servers[0].has(&key),
        "the old owner got a write after the key moved away"
    );
    // It registers again, takes the current table, and serves the key where it lives.
    assert!(
        wait_until(Duration::from_secs(30), || {
            matches!(RawClient::connect(cut.addr()).cmd(&["GET", &key]), Frame::Bulk(v) if v == now.as_bytes())
        }),
        "the woken proxy serves again with the current table\n{}",
        cut.log()
    );
    assert!(cut.log().contains("fenced"), "it says so in its log");
    assert!(!cp.servers[0].has(&key));
}

/// A busy proxy frozen in the middle of its clients' pipelines holds commands it read before
/// the freeze and had not yet written to a server. Woken after the dashboard moved their slot
/// without it, it must not write them to the slot's old owner: they fail (certainly not
/// applied), and every acknowledged increment is counted where the key lives now.
#[test]
fn a_busy_proxy_frozen_mid_pipeline_writes_nothing_to_the_old_owner_when_it_wakes() {
    const CLIENTS: usize = 6;
    const DEPTH: usize = 64;
    let cp = two_groups_and_two_current_proxies();
    let s = slot(b"{frozen}");
    let (cut, other) = (&cp.proxies[0], &cp.proxies[1]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let (addr, stop) = (cut.addr(), stop.clone());
            thread::spawn(move || {
                let key = format!("{{frozen}}:{t}");
                let batch = encode(&["INCR", &key]).repeat(DEPTH);
                let mut client = RawClient::connect(addr);
                client.set_read_timeout(Duration::from_secs(120));
                let (mut acked, mut refused, mut unknown) = (0u64, 0u64, 0u64);
                'run: while !stop.load(Ordering::Relaxed) {
                    if client.try_send(&batch).is_err() {
                        break;
                    }
                    for i in 0..DEPTH {
                        match client.try_read_frame() {
                            Ok(Frame::Integer(_)) => acked += 1,
                            Ok(Frame::Error(e)) if e.starts_with("TRYAGAIN") => refused += 1,
                            // Its connection was closed under it (the dashboard kills a lapsed
                            // proxy's): written or not, the client cannot know.
                            Ok(Frame::Error(e)) if e.starts_with("ERR backend") => unknown += 1,
                            Ok(other) => panic!("INCR answered {other:?}"),
                            Err(_) => {
                                unknown += (DEPTH - i) as u64;
                                break 'run;
                            }
                        }
                    }
                }
                (key, acked, refused, unknown)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let token = cut_token(&cp, cut.addr());
    assert!(
        named_connections(&cp.servers[0], &token) > 0,
        "the busy proxy's backend connections carry its name"
    );
    freeze_and_move(&cp, s);
    let keys: Vec<String> = (0..CLIENTS).map(|t| format!("{{frozen}}:{t}")).collect();
    assert!(
        keys.iter()
            .all(|k| !cp.servers[0].has(k) && cp.servers[1].has(k)),
        "the keys moved"
    );
    // What it froze holding cannot reach a server even if it wrote past its fence check.
    for server in &cp.servers {
        assert_eq!(
            named_connections(server, &token),
            0,
            "the dashboard moved on without the frozen proxy but left its connections open"
        );
    }
    cut.signal("-CONT");
    // What the woken proxy held is answered (refused) at once; then its clients stop.
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let counts: Vec<_> = clients
        .into_iter()
        .map(|c| c.join().expect("client thread"))
        .collect();
    let stale: Vec<&String> = keys.iter().filter(|k| cp.servers[0].has(k)).collect();
    assert!(
        stale.is_empty(),
        "the woken proxy wrote {stale:?} to the slot's old owner after it moved away"
    );
    let mut c = redis::Client::open(format!("redis://{}", other.addr()))
        .and_then(|c| c.get_connection())
        .expect("the other proxy");
    for (key, acked, refused, unknown) in &counts {
        let now: u64 = redis::cmd("GET")
            .arg(key)
            .query::<Option<u64>>(&mut c)
            .expect("GET")
            .unwrap_or(0);
        assert!(
            *acked <= now && now <= acked + unknown,
            "{key} = {now}: {acked} increments acknowledged, {unknown} unknown, {refused} refused"
        );
    }
    eprintln!(
        "a busy proxy frozen and woken after its slot moved (key, acknowledged, refused, unknown): {counts:?}"
    );
}

/// A dashboard that takes over while a proxy is frozen does not know when that proxy's
/// registration went: it waits for it as for one it saw go, and closes its connections on the
/// servers before it moves a slot without it.
#[test]
fn a_successor_dashboard_closes_a_frozen_proxys_connections_before_it_moves_on() {
    let mut cp = two_groups_and_two_current_proxies();
    let key = keys_on(0, "successor:", 1).remove(0);
    let s = slot(key.as_bytes());
    let cut = &cp.proxies[0];
    let mut client = RawClient::connect(cut.addr());
    assert_eq!(client.cmd(&["SET", &key, "v1"]), Frame::Simple("OK".into()));
    let token = cut_token(&cp, cut.addr());
    assert!(named_connections(&cp.servers[0], &token) > 0);
    cut.signal("-STOP");
    assert!(
        wait_until(Duration::from_secs(30), || !registered(&cp, &token)),
        "the frozen proxy's registration never lapsed"
    );
    cp.restart_dashboard();
    move_slot_to_group_2(&cp, s);
    for server in &cp.servers {
        assert_eq!(
            named_connections(server, &token),
            0,
            "the successor moved on without the frozen proxy but left its connections open"
        );
    }
    cp.proxies[0].signal("-CONT");
}

/// An operator takes a proxy that still serves out of pushes (`proxy offline`, meant for one
/// the dashboard cannot reach). Before the call returns the proxy has stopped routing, so a
/// slot moved afterwards without it gets none of its writes; put back online, it serves with
/// the current table.
#[test]
fn a_proxy_taken_offline_while_it_serves_stops_routing_before_pushes_skip_it() {
    let cp = two_groups_and_two_current_proxies();
    let key = keys_on(0, "offline:", 1).remove(0);
    let s = slot(key.as_bytes());
    let off = &cp.proxies[0];
    let mut client = RawClient::connect(off.addr());
    assert_eq!(client.cmd(&["SET", &key, "v1"]), Frame::Simple("OK".into()));
    let token = cut_token(&cp, off.addr());
    assert!(named_connections(&cp.servers[0], &token) > 0);
    let taken = cp
        .api()
        .post_raw(&format!("/api/proxies/{token}/offline"), "");
    assert_eq!(taken.status, 200, "{}", taken.body);
    let refused = |client: &mut RawClient, value: &str| match client.cmd(&["SET", &key, value]) {
        Frame::Error(e) => assert!(e.starts_with("TRYAGAIN"), "{e}"),
        other => panic!("the proxy taken offline still served: {other:?}"),
    };
    refused(&mut client, "v2");
    for server in &cp.servers {
        assert_eq!(
            named_connections(server, &token),
            0,
            "its connections were closed"
        );
    }
    move_slot_to_group_2(&cp, s);
    refused(&mut client, "stale");
    assert!(!cp.servers[0].has(&key), "nothing reached the old owner");
    let back = cp
        .api()
        .post_raw(&format!("/api/proxies/{token}/online"), "");
    assert_eq!(back.status, 200, "{}", back.body);
    assert!(
        wait_until(Duration::from_secs(30), || {
            matches!(RawClient::connect(off.addr()).cmd(&["GET", &key]), Frame::Bulk(v) if v == b"v1")
        }),
        "put back online, it serves the key where it lives\n{}",
        off.log()
    );
    assert!(
        off.log().contains("marked offline"),
        "it says why it is fenced"
    );
}

/// Two groups of one server each, every slot on group 1, and two proxies that have the
/// current table.
fn two_groups_and_two_current_proxies() -> ControlPlane {
    let cp = ControlPlane::builder().servers(2).proxies(2).start();
    cp.group(1, &[0]);
    cp.group(2, &[1]);
    cp.assign(0, 1023, 1);
    for p in &cp.proxies {
        assert!(wait_until(Duration::from_secs(10), || p.epoch()
            == cp.api().get("/api/overview").ok_as::<Overview>().epoch));
    }
    cp
}

/// Freezes the first proxy (its registration stops being renewed and lapses: 10 s TTL), then
/// moves slot `s` to group 2 without it (the dashboard waits until it is surely fenced).
fn freeze_and_move(cp: &ControlPlane, s: u32) {
    let cut = &cp.proxies[0];
    cut.signal("-STOP");
    let token = cut_token(cp, cut.addr());
    assert!(
        wait_until(Duration::from_secs(30), || !registered(cp, &token)),
        "the frozen proxy's registration never lapsed"
    );
    move_slot_to_group_2(cp, s);
}

/// Moves slot `s` to group 2 and waits until the migration is done (without the proxy that is
/// frozen or offline: the dashboard moves on without it).
fn move_slot_to_group_2(cp: &ControlPlane, s: u32) {
    cp.api()
        .post("/api/migrations", &json!({"from": s, "to": s, "group": 2}))
        .ok();
    assert!(
        wait_until(Duration::from_secs(60), || {
            owners(cp)[s as usize] == Some(2) && idle(cp)
        }),
        "the migration finished without the proxy that is out: {}",
        cp.api().get("/api/migrations").body
    );
}

/// The registration token of the proxy listening on `addr`.
fn cut_token(cp: &ControlPlane, addr: std::net::SocketAddr) -> String {
    proxies(cp)
        .into_iter()
        .find(|p| p.addr == addr.to_string())
        .map(|p| p.token)
        .expect("the proxy is registered")
}

/// How many connections on `server` the proxy registered as `token` named its own.
fn named_connections(server: &crate::support::RedisServer, token: &str) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.client())
        .expect("CLIENT LIST");
    let name = format!(
        "name={} ",
        tessera_model::fence::backend_connection_name(token)
    );
    list.lines().filter(|l| l.contains(&name)).count()
}

fn registered(cp: &ControlPlane, token: &str) -> bool {
    // A proxy whose registration lapsed stays listed as lost (`registered: false`).
    proxies(cp).iter().any(|p| p.token == token && p.registered)
}

fn proxies(cp: &ControlPlane) -> Vec<ProxyView> {
    cp.api().get("/api/proxies").ok_as()
}
