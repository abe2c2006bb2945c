//! The session's side of client-side caching: `CLIENT TRACKING`, `CLIENT CACHING`, `CLIENT
//! GETREDIR` and `CLIENT TRACKINGINFO` with Redis's options and errors, and recording the keys
//! a tracking client reads (default mode; OPTIN only after `CLIENT CACHING yes`, OPTOUT unless
//! `CLIENT CACHING no`). The worker's hub keeps the table and turns every backend's write
//! reports into invalidations (`pubsub::tracking`); they reach the client between replies,
//! like pub/sub messages: RESP3 `invalidate` pushes, or with `REDIRECT id` `message
//! __redis__:invalidate` to that client (RESP2's way), on whichever worker it is.
//!
//! `NOLOOP`: the session's commands to the masters go on connections of its own, each running
//! `CLIENT TRACKING ON BCAST NOLOOP` (`own_conns`), whose reports leave out exactly the
//! session's own writes; the hub's reports from those masters pass it by. Turning it on,
//! off or over ends the batch, so that no command after it passes one before it on the
//! other connections.
//!
//! A user confined to a key prefix hears only of keys under it: its BCAST tracking is under
//! its prefix (the prefix itself when it names none; a PREFIX outside it is refused with
//! `NOPERM`), and the keys it reads in the other modes are its own already (classify refuses
//! the rest).

use std::rc::Rc;

use bytes::Bytes;

use super::Session;
use super::own_conns::OwnConns;
use super::reply::Pending;
use crate::pubsub::Target;
use crate::pubsub::tracking::MAX_PREFIX_LEN;
use crate::stages::classify::Classified;
use tessera_model::error::DataError;
use tessera_resp::{Frame, Proto};

/// BCAST prefixes one client may name.
const MAX_PREFIXES: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Default,
    Bcast,
    OptIn,
    OptOut,
}

/// A session's tracking, while it is on.
pub(super) struct ClientTracking {
    mode: Mode,
    redirect: Option<u64>,
    prefixes: Vec<Bytes>,
    /// `CLIENT CACHING yes|no`, for the next command only.
    caching: Option<bool>,
    noloop: bool,
    /// `NOLOOP`: the connections its commands to the masters take.
    own: Option<Rc<OwnConns>>,
    /// Counted in INFO's `tracking_clients` while it lives.
    _counted: Option<crate::worker::Counted>,
}

fn invalid(text: &str) -> DataError {
    DataError::Invalid(text.into())
}

/// The options of `CLIENT TRACKING ON …`, checked as Redis checks them.
fn parse_on(req: &tessera_resp::Request) -> Result<ClientTracking, DataError> {
    let mut t = ClientTracking {
        mode: Mode::Default,
        redirect: None,
        prefixes: Vec::new(),
        caching: None,
        noloop: false,
        own: None,
        _counted: None,
    };
    let (mut bcast, mut optin, mut optout) = (false, false, false);
    let mut i = 3;
    while i < req.argc() {
        let opt = req.arg(i).to_ascii_uppercase();
        match opt.as_slice() {
            b"REDIRECT" if i + 1 < req.argc() => {
                let id = std::str::from_utf8(req.arg(i + 1))
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok())
                    .ok_or_else(|| invalid("value is not an integer or out of range"))?;
                if t.redirect.is_some() {
                    return Err(invalid(
                        "A client can only redirect to a single other client",
                    ));
                }
                t.redirect = u64::try_from(id).ok().filter(|&id| id > 0);
                if t.redirect.is_none() {
                    return Err(invalid("The client ID you want redirect to does not exist"));
                }
                i += 1;
            }
            b"BCAST" => bcast = true,
            b"OPTIN" => optin = true,
            b"OPTOUT" => optout = true,
            b"NOLOOP" => t.noloop = true,
            b"PREFIX" if i + 1 < req.argc() => {
                // Checked for overlaps below: a bounded number.
                if t.prefixes.len() >= MAX_PREFIXES {
                    return Err(DataError::Invalid(format!(
                        "tessera: at most {MAX_PREFIXES} PREFIX options per client"
                    )));
                }
                // Each written key is looked up once per prefix length (pubsub::tracking).
                if req.arg(i + 1).len() > MAX_PREFIX_LEN {
                    return Err(DataError::Invalid(format!(
                        "tessera: a PREFIX is at most {MAX_PREFIX_LEN} bytes"
                    )));
                }
                t.prefixes.push(req.arg_bytes(i + 1));
                i += 1;
            }
            _ => return Err(DataError::Syntax),
        }
        i += 1;
    }
    if bcast && (optin || optout) {
        return Err(invalid("OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if optin && optout {
        return Err(invalid("You can't use both OPTIN and OPTOUT"));
    }
    if !bcast && !t.prefixes.is_empty() {
        return Err(invalid("PREFIX option requires BCAST mode to be enabled"));
    }
    if let Some((earlier, later)) = overlapping(&t.prefixes) {
        return Err(DataError::Invalid(format!(
            "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
            String::from_utf8_lossy(&t.prefixes[earlier]),
            String::from_utf8_lossy(&t.prefixes[later])
        )));
    }
    t.mode = match (bcast, optin, optout) {
        (true, _, _) => Mode::Bcast,
        (_, true, _) => Mode::OptIn,
        (_, _, true) => Mode::OptOut,
        _ => Mode::Default,
    };
    Ok(t)
}

/// A BCAST client's prefixes once `new` (none: the empty prefix) is added to the `old` it
/// has (sorted), refused as Redis refuses them: a new prefix that overlaps one it has names
/// the first such in sorted order.
fn added(old: &[Bytes], new: Vec<Bytes>) -> Result<Vec<Bytes>, DataError> {
    let new = if new.is_empty() {
        // Redis checks nothing for it.
        vec![Bytes::new()]
    } else {
        for p in &new {
            let shorter =
                (0..=p.len()).find_map(|l| old.binary_search_by(|o| o[..].cmp(&p[..l])).ok());
            let longer = old.partition_point(|o| o[..] < p[..]);
            let hit =
                shorter.or((longer < old.len() && old[longer].starts_with(p)).then_some(longer));
            if let Some(i) = hit {
                return Err(DataError::Invalid(format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(&old[i])
                )));
            }
        }
        new
    };
    let mut all: Vec<Bytes> = old.iter().cloned().chain(new).collect();
    all.sort();
    all.dedup();
    if all.len() > MAX_PREFIXES {
        return Err(DataError::Invalid(format!(
            "tessera: at most {MAX_PREFIXES} PREFIX options per client"
        )));
    }
    Ok(all)
}

