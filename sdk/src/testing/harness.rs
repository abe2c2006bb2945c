//! [`Harness`]: drives a plugin through the SDK's export glue ([`crate::rt::Runtime`]) the way
//! the host does, with the ABI encoders and decoders of `tessera-plugin-abi`.

use tessera_plugin_abi::{
    ArgIn, Gate, HOOK_VALUES, INIT_OK, MF_ALL, MF_CLASS_VALUES, MF_DENIES, MF_GATE,
    MF_OBSERVE_HEADS, MF_WANT_CLOSE, ManifestView, RewriteArg, RewriteView, action, command_size,
    encode_command, encode_replies, encode_reply_heads, replies_size, reply_action,
    reply_heads_size, unpack,
};

use super::command::TestCommand;
use super::fake::set_in_init;
use super::merge::error_reply;
use crate::hooks::Plugin;
use crate::out::Merge;
use crate::resp;
use crate::rt::Runtime;

/// The manifest a plugin returned, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManifestInfo {
    /// `MF_*` hook flags (`MF_WANT_CLOSE`, `MF_ALL`, `MF_CLASS_VALUES`, `MF_OBSERVE_HEADS`); the section flag
    /// `MF_DENIES` is decoded into [`ManifestInfo::denied`] instead.
    pub flags: u32,
    /// Hooked classes.
    pub classes: u32,
    /// `on_tick` period.
    pub tick_ms: u32,
    /// Listed commands: (id, hook flags).
    pub commands: Vec<(u16, u16)>,
    /// Key prefixes.
    pub prefixes: Vec<Vec<u8>>,
    /// Commands declared denied to every client ([`crate::Manifest::deny_to_all`]), as
    /// written.
    pub denied: Vec<String>,
    /// Classes declared denied to every client.
    pub denied_classes: u32,
    /// The gate ([`crate::Manifest::gate_classes`]), if declared.
    pub gate: Option<Gate>,
}

impl ManifestInfo {
    fn listed(&self, id: u16) -> Option<u16> {
        self.commands
            .iter()
            .find(|(c, _)| *c == id)
            .map(|&(_, f)| f)
    }

    /// Whether the host would call the plugin for `cmd` (hook bitmap, key prefixes, then
    /// the gate).
    pub fn hooks(&self, cmd: &TestCommand) -> bool {
        let by_id = self.listed(cmd.id).is_some();
        let all = self.flags & MF_ALL != 0;
        let by_class = all || self.classes & cmd.class != 0;
        if !(by_id || by_class) {
            return false;
        }
        let prefixed = self.prefixes.is_empty()
            || cmd
                .keys()
                .any(|k| self.prefixes.iter().any(|p| k.starts_with(p)));
        let gated_out = self.gate.as_ref().is_some_and(|g| {
            g.applies(by_id, all, self.classes, cmd.class) && !g.opens(cmd.keys(), cmd.value_lens())
        });
        prefixed && !gated_out
    }

    /// Whether the host would copy the values of `cmd` (otherwise only names and keys).
    pub fn copies_values(&self, cmd: &TestCommand) -> bool {
        let listed = self.listed(cmd.id).is_some_and(|f| f & HOOK_VALUES != 0);
        let by_class = self.flags & MF_ALL != 0 || self.classes & cmd.class != 0;
        listed || (by_class && self.flags & MF_CLASS_VALUES != 0)
    }

    /// Whether the plugin asked for `on_close`.
    pub fn wants_close(&self) -> bool {
        self.flags & MF_WANT_CLOSE != 0
    }

    /// Whether command `id` is listed explicitly.
    pub fn lists(&self, id: u16) -> bool {
        self.listed(id).is_some()
    }
}

/// What `on_command` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The manifest does not hook this command: the host would not call the plugin.
    NotHooked,
    /// Forward unchanged.
    Pass,
    /// Error reply text (without `-` and CRLF).
    Deny(String),
    /// Direct RESP reply.
    Reply(Vec<u8>),
    /// Replacement commands.
    Rewrite(RewriteOut),
    /// Forward, then `on_reply` with this ctx.
    Observe(u64),
}

impl Outcome {
    /// The rewrite, or a panic naming what it was instead.
    pub fn rewrite(self) -> RewriteOut {
        match self {
            Outcome::Rewrite(r) => r,
            other => panic!("expected a rewrite, got {other:?}"),
        }
    }
}

