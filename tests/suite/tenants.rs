//! Users confined to a key prefix (docs/users.md) against a hostile tenant: a real proxy over
//! two redis-servers, a tenant doing the hostile thing over a raw socket, and the victim's keys
//! read straight from the servers afterwards.

use crate::auth::hash;
use crate::support::{Cluster, Frame, RawClient};

const TENANT_PASSWORD: &str = "t-pw";

/// A proxy whose user `tenant` is confined to `t1:` (and `default` is not confined).
fn cluster() -> Cluster {
    Cluster::with_config(&format!(
        "[[users]]\nname = \"tenant\"\npassword = \"{}\"\nkey_prefix = \"t1:\"\n",
        hash(TENANT_PASSWORD)
    ))
}

fn tenant(cluster: &Cluster) -> RawClient {
    let mut c = cluster.proxy.raw();
    assert_eq!(
        c.cmd(&["AUTH", "tenant", TENANT_PASSWORD]),
        Frame::Simple("OK".into())
    );
    c
}

fn assert_noperm(reply: &Frame, what: &str) {
    let e = reply
        .error()
        .unwrap_or_else(|| panic!("{what}: expected NOPERM, got {reply:?}"));
    assert!(e.starts_with("NOPERM"), "{what}: {e}");
}

/// Issue 25, item 1: Redis writes the *last* `STORE`/`STOREDIST` of GEORADIUS (and SORT's
/// last `STORE`), while the key spec names the first. A tenant naming its own key first and a
/// victim's last turned the victim's string into a zset, or deleted it on an empty result.
#[test]
fn a_repeated_store_cannot_write_outside_the_prefix() {
    let cluster = cluster();
    let mut admin = cluster.proxy.raw();
    assert_eq!(
        admin.cmd(&["SET", "victim:secret", "v"]),
        Frame::Simple("OK".into())
    );
    let mut t = tenant(&cluster);
    assert_eq!(
        t.cmd(&["GEOADD", "t1:{X}g", "0", "0", "m"]),
        Frame::Integer(1)
    );
    assert_eq!(t.cmd(&["RPUSH", "t1:{X}l", "3", "1"]), Frame::Integer(2));
    let hostile: [&[&str]; 6] = [
        // A result: the victim would become a zset.
        &[
            "GEORADIUS",
            "t1:{X}g",
            "0",
            "0",
            "1",
            "km",
            "STORE",
            "t1:{X}x",
            "STORE",
            "victim:secret",
        ],
        // No result: the victim would be deleted.
        &[
            "GEORADIUS",
            "t1:{X}none",
            "0",
            "0",
            "1",
            "km",
            "STORE",
            "t1:{X}x",
            "STORE",
            "victim:secret",
        ],
        &[
            "GEORADIUSBYMEMBER",
            "t1:{X}g",
            "m",
            "1",
            "km",
            "STORE",
            "t1:{X}x",
            "STOREDIST",
            "victim:secret",
        ],
        &[
            "GEORADIUSBYMEMBER",
            "t1:{X}g",
            "m",
            "1",
            "km",
            "STOREDIST",
            "t1:{X}x",
            "STOREDIST",
            "victim:secret",
        ],
        &[
            "SORT",
            "t1:{X}l",
            "STORE",
            "t1:{X}x",
            "STORE",
            "victim:secret",
        ],
        // A consumer group named STREAMS fooled the key spec's search into other arguments.
        &[
            "XREADGROUP",
            "COUNT",
            "1",
            "GROUP",
            "STREAMS",
            "t1:c",
            "STREAMS",
            "victim:secret",
            "0",
        ],
    ];
    for args in hostile {
        assert_noperm(&t.cmd(args), &args.join(" "));
        // Inside a transaction, queued commands are checked the same way.
        assert_eq!(t.cmd(&["MULTI"]), Frame::Simple("OK".into()));
        assert_noperm(&t.cmd(args), &format!("queued {}", args.join(" ")));
        assert_eq!(t.cmd(&["DISCARD"]), Frame::Simple("OK".into()));
    }
    let owner = cluster.owner_of("victim:secret");
    let mut direct = owner.raw();
    assert_eq!(
        direct.cmd(&["TYPE", "victim:secret"]),
        Frame::Simple("string".into())
    );
    assert_eq!(direct.cmd(&["GET", "victim:secret"]), Frame::bulk("v"));
    // Within the prefix, the same commands still work.
    assert_eq!(
        t.cmd(&[
            "GEORADIUS",
            "t1:{X}g",
            "0",
            "0",
            "1",
            "km",
            "STORE",
            "t1:{X}x"
        ]),
        Frame::Integer(1)
    );
    assert_eq!(
        t.cmd(&["SORT", "t1:{X}l", "STORE", "t1:{X}y"]),
        Frame::Integer(2)
    );
    assert_eq!(
        t.cmd(&["ZRANGE", "t1:{X}x", "0", "-1"]),
        Frame::Array(vec![Frame::bulk("m")])
    );
}

