//! Commands that hold a connection until they are answered: blocking commands (BLPOP, BLMOVE,
//! BZPOPMIN, XREAD … BLOCK …) on a dedicated backend connection, and WAIT on every master.
//!
//! A blocked command counts as in flight, like any command, so a table swap waits for it —
//! but only as long as it takes to see whether it must move: one whose slot keeps its owner
//! counts under the new table from then on, and when a swap starts draining, a command whose slot
//! now has another owner (or is held for a handoff) is unblocked on the old owner with
//! `CLIENT UNBLOCK` by the proxy's control user. If the old owner answered with an element
//! first, that is the reply; if it answered the timeout reply, nothing was taken there, and
//! the command is sent again under the new table, with what is left of its timeout (as Redis
//! counts it: from when the command started waiting). A command whose slot is held for a
//! handoff when it starts waits in the proxy for the next table, and that wait counts too. An element is popped from exactly one
//! server. A client that goes away while blocked drops the dedicated connection, which
//! closes it at once. When the proxy stops, a blocked command is unblocked the same way and
//! its client gets what the server answered (an element, or the timeout reply): an element
//! the server popped is never left unanswered.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use super::Batch;
use crate::backend::{Dedicated, ReplyResult};
use crate::worker::{Counted, Worker};
use tessera_model::error::DataError;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::migration::INTERNAL_PREFIX;
use tessera_model::router::{SlotId, SlotTable};
use tessera_resp::{Proto, Request, encode_request, parse_integer};

/// How long the proxy keeps asking the old owner to unblock a command that has not reached
/// it yet (it was written on another connection than the unblock).
const UNBLOCK_PATIENCE: Duration = Duration::from_secs(2);

/// A blocking command, as the session hands it over.
pub(crate) struct Blocking {
    pub(crate) worker: Rc<Worker>,
    pub(crate) proto: Proto,
    pub(crate) login: Login,
    pub(crate) account: Rc<OutputAccount>,
    pub(crate) slot: SlotId,
    /// The proxy's id of the client, which CLIENT UNBLOCK names.
    pub(crate) client: u64,
    pub(crate) req: Request,
    /// The proxy is stopping: the command is unblocked and answered, not abandoned.
    pub(crate) stop: tokio::sync::watch::Receiver<bool>,
    /// A `NOLOOP` session's own connections: a master's is the command's.
    pub(crate) own: Option<Rc<super::own_conns::OwnConns>>,
}

/// The master the command goes to under `table`.
fn route(table: &SlotTable, slot: SlotId) -> Result<Arc<str>, DataError> {
    Ok(table.backend_addr(table.route(slot)?).clone())
}

impl Blocking {
    /// The proxy is stopping, or gone: its stop signal was given, or can no longer be (then
    /// `changed` would answer at once for ever, and the wait in `run` must not spin on it).
    fn stopping(&self) -> bool {
        *self.stop.borrow() || self.stop.has_changed().is_err()
    }