/// A decoded rewrite block. Input references are resolved to the client's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteOut {
    /// How the host combines the replies.
    pub merge: Merge,
    /// Handed back to `on_reply`.
    pub ctx: u64,
    /// The commands.
    pub commands: Vec<Vec<Vec<u8>>>,
}

impl RewriteOut {
    /// The commands as (lossy) strings, for readable asserts.
    pub fn strings(&self) -> Vec<Vec<String>> {
        self.commands
            .iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .collect()
    }
}

/// What `on_reply` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyOutcome {
    /// Send the single reply on.
    Pass,
    /// Send this RESP reply.
    Replace(Vec<u8>),
    /// Send this error (without `-` and CRLF).
    Error(String),
}

/// One plugin instance, driven like the host drives it.
pub struct Harness<P: Plugin> {
    rt: Runtime<P>,
    manifest: ManifestInfo,
}

impl<P: Plugin> std::fmt::Debug for Harness<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check_one_reply(bytes: &[u8]) {
    match resp::value_end(bytes, 0) {
        Ok(end) if end == bytes.len() => {}
        _ => panic!(
            "plugin produced an invalid RESP reply (the host refuses it): {:?}",
            text(bytes)
        ),
    }
}

impl<P: Plugin> Harness<P> {
    /// Initializes a plugin with `config`; panics with the plugin's message if it refuses.
    pub fn new(config: &str) -> Self {
        match Self::try_new(config) {
            Ok(h) => h,
            Err(e) => panic!("init refused: {e}"),
        }
    }

    /// Initializes a plugin with `config`; `Err` carries the init error text.
    pub fn try_new(config: impl AsRef<[u8]>) -> Result<Self, String> {
        let config = config.as_ref();
        let mut rt = Runtime::<P>::new();
        rt.arena();
        assert_eq!(rt.reserve(config.len() as i32, 0), 0);
        rt.input_mut()[..config.len()].copy_from_slice(config);
        set_in_init(true);
        let r = rt.init(config.len() as i32);
        set_in_init(false);
        let (act, _, len) = unpack(r);
        let out = rt.output(len as usize);
        if act != INIT_OK {
            return Err(text(out));
        }
        let view = ManifestView::parse(out).expect("the SDK wrote a malformed manifest");
        assert_eq!(view.version, 1);
        let manifest = ManifestInfo {
            flags: view.flags & !(MF_DENIES | MF_GATE),
            classes: view.classes,
            tick_ms: view.tick_ms,
            commands: view.commands().collect(),
            prefixes: view.prefixes().map(|p| p.to_vec()).collect(),
            denied: view.denied_names().map(text).collect(),
            denied_classes: view.denied_classes,
            gate: Gate::from_manifest(&view),
        };
        Ok(Self { rt, manifest })
    }

    /// The decoded manifest.
    pub fn manifest(&self) -> &ManifestInfo {
        &self.manifest
    }

    /// The plugin instance.
    pub fn plugin(&self) -> &P {
        self.rt.plugin().expect("initialized")
    }

    /// The plugin instance, mutably.
    pub fn plugin_mut(&mut self) -> &mut P {
        self.rt.plugin_mut().expect("initialized")
    }

    /// Calls `on_command` as the host would: [`Outcome::NotHooked`] when the manifest does not
    /// select the command, values elided unless the manifest asks for them.
    pub fn on_command(&mut self, conn: u64, cmd: &TestCommand) -> Outcome {
        if !self.manifest.hooks(cmd) {
            return Outcome::NotHooked;
        }
        self.call_command(conn, cmd)
    }

    /// Calls `on_command` even if the manifest does not hook the command (values are still
    /// elided as the manifest says).
    pub fn call_command(&mut self, conn: u64, cmd: &TestCommand) -> Outcome {
        let copy_values = self.manifest.copies_values(cmd);
        let args = cmd.args.iter().enumerate().map(|(i, a)| ArgIn {
            bytes: a,
            key: cmd.is_key(i),
            elide: i > 0 && !cmd.is_key(i) && !copy_values,
        });
        let size = command_size(args.clone());
        assert_eq!(self.rt.reserve(size as i32, 0), 0);
        let n = encode_command(self.rt.input_mut(), cmd.class, cmd.args.len(), args);
        assert_eq!(n, Some(size), "command table encoding");
        let r = self
            .rt
            .on_command(conn as i64, i32::from(cmd.id), cmd.args.len() as i32);
        let (_, _, len) = unpack(r);
        decode(r, self.rt.output(len as usize), cmd)
    }

