//! Mirroring with a diff: a copy of the commands clients send (all, or the writes only) goes
//! to a shadow target (another cluster's proxy, a Redis server), and its replies are compared
//! with the primary's (docs/mirroring.md).
//!
//! The session hands over a [`Ticket`] when a command qualifies (`Mirror::ticket`, behind one
//! relaxed load while mirroring is off) and, once the primary's reply is in, the worker's
//! [`WorkerMirror`] hands the copy to the link thread, which sends it to the shadow on its own
//! connection and compares the replies. The queue is bounded per proxy (entries and bytes):
//! past a bound, commands are dropped and counted, never waited for, and nothing the shadow
//! sends is handled on a client's worker thread, so a slow, dead or hostile shadow costs
//! clients nothing. Data flows one way: session → ticket → link → compare → stats.

mod compare;
mod link;
mod stats;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwapOption;
use bytes::Bytes;

pub use compare::{Rule, rule, same};
pub use link::WorkerMirror;
pub use stats::MirrorStats;

use crate::stages::classify::Classified;
use tessera_model::command::{CommandId, Kind, Options};
use tessera_resp::Proto;
use tessera_wire::mirror::{MirrorConfig, MirrorDoc, Mode};

/// The settings in force, with what every worker's link needs to follow them.
pub(crate) struct Active {
    pub(crate) config: MirrorConfig,
    /// Bumped at every change: a worker's link made for another generation is replaced.
    pub(crate) generation: u64,
    pub(crate) stats: Arc<MirrorStats>,
    /// The generation in force from now on: a link of an older one lets its connections go.
    pub(crate) generations: tokio::sync::watch::Receiver<u64>,
    /// Copies sent and not yet answered, all workers together.
    pub(crate) queue: Arc<link::Queue>,
    /// The thread that talks to the shadow, started with the first copy.
    pub(crate) link: std::sync::OnceLock<Option<link::LinkThread>>,
}

/// A proxy's mirror: the settings in force (shared by its workers) and its counters.
pub struct Mirror {
    /// Read by every command: the one branch mirroring costs while off.
    on: AtomicBool,
    active: ArcSwapOption<Active>,
    generation: AtomicU64,
    generations: tokio::sync::watch::Sender<u64>,
    /// The version of the dashboard document in force (0: proxy.toml's or none).
    version: AtomicU64,
    pub stats: Arc<MirrorStats>,
}

impl Mirror {
    /// A mirror following `config` (proxy.toml's `[mirror]`), or off.
    pub fn new(config: Option<MirrorConfig>) -> Self {
        let m = Self {
            on: AtomicBool::new(false),
            active: ArcSwapOption::empty(),
            generation: AtomicU64::new(0),
            generations: tokio::sync::watch::Sender::new(0),
            version: AtomicU64::new(0),
            stats: Arc::default(),
        };
        m.set(config);
        m
    }

    /// Whether commands are mirrored now.
    #[inline]
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The settings in force.
    pub fn config(&self) -> Option<MirrorConfig> {
        self.active.load().as_ref().map(|a| a.config.clone())
    }

    /// The dashboard document version in force.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Starts (or changes, or with `None` stops) mirroring. Counters are kept across changes.
    pub fn set(&self, config: Option<MirrorConfig>) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let active = config.map(|config| {
            Arc::new(Active {
                config,
                generation,
                stats: self.stats.clone(),
                generations: self.generations.subscribe(),
                queue: Arc::default(),
                link: std::sync::OnceLock::new(),
            })
        });
        self.on.store(active.is_some(), Ordering::Relaxed);
        self.active.store(active);
        self.generations.send_replace(generation);
    }

    /// Applies a dashboard document unless it is older than the one in force.
    ///
    /// # Errors
    /// An older version (the text says so), or settings that do not validate.
    pub fn apply(&self, doc: &MirrorDoc) -> Result<(), String> {
        if let Some(c) = &doc.config {
            c.validate()?;
        }
        let current = self.version();
        if doc.version < current {
            return Err(format!(
                "mirror version {} is older than the one in force ({current})",
                doc.version
            ));
        }
        self.version.store(doc.version, Ordering::Relaxed);
        self.set(doc.config.clone());
        Ok(())
    }

    /// A ticket for a command that passed the plugin layer and went to the backends, if the
    /// mirror takes it. Not mirrored: what the proxy answers or refuses itself (the caller
    /// passes only forwarded commands), blocking commands, pub/sub, transactions, scripts
    /// (a script cached on the primary is not on the shadow), admin and fan-out commands.
    pub fn ticket(&self, c: &Classified<'_>, proto: Proto) -> Option<Box<Ticket>> {
        if !matches!(c.cmd.kind, Kind::Keyed | Kind::Split(_))
            || c.cmd.options == Options::ScriptCall
            || c.blocks()
        {
            return None;
        }
        let guard = self.active.load();
        let active = guard.as_ref()?;
        if active.config.mode == Mode::Writes && !c.cmd.write {
            return None;
        }
        let req = c.req.as_bytes();
        if req.len() > active.config.max_command_bytes {
            active.stats.dropped(stats::Drop::TooLarge);
            return None;
        }
        Some(Box::new(Ticket {
            req: req.clone(),
            id: c.cmd.id,
            name: c.cmd.name,
            rule: rule(c.cmd.name),
            proto,
            active: active.clone(),
        }))
    }
}

/// A command to mirror once the primary's reply is in (`WorkerMirror::send`).
pub struct Ticket {
    req: Bytes,
    id: CommandId,
    name: &'static str,
    rule: Rule,
    proto: Proto,
    active: Arc<Active>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(version: u64, target: Option<&str>) -> MirrorDoc {
        MirrorDoc {
            version,
            config: target.map(|t| MirrorConfig {
                target: t.into(),
                ..MirrorConfig::default()
            }),
        }
    }

    #[test]
    fn a_document_older_than_the_one_in_force_is_refused() {
        let m = Mirror::new(None);
        assert!(!m.on());
        m.apply(&doc(2, Some("h:1"))).unwrap();
        assert!(m.on());
        let e = m.apply(&doc(1, None)).unwrap_err();
        assert!(e.contains("older"), "{e}");
        assert!(m.on(), "still mirroring after a refused document");
        assert!(m.apply(&doc(3, Some("not-an-address"))).is_err());
        assert_eq!(m.version(), 2);
        m.apply(&doc(3, None)).unwrap();
        assert!(!m.on() && m.config().is_none());
    }
}
