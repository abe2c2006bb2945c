//! A minimal Tessera plugin to copy: denies one configured command and counts, per command,
//! what it saw. Build: `cargo build --release --target wasm32-unknown-unknown`.
//!
//! Config (JSON): `{"deny": "FLUSHALL"}`; `deny` is optional.

use serde::Deserialize;
use tessera_plugin_sdk::host::{Metric, Series};
use tessera_plugin_sdk::{Action, Command, Conn, Manifest, Out, Plugin, command_id, command_name};

/// The parsed config.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    deny: Option<String>,
}

/// The plugin: the denied command's id and one counter series per command id seen.
pub struct Template {
    deny: u16,
    seen: Metric,
    /// Series handles by command id, resolved on first use (the hot path is then one call).
    series: Vec<Option<Series>>,
}

impl Plugin for Template {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        let cfg: Config =
            serde_json::from_slice(config).map_err(|e| format!("template: bad config: {e}"))?;
        let deny = match &cfg.deny {
            Some(name) => match command_id(name) {
                0 => return Err(format!("template: unknown command {name:?}")),
                id => id,
            },
            None => 0,
        };
        // Metrics are defined in init; the proxy exports this one as
        // tessera_plugin_<plugin>_commands_seen_total{command="get"}.
        let seen = Metric::counter("commands_seen_total", "Commands seen", &["command"])
            .map_err(|e| format!("template: metric: {e}"))?;
        // Hook every command (to count them); values are not needed, only names and keys
        // are copied into the plugin.
        let manifest = Manifest::new().hook_all();
        Ok((
            Template {
                deny,
                seen,
                series: Vec::new(),
            },
            manifest,
        ))
    }

    fn on_command(&mut self, _conn: Conn, cmd: &Command<'_>, out: Out<'_>) -> Action {
        self.count(cmd.id());
        if self.deny != 0 && cmd.is(self.deny) {
            return out.deny_fmt(format_args!(
                "ERR {} is disabled by the template plugin",
                command_name(self.deny)
            ));
        }
        Action::PASS
    }
}

impl Template {
    fn count(&mut self, id: u16) {
        let i = usize::from(id);
        if self.series.len() <= i {
            self.series.resize(i + 1, None);
        }
        let series = *self.series[i].get_or_insert_with(|| {
            let name = match id {
                0 => "unknown".to_owned(),
                _ => command_name(id).to_ascii_lowercase(),
            };
            self.seen.series(&[&name]).unwrap_or(Series::NONE)
        });
        series.inc();
    }
}

tessera_plugin_sdk::export_plugin!(Template);

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_plugin_sdk::testing::{self, Harness, Outcome, command};

    #[test]
    fn denies_the_configured_command_and_counts_the_rest() {
        testing::reset();
        let mut h = Harness::<Template>::new(r#"{"deny": "flushall"}"#);
        assert_eq!(h.on_command(1, &command(&["GET", "k"])), Outcome::Pass);
        assert_eq!(h.on_command(1, &command(&["GET", "k"])), Outcome::Pass);
        assert_eq!(
            h.on_command(1, &command(&["FLUSHALL"])),
            Outcome::Deny("ERR FLUSHALL is disabled by the template plugin".into())
        );
        assert_eq!(testing::counter("commands_seen_total", &["get"]), Some(2));
        assert_eq!(
            testing::counter("commands_seen_total", &["flushall"]),
            Some(1)
        );
    }

    #[test]
    fn unknown_commands_are_refused_at_init() {
        let err = Harness::<Template>::try_new(r#"{"deny": "FLUSHAL"}"#).unwrap_err();
        assert_eq!(err, r#"template: unknown command "FLUSHAL""#);
    }
}
