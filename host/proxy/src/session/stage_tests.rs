//! The session's stages end to end in-process: a real session on a real socket, in front of
//! fake backends (a few lines of RESP each, recording every request they are sent), so what
//! each stage hands on can be checked at the backends and in the client's replies.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Session;
use crate::backend::{BackendOptions, Pool};
use crate::config::ProxyConfig;
use crate::worker::{Shared, Worker};
use tessera_model::router::{Router, SlotId, SlotTable};
use tessera_model::tls::Stream;
use tessera_resp::{Limits, RequestDecoder};

/// What a fake backend was sent, one argument list per request.
type Log = Rc<RefCell<Vec<Vec<String>>>>;

/// A backend named `name`: GET k answers `name:k`, MGET answers `name:k` per key, SET +OK, a
/// key starting `slow` is answered after 100 ms, anything else +OK. A connection's setup (the
/// confined backend user's ACL SETUSER and AUTH) is answered but not recorded.
async fn fake_backend(name: &'static str) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let log: Log = Rc::default();
    let seen = log.clone();
    tokio::task::spawn_local(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::task::spawn_local(async move {
                let mut decoder = RequestDecoder::new(Limits::default());
                let mut buf = BytesMut::new();
                loop {
                    while let Ok(Some(req)) = decoder.decode(&mut buf) {
                        let args: Vec<String> = req
                            .args()
                            .map(|a| String::from_utf8_lossy(a).into_owned())
                            .collect();
                        if args.get(1).is_some_and(|k| k.starts_with("slow")) {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        let bulk = |k: &str| {
                            let v = format!("{name}:{k}");
                            format!("${}\r\n{v}\r\n", v.len())
                        };
                        let reply = match args[0].to_ascii_uppercase().as_str() {
                            "GET" => bulk(&args[1]),
                            "MGET" => {
                                let keys = &args[1..];
                                let mut r = format!("*{}\r\n", keys.len());
                                keys.iter().for_each(|k| r.push_str(&bulk(k)));
                                r
                            }
                            _ => "+OK\r\n".to_string(),
                        };
                        if !matches!(args[0].as_str(), "ACL" | "AUTH") {
                            seen.borrow_mut().push(args);
                        }
                        if s.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    match s.read_buf(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    (addr, log)
}

/// A key whose slot is in the first half (backend `a`) or the second (backend `b`).
fn key_on(half: usize, prefix: &str) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| (SlotId::of_key(k.as_bytes()).0 as usize >= 512) == (half == 1))
        .unwrap()
}

struct Harness {
    client: TcpStream,
    worker: Rc<Worker>,
    a: Log,
    b: Log,
}

impl Harness {
    /// A session in front of two fake backends, slots split evenly between them.
    async fn start() -> Self {
        let (a_addr, a) = fake_backend("a").await;
        let (b_addr, b) = fake_backend("b").await;
        let table = SlotTable::split_evenly(&[a_addr, b_addr]);
        let router = Arc::new(Router::new(table));
        let shared = Arc::new(Shared::new(
            ProxyConfig::default(),
            router,
            "127.0.0.1:0".parse().unwrap(),
        ));
        let opts = BackendOptions {
            timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(1),
            stats: Arc::default(),
            max_reply: usize::MAX,
            fence: Arc::default(),
        };
        let worker = Rc::new(Worker::new(shared.clone(), Pool::new(opts, 1)));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (socket, _) = listener.accept().await.unwrap();
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let session = Session::new(worker.clone(), Stream::Plain(socket), stop);
        tokio::task::spawn_local(async move {
            let _stop_tx = stop_tx;
            session.run().await
        });
        Self {
            client,
            worker,
            a,
            b,
        }
    }

    /// Sends `cmds` in one write and reads until `want` bytes of replies have come.
    async fn pipeline(&mut self, cmds: &[&[&str]], want: &str) {
        let mut out = Vec::new();
        for c in cmds {
            out.extend_from_slice(tessera_resp::Request::from_args(c).as_bytes());
        }
        self.client.write_all(&out).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < want.len() {
            let n = tokio::time::timeout(Duration::from_secs(10), self.client.read(&mut buf))
                .await
                .expect("replies in time")
                .unwrap();
            assert!(n > 0, "closed; got {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(String::from_utf8_lossy(&got), want);
    }
}

fn run(test: impl AsyncFnOnce()) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, test());
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

#[test]
fn a_keyed_command_reaches_the_owner_of_its_slot_unchanged() {
    run(async || {
        let mut h = Harness::start().await;
        let (ka, kb) = (key_on(0, "k"), key_on(1, "k"));
        let want = format!("{}{}", bulk(&format!("a:{ka}")), bulk(&format!("b:{kb}")));
        h.pipeline(&[&["GET", &ka], &["GET", &kb]], &want).await;
        assert_eq!(*h.a.borrow(), vec![vec!["GET".to_string(), ka]]);
        assert_eq!(*h.b.borrow(), vec![vec!["GET".to_string(), kb]]);
    });
}

#[test]
fn replies_leave_in_request_order_whichever_backend_answers_first() {
    run(async || {
        let mut h = Harness::start().await;
        let (slow, fast) = (key_on(0, "slow"), key_on(1, "k"));
        let want = format!(
            "{}{}+PONG\r\n",
            bulk(&format!("a:{slow}")),
            bulk(&format!("b:{fast}"))
        );
        h.pipeline(&[&["GET", &slow], &["GET", &fast], &["PING"]], &want)
            .await;
        // PING is the session's own: no backend saw it.
        assert_eq!(h.a.borrow().len() + h.b.borrow().len(), 2);
    });
}

#[test]
fn a_split_command_is_sent_per_backend_and_merged_in_key_order() {
    run(async || {
        let mut h = Harness::start().await;
        let (a1, b1, a2) = (key_on(0, "x"), key_on(1, "y"), key_on(0, "z"));
        let want = format!(
            "*3\r\n{}{}{}",
            bulk(&format!("a:{a1}")),
            bulk(&format!("b:{b1}")),
            bulk(&format!("a:{a2}"))
        );
        h.pipeline(&[&["MGET", &a1, &b1, &a2]], &want).await;
        assert_eq!(
            *h.a.borrow(),
            vec![vec!["MGET".to_string(), a1.clone(), a2.clone()]]
        );
        assert_eq!(*h.b.borrow(), vec![vec!["MGET".to_string(), b1.clone()]]);
    });
}

#[test]
fn the_after_reply_phase_counts_each_command_once_on_its_first_keys_slot() {
    run(async || {
        let mut h = Harness::start().await;
        let (ka, kb) = (key_on(0, "k"), key_on(1, "k"));
        h.pipeline(
            &[&["SET", &ka, "v"], &["MGET", &ka, &kb], &["PING"]],
            &format!(
                "+OK\r\n*2\r\n{}{}+PONG\r\n",
                bulk(&format!("a:{ka}")),
                bulk(&format!("b:{kb}"))
            ),
        )
        .await;
        let shared = &h.worker.shared;
        assert_eq!(
            shared.command_stats.total(),
            (3, 0),
            "three commands, no error"
        );
        let slots = shared.slot_stats.counts();
        let at = |slot: SlotId| {
            slots
                .slots
                .iter()
                .position(|&s| s == slot.0)
                .map(|i| slots.ops[i])
        };
        // SET and MGET both on `ka`'s slot (MGET counts on its first key); PING on none.
        assert_eq!(at(SlotId::of_key(ka.as_bytes())), Some(2));
        assert_eq!(at(SlotId::of_key(kb.as_bytes())), None);
        assert_eq!(slots.ops.iter().sum::<u64>(), 2);
    });
}

#[test]
fn an_idle_session_holds_no_buffer() {
    run(async || {
        let mut h = Harness::start().await;
        h.pipeline(&[&["PING"]], "+PONG\r\n").await;
        // Both buffers went back to the worker once the reply was written.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(h.worker.buffers.spare(), 2);
        // And are lent again for the next command.
        let k = key_on(1, "k");
        h.pipeline(&[&["GET", &k]], &bulk(&format!("b:{k}"))).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(h.worker.buffers.spare(), 2);
    });
}
