//! The ABI glue behind [`crate::export_plugin!`]: the arena (descriptor, `in` and `out`
//! buffers) and the plugin instance, and one function per export. Target-independent, so the
//! `testing` harness drives exactly this code natively; only `Global` is wasm-specific.
//! Not a public API.

use tessera_plugin_abi::batch::{BATCH_RESULT, BatchView, set_batch_done};
use tessera_plugin_abi::{
    Arena, CommandView, INIT_ERROR, INIT_OK, LEN_MASK, RepliesView, action, pack, reply_action,
    unpack,
};

use crate::command::Command;
use crate::hooks::{Conn, Plugin};
use crate::out::{Out, ReplyOut};
use crate::replies::Replies;

/// Initial sizes of the arena buffers; the host grows them with `tp_reserve`.
const IN_INITIAL: usize = 16 * 1024;
const OUT_INITIAL: usize = 4 * 1024;

/// One plugin instance and its arena.
#[derive(Debug)]
pub struct Runtime<P> {
    /// The descriptor the host reads at `tp_arena`'s address: `{u32 in_off, in_cap, out_off,
    /// out_cap}`, kept as encoded bytes so its layout does not depend on Rust's.
    desc: [u8; Arena::SIZE],
    /// The host writes commands, replies and config here. Always fully initialized
    /// (`len == capacity` in the descriptor's sense).
    input: Vec<u8>,
    /// The guest writes its answer here; the descriptor advertises its capacity.
    out: Vec<u8>,
    /// The capacity last advertised for `out` (the descriptor is rewritten when it changes).
    out_cap: usize,
    /// Where one command of a batch writes its answer before it is appended to `out`.
    scratch: Vec<u8>,
    plugin: Option<P>,
}

impl<P> Default for Runtime<P> {
    fn default() -> Self {
        Self::new()
    }
}

fn addr(p: *const u8) -> u32 {
    // The guest is wasm32: addresses are 32 bits. Natively (tests) the descriptor is never
    // read, so the truncation does not matter.
    p as usize as u32
}

impl<P> Runtime<P> {
    /// An empty runtime; the buffers are allocated by the first `tp_arena`.
    pub const fn new() -> Self {
        Self {
            desc: [0; Arena::SIZE],
            input: Vec::new(),
            out: Vec::new(),
            out_cap: 0,
            scratch: Vec::new(),
            plugin: None,
        }
    }

    fn sync(&mut self) {
        self.out_cap = self.out.capacity();
        self.desc = descriptor(&self.input, &self.out);
    }

    fn ensure(&mut self) {
        if self.input.is_empty() {
            self.input = vec![0; IN_INITIAL];
            self.out = Vec::with_capacity(OUT_INITIAL);
            self.sync();
        }
    }

    /// `tp_arena`: the descriptor's address (allocates the buffers once).
    pub fn arena(&mut self) -> i32 {
        self.ensure();
        addr(self.desc.as_ptr()) as i32
    }

    /// `tp_reserve`: grows `in` to at least `in_len` and `out` to at least `out_len`.
    pub fn reserve(&mut self, in_len: i32, out_len: i32) -> i32 {
        self.ensure();
        let (Ok(in_len), Ok(out_len)) = (usize::try_from(in_len), usize::try_from(out_len)) else {
            return -2;
        };
        if in_len > LEN_MASK as usize || out_len > LEN_MASK as usize {
            return -2;
        }
        if self.input.len() < in_len {
            self.input.resize(in_len, 0);
        }
        if self.out.capacity() < out_len {
            self.out.reserve(out_len - self.out.len());
        }
        self.sync();
        0
    }

    /// The `in` buffer (the test harness writes into it, as the host does).
    pub fn input_mut(&mut self) -> &mut [u8] {
        self.ensure();
        &mut self.input
    }

    /// The first `len` bytes of `out` (what the host reads after a call).
    pub fn output(&self, len: usize) -> &[u8] {
        self.out.get(..len).unwrap_or_default()
    }

