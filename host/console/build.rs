//! Rebuilds binaries when the web app in `web/dist` appears or (release) changes: rust-embed
//! embeds the files it finds at compile time but does not tell cargo about the folder, so a
//! release binary built before `npm run build` would keep serving no (or old) assets. Debug
//! builds read `web/dist` at run time and need no rebuild once it exists, so they do not watch
//! it (a front-end build would otherwise recompile the host crate). But rust-embed resolves the
//! folder's canonical path at compile time, and a debug binary compiled before `web/dist`
//! existed never serves it: until it exists, debug builds watch `web/` too.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let dist = std::path::Path::new("../../web/dist").is_dir();
    if !release && dist {
        return;
    }
    // A directory is watched recursively. Until dist exists, watch web/ (its mtime changes
    // when dist is created), or nothing if there is no front end at all.
    for dir in ["../../web/dist", "../../web"] {
        if std::path::Path::new(dir).is_dir() {
            println!("cargo:rerun-if-changed={dir}");
            return;
        }
    }
}
