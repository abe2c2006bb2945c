//! `tessera admin routes [list|add|remove]`: the key prefixes this cluster's proxies route to
//! other clusters (docs/prefix-routes.md), and where each proxy sends each one now. A change
//! sends the whole list (the routes read back, changed), as the API takes it. Only sends the
//! calls and renders the answers.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

use super::{Client, Reply, Table, text};

#[derive(Subcommand, Debug)]
pub enum RoutesCmd {
    /// The routes, and each proxy's target for each (the default).
    List,
    /// Route keys starting with PREFIX to CLUSTER (another cluster in the same store).
    Add {
        /// Keys starting with these bytes (e.g. `user:`).
        prefix: String,
        /// The cluster they go to.
        cluster: String,
        /// The user this cluster's proxies log in as at the other cluster's proxies.
        #[arg(long)]
        user: Option<String>,
        /// That user's password. Shells and `ps` can show it: prefer --password-stdin.
        #[arg(long, conflicts_with = "password_stdin", requires = "user")]
        password: Option<String>,
        /// Read the password from the first line of stdin.
        #[arg(long, requires = "user")]
        password_stdin: bool,
    },
    /// Stop routing PREFIX: its keys are this cluster's again.
    Remove {
        /// The prefix as it was added.
        prefix: String,
    },
}

pub(super) async fn run(c: &Client, cmd: Option<RoutesCmd>) -> anyhow::Result<Reply> {
    let path = ["api", "routes"];
    let now = c.call(Method::GET, &path, None).await?;
    let v = match cmd.unwrap_or(RoutesCmd::List) {
        RoutesCmd::List => now,
        RoutesCmd::Add {
            prefix,
            cluster,
            user,
            password,
            password_stdin,
        } => {
            let password = super::password_arg(password, password_stdin)?;
            if user.is_some() && password.is_none() {
                anyhow::bail!("--user needs --password or --password-stdin");
            }
            let mut routes = kept(&now, |p| p != prefix);
            let mut route = json!({"prefix": prefix, "cluster": cluster});
            if let Some(u) = user {
                route["user"] = json!(u);
                route["password"] = json!(password);
            }
            routes.push(route);
            c.call(Method::PUT, &path, Some(json!({ "routes": routes })))
                .await?
        }
        RoutesCmd::Remove { prefix } => {
            let routes = kept(&now, |p| p != prefix);
            if routes.len() == now["routes"].as_array().map_or(0, Vec::len) {
                anyhow::bail!("no route for prefix {prefix:?}");
            }
            c.call(Method::PUT, &path, Some(json!({ "routes": routes })))
                .await?
        }
    };
    Ok(Reply {
        human: render(&v),
        json: v,
    })
}

/// The routes of a view whose prefix passes `keep`, as a change sends them again (a user
/// without its password: the dashboard keeps the one it has).
fn kept(view: &Value, keep: impl Fn(&str) -> bool) -> Vec<Value> {
    let routes = view["routes"].as_array().map_or(&[][..], Vec::as_slice);
    routes
        .iter()
        .filter(|r| keep(r["prefix"].as_str().unwrap_or_default()))
        .map(|r| {
            let mut out = json!({"prefix": r["prefix"], "cluster": r["cluster"]});
            if r["user"].is_string() {
                out["user"] = r["user"].clone();
            }
            out
        })
        .collect()
}

fn render(v: &Value) -> String {
    let routes = v["routes"].as_array().map_or(&[][..], Vec::as_slice);
    if routes.is_empty() {
        return "no key prefix is routed to another cluster\n".into();
    }
    let proxies = v["proxies"].as_array().map_or(&[][..], Vec::as_slice);
    let mut t = Table::new(&["PREFIX", "CLUSTER", "USER", "PROXY", "TARGET"]);
    for r in routes {
        let prefix = r["prefix"].as_str().unwrap_or_default();
        let user = r["user"].as_str().unwrap_or("-").to_string();
        if proxies.is_empty() {
            t.row(vec![
                text(&r["prefix"]),
                text(&r["cluster"]),
                user.clone(),
                "-".into(),
                "-".into(),
            ]);
        }
        for p in proxies {
            let seen = p["routes"]
                .as_array()
                .and_then(|rs| rs.iter().find(|s| s["prefix"] == prefix));
            let target = match (p["error"].as_str(), seen) {
                (Some(e), _) => format!("not answering: {e}"),
                (None, Some(s)) if s["target"].is_string() => text(&s["target"]),
                (None, Some(s)) => format!("none: {}", text(&s["error"])),
                (None, None) => "not routing it yet".into(),
            };
            t.row(vec![
                text(&r["prefix"]),
                text(&r["cluster"]),
                user.clone(),
                text(&p["addr"]),
                target,
            ]);
        }
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_each_proxys_target_and_resends_routes_without_passwords() {
        let v = json!({
            "routes": [{"prefix": "user:", "cluster": "b", "user": "front"},
                       {"prefix": "order:", "cluster": "c", "user": null}],
            "clusters": ["b", "c"],
            "proxies": [
                {"addr": "p:1", "error": null, "routes": [
                    {"prefix": "user:", "cluster": "b", "target": "b:1", "error": null},
                    {"prefix": "order:", "cluster": "c", "target": null, "error": "cluster c has no proxy online"}]},
                {"addr": "p:2", "error": "timed out", "routes": []}],
        });
        let out = render(&v);
        assert!(out.contains("b:1"), "{out}");
        assert!(out.contains("none: cluster c has no proxy online"), "{out}");
        assert!(out.contains("not answering: timed out"), "{out}");
        let kept = kept(&v, |p| p != "order:");
        assert_eq!(
            kept,
            vec![json!({"prefix": "user:", "cluster": "b", "user": "front"})]
        );
        assert!(render(&json!({"routes": []})).contains("no key prefix"));
    }
}
