//! `tessera admin routes [list|add|remove]`: the key prefixes this cluster's proxies route to
//! other clusters (docs/prefix-routes.md), and where each proxy sends each one now. A change
//! sends the whole list (the routes read back, changed), as the API takes it. Only sends the
//! calls and renders the answers.

use clap::Subcommand;
use reqwest::Method;

use super::Reply;
use super::client::{Client, Send};
use super::table::{Table, opt};
use tessera_wire::routes::{RouteChange, RoutesChange, RoutesView};

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
    let now: RoutesView = c.get(&path).await?;
    let v: RoutesView = match cmd.unwrap_or(RoutesCmd::List) {
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
            routes.push(RouteChange {
                prefix,
                cluster,
                password: user.as_ref().and(password),
                user,
            });
            let body = RoutesChange { routes };
            c.call(Method::PUT, &path, Send::Json(&body)).await?
        }
        RoutesCmd::Remove { prefix } => {
            let routes = kept(&now, |p| p != prefix);
            if routes.len() == now.routes.len() {
                anyhow::bail!("no route for prefix {prefix:?}");
            }
            let body = RoutesChange { routes };
            c.call(Method::PUT, &path, Send::Json(&body)).await?
        }
    };
    Reply::new(&v, render(&v))
}

/// The routes of a view whose prefix passes `keep`, as a change sends them again (a user
/// without its password: the dashboard keeps the one it has).
fn kept(view: &RoutesView, keep: impl Fn(&str) -> bool) -> Vec<RouteChange> {
    view.routes
        .iter()
        .filter(|r| keep(&r.prefix))
        .map(|r| RouteChange {
            prefix: r.prefix.clone(),
            cluster: r.cluster.clone(),
            user: r.user.clone(),
            password: None,
        })
        .collect()
}

fn render(v: &RoutesView) -> String {
    if v.routes.is_empty() {
        return "no key prefix is routed to another cluster\n".into();
    }
    let mut t = Table::new(&["PREFIX", "CLUSTER", "USER", "PROXY", "TARGET"]);
    for r in &v.routes {
        let user = opt(r.user.as_ref());
        if v.proxies.is_empty() {
            t.row(vec![
                r.prefix.clone(),
                r.cluster.clone(),
                user.clone(),
                "-".into(),
                "-".into(),
            ]);
        }
        for p in &v.proxies {
            let seen = p.routes.iter().find(|s| s.prefix == r.prefix);
            let target = match (&p.error, seen) {
                (Some(e), _) => format!("not answering: {e}"),
                (None, Some(s)) => match &s.target {
                    Some(t) => t.clone(),
                    None => format!("none: {}", opt(s.error.as_ref())),
                },
                (None, None) => "not routing it yet".into(),
            };
            t.row(vec![
                r.prefix.clone(),
                r.cluster.clone(),
                user.clone(),
                p.addr.clone(),
                target,
            ]);
        }
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shows_each_proxys_target_and_resends_routes_without_passwords() {
        let v: RoutesView = serde_json::from_value(json!({
            "routes": [{"prefix": "user:", "cluster": "b", "user": "front"},
                       {"prefix": "order:", "cluster": "c", "user": null}],
            "clusters": ["b", "c"],
            "proxies": [
                {"addr": "p:1", "error": null, "routes": [
                    {"prefix": "user:", "cluster": "b", "target": "b:1", "error": null},
                    {"prefix": "order:", "cluster": "c", "target": null, "error": "cluster c has no proxy online"}]},
                {"addr": "p:2", "error": "timed out", "routes": []}],
        }))
        .unwrap();
        let out = render(&v);
        assert!(out.contains("b:1"), "{out}");
        assert!(out.contains("none: cluster c has no proxy online"), "{out}");
        assert!(out.contains("not answering: timed out"), "{out}");
        let kept = kept(&v, |p| p != "order:");
        assert_eq!(
            serde_json::to_value(&kept).unwrap(),
            json!([{"prefix": "user:", "cluster": "b", "user": "front"}])
        );
        let empty: RoutesView =
            serde_json::from_value(json!({"routes": [], "clusters": [], "proxies": []})).unwrap();
        assert!(render(&empty).contains("no key prefix"));
    }
}
