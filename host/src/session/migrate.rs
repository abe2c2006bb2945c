//! The proxy's half of slot migration: a command on a key of a migrating slot first moves the
//! key from the source with `MIGRATE … KEYS k…` (a `NOKEY` reply is fine: moved already, or
//! never there), then runs on the target. Concurrent proxies are safe: MIGRATE is atomic on
//! the source, so one moves the key and the others see NOKEY.
//!
//! A key being copied as a big key is absent from the source but its marker is present:
//! then the proxy waits and retries, up to `MARKER_WAIT`, and answers `-TRYAGAIN` after that.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use super::gather::flatten;
use crate::backend::ReplyRx;
use crate::migrate::marker_key;
use crate::proxy::Worker;
use crate::resp::{Frame, Proto, encode_request, parse_integer};

/// How long a command waits for a big key's copy to finish before `-TRYAGAIN`.
const MARKER_WAIT: Duration = Duration::from_secs(3);
/// MIGRATE's own timeout, in milliseconds, as a string for the command.
const MIGRATE_TIMEOUT_MS: &str = "5000";

/// A command waiting for its keys to be moved to the target.
pub(crate) struct Moved {
    worker: Rc<Worker>,
    source: Arc<str>,
    target: Arc<str>,
    proto: Proto,
    keys: SmallVec<[Bytes; 2]>,
    req: Bytes,
    /// Replies of the first MIGRATE and marker check, sent at dispatch so they keep the
    /// pipeline's order on the source connection.
    first: Option<(ReplyRx, ReplyRx)>,
}

impl Moved {
    /// Sends the first MIGRATE (and marker check) now.
    pub(crate) fn start(
        worker: Rc<Worker>,
        source: Arc<str>,
        target: Arc<str>,
        proto: Proto,
        keys: SmallVec<[Bytes; 2]>,
        req: Bytes,
    ) -> Self {
        let mut m = Moved {
            worker,
            source,
            target,
            proto,
            keys,
            req,
            first: None,
        };
        m.first = Some(m.send_migrate());
        m
    }

    fn send_migrate(&self) -> (ReplyRx, ReplyRx) {
        let (host, port) = self
            .target
            .rsplit_once(':')
            .unwrap_or((&self.target, "6379"));
        let mut args: Vec<&[u8]> = vec![
            b"MIGRATE",
            host.as_bytes(),
            port.as_bytes(),
            b"",
            b"0",
            MIGRATE_TIMEOUT_MS.as_bytes(),
            b"REPLACE",
            b"KEYS",
        ];
        args.extend(self.keys.iter().map(|k| &k[..]));
        let size = args.iter().map(|a| a.len()).sum();
        let migrate = encode_request(args.len(), args.iter().copied(), size);
        let markers: Vec<Vec<u8>> = self.keys.iter().map(|k| marker_key(k)).collect();
        let exists = encode_request(
            markers.len() + 1,
            std::iter::once(&b"EXISTS"[..]).chain(markers.iter().map(|m| &m[..])),
            markers.iter().map(Vec::len).sum(),
        );
        // The source's RESP2 connections: these replies are read by the proxy, not the client.
        let pool = &self.worker.pool;
        (
            pool.send(&self.source, Proto::Resp2, migrate),
            pool.send(&self.source, Proto::Resp2, exists),
        )
    }

    pub(crate) async fn reply(mut self) -> Result<Bytes, Frame> {
        let deadline = tokio::time::Instant::now() + MARKER_WAIT;
        let (mut migrate, mut exists) = self
            .first
            .take()
            .expect("Moved::start sent the first round");
        loop {
            let m = flatten(migrate.await)?;
            let e = flatten(exists.await)?;
            match &m[..] {
                b"+OK\r\n" => break,
                b"+NOKEY\r\n" if parse_integer(&e) == Some(0) => break,
                b"+NOKEY\r\n" => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(Frame::error(
                            "TRYAGAIN a key of this command is being moved to another group; retry shortly",
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    (migrate, exists) = self.send_migrate();
                }
                other => {
                    let text = String::from_utf8_lossy(other);
                    return Err(Frame::error(format!(
                        "ERR slot migration: MIGRATE from {} to {} failed: {}",
                        self.source,
                        self.target,
                        text.trim_start_matches(['-', '+']).trim_end()
                    )));
                }
            }
        }
        flatten(
            self.worker
                .pool
                .send(&self.target, self.proto, self.req)
                .await,
        )
    }
}
