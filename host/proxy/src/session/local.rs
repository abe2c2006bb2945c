//! The commands a session answers itself: PING ECHO QUIT SELECT, HELLO and AUTH (which change
//! the session's protocol and user), CLIENT (its name and the proxy's client list), and INFO,
//! DBSIZE, COMMAND, TIME, which the proxy composes from one or every backend.
//!
//! A failed AUTH is slowed down: its reply and everything the client sends after it wait a
//! delay that doubles with each failure on the connection, so guessing passwords over one
//! connection is slow.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;

use super::reply::Pending;
use super::{Replies, Session};
use crate::stages::classify::Classified;
use crate::stages::info::InfoRequest;
use crate::stages::merge::Merge;
use crate::stages::plan::{self, Channel};
use tessera_model::command::Local;
use tessera_model::error::DataError;
use tessera_model::users::User;
use tessera_resp::{Frame, Proto, Request};

/// Redis version the proxy reports in HELLO: the command set it implements.
const REDIS_COMPAT_VERSION: &str = "7.0.0";

/// Delay after the first failed AUTH on a connection; it doubles with each further failure.
const AUTH_DELAY: Duration = Duration::from_millis(100);
const AUTH_DELAY_MAX: Duration = Duration::from_secs(5);

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Session {
    pub(super) fn local(&mut self, l: Local, c: &Classified<'_>) -> Pending {
        let req = c.req;
        if l == Local::Ping
            && let Some(pong) = self.subscribed_ping(c)
        {
            return pong;
        }
        let r = match l {
            Local::Ping if req.argc() > 2 => Err(DataError::WrongArity("ping".into())),
            Local::Ping if req.argc() == 2 => Ok(Frame::Bulk(req.arg_bytes(1))),
            Local::Ping => Ok(Frame::Simple("PONG")),
            Local::Echo => Ok(Frame::Bulk(req.arg_bytes(1))),
            Local::Quit => {
                self.closing = true;
                Ok(Frame::ok())
            }
            Local::Hello => return self.hello(req),
            Local::Auth => return self.auth(req),
            Local::Select => return self.select(req),
            Local::Client
                if matches!(
                    c.cmd.name,
                    "CLIENT|TRACKING"
                        | "CLIENT|CACHING"
                        | "CLIENT|GETREDIR"
                        | "CLIENT|TRACKINGINFO"
                ) =>
            {
                return self.client_tracking(c);
            }
            Local::Client if c.cmd.name == "CLIENT|UNBLOCK" => return self.client_unblock(req),
            Local::Client => self.client(c.cmd.name, req),
            Local::Reset => {
                let had_own = self.own_conns().is_some();
                self.reset();
                if had_own {
                    // A NOLOOP client's own connections retired: nothing after RESET may
                    // pass what was sent on them (as for CLIENT TRACKING OFF).
                    let reply = Frame::Simple("RESET").to_bytes(self.proto);
                    let account = self.account.clone();
                    return Pending::Blocked(Box::pin(async move {
                        account.charge(reply.len());
                        Ok(reply)
                    }));
                }
                Ok(Frame::Simple("RESET"))
            }
            Local::Info => return self.info(req),
            Local::CommandLog => self.command_log(c.cmd.name, req),
            Local::Cluster => Ok(self.cluster(c.cmd.name)),
            Local::Command | Local::Time => {
                let table = self.worker.shared.router.load();
                return match plan::to_any(&table, req.as_bytes(), Channel::Control) {
                    Ok(p) => self.sender(&table).send(p, self.proto),
                    Err(e) => Pending::error(&e),
                };
            }
            Local::Dbsize => {
                let table = self.worker.shared.router.load();
                return match plan::to_all(&table, req.as_bytes(), Channel::Data, Merge::Sum) {
                    Ok(p) => self.sender(&table).send(p, self.proto),
                    Err(e) => Pending::error(&e),
                };
            }
        };
        match r {
            Ok(f) => Pending::Ready(f.to_bytes(self.proto)),
            Err(e) => Pending::error(&e),
        }
    }

    /// The proxies as a Redis Cluster (`peers`); READONLY and READWRITE are accepted and
    /// change nothing (reads from replicas are the read policy's, behind the proxies).
    fn cluster(&self, name: &str) -> Frame {
        let peers = &self.worker.shared.peers;
        let epoch = self.worker.shared.router.load().epoch;
        let text = |s: String| Frame::Bulk(Bytes::from(s));
        match name {
            "CLUSTER|SLOTS" => peers.slots(),
            "CLUSTER|SHARDS" => peers.shards(),
            "CLUSTER|NODES" => text(peers.nodes(epoch)),
            "CLUSTER|MYID" => text(peers.my_id()),
            "CLUSTER|INFO" => text(peers.info(epoch)),
            _ => Frame::ok(),
        }
    }

    /// CLIENT UNBLOCK id [TIMEOUT|ERROR], for a client of this proxy (with `admin_commands`).
    fn client_unblock(&mut self, req: &Request) -> Pending {
        // Redis puts it in @admin @dangerous: another client's command is cut short.
        if !self.worker.shared.config.admin_commands {
            return Pending::error(&DataError::AdminDisabled("CLIENT UNBLOCK".into()));
        }
        let Some(id) = std::str::from_utf8(req.arg(2))
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return Pending::error(&DataError::Invalid(
                "value is not an integer or out of range".into(),
            ));
        };
        // A confined user may cut short its own user's commands only.
        if let Some(user) = self.confined_user()
            && self
                .worker
                .shared
                .clients
                .user_of(id)
                .is_some_and(|u| u != user)
        {
            return Pending::error(&DataError::NoPermCommand {
                user: String::from_utf8_lossy(user).into(),
                command: "client unblock".into(),
            });
        }
        let how = match req.get(3).map(<[u8]>::to_ascii_uppercase).as_deref() {
            None => None,
            Some(b"TIMEOUT") => Some(Bytes::from_static(b"TIMEOUT")),
            Some(b"ERROR") => Some(Bytes::from_static(b"ERROR")),
            Some(_) => {
                return Pending::error(&DataError::Invalid(
                    "CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into(),
                ));
            }
        };
        let unblock = super::blocking::client_unblock(self.worker.clone(), id, how);
        Pending::Task(Box::pin(unblock))
    }

    /// RESET: no transaction or watch, no subscription, RESP2, no name, and the rights a new
    /// connection has (unauthenticated where AUTH is required).
    fn reset(&mut self) {
        self.tx.reset();
        self.replies = Replies::On;
        self.tracking = None;
        self.pubsub_reset();
        self.proto = Proto::Resp2;
        self.reg.info.set_proto(2);
        self.reg.info.set_name(Bytes::new());
        self.reg.info.set_db(0);
        match self.worker.shared.users.load().connect_as() {
            Some(user) => self.authenticated(user),
            None => {
                self.rights = None;
                self.login = tessera_model::login::Login::none();
                self.decoder
                    .set_pre_auth_limits(Some(tessera_resp::Limits::UNAUTHENTICATED));
            }
        }
    }

    /// `SELECT db`: the session's commands go to that database from the next (on
    /// connections of their own, which `SELECT`ed it at connect).
    fn select(&mut self, req: &Request) -> Pending {
        let db = match self.worker.shared.policy().client_db(req.arg(1)) {
            Ok(db) => db,
            Err(e) => return Pending::error(&e),
        };
        if let Some(user) = self.rights.as_deref()
            && !user.may_use_db(db)
        {
            return Pending::error(&DataError::NoPermDb {
                user: user.name.as_str().into(),
                db,
            });
        }
        if self.tx.watching() && self.db() != db {
            return Pending::error(&DataError::SelectWhileWatching);
        }
        self.reg.info.set_db(db);
        if let Some(user) = self.rights.clone() {
            self.login = self.data_login(&user);
        }
        Pending::Ready(Frame::ok().to_bytes(self.proto))
    }

    /// Becomes `user`: AUTH or HELLO AUTH succeeded.
    fn authenticated(&mut self, user: Arc<User>) {
        self.reg.info.set_user(Bytes::from(user.name.clone()));
        self.login = self.data_login(&user);
        self.rights = Some(user);
        self.decoder.set_pre_auth_limits(None);
    }

    /// The WRONGPASS reply, sent after this connection's failure delay; the session reads
    /// nothing more from the client until then.
    fn auth_failed(&mut self) -> Pending {
        self.auth_failures += 1;
        let delay = AUTH_DELAY
            .saturating_mul(1 << (self.auth_failures - 1).min(16))
            .min(AUTH_DELAY_MAX);
        let at = tokio::time::Instant::now() + delay;
        self.pause_until = Some(at);
        Pending::After(Box::new((at, DataError::WrongPass.reply())))
    }

    fn auth(&mut self, req: &Request) -> Pending {
        let (user, pass) = match req.argc() {
            2 => (&b"default"[..], req.arg(1)),
            3 => (req.arg(1), req.arg(2)),
            _ => return Pending::error(&DataError::Syntax),
        };
        let users = self.worker.shared.users.load();
        if users.default_is_nopass() && req.argc() == 2 {
            return Pending::error(&DataError::NoPasswordConfigured);
        }
        match users.authenticate(user, pass) {
            Some(user) => {
                self.authenticated(user);
                Pending::Ready(Frame::ok().to_bytes(self.proto))
            }
            None => self.auth_failed(),
        }
    }

    /// `HELLO [protover [AUTH user pass] [SETNAME name]]`.
    fn hello(&mut self, req: &Request) -> Pending {
        let mut proto = self.proto;
        let mut i = 1;
        if req.argc() >= 2 {
            proto = match req.arg(1) {
                b"2" => Proto::Resp2,
                b"3" => Proto::Resp3,
                _ => return Pending::error(&DataError::NoProto),
            };
            i = 2;
        }
        let mut auth = None;
        let mut name = None;
        while i < req.argc() {
            let opt = req.arg(i);
            if opt.eq_ignore_ascii_case(b"AUTH") && i + 2 < req.argc() {
                auth = Some((req.arg(i + 1), req.arg(i + 2)));
                i += 3;
            } else if opt.eq_ignore_ascii_case(b"SETNAME") && i + 1 < req.argc() {
                name = Some(req.arg_bytes(i + 1));
                i += 2;
            } else {
                return Pending::error(&DataError::Invalid(format!(
                    "Syntax error in HELLO option '{}'",
                    lossy(opt)
                )));
            }
        }
        match auth {
            Some((user, pass)) => match self.worker.shared.users.load().authenticate(user, pass) {
                Some(user) => self.authenticated(user),
                None => return self.auth_failed(),
            },
            None if self.rights.is_none() => return Pending::error(&DataError::NoAuthHello),
            None => {}
        }
        if let Some(name) = name {
            if !valid_name(&name) {
                return Pending::error(&DataError::Invalid(
                    "Client names cannot contain spaces, newlines or special characters.".into(),
                ));
            }
            self.reg.info.set_name(name);
        }
        self.proto = proto;
        self.reg
            .info
            .set_proto(if proto == Proto::Resp3 { 3 } else { 2 });
        let s = |v: &str| Frame::Bulk(Bytes::from(v.to_string()));
        let f = Frame::Map(vec![
            (s("server"), s("redis")),
            (s("version"), s(REDIS_COMPAT_VERSION)),
            (
                s("proto"),
                Frame::Integer(if proto == Proto::Resp3 { 3 } else { 2 }),
            ),
            (s("id"), Frame::Integer(self.reg.info.id as i64)),
            (s("mode"), s("standalone")),
            (s("role"), s("master")),
            (s("modules"), Frame::Array(vec![])),
        ]);
        Pending::Ready(f.to_bytes(self.proto))
    }

    fn client(&mut self, name: &str, req: &Request) -> Result<Frame, DataError> {
        let info = &self.reg.info;
        let bad_name = || {
            DataError::Invalid(
                "Client names cannot contain spaces, newlines or special characters.".into(),
            )
        };
        match name {
            "CLIENT|SETNAME" => {
                let name = req.arg_bytes(2);
                if !valid_name(&name) {
                    return Err(bad_name());
                }
                info.set_name(name);
                Ok(Frame::ok())
            }
            "CLIENT|GETNAME" => {
                let name = info.name();
                Ok(if name.is_empty() {
                    Frame::Null
                } else {
                    Frame::Bulk(name)
                })
            }
            "CLIENT|ID" => Ok(Frame::Integer(info.id as i64)),
            "CLIENT|SETINFO" => {
                let value = req.arg_bytes(3);
                if !valid_name(&value) {
                    return Err(DataError::Invalid(
                        "lib-name and lib-ver cannot contain spaces, newlines or special characters."
                            .into(),
                    ));
                }
                match req.arg(2).to_ascii_uppercase().as_slice() {
                    b"LIB-NAME" => info.set_lib(Some(value), None),
                    b"LIB-VER" => info.set_lib(None, Some(value)),
                    other => {
                        return Err(DataError::Invalid(format!(
                            "Unrecognized option '{}'",
                            lossy(other)
                        )));
                    }
                }
                Ok(Frame::ok())
            }
            "CLIENT|INFO" => Ok(Frame::Verbatim(Bytes::from(info.line() + "\n"))),
            // Which replies the client gets: see `Replies` (its own reply is `dispatch`'s).
            "CLIENT|REPLY" => {
                self.replies = match req.arg(2).to_ascii_uppercase().as_slice() {
                    b"ON" => Replies::On,
                    b"OFF" => Replies::Off,
                    b"SKIP" => Replies::Skip,
                    _ => return Err(DataError::Syntax),
                };
                Ok(Frame::ok())
            }
            "CLIENT|MAINT_NOTIFICATIONS" => self.maint_notifications(req),
            // Eviction and LRU hints: the proxy's shared backend connections are never
            // evicted as clients, and a touch through them is the server's own business.
            "CLIENT|NO-EVICT" | "CLIENT|NO-TOUCH" => {
                match req.arg(2).to_ascii_uppercase().as_slice() {
                    b"ON" | b"OFF" => Ok(Frame::ok()),
                    _ => Err(DataError::Syntax),
                }
            }
            _ => Ok(Frame::Verbatim(Bytes::from(
                self.worker.shared.clients.list(self.confined_user()),
            ))),
        }
    }

    /// INFO: every backend's sections, merged under the proxy's own server and clients
    /// sections.
    fn info(&self, req: &Request) -> Pending {
        let shared = &self.worker.shared;
        let uptime = shared.started.elapsed().as_secs();
        let kv = |k: &str, v: String| (k.to_string(), v);
        let table = shared.router.load();
        let b = &shared.backend_stats;
        let server = vec![
            kv("tessera_version", env!("CARGO_PKG_VERSION").into()),
            kv("redis_mode", "standalone".into()),
            kv("process_id", std::process::id().to_string()),
            kv("tcp_port", shared.listen_addr.port().to_string()),
            kv("uptime_in_seconds", uptime.to_string()),
            kv("uptime_in_days", (uptime / 86400).to_string()),
            kv("proxy_threads", shared.config.threads().to_string()),
            kv("proxy_backends", table.backends().len().to_string()),
            kv(
                "proxy_commands_processed",
                shared.command_stats.total().0.to_string(),
            ),
            kv(
                "proxy_backend_requests",
                b.requests.load(Relaxed).to_string(),
            ),
            kv("proxy_backend_batches", b.batches.load(Relaxed).to_string()),
            kv(
                "proxy_backend_reconnects",
                b.connection_losses.load(Relaxed).to_string(),
            ),
            kv(
                "proxy_tls_handshake_failures",
                shared
                    .stats
                    .tls_handshake_failures
                    .load(Relaxed)
                    .to_string(),
            ),
        ];
        let clients = vec![
            kv("connected_clients", shared.clients.len().to_string()),
            kv(
                "blocked_clients",
                shared.stats.blocked.load(Relaxed).to_string(),
            ),
            kv(
                "tracking_clients",
                shared.stats.tracking.load(Relaxed).to_string(),
            ),
            kv("maxclients", shared.config.max_clients.to_string()),
        ];
        let sections = req
            .args()
            .skip(1)
            .map(|a| lossy(a).to_ascii_lowercase())
            .collect();
        let merge = Merge::Info(Box::new(InfoRequest {
            sections,
            server,
            clients,
            confined: self.confined_user().is_some(),
        }));
        match plan::to_all(&table, req.as_bytes(), Channel::Control, merge) {
            Ok(p) => self.sender(&table).send(p, self.proto),
            Err(e) => Pending::error(&e),
        }
    }
}

/// Client and library names: printable, no spaces (as Redis requires).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}
