//! Request decoding, reply scanning and reply encoding throughput.
//! Run: `cargo bench -p tessera-resp --bench resp_decode`

use bytes::BytesMut;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tessera_resp::{Frame, Proto, ReplyScanner, Request, RequestDecoder};

fn pipeline_of_sets(depth: usize, value: usize) -> Vec<u8> {
    let v = vec![b'x'; value];
    (0..depth)
        .flat_map(|i| {
            Request::from_args(&[&b"SET"[..], format!("key:{i}").as_bytes(), &v])
                .as_bytes()
                .to_vec()
        })
        .collect()
}

fn decode_all(stream: &[u8]) -> usize {
    let mut dec = RequestDecoder::default();
    let mut buf = BytesMut::from(stream);
    let mut n = 0;
    while let Some(r) = dec.decode(&mut buf).expect("valid stream") {
        n += r.argc();
    }
    n
}

fn decode_pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("resp_decode");
    for depth in [1, 16, 128] {
        let bytes = pipeline_of_sets(depth, 64);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(depth), &bytes, |b, s| {
            b.iter(|| decode_all(black_box(s)))
        });
    }
    let inline = b"GET key:1\r\n".repeat(16);
    group.throughput(Throughput::Bytes(inline.len() as u64));
    group.bench_function("inline_16", |b| b.iter(|| decode_all(black_box(&inline))));
    group.finish();
}

fn scan_replies(c: &mut Criterion) {
    let mut group = c.benchmark_group("reply_scan");
    let mut stream = Vec::new();
    for i in 0..128 {
        stream.extend_from_slice(format!("$64\r\n{:064}\r\n", i).as_bytes());
        stream.extend_from_slice(b"*3\r\n$1\r\na\r\n$-1\r\n:7\r\n");
    }
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.bench_function("mixed_256", |b| {
        b.iter(|| {
            let mut s = ReplyScanner::default();
            let mut at = 0;
            while let Some(n) = s.next_len(black_box(&stream[at..])).expect("valid") {
                at += n;
            }
            at
        })
    });
    group.finish();
}

fn encode_frames(c: &mut Criterion) {
    let mut group = c.benchmark_group("resp_encode");
    let hello = Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("redis")),
        (Frame::bulk("proto"), Frame::Integer(3)),
        (Frame::bulk("modules"), Frame::Array(vec![])),
    ]);
    let mut out = BytesMut::with_capacity(4096);
    for proto in [Proto::Resp2, Proto::Resp3] {
        group.bench_function(format!("hello_{proto:?}"), |b| {
            b.iter(|| {
                out.clear();
                black_box(&hello).encode(proto, &mut out);
                out.len()
            })
        });
    }
    group.bench_function("request_from_args", |b| {
        b.iter(|| Request::from_args(black_box(&["MGET", "a", "b", "c"])).argc())
    });
    group.finish();
}

criterion_group!(benches, decode_pipeline, scan_replies, encode_frames);
criterion_main!(benches);
