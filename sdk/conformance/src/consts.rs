//! The ABI's constants for the SDKs in other languages (C, AssemblyScript), rendered from
//! `tessera-plugin-abi` itself: command ids and names, class bits, actions, merges, manifest
//! and table flags, status codes. The files are generated (`tessera-sdk-consts`) and checked
//! fresh by a test, so no SDK copies a number by hand and none can drift from the Rust side.

use std::fmt::Write as _;

use tessera_plugin_abi::{self as abi, batch, class, level, merge, metric_kind, status};

/// A generated file: where it goes (relative to the repository root) and its text.
#[derive(Debug)]
pub struct Generated {
    pub path: &'static str,
    pub text: String,
}

/// One named constant, its value as a decimal literal, and what it is.
struct Const {
    group: &'static str,
    name: &'static str,
    value: i64,
}

const fn c(group: &'static str, name: &'static str, value: i64) -> Const {
    Const { group, name, value }
}

/// Every scalar constant of ABI v1 that a guest needs, by group. The values come from the
/// crate; only the list of names is here (a new constant is added to the crate and then here).
fn scalars() -> Vec<Const> {
    let u = |v: u32| i64::from(v);
    vec![
        c("ABI", "VERSION", u(abi::ABI_VERSION)),
        c("ACTION", "PASS", abi::action::PASS.into()),
        c("ACTION", "DENY", abi::action::DENY.into()),
        c("ACTION", "REPLY", abi::action::REPLY.into()),
        c("ACTION", "REWRITE", abi::action::REWRITE.into()),
        c("ACTION", "OBSERVE", abi::action::OBSERVE.into()),
        c("REPLY_ACTION", "PASS", abi::reply_action::PASS.into()),
        c("REPLY_ACTION", "REPLACE", abi::reply_action::REPLACE.into()),
        c("REPLY_ACTION", "ERROR", abi::reply_action::ERROR.into()),
        c("INIT", "OK", abi::INIT_OK.into()),
        c("INIT", "ERROR", abi::INIT_ERROR.into()),
        c("MERGE", "PLUGIN", u(merge::PLUGIN)),
        c("MERGE", "CONCAT", u(merge::CONCAT)),
        c("MERGE", "SUM", u(merge::SUM)),
        c("MERGE", "ALL_OK", u(merge::ALL_OK)),
        c("MERGE", "FIRST_NON_NIL", u(merge::FIRST_NON_NIL)),
        c("MERGE", "LAST", u(merge::LAST)),
        c("MERGE", "FIRST", u(merge::FIRST)),
        c("STATUS", "NOT_FOUND", status::NOT_FOUND),
        c("STATUS", "BAD_ARGUMENT", status::BAD_ARGUMENT),
        c("STATUS", "BUFFER_TOO_SMALL", status::BUFFER_TOO_SMALL),
        c("STATUS", "INVALID_MEMORY", status::INVALID_MEMORY),
        c("STATUS", "NOT_ALLOWED", status::NOT_ALLOWED),
        c("STATUS", "UNIMPLEMENTED", status::UNIMPLEMENTED),
        c("LEVEL", "TRACE", level::TRACE.into()),
        c("LEVEL", "DEBUG", level::DEBUG.into()),
        c("LEVEL", "INFO", level::INFO.into()),
        c("LEVEL", "WARN", level::WARN.into()),
        c("LEVEL", "ERROR", level::ERROR.into()),
        c("METRIC", "COUNTER", metric_kind::COUNTER.into()),
        c("METRIC", "GAUGE", metric_kind::GAUGE.into()),
        c("METRIC", "HISTOGRAM", metric_kind::HISTOGRAM.into()),
        c("LAYOUT", "ARENA_SIZE", abi::Arena::SIZE as i64),
        c("LAYOUT", "CMD_HEADER", abi::CMD_HEADER as i64),
        c("LAYOUT", "ARG_ENTRY", abi::ARG_ENTRY as i64),
        c("LAYOUT", "ARG_KEY", u(abi::ARG_KEY)),
        c("LAYOUT", "ARG_ELIDED", u(abi::ARG_ELIDED)),
        c("LAYOUT", "ARG_REF", u(abi::ARG_REF)),
        c("LAYOUT", "LEN_MASK", u(abi::LEN_MASK)),
        c("LAYOUT", "CMD_VALUES_ELIDED", u(abi::CMD_VALUES_ELIDED)),
        c("LAYOUT", "REPLIES_HEADER", abi::REPLIES_HEADER as i64),
        c("LAYOUT", "REPLIES_HEADS", u(abi::REPLIES_HEADS)),
        c("LAYOUT", "REWRITE_HEADER", abi::REWRITE_HEADER as i64),
        c("LAYOUT", "MANIFEST_HEADER", abi::MANIFEST_HEADER as i64),
        c("LAYOUT", "BATCH_HEADER", batch::BATCH_HEADER as i64),
        c("LAYOUT", "BATCH_ENTRY", batch::BATCH_ENTRY as i64),
        c("LAYOUT", "BATCH_RESULT", batch::BATCH_RESULT as i64),
        c("LAYOUT", "BATCH_DONE", batch::BATCH_DONE as i64),
        c("MF", "WANT_CLOSE", u(abi::MF_WANT_CLOSE)),
        c("MF", "ALL", u(abi::MF_ALL)),
        c("MF", "CLASS_VALUES", u(abi::MF_CLASS_VALUES)),
        c("MF", "DENIES", u(abi::MF_DENIES)),
        c("MF", "OBSERVE_HEADS", u(abi::MF_OBSERVE_HEADS)),
        c("MF", "GATE", u(abi::MF_GATE)),
        c("HOOK", "VALUES", abi::HOOK_VALUES.into()),
        c("DENIED", "MAX_NAMES", abi::MAX_DENIED_NAMES as i64),
        c("DENIED", "MAX_NAME_LEN", abi::MAX_DENIED_NAME_LEN as i64),
        c("GATE", "MAX_PREFIXES", abi::MAX_GATE_PREFIXES as i64),
        c("GATE", "MAX_PREFIX_LEN", abi::MAX_GATE_PREFIX_LEN as i64),
        c("CLIENT_INFO", "HAS_USER", u(abi::client_info::HAS_USER)),
        c("CLIENT_INFO", "HAS_NAME", u(abi::client_info::HAS_NAME)),
    ]
}

