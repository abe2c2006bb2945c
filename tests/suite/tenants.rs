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
