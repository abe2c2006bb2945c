//! A server busy with a script, through the proxy as directly: the other clients' commands get
//! the server's own `-BUSY` (not a wait behind the script, not a connection error), `PING`
//! reaches the servers when `forward_ping` is set, and `SCRIPT KILL` frees it (docs/sessions.md,
//! "A server busy with a script").

use std::thread;
use std::time::{Duration, Instant};

use crate::support::{Cluster, Frame, RawClient, encode, keys_on};

fn error_of(f: &Frame) -> String {
    f.error()
        .unwrap_or_else(|| panic!("expected an error, got {f:?}"))
        .to_owned()
}

/// Both servers answer `-BUSY` 100 ms into a script (Redis's default is 5 s).
pub(crate) fn quick_busy(cluster: &Cluster) {
    for b in &cluster.backends {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("busy-reply-threshold")
            .arg("100")
            .query(&mut b.client())
            .unwrap();
    }
}

/// A client running an endless script on backend 0 (a keyless `EVAL` runs where slot 0 lives),
/// once the server says it is busy.
fn busy_backend_0(cluster: &Cluster) -> RawClient {
    let mut busy = cluster.proxy.raw();
    busy.send(&encode(&["EVAL", "while true do end", "0"]));
    wait_busy(cluster);
    busy
}

/// Until backend 0 answers a direct PING with `-BUSY`.
fn wait_busy(cluster: &Cluster) {
    let mut direct = cluster.backends[0].client();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r: redis::RedisResult<String> = redis::cmd("PING").query(&mut direct);
        match r {
            Err(e) if e.to_string().contains("BUSY") => return,
            _ if Instant::now() > deadline => panic!("the script never made its server busy"),
            _ => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Kills the script and checks its client is told, then that `key` is served again.
fn kill_and_recover(cluster: &Cluster, busy: &mut RawClient, c: &mut RawClient, key: &str) {
    let mut killer = cluster.proxy.raw();
    assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), Frame::Simple("OK".into()));
    let e = error_of(&busy.read_frame());
    assert!(e.contains("killed"), "{e}");
    // A connection refused at login while busy tries again within 25 ms.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.cmd(&["SET", key, "after"]) {
            Frame::Simple(s) if s == "OK" => break,
            other if Instant::now() > deadline => panic!("not served after the kill: {other:?}"),
            _ => thread::sleep(Duration::from_millis(20)),
        }
    }
    assert_eq!(c.cmd(&["GET", key]), Frame::bulk("after"));
}

#[test]
fn a_command_to_a_server_busy_with_a_script_gets_its_busy_answer() {
    // One worker thread: every client shares its one connection to each server.
    let cluster = Cluster::start_with(|b| b.threads(1));
    quick_busy(&cluster);
    let on_busy = &keys_on(0, "busy", 1)[0];
    let on_free = &keys_on(1, "free", 1)[0];
    let mut busy = busy_backend_0(&cluster);

    let mut c = cluster.proxy.raw();
    let started = Instant::now();
    let e = error_of(&c.cmd(&["SET", on_busy, "1"]));
    assert!(e.starts_with("BUSY "), "Redis's own answer, got {e}");
    // Answered now, not after the script: the shared connection was not behind it. (A bound
    // far above the expected few ms; the script runs until killed.)
    assert!(started.elapsed() < Duration::from_secs(5));
    // The other server is not busy, and PING is the proxy's own by default.
    assert_eq!(c.cmd(&["SET", on_free, "1"]), Frame::Simple("OK".into()));
    assert_eq!(c.cmd(&["PING"]), Frame::Simple("PONG".into()));
    kill_and_recover(&cluster, &mut busy, &mut c, on_busy);

    // Scripts pipelined with other commands keep their client's order, whether a script
    // starts the batch (the batch's later commands to its server follow it on its
    // connection) or not (it stays on the shared one).
    let get = "return redis.call('GET', KEYS[1])";
    let set = "redis.call('SET', KEYS[1], ARGV[1]); return 1";
    let mut pipeline = Vec::new();
    for cmd in [
        vec!["EVAL", set, "1", on_busy, "s"],
        vec!["GET", on_busy],
        vec!["SET", on_free, "f"],
        vec!["MULTI"],
        vec!["INCR", on_busy],
        vec!["EXEC"],
        vec!["SET", on_busy, "t"],
        vec!["EVAL", get, "1", on_busy],
        vec!["MGET", on_busy, on_free],
    ] {
        pipeline.extend(encode(&cmd));
    }
    c.send(&pipeline);
    let got: Vec<Frame> = (0..9).map(|_| c.read_frame()).collect();
    let ok = || Frame::Simple("OK".into());
    let multi_bulk = Frame::Array(vec![Frame::bulk("t"), Frame::bulk("f")]);
    assert_eq!(
        got,
        vec![
            Frame::Integer(1),
            Frame::bulk("s"),
            ok(),
            ok(),
            Frame::Simple("QUEUED".into()),
            Frame::Array(vec![Frame::Error(
                "ERR value is not an integer or out of range".into()
            )]),
            ok(),
            Frame::bulk("t"),
            multi_bulk,
        ]
    );

    // Redis's own test: a script and a PING pipelined behind it; another client meanwhile
    // gets -BUSY, and after the kill the PING is answered, after the script's error.
    let mut rd = cluster.proxy.raw();
    let mut pipeline = encode(&["EVAL", "while 1 do redis.call('ping') end", "0"]);
    pipeline.extend(encode(&["GET", on_busy]));
    rd.send(&pipeline);
    wait_busy(&cluster);
    let e = error_of(&c.cmd(&["SET", on_busy, "2"]));
    assert!(e.starts_with("BUSY "), "{e}");
    kill_and_recover(&cluster, &mut rd, &mut c, on_busy);
    // Run on the script's server connection as soon as the script ended, before the SET.
    assert_eq!(rd.read_frame(), Frame::bulk("t"));
}