/// Two prefixes one of which starts with the other, as (earlier, later) positions, if any.
///
/// In sorted order, a prefix that starts another also starts everything between them, so
/// only neighbours need comparing: O(n log n) for a client's 1024 prefixes, where comparing
/// every pair (as Redis does) cost half a million comparisons per command.
fn overlapping(prefixes: &[Bytes]) -> Option<(usize, usize)> {
    let mut order: Vec<usize> = (0..prefixes.len()).collect();
    order.sort_by(|&a, &b| prefixes[a].cmp(&prefixes[b]));
    order.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        prefixes[b]
            .starts_with(&prefixes[a])
            .then(|| (a.min(b), a.max(b)))
    })
}

impl Session {
    /// CLIENT TRACKING | CACHING | GETREDIR | TRACKINGINFO.
    pub(super) fn client_tracking(&mut self, c: &Classified<'_>) -> Pending {
        let req = c.req;
        let r = match c.cmd.name {
            "CLIENT|TRACKING" => return self.tracking_on_off(req),
            "CLIENT|CACHING" => self.caching(req),
            "CLIENT|GETREDIR" => Ok(Frame::Integer(match &self.tracking {
                None => -1,
                Some(t) => t.redirect.map_or(0, |id| id as i64),
            })),
            _ => Ok(self.tracking_info()),
        };
        match r {
            Ok(f) => Pending::Ready(f.to_bytes(self.proto)),
            Err(e) => Pending::error(&e),
        }
    }

