//! The shapes of Tessera's HTTP APIs and stored documents, as the dashboard, the proxies'
//! admin API, the console, the CLI and the tests exchange them. Types only (serde), so that
//! everything that speaks the API can depend on them without the servers.

pub mod access;
pub mod audit;
pub mod mirror;
pub mod plugins;
pub mod telemetry;