/// Class names as configs spell them (`multi-key`) and as identifiers (`MULTI_KEY`).
fn classes() -> impl Iterator<Item = (&'static str, String, u32)> {
    class::NAMES
        .iter()
        .map(|&(name, bit)| (name, name.replace('-', "_").to_ascii_uppercase(), bit))
}

/// Commands by id (1-based): the identifier (`RESTORE-ASKING` → `RESTORE_ASKING`, as the
/// crate's `cmd` module spells it) and the name.
fn commands() -> impl Iterator<Item = (usize, String, &'static str)> {
    abi::COMMAND_NAMES
        .iter()
        .enumerate()
        .skip(1)
        .map(|(id, &name)| (id, name.replace('-', "_"), name))
}

const HEADER: &str = "generated from sdk/abi (tessera-plugin-abi) by `cargo run -p tessera-conformance --bin tessera-sdk-consts`; do not edit";

/// `sdk/c/include/tessera_abi.h`.
pub fn c_header() -> Generated {
    let mut s = String::new();
    let _ = writeln!(s, "/* @{HEADER}. */");
    s.push_str("#ifndef TESSERA_ABI_H\n#define TESSERA_ABI_H\n\n#include <stdint.h>\n\n");
    let mut group = "";
    for k in scalars() {
        if k.group != group && !group.is_empty() {
            s.push('\n');
        }
        group = k.group;
        let suffix = if k.value > i64::from(i32::MAX) {
            "u"
        } else {
            ""
        };
        let _ = writeln!(s, "#define TP_{}_{} ({}{suffix})", k.group, k.name, k.value);
    }
    s.push_str("\n/* Command classes (bit per class). */\n");
    for (_, ident, bit) in classes() {
        let _ = writeln!(s, "#define TP_CLASS_{ident} ({bit}u)");
    }
    s.push_str(
        "\n/* Class names as configs spell them, and their bits; TP_CLASS_COUNT entries. */\n",
    );
    let _ = writeln!(s, "#define TP_CLASS_COUNT {}", class::NAMES.len());
    s.push_str("static const struct { const char *name; uint32_t bit; } TP_CLASS_NAMES[] = {\n");
    for (name, ident, _) in classes() {
        let _ = writeln!(s, "    {{\"{name}\", TP_CLASS_{ident}}},");
    }
    s.push_str(
        "};\n\n/* ABI command ids: index into the byte-sorted Redis 7.0 names, 1-based. */\n",
    );
    for (id, ident, _) in commands() {
        let _ = writeln!(s, "#define TP_CMD_{ident} {id}");
    }
    let _ = writeln!(
        s,
        "\n/* Names by id (index 0 is \"\": unknown); TP_CMD_COUNT entries. */\n#define TP_CMD_COUNT {}",
        abi::COMMAND_NAMES.len()
    );
    s.push_str("static const char *const TP_COMMAND_NAMES[] = {\n    \"\",\n");
    for (_, _, name) in commands() {
        let _ = writeln!(s, "    \"{name}\",");
    }
    s.push_str("};\n\n#endif\n");
    Generated {
        path: "sdk/c/include/tessera_abi.h",
        text: s,
    }
}

