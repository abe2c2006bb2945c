//! The dashboard's half of slot migration: the background mover, migration and rebalance
//! plans, measured rebalancing, and the speed cap. What proxies share with it (the scripts,
//! the internal keys) is `tessera_model::migration`.

pub mod capture;
mod chunks;
pub mod cleanup;
pub mod copy;
pub mod machine;
pub mod measure;
pub mod mover;
pub mod plan;
mod reply;
mod stream;
pub mod throttle;
