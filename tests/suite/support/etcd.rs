//! `Etcd`: a throwaway single-node etcd (Debian's etcd-server 3.4) on two random loopback
//! ports (client, peer), with its data dir and log in its own temp dir; ready once a put and
//! a get round-trip through `EtcdStore`; killed on drop. `stop` and `restart` play an outage.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tempfile::TempDir;
use tessera_store::{EtcdStore, Store};

use super::bin_from_env;

const START_TIMEOUT: Duration = Duration::from_secs(20);

/// An etcd child process; killed (SIGKILL) and reaped on drop.
pub(crate) struct Etcd {
    child: Option<Child>,
    client_port: u16,
    peer_port: u16,
    dir: TempDir,
}

impl Etcd {
    /// Starts etcd on free ports and waits until a put and get round-trip.
    ///
    /// # Panics
    /// If etcd is missing or never becomes ready (after a few port retries).
    pub(crate) async fn start() -> Etcd {
        let dir = tempfile::tempdir().expect("creating temp dir");
        for _attempt in 0..3 {
            let (client_port, peer_port) = two_free_ports();
            if let Some(child) = spawn_ready(&dir, client_port, peer_port).await {
                return Etcd {
                    child: Some(child),
                    client_port,
                    peer_port,
                    dir,
                };
            }
            // The failed member's data names its peer URL; the next ports need a fresh one.
            let _ = std::fs::remove_dir_all(dir.path().join("data"));
        }
        panic!("etcd did not start; log:\n{}", read_log(&dir));
    }

    /// `127.0.0.1:port` of the client API.
    pub(crate) fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// The store URL, `etcd://127.0.0.1:port`.
    pub(crate) fn url(&self) -> String {
        format!("etcd://{}", self.endpoint())
    }

    /// Kills etcd with SIGKILL and reaps it; its data and ports stay for [`Self::restart`].
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports and data, after [`Self::stop`].
    ///
    /// # Panics
    /// If it does not become ready (the ports may take a moment to free up, so it retries).
    pub(crate) async fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = spawn_ready(&self.dir, self.client_port, self.peer_port).await {
                self.child = Some(child);
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not restart on {}; log:\n{}",
                self.endpoint(),
                read_log(&self.dir)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Spawns etcd and waits for a round-trip; `None` (child reaped) if it exits or never
/// answers, e.g. because a port was taken meanwhile.
async fn spawn_ready(dir: &TempDir, client_port: u16, peer_port: u16) -> Option<Child> {
    let log = File::options()
        .create(true)
        .append(true)
        .open(log_path(dir))
        .expect("opening log");
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let mut child = Command::new(bin_from_env("ETCD_BIN", "/usr/bin/etcd"))
        .arg("--name=default")
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--listen-client-urls={client_url}"))
        .arg(format!("--advertise-client-urls={client_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=default={peer_url}"))
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("cloning log handle"))
        .stderr(log)
        .spawn()
        .expect("etcd not found: install etcd-server or set ETCD_BIN");
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline && child.try_wait().expect("try_wait").is_none() {
        if round_trip(&client_url).await {
            return Some(child);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Whether a put and a get of a probe key succeed through etcd-client.
async fn round_trip(client_url: &str) -> bool {
    let Ok(store) = EtcdStore::connect(&[client_url.to_owned()]).await else {
        return false;
    };
    let probe = Bytes::from_static(b"ready");
    if store.put("/probe/ready", probe.clone()).await.is_err() {
        return false;
    }
    matches!(store.get("/probe/ready").await, Ok(Some(v)) if v.value == probe)
}

/// Two distinct loopback ports that were free a moment ago.
fn two_free_ports() -> (u16, u16) {
    (super::free_port(), super::free_port())
}

fn log_path(dir: &TempDir) -> PathBuf {
    dir.path().join("etcd.log")
}

fn read_log(dir: &TempDir) -> String {
    std::fs::read_to_string(log_path(dir)).unwrap_or_default()
}
