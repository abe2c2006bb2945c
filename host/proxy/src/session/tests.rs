//! A real session on a real socket, in-process, made to end abnormally: whatever it held must
//! come back through its guards, since the end of `Session::run` is never reached then.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Session;
use crate::backend::{BackendOptions, Pool};
use crate::config::ProxyConfig;
use crate::worker::{Shared, Worker};
use tessera_model::router::{Router, SlotTable};
use tessera_model::tls::Stream;

const MB: usize = 1 << 20;

/// Waits (bounded) until `ok`, yielding to the session meanwhile.
async fn until(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

/// Sends `cmd` and reads until `want` has arrived.
async fn round_trip(c: &mut tokio::net::TcpStream, cmd: &[u8], want: &[u8]) {
    c.write_all(cmd).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.ends_with(want) {
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
            .await
            .expect("a reply in time")
            .unwrap();
        assert!(n > 0, "closed; got {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
}

/// Issue 25, item 7: five sessions that panicked behind 3 MiB SETs kept a 16 MiB
/// `query_buffer_total` for good, because the request memory was given back at the end of
/// `run`, which a panicking (or cancelled) session task never reaches.
#[test]
fn a_session_that_ends_abnormally_gives_everything_back() {
    let config = ProxyConfig {
        max_clients: 1,
        query_buffer_total: 16 * MB,
        ..ProxyConfig::default()
    };
    let router = Arc::new(Router::new(SlotTable::split_evenly(&[])));
    let shared = Arc::new(Shared::new(config, router, "127.0.0.1:0".parse().unwrap()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let opts = BackendOptions {
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            stats: Arc::default(),
            max_reply: usize::MAX,
            fence: Arc::default(),
        };
        let worker = Rc::new(Worker::new(shared.clone(), Pool::new(opts, 1)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (socket, _) = listener.accept().await.unwrap();
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        let (panic_tx, panic_rx) = tokio::sync::oneshot::channel::<()>();
        let admission = shared.admit().expect("admitted");
        let session = Session::new(worker.clone(), Stream::Plain(socket), stop);
        // As the proxy runs a session (`proxy::worker_main`), but the task panics on demand.
        let task = tokio::task::spawn_local(async move {
            let _admission = admission;
            tokio::select! {
                _ = session.run() => {}
                _ = panic_rx => panic!("a session task panics"),
            }
        });

        round_trip(&mut client, b"CLIENT TRACKING ON BCAST\r\n", b"+OK\r\n").await;
        round_trip(&mut client, b"SUBSCRIBE news\r\n", b":1\r\n").await;
        // An unfinished 3 MiB SET: its bytes are taken from the proxy's request memory.
        let header = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 3 * MB);
        client.write_all(header.as_bytes()).await.unwrap();
        client.write_all(&vec![b'v'; 3 * MB - 1]).await.unwrap();
        until("the SET's bytes held", || shared.requests.used() >= 2 * MB).await;
        assert_eq!(shared.clients.len(), 1);
        assert_eq!(shared.sessions(), 1);
        assert_eq!(shared.stats.tracking.load(Ordering::Relaxed), 1);
        assert_eq!(worker.pubsub.sinks(), 1);
        assert!(worker.pubsub.tracking());

        panic_tx.send(()).unwrap();
        let end = task.await.expect_err("the task panicked");
        assert!(end.is_panic());

        assert_eq!(shared.requests.used(), 0, "request memory given back");
        assert_eq!(shared.replies.used(), 0, "reply memory given back");
        assert_eq!(shared.clients.len(), 0, "gone from CLIENT LIST");
        assert_eq!(shared.sessions(), 0, "its max_clients slot given back");
        assert_eq!(
            shared.stats.tracking.load(Ordering::Relaxed),
            0,
            "no longer counted as tracking"
        );
        assert_eq!(worker.pubsub.sinks(), 0, "its hub registration released");
        assert!(!worker.pubsub.tracking(), "its tracking stopped");
        assert!(shared.admit().is_some(), "a new session is admitted");
    });
}