    /// Calls `tp_on_commands` with the commands the manifest hooks, as the host batches a
    /// pipeline ([`Outcome::NotHooked`] for the others): the outcomes must be those of calling
    /// [`Harness::on_command`] on each in turn.
    pub fn on_commands(&mut self, conn: u64, cmds: &[TestCommand]) -> Vec<Outcome> {
        use tessera_plugin_abi::batch::{
            BatchResults, batch_done, batch_table_size, put_batch_entry, put_batch_header,
        };
        let hooked: Vec<&TestCommand> = cmds.iter().filter(|c| self.manifest.hooks(c)).collect();
        let tables: Vec<Vec<u8>> = hooked
            .iter()
            .map(|cmd| {
                let copy_values = self.manifest.copies_values(cmd);
                let args = cmd.args.iter().enumerate().map(|(i, a)| ArgIn {
                    bytes: a,
                    key: cmd.is_key(i),
                    elide: i > 0 && !cmd.is_key(i) && !copy_values,
                });
                let mut t = vec![0; command_size(args.clone())];
                encode_command(&mut t, cmd.class, cmd.args.len(), args).expect("encoding");
                t
            })
            .collect();
        let mut size = batch_table_size(hooked.len());
        size += tables.iter().map(Vec::len).sum::<usize>();
        assert_eq!(self.rt.reserve(size as i32, 0), 0);
        let input = self.rt.input_mut();
        put_batch_header(input, hooked.len());
        let mut off = batch_table_size(hooked.len());
        for (i, t) in tables.iter().enumerate() {
            input[off..off + t.len()].copy_from_slice(t);
            put_batch_entry(input, i, off, t.len(), hooked[i].id);
            off += t.len();
        }
        let r = self.rt.on_commands(conn as i64, hooked.len() as i32);
        let (_, count, len) = unpack(r);
        assert_eq!(
            count as usize,
            hooked.len(),
            "every command of the batch was done"
        );
        assert_eq!(batch_done(self.rt.input_mut(), hooked.len()), hooked.len());
        let out = self.rt.output(len as usize).to_vec();
        let results = BatchResults::parse(&out, hooked.len()).expect("results in out");
        let mut decoded = results
            .iter()
            .zip(&hooked)
            .map(|(r, cmd)| {
                let (r, bytes) = r.expect("each output inside out");
                decode(r, bytes, cmd)
            })
            .collect::<Vec<_>>()
            .into_iter();
        cmds.iter()
            .map(|c| {
                if self.manifest.hooks(c) {
                    decoded.next().expect("one outcome per hooked command")
                } else {
                    Outcome::NotHooked
                }
            })
            .collect()
    }
}

/// One `on_command` result as the host reads it (`out` is that command's output).
fn decode(r: i64, out: &[u8], cmd: &TestCommand) -> Outcome {
    let (act, count, _) = unpack(r);
    match act {
        action::PASS => Outcome::Pass,
        action::DENY => Outcome::Deny(text(out)),
        action::REPLY => {
            check_one_reply(out);
            Outcome::Reply(out.to_vec())
        }
        action::OBSERVE => {
            let ctx: [u8; 8] = out.try_into().expect("OBSERVE carries an 8-byte ctx");
            Outcome::Observe(u64::from_le_bytes(ctx))
        }
        action::REWRITE => {
            let view = RewriteView::parse(out, count)
                .unwrap_or_else(|e| panic!("the host refuses this rewrite block: {e:?}"));
            let mut commands = Vec::new();
            for c in view.commands() {
                let mut args = Vec::new();
                for a in c.expect("validated") {
                    args.push(match a.expect("validated") {
                        RewriteArg::Bytes(b) => b.to_vec(),
                        RewriteArg::Input(i) => cmd
                            .args
                            .get(i as usize)
                            .unwrap_or_else(|| panic!("rewrite refers to input {i}"))
                            .clone(),
                    });
                }
                commands.push(args);
            }
            Outcome::Rewrite(RewriteOut {
                merge: Merge::from_code(view.merge).expect("validated"),
                ctx: view.ctx,
                commands,
            })
        }
        other => panic!("unknown on_command action {other}"),
    }
}

