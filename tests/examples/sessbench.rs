//! Benchmarks of stateful commands against any RESP server, for side-by-side runs of direct
//! Redis and the proxy (`tools/bench-sessions.sh` runs both, interleaved, and prints ratios):
//!
//! ```text
//! sessbench tx      127.0.0.1:PORT CLIENTS SECONDS   # MULTI / INCR / EXEC per second
//! sessbench publish 127.0.0.1:PORT SUBSCRIBERS SECONDS  # PUBLISH fan-out: messages delivered per second
//! ```
//!
//! Raw sockets and line counting keep the client's own cost small and equal for every target.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Lines in a reply to one `MULTI INCR EXEC`: `+OK`, `+QUEUED`, `*1`, `:n`.
const TX_LINES: u64 = 4;
/// Lines in one RESP2 `message` push with a short channel and payload.
const MESSAGE_LINES: u64 = 7;
/// PUBLISHes a publisher keeps in flight.
const PUBLISH_PIPELINE: usize = 16;

fn lines(buf: &[u8]) -> u64 {
    buf.iter().filter(|&&c| c == b'\n').count() as u64
}

async fn tx_client(addr: String, key: String, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    s.set_nodelay(true).ok();
    let req = format!(
        "*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n${}\r\n{key}\r\n*1\r\n$4\r\nEXEC\r\n",
        key.len()
    );
    let mut buf = vec![0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        s.write_all(req.as_bytes()).await.expect("write");
        let mut seen = 0;
        while seen < TX_LINES {
            let n = s.read(&mut buf).await.expect("read");
            assert!(n > 0, "server closed");
            seen += lines(&buf[..n]);
        }
        done.fetch_add(1, Ordering::Relaxed);
    }
}

async fn subscriber(
    addr: String,
    stop: Arc<AtomicBool>,
    got: Arc<AtomicU64>,
    ready: Arc<AtomicU64>,
) {
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    s.write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nbench\r\n")
        .await
        .expect("subscribe");
    let mut buf = vec![0u8; 64 * 1024];
    // The subscribe confirmation: 6 lines.
    let mut confirm = 0;
    while confirm < 6 {
        let n = s.read(&mut buf).await.expect("read");
        confirm += lines(&buf[..n]);
    }
    ready.fetch_add(1, Ordering::Relaxed);
    let mut partial = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => {
                partial += lines(&buf[..n]);
                got.fetch_add(partial / MESSAGE_LINES, Ordering::Relaxed);
                partial %= MESSAGE_LINES;
            }
            Err(_) => {}
        }
    }
}

async fn publisher(addr: String, stop: Arc<AtomicBool>) {
    let mut s = TcpStream::connect(&addr).await.expect("connect");
    let one = b"*3\r\n$7\r\nPUBLISH\r\n$5\r\nbench\r\n$8\r\npayload!\r\n";
    let batch: Vec<u8> = one.repeat(PUBLISH_PIPELINE);
    let mut buf = vec![0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        s.write_all(&batch).await.expect("write");
        let mut seen = 0;
        while seen < PUBLISH_PIPELINE as u64 {
            let n = s.read(&mut buf).await.expect("read");
            assert!(n > 0, "server closed");
            seen += lines(&buf[..n]);
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: sessbench tx|publish 127.0.0.1:PORT N SECONDS";
    let [_, mode, addr, n, secs] = args.as_slice() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N");
    let secs: u64 = secs.parse().expect("SECONDS");
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    match mode.as_str() {
        "tx" => {
            for i in 0..n {
                let key = format!("sessbench:{i}");
                tasks.push(tokio::spawn(tx_client(
                    addr.clone(),
                    key,
                    stop.clone(),
                    count.clone(),
                )));
            }
        }
        "publish" => {
            let ready = Arc::new(AtomicU64::new(0));
            for _ in 0..n {
                tasks.push(tokio::spawn(subscriber(
                    addr.clone(),
                    stop.clone(),
                    count.clone(),
                    ready.clone(),
                )));
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while ready.load(Ordering::Relaxed) < n as u64 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tasks.push(tokio::spawn(publisher(addr.clone(), stop.clone())));
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let start_count = count.load(Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let total = count.load(Ordering::Relaxed) - start_count;
    let rate = total as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
    }
    println!("{rate:.0}");
}