    fn tracking_on_off(&mut self, req: &tessera_resp::Request) -> Pending {
        let on = match req.arg(2).to_ascii_uppercase().as_slice() {
            b"ON" => true,
            b"OFF" => false,
            _ => return Pending::error(&DataError::Syntax),
        };
        // Own connections retired or made: the batch ends here (`ordered`).
        let had_own = self.tracking.as_ref().is_some_and(|t| t.own.is_some());
        if !on {
            if let Some(sink) = self.subs_sink_id() {
                self.worker.pubsub.untrack(sink);
            }
            self.tracking = None;
            return self.ordered(had_own, Vec::new(), Vec::new());
        }
        let mut t = match parse_on(req) {
            Ok(t) => t,
            Err(e) => return Pending::error(&e),
        };
        if let Some(id) = t.redirect
            && !self.worker.shared.clients.contains(id)
        {
            return Pending::error(&invalid(
                "The client ID you want redirect to does not exist",
            ));
        }
        if let Some(old) = &self.tracking
            && (old.mode == Mode::Bcast) != (t.mode == Mode::Bcast)
        {
            return Pending::error(&invalid(
                "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        if t.mode == Mode::Bcast {
            // As in Redis: no prefix is the empty one, and BCAST turned on again adds its
            // prefixes to those it has.
            let old = self.tracking.as_ref().map_or(&[][..], |o| &o.prefixes[..]);
            t.prefixes = match added(old, std::mem::take(&mut t.prefixes)) {
                Ok(p) => p,
                Err(e) => return Pending::error(&e),
            };
        }
        let mut t = match self.confine(t) {
            Ok(t) => t,
            Err(e) => return Pending::error(&e),
        };
        let target = match (t.redirect, self.proto) {
            (Some(id), _) => Target::Redirect(id),
            (None, Proto::Resp3) => Target::Own,
            (None, Proto::Resp2) => Target::Nowhere,
        };
        // A RESP2 client without REDIRECT hears nothing, NOLOOP or not (as from Redis).
        t.noloop &= target != Target::Nowhere;
        let bcast = (t.mode == Mode::Bcast).then(|| t.prefixes.clone());
        let sink = self.subs_sink();
        if t.noloop {
            t.own = Some(Rc::new(OwnConns::new(
                &self.worker,
                sink,
                self.proto,
                &t.prefixes,
            )));
        }
        let generation = t.own.as_ref().map(|o| o.generation());
        let login = self.worker.control_login();
        let synced = self
            .worker
            .pubsub
            .track(sink, target, bcast, generation, &login);
        let opened = match &t.own {
            Some(own) => match own.open_all(&self.worker.shared.router.load(), &self.login) {
                Ok(opened) => opened,
                Err(e) => {
                    // No room for its connections: not tracking, as after an error from Redis.
                    self.worker.pubsub.untrack(sink);
                    self.tracking = None;
                    if had_own {
                        return Pending::Blocked(Box::pin(async move { Err(e) }));
                    }
                    return Pending::error(&e);
                }
            },
            None => Vec::new(),
        };
        t._counted = Some(crate::worker::Counted::new(&self.worker.shared, |s| {
            &s.tracking
        }));
        self.tracking = Some(t);
        self.ordered(had_own || !opened.is_empty(), synced, opened)
    }

    /// `+OK` to `CLIENT TRACKING`, once every backend reports writes (`synced`: to the hub;
    /// `opened`: the `PING`s of own connections), so
    /// that a key read after the `+OK` is invalidated. A backend that does not answer the hub
    /// holds it no longer than a subscription (from now). `barrier`: the session's own
    /// connections were made or retired, so the batch ends with this command and the next
    /// one starts once every reply before it is in: no command after it passes one before
    /// it on another connection.
    fn ordered(
        &self,
        barrier: bool,
        synced: Vec<tokio::sync::oneshot::Receiver<()>>,
        opened: Vec<crate::backend::ReplyRx>,
    ) -> Pending {
        let ok = Frame::ok().to_bytes(self.proto);
        if !barrier && synced.is_empty() {
            return Pending::Ready(ok);
        }
        let deadline = tokio::time::Instant::now() + super::pubsub::SYNC_WAIT;
        let wait_hub = async move {
            let _ = tokio::time::timeout_at(deadline, crate::pubsub::join(synced)).await;
        };
        if !barrier {
            return Pending::Later(Box::pin(async move {
                wait_hub.await;
                ok
            }));
        }
        let account = self.account.clone();
        Pending::Blocked(Box::pin(async move {
            wait_hub.await;
            for rx in opened {
                // Sent for no client: nothing charged. A master that did not answer is
                // reported by the hub until the session's connection to it is up (which
                // drops the session's cache once, `Hub::own_connected`).
                let _ = rx.await;
            }
            // Charged as a backend's reply is: whoever takes it releases it.
            account.charge(ok.len());
            Ok(ok)
        }))
    }

    /// A `NOLOOP` session's own connections to the masters.
    pub(super) fn own_conns(&self) -> Option<&Rc<OwnConns>> {
        self.tracking.as_ref()?.own.as_ref()
    }

    /// The connection for a transaction or a blocking command to `addr`: a `NOLOOP`
    /// session's own one to a master there, or a dedicated one.
    ///
    /// # Errors
    /// No dedicated connection to `addr` is free.
    pub(super) fn take_dedicated(
        &self,
        addr: &std::sync::Arc<str>,
        login: &tessera_model::login::Login,
    ) -> Result<crate::backend::Dedicated, DataError> {
        match self.own_conns() {
            Some(own) if self.worker.shared.router.load().backends().contains(addr) => {
                own.lend(addr, login)
            }
            _ => self.worker.dedicated.take(addr, self.proto, login),
        }
    }

    /// BCAST tracking of a user confined to a key prefix, kept under it: no PREFIX means its
    /// own prefix; a PREFIX outside it is refused.
    fn confine(&self, mut t: ClientTracking) -> Result<ClientTracking, DataError> {
        let Some(user) = self.rights.as_deref() else {
            return Ok(t);
        };
        let Some(allowed) = &user.key_prefix else {
            return Ok(t);
        };
        if t.mode != Mode::Bcast {
            return Ok(t);
        }
        // The empty prefix (none named) is its own.
        for p in &mut t.prefixes {
            if p.is_empty() {
                *p = allowed.clone();
            }
        }
        t.prefixes.sort();
        t.prefixes.dedup();
        if let Some(p) = t.prefixes.iter().find(|p| !p.starts_with(allowed)) {
            return Err(DataError::NoPermPrefix {
                user: user.name.as_str().into(),
                prefix: String::from_utf8_lossy(p).into(),
                allowed: String::from_utf8_lossy(allowed).into(),
            });
        }
        Ok(t)
    }

    fn caching(&mut self, req: &tessera_resp::Request) -> Result<Frame, DataError> {
        let yes = match req.arg(2).to_ascii_uppercase().as_slice() {
            b"YES" => true,
            b"NO" => false,
            _ => return Err(DataError::Syntax),
        };
        let Some(t) = self
            .tracking
            .as_mut()
            .filter(|t| matches!(t.mode, Mode::OptIn | Mode::OptOut))
        else {
            return Err(invalid(
                "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
            ));
        };
        match (t.mode, yes) {
            (Mode::OptOut, true) => Err(invalid(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            )),
            (Mode::OptIn, false) => Err(invalid(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            )),
            _ => {
                t.caching = Some(yes);
                Ok(Frame::ok())
            }
        }
    }

    fn tracking_info(&self) -> Frame {
        let s = |v: &str| Frame::Bulk(Bytes::from(v.to_string()));
        let (flags, redirect, prefixes) = match &self.tracking {
            None => (vec![s("off")], -1, vec![]),
            Some(t) => {
                let mut flags = vec![s("on")];
                match t.mode {
                    Mode::Bcast => flags.push(s("bcast")),
                    Mode::OptIn => flags.push(s("optin")),
                    Mode::OptOut => flags.push(s("optout")),
                    Mode::Default => {}
                }
                match t.caching {
                    Some(true) => flags.push(s("caching-yes")),
                    Some(false) => flags.push(s("caching-no")),
                    None => {}
                }
                if t.noloop {
                    flags.push(s("noloop"));
                }
                if let Some(id) = t.redirect
                    && !self.worker.shared.clients.contains(id)
                {
                    flags.push(s("broken_redirect"));
                }
                let redirect = t.redirect.map_or(0, |id| id as i64);
                let prefixes = t.prefixes.iter().cloned().map(Frame::Bulk).collect();
                (flags, redirect, prefixes)
            }
        };
        Frame::Map(vec![
            (s("flags"), Frame::Set(flags)),
            (s("redirect"), Frame::Integer(redirect)),
            (s("prefixes"), Frame::Array(prefixes)),
        ])
    }

    /// After a command: a read of a tracking client's keys is remembered for invalidation
    /// (as the mode and `CLIENT CACHING` say), and `CLIENT CACHING`'s choice is used up.
    #[inline]
    pub(super) fn tracked(&mut self, c: &Classified<'_>) {
        let Some(t) = &mut self.tracking else { return };
        if c.cmd.name == "CLIENT|CACHING" {
            return;
        }
        let caching = t.caching.take();
        let wanted = match t.mode {
            Mode::Bcast => false,
            Mode::Default => true,
            Mode::OptIn => caching == Some(true),
            Mode::OptOut => caching != Some(false),
        };
        let reads = !c.cmd.write && c.cmd.abi_class() & tessera_plugin_abi::class::READ != 0;
        if !wanted || !reads || c.keys.is_empty() {
            return;
        }
        let sink = self.subs_sink();
        let keys = c.key_args().map(Bytes::copy_from_slice);
        self.worker.pubsub.read(sink, keys);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_pairs(p: &[Bytes]) -> bool {
        (0..p.len())
            .any(|a| (a + 1..p.len()).any(|b| p[a].starts_with(&p[b]) || p[b].starts_with(&p[a])))
    }

    #[test]
    fn neighbours_in_sorted_order_find_every_overlap() {
        let b = |v: &[&str]| {
            v.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        for case in [
            b(&["a", "b", "c"]),
            b(&["user:", "us", "job:"]),
            b(&["ab", "abc", "b"]),
            b(&["x:1", "x:10", "x:2"]),
            b(&["", "z"]),
            b(&["k"]),
        ] {
            assert_eq!(overlapping(&case).is_some(), all_pairs(&case), "{case:?}");
        }
        assert_eq!(overlapping(&b(&["user:", "job:", "us"])), Some((0, 2)));
        let many: Vec<Bytes> = (0..1024).map(|i| Bytes::from(format!("p{i}:"))).collect();
        assert_eq!(overlapping(&many), None);
    }
}
