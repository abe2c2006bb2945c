//! The [`Plugin`] trait: one method per hook, each with a pass-through default, so a plugin
//! implements only what it hooks.

use crate::command::Command;
use crate::manifest::Manifest;
use crate::out::{Action, Out, ReplyAction, ReplyOut};
use crate::replies::Replies;

/// A client connection, as the host numbers it (stable for the connection's life).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Conn(pub u64);

impl Conn {
    /// The host's connection id.
    pub fn id(self) -> u64 {
        self.0
    }
}

/// A Tessera plugin. One instance lives in each worker thread's copy of the module; state that
/// must be shared between workers belongs in the host (see [`crate::host::state`]).
///
/// Every hook runs under the host's CPU deadline and must not block. Panicking traps the
/// instance: the host applies the plugin's fail-open / fail-closed policy to that command and
/// starts a fresh instance.
pub trait Plugin: Sized + 'static {
    /// Parses the config (bytes from the control plane, JSON by convention) and declares which
    /// commands to hook. An `Err` refuses the config; its text is shown to the operator, so make
    /// it precise (`filter: unknown class "admn"`).
    ///
    /// Metrics must be defined here ([`crate::host::Metric`]): the host refuses definitions
    /// outside `init`.
    fn init(config: &[u8]) -> Result<(Self, Manifest), String>;

    /// Called for each hooked command before it is routed. Return [`Action::PASS`] to forward it
    /// unchanged, or one of `out`'s builders: deny, reply, rewrite, observe.
    fn on_command(&mut self, conn: Conn, cmd: &Command<'_>, out: Out<'_>) -> Action {
        let _ = (conn, cmd, out);
        Action::PASS
    }

    /// Called with the reply of an observed command (`ctx` from [`Out::observe`]) or with every
    /// reply of a rewrite merged by the plugin ([`crate::Merge::Plugin`], `ctx` from
    /// [`Out::rewrite`]), in command order. [`ReplyAction::PASS`] sends a single reply on as is.
    fn on_reply(
        &mut self,
        conn: Conn,
        ctx: u64,
        replies: &Replies<'_>,
        out: ReplyOut<'_>,
    ) -> ReplyAction {
        let _ = (conn, ctx, replies, out);
        ReplyAction::PASS
    }

    /// A client connection closed (only if the manifest asked, [`Manifest::want_close`]).
    fn on_close(&mut self, conn: Conn) {
        let _ = conn;
    }

    /// Called every `tick_ms` of the manifest ([`Manifest::tick_ms`]) on each instance.
    fn on_tick(&mut self) {}
}
