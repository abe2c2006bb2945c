//! `tessera admin token ...`: the cluster's API tokens (docs/api.md, "Tokens"), each with a
//! name and a role. Only sends the calls and renders the answers; the rules are the
//! dashboard's.

use clap::Subcommand;
use reqwest::Method;

use super::Reply;
use super::client::{Client, NOTHING, Send};
use super::table::{Table, uptime};
use tessera_wire::Empty;
use tessera_wire::access::Role;
use tessera_wire::tokens::{CreateToken, CreatedToken, TokenView, WhoAmI};

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
            let v: Vec<TokenView> = c.get(&["api", "tokens"]).await?;
            Reply::new(&v, render_tokens(&v))
        }
        TokenCmd::Create { name, role } => {
            let body = CreateToken {
                name: name.clone(),
                role,
            };
            let v: CreatedToken = c
                .call(Method::POST, &["api", "tokens"], Send::Json(&body))
                .await?;
            let human = format!(
                "created token {name} ({})\n{}\n(shown this once: the dashboard keeps only an HMAC of it)\n",
                v.role, v.token
            );
            Reply::new(&v, human)
        }
        TokenCmd::Revoke { name } => {
            let v: Empty = c
                .call(Method::DELETE, &["api", "tokens", &name], NOTHING)
                .await?;
            Reply::new(&v, format!("revoked token {name}\n"))
        }
        TokenCmd::Whoami => {
            let v: WhoAmI = c.get(&["api", "whoami"]).await?;
            let human = format!("token {} ({})\n", v.token, v.role);
            Reply::new(&v, human)
        }
    }
}

fn render_tokens(tokens: &[TokenView]) -> String {
    let mut t = Table::new(&["NAME", "ROLE", "CREATED", "BY"]);
    for tok in tokens {
        t.row(vec![
            tok.name.clone(),
            tok.role.to_string(),
            uptime(tok.created_unix) + " ago",
            tok.created_by.clone(),
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_render_without_secrets() {
        let out = render_tokens(&[serde_json::from_value(serde_json::json!(
            {"name": "ci", "role": "viewer", "created_unix": 0, "created_by": "admin"}
        ))
        .unwrap()]);
        let lines: Vec<Vec<&str>> = out
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(lines[0], ["NAME", "ROLE", "CREATED", "BY"]);
        assert_eq!(lines[1][..2], ["ci", "viewer"]);
        assert_eq!(lines[1].last(), Some(&"admin"));
    }
}
