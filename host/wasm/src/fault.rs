//! Why a plugin call gave no verdict ([`CallError`], [`Fault`]), and what a plugin's
//! [`FailPolicy`] makes of each case ([`Verdict`]). A leaf: the rules live here once, and the
//! proxy's command path only asks.
//!
//! The rule, in one line: fail-open covers a plugin that cannot be called for reasons outside
//! the command; it never lets through a command that was itself too large for the plugin or
//! made it fault, because then any client could walk past a fail-open filter by sending such a
//! command. See `docs/plugins.md`, "Faults and fail-open".

use std::fmt;

/// What happens to a command when the plugin cannot give its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailPolicy {
    /// The command is refused with `-ERR plugin <name> …` (security plugins).
    #[default]
    Closed,
    /// The command proceeds as if the plugin had passed, but only when the plugin could not be
    /// called for reasons outside the command (observability plugins); see [`Verdict`].
    Open,
}

impl FailPolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "closed" | "fail_closed" => Some(Self::Closed),
            "open" | "fail_open" => Some(Self::Open),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
        }
    }

    /// The plugin could not be called at all (`ChainStep::Unavailable`: its instance could not
    /// be created or initialised, or it is backing off). Nothing about the command caused it.
    pub fn when_unavailable(self) -> Verdict {
        match self {
            Self::Closed => Verdict::Fail,
            Self::Open => Verdict::Skip,
        }
    }

    /// `on_command` did not give a verdict. An input over the plugin's limit, or a fault
    /// during this call, fails the command under both policies: the command's own bytes may be
    /// the cause, and passing it would let any client skip a fail-open filter at will. Only an
    /// instance already dead before the call (not this command's doing) follows the policy.
    pub fn when_command_failed(self, e: &CallError) -> Verdict {
        match e {
            CallError::Dead => self.when_unavailable(),
            CallError::TooLarge(_) | CallError::Fault(_) => Verdict::Fail,
        }
    }

    /// An observer's `on_reply` did not give a verdict (reply over the input limit, fault, dead
    /// instance). The command has already run and an observer can only replace this client's
    /// own reply, so the policy decides: fail-open passes the reply unobserved, fail-closed
    /// (e.g. a redacting plugin) sends an error instead of a reply it could not vet. A rewrite
    /// with `merge = plugin` never fails open: there is no reply to pass.
    pub fn when_reply_failed(self, _e: &CallError) -> Verdict {
        self.when_unavailable()
    }
}

/// What the command path does after a plugin gave no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go on without this plugin (for a reply: pass it unobserved).
    Skip,
    /// Answer the command with the error text of the [`CallError`] (or the unavailable reason).
    Fail,
}

/// Fault reasons counted per plugin (index into `PluginShared::faults`).
pub const FAULT_REASONS: [&str; 4] = ["trap", "cpu_budget", "memory", "bad_output"];

/// A call that failed inside the plugin (trap, CPU budget, memory cap, unusable output). The
/// instance is dead afterwards and is replaced, fresh, for the next command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub reason: String,
    /// Index into [`FAULT_REASONS`].
    pub(crate) kind: usize,
}

impl Fault {
    pub(crate) const TRAP: usize = 0;
    pub(crate) const CPU: usize = 1;
    pub(crate) const MEMORY: usize = 2;
    pub(crate) const BAD_OUTPUT: usize = 3;

    pub(crate) fn new(kind: usize, reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            kind: kind.min(Self::BAD_OUTPUT),
        }
    }

    /// The plugin produced something the host cannot use.
    pub fn bad_output(msg: impl Into<String>) -> Self {
        Self::new(Self::BAD_OUTPUT, msg)
    }

    /// The metric label of this fault (`trap`, `cpu_budget`, `memory`, `bad_output`).
    pub fn kind(&self) -> &'static str {
        FAULT_REASONS[self.kind]
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Which input was over the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Command,
    Reply,
}

/// An input the plugin was not given because it is larger than its input limit. Nothing was
/// copied and the instance is unharmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputTooLarge {
    pub input: Input,
    /// Bytes the arena would have needed (argument or reply table included).
    pub size: usize,
    /// The plugin's input limit, bytes (`PluginSpec::input_limit`).
    pub limit: usize,
}

/// Why `on_command` / `on_reply` (or `on_close`, `on_tick`) gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The input is over the plugin's input limit: refused before anything was copied.
    TooLarge(InputTooLarge),
    /// The instance had died in an earlier call (e.g. another command of a pipeline faulted
    /// it) before this call was made.
    Dead,
    /// This call faulted; the instance is dead.
    Fault(Fault),
}

impl CallError {
    /// The fault, if this call faulted.
    pub fn fault(&self) -> Option<&Fault> {
        match self {
            Self::Fault(f) => Some(f),
            _ => None,
        }
    }
}

impl From<Fault> for CallError {
    fn from(f: Fault) -> Self {
        Self::Fault(f)
    }
}

/// Reads after `ERR plugin <name> `, e.g. `ERR plugin filter failed: trap: unreachable …` or
/// `ERR plugin filter cannot take this command: its input of 73400354 bytes is over the
/// plugin's input limit of 16777216 bytes`.
impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge(t) => {
                let what = match t.input {
                    Input::Command => "command",
                    Input::Reply => "reply",
                };
                write!(
                    f,
                    "cannot take this {what}: its input of {} bytes is over the plugin's input limit of {} bytes",
                    t.size, t.limit
                )
            }
            Self::Dead => f.write_str("failed: instance is dead"),
            Self::Fault(fault) => write!(f, "failed: {fault}"),
        }
    }
}

impl std::error::Error for CallError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn too_large() -> CallError {
        CallError::TooLarge(InputTooLarge {
            input: Input::Command,
            size: 70 << 20,
            limit: 16 << 20,
        })
    }

    #[test]
    fn fail_open_never_passes_a_command_that_was_too_large_or_made_the_plugin_fault() {
        let fault = CallError::Fault(Fault::new(Fault::MEMORY, "memory limit of 64 MiB exceeded"));
        for e in [too_large(), fault] {
            assert_eq!(FailPolicy::Open.when_command_failed(&e), Verdict::Fail);
            assert_eq!(FailPolicy::Closed.when_command_failed(&e), Verdict::Fail);
        }
        assert_eq!(FailPolicy::Open.when_unavailable(), Verdict::Skip);
        assert_eq!(
            FailPolicy::Open.when_command_failed(&CallError::Dead),
            Verdict::Skip
        );
        assert_eq!(FailPolicy::Closed.when_unavailable(), Verdict::Fail);
    }

    #[test]
    fn observers_follow_their_policy_on_replies() {
        assert_eq!(
            FailPolicy::Open.when_reply_failed(&too_large()),
            Verdict::Skip
        );
        assert_eq!(
            FailPolicy::Closed.when_reply_failed(&too_large()),
            Verdict::Fail
        );
    }

    #[test]
    fn errors_read_after_the_plugin_name() {
        assert_eq!(
            too_large().to_string(),
            "cannot take this command: its input of 73400320 bytes is over the plugin's input limit of 16777216 bytes"
        );
        let f = CallError::from(Fault::new(Fault::TRAP, "trap: unreachable"));
        assert_eq!(f.to_string(), "failed: trap: unreachable");
        assert_eq!(f.fault().map(Fault::kind), Some("trap"));
    }
}