    /// Runs the command to its reply. Not started until first polled: it runs after the
    /// replies before it in the client's pipeline, as Redis would.
    pub(crate) async fn run(mut self) -> ReplyResult {
        let worker = self.worker.clone();
        let mut swaps = worker.shared.swaps();
        let started = tokio::time::Instant::now();
        let mut req = self.req.as_bytes().clone();
        'route: loop {
            // Routed and sent while counted in flight under the table it was routed with. A
            // swap that starts after this line is seen below; one that started before it
            // counts this batch in its new phase.
            swaps.borrow_and_update();
            let mut batch = Batch::enter(worker.clone());
            let table = worker.shared.router.load_full();
            let addr = match route(&table, self.slot) {
                Ok(addr) => addr,
                Err(DataError::SlotBlocked(_)) => {
                    drop(batch);
                    // The slot is being handed over: wait for the next table. The wait is
                    // part of the command's timeout, as a server would count it.
                    let _ = tokio::time::timeout(Duration::from_millis(50), swaps.changed()).await;
                    req = with_time_left(&self.req, started.elapsed());
                    continue;
                }
                Err(e) => return Err(e),
            };
            // A prefix route's target is another cluster's proxy, logged in as the route says.
            let login = match table.route(self.slot) {
                Ok(b) => table.login_for(b, &self.login),
                Err(_) => &self.login,
            };
            let mut conn = match &self.own {
                Some(own) if table.backends().contains(&addr) => own.lend(&addr, login)?,
                _ => worker.dedicated.take(&addr, self.proto, login)?,
            };
            let mut rx = conn.send(req.clone(), Some(&self.account));
            let _unblockable = match conn.client_id().await {
                Some(id) => Some(BlockedOn::new(&worker, self.client, addr.clone(), id)),
                None => None,
            };
            loop {
                // Stopping (maybe since before it was sent): unblocked below, and answered.
                if self.stopping() {
                    break;
                }
                tokio::select! {
                    biased;
                    r = &mut rx => {
                        drop(batch);
                        match r {
                            Ok(_) => {
                                conn.release();
                                return r;
                            }
                            // The master went away while the client waited: once the slot
                            // has a new owner (a promoted replica), the command waits there.
                            Err(DataError::BackendUnavailable { .. } | DataError::BackendDropped) => {
                                drop(conn);
                                if new_owner(&worker, &mut swaps, self.slot, &addr).await {
                                    req = with_time_left(&self.req, started.elapsed());
                                    continue 'route;
                                }
                                return r;
                            }
                            Err(_) => return r,
                        }
                    }
                    _ = swaps.changed() => {}
                    _ = self.stop.changed() => {}
                }
                // A swap is draining: stay if the slot still lives here. A prefix route's
                // slot stays: the other cluster's proxy moves its keys itself, and a new
                // target of this proxy's changes nothing for a command already there.
                let table = worker.shared.router.load_full();
                if self.stopping() {
                    continue;
                }
                if SlotTable::is_routed(self.slot)
                    || matches!(route(&table, self.slot), Ok(ref a) if *a == addr)
                {
                    // Served here under the new table too: counted in its phase from now on
                    // (entered before the old count is let go), so the swap's drain does not
                    // wait for a command it need not move — a client blocked for minutes
                    // would otherwise hold every table push for the whole drain limit.
                    batch = Batch::enter(worker.clone());
                    continue;
                }
                break;
            }
            let r = unblock(&worker, &mut conn, &addr, &mut rx).await;
            drop(batch);
            match r {
                // An element taken on the old owner, or the proxy stopping: this is the reply
                // (the timeout reply, when stopping took nothing; the client may send the
                // command again to another proxy).
                Some(Ok(reply)) if !is_null(&reply) || self.stopping() => {
                    conn.release();
                    return Ok(reply);
                }
                Some(Ok(reply)) => {
                    // Nothing was taken on the old owner: send it again under the new table.
                    self.account.release(reply.len());
                    conn.release();
                    req = with_time_left(&self.req, started.elapsed());
                }
                Some(Err(e)) => return Err(e),
                None => return Err(DataError::KeyMoving),
            }
        }
    }
}

/// `req` (a blocking command) with its timeout less `waited`, to be sent again elsewhere. A
/// timeout of 0 (for ever) stays 0; one used up becomes the shortest Redis takes (1 ms), so the
/// new owner answers with the command's own timeout reply. A command whose timeout cannot be
/// read is sent as it was (the server refuses it as it would have the first time).
fn with_time_left(req: &Request, waited: Duration) -> Bytes {
    let args: Vec<&[u8]> = req.args().collect();
    let name = args[0].to_ascii_uppercase();
    let at = match name.as_slice() {
        // BLMPOP timeout numkeys …, BZMPOP timeout numkeys …
        b"BLMPOP" | b"BZMPOP" => 1,
        // XREAD/XREADGROUP … BLOCK ms … (seconds elsewhere, milliseconds here).
        b"XREAD" | b"XREADGROUP" => {
            let Some(i) = args.iter().position(|a| a.eq_ignore_ascii_case(b"BLOCK")) else {
                return req.as_bytes().clone();
            };
            let left = std::str::from_utf8(args.get(i + 1).copied().unwrap_or_default())
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .map(|ms| match ms {
                    0 => 0,
                    ms => ms.saturating_sub(waited.as_millis() as u64).max(1),
                });
            return match left {
                Some(ms) => rebuilt(&args, i + 1, ms.to_string()),
                None => req.as_bytes().clone(),
            };
        }
        // BLPOP BRPOP BZPOPMIN BZPOPMAX BLMOVE BRPOPLPUSH: the last argument.
        _ => args.len() - 1,
    };
    let Some(secs) = std::str::from_utf8(args[at])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .filter(|t| t.is_finite() && *t >= 0.0)
    else {
        return req.as_bytes().clone();
    };
    if secs == 0.0 {
        return req.as_bytes().clone();
    }
    let left = (secs - waited.as_secs_f64()).max(0.001);
    rebuilt(&args, at, format!("{left:.3}"))
}

/// `args` with argument `at` replaced by `value`, encoded as a request.
fn rebuilt(args: &[&[u8]], at: usize, value: String) -> Bytes {
    let mut new: Vec<&[u8]> = args.to_vec();
    new[at] = value.as_bytes();
    Request::from_args(&new).as_bytes().clone()
}

