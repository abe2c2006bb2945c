//! The after-reply phase: once a command's reply is in the output buffer, each concern that
//! looks at a finished command has one hook here, run in this order:
//!
//! 1. `hot_cache`: the writes it made counted again, and a hot key's value cached;
//! 2. `observers`: the plugins that observe its reply (which may rewrite it);
//! 3. the output account charged with the reply's bytes;
//! 4. `stats`: the per-command counters and the command log;
//! 5. `mirror`: its copy sent to the shadow cluster;
//! 6. `slot_traffic`: the per-slot counters;
//! 7. `hot_keys`: the hot-key count;
//! 8. `CLIENT REPLY`: a reply the client turned off is dropped here, after every count.
//!
//! A hook reads the reply where it lies (`wbuf[at..]`); only the observers may change it.

use std::time::Instant;

use bytes::BytesMut;

use super::Session;
use super::queued::{Done, Extra, NO_SLOT};
use crate::telemetry::Measured;

impl Session {
    /// Runs every hook for a command whose reply is `wbuf[at..]`; `started` is when its batch
    /// was dispatched.
    pub(super) fn after_reply(&self, done: Done, wbuf: &mut BytesMut, at: usize, started: Instant) {
        let Done {
            observers,
            req,
            extra,
            id,
            hot_key,
            slot,
            timed,
            silent,
        } = done;
        let extra = extra.map(|e| *e).unwrap_or_default();
        let Extra {
            mirror,
            hot_fill,
            hot_write,
        } = extra;
        // Counted again now the write is done, before its client can see the reply: a GET
        // sent in between (by anyone on this proxy) filled nothing, and none hits after.
        self.worker.hot_cache.wrote(&hot_write);
        if let Some(t) = hot_fill {
            self.hot_cache_fill(t, &wbuf[at..]);
        }
        // Read once the reply is in: the counters' time, and the clock observers see.
        let now = Instant::now();
        if !observers.is_empty() {
            let _clock = tessera_wasm::clock::pin(now);
            observers.apply(self.reg.info.id, wbuf, at);
        }
        let out = wbuf.len() - at;
        self.account.charge(out);
        if let Some(id) = id {
            let error = matches!(wbuf.get(at), Some(b'-' | b'!'));
            self.worker
                .shared
                .command_stats
                .record(id, error, now - started);
            // Timed from the batch's dispatch: a clock read per command at dispatch cost
            // ~10 % of requests per CPU-second at P16 (docs/commandlog.md).
            let m = Measured {
                duration: timed.then(|| now - started),
                bytes_in: req.len(),
                bytes_out: out,
            };
            if self.worker.shared.command_log.wants(&m) {
                self.log_command(&m, &req);
            }
        }
        if let Some(t) = mirror {
            self.worker.mirror.send(t, &wbuf[at..]);
        }
        if slot != NO_SLOT {
            self.worker.shared.slot_stats.record(slot, req.len(), out);
        }
        if let Some(key) = hot_key.and_then(|k| k.of(&req)) {
            self.worker.hotkeys.record(key, req.len(), out);
        }
        if silent {
            // CLIENT REPLY OFF or SKIP: counted as any reply, never written.
            wbuf.truncate(at);
            self.account.release(out);
        }
    }
}
