//! Writes the ABI constants of the C and AssemblyScript SDKs (`consts.rs`), or with `--check`
//! only says which are stale (exit 1):
//! `cargo run -p tessera-conformance --bin tessera-sdk-consts [-- --check]`

use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut stale = 0;
    for g in tessera_conformance::consts::all() {
        let path = root.join(g.path);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(g.text.as_str()) {
            continue;
        }
        if check {
            eprintln!("{} is stale", g.path);
            stale += 1;
        } else {
            std::fs::write(&path, &g.text).unwrap_or_else(|e| panic!("{}: {e}", g.path));
            println!("wrote {}", g.path);
        }
    }
    if stale > 0 {
        eprintln!("regenerate with: cargo run -p tessera-conformance --bin tessera-sdk-consts");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
