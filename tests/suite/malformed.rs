//! Malformed input over a raw socket: a `-ERR Protocol error` reply, then the proxy closes that
//! connection while other sessions keep working. A merely unfinished frame just waits.

use std::time::Duration;

use crate::support::{Cluster, Frame, RawClient};

/// How long a protocol error may take: prompt, without waiting for more input.
const PROMPT: Duration = Duration::from_secs(2);

/// Sends `input` on a fresh connection and asserts: a `-ERR Protocol error...` reply within
/// [`PROMPT`], then a close; meanwhile another open session keeps answering.
fn assert_protocol_error_then_close(input: &[u8]) {
    let cluster = Cluster::start();
    let mut bystander = cluster.proxy.raw();
    assert_eq!(bystander.cmd(&["PING"]), Frame::Simple("PONG".into()));

    let mut victim = cluster.proxy.raw();
    victim.set_read_timeout(PROMPT);
    victim.send(input);
    let reply = victim
        .try_read_frame()
        .unwrap_or_else(|e| panic!("no protocol error within {PROMPT:?} for {input:?}: {e}"));
    assert!(
        reply
            .error()
            .is_some_and(|e| e.starts_with("ERR Protocol error")),
        "for {:?} expected -ERR Protocol error..., got {reply:?}",
        String::from_utf8_lossy(input)
    );
    victim.expect_closed(PROMPT);

    assert_eq!(
        bystander.cmd(&["PING"]),
        Frame::Simple("PONG".into()),
        "bystander after close"
    );
    assert_eq!(
        bystander.cmd(&["SET", "k", "v"]),
        Frame::Simple("OK".into())
    );
    assert_eq!(bystander.cmd(&["GET", "k"]), Frame::bulk("v"));
}

#[test]
fn bad_type_byte_inside_a_multibulk_is_a_protocol_error() {
    assert_protocol_error_then_close(b"*1\r\n:1\r\n");
}

#[test]
fn negative_bulk_length_is_a_protocol_error() {
    assert_protocol_error_then_close(b"*1\r\n$-5\r\n");
}

#[test]
fn huge_multibulk_header_is_a_protocol_error() {
    assert_protocol_error_then_close(b"*2147483647\r\n");
}

#[test]
fn huge_bulk_header_is_refused_without_waiting_for_the_data() {
    assert_protocol_error_then_close(b"*1\r\n$9999999999\r\n");
}

#[test]
fn bulk_with_wrong_terminator_is_a_protocol_error() {
    assert_protocol_error_then_close(b"*1\r\n$3\r\nGETxx");
}

#[test]
fn unterminated_frame_waits_and_completes_when_the_rest_arrives() {
    let cluster = Cluster::start();
    let mut raw: RawClient = cluster.proxy.raw();
    assert_eq!(raw.cmd(&["SET", "k", "v"]), Frame::Simple("OK".into()));
    raw.send(b"*2\r\n$3\r\nGET\r\n");
    raw.expect_no_reply(Duration::from_millis(300));
    raw.send(b"$1\r\nk\r\n");
    assert_eq!(raw.read_frame(), Frame::bulk("v"));
    // Split inside a bulk's payload and inside a header, too.
    raw.send(b"*2\r\n$3\r\nG");
    raw.expect_no_reply(Duration::from_millis(300));
    raw.send(b"ET\r\n$");
    raw.expect_no_reply(Duration::from_millis(300));
    raw.send(b"1\r\nk\r\n");
    assert_eq!(raw.read_frame(), Frame::bulk("v"));
}
