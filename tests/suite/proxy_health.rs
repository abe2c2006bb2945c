//! Proxy health as the dashboard, the console and the CLI show it, with real processes: a
//! proxy frozen by SIGSTOP shows as lost (and the overview counts it so, not "1/1 proxies
//! up"), stays listed after its registration lapses, comes back up after SIGCONT; a proxy
//! that is gone for good is removed by an operator, and one that answers cannot be.

use std::time::Duration;

use tessera_wire::cluster::{Overview, ProxyHealthState, ProxyView};

use crate::migration::wait_for;
use crate::support::{ClusterProxy, Console, ConsoleSetup, ControlPlane, TOKEN, cli_stdout};

fn proxies(cp: &ControlPlane) -> Vec<ProxyView> {
    cp.api().get("/api/proxies").ok_as()
}

fn proxy(cp: &ControlPlane, token: &str) -> Option<ProxyView> {
    proxies(cp).into_iter().find(|p| p.token == token)
}

fn overview(cp: &ControlPlane) -> Overview {
    cp.api().get("/api/overview").ok_as()
}

/// SIGCONTs the proxy when dropped, so a failed assertion never leaves it stopped.
struct Frozen<'a>(&'a ClusterProxy);

impl<'a> Frozen<'a> {
    fn freeze(p: &'a ClusterProxy) -> Self {
        p.signal("-STOP");
        Frozen(p)
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        self.0.signal("-CONT");
    }
}

#[test]
fn a_frozen_proxy_shows_as_lost_stays_listed_and_comes_back_and_a_gone_one_is_removed() {
    let mut cp = ControlPlane::builder().servers(1).proxies(2).start();
    cp.group(1, &[0]);
    cp.assign(0, 1023, 1);
    let (t0, t1) = (
        cp.proxies[0].info().token.clone(),
        cp.proxies[1].info().token.clone(),
    );
    wait_for("both proxies up", Duration::from_secs(20), || {
        proxies(&cp)
            .iter()
            .filter(|p| p.health == ProxyHealthState::Up)
            .count()
            == 2
    });
    let o = overview(&cp);
    assert_eq!((o.proxies, o.proxies_online, o.proxies_lost), (2, 2, 0));

    {
        let _frozen = Frozen::freeze(&cp.proxies[0]);
        // Not answering its health check: lost, at once, while still registered.
        wait_for(
            "the frozen proxy to show as lost",
            Duration::from_secs(20),
            || proxy(&cp, &t0).is_some_and(|p| p.health == ProxyHealthState::Lost && !p.up),
        );
        // Why, in an operator's words, while it is still registered: a frozen process does
        // not answer (the kernel takes the connection, no reply comes).
        let mut seen = None;
        let said = crate::support::wait_until(Duration::from_secs(10), || {
            seen = proxy(&cp, &t0);
            seen.as_ref().is_some_and(|p| {
                p.error.as_deref().is_some_and(|why| {
                    why.contains("did not answer within 1 s") && why.contains("frozen")
                })
            })
        });
        assert!(said, "{seen:?}");
        let o = overview(&cp);
        assert_eq!(
            (o.proxies, o.proxies_online, o.proxies_lost),
            (2, 1, 1),
            "the overview counts the frozen proxy as lost: {o:?}"
        );
        // Past its lease its registration is gone; it stays listed, as lost.
        wait_for(
            "the frozen proxy's registration to lapse",
            Duration::from_secs(30),
            || proxy(&cp, &t0).is_some_and(|p| !p.registered),
        );
        let p = proxy(&cp, &t0).expect("a lost proxy stays listed");
        assert_eq!(p.health, ProxyHealthState::Lost, "{p:?}");
        assert!(p.error.is_some(), "it says why: {p:?}");

        // The console's cluster list carries the same overview.
        let console = Console::start(&ConsoleSetup {
            stores: vec![cp.options().store.clone()],
            users: vec![("ada".into(), "a long enough password".into())],
            tokens: vec![(cp.options().cluster.clone(), TOKEN.into())],
            ..ConsoleSetup::default()
        });
        let c = console.login("ada", "a long enough password");
        let clusters = c.get("/api/clusters").ok();
        let ov = &clusters[0]["overview"];
        assert_eq!(ov["proxies_lost"], 1, "{clusters}");
        assert_eq!(ov["proxies_online"], 1, "{clusters}");

        // A proxy that answers is not removed.
        let msg = cp
            .api()
            .delete(&format!("/api/proxies/{t1}"))
            .expect_error(409, "conflict");
        assert!(msg.contains("only a lost proxy is removed"), "{msg}");
    }

    // SIGCONT: it fences itself, registers again and is up.
    wait_for(
        "the thawed proxy to be up again",
        Duration::from_secs(40),
        || proxy(&cp, &t0).is_some_and(|p| p.health == ProxyHealthState::Up && p.registered),
    );
    assert_eq!(overview(&cp).proxies_lost, 0);

    // Gone for good: lost until an operator removes it (by address, through the CLI).
    let addr = cp.proxies[0].addr().to_string();
    cp.proxies[0].kill();
    wait_for(
        "the killed proxy to show as lost",
        Duration::from_secs(20),
        || proxy(&cp, &t0).is_some_and(|p| p.health == ProxyHealthState::Lost),
    );
    let out = cli_stdout(
        &cp.admin_cli(TOKEN, &["proxy", "remove", &addr]),
        "proxy remove ADDR",
    );
    assert!(
        out.starts_with(&format!("proxy {addr} removed (it was lost)")),
        "{out}"
    );
    assert!(proxy(&cp, &t0).is_none(), "{:?}", proxies(&cp));
    let o = overview(&cp);
    assert_eq!((o.proxies, o.proxies_online, o.proxies_lost), (1, 1, 0));
}
