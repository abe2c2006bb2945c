//! The dashboard's half of slot migration (docs/migration.md): the driver's state machine
//! (`machine`), one source's copy (`copy`: a capture of its replication stream in `capture`,
//! rounds of copies, big keys in `chunks`), deleting stale keys (`cleanup`), migration and
//! rebalance plans, measured rebalancing, and the speed cap. What proxies share with it (the
//! internal keys) is `tessera_model::migration`.

pub mod capture;
mod chunks;
pub mod cleanup;
pub mod copy;
pub mod machine;
pub mod measure;
pub mod plan;
pub mod progress;
mod reply;
mod stream;
pub mod throttle;
