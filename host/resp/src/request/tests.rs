//! Decoder tests: every parsing rule, with what redis-server 7.0.15 did with the same bytes
//! (each followed by a PING on one connection); limits before AUTH; bounded reservation;
//! properties over arbitrary streams and splits.

use bytes::BytesMut;
use proptest::prelude::*;

use super::inline::split;
use super::*;
use ProtocolError::*;

/// How decoding a whole input stopped.
#[derive(Debug, PartialEq)]
enum End {
    /// Every byte was consumed.
    Done,
    /// Waiting for more bytes.
    Wait,
    Refused(ProtocolError),
}

type Args = Vec<Vec<u8>>;

fn decode_all(dec: &mut RequestDecoder, buf: &mut BytesMut) -> Result<Vec<Args>, ProtocolError> {
    let mut out = Vec::new();
    while let Some(r) = dec.decode(buf)? {
        out.push(r.args().map(<[u8]>::to_vec).collect());
    }
    Ok(out)
}

/// Decodes `input` with default limits until it refuses or runs dry.
fn run_with(dec: &mut RequestDecoder, input: &[u8]) -> (Vec<Args>, End) {
    let mut buf = BytesMut::from(input);
    let mut got = Vec::new();
    loop {
        match dec.decode(&mut buf) {
            Ok(Some(r)) => got.push(r.args().map(<[u8]>::to_vec).collect()),
            Ok(None) if buf.is_empty() => return (got, End::Done),
            Ok(None) => return (got, End::Wait),
            Err(e) => return (got, End::Refused(e)),
        }
    }
}

fn run(input: &[u8]) -> (Vec<Args>, End) {
    run_with(&mut RequestDecoder::default(), input)
}

fn args(v: &[&str]) -> Args {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).escape_debug().to_string()
}

/// `RPUSH L <arg>` with `header` as the argument's bulk header, then `rest`.
fn rpush_with_header(header: &[u8], rest: &[u8]) -> Vec<u8> {
    [&b"*3\r\n$5\r\nRPUSH\r\n$1\r\nL\r\n"[..], header, rest].concat()
}

fn assert_refused(input: &[u8], want: ProtocolError) {
    let (got, end) = run(input);
    assert_eq!(end, End::Refused(want), "for {}", show(input));
    assert!(
        got.is_empty(),
        "for {}: accepted {got:?} first",
        show(input)
    );
}

// === the multibulk count ===

#[test]
fn multibulk_count_is_canonical_or_refused() {
    // Redis: "-ERR Protocol error: invalid multibulk length", connection closed, for each.
    for bad in [
        &b"*03\r\n"[..],
        b"*+3\r\n",
        b"* 3\r\n",
        b"*3 \r\n",
        b"*3\n$5\r\n",
        b"*-0\r\n",
        b"*00\r\n",
        b"*-01\r\n",
        b"*\r\n",
        b"*-\r\n",
        b"*2147483648\r\n",
    ] {
        assert_refused(bad, InvalidMultibulkLength);
    }
}

#[test]
fn multibulk_count_bytes_redis_would_misread_are_refused() {
    // Redis takes the header up to the first `\r` and skips the byte after it unseen:
    // `*3\rX$5...` ran RPUSH. A NUL stops its C string search: `*1\0\r\n` waited forever.
    // Neither can be forwarded, so both are refused, and a 19th digit at once.
    assert_refused(b"*3\rX$5\r\nRPUSH\r\n", InvalidMultibulkLength);
    assert_refused(b"*1\0\r\n", InvalidMultibulkLength);
    assert_refused(b"*\0", InvalidMultibulkLength);
    assert_refused(b"*1111111111111111111", InvalidMultibulkLength);
    // Redis skips `*-9223372036854775808` (string2ll accepts i64::MIN); we need not.
    assert_refused(b"*-9223372036854775808\r\n", InvalidMultibulkLength);
}

