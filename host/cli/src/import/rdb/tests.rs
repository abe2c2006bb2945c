//! Hand-built RDB files: each value encoding, expire times, and hostile files.

use super::*;
use crate::import::crc64::crc64;
use crate::import::value::{Item, Value};

fn string(b: &[u8]) -> Vec<u8> {
    assert!(b.len() < 64);
    let mut v = vec![b.len() as u8];
    v.extend_from_slice(b);
    v
}

/// `REDIS0011`, the body, EOF and a valid checksum.
fn file(body: &[u8]) -> Vec<u8> {
    let mut f = b"REDIS0011".to_vec();
    f.extend_from_slice(body);
    f.push(0xFF);
    let crc = crc64(0, &f);
    f.extend(crc.to_le_bytes());
    f
}

fn entries(data: &[u8]) -> Result<Vec<Item>, RdbError> {
    let mut p = Parser::new(data)?;
    let mut out = Vec::new();
    while let Some(i) = p.next_item()? {
        out.push(i);
    }
    Ok(out)
}

fn one_value(body: &[u8]) -> Value {
    match entries(&file(body)).unwrap().pop() {
        Some(Item::Entry(e)) => e.value,
        other => panic!("expected a key, got {other:?}"),
    }
}

#[test]
fn strings_in_every_encoding() {
    let mut body = vec![0xFA];
    body.extend(string(b"redis-ver"));
    body.extend(string(b"7.2.0"));
    body.extend([0xFE, 0x00, 0xFB, 0x03, 0x01]);
    body.extend([0xFC]);
    body.extend(1_900_000_000_000u64.to_le_bytes());
    body.push(0);
    body.extend(string(b"raw"));
    body.extend(string(b"hello"));
    body.push(0);
    body.extend(string(b"int"));
    body.extend([0xC1, 0x39, 0x30]); // int16 12345
    body.push(0);
    body.extend(string(b"lzf"));
    body.extend([0xC3, 0x06, 0x09, 2, b'a', b'b', b'c', 4 << 5, 2]);
    let items = entries(&file(&body)).unwrap();
    assert!(matches!(&items[0], Item::Aux { key, .. } if key == b"redis-ver"));
    let Item::Entry(raw) = &items[1] else {
        panic!()
    };
    assert_eq!(raw.expire_ms, Some(1_900_000_000_000));
    assert_eq!(raw.value, Value::String(b"hello".to_vec()));
    let Item::Entry(int) = &items[2] else {
        panic!()
    };
    assert_eq!(
        (int.expire_ms, &int.value),
        (None, &Value::String(b"12345".to_vec()))
    );
    let Item::Entry(lzf) = &items[3] else {
        panic!()
    };
    assert_eq!(lzf.value, Value::String(b"abcabcabc".to_vec()));
}

#[test]
fn zset_with_binary_scores_and_an_intset() {
    let mut body = vec![5];
    body.extend(string(b"z"));
    body.push(1);
    body.extend(string(b"m"));
    body.extend(2.5f64.to_bits().to_le_bytes());
    assert_eq!(one_value(&body), Value::ZSet(vec![(b"m".to_vec(), 2.5)]));
    let mut blob = 2u32.to_le_bytes().to_vec();
    blob.extend(1u32.to_le_bytes());
    blob.extend(7i16.to_le_bytes());
    let mut body = vec![11];
    body.extend(string(b"s"));
    body.extend(string(&blob));
    assert_eq!(one_value(&body), Value::Set(vec![b"7".to_vec()]));
}

#[test]
fn a_bad_checksum_is_refused_before_any_item() {
    let mut f = file(&[0, 1, b'k', 1, b'v']);
    let n = f.len();
    f[n - 9] ^= 0xFF; // flip the EOF byte... and so the checksum no longer matches
    assert!(matches!(Parser::new(&f), Err(RdbError::Checksum { .. })));
}

#[test]
fn truncated_files_and_huge_lengths_are_errors() {
    let f = file(&[0, 1, b'k', 1, b'v']);
    for cut in 0..f.len() - 8 {
        // A cut file also loses its checksum: take the checksum off to reach the parser.
        let mut short = f[..cut].to_vec();
        short.extend([0u8; 8]);
        let r = entries(&short);
        assert!(r.is_err(), "cut at {cut} parsed: {r:?}");
    }
    // A list claiming 2^32 elements in a tiny file.
    let mut body = vec![1];
    body.extend(string(b"l"));
    body.extend([0x80, 0xFF, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(
        entries(&file(&body)),
        Err(RdbError::Malformed { .. })
    ));
    // A string claiming 2^64 - 1 bytes.
    let mut body = vec![0];
    body.extend(string(b"s"));
    body.extend([0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(
        entries(&file(&body)),
        Err(RdbError::Truncated { .. })
    ));
}

#[test]
fn newer_versions_and_module_types_are_refused_clearly() {
    let mut f = b"REDIS0012".to_vec();
    f.extend([0xFF; 9]);
    assert!(matches!(
        Parser::new(&f),
        Err(RdbError::UnsupportedVersion(12))
    ));
    let mut body = vec![7];
    body.extend(string(b"mykey"));
    body.extend([0x81]);
    body.extend(0x1234_5678_9abc_def0u64.to_be_bytes());
    let err = entries(&file(&body)).unwrap_err();
    assert!(err.to_string().contains("\"mykey\""), "{err}");
    assert!(matches!(err, RdbError::ModuleType { .. }));
}

#[test]
fn random_bytes_never_panic() {
    let mut seed = 0x1234_5678u64;
    let base = file(&[0, 1, b'k', 1, b'v', 14, 1, b'q', 1, 0x0B]);
    for _ in 0..2000 {
        let mut f = base.clone();
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let at = 9 + (seed >> 33) as usize % (f.len() - 17);
        f[at] = (seed >> 20) as u8;
        let crc = crc64(0, &f[..f.len() - 8]);
        let n = f.len();
        f[n - 8..].copy_from_slice(&crc.to_le_bytes());
        let _ = entries(&f);
    }
}
