//! How `tessera admin plugin` and `plugin canary` show plugins and read a config given on the
//! command line: the catalog as a table, durations in µs or ms.

use anyhow::Context as _;

use tessera_wire::plugins::PluginEntry;

use super::table::yes_no;

/// A plugin config from `--file` or `--inline` (neither: none).
pub(super) fn read_config(
    file: Option<std::path::PathBuf>,
    inline: Option<String>,
) -> anyhow::Result<Option<serde_json::Value>> {
    Ok(match (file, inline) {
        (Some(f), _) => {
            let text = std::fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
            Some(
                serde_json::from_slice(&text)
                    .with_context(|| format!("{} is not JSON", f.display()))?,
            )
        }
        (None, Some(j)) => Some(serde_json::from_str(&j).context("--inline is not JSON")?),
        (None, None) => None,
    })
}

/// Seconds as µs below 1 ms, ms above.
pub(super) fn duration_text(s: f64) -> String {
    let ns = (s * 1e9).round();
    if ns < 1e6 {
        format!("{} µs", ns / 1e3)
    } else {
        format!("{} ms", ns / 1e6)
    }
}

/// The plugins, one line each; `ok` when there are none (a removal).
pub(super) fn render(list: &[&PluginEntry]) -> String {
    if list.is_empty() {
        return "ok\n".into();
    }
    let mut human = format!(
        "{:<16} {:<8} {:<7} {:<14} {:>9}  CONFIG\n",
        "NAME", "ENABLED", "FAIL", "SHA256", "SIZE"
    );
    for p in list {
        human.push_str(&format!(
            "{:<16} {:<8} {:<7} {:<14} {:>9}  {}\n",
            p.name,
            yes_no(p.enabled),
            p.fail,
            &p.sha256[..p.sha256.len().min(12)],
            p.size,
            p.config
        ));
    }
    human
}
