//! A plugin's manifest as the hot path uses it: [`Hooks`] (a bitmap over ABI command ids,
//! classes, key prefixes) and [`DeniedToAll`] (the commands it refuses to every client, for
//! the proxy's script confinement). Built once per generation from the manifest `init`
//! returned; every field was checked there, because the manifest is plugin output.

use tessera_plugin_abi::{self as abi, ManifestView};

/// Every class bit ABI v1 defines.
const KNOWN_CLASSES: u32 = {
    let mut all = 0;
    let mut i = 0;
    while i < abi::class::NAMES.len() {
        all |= abi::class::NAMES[i].1;
        i += 1;
    }
    all
};

/// The hook manifest compiled for the hot path: a bitmap over ABI command ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    commands: [u64; 4],
    values: [u64; 4],
    pub classes: u32,
    pub all: bool,
    pub class_values: bool,
    pub prefixes: Vec<Vec<u8>>,
    pub want_close: bool,
    /// Observed replies reach the plugin as heads and sizes (`MF_OBSERVE_HEADS`).
    pub observe_heads: bool,
    pub tick_ms: u32,
    /// What the plugin declared it denies to every client.
    pub denied: DeniedToAll,
    /// The gate it declared: which class-hooked commands it is called for
    /// ([`abi::Gate`]).
    pub gate: Option<abi::Gate>,
}

/// Commands a plugin refuses to every client, whoever they are and whatever the keys (the
/// manifest's optional "denied to every client" section). The proxy can then keep backend
/// scripts from running them (an ACL user without them). A declaration, not a hook: the
/// plugin still hooks and denies these itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeniedToAll {
    /// Upper-case names, sorted, no duplicates: `FLUSHALL`, or `CONFIG|SET` for one
    /// subcommand (the container is a known command; the subcommand is not checked).
    pub commands: Vec<String>,
    /// `class::*` bits: every command of these classes is denied.
    pub classes: u32,
}

impl DeniedToAll {
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty() && self.classes == 0
    }

    fn from_manifest(m: &ManifestView<'_>) -> Result<Self, String> {
        if m.denied_classes & !KNOWN_CLASSES != 0 {
            return Err(format!(
                "manifest denies unknown class bits {:#x}",
                m.denied_classes & !KNOWN_CLASSES
            ));
        }
        let mut commands = Vec::new();
        for raw in m.denied_names() {
            commands.push(denied_name(raw)?);
        }
        commands.sort_unstable();
        commands.dedup();
        Ok(Self {
            commands,
            classes: m.denied_classes,
        })
    }

    /// The union of several plugins' declarations.
    pub fn union(&mut self, other: &DeniedToAll) {
        self.classes |= other.classes;
        self.commands.extend(other.commands.iter().cloned());
        self.commands.sort_unstable();
        self.commands.dedup();
    }
}

/// Checks and upper-cases one declared name: `NAME` or `NAME|SUB`, printable ASCII, a known
/// container command. Plugin output: anything else refuses the manifest.
fn denied_name(raw: &[u8]) -> Result<String, String> {
    let shown = || String::from_utf8_lossy(raw).into_owned();
    if raw.is_empty() || !raw.iter().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "manifest denies a malformed command name {:?}",
            shown()
        ));
    }
    let text = std::str::from_utf8(raw).map_err(|_| shown())?;
    let mut parts = text.split('|');
    let top = parts.next().unwrap_or_default();
    let sub = parts.next();
    if parts.next().is_some() || sub.is_some_and(str::is_empty) {
        return Err(format!("manifest denies a malformed command name {text:?}"));
    }
    if abi::command_id(top) == 0 {
        return Err(format!("manifest denies an unknown command {text:?}"));
    }
    Ok(text.to_ascii_uppercase())
}

fn bit(map: &[u64; 4], id: u16) -> bool {
    let id = id as usize;
    id < 256 && map[id / 64] & (1 << (id % 64)) != 0
}

fn set_bit(map: &mut [u64; 4], id: u16) {
    let id = id as usize;
    if id < 256 {
        map[id / 64] |= 1 << (id % 64);
    }
}

impl Hooks {
    pub(crate) fn from_manifest(m: &ManifestView<'_>) -> Result<Self, String> {
        if m.version != abi::ABI_VERSION {
            return Err(format!("manifest version {} is not 1", m.version));
        }
        let mut h = Hooks {
            classes: m.classes,
            all: m.flags & abi::MF_ALL != 0,
            class_values: m.flags & abi::MF_CLASS_VALUES != 0,
            want_close: m.flags & abi::MF_WANT_CLOSE != 0,
            observe_heads: m.flags & abi::MF_OBSERVE_HEADS != 0,
            tick_ms: m.tick_ms,
            denied: DeniedToAll::from_manifest(m)?,
            gate: abi::Gate::from_manifest(m),
            ..Hooks::default()
        };
        if let Some(g) = &h.gate
            && g.classes & !KNOWN_CLASSES != 0
        {
            return Err(format!(
                "manifest gates unknown class bits {:#x}",
                g.classes & !KNOWN_CLASSES
            ));
        }
        for (id, flags) in m.commands() {
            if id == 0 || id as usize >= abi::COMMAND_NAMES.len() {
                return Err(format!("manifest hooks unknown command id {id}"));
            }
            set_bit(&mut h.commands, id);
            if flags & abi::HOOK_VALUES != 0 {
                set_bit(&mut h.values, id);
            }
        }
        h.prefixes = m.prefixes().map(<[u8]>::to_vec).collect();
        Ok(h)
    }

