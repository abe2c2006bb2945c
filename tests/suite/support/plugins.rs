//! The plugins built for wasm32 (tools/test.sh builds them before the tests), and reading
//! Prometheus text.

use std::path::PathBuf;

use super::proxy::tessera_bin;

/// `target/wasm32-unknown-unknown/release` (or `TESSERA_PLUGIN_DIR`): where the plugins'
/// wasm32 builds are.
pub(crate) fn plugin_dir() -> PathBuf {
    match std::env::var("TESSERA_PLUGIN_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => {
            // tessera_bin is target/<profile>/tessera.
            let bin = tessera_bin();
            let target = bin
                .parent()
                .and_then(|p| p.parent())
                .expect("the binary lives in target/<profile>");
            target.join("wasm32-unknown-unknown").join("release")
        }
    }
}

/// `target/wasm32-unknown-unknown/release/tessera_plugin_<name>.wasm` (or under
/// `TESSERA_PLUGIN_DIR`).
///
/// # Panics
/// If it was not built.
pub(crate) fn plugin_wasm(name: &str) -> PathBuf {
    let path = plugin_dir().join(format!("tessera_plugin_{name}.wasm"));
    assert!(
        path.exists(),
        "{} is not built: run tools/test.sh, or cargo build --release --target wasm32-unknown-unknown -p tessera-plugin-{name}",
        path.display()
    );
    path
}

/// The value of the sample `series` (name with its labels exactly as rendered), if present.
pub(crate) fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The proxy.toml lines for a plugin: `[[plugins]]` with an inline JSON config.
pub(crate) fn plugin_toml(name: &str, config: &serde_json::Value, extra: &str) -> String {
    format!(
        "[[plugins]]\nname = \"{name}\"\npath = {:?}\nconfig_json = '{}'\n{extra}\n",
        plugin_wasm(name).display().to_string(),
        config
    )
}
