//! Scripts and functions present on every group, including groups added later and replicas
//! promoted later, so a client never sees `NOSCRIPT` for a script it loaded through Tessera.
//!
//! `SCRIPT LOAD` goes to every master (as any library command), and the proxy also keeps the
//! script's body on every master in Tessera's internal database (db 1, key
//! `__tessera:script:<sha1>`), where replication carries it to replicas. An `EVALSHA` answered
//! `NOSCRIPT` — a group that joined after the load, a promoted replica whose script cache was
//! empty, a server restarted — is answered by loading the body from its own server's db 1, or
//! from another master's, and running the `EVALSHA` again. Likewise `FCALL` answered "Function
//! not found" restores the libraries from another master (`FUNCTION DUMP`, `FUNCTION RESTORE`)
//! and runs again. The retry runs after the original request, so a command pipelined right
//! behind the first `EVALSHA` on a new group may run before it (once per script and group).

use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;

use super::Session;
use super::own_conns::OwnConns;
use super::reply::Pending;
use super::send::Sender;
use crate::backend::{Lane, ReplyResult, ReplyRx};
use crate::stages::classify::Classified;
use crate::stages::plan::{Channel, Plan};
use crate::worker::Worker;
use tessera_model::limits::OutputAccount;
use tessera_model::login::Login;
use tessera_model::migration::INTERNAL_PREFIX;
use tessera_model::router::SlotTable;
use tessera_resp::{Proto, encode_request};

/// Keeps a script's body under its sha1 in the internal database (computed by the server).
const STORE_SCRIPT: &[u8] = b"redis.call('SELECT', 1) \
    redis.call('SET', ARGV[1] .. redis.sha1hex(ARGV[2]), ARGV[2]) return 1";
/// A kept body, or nil.
const FETCH_SCRIPT: &[u8] = b"redis.call('SELECT', 1) return redis.call('GET', ARGV[1])";

fn script_key_prefix() -> Vec<u8> {
    [INTERNAL_PREFIX, b"script:"].concat()
}

fn eval(script: &[u8], args: &[&[u8]]) -> Bytes {
    let mut all: Vec<&[u8]> = vec![b"EVAL", script, b"0"];
    all.extend_from_slice(args);
    let size = all.iter().map(|a| a.len()).sum();
    encode_request(all.len(), all, size)
}

/// What to recover when the reply says the script or function is missing.
#[derive(Clone, Copy)]
enum Missing {
    Script,
    Function,
}

impl Missing {
    fn of(name: &str) -> Option<Missing> {
        match name {
            "EVALSHA" | "EVALSHA_RO" => Some(Missing::Script),
            "FCALL" | "FCALL_RO" => Some(Missing::Function),
            _ => None,
        }
    }

    fn in_reply(self, reply: &[u8]) -> bool {
        match self {
            Missing::Script => reply.starts_with(b"-NOSCRIPT"),
            Missing::Function => reply.starts_with(b"-ERR Function not found"),
        }
    }
}

impl Session {
    /// SCRIPT LOAD, planned to every master: its body is kept on every master as well.
    pub(super) fn script_load(
        &mut self,
        c: &Classified<'_>,
        mut p: Plan,
        table: &SlotTable,
    ) -> Pending {
        if let Plan::Gather { parts, .. } = &mut p {
            let store = eval(STORE_SCRIPT, &[&script_key_prefix(), c.req.arg(2)]);
            // After the loads, so the first part's reply (the sha) is still the client's.
            for to in 0..table.backends().len() {
                parts.push(crate::stages::plan::Send {
                    to: to as tessera_model::router::BackendIdx,
                    channel: Channel::Control,
                    bytes: store.clone(),
                });
            }
        }
        self.sender(table).send(p, self.proto)
    }
}

/// Sends an `EVALSHA` / `FCALL` the way it was planned, recovering from a reply that says the
/// script or function is missing on the server that ran it (and running it again there).
/// Anything else goes as usual: a call to another cluster's proxy (a prefix route, which
/// recovers its own scripts), or a command that is no script call.
pub(super) fn send_call(sender: &Sender<'_>, c: &Classified<'_>, plan: Plan) -> Pending {
    let Some(missing) = Missing::of(c.cmd.name) else {
        return sender.send(plan, sender.proto);
    };
    type First = Pin<Box<dyn Future<Output = ReplyResult>>>;
    let (addr, lane, own, req, first): (Arc<str>, Lane, _, Bytes, First) = match plan {
        Plan::One(s) if !sender.table.is_route_target(s.to) => {
            let addr = sender.table.backend_addr(s.to).clone();
            let own = sender.own_for(s.to).cloned();
            let lane = if own.is_some() {
                Lane::Shared
            } else {
                sender.lane_for(s.to)
            };
            let req = s.bytes.clone();
            let rx = sender.request(s);
            (addr, lane, own, req, Box::pin(rx))
        }
        p => return sender.send(p, sender.proto),
    };
    let others: Vec<Arc<str>> = sender
        .table
        .backends()
        .iter()
        .filter(|b| **b != addr)
        .cloned()
        .collect();
    let retry = Retry {
        worker: sender.worker.clone(),
        lane,
        own,
        proto: sender.proto,
        login: sender.login.clone(),
        account: sender.account.clone(),
        addr,
        others,
        req,
        sha: matches!(missing, Missing::Script).then(|| c.req.arg_bytes(1)),
        missing,
    };
    Pending::Task(Box::pin(retry.run(first)))
}

