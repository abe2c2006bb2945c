//! `tessera admin user ...`: the users clients AUTH to the cluster's proxies as
//! (docs/users.md). Only sends the calls and renders the answers; passwords are hashed by the
//! dashboard and never shown.

use clap::Subcommand;
use reqwest::Method;

use super::client::{Client, NOTHING, Send};
use super::table::{Table, opt, yes_no};
use super::{Reply, password_arg};
use tessera_wire::Empty;
use tessera_wire::users::{UserChange, UserView};

/// `tessera admin user ...`
#[derive(Subcommand, Debug)]
pub enum UserCmd {
    /// The users, with their classes, key prefix and state (never a password).
    List,
    /// Create or change a user; what is left out keeps its value. A new user needs a password.
    Set {
        /// User name (printable ASCII, no spaces); `default` configures the default user.
        name: String,
        /// The password. Shells and `ps` can show it: prefer --password-stdin.
        #[arg(long, conflicts_with = "password_stdin")]
        password: Option<String>,
        /// Read the password from the first line of stdin.
        #[arg(long)]
        password_stdin: bool,
        /// Command classes the user may use, comma-separated: read, write, admin, pubsub,
        /// scripting, transaction, blocking, dangerous, keyspace; `all` for every command.
        #[arg(long, value_delimiter = ',')]
        commands: Option<Vec<String>>,
        /// Every key the user names must start with this; "" for any key.
        #[arg(long)]
        key_prefix: Option<String>,
        /// The client databases the user may use, comma-separated numbers; `all` for every
        /// one (as Valkey 9.1's `db=`).
        #[arg(long, value_delimiter = ',')]
        databases: Option<Vec<String>>,
        /// Refuse the user's AUTH (the entry stays).
        #[arg(long, conflicts_with = "enable")]
        disable: bool,
        /// Accept the user's AUTH again.
        #[arg(long)]
        enable: bool,
    },
    /// Remove a user from the cluster.
    Remove { name: String },
}

/// The body of `PUT /api/users/{name}` for `user set`'s options.
fn user_change(
    password: Option<String>,
    commands: Option<Vec<String>>,
    key_prefix: Option<String>,
    databases: Option<Vec<String>>,
    enabled: Option<bool>,
) -> anyhow::Result<UserChange> {
    // `all`: every database, sent as null.
    let databases = match databases {
        Some(d) if d.len() == 1 && d[0].trim().eq_ignore_ascii_case("all") => Some(None),
        Some(d) => Some(Some(
            d.iter()
                .filter(|s| !s.trim().is_empty())
                .map(|s| {
                    s.trim()
                        .parse::<u32>()
                        .map_err(|_| anyhow::anyhow!("--databases: {s:?} is not a database number"))
                })
                .collect::<anyhow::Result<Vec<u32>>>()?,
        )),
        None => None,
    };
    Ok(UserChange {
        password,
        password_hash: None,
        // `all`: every command, sent as null.
        commands: commands.map(|c| {
            let c: Vec<String> = c.into_iter().filter(|c| !c.trim().is_empty()).collect();
            (!(c.len() == 1 && c[0].eq_ignore_ascii_case("all"))).then_some(c)
        }),
        // "": no prefix, sent as null.
        key_prefix: key_prefix.map(|k| (!k.is_empty()).then_some(k)),
        databases,
        enabled,
    })
}

pub(super) async fn run(c: &Client, cmd: UserCmd) -> anyhow::Result<Reply> {
    match cmd {
        UserCmd::List => {
            let v: Vec<UserView> = c.get(&["api", "users"]).await?;
            Reply::new(&v, render_users(&v))
        }
        UserCmd::Set {
            name,
            password,
            password_stdin,
            commands,
            key_prefix,
            databases,
            disable,
            enable,
        } => {
            let password = password_arg(password, password_stdin)?;
            let enabled = (disable || enable).then_some(enable);
            let body = user_change(password, commands, key_prefix, databases, enabled)?;
            let v: UserView = c
                .call(Method::PUT, &["api", "users", &name], Send::Json(&body))
                .await?;
            let human = format!(
                "user {name} set\n\n{}",
                render_users(std::slice::from_ref(&v))
            );
            Reply::new(&v, human)
        }
        UserCmd::Remove { name } => {
            let v: Empty = c
                .call(Method::DELETE, &["api", "users", &name], NOTHING)
                .await?;
            Reply::new(&v, format!("removed user {name}\n"))
        }
    }
}

fn render_users(users: &[UserView]) -> String {
    let mut t = Table::new(&[
        "NAME",
        "ENABLED",
        "PASSWORD",
        "COMMANDS",
        "KEY PREFIX",
        "DATABASES",
    ]);
    for u in users {
        let commands = match &u.commands {
            Some(c) if c.is_empty() => "(none)".to_owned(),
            Some(c) => c.join(","),
            None => "all".to_owned(),
        };
        t.row(vec![
            u.name.clone(),
            yes_no(u.enabled),
            if u.password_set { "set" } else { "-" }.to_owned(),
            commands,
            opt(u.key_prefix.as_ref()),
            match &u.databases {
                Some(d) => d.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                None => "all".to_owned(),
            },
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    use crate::admin::AdminCmd;
    use crate::admin::tests::Cli;

    #[test]
    fn user_set_sends_only_what_was_given() {
        let body = |c: anyhow::Result<UserChange>| serde_json::to_value(c.unwrap()).unwrap();
        assert_eq!(body(user_change(None, None, None, None, None)), json!({}));
        assert_eq!(
            body(user_change(
                Some("pw".into()),
                Some(vec!["read".into(), "write".into()]),
                Some("t:".into()),
                Some(vec!["2".into(), "0".into()]),
                Some(false)
            )),
            json!({"password": "pw", "commands": ["read", "write"], "key_prefix": "t:", "databases": [2, 0], "enabled": false})
        );
        assert_eq!(
            body(user_change(
                None,
                Some(vec!["all".into()]),
                Some(String::new()),
                Some(vec!["all".into()]),
                None
            )),
            json!({"commands": null, "key_prefix": null, "databases": null})
        );
        assert_eq!(
            body(user_change(
                None,
                Some(vec![String::new()]),
                None,
                None,
                None
            )),
            json!({"commands": []})
        );
        assert!(user_change(None, None, None, Some(vec!["x".into()]), None).is_err());
        let cli = Cli::try_parse_from([
            "admin",
            "user",
            "set",
            "alice",
            "--commands",
            "read,write",
            "--disable",
        ])
        .unwrap();
        assert!(matches!(
            cli.admin.command,
            AdminCmd::User(UserCmd::Set { disable: true, enable: false, commands: Some(c), .. }) if c == ["read", "write"]
        ));
        assert!(
            Cli::try_parse_from(["admin", "user", "set", "a", "--disable", "--enable"]).is_err()
        );
    }

    #[test]
    fn users_render_without_passwords() {
        let users: Vec<UserView> = serde_json::from_value(json!([
            {"name": "alice", "enabled": true, "password_set": true, "commands": ["read"], "key_prefix": "t:", "databases": [0, 2]},
            {"name": "default", "enabled": false, "password_set": false},
        ]))
        .unwrap();
        let out = render_users(&users);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            [
                "NAME",
                "ENABLED",
                "PASSWORD",
                "COMMANDS",
                "KEY",
                "PREFIX",
                "DATABASES"
            ]
        );
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["alice", "yes", "set", "read", "t:", "0,2"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["default", "no", "-", "all", "-", "all"]
        );
    }
}
