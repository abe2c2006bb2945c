//! `tessera admin token ...`: the cluster's API tokens (docs/api.md, "Tokens"), each with a
//! name and a role. Only sends the calls and renders the answers; the rules are the
//! dashboard's.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Reply, Table, text};
use tessera_wire::access::Role;

/// `tessera admin token ...`
#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// The tokens: name, role, when and by whom each was made (never a secret).
    List,
    /// Make a token; its secret is printed this once.
    Create {
        /// Letters, digits, '.', '_' and '-', at most 64.
        name: String,
        /// viewer (reads), operator (+ migrations, rebalances, plugins) or admin (everything).
        #[arg(long)]
        role: Role,
    },
    /// Revoke a token: calls with it are refused from now on.
    Revoke { name: String },
    /// The token this command runs with: its name and role.
    Whoami,
}

pub(super) async fn run(c: &Client, cmd: TokenCmd) -> anyhow::Result<Reply> {
    match cmd {
        TokenCmd::List => {
            let v = c.call(Method::GET, &["api", "tokens"], None).await?;
            let human = render_tokens(v.as_array().map_or(&[], Vec::as_slice));
            Ok(Reply { json: v, human })
        }
        TokenCmd::Create { name, role } => {
            let body = json!({ "name": name, "role": role });
            let v = c.call(Method::POST, &["api", "tokens"], Some(body)).await?;
            let human = format!(
                "created token {name} ({})\n{}\n(shown this once: the dashboard keeps only an HMAC of it)\n",
                text(&v["role"]),
                text(&v["token"])
            );
            Ok(Reply { json: v, human })
        }
        TokenCmd::Revoke { name } => {
            let v = c
                .call(Method::DELETE, &["api", "tokens", &name], None)
                .await?;
            Ok(Reply {
                json: v,
                human: format!("revoked token {name}\n"),
            })
        }
        TokenCmd::Whoami => {
            let v = c.call(Method::GET, &["api", "whoami"], None).await?;
            let human = format!("token {} ({})\n", text(&v["token"]), text(&v["role"]));
            Ok(Reply { json: v, human })
        }
    }
}

fn render_tokens(tokens: &[Value]) -> String {
    let mut t = Table::new(&["NAME", "ROLE", "CREATED", "BY"]);
    for tok in tokens {
        t.row(vec![
            text(&tok["name"]),
            text(&tok["role"]),
            super::uptime(&tok["created_unix"]) + " ago",
            text(&tok["created_by"]),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_render_without_secrets() {
        let out = render_tokens(&[
            json!({"name": "ci", "role": "viewer", "created_unix": 0, "created_by": "admin"}),
        ]);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], ["NAME", "ROLE", "CREATED", "BY"]);
        assert_eq!(lines[1][..2], ["ci", "viewer"]);
        assert_eq!(lines[1].last(), Some(&"admin"));
    }
}
