//! What happens to each command: the auth gate, routing by slot, MGET/MSET/DEL splitting,
//! fan-out to every backend, and the commands the proxy answers itself.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use smallvec::SmallVec;

use super::Session;
use super::gather::{Gather, Merge, Moved, Part, Pending};
use super::info::InfoRequest;
use super::migrate::MoveRoute;
use crate::command::{Admin, Command, CommandId, CommandTable, Kind, Local, Split};
use crate::resp::{Frame, Proto, Request, encode_request};
use crate::router::{BackendIdx, SlotId, SlotTable};

/// Redis version the proxy reports in HELLO: the command set it implements.
const REDIS_COMPAT_VERSION: &str = "7.0.0";

/// `CLIENT|LIST` → `CLIENT LIST`, as users type it.
fn display(cmd: &Command) -> String {
    cmd.name.replace('|', " ")
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Session {
    /// Routes or answers one command; also returns which command it was (for the stats).
    pub(super) fn dispatch(&mut self, req: Request) -> (Option<CommandId>, Pending) {
        match CommandTable::get().lookup(&req) {
            Ok(cmd) if self.authed => match self.run_plugins(cmd, &req) {
                super::plugins::Decision::Continue(observers) => {
                    let conn = self.reg.info.id;
                    let p = self.dispatch_command(cmd, req);
                    (Some(cmd.id), super::plugins::observe(p, observers, conn))
                }
                super::plugins::Decision::Done(p) => (Some(cmd.id), p),
            },
            Ok(cmd) => (Some(cmd.id), self.dispatch_command(cmd, req)),
            Err(e) => (None, self.error(e.to_string())),
        }
    }

    pub(super) fn dispatch_command(&mut self, cmd: &'static Command, req: Request) -> Pending {
        if !self.authed
            && !matches!(
                cmd.kind,
                Kind::Local(Local::Auth | Local::Hello | Local::Quit)
            )
        {
            return self.error("NOAUTH Authentication required.");
        }
        let admin = self.worker.shared.config.admin_commands;
        match cmd.kind {
            Kind::Keyed => self.forward(cmd, req),
            Kind::Split(s) => self.split(s, req),
            Kind::Local(l) => self.local(l, cmd, req),
            Kind::Admin(a) if admin => self.admin(a, req),
            Kind::AdminKeyed if admin => self.forward(cmd, req),
            Kind::Admin(_) | Kind::AdminKeyed => self.error(format!(
                "ERR command '{}' is disabled: set admin_commands = true in the proxy config to allow cluster-wide admin commands",
                display(cmd)
            )),
            Kind::Unsupported => self.unsupported(cmd),
            Kind::Refused => self.error(format!("ERR command '{}' is not allowed through tessera", display(cmd))),
        }
    }

    pub(super) fn error(&self, msg: impl Into<String>) -> Pending {
        Pending::frame(Frame::error(msg), self.proto)
    }

    pub(super) fn reply(&self, f: Frame) -> Pending {
        Pending::frame(f, self.proto)
    }

    fn unsupported(&self, cmd: &Command) -> Pending {
        self.error(format!(
            "ERR command '{}' is not supported by tessera",
            display(cmd)
        ))
    }

    // === routing ===

    /// Sends a command to the master of the one slot all its keys hash to.
    fn forward(&self, cmd: &Command, req: Request) -> Pending {
        if cmd.block_option
            && req
                .args()
                .skip(1)
                .take_while(|a| !a.eq_ignore_ascii_case(b"STREAMS"))
                .any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
        {
            return self.unsupported(cmd);
        }
        let keys = cmd.key_indices(&req);
        let mut slots = keys.iter().map(|&i| SlotId::of_key(req.arg(i as usize)));
        // A command whose key specs found no key (EVAL with numkeys 0) goes to slot 0's group.
        let slot = slots.next().unwrap_or(SlotId(0));
        if slots.any(|s| s != slot) {
            return self.error("CROSSSLOT Keys in request don't hash to the same slot");
        }
        let table = self.worker.shared.router.load();
        let b = match route(&table, slot) {
            Ok(b) => b,
            Err(msg) => return self.error(msg),
        };
        let target = table.backend_addr(b);
        match table.slot(slot).migrating_from {
            Some(src)
                if !keys.is_empty()
                    && !self
                        .worker
                        .moved
                        .contains_all(table.epoch, keys.iter().map(|&i| req.arg(i as usize))) =>
            {
                let keys = keys.iter().map(|&i| req.arg_bytes(i as usize)).collect();
                let route = MoveRoute {
                    source: table.backend_addr(src).clone(),
                    target: target.clone(),
                    aborting: table.slot(slot).aborting,
                    epoch: table.epoch,
                };
                Pending::Moved(Box::new(self.moved(route, keys, req.as_bytes().clone())))
            }
            _ => Pending::One(
                self.worker
                    .pool
                    .send(target, self.proto, req.as_bytes().clone()),
            ),
        }
    }

    fn moved(&self, route: MoveRoute, keys: SmallVec<[Bytes; 2]>, req: Bytes) -> Moved {
        Moved::start(self.worker.clone(), route, self.proto, keys, req)
    }

    /// MGET MSET DEL UNLINK EXISTS TOUCH: one sub-command per backend, merged in key order.
    /// Keys of a migrating slot form their own sub-command per (target, source), whose keys
    /// are moved first.
    fn split(&self, kind: Split, req: Request) -> Pending {
        let step = if kind == Split::Mset { 2 } else { 1 };
        if !(req.argc() - 1).is_multiple_of(step) {
            return self.error(format!(
                "ERR wrong number of arguments for '{}' command",
                lossy(req.arg(0)).to_lowercase()
            ));
        }
        let table = self.worker.shared.router.load();
        // (backend, source while migrating, argument indices of its keys), in first-seen order.
        type Group = (BackendIdx, Option<BackendIdx>, Vec<usize>);
        let mut groups: SmallVec<[Group; 4]> = SmallVec::new();
        for i in (1..req.argc()).step_by(step) {
            let slot = SlotId::of_key(req.arg(i));
            let b = match route(&table, slot) {
                Ok(b) => b,
                Err(msg) => return self.error(msg),
            };
            let from = table.slot(slot).migrating_from;
            match groups
                .iter_mut()
                .find(|(gb, gf, _)| *gb == b && *gf == from)
            {
                Some((_, _, keys)) => keys.push(i),
                None => groups.push((b, from, vec![i])),
            }
        }
        if let [(b, None, _)] = groups.as_slice() {
            let addr = table.backend_addr(*b);
            return Pending::One(
                self.worker
                    .pool
                    .send(addr, self.proto, req.as_bytes().clone()),
            );
        }
        let mut parts = Vec::with_capacity(groups.len());
        let mut order = Vec::new();
        if kind == Split::Mget {
            order = vec![(0u16, 0u32); req.argc() - 1];
        }
        for (g, (b, from, keys)) in groups.iter().enumerate() {
            if kind == Split::Mget {
                for (pos, &i) in keys.iter().enumerate() {
                    order[i - 1] = (g as u16, pos as u32);
                }
            }
            let count = 1 + keys.len() * step;
            let args = keys.iter().flat_map(|&i| (i..i + step).map(|j| req.arg(j)));
            let size: usize = keys
                .iter()
                .map(|&i| (i..i + step).map(|j| req.arg(j).len()).sum::<usize>())
                .sum();
            let sub = encode_request(count, std::iter::once(req.arg(0)).chain(args), size);
            let target = table.backend_addr(*b);
            let moved_all = from.is_some()
                && self
                    .worker
                    .moved
                    .contains_all(table.epoch, keys.iter().map(|&i| req.arg(i)));
            parts.push(match from {
                None => Part::Sent(self.worker.pool.send(target, self.proto, sub)),
                Some(_) if moved_all => Part::Sent(self.worker.pool.send(target, self.proto, sub)),
                Some(src) => {
                    let aborting = keys
                        .iter()
                        .any(|&i| table.slot(SlotId::of_key(req.arg(i))).aborting);
                    let keys = keys.iter().map(|&i| req.arg_bytes(i)).collect();
                    let route = MoveRoute {
                        source: table.backend_addr(*src).clone(),
                        target: target.clone(),
                        aborting,
                        epoch: table.epoch,
                    };
                    Part::Moved(Box::new(self.moved(route, keys, sub)))
                }
            });
        }
        let merge = match kind {
            Split::Mget => Merge::Mget(order),
            Split::Mset => Merge::AllOk,
            Split::Sum => Merge::Sum,
        };
        Pending::Gather(Gather {
            parts,
            merge,
            proto: self.proto,
        })
    }

    /// Sends the same request to every backend of the table.
    fn to_all(&self, req: &Bytes, merge: Merge) -> Pending {
        let table = self.worker.shared.router.load();
        if table.backends().is_empty() {
            return self.error("ERR no backend is serving any slot");
        }
        let parts = table
            .backends()
            .iter()
            .map(|addr| self.worker.pool.send(addr, self.proto, req.clone()))
            .map(Part::Sent)
            .collect();
        Pending::Gather(Gather {
            parts,
            merge,
            proto: self.proto,
        })
    }

    /// A command with no key, the same on every backend: any one can answer.
    fn to_any(&self, req: &Bytes) -> Pending {
        let table = self.worker.shared.router.load();
        match table.backends().first() {
            Some(addr) => Pending::One(self.worker.pool.send(addr, self.proto, req.clone())),
            None => self.error("ERR no backend is serving any slot"),
        }
    }

    fn admin(&self, a: Admin, req: Request) -> Pending {
        match a {
            Admin::AllOk => self.to_all(req.as_bytes(), Merge::AllOk),
            Admin::First => self.to_all(req.as_bytes(), Merge::First),
            Admin::Concat => self.to_all(req.as_bytes(), Merge::Concat),
            Admin::AllExist => self.to_all(req.as_bytes(), Merge::AllExist),
            Admin::RandomKey => {
                let start = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_nanos());
                self.to_all(
                    req.as_bytes(),
                    Merge::RandomKey {
                        start: start as usize,
                    },
                )
            }
            Admin::Scan => self.scan(req),
        }
    }

    /// SCAN over every backend in turn. The client's cursor is `backend_cursor * backends +
    /// backend`, so a cursor is an ordinary number and 0 starts and ends the whole iteration.
    fn scan(&self, req: Request) -> Pending {
        let Some(cursor) = std::str::from_utf8(req.arg(1))
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
        else {
            return self.error("ERR invalid cursor");
        };
        let table = self.worker.shared.router.load();
        let n = table.backends().len() as u64;
        if n == 0 {
            return self.error("ERR no backend is serving any slot");
        }
        let (backend, inner) = (cursor % n, cursor / n);
        let inner = inner.to_string();
        let mut args: Vec<&[u8]> = vec![b"SCAN", inner.as_bytes()];
        args.extend(req.args().skip(2));
        let sub = Request::from_args(&args);
        let rx = self.worker.pool.send(
            &table.backends()[backend as usize],
            self.proto,
            sub.as_bytes().clone(),
        );
        Pending::Gather(Gather {
            parts: vec![Part::Sent(rx)],
            merge: Merge::Scan {
                backend,
                backends: n,
            },
            proto: self.proto,
        })
    }

    // === answered by the proxy ===

    fn local(&mut self, l: Local, cmd: &Command, req: Request) -> Pending {
        match l {
            Local::Ping if req.argc() > 2 => {
                self.error("ERR wrong number of arguments for 'ping' command")
            }
            Local::Ping if req.argc() == 2 => self.reply(Frame::Bulk(req.arg_bytes(1))),
            Local::Ping => self.reply(Frame::Simple("PONG")),
            Local::Echo => self.reply(Frame::Bulk(req.arg_bytes(1))),
            Local::Quit => {
                self.closing = true;
                self.reply(Frame::ok())
            }
            Local::Hello => self.hello(&req),
            Local::Auth => self.auth(&req),
            Local::Select => match req.arg(1) {
                b"0" => self.reply(Frame::ok()),
                _ => self.error("ERR DB index is out of range: tessera serves database 0 only"),
            },
            Local::Client => self.client(cmd, &req),
            Local::Info => self.info(&req),
            Local::Command | Local::Time => self.to_any(req.as_bytes()),
            Local::Dbsize => self.to_all(req.as_bytes(), Merge::Sum),
        }
    }

    fn password_ok(&self, user: &[u8], pass: &[u8]) -> bool {
        match &self.worker.shared.config.session_password {
            None => true,
            Some(p) => user == b"default" && crate::secret::same(pass, p),
        }
    }

    fn auth(&mut self, req: &Request) -> Pending {
        let (user, pass) = match req.argc() {
            2 => (&b"default"[..], req.arg(1)),
            3 => (req.arg(1), req.arg(2)),
            _ => return self.error("ERR syntax error"),
        };
        if self.worker.shared.config.session_password.is_none() && req.argc() == 2 {
            return self.error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            );
        }
        if self.password_ok(user, pass) {
            self.authed = true;
            self.reg.info.set_user(Bytes::copy_from_slice(user));
            self.reply(Frame::ok())
        } else {
            self.error("WRONGPASS invalid username-password pair or user is disabled.")
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
                _ => return self.error("NOPROTO unsupported protocol version"),
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
                return self.error(format!("ERR Syntax error in HELLO option '{}'", lossy(opt)));
            }
        }
        match auth {
            Some((user, pass)) if !self.password_ok(user, pass) => {
                return self.error("WRONGPASS invalid username-password pair or user is disabled.");
            }
            Some((user, _)) => {
                self.authed = true;
                self.reg.info.set_user(Bytes::copy_from_slice(user));
            }
            None if !self.authed => {
                return self.error(
                    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
                );
            }
            None => {}
        }
        if let Some(name) = name {
            if !valid_name(&name) {
                return self.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            self.reg.info.set_name(name);
        }
        self.proto = proto;
        self.reg
            .info
            .set_proto(if proto == Proto::Resp3 { 3 } else { 2 });
        let s = |v: &str| Frame::Bulk(Bytes::from(v.to_string()));
        self.reply(Frame::Map(vec![
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
        ]))
    }

    fn client(&mut self, cmd: &Command, req: &Request) -> Pending {
        let info = &self.reg.info;
        match cmd.name {
            "CLIENT|SETNAME" => {
                let name = req.arg_bytes(2);
                if !valid_name(&name) {
                    return self.error(
                        "ERR Client names cannot contain spaces, newlines or special characters.",
                    );
                }
                info.set_name(name);
                self.reply(Frame::ok())
            }
            "CLIENT|GETNAME" => {
                let name = info.name();
                self.reply(if name.is_empty() {
                    Frame::Null
                } else {
                    Frame::Bulk(name)
                })
            }
            "CLIENT|ID" => self.reply(Frame::Integer(info.id as i64)),
            "CLIENT|SETINFO" => {
                let value = req.arg_bytes(3);
                if !valid_name(&value) {
                    return self.error("ERR lib-name and lib-ver cannot contain spaces, newlines or special characters.");
                }
                match req.arg(2).to_ascii_uppercase().as_slice() {
                    b"LIB-NAME" => info.set_lib(Some(value), None),
                    b"LIB-VER" => info.set_lib(None, Some(value)),
                    other => {
                        return self.error(format!("ERR Unrecognized option '{}'", lossy(other)));
                    }
                }
                self.reply(Frame::ok())
            }
            "CLIENT|INFO" => self.reply(Frame::Verbatim(Bytes::from(info.line() + "\n"))),
            _ => self.reply(Frame::Verbatim(Bytes::from(
                self.worker.shared.clients.list(),
            ))),
        }
    }

    fn info(&self, req: &Request) -> Pending {
        let shared = &self.worker.shared;
        let uptime = shared.started.elapsed().as_secs();
        let kv = |k: &str, v: String| (k.to_string(), v);
        let server = vec![
            kv("tessera_version", env!("CARGO_PKG_VERSION").into()),
            kv("redis_mode", "standalone".into()),
            kv("process_id", std::process::id().to_string()),
            kv("tcp_port", shared.listen_addr.port().to_string()),
            kv("uptime_in_seconds", uptime.to_string()),
            kv("uptime_in_days", (uptime / 86400).to_string()),
            kv("proxy_threads", shared.config.threads().to_string()),
            kv(
                "proxy_backends",
                shared.router.load().backends().len().to_string(),
            ),
            kv(
                "proxy_commands_processed",
                shared.command_stats.total().0.to_string(),
            ),
            kv(
                "proxy_backend_requests",
                shared.backend_stats.requests.load(Relaxed).to_string(),
            ),
            kv(
                "proxy_backend_batches",
                shared.backend_stats.batches.load(Relaxed).to_string(),
            ),
            kv(
                "proxy_backend_reconnects",
                shared
                    .backend_stats
                    .connection_losses
                    .load(Relaxed)
                    .to_string(),
            ),
        ];
        let clients = vec![
            kv("connected_clients", shared.clients.len().to_string()),
            kv("maxclients", shared.config.max_clients.to_string()),
        ];
        let sections = req
            .args()
            .skip(1)
            .map(|a| lossy(a).to_ascii_lowercase())
            .collect();
        self.to_all(
            req.as_bytes(),
            Merge::Info(InfoRequest {
                sections,
                server,
                clients,
            }),
        )
    }
}

/// The backend serving `slot`, or the error its clients get.
fn route(table: &SlotTable, slot: SlotId) -> Result<BackendIdx, String> {
    let entry = table.slot(slot);
    match entry.master {
        Some(_) if entry.blocked => Err(format!(
            "TRYAGAIN slot {slot} is being handed to another group; retry shortly"
        )),
        Some(b) if !entry.down => Ok(b),
        Some(b) => Err(format!(
            "ERR group {} master {} is down",
            entry.group,
            table.backend_addr(b)
        )),
        None => Err(format!("ERR slot {slot} is not served by any group")),
    }
}

/// Client and library names: printable, no spaces (as Redis requires).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}