/// `sdk/assemblyscript/assembly/abi.ts`.
pub fn assemblyscript() -> Generated {
    let mut s = String::new();
    let _ = writeln!(s, "// @{HEADER}.");
    let mut groups: Vec<&str> = Vec::new();
    let all = scalars();
    for k in &all {
        if !groups.contains(&k.group) {
            groups.push(k.group);
        }
    }
    for g in groups {
        let _ = writeln!(s, "\nexport namespace {} {{", g.to_ascii_lowercase());
        for k in all.iter().filter(|k| k.group == g) {
            // Sizes, offsets and bits are u32 (AssemblyScript does not compare u32 with i32);
            // status codes i64, as the imports return them; codes passed to imports i32.
            let ty = match k.group {
                "STATUS" => "i64",
                "LAYOUT" | "MF" | "HOOK" | "DENIED" | "CLIENT_INFO" => "u32",
                _ => "i32",
            };
            let _ = writeln!(s, "  export const {}: {ty} = {};", k.name, k.value);
        }
        s.push_str("}\n");
    }
    s.push_str("\n/** Command classes (bit per class). */\nexport namespace klass {\n");
    for (_, ident, bit) in classes() {
        let _ = writeln!(s, "  export const {ident}: u32 = {bit};");
    }
    s.push_str("}\n\n/** Class names as configs spell them, in bit order. */\nexport const CLASS_NAMES: StaticArray<string> = [\n");
    for (name, _, _) in classes() {
        let _ = writeln!(s, "  \"{name}\",");
    }
    s.push_str("];\n\n/** ABI command ids: index into the byte-sorted Redis 7.0 names, 1-based. */\nexport namespace cmd {\n");
    for (id, ident, _) in commands() {
        let _ = writeln!(s, "  export const {ident}: u16 = {id};");
    }
    s.push_str("}\n\n/** Names by id (index 0 is \"\": unknown). */\nexport const COMMAND_NAMES: StaticArray<string> = [\n  \"\",\n");
    for (_, _, name) in commands() {
        let _ = writeln!(s, "  \"{name}\",");
    }
    s.push_str("];\n");
    Generated {
        path: "sdk/assemblyscript/assembly/abi.ts",
        text: s,
    }
}

/// Every generated file.
pub fn all() -> Vec<Generated> {
    vec![c_header(), assemblyscript()]
}
