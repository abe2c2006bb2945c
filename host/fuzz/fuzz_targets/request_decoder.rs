//! Fuzzes `RequestDecoder` on arbitrary bytes fed in arbitrary pieces, under the ordinary, the
//! pre-auth and small limits: it never panics; every argument lies within its frame and
//! within the limits; a request re-decodes from its own bytes, and from the bytes consumed for
//! it, to itself; a multibulk is forwarded as exactly the bytes it consumed; any split gives
//! the same requests and the same end as decoding all at once; `wanted` stays bounded.
#![no_main]

use arbitrary::Arbitrary;
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tessera_resp::{Limits, ProtocolError, Request, RequestDecoder};

#[derive(Debug, Arbitrary)]
struct Input {
    limits: LimitSet,
    /// Lift the pre-auth limits after this many requests (as a session does after AUTH).
    lift_after: Option<u8>,
    cuts: Vec<u16>,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum LimitSet {
    Default,
    PreAuth,
    Small { bulk: u8, args: u8 },
}

impl LimitSet {
    fn decoder(self) -> RequestDecoder {
        match self {
            LimitSet::Default => RequestDecoder::default(),
            LimitSet::PreAuth => {
                let mut d = RequestDecoder::default();
                d.set_pre_auth_limits(Some(Limits::UNAUTHENTICATED));
                d
            }
            LimitSet::Small { bulk, args } => RequestDecoder::new(Limits {
                max_bulk_len: usize::from(bulk % 64),
                max_multibulk_len: usize::from(args % 8).max(1),
            }),
        }
    }
}

/// Requests as argument lists, and how decoding ended.
type Run = (Vec<Vec<Vec<u8>>>, Option<ProtocolError>);

fuzz_target!(|input: Input| {
    let whole = run(&input, &[]);
    let pieces = run(&input, &input.cuts);
    assert_eq!(whole, pieces, "a split changed the outcome");
});

fn run(input: &Input, cuts: &[u16]) -> Run {
    let data = &input.data;
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (data.len() + 1))
        .collect();
    cuts.sort_unstable();
    cuts.push(data.len());
    let mut dec = input.limits.decoder();
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut fed = 0;
    for cut in cuts {
        buf.extend_from_slice(&data[fed..cut]);
        fed = cut;
        loop {
            if Some(out.len()) == input.lift_after.map(usize::from) {
                dec.set_pre_auth_limits(None);
            }
            let limits = dec.limits();
            let before = buf.len();
            let start = buf.as_ptr() as usize;
            match dec.decode(&mut buf) {
                Ok(Some(req)) => {
                    let consumed = &data[fed - before..fed - buf.len()];
                    check(&req, consumed, start, limits);
                    out.push(req.args().map(<[u8]>::to_vec).collect());
                }
                Ok(None) => {
                    let wanted = dec.wanted(&buf);
                    assert!(wanted <= buf.len().max(64 * 1024), "wanted {wanted}");
                    assert!(wanted <= dec.wanted_capped(&buf, usize::MAX));
                    break;
                }
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fn check(req: &Request, consumed: &[u8], start: usize, limits: Limits) {
    let raw = req.as_bytes();
    assert!(req.argc() >= 1 && req.argc() <= limits.max_multibulk_len);
    for arg in req.args() {
        let at = arg.as_ptr() as usize - raw.as_ptr() as usize;
        assert!(at + arg.len() <= raw.len(), "argument outside its frame");
        assert!(arg.len() <= limits.max_bulk_len);
    }
    // From its own bytes: the same request, all bytes used.
    let mut again = BytesMut::from(raw.as_ref());
    let re = RequestDecoder::default().decode(&mut again);
    assert_eq!(re.as_ref().ok().and_then(Option::as_ref), Some(req));
    assert!(again.is_empty());
    // From the bytes it consumed (skipped blank and `*0` frames, then the request): the same.
    let mut alone = BytesMut::from(consumed);
    let re = RequestDecoder::default().decode(&mut alone);
    assert_eq!(re.as_ref().ok().and_then(Option::as_ref), Some(req));
    assert!(alone.is_empty(), "consumed more than one request");
    // A multibulk shares the read buffer and is exactly the tail of what it consumed.
    let at = raw.as_ptr() as usize;
    if at >= start && at < start + consumed.len() {
        assert_eq!(at - start + raw.len(), consumed.len());
        assert!(consumed.ends_with(raw));
    }
}