impl<P: Plugin> Harness<P> {
    /// Calls `on_reply` with an observed command's reply as the host passes it: only its head
    /// and size if the manifest asked for heads ([`crate::Manifest::observe_heads`]), else
    /// whole.
    pub fn on_observed_reply(&mut self, conn: u64, ctx: u64, reply: &[u8]) -> ReplyOutcome {
        if self.manifest.flags & MF_OBSERVE_HEADS == 0 {
            return self.on_reply(conn, ctx, &[reply]);
        }
        let replies = [reply];
        let size = reply_heads_size(&replies);
        assert_eq!(self.rt.reserve(size as i32, 0), 0);
        let n = encode_reply_heads(self.rt.input_mut(), &replies);
        assert_eq!(n, Some(size), "reply table encoding");
        self.reply_call(conn, ctx, 1)
    }

    /// Calls `on_reply` with these raw replies.
    pub fn on_reply(&mut self, conn: u64, ctx: u64, replies: &[&[u8]]) -> ReplyOutcome {
        let size = replies_size(replies.iter().copied());
        assert_eq!(self.rt.reserve(size as i32, 0), 0);
        let n = encode_replies(self.rt.input_mut(), replies.len(), replies.iter().copied());
        assert_eq!(n, Some(size), "reply table encoding");
        self.reply_call(conn, ctx, replies.len())
    }

    fn reply_call(&mut self, conn: u64, ctx: u64, n: usize) -> ReplyOutcome {
        let r = self.rt.on_reply(conn as i64, ctx as i64, n as i32);
        let (act, _, len) = unpack(r);
        let out = self.rt.output(len as usize);
        match act {
            reply_action::PASS => {
                assert_eq!(n, 1, "PASS is only valid with one reply");
                ReplyOutcome::Pass
            }
            reply_action::REPLACE => {
                check_one_reply(out);
                ReplyOutcome::Replace(out.to_vec())
            }
            reply_action::ERROR => ReplyOutcome::Error(text(out)),
            other => panic!("unknown on_reply action {other}"),
        }
    }

    /// Calls `on_close` (if the manifest asked for it, as the host does).
    pub fn on_close(&mut self, conn: u64) {
        if self.manifest.wants_close() {
            self.rt.on_close(conn as i64);
        }
    }

    /// Calls `on_tick`.
    pub fn tick(&mut self) {
        self.rt.on_tick();
    }

    /// Plays one client command end to end, as the proxy would: hooks, the backend (`backend`
    /// answers each command sent to Redis with one RESP reply), host merges, `on_reply`.
    /// Returns the bytes the client receives.
    pub fn run(
        &mut self,
        conn: u64,
        cmd: &TestCommand,
        backend: &mut dyn FnMut(&[Vec<u8>]) -> Vec<u8>,
    ) -> Vec<u8> {
        match self.on_command(conn, cmd) {
            Outcome::NotHooked | Outcome::Pass => backend(&cmd.args),
            Outcome::Deny(t) => error_reply(&t),
            Outcome::Reply(r) => r,
            Outcome::Observe(ctx) => {
                let reply = backend(&cmd.args);
                self.finish_reply(conn, ctx, &[reply])
            }
            Outcome::Rewrite(rw) => {
                let replies: Vec<Vec<u8>> = rw.commands.iter().map(|c| backend(c)).collect();
                match rw.merge {
                    Merge::Plugin => self.finish_reply(conn, rw.ctx, &replies),
                    m => super::merge::merge(m, &replies),
                }
            }
        }
    }

    fn finish_reply(&mut self, conn: u64, ctx: u64, replies: &[Vec<u8>]) -> Vec<u8> {
        let refs: Vec<&[u8]> = replies.iter().map(|r| r.as_slice()).collect();
        match self.on_reply(conn, ctx, &refs) {
            ReplyOutcome::Pass => replies[0].clone(),
            ReplyOutcome::Replace(r) => r,
            ReplyOutcome::Error(t) => error_reply(&t),
        }
    }
}