    /// The instance, once `init` succeeded.
    pub fn plugin(&self) -> Option<&P> {
        self.plugin.as_ref()
    }

    /// The instance, mutably.
    pub fn plugin_mut(&mut self) -> Option<&mut P> {
        self.plugin.as_mut()
    }

    /// Packs `result` after checking it describes bytes that are really in `out`, and
    /// re-advertises `out` if a hook grew it.
    fn finish(&mut self, result: i64, error_action: u8) -> i64 {
        let (_, _, len) = unpack(result);
        if len as usize > self.out.len() {
            // An Action kept from an earlier call: its bytes are gone.
            return self.fail(error_action, "ERR plugin returned a stale result");
        }
        if self.out.capacity() != self.out_cap {
            self.sync();
        }
        result
    }

    fn fail(&mut self, action: u8, msg: &str) -> i64 {
        self.out.clear();
        self.out.extend_from_slice(msg.as_bytes());
        if self.out.capacity() != self.out_cap {
            self.sync();
        }
        pack(action, 0, self.out.len() as u32)
    }
}

impl<P: Plugin> Runtime<P> {
    /// `tp_init`: the config is the first `cfg_len` bytes of `in`.
    pub fn init(&mut self, cfg_len: i32) -> i64 {
        self.ensure();
        let Some(config) = usize::try_from(cfg_len)
            .ok()
            .and_then(|n| self.input.get(..n))
        else {
            return self.fail(INIT_ERROR, "plugin: config length out of range");
        };
        let result = P::init(config);
        self.out.clear();
        let r = match result {
            Ok((plugin, manifest)) => {
                manifest.encode(&mut self.out);
                self.plugin = Some(plugin);
                pack(INIT_OK, 0, self.out.len() as u32)
            }
            Err(msg) => {
                self.out.extend_from_slice(msg.as_bytes());
                pack(INIT_ERROR, 0, self.out.len() as u32)
            }
        };
        self.finish(r, INIT_ERROR)
    }

    /// `tp_on_command`: the command table is in `in`.
    pub fn on_command(&mut self, conn: i64, cmd: i32, nargs: i32) -> i64 {
        let Self {
            input, out, plugin, ..
        } = self;
        let Some(plugin) = plugin.as_mut() else {
            return self.fail(action::DENY, "ERR plugin is not initialized");
        };
        let view = match CommandView::parse_lazy(input) {
            Some(v) if v.len() == nargs as usize => v,
            _ => return self.fail(action::DENY, "ERR plugin received a malformed command"),
        };
        let cmd = Command::new(view, cmd as u16);
        let result = plugin.on_command(Conn(conn as u64), &cmd, Out::new(out));
        self.finish(result.raw(), action::DENY)
    }

    /// `tp_on_commands`: a batch table in `in` (`tessera_plugin_abi::batch`). Each command goes
    /// through `on_command` in order, exactly as if it came alone; its packed result goes into
    /// `out`'s result array and its output after the earlier ones. The progress counter in
    /// `in` is advanced after each command, once `out` and the descriptor describe it, so a
    /// trap is charged to the command that was running. A batch it cannot read returns
    /// `count` 0: the host then sends those commands one by one.
    pub fn on_commands(&mut self, conn: i64, n: i32) -> i64 {
        let Self {
            desc,
            input,
            out,
            out_cap,
            scratch,
            plugin,
        } = self;
        let Some(plugin) = plugin.as_mut() else {
            return 0;
        };
        let n = nargs_usize(n);
        match BatchView::parse(input) {
            Some(v) if v.len() == n => {}
            _ => return 0,
        }
        let Some(results) = n.checked_mul(BATCH_RESULT) else {
            return 0;
        };
        out.clear();
        out.resize(results, 0);
        for i in 0..n {
            let entry = BatchView::parse(input).and_then(|v| v.command(i));
            let cmd = entry.and_then(|(id, t)| Some(Command::new(CommandView::parse_lazy(t)?, id)));
            let mut r = match cmd {
                Some(cmd) => plugin
                    .on_command(Conn(conn as u64), &cmd, Out::new(scratch))
                    .raw(),
                None => deny(scratch, "ERR plugin received a malformed command"),
            };
            if unpack(r).2 as usize > scratch.len() {
                r = deny(scratch, "ERR plugin returned a stale result");
            }
            out.extend_from_slice(&scratch[..unpack(r).2 as usize]);
            out[i * BATCH_RESULT..(i + 1) * BATCH_RESULT].copy_from_slice(&r.to_le_bytes());
            if out.capacity() != *out_cap {
                *out_cap = out.capacity();
                *desc = descriptor(input, out);
            }
            set_batch_done(input, i + 1);
        }
        pack(0, n as u32, out.len() as u32)
    }

