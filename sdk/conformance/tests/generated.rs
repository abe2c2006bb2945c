//! The ABI constants of the C and AssemblyScript SDKs are generated from `tessera-plugin-abi`
//! (`src/consts.rs`): the committed files must be exactly what the generator writes now, so a
//! changed constant or a new command fails here until they are regenerated.

#[test]
fn the_generated_sdk_constants_are_fresh() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    for g in tessera_conformance::consts::all() {
        let on_disk = std::fs::read_to_string(root.join(g.path))
            .unwrap_or_else(|e| panic!("{}: {e}", g.path));
        assert!(
            on_disk == g.text,
            "{} is stale: regenerate it with `cargo run -p tessera-conformance --bin tessera-sdk-consts`",
            g.path
        );
    }
}

#[test]
fn the_generated_files_carry_every_command_and_class() {
    let c = tessera_conformance::consts::c_header().text;
    let a = tessera_conformance::consts::assemblyscript().text;
    for (id, name) in tessera_plugin_abi::COMMAND_NAMES.iter().enumerate().skip(1) {
        let ident = name.replace('-', "_");
        assert!(
            c.contains(&format!("#define TP_CMD_{ident} {id}\n")),
            "{name}"
        );
        assert!(c.contains(&format!("    \"{name}\",\n")), "{name}");
        assert!(
            a.contains(&format!("  export const {ident}: u16 = {id};\n")),
            "{name}"
        );
    }
    assert!(c.contains("#define TP_CMD_RESTORE_ASKING "));
    assert!(c.contains("#define TP_CLASS_MULTI_KEY (512u)"));
    assert!(c.contains("{\"multi-key\", TP_CLASS_MULTI_KEY}"));
    assert!(a.contains("export const MULTI_KEY: u32 = 512;"));
    assert!(c.contains("#define TP_LAYOUT_ARG_KEY (2147483648u)"));
    assert!(a.contains("export const NOT_ALLOWED: i64 = -10;"));
}
