//! Tessera converter plugin: confines authenticated users to a key namespace (keys get a
//! prefix on the way in and lose it on the way out) and stores large string, hash and list
//! values LZ4-compressed. `namespace.rs` and `values.rs` plan each command, `reply.rs`
//! converts replies, `codec.rs` is the stored format. README.md has the config and the rules.

use tessera_plugin_sdk::host::{Metric, Series};
use tessera_plugin_sdk::{
    Action, Command, Conn, Manifest, Merge, Out, Plugin, Replies, ReplyAction, ReplyOut, host,
};

mod codec;
mod config;
mod namespace;
mod plan;
mod reply;
mod scripts;
#[cfg(test)]
mod tests;
mod values;

use config::Config;
use plan::{Plan, ReplyCtx};

/// The plugin.
#[derive(Debug)]
pub struct Converter {
    cfg: Config,
    /// Replies that could not be converted (a corrupt or oversized stored value, mostly):
    /// `tessera_plugin_converter_reply_errors_total`.
    reply_errors: Series,
}

impl Plugin for Converter {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        let cfg = Config::parse(config)?;
        let mut m = Manifest::new();
        if !cfg.prefixes.is_empty() {
            // Any command of a confined client may need its keys prefixed or be refused. Keys
            // are always copied; values only where an argument decides something (patterns,
            // subcommands), so a large value of any client is not copied into the plugin.
            m = m.hook_all();
            for &id in namespace::READS_ARGS {
                m = m.hook_with_values(id);
            }
        }
        if let Some(c) = &cfg.compression {
            for &id in values::HOOKED {
                m = m.hook_with_values(id);
            }
            // The proxy checks the prefixes natively, for every hooked command: only when
            // nothing else is hooked.
            if cfg.prefixes.is_empty() && !c.prefixes.iter().any(|p| p.is_empty()) {
                for p in &c.prefixes {
                    m = m.prefix(p);
                }
            }
        }
        let reply_errors = Metric::counter(
            "reply_errors_total",
            "Replies answered with an error because a stored value could not be decompressed",
            &[],
        )
        .and_then(|m| m.series(&[]))
        .unwrap_or(Series::NONE);
        Ok((Converter { cfg, reply_errors }, m))
    }

    fn on_command(&mut self, conn: Conn, c: &Command<'_>, out: Out<'_>) -> Action {
        let ns = self.namespace(conn);
        let comp = self
            .cfg
            .compression
            .as_ref()
            .filter(|comp| c.keys().any(|(_, k)| comp.covers(k)));
        if ns.is_none() && comp.is_none() {
            return Action::PASS;
        }
        let name = String::from_utf8_lossy(c.name()).to_ascii_uppercase();
        let mut p = Plan::default();
        if ns.is_some()
            && let Some(why) = namespace::refusal(c, &self.cfg.scripts)
        {
            return out.deny_fmt(format_args!("ERR converter: {name} {why}"));
        }
        if let Some(comp) = comp
            && let Err(why) = values::plan(c, comp, &mut p)
        {
            return out.deny_fmt(format_args!("ERR converter: {name} {why}"));
        }
        if let Some(ns) = ns {
            namespace::plan(c, ns, &self.cfg.prefixes[usize::from(ns)], &mut p);
        }
        emit(c, &p, out)
    }

    fn on_reply(
        &mut self,
        _conn: Conn,
        ctx: u64,
        replies: &Replies<'_>,
        out: ReplyOut<'_>,
    ) -> ReplyAction {
        let Some(ctx) = ReplyCtx::decode(ctx) else {
            return out.error("ERR converter: unknown reply context");
        };
        let Some(raw) = replies.get(0) else {
            return out.error("ERR converter: no reply");
        };
        let max_value = self.cfg.compression.as_ref().map_or(0, |c| c.max_value);
        let mut conv = reply::Convert {
            ctx,
            prefix: ctx
                .namespace
                .and_then(|n| self.cfg.prefixes.get(usize::from(n)))
                .map(Vec::as_slice),
            max_value,
            budget: max_value.saturating_mul(2),
        };
        match reply::convert(raw, &mut conv) {
            Ok(r) if r == raw => ReplyAction::PASS,
            Ok(r) => out.replace_raw(&r),
            Err(e) => {
                self.reply_errors.inc();
                out.error(&e)
            }
        }
    }
}

impl Converter {
    /// The namespace of `conn`'s user. Looked up on every command: the proxy does not show
    /// AUTH or HELLO to plugins, so a cache could not see a client log in as someone else.
    fn namespace(&self, conn: Conn) -> Option<u16> {
        if self.cfg.prefixes.is_empty() {
            return None;
        }
        let user = host::client_info(conn)?.user?;
        self.cfg.namespace_of(&user)
    }
}

/// Turns a plan into the action: pass, observe (only the reply changes) or rewrite.
fn emit(c: &Command<'_>, p: &Plan, out: Out<'_>) -> Action {
    let ctx = p.reply.encode();
    if p.unchanged() {
        return if p.reply.needed() {
            out.observe(ctx)
        } else {
            Action::PASS
        };
    }
    let merge = if p.reply.needed() {
        Merge::Plugin
    } else {
        Merge::First
    };
    let mut rw = out.rewrite(merge, ctx);
    rw.command(c.len() + p.appended.len());
    match p.name {
        Some(name) => rw.arg(name),
        None => rw.input(0),
    };
    for i in 1..c.len() {
        if let Some(b) = p.replacement(i) {
            rw.arg(b);
        } else if let (Some(prefix), true) = (&p.key_prefix, c.is_key(i)) {
            rw.arg_parts(&[prefix, c.bytes(i).unwrap_or_default()]);
        } else {
            rw.input(i);
        }
    }
    for a in &p.appended {
        rw.arg(a);
    }
    rw.finish()
}

tessera_plugin_sdk::export_plugin!(Converter);
