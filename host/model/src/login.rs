//! How a backend connection identifies itself before it serves: the requests it sends at
//! connect (AUTH, ACL SETUSER …), each with the check its reply must pass. The proxy's
//! backends (`tessera-proxy`), its pub/sub hub and the routes to other clusters all log in
//! this way; the steps are data, built by whoever decides the identity.

use std::sync::Arc;

use bytes::Bytes;

/// How a connection identifies itself before serving: requests sent in order at connect, each
/// of whose replies must pass its check. `id` distinguishes logins in the pool (equal ids,
/// equal steps).
#[derive(Clone)]
pub struct Login {
    pub id: u64,
    pub steps: Arc<[LoginStep]>,
}

/// One request of a login, what it is (for errors), and which replies mean it worked.
pub struct LoginStep {
    pub request: Bytes,
    pub what: &'static str,
    pub accept: fn(&[u8]) -> bool,
}

impl Login {
    /// No login: the connection acts as Redis's `default` user.
    pub fn none() -> Self {
        Self {
            id: 0,
            steps: Arc::from(Vec::new()),
        }
    }
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("id", &self.id)
            .field(
                "steps",
                &self.steps.iter().map(|s| s.what).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// A `+OK` reply.
pub fn is_ok(r: &[u8]) -> bool {
    r == b"+OK\r\n"
}
