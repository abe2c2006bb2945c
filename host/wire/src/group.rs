//! The id every resource names a replica group by: the ground the other modules stand on.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A replica group id, as the control plane numbers them (from 1).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
pub struct GroupId(pub u32);

impl std::fmt::Display for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
