//! The proxy's half of slot migration: a command on a key of a migrating slot first moves its
//! keys off the source, then runs on the target. Moving is one script on the source
//! (`migrate::MOVE_KEYS_SCRIPT`), atomic there: keys too big for one MIGRATE are staged for
//! the mover to copy in chunks, the others are moved with `MIGRATE … REPLACE KEYS`, and it
//! answers how many of the keys have a marker (a big key being copied). Of several proxies
//! moving the same key, one moves it and the others find it gone.
//!
//! While a marker is present the proxy waits and tries again, up to `MARKER_WAIT`, then
//! answers `-TRYAGAIN`: a client never sees a missing or half-copied key.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use super::gather::flatten;
use crate::backend::ReplyRx;
use crate::migrate::{MoveOutcome, marker_key, move_keys_request};
use crate::resp::{Frame, Proto, encode_request, parse_integer};
use crate::worker::Worker;

/// How long a command waits for a big key's copy to finish before `-TRYAGAIN`.
const MARKER_WAIT: Duration = Duration::from_secs(3);
/// MIGRATE's own timeout.
const MIGRATE_TIMEOUT_MS: u64 = 5000;

/// Where the keys of a command on a migrating slot move, under which table.
pub(crate) struct MoveRoute {
    pub(crate) source: Arc<str>,
    pub(crate) target: Arc<str>,
    /// The move is an abort going back (see `aborting` below).
    pub(crate) aborting: bool,
    /// Epoch of the table the command was routed with.
    pub(crate) epoch: u64,
}

/// A command waiting for its keys to be moved to the target.
pub(crate) struct Moved {
    worker: Rc<Worker>,
    source: Arc<str>,
    target: Arc<str>,
    proto: Proto,
    keys: SmallVec<[Bytes; 2]>,
    req: Bytes,
    /// An abort going back: a big key staged on the target by the forward move may still
    /// be waiting to be put back there, so the target's markers are checked too.
    aborting: bool,
    /// Epoch of the table the command was routed with.
    epoch: u64,
    /// The first move, sent at dispatch so it keeps the pipeline's order on the source.
    first: Option<ReplyRx>,
}

impl Moved {
    /// Sends the first move to the source now.
    pub(crate) fn start(
        worker: Rc<Worker>,
        route: MoveRoute,
        proto: Proto,
        keys: SmallVec<[Bytes; 2]>,
        req: Bytes,
    ) -> Self {
        let MoveRoute {
            source,
            target,
            aborting,
            epoch,
        } = route;
        let mut m = Moved {
            worker,
            source,
            target,
            proto,
            keys,
            req,
            aborting,
            epoch,
            first: None,
        };
        m.first = Some(m.send_move());
        m
    }

    /// The source's RESP2 connections carry it: the reply is read by the proxy, not the client.
    fn send_move(&self) -> ReplyRx {
        let req = move_keys_request(&self.target, MIGRATE_TIMEOUT_MS, &self.keys);
        self.worker.pool.send(&self.source, Proto::Resp2, req)
    }

    async fn target_has_markers(&self) -> Result<bool, Frame> {
        let markers: Vec<Vec<u8>> = self.keys.iter().map(|k| marker_key(k)).collect();
        let mut args: Vec<&[u8]> = vec![b"EXISTS"];
        args.extend(markers.iter().map(|m| &m[..]));
        let size = args.iter().map(|a| a.len()).sum();
        let req = encode_request(args.len(), args.iter().copied(), size);
        let reply = flatten(self.worker.pool.send(&self.target, Proto::Resp2, req).await)?;
        Ok(parse_integer(&reply).is_some_and(|n| n > 0))
    }

    pub(crate) async fn reply(mut self) -> Result<Bytes, Frame> {
        let deadline = tokio::time::Instant::now() + MARKER_WAIT;
        let mut pending = self.first.take().expect("Moved::start sent the first move");
        loop {
            let reply = flatten(pending.await)?;
            let Some(outcome) = MoveOutcome::parse(&reply) else {
                let text = String::from_utf8_lossy(&reply);
                return Err(Frame::error(format!(
                    "ERR slot migration: moving keys from {} to {} failed: {}",
                    self.source,
                    self.target,
                    text.trim_start_matches(['-', '+']).trim_end()
                )));
            };
            if outcome.markers == 0 && !(self.aborting && self.target_has_markers().await?) {
                self.worker.moved.insert(self.epoch, &self.keys);
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Frame::error(
                    "TRYAGAIN a key of this command is being moved to another group; retry shortly",
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            pending = self.send_move();
        }
        flatten(
            self.worker
                .pool
                .send(&self.target, self.proto, self.req)
                .await,
        )
    }
}
