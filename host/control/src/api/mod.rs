//! The dashboard's REST API (axum): routes and the mapping of the dashboard's answers to HTTP
//! only; the logic lives in `dashboard` and `migrate`, the shapes in `tessera-wire`.

mod audit;
mod commandlog;
pub mod dashboard;
mod mirror;
mod plugins;
mod read_policy;
mod routes;
mod tokens;

pub use tessera_http::error::{ApiError, bearer_matches, optional_json};
