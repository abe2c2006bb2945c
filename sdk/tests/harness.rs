//! The SDK end to end through its own test harness: every action kind, on_reply, host merges,
//! and the fake host's imports. Run with `cargo test -p tessera-plugin-sdk --features testing`.
#![cfg(feature = "testing")]

use tessera_plugin_sdk::host::{self, Level, Metric, Series, state};
use tessera_plugin_sdk::testing::{self, ClientInfo, Harness, Outcome, ReplyOutcome, command};
use tessera_plugin_sdk::{
    Action, Command, Conn, Manifest, Merge, Out, Plugin, Replies, ReplyAction, ReplyOut, class, cmd,
};

/// A plugin that exercises every output: DENY on KEYS, REPLY on PING, REWRITE of MGET into
/// GETs, OBSERVE of GET, PASS otherwise.
struct Kitchen {
    seen: Series,
}

impl Plugin for Kitchen {
    fn init(config: &[u8]) -> Result<(Self, Manifest), String> {
        if config == b"no" {
            return Err("kitchen: no".into());
        }
        let m = Metric::counter("seen_total", "Seen", &["command"]).map_err(|e| e.to_string())?;
        let seen = m.series(&["any"]).map_err(|e| e.to_string())?;
        let manifest = Manifest::new()
            .hook(cmd::KEYS)
            .hook(cmd::PING)
            .hook_with_values(cmd::MGET)
            .hook(cmd::GET)
            .hook_class(class::ADMIN)
            .want_close();
        Ok((Kitchen { seen }, manifest))
    }

    fn on_command(&mut self, _conn: Conn, c: &Command<'_>, out: Out<'_>) -> Action {
        self.seen.inc();
        match c.id() {
            cmd::KEYS => out.deny_fmt(format_args!("ERR no {}", c.arg_len(1).unwrap_or(0))),
            cmd::PING => out.reply(|w| {
                w.array(2).bulk(b"pong").int(7);
            }),
            cmd::MGET => {
                let mut rw = out.rewrite(Merge::Plugin, 42);
                for (i, _) in c.keys() {
                    rw.command(2).arg(b"GET").input(i);
                }
                rw.finish()
            }
            cmd::GET => out.observe(9),
            _ => Action::PASS,
        }
    }

    fn on_reply(
        &mut self,
        _conn: Conn,
        ctx: u64,
        replies: &Replies<'_>,
        out: ReplyOut<'_>,
    ) -> ReplyAction {
        match ctx {
            42 => out.replace(|w| {
                w.array(replies.len());
                for r in replies.iter() {
                    w.raw(r);
                }
            }),
            _ if replies.value(0).is_some_and(|v| v.is_nil()) => out.error("ERR nil"),
            _ => ReplyAction::PASS,
        }
    }
}

#[test]
fn every_action_round_trips_through_the_abi() {
    testing::reset();
    let mut h = Harness::<Kitchen>::new("{}");
    assert_eq!(
        h.on_command(1, &command(&["KEYS", "abc*"])),
        Outcome::Deny("ERR no 4".into())
    );
    assert_eq!(
        h.on_command(1, &command(&["PING"])),
        Outcome::Reply(b"*2\r\n$4\r\npong\r\n:7\r\n".to_vec())
    );
    assert_eq!(
        h.on_command(1, &command(&["GET", "k"])),
        Outcome::Observe(9)
    );
    assert_eq!(
        h.on_command(1, &command(&["CONFIG", "GET", "x"])),
        Outcome::Pass
    );
    assert_eq!(
        h.on_command(1, &command(&["SET", "k", "v"])),
        Outcome::NotHooked
    );
    let rw = h.on_command(1, &command(&["MGET", "a", "b"])).rewrite();
    assert_eq!((rw.merge, rw.ctx), (Merge::Plugin, 42));
    assert_eq!(rw.strings(), [["GET", "a"], ["GET", "b"]]);
    assert_eq!(testing::counter("seen_total", &["any"]), Some(5));
}

#[test]
fn a_batch_answers_each_command_as_a_call_of_its_own() {
    testing::reset();
    let cmds = [
        command(&["KEYS", "abc*"]),
        command(&["SET", "k", "v"]),
        command(&["PING"]),
        command(&["GET", "k"]),
        command(&["MGET", "a", "b", "c"]),
        command(&["CONFIG", "GET", "x"]),
        command(&["KEYS", "x"]),
    ];
    let mut h = Harness::<Kitchen>::new("{}");
    let alone: Vec<Outcome> = cmds.iter().map(|c| h.on_command(1, c)).collect();
    let together = h.on_commands(1, &cmds);
    assert_eq!(together, alone);
    assert_eq!(together[1], Outcome::NotHooked);
    assert_eq!(together[6], Outcome::Deny("ERR no 1".into()));
    // Both runs reached the plugin: six hooked commands each.
    assert_eq!(testing::counter("seen_total", &["any"]), Some(12));
}

