//! `tessera import` with real processes: a source redis-server holding every type, its RDB
//! restored through the proxy of a two-group cluster and compared key by key (type-aware,
//! TTLs within a second); a live sync under writes, stopped and resumed with PSYNC continue;
//! a damaged RDB refused with nothing written; every database imported into the same one.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use redis::Value;

use crate::support::{Cluster, RedisServer, tessera_bin, wait_until};

pub(crate) fn q<T: redis::FromRedisValue>(c: &mut redis::Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Nil => "nil".into(),
        other => format!("{other:?}"),
    }
}

/// `name → value` of a flat `[name, value, …]` reply, keeping only `keep`.
fn fields(v: &Value, keep: &[&str]) -> Vec<String> {
    let Value::Array(items) = v else {
        return vec![format!("{v:?}")];
    };
    items
        .chunks(2)
        .filter(|p| keep.contains(&text(&p[0]).as_str()))
        .map(|p| format!("{}={}", text(&p[0]), text(&p[1])))
        .collect()
}

/// A key's value and metadata as text, independent of encoding and iteration order (seen
/// times of stream consumers and idle times excluded: they are the copy's own).
pub(crate) fn snapshot(c: &mut redis::Connection, key: &str) -> String {
    let kind: String = q(c, &["TYPE", key]);
    let body = match kind.as_str() {
        "string" => format!("{:?}", q::<Vec<u8>>(c, &["GET", key])),
        "list" => format!("{:?}", q::<Vec<Vec<u8>>>(c, &["LRANGE", key, "0", "-1"])),
        "set" => {
            let mut m: Vec<Vec<u8>> = q(c, &["SMEMBERS", key]);
            m.sort();
            format!("{m:?}")
        }
        "zset" => format!(
            "{:?}",
            q::<Vec<String>>(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"])
        ),
        "hash" => {
            let mut m: Vec<(Vec<u8>, Vec<u8>)> = q(c, &["HGETALL", key]);
            m.sort();
            format!("{m:?}")
        }
        "stream" => stream_snapshot(c, key),
        "none" => "missing".into(),
        other => panic!("unexpected type {other}"),
    };
    format!("{kind}:{body}")
}

fn stream_snapshot(c: &mut redis::Connection, key: &str) -> String {
    let entries: Value = q(c, &["XRANGE", key, "-", "+"]);
    let info: Value = q(c, &["XINFO", "STREAM", key]);
    let meta = [
        "length",
        "last-generated-id",
        "max-deleted-entry-id",
        "entries-added",
    ];
    let mut out = format!("{entries:?} {:?}", fields(&info, &meta));
    let Value::Array(groups) = q::<Value>(c, &["XINFO", "GROUPS", key]) else {
        panic!("XINFO GROUPS")
    };
    for g in &groups {
        let keep = [
            "name",
            "pending",
            "last-delivered-id",
            "entries-read",
            "consumers",
        ];
        let f = fields(g, &keep);
        let name = f[0].trim_start_matches("name=").to_string();
        let Value::Array(pending) = q::<Value>(c, &["XPENDING", key, &name, "-", "+", "1000"])
        else {
            panic!("XPENDING")
        };
        // [id, consumer, idle, deliveries]: all but the idle time.
        let pel: Vec<String> = pending
            .iter()
            .map(|p| match p {
                Value::Array(r) => format!("{}/{}/{}", text(&r[0]), text(&r[1]), text(&r[3])),
                _ => format!("{p:?}"),
            })
            .collect();
        out.push_str(&format!(" {f:?} {pel:?}"));
    }
    out
}

/// Every key of the source compared through the proxy; TTLs within a second. `Err` names
/// the first difference.
fn compare(source: &RedisServer, proxy: &mut redis::Connection) -> Result<usize, String> {
    let mut src = source.client();
    let keys = source.keys();
    for key in &keys {
        let want = snapshot(&mut src, key);
        let got = snapshot(proxy, key);
        if want != got {
            return Err(format!("{key}: source {want:.300}\nproxy {got:.300}"));
        }
        let (a, b): (i64, i64) = (q(&mut src, &["PTTL", key]), q(proxy, &["PTTL", key]));
        if (a < 0) != (b < 0) || (a - b).abs() > 1000 {
            return Err(format!("{key}: PTTL source {a}, proxy {b}"));
        }
    }
    Ok(keys.len())
}

fn dbsize(cluster: &Cluster) -> i64 {
    cluster.backends.iter().map(RedisServer::dbsize).sum()
}

/// Fills `c` with every type: strings (int, raw, big), lists, sets (intset, listpack,
/// hashtable), sorted sets, hashes (small, big), a stream with a group and pending entries,
/// TTLs, and a function library.
pub(crate) fn fill_every_type(c: &mut redis::Connection) {
    let big_string = "x".repeat(3 * 1024 * 1024 + 17);
    let mut p = redis::pipe();
    p.cmd("SET").arg("str:int").arg("12345").ignore();
    p.cmd("SET").arg("str:raw").arg("hello world").ignore();
    p.cmd("SET").arg("str:big").arg(&big_string).ignore();
    p.cmd("SET")
        .arg("str:ttl")
        .arg("soon")
        .arg("PX")
        .arg(600_000)
        .ignore();
    p.cmd("RPUSH")
        .arg("list:small")
        .arg(&["a", "b", "c"])
        .ignore();
    let long: Vec<String> = (0..2000)
        .map(|i| format!("item-{i}-{}", "y".repeat(i % 50)))
        .collect();
    p.cmd("RPUSH").arg("list:big").arg(&long).ignore();
    p.cmd("SADD")
        .arg("set:int")
        .arg(&[1, 2, 3, -40000])
        .ignore();
    p.cmd("SADD").arg("set:lp").arg(&["a", "b", "c"]).ignore();
    let members: Vec<String> = (0..1500).map(|i| format!("m{i}")).collect();
    p.cmd("SADD").arg("set:ht").arg(&members).ignore();
    p.cmd("ZADD")
        .arg("zset:small")
        .arg(&["1", "a", "2.5", "b", "-inf", "c"])
        .ignore();
    for i in 0..700 {
        p.cmd("ZADD")
            .arg("zset:big")
            .arg(f64::from(i) / 3.0)
            .arg(format!("z{i}"))
            .ignore();
    }
    p.cmd("HSET")
        .arg("hash:small")
        .arg(&["f1", "v1", "f2", "2"])
        .ignore();
    p.cmd("EXPIRE").arg("hash:small").arg(3000).ignore();
    for i in 0..1200 {
        p.cmd("HSET")
            .arg("hash:big")
            .arg(format!("f{i}"))
            .arg(format!("v{i}"))
            .ignore();
    }
    p.cmd("PEXPIRE").arg("list:big").arg(900_000).ignore();
    for i in 1..=20 {
        p.cmd("XADD")
            .arg("stream")
            .arg(format!("{i}-1"))
            .arg("n")
            .arg(i)
            .ignore();
    }
    p.cmd("XGROUP")
        .arg(&["CREATE", "stream", "g1", "0"])
        .ignore();
    p.cmd("XGROUP")
        .arg(&["CREATE", "stream", "g2", "$"])
        .ignore();
    p.cmd("XREADGROUP")
        .arg(&[
            "GROUP", "g1", "alice", "COUNT", "3", "STREAMS", "stream", ">",
        ])
        .ignore();
    p.cmd("XREADGROUP")
        .arg(&["GROUP", "g1", "bob", "COUNT", "2", "STREAMS", "stream", ">"])
        .ignore();
    p.cmd("XACK").arg(&["stream", "g1", "2-1"]).ignore();
    p.cmd("XDEL").arg(&["stream", "20-1"]).ignore();
    p.cmd("XGROUP")
        .arg(&["CREATE", "empty-stream", "g", "$", "MKSTREAM"])
        .ignore();
    let lib =
        "#!lua name=portlib\nredis.register_function('echo1', function(k, a) return a[1] end)";
    p.cmd("FUNCTION").arg("LOAD").arg(lib).ignore();
    let _: () = p.query(c).expect("filling the source");
}

/// SAVE on `source` and the path of the dump it wrote.
fn save(source: &RedisServer) -> PathBuf {
    let mut c = source.client();
    let _: () = q(&mut c, &["SAVE"]);
    let dir: Vec<String> = q(&mut c, &["CONFIG", "GET", "dir"]);
    let file: Vec<String> = q(&mut c, &["CONFIG", "GET", "dbfilename"]);
    Path::new(&dir[1]).join(&file[1])
}

fn restore(rdb: &Path, cluster: &Cluster) -> Output {
    Command::new(tessera_bin())
        // `port`, the subcommand's older name, still works.
        .args(["port", "restore", "--rdb"])
        .arg(rdb)
        .args(["--to", &cluster.proxy.addr().to_string()])
        .output()
        .expect("running tessera import restore")
}

#[test]
fn restore_imports_every_type_through_the_proxy_of_a_two_group_cluster() {
    let source = RedisServer::start();
    fill_every_type(&mut source.client());
    let rdb = save(&source);
    let cluster = Cluster::start();
    let out = restore(&rdb, &cluster);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "restore failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("functions=1"), "{stdout}");
    let mut proxy = cluster.proxy.client();
    let n = compare(&source, &mut proxy).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(n, 15);
    assert_eq!(dbsize(&cluster), source.dbsize());
    assert!(
        cluster.backends.iter().all(|b| b.dbsize() > 0),
        "keys landed on both groups"
    );
    let echoed: String = q(&mut proxy, &["FCALL", "echo1", "0", "hi"]);
    assert_eq!(echoed, "hi");
}

#[test]
fn a_damaged_rdb_is_refused_clearly_and_nothing_is_written() {
    let source = RedisServer::start();
    fill_every_type(&mut source.client());
    let good = std::fs::read(save(&source)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start();
    let truncated = dir.path().join("truncated.rdb");
    std::fs::write(&truncated, &good[..good.len() * 2 / 3]).unwrap();
    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    let corrupted = dir.path().join("corrupted.rdb");
    std::fs::write(&corrupted, &flipped).unwrap();
    let newer = dir.path().join("newer.rdb");
    std::fs::write(&newer, [b"REDIS0012".as_slice(), &good[9..]].concat()).unwrap();
    for (file, says) in [
        (&truncated, "is not importable, nothing was written"),
        (&corrupted, "checksum mismatch"),
        (&newer, "RDB version 12"),
    ] {
        let out = restore(file, &cluster);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{} was accepted", file.display());
        assert!(stderr.contains(says), "{}: {stderr}", file.display());
        assert_eq!(dbsize(&cluster), 0, "{} wrote keys", file.display());
    }
}

/// A running `tessera import sync`, its output in a file; killed on drop.
struct Sync {
    child: Child,
    log: PathBuf,
}

impl Sync {
    fn start(source: &RedisServer, cluster: &Cluster, state: &Path, log: PathBuf) -> Sync {
        let file = std::fs::File::create(&log).unwrap();
        let child = Command::new(tessera_bin())
            .args(["import", "sync", "--from", &source.addr().to_string()])
            .args(["--to", &cluster.proxy.addr().to_string(), "--state"])
            .arg(state)
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .stdin(Stdio::null())
            .spawn()
            .expect("running tessera import sync");
        Sync { child, log }
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, and waits for it to exit.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let exited = wait_until(Duration::from_secs(10), || {
            self.child.try_wait().expect("try_wait").is_some()
        });
        assert!(exited, "sync did not stop: {}", self.output());
    }
}

impl Drop for Sync {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every source key equals its copy through the proxy.
fn converge(source: &RedisServer, cluster: &Cluster, sync: &Sync) {
    let mut proxy = cluster.proxy.client();
    let mut last = String::new();
    let ok = wait_until(Duration::from_secs(40), || {
        match compare(source, &mut proxy) {
            Ok(_) => dbsize(cluster) == source.dbsize(),
            Err(e) => {
                last = e;
                false
            }
        }
    });
    assert!(
        ok,
        "never converged: {last}\nsync output:\n{}",
        sync.output()
    );
}

#[test]
fn sync_follows_writes_and_resumes_with_psync_continue_after_a_restart() {
    let source = RedisServer::start();
    fill_every_type(&mut source.client());
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("port.state");
    // A writer keeps writing, before and during the full sync and the stream.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, mut c) = (stop.clone(), source.client());
        thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut p = redis::pipe();
                p.cmd("SET").arg(format!("w:{}", i % 500)).arg(i).ignore();
                p.cmd("RPUSH").arg("w:list").arg(i).ignore();
                p.cmd("HINCRBY")
                    .arg("w:hash")
                    .arg(format!("f{}", i % 7))
                    .arg(1)
                    .ignore();
                p.cmd("XADD")
                    .arg("w:stream")
                    .arg("*")
                    .arg("i")
                    .arg(i)
                    .ignore();
                p.cmd("SET")
                    .arg(format!("w:ttl:{}", i % 50))
                    .arg(i)
                    .arg("EX")
                    .arg(300)
                    .ignore();
                let _: () = p.query(&mut c).expect("writer");
                i += 1;
                thread::sleep(Duration::from_millis(2));
            }
            i
        })
    };
    thread::sleep(Duration::from_millis(300));
    let mut sync = Sync::start(&source, &cluster, &state, dir.path().join("sync1.log"));
    assert!(
        wait_until(Duration::from_secs(30), || sync
            .output()
            .contains("port sync loaded")),
        "the full sync never loaded: {}",
        sync.output()
    );
    thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 100, "the writer wrote {written} rounds");
    converge(&source, &cluster, &sync);
    assert!(
        sync.output().contains("psync=fullresync"),
        "{}",
        sync.output()
    );
    sync.stop();

    // Writes while it is down, then a restart: it continues from its offset.
    let mut c = source.client();
    for i in 0..300 {
        let _: () = q(&mut c, &["SET", &format!("after:{i}"), &i.to_string()]);
    }
    let _: () = q(&mut c, &["RPUSH", "w:list", "after-restart"]);
    let _: () = q(&mut c, &["DEL", "str:raw"]);
    let sync2 = Sync::start(&source, &cluster, &state, dir.path().join("sync2.log"));
    converge(&source, &cluster, &sync2);
    let out = sync2.output();
    assert!(out.contains("psync=continue"), "did not resume: {out}");
    assert!(!out.contains("psync=fullresync"), "{out}");
    assert!(
        !cluster.owner_of("str:raw").has("str:raw"),
        "a DEL while down was applied"
    );
}