/// A proxy as `cluster()`, logging every command in the slow log and requests of 1 KiB and
/// more in the large-request log.
fn logging_cluster() -> Cluster {
    Cluster::with_config(&format!(
        "slowlog_log_slower_than = 0\ncommandlog_request_larger_than = 1024\n\
         [[users]]\nname = \"tenant\"\npassword = \"{}\"\nkey_prefix = \"t1:\"\n",
        hash(TENANT_PASSWORD)
    ))
}

/// Every argument of every entry of a SLOWLOG/COMMANDLOG GET reply, as text.
fn logged_args(reply: &Frame) -> Vec<String> {
    let Frame::Array(entries) = reply else {
        panic!("not a list of entries: {reply:?}")
    };
    entries
        .iter()
        .flat_map(|e| match e {
            Frame::Array(fields) => match fields.get(3) {
                Some(Frame::Array(args)) => args.iter().filter_map(Frame::text).collect::<Vec<_>>(),
                _ => panic!("an entry without arguments: {e:?}"),
            },
            _ => panic!("not an entry: {e:?}"),
        })
        .collect()
}

/// Issue 25, item 3: `COMMANDLOG GET` and `SLOWLOG GET` showed a confined user the first
/// 128 bytes of another client's 1.5 MiB value (and its key). A confined user now sees the
/// entries of its own user only, and may not empty the proxy's logs; the default user still
/// sees everything.
#[test]
fn issue_25_a_confined_user_sees_only_its_own_command_log_entries() {
    let cluster = logging_cluster();
    let mut admin = cluster.proxy.raw();
    let secret = "S".repeat(1536 * 1024);
    assert_eq!(
        admin.cmd(&["SET", "victim:card", &secret]),
        Frame::Simple("OK".into())
    );
    let mut t = tenant(&cluster);
    assert_eq!(
        t.cmd(&["SET", "t1:mine", &"m".repeat(2048)]),
        Frame::Simple("OK".into())
    );
    for args in [
        &["COMMANDLOG", "GET", "-1", "large-request"][..],
        &["COMMANDLOG", "GET", "-1", "slow"],
        &["SLOWLOG", "GET", "-1"],
    ] {
        let seen = logged_args(&t.cmd(args)).join(" ");
        assert!(
            !seen.contains("victim") && !seen.contains("SSSS"),
            "{args:?} showed another client's command: {seen:.300}"
        );
        assert!(
            seen.contains("t1:mine"),
            "{args:?} hides its own: {seen:.300}"
        );
        let all = logged_args(&admin.cmd(args)).join(" ");
        assert!(
            all.contains("victim:card"),
            "the default user sees all: {all:.300}"
        );
    }
    assert_eq!(
        t.cmd(&["COMMANDLOG", "LEN", "large-request"]),
        Frame::Integer(1)
    );
    for args in [
        &["SLOWLOG", "RESET"][..],
        &["COMMANDLOG", "RESET", "large-request"],
    ] {
        assert_noperm(&t.cmd(args), &args.join(" "));
    }
    assert_eq!(
        admin.cmd(&["COMMANDLOG", "LEN", "large-request"]),
        Frame::Integer(2)
    );
}