    /// Whether the plugin wants this command, and whether with values.
    #[inline]
    pub fn wants(&self, id: u16, class: u32) -> Option<bool> {
        let by_class = self.all || self.classes & class != 0;
        if bit(&self.commands, id) {
            Some(bit(&self.values, id) || (self.class_values && by_class))
        } else if by_class {
            Some(self.class_values)
        } else {
            None
        }
    }

    /// Whether any key matches the prefix filter (always true without prefixes).
    #[inline]
    pub fn keys_match<'a>(&self, mut keys: impl Iterator<Item = &'a [u8]>) -> bool {
        self.prefixes.is_empty() || keys.any(|k| self.prefixes.iter().any(|p| k.starts_with(p)))
    }

    /// Whether the plugin's gate keeps this command from it: hooked only through gated
    /// classes, with no key under the gate's prefixes and no value over its bound.
    #[inline]
    pub fn gated_out<'a>(
        &self,
        id: u16,
        class: u32,
        keys: impl Iterator<Item = &'a [u8]>,
        value_lens: impl Iterator<Item = usize>,
    ) -> bool {
        self.gate.as_ref().is_some_and(|g| {
            g.applies(bit(&self.commands, id), self.all, self.classes, class)
                && !g.opens(keys, value_lens)
        })
    }

    /// Hooked command names, for the admin API.
    pub fn command_names(&self) -> Vec<&'static str> {
        (1..abi::COMMAND_NAMES.len() as u16)
            .filter(|&id| bit(&self.commands, id))
            .map(abi::command_name)
            .collect()
    }

    /// The union of hooks, for the chain's one bitmap test (declarations are not merged).
    pub(crate) fn union(&mut self, o: &Hooks) {
        for i in 0..4 {
            self.commands[i] |= o.commands[i];
            self.values[i] |= o.values[i];
        }
        self.classes |= o.classes;
        self.all |= o.all;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_plugin_abi::{ManifestBuilder, class, cmd};

    fn hooks(m: &ManifestBuilder) -> Result<Hooks, String> {
        let mut out = Vec::new();
        m.encode(&mut out);
        Hooks::from_manifest(&ManifestView::parse(&out).expect("well-formed"))
    }

    #[test]
    fn a_gate_keeps_class_hooked_commands_no_rule_touches_from_the_plugin() {
        let gate = abi::Gate {
            classes: class::WRITE,
            max_value: 4,
            prefixes: vec![b"ro:".to_vec()],
        };
        let m = ManifestBuilder {
            commands: vec![(cmd::DEL, 0)],
            classes: class::WRITE | class::ADMIN,
            gate: Some(gate.clone()),
            ..ManifestBuilder::default()
        };
        let h = hooks(&m).unwrap();
        let no_keys = || std::iter::empty::<&[u8]>();
        let k = |k: &'static [u8]| std::iter::once(k);
        // SET k small: hooked through WRITE alone, no rule touches it.
        assert!(h.gated_out(cmd::SET, class::WRITE, k(b"k"), [4].into_iter()));
        assert!(!h.gated_out(cmd::SET, class::WRITE, k(b"ro:k"), [4].into_iter()));
        assert!(!h.gated_out(cmd::SET, class::WRITE, k(b"k"), [5].into_iter()));
        // Listed by id, or also of an ungated hooked class: always called.
        assert!(!h.gated_out(cmd::DEL, class::WRITE, k(b"k"), [].into_iter()));
        assert!(!h.gated_out(
            cmd::FLUSHALL,
            class::WRITE | class::ADMIN,
            no_keys(),
            [].into_iter()
        ));
        // Unknown class bits in a gate refuse the manifest (plugin output).
        let bad = ManifestBuilder {
            gate: Some(abi::Gate {
                classes: 1 << 31,
                ..gate
            }),
            ..ManifestBuilder::default()
        };
        assert!(
            hooks(&bad)
                .unwrap_err()
                .contains("gates unknown class bits")
        );
        assert!(hooks(&ManifestBuilder::default()).unwrap().gate.is_none());
    }

    #[test]
    fn denied_names_are_checked_normalized_and_deduplicated() {
        let m = ManifestBuilder {
            commands: vec![(cmd::FLUSHALL, 0)],
            denied_classes: class::ADMIN | class::DANGEROUS,
            denied: vec![
                b"flushall".to_vec(),
                b"Config|Set".to_vec(),
                b"FLUSHALL".to_vec(),
            ],
            ..ManifestBuilder::default()
        };
        let h = hooks(&m).unwrap();
        assert_eq!(h.denied.commands, ["CONFIG|SET", "FLUSHALL"]);
        assert_eq!(h.denied.classes, class::ADMIN | class::DANGEROUS);
        assert!(
            hooks(&ManifestBuilder::default())
                .unwrap()
                .denied
                .is_empty()
        );
    }

    #[test]
    fn bad_declarations_refuse_the_manifest() {
        for (name, want) in [
            (&b"NOSUCH"[..], "unknown command"),
            (b"CONFIG|", "malformed"),
            (b"CONFIG|SET|X", "malformed"),
            (b"FLUSH ALL", "malformed"),
            (b"FLUSHALL\r\n", "malformed"),
            (b"\xff", "malformed"),
        ] {
            let m = ManifestBuilder {
                denied: vec![name.to_vec()],
                ..ManifestBuilder::default()
            };
            let e = hooks(&m).unwrap_err();
            assert!(e.contains(want), "{name:?}: {e}");
        }
        let m = ManifestBuilder {
            denied_classes: 1 << 30,
            ..ManifestBuilder::default()
        };
        assert!(hooks(&m).unwrap_err().contains("unknown class bits"));
    }
}
