//! The config file: it can carry every setting, and command-line flags override it.

use std::net::TcpStream;
use std::time::Duration;

use crate::support::{Cluster, Frame, free_port, keys_on, loopback};

/// SETs a key owned by each backend through the proxy and checks that each landed there.
fn assert_routes_to_both_backends(cluster: &Cluster) {
    let mut raw = cluster.proxy.raw();
    for index in 0..2 {
        let key = keys_on(index, "cfg:", 1).remove(0);
        assert_eq!(raw.cmd(&["SET", &key, "v"]), Frame::Simple("OK".into()));
        assert!(
            cluster.backends[index].has(&key),
            "{key} missing from backend {index}"
        );
    }
}

#[test]
fn config_file_alone_sets_listen_backends_and_threads() {
    let cluster = Cluster::start_with(|b| b.addresses_in_config().config("threads = 2\n"));
    assert_routes_to_both_backends(&cluster);
}

#[test]
fn command_line_flags_override_the_config_file() {
    let file_listen = loopback(free_port());
    let dead_backend = loopback(free_port());
    let config = format!(
        "listen = \"{file_listen}\"\nbackends = [\"{dead_backend}\", \"{dead_backend}\"]\n"
    );
    // The builder passes --listen and --backends; the proxy must prefer them.
    let cluster = Cluster::with_config(&config);
    assert_routes_to_both_backends(&cluster);
    assert!(
        TcpStream::connect_timeout(&file_listen, Duration::from_millis(500)).is_err(),
        "the proxy must not also listen on the config file's address {file_listen}"
    );
}
