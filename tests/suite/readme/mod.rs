//! README.md's command lines, run as written against real processes so that they cannot rot:
//! the quickstart's against a `tessera up`, the operator tour's against a real etcd,
//! redis-servers and the dashboard and proxy its own lines start, the plugin authors' tour
//! through `tools/new-plugin.sh` into a static proxy and the local cluster. The README's example
//! addresses map to the live processes through one table, [`substitutions`]; the picture's ports
//! are checked against `tessera up`'s defaults.

mod parse;
mod run;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use parse::{Kind, Line};
use run::Runner;

use crate::support::{
    Etcd, RedisServer, Up, consecutive_free_ports, free_port, plugin_dir, tessera_bin,
};

/// The repository's root: the README's lines run there, as its reader's would.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the repository")
        .to_owned()
}

/// README.md's command lines, each with how it is run.
///
/// # Panics
/// On a line the test does not know how to run and that is not marked `[manual]`.
fn readme() -> Vec<(Line, Kind)> {
    let path = root().join("README.md");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let lines = parse::lines(&text).unwrap_or_else(|e| panic!("README.md: {e}"));
    let (planned, unknown): (Vec<_>, Vec<_>) = lines
        .into_iter()
        .map(|l| parse::kind(&l).map(|k| (l, k)))
        .partition(Result::is_ok);
    let unknown: Vec<String> = unknown.into_iter().filter_map(Result::err).collect();
    assert!(unknown.is_empty(), "{}", unknown.join("\n"));
    planned.into_iter().map(Result::unwrap).collect()
}

/// The live processes and places the README's examples stand for.
struct World {
    scratch: PathBuf,
    /// `tessera up`'s first proxy port (the second is the next) and its dashboard's.
    up_port: u16,
    up_dashboard: u16,
    etcd: String,
    /// The servers of the operator tour (10.0.0.11–13).
    servers: [String; 3],
    /// The operator tour's dashboard, proxy and proxy admin ports, free for its lines to bind.
    prod_dashboard: u16,
    prod_proxy: u16,
    prod_admin: u16,
    /// The plugin authors' local redis-server (their 127.0.0.1:6379), and their static proxy's
    /// ports.
    local_redis: String,
    plugin_proxy: u16,
    plugin_admin: u16,
}

/// The one substitution table: each README example (left) and what it is in this test.
fn substitutions(w: &World) -> Vec<(String, String)> {
    let s = |p: &Path| p.display().to_string();
    let at = |port: u16| format!("127.0.0.1:{port}");
    let table = [
        // The quickstart: `tools/up.sh`'s `tessera up`, run from the repository's root.
        ("-p 19000", format!("-p {}", w.up_port)),
        ("-p 19001", format!("-p {}", w.up_port + 1)),
        ("127.0.0.1:18080", at(w.up_dashboard)),
        (".tessera/", format!("{}/", s(&w.scratch.join(".tessera")))),
        // The operator tour's machines.
        ("10.0.0.5:2379", w.etcd.clone()),
        ("10.0.0.5:18080", at(w.prod_dashboard)),
        (
            "/etc/tessera/prod.token-key",
            s(&w.scratch.join("prod.token-key")),
        ),
        ("0.0.0.0:19000", at(w.prod_proxy)),
        (
            "-h 10.0.0.21 -p 19000",
            format!("-h 127.0.0.1 -p {}", w.prod_proxy),
        ),
        ("10.0.0.21:11080", at(w.prod_admin)),
        ("10.0.0.11:6379", w.servers[0].clone()),
        ("10.0.0.12:6379", w.servers[1].clone()),
        ("10.0.0.13:6379", w.servers[2].clone()),
        // The example plugins as tools/test.sh builds them.
        (
            "target/wasm32-unknown-unknown/release/tessera_plugin_",
            format!("{}/tessera_plugin_", s(&plugin_dir())),
        ),
        // The plugin author's machine.
        ("~/my-plugin", s(&w.scratch.join("my-plugin"))),
        ("127.0.0.1:6379", w.local_redis.clone()),
        ("127.0.0.1:19100", at(w.plugin_proxy)),
        ("-p 19100", format!("-p {}", w.plugin_proxy)),
        ("127.0.0.1:11100", at(w.plugin_admin)),
    ];
    table.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[test]
fn every_readme_command_line_is_run_or_marked_manual() {
    let lines = readme();
    let count = |k: Kind| lines.iter().filter(|(_, kind)| *kind == k).count();
    // The tours start their own servers and export the admin CLI's settings; a README that
    // lost them would leave the test little to run.
    assert!(
        count(Kind::Dashboard) >= 1 && count(Kind::Proxy) >= 2,
        "{lines:#?}"
    );
    assert!(
        count(Kind::Export) >= 1 && count(Kind::Run) >= 10,
        "{lines:#?}"
    );
    assert!(
        lines.iter().filter(|(l, _)| l.expected().is_some()).count() >= 5,
        "the README shows few answers for the test to check: {lines:#?}"
    );
    // A manual line that names a script of this repository names one that exists.
    for (line, _) in lines.iter().filter(|(_, k)| *k == Kind::Manual) {
        let first = line.command.split_whitespace().next().unwrap_or_default();
        if first.contains('/') {
            let script = root().join(first);
            let mode = std::fs::metadata(&script).map(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.permissions().mode()
            });
            assert!(
                mode.is_ok_and(|m| m & 0o111 != 0),
                "README.md line {}: {} is not an executable file of this repository",
                line.number,
                script.display()
            );
        }
    }
}

