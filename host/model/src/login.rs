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
#[derive(Clone)]
pub struct LoginStep {
    pub request: Bytes,
    pub what: &'static str,
    pub accept: fn(&[u8]) -> bool,
    /// After it, the connection may no longer `SELECT` (it became the confined data user,
    /// which has no `SELECT`, so its scripts cannot leave their database): [`Login::in_db`]
    /// puts its `SELECT` before the first such step.
    pub confines: bool,
}

impl Login {
    /// No login: the connection acts as Redis's `default` user.
    pub fn none() -> Self {
        Self {
            id: 0,
            steps: Arc::from(Vec::new()),
        }
    }

    /// The same login, then `SELECT db` at connect (`db` a backend database number): its
    /// connections serve that database, and are never shared with another database's.
    pub fn in_db(&self, db: u32) -> Login {
        if db == 0 {
            return self.clone();
        }
        let n = db.to_string();
        let select = LoginStep {
            request: tessera_resp::encode_request(2, [&b"SELECT"[..], n.as_bytes()], 6 + n.len()),
            what: "SELECT of the client's database (backends need `databases` ≥ the clients' + 1)",
            accept: is_ok,
            confines: false,
        };
        // Any id other than the database 0 login's, the same for every connection of it.
        let id = (self.id ^ u64::from(db).wrapping_mul(0x9E37_79B9_7F4A_7C15)).rotate_left(17) | 1;
        self.with_step(select, id)
    }

    /// The same login with `step` run while the connection still has the rights it logs in
    /// with (before the step that confines it to the data user, or last), as login `id`.
    pub fn with_step(&self, step: LoginStep, id: u64) -> Login {
        let mut steps = self.steps.to_vec();
        let at = steps.iter().position(|s| s.confines).unwrap_or(steps.len());
        steps.insert(at, step);
        Login {
            id,
            steps: Arc::from(steps),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(what: &'static str, confines: bool) -> LoginStep {
        LoginStep {
            request: Bytes::from_static(b"*1\r\n$4\r\nAUTH\r\n"),
            what,
            accept: is_ok,
            confines,
        }
    }

    #[test]
    fn a_database_is_selected_where_the_login_says_and_gets_its_own_id() {
        let l = Login {
            id: 7,
            steps: Arc::from(vec![auth("control", false), auth("data", true)]),
        };
        assert_eq!(l.in_db(0).id, 7);
        let d3 = l.in_db(3);
        let whats: Vec<&str> = d3.steps.iter().map(|s| s.what).collect();
        assert_eq!(whats[0], "control");
        assert!(whats[1].starts_with("SELECT"), "{whats:?}");
        assert_eq!(whats[2], "data");
        assert_eq!(
            &d3.steps[1].request[..],
            b"*2\r\n$6\r\nSELECT\r\n$1\r\n3\r\n"
        );
        let ids: std::collections::HashSet<u64> = (0..64).map(|db| l.in_db(db).id).collect();
        assert_eq!(ids.len(), 64);
        assert_eq!(l.in_db(3).id, d3.id);
        assert_eq!(Login::none().in_db(2).steps.len(), 1);
        assert_ne!(Login::none().in_db(2).id, 0);
    }
}
