//! A killed backend fails only the keys it owns, with `ERR backend <addr> unavailable`; the
//! other backend keeps serving on the same connection, and the dead one is used again once it
//! is back on its port.

use std::time::{Duration, Instant};

use crate::support::{Cluster, error_line, keys_on};

fn get(con: &mut redis::Connection, key: &str) -> redis::RedisResult<Option<String>> {
    redis::cmd("GET").arg(key).query(con)
}

#[test]
fn killed_backend_fails_only_its_keys_and_recovers_after_restart() {
    let mut cluster = Cluster::start();
    let first_key = keys_on(0, "fail:", 1).remove(0);
    let second_key = keys_on(1, "fail:", 1).remove(0);
    let mut con = cluster.proxy.client();
    for key in [&first_key, &second_key] {
        let () = redis::cmd("SET")
            .arg(key)
            .arg("v")
            .query(&mut con)
            .expect("SET");
    }

    cluster.backends[1].kill();
    let dead = cluster.backends[1].addr();
    let err = get(&mut con, &second_key).expect_err("GET on the dead backend must fail");
    let line = error_line(&err);
    assert!(
        line.starts_with(&format!("ERR backend {dead} unavailable")),
        "expected `ERR backend {dead} unavailable...`, got {line:?} ({err})"
    );
    assert_eq!(
        get(&mut con, &first_key).expect("first backend still serves"),
        Some("v".into())
    );
    // Still failing fast, not hanging, on a second try.
    assert!(get(&mut con, &second_key).is_err());

    cluster.backends[1].restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut attempts = 0;
    let recovered = loop {
        attempts += 1;
        match get(&mut con, &second_key) {
            // The restarted server has no persistence: the key is gone, but the GET succeeds.
            Ok(value) => break value,
            Err(e) if Instant::now() < deadline => {
                eprintln!("attempt {attempts}: {}", error_line(&e));
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("backend {dead} still unusable 5 s after restart: {e}"),
        }
    };
    assert_eq!(recovered, None);
    let () = redis::cmd("SET")
        .arg(&second_key)
        .arg("again")
        .query(&mut con)
        .expect("SET");
    assert!(
        cluster.backends[1].has(&second_key),
        "the write reached the restarted backend"
    );
    assert_eq!(
        get(&mut con, &first_key).expect("first backend"),
        Some("v".into())
    );
}