#[test]
fn the_picture_shows_the_ports_tessera_up_uses_by_default() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let picture = readme
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(picture, _)| picture)
        .expect("README.md has a picture (a text block)");
    let help = crate::support::run_with_timeout(
        Command::new(tessera_bin()).args(["up", "-h"]),
        Duration::from_secs(10),
    );
    let help = String::from_utf8_lossy(&help.stdout);
    let default = |flag: &str| -> u16 {
        // clap prints `[default: N]` at the end of the flag's help, which may wrap.
        let after = help
            .split_once(&format!("{flag} <"))
            .unwrap_or_else(|| panic!("`tessera up -h` has no {flag}:\n{help}"))
            .1;
        let own = after.split("\n      --").next().unwrap_or_default();
        own.split_once("[default: ")
            .and_then(|(_, d)| d.split_once(']'))
            .and_then(|(d, _)| d.parse().ok())
            .unwrap_or_else(|| panic!("{flag} shows no default port:\n{own}"))
    };
    let (proxy, admin) = (default("--port"), default("--admin-port"));
    for shown in [
        format!("proxy :{proxy}"),
        format!("proxy :{}", proxy + 1),
        format!("admin :{admin}"),
        format!("admin :{}", admin + 1),
        format!("dashboard :{}", default("--dashboard-port")),
        format!("console :{}", default("--console-port")),
    ] {
        assert!(
            picture.contains(&shown),
            "the picture should show {shown:?}:\n{picture}"
        );
    }
}

#[test]
fn the_readme_runs_as_written() {
    let lines = readme();
    let scratch = tempfile::tempdir().expect("temp dir");
    let scratch_path = scratch.path().canonicalize().expect("canonical temp dir");

    // The quickstart's cluster: `tessera up` as tools/up.sh runs it, on free ports.
    let data_dir = scratch_path.join(".tessera");
    std::fs::create_dir(&data_dir).expect("creating the data dir");
    let (up_port, up_dashboard, up_admin) = (
        consecutive_free_ports(2),
        free_port(),
        consecutive_free_ports(2),
    );
    let up = Up::start(&data_dir, up_port, up_dashboard, up_admin);

    let etcd = tokio::runtime::Runtime::new()
        .expect("a runtime")
        .block_on(Etcd::start());
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let local_redis = RedisServer::start();
    let world = World {
        scratch: scratch_path.clone(),
        up_port,
        up_dashboard,
        etcd: etcd.endpoint(),
        servers: servers.each_ref().map(|s| s.addr().to_string()),
        prod_dashboard: free_port(),
        prod_proxy: free_port(),
        prod_admin: free_port(),
        local_redis: local_redis.addr().to_string(),
        plugin_proxy: free_port(),
        plugin_admin: free_port(),
    };

    let mut runner = Runner::new(
        &root(),
        &scratch_path,
        &tessera_bin(),
        substitutions(&world),
    );
    for (line, kind) in &lines {
        runner.run(line, *kind);
    }
    let manual = lines.iter().filter(|(_, k)| *k == Kind::Manual).count();
    assert_eq!(
        runner.ran + manual,
        lines.len(),
        "every line ran or is manual"
    );
    assert!(runner.answers >= 5, "{} answers checked", runner.answers);

    // The plugin the tour built has the small stack its .cargo/config.toml asks for: without
    // it every instance would start with 1 MiB of stack (17 pages of initial memory, not 2).
    let wasm = scratch_path.join("my-plugin/target/wasm32-unknown-unknown/release/my_plugin.wasm");
    let pages = initial_memory_pages(&std::fs::read(&wasm).expect("the tour's plugin"));
    assert!(
        pages <= 4,
        "{} starts with {pages} pages of memory",
        wasm.display()
    );

    // Servers the lines started stop first, then the fixtures they used.
    drop(runner);
    drop(up);
}

/// The initial size, in 64 KiB pages, of a wasm module's (first) memory.
fn initial_memory_pages(wasm: &[u8]) -> u64 {
    fn leb(b: &[u8], i: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*i];
            *i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte < 0x80 {
                return v;
            }
        }
    }
    assert_eq!(&wasm[..4], b"\0asm", "not a wasm module");
    let mut i = 8;
    while i < wasm.len() {
        let id = wasm[i];
        i += 1;
        let size = leb(wasm, &mut i) as usize;
        if id == 5 {
            // The memory section: a count, then limits (a flags byte, then the minimum).
            let mut j = i;
            let _count = leb(wasm, &mut j);
            j += 1;
            return leb(wasm, &mut j);
        }
        i += size;
    }
    panic!("the module has no memory section")
}