#[test]
fn zero_and_negative_counts_are_skipped_as_redis_does() {
    // Redis: `*0`, `*-1`, `*-5` give no reply; the PING after each answered +PONG.
    for skip in [
        &b"*0\r\n"[..],
        b"*-1\r\n",
        b"*-5\r\n",
        b"*-123456789012345678\r\n",
    ] {
        let input = [skip, b"*1\r\n$4\r\nPING\r\n"].concat();
        assert_eq!(
            run(&input),
            (vec![args(&["PING"])], End::Done),
            "{}",
            show(skip)
        );
    }
}

#[test]
fn an_unfinished_count_waits_only_while_it_can_still_be_valid() {
    for wait in [&b"*"[..], b"*-", b"*1", b"*12", b"*1\r", b"*-1\r", b"*0"] {
        assert_eq!(run(wait), (vec![], End::Wait), "{}", show(wait));
    }
    assert_eq!(run(b"*111111111111111111"), (vec![], End::Wait));
}

// === bulk headers ===

#[test]
fn bulk_length_is_canonical_or_refused() {
    // Redis: "-ERR Protocol error: invalid bulk length", connection closed, for each.
    for bad in [
        &b"$01\r\nx\r\n"[..],
        b"$+1\r\nx\r\n",
        b"$-0\r\n\r\n",
        b"$00\r\n\r\n",
        b"$0000\r\n",
        b"$ 1\r\nx\r\n",
        b"$1 \r\nx\r\n",
        b"$1\nx\r\n",
        b"$-1\r\n",
        b"$-5\r\n",
        b"$00000000000000000001\r\nx\r\n",
        b"$99999999999999999999\r\n",
        b"$-9223372036854775808\r\n",
        b"$536870913\r\n",
    ] {
        assert_refused(&rpush_with_header(bad, b""), InvalidBulkLength);
    }
}

#[test]
fn bulk_header_bytes_redis_would_misread_are_refused() {
    // `$1\0\r\n` and `$\01\r\n`: Redis waited (NUL ends its search for `\r`).
    // `$1\rXx\r\n`: Redis skipped `X` and pushed "x". We refuse all three.
    for bad in [&b"$1\0\r\nx\r\n"[..], b"$\x001\r\nx\r\n", b"$1\rXx\r\n"] {
        assert_refused(&rpush_with_header(bad, b""), InvalidBulkLength);
    }
}

#[test]
fn a_bulk_must_start_with_a_dollar() {
    // Redis: "-ERR Protocol error: expected '$', got ':'".
    assert_refused(
        &rpush_with_header(b":1\r\n", b""),
        UnexpectedByte {
            expected: '$',
            got: ':',
        },
    );
    // `*2147483647` then a PING: "expected '$', got '*'", as here (the count is over our cap).
    let mut dec = RequestDecoder::new(Limits {
        max_bulk_len: 100,
        max_multibulk_len: i32::MAX as usize,
    });
    let (_, end) = run_with(&mut dec, b"*2147483647\r\n*1\r\n$4\r\nPING\r\n");
    assert_eq!(
        end,
        End::Refused(UnexpectedByte {
            expected: '$',
            got: '*'
        })
    );
}

#[test]
fn canonical_lengths_are_accepted_with_any_payload_bytes() {
    // Redis pushed "", "\0", "\r\n" and the full 512 MiB header was waited on.
    let (got, end) = run(&rpush_with_header(b"$0\r\n\r\n", b""));
    assert_eq!((got, end), (vec![args(&["RPUSH", "L", ""])], End::Done));
    let (got, _) = run(&rpush_with_header(b"$1\r\n\0\r\n", b""));
    assert_eq!(got, vec![args(&["RPUSH", "L", "\0"])]);
    let (got, _) = run(&rpush_with_header(b"$2\r\n\r\n\r\n", b""));
    assert_eq!(got, vec![args(&["RPUSH", "L", "\r\n"])]);
    assert_eq!(
        run(&rpush_with_header(b"$536870912\r\n", b"")),
        (vec![], End::Wait)
    );
}

