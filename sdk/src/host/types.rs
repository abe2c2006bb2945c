//! Plain data of the host interface, [`Level`] and [`ClientInfo`] (with the encoding
//! `client_info` uses): a leaf that imports nothing of this crate, so both the import wrappers
//! and the `testing` fake host can use it without a circle.

use tessera_plugin_abi::{encode_string_list, level};

/// Log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(i32)]
pub enum Level {
    /// Very verbose.
    Trace = level::TRACE,
    /// Debugging.
    Debug = level::DEBUG,
    /// Normal events.
    Info = level::INFO,
    /// Something looks wrong.
    Warn = level::WARN,
    /// Something failed.
    Error = level::ERROR,
}

/// Facts about a client connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientInfo {
    /// Peer address as `ip:port` (`[v6]:port` for IPv6).
    pub addr: String,
    /// The authenticated user, if any.
    pub user: Option<String>,
    /// The name set with `CLIENT SETNAME`, if any.
    pub name: Option<String>,
    /// The selected database.
    pub db: u32,
}

impl ClientInfo {
    /// A client at `addr` with no user and no name.
    pub fn new(addr: &str) -> Self {
        Self {
            addr: addr.to_owned(),
            ..Self::default()
        }
    }

    /// With this user.
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.to_owned());
        self
    }

    /// With this name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// Decodes `client_info`'s answer: `u32 db, u32 flags, {u32 len, bytes}` × (addr, user,
    /// name).
    pub fn decode(buf: &[u8]) -> Option<Self> {
        use tessera_plugin_abi::client_info::{HAS_NAME, HAS_USER};
        let db = u32::from_le_bytes(buf.get(0..4)?.try_into().ok()?);
        let flags = u32::from_le_bytes(buf.get(4..8)?.try_into().ok()?);
        let mut strings = tessera_plugin_abi::string_list(buf.get(8..)?);
        let mut next =
            || -> Option<String> { Some(String::from_utf8_lossy(strings.next()??).into_owned()) };
        let addr = next()?;
        let user = next()?;
        let name = next()?;
        Some(Self {
            addr,
            user: (flags & HAS_USER != 0).then_some(user),
            name: (flags & HAS_NAME != 0).then_some(name),
            db,
        })
    }

    /// The encoding [`ClientInfo::decode`] reads (what the host writes).
    pub fn encode(&self) -> Vec<u8> {
        use tessera_plugin_abi::client_info::{HAS_NAME, HAS_USER};
        let mut out = Vec::new();
        out.extend_from_slice(&self.db.to_le_bytes());
        let flags = if self.user.is_some() { HAS_USER } else { 0 }
            | if self.name.is_some() { HAS_NAME } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        let items = [
            self.addr.as_bytes(),
            self.user.as_deref().unwrap_or("").as_bytes(),
            self.name.as_deref().unwrap_or("").as_bytes(),
        ];
        encode_string_list(items, &mut out);
        out
    }
}
