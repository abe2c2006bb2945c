//! Hand-built ABI v1 modules (wasm-encoder, no guest toolchain): each plays one hostile or
//! broken behaviour exactly, which a plugin built with the SDK cannot (the SDK checks its own
//! output). Layout of every module:
//!
//! ```text
//! memory 0: 2 pages, exported; page 0 holds the arena descriptor at 0
//!   {in_off 1024, in_cap 1024, out_off 4096, out_cap 4096} and the manifest at 4096;
//!   tp_reserve(in_len) moves `in` to 65536 and grows memory to fit (so a large input really
//!   costs plugin memory, up to the memory limit)
//! ```

use tessera_plugin_abi as abi;
use wasm_encoder::{
    CodeSection, ConstExpr, DataSection, ExportKind, ExportSection, Function, FunctionSection,
    MemArg, MemorySection, MemoryType, Module, TypeSection, ValType,
};

/// What `tp_on_command` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnCommand {
    /// Returns PASS.
    Pass,
    /// Traps (`unreachable`) when argument 1 starts with `b`, passes otherwise.
    TrapOnB,
    /// OBSERVE with an 8-byte ctx written at `out` (ctx 77).
    Observe,
    /// OBSERVE claiming 8 bytes of ctx, after moving `out` to the last 4 bytes of memory with
    /// `out_cap` 4: the host must not read past `out_cap` (or memory).
    ObserveOutOfBounds,
    /// REPLY whose `out` bytes are the manifest: not RESP.
    ReplyGarbage,
}

/// What `tp_on_reply` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnReply {
    Pass,
    Trap,
}

const IN_AT: i32 = 65536;
const OUT_AT: i32 = 4096;

fn mem(offset: u64) -> MemArg {
    MemArg {
        offset,
        align: 2,
        memory_index: 0,
    }
}

/// A module exporting the ABI, with `manifest` returned by `tp_init`.
pub(crate) fn module(manifest: &[u8], on_command: OnCommand, on_reply: OnReply) -> Vec<u8> {
    let mut types = TypeSection::new();
    types.ty().function([], []); // 0: marker
    types.ty().function([], [ValType::I32]); // 1: tp_arena
    types
        .ty()
        .function([ValType::I32, ValType::I32], [ValType::I32]); // 2: tp_reserve
    types.ty().function([ValType::I32], [ValType::I64]); // 3: tp_init
    types
        .ty()
        .function([ValType::I64, ValType::I32, ValType::I32], [ValType::I64]); // 4
    types
        .ty()
        .function([ValType::I64, ValType::I64, ValType::I32], [ValType::I64]); // 5
    let mut funcs = FunctionSection::new();
    for ty in [0, 1, 2, 3, 4, 5] {
        funcs.function(ty);
    }
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 2,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    for (i, name) in [
        abi::ABI_MARKER,
        abi::export::ARENA,
        abi::export::RESERVE,
        abi::export::INIT,
        abi::export::ON_COMMAND,
        abi::export::ON_REPLY,
    ]
    .iter()
    .enumerate()
    {
        exports.export(name, ExportKind::Func, i as u32);
    }

    let mut code = CodeSection::new();
    let mut marker = Function::new([]);
    marker.instructions().end();
    code.function(&marker);

    let mut arena = Function::new([]);
    arena.instructions().i32_const(0).end();
    code.function(&arena);

    // tp_reserve(in_len, _): pages needed for IN_AT + in_len; grow; descriptor := {IN_AT, in_len}.
    let mut reserve = Function::new([(1, ValType::I32)]);
    reserve
        .instructions()
        .local_get(0)
        .i32_const(IN_AT + 65535)
        .i32_add()
        .i32_const(16)
        .i32_shr_u()
        .memory_size(0)
        .i32_sub()
        .local_tee(2)
        .i32_const(0)
        .i32_gt_s()
        .if_(wasm_encoder::BlockType::Empty)
        .local_get(2)
        .memory_grow(0)
        .i32_const(-1)
        .i32_eq()
        .if_(wasm_encoder::BlockType::Empty)
        .i32_const(-1)
        .return_()
        .end()
        .end()
        .i32_const(0)
        .i32_const(IN_AT)
        .i32_store(mem(0))
        .i32_const(0)
        .local_get(0)
        .i32_store(mem(4))
        .i32_const(0)
        .end();
    code.function(&reserve);

    let mut init = Function::new([]);
    init.instructions()
        .i64_const(abi::pack(abi::INIT_OK, 0, manifest.len() as u32))
        .end();
    code.function(&init);

    let mut cmd = Function::new([]);
    {
        let mut s = cmd.instructions();
        match on_command {
            OnCommand::Pass => {
                s.i64_const(0);
            }
            OnCommand::TrapOnB => {
                // in_off + entry[1].off: the first byte of argument 1.
                s.i32_const(0)
                    .i32_load(mem(0))
                    .i32_const(0)
                    .i32_load(mem(0))
                    .i32_load(mem((abi::CMD_HEADER + abi::ARG_ENTRY) as u64))
                    .i32_add()
                    .i32_load8_u(MemArg {
                        offset: 0,
                        align: 0,
                        memory_index: 0,
                    })
                    .i32_const(i32::from(b'b'))
                    .i32_eq()
                    .if_(wasm_encoder::BlockType::Empty)
                    .unreachable()
                    .end()
                    .i64_const(0);
            }
            OnCommand::Observe => {
                s.i32_const(OUT_AT)
                    .i64_const(77)
                    .i64_store(MemArg {
                        offset: 0,
                        align: 3,
                        memory_index: 0,
                    })
                    .i64_const(abi::pack(abi::action::OBSERVE, 0, 8));
            }
            OnCommand::ObserveOutOfBounds => {
                // Memory is 2 pages unless grown: out at the last 4 bytes, out_cap 4.
                s.i32_const(0)
                    .memory_size(0)
                    .i32_const(16)
                    .i32_shl()
                    .i32_const(4)
                    .i32_sub()
                    .i32_store(mem(8))
                    .i32_const(0)
                    .i32_const(4)
                    .i32_store(mem(12))
                    .i64_const(abi::pack(abi::action::OBSERVE, 0, 8));
            }
            OnCommand::ReplyGarbage => {
                s.i64_const(abi::pack(abi::action::REPLY, 0, manifest.len() as u32));
            }
        }
        s.end();
    }
    code.function(&cmd);

    let mut reply = Function::new([]);
    match on_reply {
        OnReply::Pass => reply.instructions().i64_const(0).end(),
        OnReply::Trap => reply.instructions().unreachable().end(),
    };
    code.function(&reply);

    let mut data = DataSection::new();
    let desc = abi::Arena {
        in_off: 1024,
        in_cap: 1024,
        out_off: OUT_AT as u32,
        out_cap: 4096,
    }
    .encode();
    data.active(0, &ConstExpr::i32_const(0), desc.iter().copied());
    data.active(0, &ConstExpr::i32_const(OUT_AT), manifest.iter().copied());

    let mut m = Module::new();
    m.section(&types)
        .section(&funcs)
        .section(&memories)
        .section(&exports)
        .section(&code)
        .section(&data);
    m.finish()
}

/// A manifest hooking every command (names and keys only).
pub(crate) fn hook_all() -> Vec<u8> {
    manifest(abi::ManifestBuilder {
        flags: abi::MF_ALL,
        ..abi::ManifestBuilder::default()
    })
}

pub(crate) fn manifest(m: abi::ManifestBuilder) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    out
}
