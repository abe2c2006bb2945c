//! The command-line tools over a running cluster: `tessera admin` (the dashboard API's CLI)
//! and `tessera import` (a Redis dataset written into a cluster through a proxy).

pub mod admin;
pub mod import;
