//! The dashboard's API tokens as the API shows them (docs/api.md, "Tokens and roles"): never
//! a secret nor its HMAC, except the one answer that creates a token.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Role;

/// A token as the API shows it (`GET /api/tokens`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenView {
    /// 1–64 letters, digits, `.`, `_` and `-`.
    pub name: String,
    pub role: Role,
    pub created_unix: u64,
    /// The name of the token that created it, or for the token `admin`: `generated`,
    /// `--admin-token` or `migrated`.
    pub created_by: String,
}

/// `POST /api/tokens`.
///
/// ```text
/// {"name": "ci", "role": "viewer"}
/// ```
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    pub name: String,
    pub role: Role,
}

/// The answer of `POST /api/tokens` (201): the token and, this once, its secret.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedToken {
    pub name: String,
    pub role: Role,
    pub created_unix: u64,
    pub created_by: String,
    /// The secret (128 random bits, hex), shown only in this answer.
    pub token: String,
}

impl CreatedToken {
    /// The view of a new token with its secret.
    pub fn new(view: TokenView, secret: String) -> Self {
        Self {
            name: view.name,
            role: view.role,
            created_unix: view.created_unix,
            created_by: view.created_by,
            token: secret,
        }
    }
}

/// `GET /api/whoami`: the name and role of the token the call carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WhoAmI {
    pub token: String,
    pub role: Role,
}