/// Issue 25, item 4: `CLIENT TRACKING ON BCAST` told a confined user the name of every key
/// anyone wrote. Its BCAST tracking now stays under its prefix: none named means its own, a
/// prefix outside it is refused.
#[test]
fn issue_25_a_confined_user_hears_only_of_its_own_keys() {
    let cluster = cluster();
    let mut admin = cluster.proxy.raw();
    let mut t = tenant(&cluster);
    assert!(matches!(t.cmd(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "ON", "BCAST"]),
        Frame::Simple("OK".into())
    );
    // The same slot (hash tag {a}): both invalidations come on one backend connection, in
    // order, so the victim's would arrive before the tenant's own.
    assert_eq!(
        admin.cmd(&["SET", "victim:{a}name", "x"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(
        admin.cmd(&["SET", "t1:{a}own", "x"]),
        Frame::Simple("OK".into())
    );
    t.set_read_timeout(std::time::Duration::from_secs(10));
    let push = t.read_frame();
    assert_eq!(
        push,
        Frame::Push(vec![
            Frame::bulk("invalidate"),
            Frame::Array(vec![Frame::bulk("t1:{a}own")])
        ]),
        "the first invalidation the tenant hears of is its own key's"
    );
    // Its prefix was put in for it, again when it turns BCAST on again naming none (as
    // Redis adds the empty prefix then, checking nothing).
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "ON", "BCAST"]),
        Frame::Simple("OK".into())
    );
    let Frame::Map(info) = t.cmd(&["CLIENT", "TRACKINGINFO"]) else {
        panic!("TRACKINGINFO is a map in RESP3")
    };
    assert!(
        info.contains(&(
            Frame::bulk("prefixes"),
            Frame::Array(vec![Frame::bulk("t1:")])
        )),
        "{info:?}"
    );
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "OFF"]),
        Frame::Simple("OK".into())
    );
    for args in [
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "victim:"][..],
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "t1:", "PREFIX", "v",
        ],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "t"],
    ] {
        assert_noperm(&t.cmd(args), &args.join(" "));
    }
    assert_eq!(
        t.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "t1:x"]),
        Frame::Simple("OK".into())
    );
    // Default mode: only what it reads, which is under its prefix anyway.
    let mut d = tenant(&cluster);
    assert!(matches!(d.cmd(&["HELLO", "3"]), Frame::Map(_)));
    assert_eq!(
        d.cmd(&["CLIENT", "TRACKING", "ON"]),
        Frame::Simple("OK".into())
    );
    assert_noperm(&d.cmd(&["GET", "victim:{a}name"]), "GET outside the prefix");
}

/// Issue 25, siblings of items 3 and 4: CLIENT LIST showed a confined user every client of
/// the proxy (addresses, names, users), and INFO every backend's keyspace and command
/// statistics; a confined user now lists its own user's clients only, and INFO answers it
/// with the proxy's own sections.
#[test]
fn issue_25_client_list_and_info_show_a_confined_user_its_own_share() {
    let cluster = cluster();
    let mut admin = cluster.proxy.raw();
    assert_eq!(
        admin.cmd(&["CLIENT", "SETNAME", "payroll-worker"]),
        Frame::Simple("OK".into())
    );
    let mut t = tenant(&cluster);
    assert_eq!(
        t.cmd(&["CLIENT", "SETNAME", "tenant-app"]),
        Frame::Simple("OK".into())
    );
    let list = t.cmd(&["CLIENT", "LIST"]).text().unwrap();
    assert!(!list.contains("payroll-worker"), "{list}");
    assert!(list.contains("tenant-app"), "{list}");
    assert_eq!(list.lines().count(), 1, "{list}");
    let all = admin.cmd(&["CLIENT", "LIST"]).text().unwrap();
    assert!(
        all.contains("payroll-worker") && all.contains("tenant-app"),
        "{all}"
    );

    assert_eq!(
        admin.cmd(&["SET", "victim:k", "v"]),
        Frame::Simple("OK".into())
    );
    for args in [&["INFO"][..], &["INFO", "all"], &["INFO", "keyspace"]] {
        let info = t.cmd(args).text().unwrap();
        assert!(
            !info.contains("db0:") && !info.contains("cmdstat_"),
            "{args:?}: {info}"
        );
    }
    let info = t.cmd(&["INFO", "server"]).text().unwrap();
    assert!(info.contains("redis_version:"), "{info}");
    let full = admin.cmd(&["INFO", "all"]).text().unwrap();
    assert!(
        full.contains("db0:keys="),
        "the default user sees all: {full}"
    );
}