/// How long a command blocked on a master that went away waits for the slot's new owner.
const FAILOVER_WAIT: Duration = Duration::from_secs(30);

/// Waits (up to `FAILOVER_WAIT`) until the table routes `slot` elsewhere than `gone`.
async fn new_owner(
    worker: &Rc<Worker>,
    swaps: &mut tokio::sync::watch::Receiver<u64>,
    slot: SlotId,
    gone: &Arc<str>,
) -> bool {
    let deadline = tokio::time::Instant::now() + FAILOVER_WAIT;
    loop {
        let table = worker.shared.router.load_full();
        match route(&table, slot) {
            Ok(a) if a != *gone => return true,
            _ => {}
        }
        let changed = tokio::time::timeout_at(deadline, swaps.changed()).await;
        if !matches!(changed, Ok(Ok(()))) {
            return false;
        }
    }
}

/// A client's entry in `Shared::blocked_on` while its command is sent to one backend, and
/// its place in INFO's `blocked_clients`.
struct BlockedOn {
    worker: Rc<Worker>,
    client: u64,
    _counted: Counted,
}

impl BlockedOn {
    fn new(worker: &Rc<Worker>, client: u64, addr: Arc<str>, id: i64) -> Self {
        let mut map = worker
            .shared
            .blocked_on
            .lock()
            .expect("blocked_on lock poisoned");
        map.insert(client, (addr, id));
        Self {
            worker: worker.clone(),
            client,
            _counted: Counted::new(&worker.shared, |s| &s.blocked),
        }
    }
}

