//! Rebuilds release binaries when the web app in `web/dist` changes: rust-embed embeds the
//! files it finds at compile time but does not tell cargo about the folder, so a binary built
//! before `npm run build` would keep serving no (or old) assets. Debug builds read `web/dist`
//! at run time and need no rebuild, so they do not watch it (a front-end build would otherwise
//! recompile the host crate).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("PROFILE").as_deref() != Ok("release") {
        return;
    }
    // A directory is watched recursively. Until dist exists, watch web/ (its mtime changes
    // when dist is created), or nothing if there is no front end at all.
    for dir in ["../web/dist", "../web"] {
        if std::path::Path::new(dir).is_dir() {
            println!("cargo:rerun-if-changed={dir}");
            return;
        }
    }
}
