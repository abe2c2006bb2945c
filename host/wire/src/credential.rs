//! A Redis ACL user and its password, as the cluster's meta document stores the control
//! plane's own user and a prefix route carries the login at another cluster's proxies.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A Redis ACL user and its password, e.g. the control plane's own `tessera-admin`
/// (stored in the cluster meta as `backend_admin`). `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Credential {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}