impl Drop for BlockedOn {
    fn drop(&mut self) {
        let mut map = self
            .worker
            .shared
            .blocked_on
            .lock()
            .expect("blocked_on lock poisoned");
        map.remove(&self.client);
    }
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR], for a client of this proxy: passed to the backend its
/// command is blocked on, with that backend's id of the connection, again while the command
/// is still on its way there. `:0` when the client is not blocked (as Redis answers).
pub(crate) async fn client_unblock(
    worker: Rc<Worker>,
    client: u64,
    how: Option<Bytes>,
) -> ReplyResult {
    let target = {
        let map = worker
            .shared
            .blocked_on
            .lock()
            .expect("blocked_on lock poisoned");
        map.get(&client).cloned()
    };
    let Some((addr, id)) = target else {
        return Ok(Bytes::from_static(b":0\r\n"));
    };
    let id = id.to_string();
    let mut args: Vec<&[u8]> = vec![b"CLIENT", b"UNBLOCK", id.as_bytes()];
    if let Some(h) = &how {
        args.push(h);
    }
    let size = args.iter().map(|a| a.len()).sum();
    let req = encode_request(args.len(), args, size);
    let deadline = tokio::time::Instant::now() + UNBLOCK_PATIENCE;
    loop {
        let reply = worker
            .pool
            .send(
                &addr,
                Proto::Resp2,
                &worker.control_login(),
                req.clone(),
                None,
            )
            .await?;
        let still_sent = {
            let map = worker
                .shared
                .blocked_on
                .lock()
                .expect("blocked_on lock poisoned");
            map.get(&client)
                .is_some_and(|(a, i)| *a == addr && i.to_string() == id)
        };
        if reply != b":0\r\n"[..] || !still_sent || tokio::time::Instant::now() >= deadline {
            return Ok(reply);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Asks `addr` to unblock the command on `conn`, until its reply arrives: `None` if it never
/// does (the connection is then dropped, closing it).
async fn unblock(
    worker: &Rc<Worker>,
    conn: &mut Dedicated,
    addr: &Arc<str>,
    rx: &mut crate::backend::ReplyRx,
) -> Option<ReplyResult> {
    let id = conn.client_id().await?;
    let id = id.to_string();
    let req = encode_request(
        3,
        [&b"CLIENT"[..], b"UNBLOCK", id.as_bytes()],
        id.len() + 13,
    );
    let deadline = tokio::time::Instant::now() + UNBLOCK_PATIENCE;
    loop {
        let ask = worker.pool.send(
            addr,
            Proto::Resp2,
            &worker.control_login(),
            req.clone(),
            None,
        );
        let unblocked = tokio::select! {
            biased;
            r = &mut *rx => return Some(r),
            a = ask => a.ok().and_then(|a| parse_integer(&a)) == Some(1),
        };
        if unblocked {
            return Some(rx.await);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        // Not blocked yet: the command is still on its way to the server.
        tokio::select! {
            biased;
            r = &mut *rx => return Some(r),
            _ = tokio::time::sleep(Duration::from_millis(2)) => {}
        }
    }
}

/// The timeout reply of a blocking command: a null array or bulk (RESP2), or null (RESP3).
fn is_null(reply: &[u8]) -> bool {
    matches!(reply, b"*-1\r\n" | b"$-1\r\n" | b"_\r\n")
}

/// WAIT numreplicas timeout: every master waits for the client's earlier writes, each on a
/// dedicated connection of the proxy's control user that first makes a write of its own (a
/// counter in Tessera's internal database), so what it waits for covers every write the
/// server applied before. The reply is the smallest count: replicas that have every write.
pub(crate) async fn wait(worker: Rc<Worker>, req: Bytes) -> ReplyResult {
    let _counted = Counted::new(&worker.shared, |s| &s.blocked);
    let table = worker.shared.router.load_full();
    let control = worker.control_login();
    let mut block = BytesMut::new();
    block.extend_from_slice(&wait_marker_request());
    block.extend_from_slice(&req);
    let block = block.freeze();
    let mut pending = Vec::new();
    for addr in table.backends() {
        let conn = worker.dedicated.take(addr, Proto::Resp2, &control)?;
        let rx = conn.send_block(block.clone(), 1, None);
        pending.push((conn, rx));
    }
    if pending.is_empty() {
        return Err(DataError::NoBackend);
    }
    let mut least = i64::MAX;
    for (conn, rx) in pending {
        let reply: Bytes = rx.await?;
        match parse_integer(&reply) {
            Some(n) => least = least.min(n),
            None => return Ok(reply),
        }
        conn.release();
    }
    Ok(Bytes::from(format!(":{least}\r\n")))
}

/// A write of the proxy's own, in its internal database (never a client's keyspace): after
/// it, a WAIT on the same connection waits for everything the server applied before.
fn wait_marker_request() -> Bytes {
    const SCRIPT: &[u8] = b"redis.call('SELECT', 1) return redis.call('INCR', KEYS[1])";
    let key = [INTERNAL_PREFIX, b"wait"].concat();
    let args: [&[u8]; 4] = [b"EVAL", SCRIPT, b"1", &key];
    let size = args.iter().map(|a| a.len()).sum();
    encode_request(4, args, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent_again(args: &[&str], waited_ms: u64) -> Vec<String> {
        let req = Request::from_args(args);
        let bytes = with_time_left(&req, Duration::from_millis(waited_ms));
        let mut buf = BytesMut::from(&bytes[..]);
        let again = tessera_resp::RequestDecoder::new(tessera_resp::Limits::default())
            .decode(&mut buf)
            .unwrap()
            .unwrap();
        again
            .args()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect()
    }

    #[test]
    fn a_command_sent_again_keeps_only_what_is_left_of_its_timeout() {
        assert_eq!(
            sent_again(&["BLPOP", "a", "b", "5"], 2000),
            ["BLPOP", "a", "b", "3.000"]
        );
        assert_eq!(
            sent_again(&["BLMOVE", "s", "d", "LEFT", "RIGHT", "1.5"], 500),
            ["BLMOVE", "s", "d", "LEFT", "RIGHT", "1.000"]
        );
        assert_eq!(
            sent_again(&["BLMPOP", "4", "1", "k", "LEFT"], 1000),
            ["BLMPOP", "3.000", "1", "k", "LEFT"]
        );
        assert_eq!(
            sent_again(
                &["XREAD", "COUNT", "2", "BLOCK", "3000", "STREAMS", "s", "$"],
                1200
            ),
            ["XREAD", "COUNT", "2", "BLOCK", "1800", "STREAMS", "s", "$"]
        );
        // Used up: the shortest timeout, so the new owner gives the command's timeout reply.
        assert_eq!(
            sent_again(&["BRPOP", "k", "1"], 5000),
            ["BRPOP", "k", "0.001"]
        );
        assert_eq!(
            sent_again(
                &[
                    "XREADGROUP",
                    "GROUP",
                    "g",
                    "c",
                    "BLOCK",
                    "10",
                    "STREAMS",
                    "s",
                    ">"
                ],
                50
            ),
            [
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "1",
                "STREAMS",
                "s",
                ">"
            ]
        );
        // For ever stays for ever; what cannot be read is sent as it was.
        assert_eq!(sent_again(&["BLPOP", "k", "0"], 9000), ["BLPOP", "k", "0"]);
        assert_eq!(
            sent_again(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"], 9000)[2],
            "0"
        );
        assert_eq!(
            sent_again(&["BLPOP", "k", "soon"], 100),
            ["BLPOP", "k", "soon"]
        );
    }
}
