//! Secrets at rest and forged pushes: the fs store's directory and files are readable by
//! their owner only (the cluster meta holds the proxies' shared secret), also when an older
//! version left them open; and a proxy refuses a pushed topology whose epoch jumps far past
//! the one in force (a push of epoch `u64::MAX` would make every real one stale).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera_wire::cluster::{ProxyStatsEntry, ProxyView, Stats};
use tessera_wire::plugins::ProxyPlugins;
use tessera_wire::topology::Topology;

use crate::support::{ControlPlane, wait_until};

/// The mode bits (permissions) of `path`.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Everything under `dir` (files and directories), `dir` first.
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_owned()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() {
            let entries: Vec<PathBuf> = std::fs::read_dir(&out[i])
                .expect("reading a store dir")
                .flatten()
                .map(|e| e.path())
                .collect();
            out.extend(entries);
        }
        i += 1;
    }
    out
}

fn store_root(cp: &ControlPlane) -> PathBuf {
    PathBuf::from(
        cp.options()
            .store
            .strip_prefix("fs://")
            .expect("an fs store"),
    )
}

#[test]
fn the_fs_store_is_readable_by_its_owner_only() {
    let cp = ControlPlane::builder().servers(1).proxies(1).start();
    cp.group(1, &[0]);
    cp.assign(0, 1023, 1);
    let root = store_root(&cp);
    let all = tree(&root);
    assert!(all.len() > 3, "the store holds the cluster: {all:?}");
    assert!(
        !cp.proxy_secret().is_empty(),
        "the meta this protects holds the proxy secret"
    );
    for p in &all {
        let m = mode(p);
        assert_eq!(
            m & 0o077,
            0,
            "{} is mode {m:o}: group or others can read it",
            p.display()
        );
    }
    assert_eq!(mode(&root), 0o700);
}

#[test]
fn an_open_store_directory_from_before_is_closed_when_opened() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("store");
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cp = ControlPlane::builder()
        .store(&format!("fs://{}", root.display()))
        .start();
    assert_eq!(
        mode(&root),
        0o700,
        "the dashboard closed the store's directory"
    );
    drop(cp);
}

#[test]
fn a_proxy_refuses_a_topology_whose_epoch_jumps_and_keeps_taking_real_ones() {
    let cp = ControlPlane::builder().servers(1).proxies(1).start();
    cp.group(1, &[0]);
    let epoch = cp.assign(0, 511, 1);
    let proxy = &cp.proxies[0];
    assert!(
        wait_until(Duration::from_secs(10), || proxy.epoch() == epoch),
        "the proxy took epoch {epoch}"
    );
    let admin = proxy.admin().with_token(&cp.proxy_secret());
    let mut forged: Topology = admin.get("/api/proxy/topology").ok_as();
    forged.epoch = u64::MAX;
    let forged = serde_json::to_vec(&forged).expect("a topology serializes");
    let msg = admin
        .request("PUT", "/api/proxy/topology", Some(&forged))
        .expect_error(409, "conflict");
    assert!(
        msg.contains("implausible") && msg.contains(&epoch.to_string()),
        "{msg}"
    );
    assert_eq!(proxy.epoch(), epoch, "the forged table is not in force");
    assert!(
        proxy.log().contains("epoch jumps implausibly"),
        "the proxy says so in its log"
    );
    // The dashboard's next change still reaches it.
    let next = cp.assign(512, 1023, 1);
    assert!(next > epoch);
    assert!(
        wait_until(Duration::from_secs(10), || proxy.epoch() == next),
        "the proxy took epoch {next} after refusing the forged one"
    );
}

#[test]
fn a_cluster_proxys_admin_api_answers_reads_only_with_the_proxy_secret() {
    let cp = ControlPlane::builder().servers(1).proxies(1).start();
    cp.group(1, &[0]);
    cp.assign(0, 1023, 1);
    let proxy = &cp.proxies[0];
    let stranger = proxy.admin().without_token();
    let wrong = proxy.admin().with_token("not-the-secret");
    for path in [
        "/api/proxy/info",
        "/api/proxy/stats",
        "/api/proxy/topology",
        "/api/proxy/plugins",
        "/api/proxy/plugins/filter/metrics",
        "/api/proxy/users",
    ] {
        stranger.get(path).expect_error(401, "unauthorized");
        wrong.get(path).expect_error(401, "unauthorized");
    }
    let secret = proxy.admin();
    secret.get("/api/proxy/topology").ok_as::<Topology>();
    secret.get("/api/proxy/plugins").ok_as::<ProxyPlugins>();
    // Load balancers and Prometheus need no secret.
    assert_eq!(stranger.get("/health").status, 200);
    assert_eq!(stranger.get("/metrics").status, 200);
    // The dashboard's reads of its proxies carry the secret: its health check sees the
    // proxy up, and its stats reach it.
    let up = || cp.api().get("/api/proxies").ok_as::<Vec<ProxyView>>()[0].up;
    assert!(
        wait_until(Duration::from_secs(10), up),
        "the dashboard's health check reads the proxy: {}",
        cp.api().get("/api/proxies").body
    );
    let stats: Stats = cp.api().get("/api/stats").ok_as();
    assert!(
        matches!(stats.proxies[0], ProxyStatsEntry::Answered(_)),
        "{stats:?}"
    );
}
