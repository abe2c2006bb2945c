//! The proxy's half of slot migration: a command on a key of a migrating slot first moves its
//! keys off the source, then runs on the target. Moving is one transaction on the source
//! (`migrate::move_keys_request`), atomic there: a script stages the keys too big for one
//! MIGRATE for the mover to copy in chunks and answers how many of the keys have a marker (a
//! big key being copied), then `MIGRATE … REPLACE AUTH2 … KEYS` moves the others. Of several
//! proxies moving the same key, one moves it and the others find it gone.
//!
//! The move and the marker checks are the proxy's own requests, on its control login (the
//! client's confined user may neither MIGRATE nor touch Tessera's internal keys); the command
//! itself runs on the target with the client's login.
//!
//! While a marker is present the proxy waits and tries again, up to `MARKER_WAIT`, then
//! answers `-TRYAGAIN`: a client never sees a missing or half-copied key.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::backend::ReplyRx;
use crate::worker::Worker;
use tessera_model::error::{DataError, MoveFailure};
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::migration::{
    MOVE_KEYS_SKIPPED, MoveOutcome, markers_exist_request, move_keys_request,
};
use tessera_resp::{Proto, parse_integer};

/// How long a command waits for a big key's copy to finish before `-TRYAGAIN`.
const MARKER_WAIT: Duration = Duration::from_secs(3);
/// MIGRATE's own timeout.
const MIGRATE_TIMEOUT_MS: u64 = 5000;

/// A command waiting for its keys to be moved to the target.
pub(crate) struct Moved {
    pub(crate) worker: Rc<Worker>,
    pub(crate) source: Arc<str>,
    pub(crate) target: Arc<str>,
    pub(crate) proto: Proto,
    /// The client's login, for the command itself.
    pub(crate) login: Login,
    pub(crate) account: Rc<OutputAccount>,
    pub(crate) keys: SmallVec<[Bytes; 2]>,
    pub(crate) req: Bytes,
    /// An abort going back: a big key staged on the target by the forward move may still
    /// be waiting to be put back there, so the target's markers are checked too.
    pub(crate) aborting: bool,
    /// Epoch of the table the command was routed with.
    pub(crate) epoch: u64,
    /// The first move, sent at dispatch so it keeps the pipeline's order on the source.
    pub(crate) first: Option<ReplyRx>,
}

impl Moved {
    /// Sends the first move to the source now.
    pub(crate) fn start(mut self) -> Self {
        self.first = Some(self.send_move());
        self
    }

    fn control(&self, addr: &Arc<str>, req: Bytes, skip: u32) -> ReplyRx {
        let w = &self.worker;
        w.pool
            .send_block(addr, Proto::Resp2, &w.control_login(), req, skip, None)
    }

    fn send_move(&self) -> ReplyRx {
        let credential = self.worker.backend_admin();
        let req = move_keys_request(
            &self.target,
            MIGRATE_TIMEOUT_MS,
            credential.as_ref(),
            &self.keys,
        );
        self.control(&self.source, req, MOVE_KEYS_SKIPPED)
    }

    async fn target_has_markers(&self) -> Result<bool, DataError> {
        let req = markers_exist_request(&self.keys);
        let reply = self.control(&self.target, req, 0).await?;
        Ok(parse_integer(&reply).is_some_and(|n| n > 0))
    }

    pub(crate) async fn reply(mut self) -> Result<Bytes, DataError> {
        self.settle().await?;
        // Charged to the client when it arrives; released by whoever takes this reply.
        let rx = self.worker.pool.send(
            &self.target,
            self.proto,
            &self.login,
            self.req,
            Some(&self.account),
        );
        rx.await
    }

    /// Waits until the keys are on the target: moved now, or by another, or never there.
    pub(crate) async fn settle(&mut self) -> Result<(), DataError> {
        let deadline = tokio::time::Instant::now() + MARKER_WAIT;
        let mut pending = self.first.take().expect("Moved::start sent the first move");
        loop {
            let reply = pending.await?;
            let outcome = MoveOutcome::parse_move(&reply).map_err(|reply| {
                DataError::MoveFailed(Box::new(MoveFailure {
                    from: self.source.clone(),
                    target: self.target.clone(),
                    reply,
                }))
            })?;
            if outcome.markers == 0 && !(self.aborting && self.target_has_markers().await?) {
                self.worker.moved.insert(self.epoch, &self.keys);
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(DataError::KeyMoving);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            pending = self.send_move();
        }
    }
}
