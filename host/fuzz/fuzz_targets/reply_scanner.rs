//! Fuzzes `ReplyScanner` on arbitrary bytes: it never panics, every reply length is within
//! the bytes given, and scanning in arbitrary pieces (resuming after each `None`) finds the
//! same boundaries and the same end as scanning everything at once.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_resp::{ProtocolError, ReplyScanner};

/// Reply lengths, and the end: `None` = incomplete tail, `Some(e)` = error.
type Scan = (Vec<usize>, Option<ProtocolError>);

fuzz_target!(|input: (Vec<u16>, Vec<u8>)| {
    let (cuts, data) = input;
    let whole = scan(&data, &[]);
    let pieces = scan(&data, &cuts);
    assert_eq!(whole, pieces, "a split changed the boundaries");
});

fn scan(data: &[u8], cuts: &[u16]) -> Scan {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|&c| usize::from(c) % (data.len() + 1))
        .collect();
    cuts.sort_unstable();
    cuts.push(data.len());
    let mut s = ReplyScanner::default();
    let mut lens = Vec::new();
    let mut at = 0;
    for cut in cuts {
        // A reader only ever shows the scanner more bytes than last time.
        let cut = cut.max(at);
        loop {
            match s.next_len(&data[at..cut]) {
                Ok(Some(n)) => {
                    assert!(
                        n > 0 && at + n <= cut,
                        "reply of {n} bytes at {at} past {cut}"
                    );
                    lens.push(n);
                    at += n;
                }
                Ok(None) => break,
                Err(e) => return (lens, Some(e)),
            }
        }
    }
    (lens, None)
}