    /// `tp_on_reply`: the reply table is in `in`.
    pub fn on_reply(&mut self, conn: i64, ctx: i64, nreplies: i32) -> i64 {
        let Self {
            input, out, plugin, ..
        } = self;
        let Some(plugin) = plugin.as_mut() else {
            return self.fail(reply_action::ERROR, "ERR plugin is not initialized");
        };
        let view = match RepliesView::parse(input) {
            Some(v) if v.len() == nargs_usize(nreplies) => v,
            _ => return self.fail(reply_action::ERROR, "ERR plugin received malformed replies"),
        };
        let replies = Replies::new(view);
        let result = plugin.on_reply(Conn(conn as u64), ctx as u64, &replies, ReplyOut::new(out));
        self.finish(result.raw(), reply_action::ERROR)
    }

    /// `tp_on_close`.
    pub fn on_close(&mut self, conn: i64) {
        if let Some(p) = self.plugin.as_mut() {
            p.on_close(Conn(conn as u64));
        }
    }

    /// `tp_on_tick`.
    pub fn on_tick(&mut self) {
        if let Some(p) = self.plugin.as_mut() {
            p.on_tick();
        }
    }
}

/// The arena descriptor for these buffers (`out`'s capacity is advertised).
fn descriptor(input: &[u8], out: &Vec<u8>) -> [u8; Arena::SIZE] {
    Arena {
        in_off: addr(input.as_ptr()),
        in_cap: input.len() as u32,
        out_off: addr(out.as_ptr()),
        out_cap: out.capacity() as u32,
    }
    .encode()
}

/// Writes a denial into `buf` (one command of a batch the runtime could not hand over).
fn deny(buf: &mut Vec<u8>, msg: &str) -> i64 {
    buf.clear();
    buf.extend_from_slice(msg.as_bytes());
    pack(action::DENY, 0, buf.len() as u32)
}

fn nargs_usize(n: i32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The module's one [`Runtime`], in a `static` made by [`crate::export_plugin!`].
///
/// Sound only where there is exactly one thread: wasm32 without the `atomics` feature (what
/// `wasm32-unknown-unknown` builds). The host never calls an export while another one runs
/// (imports do not call back into the guest), and the static is private to the macro's
/// expansion, so [`Global::with`] is never re-entered.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
pub struct Global<P>(std::cell::UnsafeCell<Runtime<P>>);

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
#[allow(unsafe_code)]
// SAFETY: single-threaded target (see the cfg): no other thread can observe the cell.
unsafe impl<P> Sync for Global<P> {}

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
impl<P> Default for Global<P> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
impl<P> Global<P> {
    /// An empty runtime, usable in a `static`.
    pub const fn new() -> Self {
        Self(std::cell::UnsafeCell::new(Runtime::new()))
    }

    /// Runs `f` on the runtime.
    #[allow(unsafe_code)]
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut Runtime<P>) -> R) -> R {
        // SAFETY: one thread, and no re-entry (see the type's doc): this is the only live
        // reference to the runtime for the duration of `f`.
        f(unsafe { &mut *self.0.get() })
    }
}