#[test]
fn forward_ping_answers_busy_as_the_server_does() {
    let cluster = Cluster::start_with(|b| b.threads(1).config("forward_ping = true\n"));
    quick_busy(&cluster);
    let mut c = cluster.proxy.raw();
    assert_eq!(c.cmd(&["PING"]), Frame::Simple("PONG".into()));
    assert_eq!(c.cmd(&["PING", "hi"]), Frame::bulk("hi"));
    let e = error_of(&c.cmd(&["PING", "a", "b"]));
    assert!(e.contains("wrong number of arguments"), "{e}");

    let mut busy = busy_backend_0(&cluster);
    let e = error_of(&c.cmd(&["PING"]));
    assert!(e.starts_with("BUSY "), "{e}");
    let on_busy = &keys_on(0, "busy", 1)[0];
    kill_and_recover(&cluster, &mut busy, &mut c, on_busy);
    assert_eq!(c.cmd(&["PING"]), Frame::Simple("PONG".into()));
}

#[test]
fn a_new_backend_login_while_a_script_runs_gets_busy_not_a_connection_error() {
    // A confined user's commands run as a backend user of their own, set up with `ACL
    // SETUSER` when its first connection opens, which a busy server refuses.
    let config = format!(
        "[[users]]\nname = \"app\"\npassword = \"{}\"\ncommands = [\"read\", \"write\"]\n",
        crate::auth::hash("app-pw")
    );
    let cluster = Cluster::start_with(|b| b.threads(1).config(&config));
    quick_busy(&cluster);
    let mut busy = busy_backend_0(&cluster);

    let mut app = cluster.proxy.raw();
    assert_eq!(
        app.cmd(&["AUTH", "app", "app-pw"]),
        Frame::Simple("OK".into())
    );
    let on_busy = &keys_on(0, "busy", 1)[0];
    for _ in 0..3 {
        let e = error_of(&app.cmd(&["SET", on_busy, "1"]));
        assert!(e.starts_with("BUSY "), "Redis's own answer, got {e}");
    }
    // The other server set the user up and serves it.
    let on_free = &keys_on(1, "free", 1)[0];
    assert_eq!(app.cmd(&["SET", on_free, "1"]), Frame::Simple("OK".into()));
    kill_and_recover(&cluster, &mut busy, &mut app, on_busy);
}

/// A subscription made while its server runs a script is in place once the script ends: the
/// server refused the hub's `SUBSCRIBE` with `-BUSY`, and the hub subscribes again when the
/// server answers. Before, the proxy took the subscription for made, and every message
/// published after the kill was lost for good while `PUBLISH` counted the subscriber.
#[test]
fn a_subscription_made_while_its_server_is_busy_receives_once_the_script_ends() {
    let cluster = Cluster::start_with(|b| b.threads(1));
    quick_busy(&cluster);
    // A channel routed to backend 0, the busy one (plain channels go by their slot).
    let channel = &keys_on(0, "news", 1)[0];
    let mut busy = busy_backend_0(&cluster);
    let mut sub = cluster.proxy.raw();
    sub.send(&encode(&["SUBSCRIBE", channel]));
    let confirmed = sub.read_frame();
    assert_eq!(
        confirmed,
        Frame::Array(vec![
            Frame::bulk("subscribe"),
            Frame::bulk(channel),
            Frame::Integer(1)
        ])
    );
    let mut killer = cluster.proxy.raw();
    assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), Frame::Simple("OK".into()));
    let e = error_of(&busy.read_frame());
    assert!(e.contains("killed"), "{e}");
    // Once the hub's subscription is back on the server, a message reaches the client. The
    // hub asks again 25 ms after a refusal; 3 s is far past that on any machine, and well
    // short of the 10 s after which an unanswered keep-alive would have it reconnect anyway.
    let mut publisher = cluster.proxy.raw();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut sent = 0;
    loop {
        sent += 1;
        let n = publisher.cmd(&["PUBLISH", channel, &format!("m{sent}")]);
        let direct: i64 = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query::<(String, i64)>(&mut cluster.backends[0].client())
            .unwrap()
            .1;
        if direct == 1 {
            assert_eq!(n, Frame::Integer(1));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never got the hub's subscription back ({sent} published, PUBLISH says {n:?})"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let n = publisher.cmd(&["PUBLISH", channel, "after"]);
    assert_eq!(n, Frame::Integer(1));
    // The messages published before the server had it again are lost (as for a client whose
    // connection broke); the one after arrives.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let f = sub.read_frame();
        if f == Frame::Array(vec![
            Frame::bulk("message"),
            Frame::bulk(channel),
            Frame::bulk("after"),
        ]) {
            break;
        }
        assert!(Instant::now() < deadline, "no message 'after': last {f:?}");
    }
}

