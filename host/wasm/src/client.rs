//! What the `client_info` import tells a plugin about a connection, and how the runtime asks
//! the proxy for it ([`ClientLookup`]). A leaf: the proxy implements the trait.

/// Facts about a client connection, for the `client_info` import.
#[derive(Debug, Clone, Default)]
pub struct ClientFacts {
    pub addr: String,
    pub user: Option<String>,
    pub name: Option<String>,
    pub db: u32,
}

/// How the runtime finds a connection's facts (the proxy's client registry).
pub trait ClientLookup: Send + Sync + 'static {
    fn client(&self, conn: u64) -> Option<ClientFacts>;
}

/// The lookup of a runtime without a proxy (tests, benches): knows no connection.
pub(crate) struct NoClients;

impl ClientLookup for NoClients {
    fn client(&self, _: u64) -> Option<ClientFacts> {
        None
    }
}
