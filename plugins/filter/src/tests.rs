//! The filter through the SDK's fake host: manifests, every rule, config errors.

use tessera_plugin_sdk::testing::{self, ClientInfo, Harness, Outcome, command};
use tessera_plugin_sdk::{class, cmd};

use crate::Filter;

fn filter(config: &str) -> Harness<Filter> {
    testing::reset();
    Harness::new(config)
}

fn deny(text: &str) -> Outcome {
    Outcome::Deny(text.to_owned())
}

#[test]
fn a_config_that_denies_only_flushall_hooks_only_flushall() {
    let mut h = filter(r#"{"deny_commands": ["FLUSHALL"]}"#);
    let m = h.manifest().clone();
    assert_eq!(m.commands, vec![(cmd::FLUSHALL, 0)]);
    assert_eq!((m.classes, m.flags), (0, 0));
    assert_eq!(
        h.on_command(1, &command(&["flushall"])),
        deny("ERR command 'FLUSHALL' is not allowed")
    );
    assert_eq!(h.on_command(1, &command(&["GET", "k"])), Outcome::NotHooked);
    assert_eq!(h.on_command(1, &command(&["FLUSHDB"])), Outcome::NotHooked);
}

#[test]
fn classes_deny_every_command_of_the_class() {
    let mut h = filter(r#"{"deny_classes": ["admin", "Dangerous"]}"#);
    assert_eq!(h.manifest().classes, class::ADMIN | class::DANGEROUS);
    for c in [
        &["CONFIG", "GET", "x"][..],
        &["KEYS", "*"],
        &["FLUSHALL"],
        &["DEBUG", "SLEEP", "1"],
    ] {
        assert!(
            matches!(h.on_command(1, &command(c)), Outcome::Deny(_)),
            "{c:?}"
        );
    }
    assert_eq!(
        h.on_command(1, &command(&["SET", "k", "v"])),
        Outcome::NotHooked
    );
}

#[test]
fn a_subcommand_can_be_denied_alone() {
    let mut h = filter(r#"{"deny_commands": ["CONFIG SET", "client|kill"]}"#);
    assert!(
        h.manifest()
            .copies_values(&command(&["CONFIG", "SET", "a", "b"]))
    );
    assert!(matches!(
        h.on_command(1, &command(&["config", "set", "maxmemory", "1"])),
        Outcome::Deny(_)
    ));
    assert_eq!(
        h.on_command(1, &command(&["CONFIG", "GET", "x"])),
        Outcome::Pass
    );
    assert!(matches!(
        h.on_command(1, &command(&["CLIENT", "KILL", "x"])),
        Outcome::Deny(_)
    ));
    assert_eq!(
        h.on_command(1, &command(&["CLIENT", "SETNAME", "x"])),
        Outcome::Pass
    );
}

#[test]
fn writes_to_read_only_keys_are_refused_and_reads_pass() {
    let mut h = filter(r#"{"read_only_keys": ["config:*", "*:frozen", "a*z"]}"#);
    assert_eq!(h.manifest().classes, class::WRITE);
    assert!(
        h.manifest().prefixes.is_empty(),
        "suffix patterns need the plugin"
    );
    assert_eq!(
        h.on_command(1, &command(&["SET", "config:x", "1"])),
        deny("ERR key 'config:x' is read-only")
    );
    assert!(matches!(
        h.on_command(1, &command(&["DEL", "k", "u:1:frozen"])),
        Outcome::Deny(_)
    ));
    assert!(matches!(
        h.on_command(1, &command(&["HSET", "abcz", "f", "v"])),
        Outcome::Deny(_)
    ));
    assert_eq!(
        h.on_command(1, &command(&["SET", "other", "1"])),
        Outcome::Pass
    );
    assert_eq!(
        h.on_command(1, &command(&["GET", "config:x"])),
        Outcome::NotHooked
    );
}

#[test]
fn prefix_only_read_only_patterns_and_the_value_bound_become_the_gate() {
    let mut h = filter(r#"{"read_only_keys": ["config:*", "ro:*"]}"#);
    let gate = h.manifest().gate.clone().expect("a gate");
    assert_eq!(gate.classes, class::WRITE);
    assert_eq!(gate.prefixes, vec![b"config:".to_vec(), b"ro:".to_vec()]);
    assert_eq!(gate.max_value, u32::MAX);
    assert_eq!(
        h.on_command(1, &command(&["SET", "x", "1"])),
        Outcome::NotHooked
    );
    assert!(matches!(
        h.on_command(1, &command(&["SET", "ro:x", "1"])),
        Outcome::Deny(_)
    ));

    // The usual config: denied commands, read-only keys and a value bound. A write that no
    // rule touches never enters the plugin; every rule still refuses what it must.
    let mut h = filter(
        r#"{"deny_commands": ["FLUSHALL", "KEYS"], "read_only_keys": ["frozen:*"], "max_value_bytes": 10}"#,
    );
    assert_eq!(
        h.on_command(1, &command(&["SET", "k", "0123456789"])),
        Outcome::NotHooked
    );
    assert_eq!(
        h.on_command(1, &command(&["MSET", "a", "1", "b", "2"])),
        Outcome::NotHooked
    );
    assert_eq!(
        h.on_command(1, &command(&["SET", "frozen:k", "1"])),
        deny("ERR key 'frozen:k' is read-only")
    );
    assert_eq!(
        h.on_command(1, &command(&["MSET", "a", "1", "frozen:b", "2"])),
        deny("ERR key 'frozen:b' is read-only")
    );
    assert_eq!(
        h.on_command(1, &command(&["SET", "k", "0123456789X"])),
        deny("ERR value is larger than 10 bytes")
    );
    assert!(matches!(
        h.on_command(1, &command(&["FLUSHALL"])),
        Outcome::Deny(_)
    ));

    // Per-client rules hook every command, a pattern that is not a prefix needs the plugin,
    // and a denied write class must reach it: no gate then.
    for config in [
        r#"{"max_value_bytes": 10, "rate_limit": {"per_second": 1000, "burst": 1000}}"#,
        r#"{"read_only_keys": ["*:frozen"], "max_value_bytes": 10}"#,
        r#"{"deny_classes": ["write"], "max_value_bytes": 10}"#,
    ] {
        let mut h = filter(config);
        assert!(h.manifest().gate.is_none(), "{config}");
        assert_ne!(
            h.on_command(1, &command(&["SET", "k", "1"])),
            Outcome::NotHooked,
            "{config}"
        );
    }
}

#[test]
fn value_size_is_checked_on_lengths_without_copying_values() {
    let mut h = filter(r#"{"max_value_bytes": 10}"#);
    let big = command(&["SET", "k", "0123456789X"]);
    assert!(
        !h.manifest().copies_values(&big),
        "values must stay in the host"
    );
    assert_eq!(
        h.on_command(1, &big),
        deny("ERR value is larger than 10 bytes")
    );
    // At the bound, the gate keeps the write from the plugin (the host checks lengths).
    assert_eq!(
        h.on_command(1, &command(&["SET", "k", "0123456789"])),
        Outcome::NotHooked
    );
    assert!(matches!(
        h.on_command(1, &command(&["HSET", "h", "f", "v", "g", "0123456789X"])),
        Outcome::Deny(_)
    ));
    // Keys are not values.
    assert_eq!(
        h.on_command(1, &command(&["DEL", "a-key-longer-than-ten"])),
        Outcome::NotHooked
    );
}

#[test]
fn clients_are_admitted_by_cidr_v4_and_v6() {
    let mut h = filter(r#"{"allow_addrs": ["10.0.0.0/8", "2001:db8::/32"]}"#);
    assert!(h.manifest().wants_close());
    testing::set_client(1, ClientInfo::new("10.2.3.4:5000"));
    testing::set_client(2, ClientInfo::new("[2001:db8::7]:5000"));
    testing::set_client(3, ClientInfo::new("192.168.1.1:5000"));
    assert_eq!(h.on_command(1, &command(&["GET", "k"])), Outcome::Pass);
    assert_eq!(h.on_command(2, &command(&["GET", "k"])), Outcome::Pass);
    assert_eq!(
        h.on_command(3, &command(&["GET", "k"])),
        deny("ERR client not allowed")
    );
    assert_eq!(
        h.on_command(4, &command(&["PING"])),
        deny("ERR client not allowed")
    );
    // Client facts are fetched once per connection, and forgotten on close.
    let calls = testing::client_info_calls();
    h.on_command(1, &command(&["GET", "k"]));
    assert_eq!(testing::client_info_calls(), calls);
    h.on_close(1);
    h.on_command(1, &command(&["GET", "k"]));
    assert_eq!(testing::client_info_calls(), calls + 1);
}

#[test]
fn users_are_admitted_after_auth() {
    let mut h = filter(r#"{"allow_users": ["app"]}"#);
    testing::set_client(1, ClientInfo::new("10.0.0.1:1"));
    assert!(matches!(
        h.on_command(1, &command(&["GET", "k"])),
        Outcome::Deny(_)
    ));
    assert_eq!(
        h.on_command(1, &command(&["AUTH", "app", "pw"])),
        Outcome::Pass
    );
    testing::set_client(1, ClientInfo::new("10.0.0.1:1").user("app"));
    assert_eq!(h.on_command(1, &command(&["GET", "k"])), Outcome::Pass);
    testing::set_client(2, ClientInfo::new("10.0.0.2:1").user("intruder"));
    assert!(matches!(
        h.on_command(2, &command(&["GET", "k"])),
        Outcome::Deny(_)
    ));
}

#[test]
fn each_client_address_has_its_own_token_bucket() {
    let mut h = filter(r#"{"rate_limit": {"per_second": 10, "burst": 2}}"#);
    testing::set_client(1, ClientInfo::new("10.0.0.1:1000"));
    testing::set_client(2, ClientInfo::new("10.0.0.1:1001"));
    testing::set_client(3, ClientInfo::new("10.0.0.2:1000"));
    let get = command(&["GET", "k"]);
    assert_eq!(h.on_command(1, &get), Outcome::Pass);
    assert_eq!(h.on_command(2, &get), Outcome::Pass, "same IP, same bucket");
    assert_eq!(h.on_command(1, &get), deny("ERR rate limit exceeded"));
    assert_eq!(h.on_command(3, &get), Outcome::Pass, "another IP");
    testing::advance_ms(100);
    assert_eq!(h.on_command(2, &get), Outcome::Pass, "one token refilled");
    assert_eq!(h.on_command(2, &get), deny("ERR rate limit exceeded"));
}

#[test]
fn custom_messages_fill_placeholders_and_get_an_error_code() {
    let mut h = filter(
        r#"{"deny_commands": ["KEYS"], "read_only_keys": ["ro:*"],
            "messages": {"denied": "NOPERM {command} is off", "read_only": "{key} is frozen"}}"#,
    );
    assert_eq!(
        h.on_command(1, &command(&["keys", "*"])),
        deny("NOPERM KEYS is off")
    );
    assert_eq!(
        h.on_command(1, &command(&["SET", "ro:1", "v"])),
        deny("ERR ro:1 is frozen")
    );
}

#[test]
fn bad_configs_are_refused_with_a_precise_message() {
    let err = |c: &str| Harness::<Filter>::try_new(c).unwrap_err();
    assert_eq!(
        err(r#"{"deny_classes": ["admn"]}"#),
        r#"filter: unknown class "admn""#
    );
    assert_eq!(
        err(r#"{"deny_commands": ["FLUSHAL"]}"#),
        r#"filter: unknown command "FLUSHAL""#
    );
    assert_eq!(
        err(r#"{"allow_addrs": ["10.0.0.0/40"]}"#),
        r#"filter: bad address "10.0.0.0/40""#
    );
    assert_eq!(
        err(r#"{"read_only_keys": [""]}"#),
        r#"filter: empty key pattern """#
    );
    assert_eq!(
        err(r#"{"rate_limit": {"per_second": 0}}"#),
        "filter: rate_limit.per_second must be at least 1"
    );
    assert!(
        err(r#"{"deny_command": []}"#)
            .starts_with("filter: bad config: unknown field `deny_command`")
    );
    assert!(err("[").starts_with("filter: bad config:"));
    // An empty config is valid and hooks nothing.
    assert!(Harness::<Filter>::try_new("").is_ok());
}

#[global_allocator]
static ALLOC: testing::CountingAlloc = testing::CountingAlloc;

#[test]
fn passing_a_command_allocates_nothing() {
    let mut h = filter(
        r#"{"read_only_keys": ["ro:*", "*:frozen"], "max_value_bytes": 100, "deny_classes": ["admin"]}"#,
    );
    let set = command(&["SET", "user:1", "value"]);
    assert_eq!(h.on_command(1, &set), Outcome::Pass); // warm up (arena sizes)
    let before = testing::allocations();
    for _ in 0..100 {
        assert_eq!(h.on_command(1, &set), Outcome::Pass);
    }
    assert_eq!(testing::allocations() - before, 0);
    // The counter does count.
    let v = std::hint::black_box(vec![1u8; 10]);
    assert_eq!(testing::allocations() - before, 1);
    drop(v);
}

#[test]
fn unconditional_denials_are_declared_to_the_proxy_and_really_denied() {
    let mut h = filter(
        r#"{"deny_commands": ["FLUSHALL", "config set"], "deny_classes": ["admin"],
            "read_only_keys": ["frozen:*"], "max_value_bytes": 10,
            "rate_limit": {"per_second": 1000}}"#,
    );
    let m = h.manifest().clone();
    assert_eq!(
        m.denied,
        vec!["FLUSHALL".to_owned(), "CONFIG|SET".to_owned()]
    );
    assert_eq!(m.denied_classes, class::ADMIN);
    testing::set_client(1, ClientInfo::new("10.0.0.1:5000"));
    // Every declaration holds for any client: the plugin denies them itself.
    for c in [
        &["FLUSHALL"][..],
        &["CONFIG", "SET", "x", "y"],
        &["DEBUG", "SLEEP", "0"],
    ] {
        assert!(
            matches!(h.on_command(1, &command(c)), Outcome::Deny(_)),
            "{c:?}"
        );
    }
    // Key, size and rate rules depend on the command or the client: not declared.
    let m = filter(r#"{"read_only_keys": ["frozen:*"], "max_value_bytes": 10}"#)
        .manifest()
        .clone();
    assert!(m.denied.is_empty() && m.denied_classes == 0, "{m:?}");
}

#[test]
fn with_a_user_allow_list_auth_and_hello_are_not_declared_denied() {
    // AUTH and HELLO pass before the name rules so that a client can log in: declaring them
    // would keep scripts from something the filter lets clients do.
    let h = filter(
        r#"{"allow_users": ["app"], "deny_commands": ["AUTH", "HELLO", "KEYS"],
            "deny_classes": ["connection", "dangerous"]}"#,
    );
    let m = h.manifest();
    assert_eq!(m.denied, vec!["KEYS".to_owned()]);
    assert_eq!(m.denied_classes, class::DANGEROUS);
    let mut h = filter(r#"{"allow_users": ["app"], "deny_commands": ["AUTH"]}"#);
    testing::set_client(1, ClientInfo::new("10.0.0.1:5000"));
    assert_eq!(
        h.on_command(1, &command(&["AUTH", "app", "pw"])),
        Outcome::Pass
    );
}