#[test]
fn a_payload_must_end_with_crlf() {
    // Redis skips the two bytes after a payload unseen: `$1\r\nxAB` pushed "x", and
    // `x\n` / `x\r` then PING desynchronized it ("unknown command '1'"). We refuse them.
    for bad in [&b"xAB"[..], b"x\n*1\r\n", b"x\r*1\r\n", b"x\n\r"] {
        assert_refused(&rpush_with_header(b"$1\r\n", bad), UnterminatedBulk);
    }
    // Waiting for the terminator is not refusing it.
    assert_eq!(
        run(&rpush_with_header(b"$1\r\n", b"x\r")),
        (vec![], End::Wait)
    );
}

#[test]
fn malformed_input_is_a_protocol_error() {
    let limits = Limits {
        max_bulk_len: 1 << 20,
        max_multibulk_len: 1000,
    };
    for bad in [
        &b"*1\r\n:1\r\n"[..],
        b"*1\r\n$-5\r\n",
        b"*2147483647\r\n",
        b"*1\r\n$9999999999\r\n",
        b"*1\r\n$3\r\nGETxx",
        b"*x\r\n",
        b"*1\r\n$abc\r\n",
    ] {
        let mut dec = RequestDecoder::new(limits);
        let mut buf = BytesMut::from(bad);
        assert!(dec.decode(&mut buf).is_err(), "accepted {}", show(bad));
    }
}

#[test]
fn a_frame_past_four_gib_is_refused_not_wrapped() {
    // Argument offsets are u32; with a limit above 4 GiB the header itself is refused.
    let mut dec = RequestDecoder::new(Limits {
        max_bulk_len: usize::MAX,
        max_multibulk_len: 4,
    });
    let (_, end) = run_with(&mut dec, b"*1\r\n$4294967290\r\n");
    assert_eq!(end, End::Refused(InvalidBulkLength));
}

// === inline commands ===

#[test]
fn multibulk_and_inline_decode_to_the_same_arguments() {
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nGET k\r\nPING\r\n\r\n*0\r\n"[..]);
    let got = decode_all(&mut dec, &mut buf).unwrap();
    assert_eq!(
        got,
        vec![args(&["GET", "k"]), args(&["GET", "k"]), args(&["PING"])]
    );
    assert!(buf.is_empty());
}

