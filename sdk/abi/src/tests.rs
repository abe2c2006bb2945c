//! Round trips of every ABI layout, and readers refusing malformed input.

use super::*;
use std::vec::Vec;

#[test]
fn command_ids_follow_the_sorted_names() {
    assert_eq!(command_id("get"), cmd::GET);
    assert_eq!(command_id("SET"), cmd::SET);
    assert_eq!(command_id("config|get"), cmd::CONFIG);
    assert_eq!(command_id("nosuch"), 0);
    assert_eq!(command_id(""), 0);
    assert_eq!(command_name(cmd::HSET), "HSET");
    assert!(COMMAND_NAMES[1..].windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn results_pack_and_unpack() {
    for &(a, c, l) in &[(0u8, 0u32, 0u32), (3, 0xFF_FFFF, u32::MAX), (255, 7, 12)] {
        assert_eq!(unpack(pack(a, c, l)), (a, c, l));
    }
    assert_eq!(pack(action::PASS, 0, 0), 0);
}

#[test]
fn command_tables_round_trip_with_elided_values() {
    let args = [
        ArgIn {
            bytes: b"SET",
            key: false,
            elide: false,
        },
        ArgIn {
            bytes: b"k1",
            key: true,
            elide: false,
        },
        ArgIn {
            bytes: b"a big value",
            key: false,
            elide: true,
        },
    ];
    let size = command_size(args.iter().copied());
    assert_eq!(size, CMD_HEADER + 3 * ARG_ENTRY + 5);
    let mut buf = std::vec![0u8; size];
    let n = encode_command(&mut buf, class::WRITE, 3, args.iter().copied()).unwrap();
    assert_eq!(n, size);
    let view = CommandView::parse(&buf).unwrap();
    assert_eq!(view.len(), 3);
    assert_eq!(view.class(), class::WRITE);
    assert_eq!(view.flags(), CMD_VALUES_ELIDED);
    assert_eq!(view.arg(0).unwrap().bytes, Some(&b"SET"[..]));
    assert!(view.arg(1).unwrap().key);
    let v = view.arg(2).unwrap();
    assert_eq!((v.bytes, v.len, v.key), (None, 11, false));
    assert!(view.arg(3).is_none());
    // Too small a buffer is refused, not a panic.
    assert!(encode_command(&mut buf[..size - 1], 0, 3, args.iter().copied()).is_none());
}

#[test]
fn malformed_tables_are_refused() {
    let mut buf = std::vec![0u8; 64];
    buf[0] = 200; // nargs beyond the buffer
    assert!(CommandView::parse(&buf).is_none());
    let mut buf = std::vec![0u8; CMD_HEADER + ARG_ENTRY];
    buf[0] = 1;
    buf[CMD_HEADER..CMD_HEADER + 4].copy_from_slice(&1000u32.to_le_bytes());
    buf[CMD_HEADER + 4..CMD_HEADER + 8].copy_from_slice(&4u32.to_le_bytes());
    assert!(CommandView::parse(&buf).is_none());
    assert!(RepliesView::parse(&[1, 0, 0, 0]).is_none());
}

#[test]
fn rewrite_blocks_round_trip() {
    let mut out = Vec::new();
    let mut w = RewriteWriter::begin(&mut out, merge::SUM, 42);
    w.command(2).arg(b"HLEN").arg_parts(&[b"big", b":{0}"]);
    w.command(3).arg(b"HGET").arg(b"big:{1}").input(2);
    let count = w.count();
    let view = RewriteView::parse(&out, count).unwrap();
    assert_eq!((view.merge, view.ctx, view.count()), (merge::SUM, 42, 2));
    let cmds: Vec<Vec<RewriteArg<'_>>> = view
        .commands()
        .map(|c| c.unwrap().map(|a| a.unwrap()).collect())
        .collect();
    assert_eq!(
        cmds,
        std::vec![
            std::vec![RewriteArg::Bytes(b"HLEN"), RewriteArg::Bytes(b"big:{0}")],
            std::vec![
                RewriteArg::Bytes(b"HGET"),
                RewriteArg::Bytes(b"big:{1}"),
                RewriteArg::Input(2)
            ],
        ]
    );
    // Claiming more commands than written, or truncating, is an error.
    assert_eq!(
        RewriteView::parse(&out, 3).unwrap_err(),
        RewriteError::Truncated
    );
    assert!(RewriteView::parse(&out[..out.len() - 1], 2).is_err());
    assert_eq!(
        RewriteView::parse(&out, 0).unwrap_err(),
        RewriteError::NoCommands
    );
}

#[test]
fn manifests_round_trip() {
    let m = ManifestBuilder {
        flags: MF_WANT_CLOSE,
        classes: class::ADMIN,
        tick_ms: 1000,
        commands: std::vec![(cmd::SET, HOOK_VALUES), (cmd::GET, 0)],
        prefixes: std::vec![b"big:".to_vec()],
        ..ManifestBuilder::default()
    };
    let mut out = Vec::new();
    m.encode(&mut out);
    let v = ManifestView::parse(&out).unwrap();
    assert_eq!(
        (v.version, v.flags, v.classes, v.tick_ms),
        (1, MF_WANT_CLOSE, class::ADMIN, 1000)
    );
    assert_eq!(
        v.commands().collect::<Vec<_>>(),
        std::vec![(cmd::SET, HOOK_VALUES), (cmd::GET, 0)]
    );
    assert_eq!(v.prefixes().collect::<Vec<_>>(), std::vec![&b"big:"[..]]);
    assert!(ManifestView::parse(&out[..out.len() - 1]).is_none());
}

#[test]
fn replies_and_string_lists_round_trip() {
    let replies: [&[u8]; 2] = [b":1\r\n", b"$-1\r\n"];
    let mut buf = std::vec![0u8; replies_size(replies.iter().copied())];
    encode_replies(&mut buf, 2, replies.iter().copied()).unwrap();
    let v = RepliesView::parse(&buf).unwrap();
    assert_eq!(
        (v.get(0), v.get(1), v.get(2)),
        (Some(&b":1\r\n"[..]), Some(&b"$-1\r\n"[..]), None)
    );
    let mut l = Vec::new();
    encode_string_list([&b"cmd"[..], b"tenant"], &mut l);
    let items: Vec<_> = string_list(&l).collect();
    assert_eq!(items, std::vec![Some(&b"cmd"[..]), Some(&b"tenant"[..])]);
    assert_eq!(string_list(&l[..5]).collect::<Vec<_>>(), std::vec![None]);
}

#[test]
fn the_denied_to_all_section_is_optional_and_backward_compatible() {
    let mut m = ManifestBuilder {
        commands: std::vec![(cmd::FLUSHALL, 0)],
        prefixes: std::vec![b"p:".to_vec()],
        ..ManifestBuilder::default()
    };
    // Without declarations: no flag, no section, byte for byte the manifest of before.
    let mut plain = Vec::new();
    m.encode(&mut plain);
    let v = ManifestView::parse(&plain).unwrap();
    assert_eq!((v.flags & MF_DENIES, v.denied_classes), (0, 0));
    assert_eq!(v.denied_names().count(), 0);

    m.denied_classes = class::ADMIN;
    m.denied = std::vec![b"FLUSHALL".to_vec(), b"CONFIG|SET".to_vec()];
    let mut out = Vec::new();
    m.encode(&mut out);
    let v = ManifestView::parse(&out).unwrap();
    assert_eq!(
        (v.flags & MF_DENIES, v.denied_classes),
        (MF_DENIES, class::ADMIN)
    );
    assert_eq!(
        v.denied_names().collect::<Vec<_>>(),
        std::vec![&b"FLUSHALL"[..], b"CONFIG|SET"]
    );
    // What a host without the section reads is unchanged: hooks and prefixes.
    assert_eq!(
        v.commands().collect::<Vec<_>>(),
        std::vec![(cmd::FLUSHALL, 0)]
    );
    assert_eq!(v.prefixes().collect::<Vec<_>>(), std::vec![&b"p:"[..]]);
    // A flag without (all of) its section is malformed, never read past the end.
    for cut in 1..=out.len() - plain.len() {
        assert!(
            ManifestView::parse(&out[..out.len() - cut]).is_none(),
            "cut {cut}"
        );
    }
    // Too many or too long names are refused.
    let mut big = plain.clone();
    big[4..8].copy_from_slice(&MF_DENIES.to_le_bytes());
    big.extend_from_slice(&0u32.to_le_bytes());
    big.extend_from_slice(&((MAX_DENIED_NAMES + 1) as u32).to_le_bytes());
    assert!(ManifestView::parse(&big).is_none());
    let long = ManifestBuilder {
        denied: std::vec![std::vec![b'A'; MAX_DENIED_NAME_LEN + 1]],
        ..ManifestBuilder::default()
    };
    let mut out = Vec::new();
    long.encode(&mut out);
    assert!(ManifestView::parse(&out).is_none());
}

#[test]
fn reply_heads_carry_the_first_line_and_the_full_size() {
    let big = format!("${}\r\n{}\r\n", 100_000, "x".repeat(100_000));
    let long_error = format!("-ERR {}\r\n", "e".repeat(200));
    let replies: [&[u8]; 4] = [
        b"+OK\r\n",
        big.as_bytes(),
        long_error.as_bytes(),
        b"*2\r\n:1\r\n:2\r\n",
    ];
    let mut buf = vec![0u8; reply_heads_size(&replies)];
    assert!(buf.len() < 200, "heads, not copies: {}", buf.len());
    let end = encode_reply_heads(&mut buf, &replies).unwrap();
    assert_eq!(end, buf.len());
    let v = RepliesView::parse(&buf).unwrap();
    assert!(v.heads());
    assert_eq!(v.get(0), Some(&b"+OK\r\n"[..]));
    assert_eq!(v.get(1), Some(&b"$100000\r\n"[..]));
    assert_eq!(v.size(1), Some(big.len()));
    assert_eq!(v.get(2).unwrap().len(), REPLY_HEAD_MAX);
    assert!(v.get(2).unwrap().starts_with(b"-ERR eee"));
    assert_eq!(v.get(3), Some(&b"*2\r\n"[..]));
    assert_eq!(v.size(3), Some(12));
    assert_eq!(v.size(4), None);
    // A table cut before its sizes is refused.
    assert!(RepliesView::parse(&buf[..REPLIES_HEADER + 4 * ARG_ENTRY + 8]).is_none());
    // Whole replies: the size is the length.
    let mut whole = vec![0u8; replies_size(replies.iter().copied())];
    encode_replies(&mut whole, 4, replies.iter().copied()).unwrap();
    let w = RepliesView::parse(&whole).unwrap();
    assert!(!w.heads());
    assert_eq!(w.size(1), Some(big.len()));
}

#[test]
fn the_gate_section_follows_the_denies_and_decides_which_commands_reach_the_plugin() {
    let gate = Gate {
        classes: class::WRITE,
        max_value: 10,
        prefixes: std::vec![b"frozen:".to_vec()],
    };
    for denied in [std::vec![], std::vec![b"FLUSHALL".to_vec()]] {
        let m = ManifestBuilder {
            classes: class::WRITE | class::ADMIN,
            commands: std::vec![(cmd::KEYS, 0)],
            denied: denied.clone(),
            gate: Some(gate.clone()),
            ..ManifestBuilder::default()
        };
        let mut out = Vec::new();
        m.encode(&mut out);
        let v = ManifestView::parse(&out).unwrap();
        assert_eq!(v.flags & MF_GATE, MF_GATE);
        assert_eq!(v.denied_names().count(), denied.len());
        assert_eq!(Gate::from_manifest(&v).as_ref(), Some(&gate));
        // A flag without (all of) its section is malformed, never read past the end.
        for cut in 1..=20 {
            assert!(
                ManifestView::parse(&out[..out.len() - cut]).is_none(),
                "cut {cut}"
            );
        }
    }
    // Without the flag there is no gate, and the bytes are those of before.
    let mut plain = Vec::new();
    ManifestBuilder::default().encode(&mut plain);
    assert!(Gate::from_manifest(&ManifestView::parse(&plain).unwrap()).is_none());
    // Too many or too long prefixes are refused.
    let mut out = Vec::new();
    ManifestBuilder {
        gate: Some(Gate {
            prefixes: std::vec![std::vec![b'p'; MAX_GATE_PREFIX_LEN + 1]],
            ..gate.clone()
        }),
        ..ManifestBuilder::default()
    }
    .encode(&mut out);
    assert!(ManifestView::parse(&out).is_none());
    let mut out = Vec::new();
    ManifestBuilder {
        gate: Some(Gate {
            prefixes: std::vec![b"p".to_vec(); MAX_GATE_PREFIXES + 1],
            ..gate.clone()
        }),
        ..ManifestBuilder::default()
    }
    .encode(&mut out);
    assert!(ManifestView::parse(&out).is_none());

    // Which commands it applies to: hooked only through the gated classes.
    let hooked = class::WRITE | class::ADMIN;
    assert!(gate.applies(false, false, hooked, class::WRITE));
    assert!(!gate.applies(true, false, hooked, class::WRITE), "listed");
    assert!(!gate.applies(false, true, hooked, class::WRITE), "all");
    assert!(
        !gate.applies(false, false, hooked, class::WRITE | class::ADMIN),
        "an ungated class"
    );
    // What opens it: a key under a prefix, or a value over the bound.
    let keys = |ks: &'static [&'static [u8]]| ks.iter().copied();
    assert!(!gate.opens(keys(&[b"a"]), [10].into_iter()));
    assert!(gate.opens(keys(&[b"frozen:a"]), [1].into_iter()));
    assert!(gate.opens(keys(&[b"a", b"frozen:b"]), core::iter::empty()));
    assert!(gate.opens(keys(&[b"a"]), [3, 11].into_iter()));
    let unbounded = Gate {
        max_value: u32::MAX,
        prefixes: std::vec![],
        ..gate
    };
    assert!(!unbounded.opens(keys(&[b"frozen:a"]), [usize::MAX].into_iter()));
}
