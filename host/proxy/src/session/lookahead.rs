//! The plugin layer's pre-pass over a pipeline: when a request that a plugin hooks starts a run
//! of plain routed commands (keyed or split, not blocking), the requests read with it are
//! decoded ahead (up to the session's batch room), and the run is shown to the plugins at once,
//! one call per plugin for all of the run's commands it hooks (`Instance::on_commands`). The
//! session then dispatches the requests one by one as before, each handed on as a [`Decoded`]
//! with its precomputed [`Decision`] and classification. A request no plugin hooks, met first,
//! goes straight on.
//!
//! A run ends before any other command (AUTH, HELLO, SELECT, MULTI, SUBSCRIBE, a blocking
//! command …): those change what later commands are or may do, so the commands after them are
//! decided only once they have been dispatched. Plugins still see every command in order.

use std::collections::VecDeque;

use bytes::BytesMut;
use smallvec::SmallVec;

use super::Session;
use super::plugins::{Decision, Observers};
use crate::stages::classify::{Classified, classify};
use tessera_model::command::{Command, Kind};
use tessera_model::router::SlotId;
use tessera_resp::{ProtocolError, Request};

/// Requests decoded ahead, with the plugin decisions made for them.
#[derive(Default)]
pub(super) struct Lookahead {
    ahead: VecDeque<Ahead>,
}

/// What classify found for a request, without the borrow of the request.
#[derive(Clone)]
pub(super) struct Kept {
    cmd: &'static Command,
    keys: SmallVec<[u32; 4]>,
    hashed: SlotId,
}

impl Kept {
    fn of(c: Classified<'_>) -> Self {
        Self {
            cmd: c.cmd,
            keys: c.keys,
            hashed: c.hashed,
        }
    }

    /// The classification again, for `req`, the request it was made for.
    pub(super) fn on(self, req: &Request) -> Classified<'_> {
        Classified {
            cmd: self.cmd,
            req,
            keys: self.keys,
            hashed: self.hashed,
        }
    }
}

/// A request handed to the session's stages, with what the pre-pass made for it already.
pub(super) struct Decoded {
    pub(super) req: Request,
    /// Its classification (classify is not run twice). It holds for the dispatch: the run it
    /// was made in ends before any command that changes the session's rights or protocol.
    pub(super) classified: Option<Kept>,
    /// The plugin layer's decision, made with the rest of its run.
    pub(super) decision: Option<Decision>,
}

impl Decoded {
    fn plain(req: Request) -> Self {
        Self {
            req,
            classified: None,
            decision: None,
        }
    }
}

struct Ahead {
    req: Result<Request, ProtocolError>,
    /// Whether the pre-pass has looked at it (`decision` is `None` for the commands it left
    /// to the per-command path).
    checked: bool,
    decision: Option<Decision>,
    classified: Option<Kept>,
}

impl Lookahead {
    /// Whether requests wait here (the session must not block on a read then).
    pub(super) fn is_empty(&self) -> bool {
        self.ahead.is_empty()
    }
}

/// Whether a command may share a pre-pass with the commands around it: a plain routed command
/// that changes nothing about how the next ones are classified or dispatched.
fn batchable(c: &Classified<'_>) -> bool {
    matches!(c.cmd.kind, Kind::Keyed | Kind::Split(_)) && !c.blocks()
}

impl Session {
    /// The next request to dispatch: from those decoded ahead, or from the read buffer. When a
    /// plugin hooks the next request and it may share a pre-pass, decodes up to `room` requests
    /// ahead and decides the run at the front in one pass.
    pub(super) fn next_request(
        &mut self,
        rbuf: &mut BytesMut,
        room: usize,
    ) -> Result<Option<Decoded>, ProtocolError> {
        if self.lookahead.ahead.is_empty() {
            if !self.plugins_on {
                return self.decoder.decode(rbuf).map(|r| r.map(Decoded::plain));
            }
            // One request first: unless a plugin hooks it and it may share a pre-pass, it goes
            // straight on (classified once, here), and nothing is decoded ahead for it. A
            // command no plugin hooks then costs what it costs without plugins, and a bitmap
            // test.
            let Some(req) = self.decoder.decode(rbuf)? else {
                return Ok(None);
            };
            let Ok(c) = classify(&req, &self.worker.shared.policy(), self.rights.as_deref()) else {
                // Refused: `dispatch` classifies it again and says why.
                return Ok(Some(Decoded::plain(req)));
            };
            let (id, class) = crate::plugins::abi_of(c.cmd.id);
            let hooked = self.worker.shared.plugins.chain().hooks_any(id, class);
            if !hooked || !batchable(&c) {
                let classified = Some(Kept::of(c));
                let decision = (!hooked).then(|| Decision::Continue(Observers::default()));
                return Ok(Some(Decoded {
                    req,
                    classified,
                    decision,
                }));
            }
            let kept = Kept::of(c);
            self.lookahead.ahead.push_back(Ahead {
                req: Ok(req),
                checked: false,
                decision: None,
                classified: Some(kept),
            });
            while self.lookahead.ahead.len() < room.max(1) {
                let req = match self.decoder.decode(rbuf) {
                    Ok(Some(r)) => Ok(r),
                    Ok(None) => break,
                    Err(e) => Err(e),
                };
                let end = req.is_err();
                self.lookahead.ahead.push_back(Ahead {
                    req,
                    checked: false,
                    decision: None,
                    classified: None,
                });
                if end {
                    break;
                }
            }
        }
        if self.lookahead.ahead.front().is_some_and(|a| !a.checked) {
            self.decide_run();
        }
        let Some(a) = self.lookahead.ahead.pop_front() else {
            return Ok(None);
        };
        let req = a.req?;
        Ok(Some(Decoded {
            req,
            classified: a.classified,
            decision: a.decision,
        }))
    }

    /// Decides the run of batchable commands at the front of the lookahead in one pass of
    /// the chain. The first command that is not batchable is marked checked without a
    /// decision: the session dispatches it the ordinary way.
    fn decide_run(&mut self) {
        if self.lookahead.ahead.len() == 1 {
            // A lone request (P1): nothing to batch (its classification, if made, is kept).
            self.lookahead.ahead[0].checked = true;
            return;
        }
        let mut ahead = std::mem::take(&mut self.lookahead.ahead);
        let policy = self.worker.shared.policy();
        let mut run: Vec<Classified<'_>> = Vec::new();
        for a in ahead.iter() {
            let Ok(req) = &a.req else { break };
            let c = match &a.classified {
                Some(k) => k.clone().on(req),
                None => match classify(req, &policy, self.rights.as_deref()) {
                    Ok(c) => c,
                    Err(_) => break,
                },
            };
            if !batchable(&c) || self.pubsub_refuses(&c).is_some() {
                break;
            }
            run.push(c);
        }
        let n = run.len();
        let decisions = if n > 1 {
            self.run_plugins_batch(&run)
        } else {
            Vec::new()
        };
        let kept: Vec<Kept> = if n > 1 {
            run.into_iter().map(Kept::of).collect()
        } else {
            Vec::new()
        };
        // A run of one (or none) is left to the per-command path: nothing to batch.
        for ((a, d), k) in ahead.iter_mut().zip(decisions).zip(kept) {
            a.decision = Some(d);
            a.classified = Some(k);
        }
        for a in ahead.iter_mut().take(n.max(1)) {
            a.checked = true;
        }
        self.lookahead.ahead = ahead;
    }
}