/// Hostile: a client that subscribes and unsubscribes in a tight pipelined loop while its
/// channels' server runs a script. Each of its commands is answered (a confirmation waits at
/// most 2 s for a server that does not answer), another client of the same worker is served
/// meanwhile, and once the script ends nothing of the churn is left: the server holds no
/// subscription of the proxy's, no channel counts a subscriber, and a real subscriber gets
/// its messages.
#[test]
fn subscribe_churn_during_a_busy_script_is_answered_and_leaves_nothing_behind() {
    let cluster = Cluster::start_with(|b| b.threads(1));
    quick_busy(&cluster);
    let channels = keys_on(0, "churn", 50);
    let calm = &keys_on(1, "calm", 1)[0];
    let mut busy = busy_backend_0(&cluster);
    let mut hostile = cluster.proxy.raw();
    let mut other = cluster.proxy.raw();
    for round in 0..4 {
        let mut block = Vec::new();
        for ch in &channels {
            block.extend(encode(&["SUBSCRIBE", ch]));
            block.extend(encode(&["UNSUBSCRIBE", ch]));
        }
        hostile.send(&block);
        assert_eq!(
            other.cmd(&["SET", calm, &round.to_string()]),
            Frame::Simple("OK".into()),
            "a client of the same worker, on the other server, is served during the churn"
        );
        for ch in &channels {
            let sub = hostile.read_frame();
            let unsub = hostile.read_frame();
            assert_eq!(
                (sub, unsub),
                (
                    Frame::Array(vec![
                        Frame::bulk("subscribe"),
                        Frame::bulk(ch),
                        Frame::Integer(1)
                    ]),
                    Frame::Array(vec![
                        Frame::bulk("unsubscribe"),
                        Frame::bulk(ch),
                        Frame::Integer(0)
                    ])
                ),
                "round {round}"
            );
        }
    }
    let mut killer = cluster.proxy.raw();
    assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), Frame::Simple("OK".into()));
    let e = error_of(&busy.read_frame());
    assert!(e.contains("killed"), "{e}");
    // The server lets go of whatever the hub had asked for while it was busy (the hub's
    // connection is replaced once the server answers again); until then a PUBLISH may still
    // find it. Within 10 s nothing of it is left.
    let mut direct = cluster.backends[0].client();
    let mut publisher = cluster.proxy.raw();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let on_server: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("churn*")
            .query(&mut direct)
            .unwrap();
        let counted: Vec<Frame> = channels
            .iter()
            .map(|ch| publisher.cmd(&["PUBLISH", ch, "nobody"]))
            .filter(|n| *n != Frame::Integer(0))
            .collect();
        if on_server.is_empty() && counted.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left after the churn: {on_server:?} on the server, PUBLISH counted {counted:?}"
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        publisher.cmd(&["PUBSUB", "NUMSUB", &channels[0]]),
        Frame::Array(vec![Frame::bulk(&channels[0]), Frame::Integer(0)])
    );
    // A real subscriber now gets what is published.
    let mut sub = cluster.proxy.raw();
    sub.send(&encode(&["SUBSCRIBE", &channels[0]]));
    assert_eq!(
        sub.read_frame(),
        Frame::Array(vec![
            Frame::bulk("subscribe"),
            Frame::bulk(&channels[0]),
            Frame::Integer(1)
        ])
    );
    assert_eq!(
        publisher.cmd(&["PUBLISH", &channels[0], "hello"]),
        Frame::Integer(1)
    );
    assert_eq!(
        sub.read_frame(),
        Frame::Array(vec![
            Frame::bulk("message"),
            Frame::bulk(&channels[0]),
            Frame::bulk("hello")
        ])
    );
}