#[test]
fn inline_quotes_follow_redis_rules() {
    assert_eq!(
        split(br#"SET "a b" 'c d' "\x41\n""#).unwrap(),
        args(&["SET", "a b", "c d", "A\n"])
    );
    assert_eq!(split(br#"SET "a"#), Err(UnbalancedQuotes));
}

#[test]
fn inline_lines_split_as_redis_splits_them() {
    // `RPUSH L <rest>` sent inline to redis-server 7.0.15; LRANGE L 0 -1 afterwards.
    let cases: [(&[u8], &[&[u8]]); 21] = [
        (b"a b", &[b"a", b"b"]),
        (b"a\x0bb", &[b"a\x0bb"]), // \v and \f do not end an argument...
        (b"a\x0cb", &[b"a\x0cb"]),
        (b"a\x0b b", &[b"a\x0b", b"b"]), // ...but are skipped between arguments
        (b"\x0b\x0ca", &[b"a"]),
        (b"a\rb", &[b"a", b"b"]),
        (b"a\r", &[b"a"]),
        (b"a\tb", &[b"a", b"b"]),
        (b"a'b c'", &[b"ab c"]), // a quote may start mid-argument
        (b"\"a\"\x0bb", &[b"a", b"b"]),
        (b"\"a\"\x0cb", &[b"a", b"b"]),
        (br#""\x+f""#, &[b"x+f"]), // \x needs two hex digits, else it is "x"
        (br#""\x4g""#, &[b"x4g"]),
        (br#""\x41\X42\q\n""#, &[b"AX42q\n"]),
        (br#""\xAa""#, &[b"\xaa"]),
        (br"'a\'b' 'c\d'", &[b"a'b", b"c\\d"]),
        (br#""""#, &[b""]),
        (b"'' x", &[b"", b"x"]),
        (br#""a\"b""#, &[b"a\"b"]),
        (b"\x80\xff", &[b"\x80\xff"]),
        (b"\"a\rb\"", &[b"a\rb"]),
    ];
    for (rest, want) in cases {
        let line = [&b"RPUSH L "[..], rest, b"\r\n"].concat();
        let mut expect = args(&["RPUSH", "L"]);
        expect.extend(want.iter().map(|w| w.to_vec()));
        assert_eq!(run(&line), (vec![expect], End::Done), "{}", show(rest));
    }
    // Redis: "-ERR Protocol error: unbalanced quotes in request" for each.
    for bad in [
        &b"a\"b c\"d"[..],
        b"\"a\"b",
        br#""abc\""#,
        b"\"ab",
        br#""a""b""#,
        br#""a\"#,
    ] {
        let line = [&b"RPUSH L "[..], bad, b"\r\n"].concat();
        assert_refused(&line, UnbalancedQuotes);
    }
}

#[test]
fn inline_line_ends_and_blank_lines_follow_redis() {
    // `\n` alone ends a line; one `\r` before it is dropped; blank lines give no reply.
    assert_eq!(run(b"PING\n"), (vec![args(&["PING"])], End::Done));
    assert_eq!(run(b"PING\r\r\n"), (vec![args(&["PING"])], End::Done));
    for blank in [&b"\r\n"[..], b"\n", b"   \r\n", b"\x0b\r\n"] {
        assert_eq!(run(blank), (vec![], End::Done), "{}", show(blank));
    }
    // `a\n\r` then a multibulk PING: Redis ran "a", then an inline "\r*1\r\n": "*1".
    assert_eq!(
        run(b"GET a\n\r*1\r\n"),
        (vec![args(&["GET", "a"]), args(&["*1"])], End::Done)
    );
}

#[test]
fn nul_in_an_inline_line_is_refused() {
    // Redis searches for `\n` with strchr, which stops at NUL: `RPUSH L a\0b\r\n` waited
    // forever (until 64 KiB, then "too big inline request"). We refuse at the NUL.
    assert_refused(b"RPUSH L a\0b\r\n", NulInInline);
    assert_refused(b"PING\0", NulInInline);
    // A NUL on the next line does not hold up this one.
    let (got, end) = run(b"PING\r\nGET \0");
    assert_eq!(
        (got, end),
        (vec![args(&["PING"])], End::Refused(NulInInline))
    );
}

#[test]
fn inline_lines_are_capped_at_64_kib() {
    let mut line = b"GET ".to_vec();
    line.resize(MAX_INLINE, b'a');
    line.extend_from_slice(b"\n");
    assert_eq!(run(&line).1, End::Done);
    line.truncate(MAX_INLINE);
    assert_eq!(run(&line).1, End::Wait);
    line.push(b'a');
    assert_eq!(run(&line).1, End::Refused(InlineTooBig));
    line.extend_from_slice(b"\r\n");
    assert_eq!(run(&line).1, End::Refused(InlineTooBig));
}

// === limits before AUTH ===

fn pre_auth() -> RequestDecoder {
    let mut dec = RequestDecoder::default();
    dec.set_pre_auth_limits(Some(Limits::UNAUTHENTICATED));
    dec
}

#[test]
fn unauthenticated_limits_match_redis() {
    // redis-server --requirepass: `*11` and `$16385` refused with these errors; `*10` and
    // `$16384` waited for their data.
    assert_eq!(run_with(&mut pre_auth(), b"*10\r\n").1, End::Wait);
    assert_eq!(
        run_with(&mut pre_auth(), b"*11\r\n").1,
        End::Refused(UnauthenticatedMultibulkLength)
    );
    assert_eq!(run_with(&mut pre_auth(), b"*1\r\n$16384\r\n").1, End::Wait);
    assert_eq!(
        run_with(&mut pre_auth(), b"*1\r\n$16385\r\n").1,
        End::Refused(UnauthenticatedBulkLength)
    );
    // Over the ordinary limits it is the ordinary error, as in Redis.
    assert_eq!(
        run_with(&mut pre_auth(), b"*1\r\n$536870913\r\n").1,
        End::Refused(InvalidBulkLength)
    );
    let inline_11 = b"a b c d e f g h i j k\r\n";
    assert_eq!(
        run_with(&mut pre_auth(), inline_11).1,
        End::Refused(UnauthenticatedMultibulkLength)
    );
    assert_eq!(run(inline_11).1, End::Done);
}

#[test]
fn lifting_pre_auth_limits_applies_to_the_next_frame() {
    // As in Redis, `AUTH pw` then `*11 ...` in one read: the AUTH runs first, so the long
    // frame is parsed after the session lifted the limits.
    let mut dec = pre_auth();
    let mut buf = BytesMut::from(&b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*11\r\n"[..]);
    buf.extend_from_slice(&b"$1\r\na\r\n".repeat(11));
    let auth = dec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(auth.arg(0), b"AUTH");
    dec.set_pre_auth_limits(None);
    assert_eq!(dec.decode(&mut buf).unwrap().unwrap().argc(), 11);
    assert_eq!(dec.limits(), Limits::default());
}

#[test]
fn new_limits_apply_to_a_frame_still_within_its_headers() {
    // A count not yet complete is checked against the limits in force once it is.
    let mut dec = pre_auth();
    let mut buf = BytesMut::from(&b"*1"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    dec.set_pre_auth_limits(None);
    buf.extend_from_slice(b"1\r\n");
    assert_eq!(dec.decode(&mut buf), Ok(None));
    // Its arguments are checked as their headers arrive: tightened now, the next is refused.
    buf.extend_from_slice(b"$1\r\na\r\n");
    assert_eq!(dec.decode(&mut buf), Ok(None));
    dec.set_pre_auth_limits(Some(Limits::UNAUTHENTICATED));
    buf.extend_from_slice(b"$16385\r\n");
    assert_eq!(dec.decode(&mut buf), Err(UnauthenticatedBulkLength));
    // A bulk whose header was accepted keeps its length.
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*1\r\n$20000\r\n"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    dec.set_limits(Limits::UNAUTHENTICATED);
    buf.extend_from_slice(&[b'v'; 20000]);
    buf.extend_from_slice(b"\r\n");
    assert_eq!(dec.decode(&mut buf).unwrap().unwrap().arg(0).len(), 20000);
}

#[test]
fn header_limits_apply_before_the_data_arrives() {
    let mut dec = RequestDecoder::new(Limits {
        max_bulk_len: 10,
        max_multibulk_len: 4,
    });
    assert_eq!(
        dec.decode(&mut BytesMut::from(&b"*5\r\n"[..])),
        Err(ProtocolError::InvalidMultibulkLength)
    );
    let mut dec = RequestDecoder::new(Limits {
        max_bulk_len: 10,
        max_multibulk_len: 4,
    });
    assert_eq!(
        dec.decode(&mut BytesMut::from(&b"*1\r\n$11\r\n"[..])),
        Err(ProtocolError::InvalidBulkLength)
    );
}

// === reservation ===

#[test]
fn partial_frame_is_none_and_resumes() {
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$5\r\nhel"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert_eq!(dec.wanted(&buf), 4);
    buf.extend_from_slice(b"lo\r\n");
    let r = dec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(r.arg(1), b"hello");
    assert_eq!(r.as_bytes().as_ref(), b"*2\r\n$3\r\nSET\r\n$5\r\nhello\r\n");
}

#[test]
fn wanted_is_bounded_by_what_was_received() {
    // A client announcing 512 MiB and sending nothing more gets 64 KiB of room, not 512 MiB.
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*1\r\n$536870912\r\n"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert_eq!(dec.wanted(&buf), WANTED_FLOOR);
    assert_eq!(dec.wanted_capped(&buf, usize::MAX), 536870912 + 2);
    assert_eq!(dec.wanted_capped(&buf, 100), 100);
    // Once 1 MiB has arrived, at most another 1 MiB.
    buf.resize(buf.len() + (1 << 20), b'v');
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert_eq!(dec.wanted(&buf), buf.len());
    // Nothing is wanted before a header is complete, or between frames.
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*1\r\n$5368"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert_eq!(dec.wanted(&buf), 0);
}

// === encoding ===

#[test]
fn encode_request_matches_from_args() {
    let args: [&[u8]; 3] = [b"MGET", b"a", b""];
    assert_eq!(
        encode_request(3, args, 8),
        Request::from_args(&args).as_bytes()
    );
}

#[test]
fn from_args_round_trips() {
    let r = Request::from_args(&["MGET", "a", ""]);
    let mut buf = BytesMut::from(r.as_bytes().as_ref());
    let got = RequestDecoder::default().decode(&mut buf).unwrap().unwrap();
    assert_eq!(got, r);
    assert_eq!(got.arg(2), b"");
}

// === properties ===

fn arb_request() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6)
}

/// Bytes that matter to the grammar, to make mutated headers likely.
fn arb_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        any::<u8>(),
        prop::sample::select(b"0123456789+-*$\r\n \0\"'\\x\x0b".to_vec()),
    ]
}

proptest! {
    #[test]
    fn any_split_of_a_valid_stream_decodes_to_the_same_requests(
        reqs in prop::collection::vec(arb_request(), 1..8),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let stream: Vec<u8> = reqs.iter().flat_map(|r| Request::from_args(r).as_bytes().to_vec()).collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        cuts.sort_unstable();
        let mut dec = RequestDecoder::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        let mut last = 0;
        for cut in cuts.into_iter().chain([stream.len()]) {
            buf.extend_from_slice(&stream[last..cut]);
            last = cut;
            got.extend(decode_all(&mut dec, &mut buf).unwrap());
        }
        prop_assert_eq!(got, reqs);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn decoder_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let mut dec = RequestDecoder::default();
        let mut buf = BytesMut::from(&bytes[..]);
        let _ = decode_all(&mut dec, &mut buf);
    }

    /// Whatever is accepted re-decodes, from its own bytes, to the same arguments, and the
    /// bytes taken off the buffer are exactly the multibulk frame returned.
    #[test]
    fn accepted_frames_are_self_consistent(
        reqs in prop::collection::vec(arb_request(), 1..4),
        edits in prop::collection::vec((any::<prop::sample::Index>(), arb_byte(), 0..3u8), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut stream: Vec<u8> = reqs.iter().flat_map(|r| Request::from_args(r).as_bytes().to_vec()).collect();
        for (at, byte, op) in edits {
            let i = at.index(stream.len());
            match op {
                0 => stream[i] = byte,
                1 => stream.insert(i, byte),
                _ => { stream.remove(i); }
            }
        }
        let cut = cut.index(stream.len() + 1);
        let mut dec = RequestDecoder::default();
        let mut buf = BytesMut::from(&stream[..cut]);
        let mut fed = cut;
        loop {
            let before = buf.len();
            match dec.decode(&mut buf) {
                Ok(Some(r)) => {
                    let args: Args = r.args().map(<[u8]>::to_vec).collect();
                    let mut again = BytesMut::from(r.as_bytes().as_ref());
                    let re = RequestDecoder::default().decode(&mut again).unwrap().unwrap();
                    prop_assert!(again.is_empty());
                    prop_assert_eq!(re.args().map(<[u8]>::to_vec).collect::<Args>(), args);
                    // The bytes taken are this one request (after any skipped blank or
                    // `*0` frames): decoded alone they give it again, and nothing else.
                    let start = fed - before;
                    let mut alone = BytesMut::from(&stream[start..fed - buf.len()]);
                    let mut fresh = RequestDecoder::default();
                    prop_assert_eq!(fresh.decode(&mut alone), Ok(Some(r.clone())));
                    prop_assert!(alone.is_empty());
                }
                Ok(None) if fed < stream.len() => {
                    buf.extend_from_slice(&stream[fed..]);
                    fed = stream.len();
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
}