struct Retry {
    worker: Rc<Worker>,
    /// The lane of the first call, taken again by the call after a recovery.
    lane: Lane,
    /// A `NOLOOP` session's own connections, which the first call took.
    own: Option<Rc<OwnConns>>,
    proto: Proto,
    login: Login,
    account: Rc<OutputAccount>,
    addr: Arc<str>,
    others: Vec<Arc<str>>,
    req: Bytes,
    sha: Option<Bytes>,
    missing: Missing,
}

impl Retry {
    fn control(&self, addr: &Arc<str>, req: Bytes) -> ReplyRx {
        let w = &self.worker;
        w.pool
            .send(addr, Proto::Resp2, &w.control_login(), req, None)
    }

    async fn run(self, first: impl Future<Output = ReplyResult>) -> ReplyResult {
        let reply = first.await?;
        if !self.missing.in_reply(&reply) {
            return Ok(reply);
        }
        let recovered = match self.missing {
            Missing::Script => self.reload_script().await,
            Missing::Function => self.restore_functions().await,
        };
        if !recovered {
            return Ok(reply);
        }
        self.account.release(reply.len());
        let again = self.req.clone();
        match &self.own {
            Some(own) => {
                own.send_block(
                    &self.addr,
                    &self.login,
                    again,
                    0,
                    Some(&self.account),
                    false,
                )
                .await
            }
            None => {
                self.worker
                    .pool
                    .send_on(
                        self.lane,
                        &self.addr,
                        self.proto,
                        &self.login,
                        again,
                        Some(&self.account),
                    )
                    .await
            }
        }
    }

    /// The body kept on this server, or on another master: loaded here.
    async fn reload_script(&self) -> bool {
        let Some(sha) = &self.sha else { return false };
        let key = [script_key_prefix(), sha.to_ascii_lowercase()].concat();
        let fetch = eval(FETCH_SCRIPT, &[&key]);
        for addr in std::iter::once(&self.addr).chain(&self.others) {
            let Ok(body) = self.control(addr, fetch.clone()).await else {
                continue;
            };
            let Some(body) = bulk(&body) else { continue };
            let load = encode_request(3, [&b"SCRIPT"[..], b"LOAD", body], body.len() + 10);
            let loaded = self.control(&self.addr, load).await;
            if addr != &self.addr {
                // Keep it here too, for this server's replicas.
                let _ = self
                    .control(
                        &self.addr,
                        eval(STORE_SCRIPT, &[&script_key_prefix(), body]),
                    )
                    .await;
            }
            return loaded.is_ok_and(|r| r.starts_with(b"$"));
        }
        false
    }

    /// Every library of another master that has some, restored here (replacing none of this
    /// server's own: `FUNCTION RESTORE … APPEND` fails whole on a clash and changes nothing).
    async fn restore_functions(&self) -> bool {
        let dump = encode_request(2, [&b"FUNCTION"[..], b"DUMP"], 12);
        for addr in &self.others {
            let Ok(payload) = self.control(addr, dump.clone()).await else {
                continue;
            };
            let Some(payload) = bulk(&payload) else {
                continue;
            };
            let restore = encode_request(
                3,
                [&b"FUNCTION"[..], b"RESTORE", payload],
                payload.len() + 16,
            );
            if self
                .control(&self.addr, restore)
                .await
                .is_ok_and(|r| r == "+OK\r\n")
            {
                return true;
            }
        }
        false
    }
}

/// The contents of a bulk string reply (`$n\r\n…\r\n`), or `None` for nil or anything else.
fn bulk(reply: &[u8]) -> Option<&[u8]> {
    let rest = reply.strip_prefix(b"$")?;
    let end = rest.iter().position(|&b| b == b'\r')?;
    let n: usize = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    rest.get(end + 2..end + 2 + n)
}
