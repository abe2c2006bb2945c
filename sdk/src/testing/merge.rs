//! The host's merges of a rewrite's replies (`sdk/ABI.md`, "Rewrite block"), as the fake host
//! performs them in [`super::Harness::run`].

use crate::Merge;
use crate::resp::{self, Value};

use super::harness::error_reply;

fn is_nil(r: &[u8]) -> bool {
    matches!(r, b"$-1\r\n" | b"*-1\r\n" | b"_\r\n")
}

/// Combines `replies` as the host does for `merge` (not [`Merge::Plugin`]): the first error
/// reply wins; otherwise CONCAT joins arrays/sets/maps (nil counts as empty), SUM adds
/// integers, ALL_OK answers `+OK` when every reply is `+OK`, FIRST_NON_NIL, FIRST and LAST pick
/// one reply.
///
/// # Panics
/// On [`Merge::Plugin`] or on replies the merge cannot combine (a plugin bug worth a failed
/// test).
pub fn merge(merge: Merge, replies: &[Vec<u8>]) -> Vec<u8> {
    if let Some(e) = replies.iter().find(|r| r.first() == Some(&b'-')) {
        return e.clone();
    }
    match merge {
        Merge::Plugin => panic!("Merge::Plugin is merged by the plugin"),
        Merge::First => replies[0].clone(),
        Merge::Last => replies[replies.len() - 1].clone(),
        Merge::FirstNonNil => replies
            .iter()
            .find(|r| !is_nil(r))
            .unwrap_or(&replies[0])
            .clone(),
        Merge::AllOk => match replies.iter().find(|r| r.as_slice() != b"+OK\r\n") {
            Some(r) => r.clone(),
            None => b"+OK\r\n".to_vec(),
        },
        Merge::Sum => {
            let mut total: i64 = 0;
            for r in replies {
                match resp::parse(r) {
                    Ok((Value::Int(n), _)) => total += n,
                    _ => return error_reply("ERR merge: SUM of a non-integer reply"),
                }
            }
            format!(":{total}\r\n").into_bytes()
        }
        Merge::Concat => {
            let mut kind = b'*';
            let mut count = 0usize;
            let mut body = Vec::new();
            for (i, r) in replies.iter().enumerate() {
                if is_nil(r) {
                    continue;
                }
                let seq = match resp::parse(r) {
                    Ok((v @ (Value::Array(_) | Value::Set(_) | Value::Map(_)), _)) => {
                        if i == 0 || count == 0 {
                            kind = r[0];
                        }
                        v.as_seq().expect("aggregate")
                    }
                    _ => return error_reply("ERR merge: CONCAT of a non-array reply"),
                };
                count += seq.len();
                for item in seq.raw_items() {
                    body.extend_from_slice(item);
                }
            }
            let n = if kind == b'%' { count / 2 } else { count };
            let mut out = format!("{}{n}\r\n", kind as char).into_bytes();
            out.extend_from_slice(&body);
            out
        }
    }
}