#[test]
fn restore_and_sync_authenticate_to_a_source_and_a_proxy_with_passwords() {
    let cluster = Cluster::with_config("session_password = \"proxy-pw\"\n");
    let mut proxy =
        crate::support::connect(&format!("redis://:proxy-pw@{}/", cluster.proxy.addr()));
    let source = RedisServer::start();
    let _: () = q(
        &mut source.client(),
        &["CONFIG", "SET", "requirepass", "source-pw"],
    );
    let mut src = crate::support::connect(&format!("redis://:source-pw@{}/", source.addr()));
    let _: () = q(&mut src, &["SET", "before", "1"]);
    let _: () = q(&mut src, &["HSET", "h", "f", "v"]);

    // restore: refused without the proxy's password, fine with it.
    let _: () = q(&mut src, &["SAVE"]);
    let dir: Vec<String> = q(&mut src, &["CONFIG", "GET", "dir"]);
    let rdb = Path::new(&dir[1]).join("dump.rdb");
    let out = restore(&rdb, &cluster);
    assert!(
        !out.status.success(),
        "restore without a password was accepted"
    );
    let out = Command::new(tessera_bin())
        .args(["import", "restore", "--rdb"])
        .arg(&rdb)
        .args([
            "--to",
            &cluster.proxy.addr().to_string(),
            "--to-password",
            "proxy-pw",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(q::<String>(&mut proxy, &["HGET", "h", "f"]), "v");

    // sync: the source's password for the replica link and the lag monitor.
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("sync.log");
    let file = std::fs::File::create(&log).unwrap();
    let child = Command::new(tessera_bin())
        .args([
            "import",
            "sync",
            "--from",
            &source.addr().to_string(),
            "--from-password",
            "source-pw",
        ])
        .args([
            "--to",
            &cluster.proxy.addr().to_string(),
            "--to-password",
            "proxy-pw",
        ])
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .unwrap();
    let sync = Sync { child, log };
    let _: () = q(&mut src, &["SET", "after", "2"]);
    let arrived = wait_until(Duration::from_secs(30), || {
        q::<Option<String>>(&mut proxy, &["GET", "after"]).as_deref() == Some("2")
    });
    assert!(arrived, "a write never arrived: {}", sync.output());
    let lag_known = wait_until(Duration::from_secs(5), || {
        sync.output().contains("lag_bytes=0")
    });
    assert!(
        lag_known,
        "the lag monitor did not authenticate: {}",
        sync.output()
    );
}

/// A fake source (see [`fake_source`]) that announces a full resync whose RDB is `head`
/// followed by up to 4 MiB of zeros (less if the reader hangs up first).
fn hostile_source(head: &'static str) -> (std::net::SocketAddr, thread::JoinHandle<()>) {
    fake_source(format!("+FULLRESYNC {REPLID} 0\r\n{head}\r\n"), |out| {
        use std::io::Write;
        let zeros = vec![0u8; 64 * 1024];
        for _ in 0..64 {
            if out.write_all(&zeros).is_err() {
                return;
            }
        }
    })
}

#[test]
fn sync_stops_at_its_rdb_limit_when_a_source_sends_more() {
    let cluster = Cluster::start();
    for (head, says) in [
        // An announced length past the limit: refused before a byte of it is read.
        ("$1099511627776", "sends an RDB of 1099511627776 bytes"),
        // An EOF-marked RDB whose mark never comes: cut at the limit.
        (
            "$EOF:abcdefabcdefabcdefabcdefabcdefabcdefabcd",
            "sends an RDB of more than 1048576 bytes",
        ),
    ] {
        let (addr, serve) = hostile_source(head);
        let out = Command::new("timeout")
            .args(["30", tessera_bin().to_str().unwrap()])
            .args(["import", "sync", "--from", &addr.to_string()])
            .args(["--to", &cluster.proxy.addr().to_string()])
            .args(["--max-rdb-mb", "1"])
            .stdin(Stdio::null())
            .output()
            .expect("running tessera import sync");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{head}: {stderr}");
        assert!(stderr.contains(says), "{head}: {stderr}");
        assert!(stderr.contains("--max-rdb-mb"), "{head}: {stderr}");
        assert_eq!(dbsize(&cluster), 0, "{head}: keys were written");
        serve.join().unwrap();
    }
}

/// A fake source that answers the replica handshake; `psync` is its whole answer to PSYNC
/// (status line included), then `then` writes the rest on the connection until it returns.
fn fake_source(
    psync: String,
    then: impl FnOnce(&mut std::net::TcpStream) + Send + 'static,
) -> (std::net::SocketAddr, thread::JoinHandle<()>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let serve = thread::spawn(move || {
        let (conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut out = conn;
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let upper = line.trim_end().to_ascii_uppercase();
            if upper == "REPLCONF" {
                out.write_all(b"+OK\r\n").unwrap();
            } else if upper == "PSYNC" {
                break;
            }
        }
        if out.write_all(psync.as_bytes()).is_ok() {
            then(&mut out);
        }
    });
    (addr, serve)
}

const REPLID: &str = "0123456789abcdef0123456789abcdef01234567";

/// A state file that makes `import sync` ask to continue from offset 100 of [`REPLID`].
fn resume_state(dir: &Path) -> PathBuf {
    let state = dir.join("port.state");
    std::fs::write(
        &state,
        format!(r#"{{"replid":"{REPLID}","offset":100,"db":0}}"#),
    )
    .unwrap();
    state
}

/// Writes a keepalive newline every 100 ms until the reader hangs up, for at most a minute.
fn keepalives(out: &mut std::net::TcpStream) {
    use std::io::Write;
    for _ in 0..600 {
        if out.write_all(b"\n").is_err() {
            return;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `tessera import sync` against `from` (at most 60 s) and returns its exit code and stderr.
fn sync_against(from: std::net::SocketAddr, cluster: &Cluster, args: &[&str]) -> (i32, String) {
    let out = Command::new("timeout")
        .args(["60", tessera_bin().to_str().unwrap()])
        .args(["port", "sync", "--from", &from.to_string()])
        .args(["--to", &cluster.proxy.addr().to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running tessera import sync");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Issue 25, item 11: a source that sends only keepalive newlines held the replica connection
// forever (it had no read timeout), in the command stream and while "saving" its RDB.
#[test]
fn issue_25_a_source_that_sends_only_keepalives_is_given_up_on() {
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let state = resume_state(dir.path());
    // The stream: one real command, then keepalives only.
    let (addr, serve) = fake_source(format!("+CONTINUE {REPLID}\r\n"), |out| {
        use std::io::Write;
        if out
            .write_all(&crate::support::encode(&["SET", "before", "1"]))
            .is_ok()
        {
            keepalives(out);
        }
    });
    let (code, stderr) = sync_against(
        addr,
        &cluster,
        &["--state", state.to_str().unwrap(), "--timeout-s", "2"],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("sent only keepalive newlines for 2 s (--timeout-s)"),
        "{stderr}"
    );
    assert_eq!(
        cluster.proxy.raw().cmd(&["GET", "before"]),
        crate::support::Frame::bulk("1"),
        "the command before the keepalives was applied"
    );
    serve.join().unwrap();

    // A full resync whose RDB never comes: newlines keep the connection up to --rdb-wait-s.
    let (addr, serve) = fake_source(format!("+FULLRESYNC {REPLID} 0\r\n"), keepalives);
    let (code, stderr) = sync_against(addr, &cluster, &["--timeout-s", "1", "--rdb-wait-s", "3"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("sent only keepalive newlines for 3 s (--rdb-wait-s)"),
        "{stderr}"
    );
    serve.join().unwrap();

    // A source that goes quiet: cut after --timeout-s of silence. It keeps the connection
    // open well past that (closing it with the importer's acknowledgements unread resets it,
    // and a loaded machine once let the reset arrive before the importer's own timeout).
    let (addr, serve) = fake_source(format!("+CONTINUE {REPLID}\r\n"), |_| {
        thread::sleep(Duration::from_secs(10));
    });
    let (code, stderr) = sync_against(
        addr,
        &cluster,
        &["--state", state.to_str().unwrap(), "--timeout-s", "2"],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("sent nothing for 2 s (--timeout-s)"),
        "{stderr}"
    );
    serve.join().unwrap();
}

// Issue 25, item 11: one streamed command of 768 MiB (8 MiB arguments) grew the importer to
// 797 MiB; --max-rdb-mb did not cover the command stream.
#[test]
fn issue_25_a_streamed_command_over_its_limit_stops_the_sync_before_it_is_read_whole() {
    let cluster = Cluster::start();
    let dir = tempfile::tempdir().unwrap();
    let state = resume_state(dir.path());
    // SET k <700 KiB> <700 KiB>… announced argument by argument: the second announcement
    // takes the command past 1 MiB, and its bytes are never sent.
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = sent.clone();
    let (addr, serve) = fake_source(format!("+CONTINUE {REPLID}\r\n"), move |out| {
        use std::io::Write;
        let arg = vec![b'x'; 700 << 10];
        let mut frame = b"*4\r\n$3\r\nSET\r\n$1\r\nk\r\n".to_vec();
        frame.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        frame.extend_from_slice(&arg);
        frame.extend_from_slice(format!("\r\n${}\r\n", arg.len()).as_bytes());
        if out.write_all(&frame).is_ok() {
            counted.store(frame.len(), Ordering::SeqCst);
            // Then wait for the importer to hang up (the read times out after 20 s).
            let mut b = [0u8; 1024];
            let mut r = out.try_clone().unwrap();
            while std::io::Read::read(&mut r, &mut b).is_ok_and(|n| n > 0) {}
        }
    });
    let (code, stderr) = sync_against(
        addr,
        &cluster,
        &["--state", state.to_str().unwrap(), "--max-command-mb", "1"],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("streams a command of") && stderr.contains("over the limit of 1048576"),
        "{stderr}"
    );
    assert!(stderr.contains("--max-command-mb"), "{stderr}");
    serve.join().unwrap();
    assert!(
        sent.load(Ordering::SeqCst) > 700 << 10,
        "the source sent its frame"
    );
    assert_eq!(dbsize(&cluster), 0, "the refused command was written");
}

/// `GET key` in database `db` through `proxy` (a connection of its own).
fn get_in(cluster: &Cluster, db: u32, key: &str) -> Option<String> {
    let mut c = cluster.proxy.client();
    let _: () = q(&mut c, &["SELECT", &db.to_string()]);
    q(&mut c, &["GET", key])
}

#[test]
fn restore_and_sync_import_every_database_into_the_same_one_and_a_target_without_it_gets_nothing() {
    let source = RedisServer::start();
    let mut c = source.client();
    for (db, key) in [(0, "zero"), (3, "three"), (15, "fifteen")] {
        let _: () = q(&mut c, &["SELECT", &db.to_string()]);
        let _: () = q(&mut c, &["SET", key, &db.to_string(), "EX", "600"]);
        let _: () = q(&mut c, &["HSET", &format!("{key}:h"), "f", "v"]);
    }
    let rdb = save(&source);
    // Backends with room for the 16 client databases (and Tessera's own).
    let cluster = Cluster::start_on(&["--databases", "17"], |b| b);
    let out = restore(&rdb, &cluster);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for (db, key) in [(0, "zero"), (3, "three"), (15, "fifteen")] {
        assert_eq!(get_in(&cluster, db, key), Some(db.to_string()), "{key}");
        let mut p = cluster.proxy.client();
        let _: () = q(&mut p, &["SELECT", &db.to_string()]);
        let ttl: i64 = q(&mut p, &["PTTL", key]);
        assert!(ttl > 500_000, "{key}'s TTL: {ttl}");
        let size: i64 = q(&mut p, &["DBSIZE"]);
        assert_eq!(size, 2, "database {db}");
    }
    // Client database 3 is the backends' 4; their 1, Tessera's own, holds nothing.
    let on_backends = |db: &str| -> i64 {
        cluster
            .backends
            .iter()
            .map(|b| {
                let mut d = b.client();
                let _: () = q(&mut d, &["SELECT", db]);
                q::<i64>(&mut d, &["DBSIZE"])
            })
            .sum()
    };
    assert_eq!(on_backends("4"), 2);
    assert_eq!(on_backends("1"), 0);

    // A target that does not serve database 15: refused before anything is written.
    let small = Cluster::start_on(&["--databases", "17"], |b| b.config("databases = 4\n"));
    let out = restore(&rdb, &small);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {stderr}");
    assert!(
        stderr.contains("database(s) 3, 15") && stderr.contains("nothing was written"),
        "{stderr}"
    );
    assert_eq!(dbsize(&small), 0);

    // A sync follows writes into their databases, also across a restart.
    let synced = Cluster::start_on(&["--databases", "17"], |b| b);
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sync.state");
    let mut sync = Sync::start(&source, &synced, &state, dir.path().join("s1.log"));
    assert!(
        wait_until(Duration::from_secs(30), || get_in(&synced, 15, "fifteen")
            .is_some()),
        "the full sync never loaded database 15: {}",
        sync.output()
    );
    let _: () = q(&mut c, &["SELECT", "7"]);
    let _: () = q(&mut c, &["SET", "live", "7"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: () = q(&mut c, &["SET", "live", "0"]);
    assert!(
        wait_until(Duration::from_secs(20), || get_in(&synced, 0, "live")
            .as_deref()
            == Some("0")),
        "{}",
        sync.output()
    );
    assert_eq!(get_in(&synced, 7, "live").as_deref(), Some("7"));
    sync.stop();
    // Written while it is down, in database 9 and then 0; it resumes in the right ones.
    let _: () = q(&mut c, &["SELECT", "9"]);
    let _: () = q(&mut c, &["SET", "after", "9"]);
    let _: () = q(&mut c, &["SELECT", "0"]);
    let _: () = q(&mut c, &["SET", "after", "0"]);
    let sync2 = Sync::start(&source, &synced, &state, dir.path().join("s2.log"));
    assert!(
        wait_until(Duration::from_secs(20), || get_in(&synced, 0, "after")
            .as_deref()
            == Some("0")),
        "{}",
        sync2.output()
    );
    assert!(
        sync2.output().contains("psync=continue"),
        "{}",
        sync2.output()
    );
    assert_eq!(get_in(&synced, 9, "after").as_deref(), Some("9"));
}