/// Issue 25, a sibling of item 3: `CLIENT UNBLOCK` (with `admin_commands`) let a confined user
/// cut short another tenant's blocked command. It may now unblock its own user's clients only.
#[test]
fn issue_25_a_confined_user_unblocks_only_its_own_clients() {
    let cluster = Cluster::with_config(&format!(
        "admin_commands = true\n[[users]]\nname = \"tenant\"\npassword = \"{}\"\nkey_prefix = \"t1:\"\n",
        hash(TENANT_PASSWORD)
    ));
    let id = |c: &mut RawClient| match c.cmd(&["CLIENT", "ID"]) {
        Frame::Integer(id) => id.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    };
    let mut victim = cluster.proxy.raw();
    let victim_id = id(&mut victim);
    victim.send(&crate::support::encode(&["BLPOP", "victim:queue", "0"]));
    let mut own = tenant(&cluster);
    let own_id = id(&mut own);
    own.send(&crate::support::encode(&["BLPOP", "t1:queue", "0"]));
    let mut t = tenant(&cluster);
    let mut admin = cluster.proxy.raw();
    assert_noperm(
        &t.cmd(&["CLIENT", "UNBLOCK", &victim_id]),
        "CLIENT UNBLOCK of another user's client",
    );
    // 1 once the tenant's own BLPOP is blocked (0 before it got there).
    assert!(crate::support::wait_until(
        std::time::Duration::from_secs(10),
        || t.cmd(&["CLIENT", "UNBLOCK", &own_id]) == Frame::Integer(1)
    ));
    own.set_read_timeout(std::time::Duration::from_secs(10));
    assert_eq!(
        own.read_frame(),
        Frame::NullArray,
        "its own client was unblocked"
    );
    assert!(crate::support::wait_until(
        std::time::Duration::from_secs(10),
        || admin.cmd(&["CLIENT", "UNBLOCK", &victim_id]) == Frame::Integer(1)
    ));
    victim.set_read_timeout(std::time::Duration::from_secs(10));
    assert_eq!(victim.read_frame(), Frame::NullArray);
}

/// A user confined to a prefix follows the keyspace notifications of its own keys, and of no
/// other: patterns and channels of `__keyspace@0__:` under its prefix and of `__keyevent@0__:`
/// (whose messages are filtered by key) are allowed, anything wider is `NOPERM`.
#[test]
fn a_confined_user_follows_keyspace_notifications_of_its_own_keys_only() {
    let cluster = cluster();
    for s in &cluster.backends {
        assert_eq!(
            s.raw()
                .cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]),
            Frame::Simple("OK".into())
        );
    }
    let mut t = tenant(&cluster);
    assert_noperm(
        &t.cmd(&["PSUBSCRIBE", "__keyspace@0__:*"]),
        "every key's notifications",
    );
    assert_noperm(&t.cmd(&["SUBSCRIBE", "t1:news"]), "a plain channel");
    t.send(&crate::support::encode(&[
        "PSUBSCRIBE",
        "__keyspace@0__:t1:*",
        "__keyevent@0__:*",
    ]));
    for _ in 0..2 {
        let confirmation = t.read_frame();
        assert!(
            matches!(&confirmation, Frame::Array(parts) if parts[0] == Frame::bulk("psubscribe")),
            "{confirmation:?}"
        );
    }
    let mut admin = cluster.proxy.raw();
    // Keys on both servers, the tenant's and another's, written in turn.
    for k in ["t1:a", "t2:a", "t1:b", "t2:b", "t1:c", "t2:c"] {
        assert_eq!(admin.cmd(&["SET", k, "v"]), Frame::Simple("OK".into()));
    }
    let mut seen = Vec::new();
    for _ in 0..6 {
        match t.read_frame() {
            Frame::Array(parts) if parts.len() == 4 => {
                let text = |f: &Frame| f.text().unwrap_or_default();
                seen.push((text(&parts[2]), text(&parts[3])));
            }
            other => panic!("expected a pmessage, got {other:?}"),
        }
    }
    seen.sort();
    let want = [
        ("__keyevent@0__:set", "t1:a"),
        ("__keyevent@0__:set", "t1:b"),
        ("__keyevent@0__:set", "t1:c"),
        ("__keyspace@0__:t1:a", "set"),
        ("__keyspace@0__:t1:b", "set"),
        ("__keyspace@0__:t1:c", "set"),
    ]
    .map(|(c, m)| (c.to_owned(), m.to_owned()));
    assert_eq!(seen, want);
    // The other tenant's events (sent by the servers in between) never came, nor come now.
    t.expect_no_reply(std::time::Duration::from_millis(500));
}
