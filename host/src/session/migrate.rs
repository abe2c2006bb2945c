//! The proxy's half of slot migration: a command on a key of a migrating slot first moves the
//! key from the source, then runs on the target. On the source, in one pipeline:
//!
//! 1. a script stages every key of the command that is too big to MIGRATE whole (renamed to
//!    its staging key, marker set; the mover copies it in chunks);
//! 2. `MIGRATE target port "" 0 timeout REPLACE KEYS k…` moves the others (`NOKEY` is fine:
//!    moved already, or never there). MIGRATE is atomic on the source, so of several proxies
//!    moving the same key one wins and the others see NOKEY;
//! 3. `EXISTS marker…`: a key being copied in chunks has its marker; then the proxy waits and
//!    retries, up to `MARKER_WAIT`, and answers `-TRYAGAIN` after that.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use super::gather::flatten;
use crate::backend::ReplyRx;
use crate::migrate::{BIG_KEY_BYTES, BIG_KEY_ELEMENTS, STAGE_BIG_KEYS_SCRIPT, marker_key};
use crate::proxy::Worker;
use crate::resp::{Frame, Proto, encode_request, parse_integer};

/// How long a command waits for a big key's copy to finish before `-TRYAGAIN`.
const MARKER_WAIT: Duration = Duration::from_secs(3);
/// MIGRATE's own timeout, in milliseconds.
const MIGRATE_TIMEOUT_MS: &str = "5000";

/// A command waiting for its keys to be moved to the target.
pub(crate) struct Moved {
    worker: Rc<Worker>,
    source: Arc<str>,
    target: Arc<str>,
    proto: Proto,
    keys: SmallVec<[Bytes; 2]>,
    req: Bytes,
    /// Replies of the staging script, the first MIGRATE and the marker check, sent at
    /// dispatch so they keep the pipeline's order on the source connection.
    first: Option<(ReplyRx, ReplyRx, ReplyRx)>,
}

fn request(args: &[&[u8]]) -> Bytes {
    let size = args.iter().map(|a| a.len()).sum();
    encode_request(args.len(), args.iter().copied(), size)
}

fn server_error(what: &str, source: &str, reply: &[u8]) -> Frame {
    let text = String::from_utf8_lossy(reply);
    Frame::error(format!(
        "ERR slot migration: {what} on {source} failed: {}",
        text.trim_start_matches(['-', '+']).trim_end()
    ))
}

impl Moved {
    /// Sends the first round to the source now.
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
        let stage = m.send_stage();
        let (migrate, exists) = m.send_migrate();
        m.first = Some((stage, migrate, exists));
        m
    }

    /// The source's RESP2 connections carry these: their replies are read by the proxy.
    fn send_source(&self, req: Bytes) -> ReplyRx {
        self.worker.pool.send(&self.source, Proto::Resp2, req)
    }

    fn send_stage(&self) -> ReplyRx {
        let (elements, bytes) = (BIG_KEY_ELEMENTS.to_string(), BIG_KEY_BYTES.to_string());
        let n = self.keys.len().to_string();
        let mut args: Vec<&[u8]> = vec![b"EVAL", STAGE_BIG_KEYS_SCRIPT.as_bytes(), n.as_bytes()];
        args.extend(self.keys.iter().map(|k| &k[..]));
        args.push(elements.as_bytes());
        args.push(bytes.as_bytes());
        self.send_source(request(&args))
    }

    fn send_migrate(&self) -> (ReplyRx, ReplyRx) {
        let (host, port) = self
            .target
            .rsplit_once(':')
            .unwrap_or((&self.target, "6379"));
        let mut migrate: Vec<&[u8]> = vec![
            b"MIGRATE",
            host.as_bytes(),
            port.as_bytes(),
            b"",
            b"0",
            MIGRATE_TIMEOUT_MS.as_bytes(),
            b"REPLACE",
            b"KEYS",
        ];
        migrate.extend(self.keys.iter().map(|k| &k[..]));
        let markers: Vec<Vec<u8>> = self.keys.iter().map(|k| marker_key(k)).collect();
        let mut exists: Vec<&[u8]> = vec![b"EXISTS"];
        exists.extend(markers.iter().map(|m| &m[..]));
        (
            self.send_source(request(&migrate)),
            self.send_source(request(&exists)),
        )
    }

    pub(crate) async fn reply(mut self) -> Result<Bytes, Frame> {
        let deadline = tokio::time::Instant::now() + MARKER_WAIT;
        let (stage, mut migrate, mut exists) = self
            .first
            .take()
            .expect("Moved::start sent the first round");
        let staged = flatten(stage.await)?;
        if staged.first() == Some(&b'-') {
            return Err(server_error("staging big keys", &self.source, &staged));
        }
        loop {
            let m = flatten(migrate.await)?;
            let e = flatten(exists.await)?;
            match &m[..] {
                b"+OK\r\n" | b"+NOKEY\r\n" if parse_integer(&e) == Some(0) => break,
                b"+OK\r\n" | b"+NOKEY\r\n" => {
                    if tokio::time::Instant::now() >= deadline {
                        return Err(Frame::error(
                            "TRYAGAIN a key of this command is being moved to another group; retry shortly",
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    (migrate, exists) = self.send_migrate();
                }
                other => return Err(server_error("MIGRATE", &self.source, other)),
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
