//! Fencing at the servers: before the dashboard moves on without a proxy whose registration
//! lapsed, it kills that proxy's backend connections on every server, so that nothing the
//! proxy wrote before a freeze and nothing it writes when it wakes reaches a slot's old owner.

use std::collections::HashSet;

use futures_util::future::join_all;
use tracing::{info, warn};

use super::Dashboard;
use super::admin_user;
use super::ops::REDIS_TIMEOUT;
use tessera_model::fence::proxy_named_in;
use tessera_model::redis_client::Value;

impl Dashboard {
    /// Kills, on every server of every group, the connections named after one of `tokens`'
    /// proxies (`tessera_model::fence::backend_connection_name`).
    ///
    /// A server that cannot be reached or refuses is logged and passed over: a proxy cut off
    /// from a server writes nothing to it either, and a dead master must not hold the push
    /// that replaces it. The proxy's own clock fence still stands there.
    pub(super) async fn close_connections_of(&self, tokens: &HashSet<String>) {
        let servers = self.all_servers();
        let done = join_all(servers.iter().map(|a| self.kill_named(a, tokens))).await;
        for (addr, r) in servers.iter().zip(done) {
            match r {
                Ok(0) => {}
                Ok(n) => {
                    info!(server = %addr, proxies = ?tokens, connections = n, "closed the backend connections of proxies whose registration lapsed")
                }
                Err(e) => {
                    warn!(server = %addr, proxies = ?tokens, error = %e, "could not close the backend connections of proxies whose registration lapsed")
                }
            }
        }
    }

    /// `CLIENT LIST`, then `CLIENT KILL ID` for each connection `tokens` named; how many
    /// were killed.
    async fn kill_named(&self, addr: &str, tokens: &HashSet<String>) -> Result<usize, String> {
        let mut c = admin_user::connect(addr, &self.backend_admin, REDIS_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let list = match c.cmd(&["CLIENT", "LIST", "TYPE", "normal"]).await {
            Ok(Value::Bulk(b)) => b,
            Ok(other) => return Err(format!("CLIENT LIST answered {other:?}")),
            Err(e) => return Err(e.to_string()),
        };
        let ids = named_by(&String::from_utf8_lossy(&list), tokens);
        if ids.is_empty() {
            return Ok(0);
        }
        let cmds: Vec<Vec<&[u8]>> = ids
            .iter()
            .map(|id| vec![&b"CLIENT"[..], b"KILL", b"ID", id.as_bytes()])
            .collect();
        let replies = c.pipeline(&cmds).await.map_err(|e| e.to_string())?;
        Ok(replies.iter().filter(|r| **r == Value::Int(1)).count())
    }
}

/// The ids of the connections in a `CLIENT LIST` text whose name one of `tokens`' proxies
/// gave them.
fn named_by(list: &str, tokens: &HashSet<String>) -> Vec<String> {
    list.lines()
        .filter_map(|line| {
            let field = |key: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(key).and_then(|f| f.strip_prefix('=')))
            };
            let token = proxy_named_in(field("name")?)?;
            tokens
                .contains(token)
                .then(|| field("id").map(str::to_owned))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lapsed_proxies_connections_are_picked() {
        let list = "id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name=tessera-proxy-aa age=9 cmd=incr\n\
                    id=4 addr=127.0.0.1:5001 laddr=127.0.0.1:6379 fd=9 name=tessera-proxy-bb age=9 cmd=get\n\
                    id=5 addr=127.0.0.1:5002 laddr=127.0.0.1:6379 fd=10 name= age=1 cmd=client|list\n\
                    id=6 addr=127.0.0.1:5003 laddr=127.0.0.1:6379 fd=11 name=tessera-proxy-aa age=2 cmd=blpop\n";
        let tokens: HashSet<String> = ["aa".to_string()].into();
        assert_eq!(named_by(list, &tokens), ["3", "6"]);
        assert!(named_by(list, &HashSet::new()).is_empty());
    }
}
