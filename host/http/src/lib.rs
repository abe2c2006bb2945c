//! The HTTP edge shared by the dashboard, the console and each proxy's admin API: serving a
//! router, the error envelope (`{"error":{"code","message"}}`), which role each dashboard
//! route needs, and the process's Prometheus recorder.

pub mod access;
pub mod auth_throttle;
pub mod error;
pub mod metrics;
pub mod server;
pub mod tls;