#[test]
fn run_plays_backend_merges_and_on_reply() {
    testing::reset();
    let mut h = Harness::<Kitchen>::new("{}");
    let mut backend = |args: &[Vec<u8>]| match args[1].as_slice() {
        b"a" => b"$1\r\n1\r\n".to_vec(),
        _ => b"$-1\r\n".to_vec(),
    };
    assert_eq!(
        h.run(1, &command(&["MGET", "a", "b"]), &mut backend),
        b"*2\r\n$1\r\n1\r\n$-1\r\n"
    );
    assert_eq!(
        h.run(1, &command(&["GET", "a"]), &mut backend),
        b"$1\r\n1\r\n"
    );
    assert_eq!(
        h.run(1, &command(&["GET", "b"]), &mut backend),
        b"-ERR nil\r\n"
    );
    assert_eq!(h.on_reply(1, 9, &[b"+x\r\n"]), ReplyOutcome::Pass);
    assert_eq!(
        h.run(1, &command(&["KEYS", "*"]), &mut backend),
        b"-ERR no 1\r\n"
    );
}

#[test]
fn host_merges_follow_the_abi() {
    use testing::merge;
    let r = |s: &str| s.as_bytes().to_vec();
    assert_eq!(merge(Merge::Sum, &[r(":1\r\n"), r(":41\r\n")]), b":42\r\n");
    assert_eq!(
        merge(Merge::Sum, &[r(":1\r\n"), r("-ERR x\r\n")]),
        b"-ERR x\r\n"
    );
    assert_eq!(
        merge(
            Merge::Concat,
            &[r("*1\r\n:1\r\n"), r("*-1\r\n"), r("*2\r\n:2\r\n:3\r\n")]
        ),
        b"*3\r\n:1\r\n:2\r\n:3\r\n"
    );
    assert_eq!(
        merge(
            Merge::Concat,
            &[r("%1\r\n+a\r\n:1\r\n"), r("%1\r\n+b\r\n:2\r\n")]
        ),
        b"%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n"
    );
    assert_eq!(
        merge(Merge::AllOk, &[r("+OK\r\n"), r("+OK\r\n")]),
        b"+OK\r\n"
    );
    assert_eq!(
        merge(Merge::FirstNonNil, &[r("$-1\r\n"), r("$1\r\nx\r\n")]),
        b"$1\r\nx\r\n"
    );
    assert_eq!(merge(Merge::Last, &[r(":1\r\n"), r(":2\r\n")]), b":2\r\n");
    assert_eq!(merge(Merge::First, &[r(":1\r\n"), r(":2\r\n")]), b":1\r\n");
}

#[test]
fn init_errors_come_back_as_text() {
    assert_eq!(
        Harness::<Kitchen>::try_new("no").unwrap_err(),
        "kitchen: no"
    );
}

#[test]
fn the_fake_host_keeps_state_with_ttls_and_versions() {
    testing::reset();
    state::set(b"a", b"1", Some(1000)).unwrap();
    assert_eq!(state::get(b"a").as_deref(), Some(&b"1"[..]));
    testing::advance_ms(1000);
    assert_eq!(state::get(b"a"), None);
    assert_eq!(state::incr(b"n", 5, None), 5);
    assert_eq!(state::incr(b"n", -2, None), 3);
    let big = vec![7u8; 1000];
    state::set(b"big", &big, None).unwrap();
    assert_eq!(state::get(b"big"), Some(big));
    let mut small = [0u8; 4];
    assert_eq!(state::get_into(b"big", &mut small), Some(1000));
    assert!(state::set_if_version(b"cas", b"x", 0));
    assert!(!state::set_if_version(b"cas", b"y", 0));
    let (v, version) = state::get_versioned(b"cas").unwrap();
    assert_eq!(v, b"x");
    assert!(state::set_if_version(b"cas", b"y", version));
    assert!(!state::set_if_version(b"cas", b"z", version));
    assert!(state::delete(b"cas"));
    assert!(!state::delete(b"cas"));
    assert!(host::ratelimit_acquire(b"b", 2, 1, 2));
    assert!(!host::ratelimit_acquire(b"b", 1, 1, 2));
    testing::advance_ms(1000);
    assert!(host::ratelimit_acquire(b"b", 1, 1, 2));
}

#[test]
fn the_fake_host_captures_logs_metrics_and_client_info() {
    testing::reset();
    testing::set_log_level(Level::Warn);
    tessera_plugin_sdk::log!(Level::Info, "hidden {}", 1);
    tessera_plugin_sdk::log!(Level::Error, "shown {}", 2);
    assert_eq!(testing::logs(), [(Level::Error, "shown 2".to_owned())]);
    // Metrics can only be defined during init.
    assert!(Metric::counter("late_total", "", &[]).is_err());
    testing::set_client(3, ClientInfo::new("[::1]:7000").user("u").name("n"));
    let c = host::client_info(Conn(3)).unwrap();
    assert_eq!(
        (c.addr.as_str(), c.user.as_deref(), c.name.as_deref()),
        ("[::1]:7000", Some("u"), Some("n"))
    );
    assert_eq!(host::client_info(Conn(4)), None);
    let t = host::now_us();
    testing::advance_us(5);
    assert_eq!(host::now_us(), t + 5);
    assert_eq!(host::now_ms(), (t + 5) / 1000);
}
