//! What hot-key counting adds to a command: one `record` call (hash, sketch update, top-K
//! offer) for a key already in the table, and for random keys that churn the table.
//! Run: `cargo bench -p tessera --bench hotkeys`

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use tessera::telemetry::{HotKeyRecorder, HotKeys, HotKeysConfig};

fn record(c: &mut Criterion) {
    let hot = Arc::new(HotKeys::new(HotKeysConfig::default(), 1));
    let rec = HotKeyRecorder::new(hot);
    let keys: Vec<String> = (0..100_000).map(|i| format!("key:{i:012}")).collect();
    let mut group = c.benchmark_group("hotkeys");
    group.bench_function("record_hot_key", |b| {
        b.iter(|| rec.record(black_box(b"key:000000012345"), 33, 9))
    });
    let mut i = 0usize;
    group.bench_function("record_random_key_100k", |b| {
        b.iter(|| {
            // A multiplicative step walks the keyspace in a scattered order.
            i = (i + 7_919) % keys.len();
            rec.record(black_box(keys[i].as_bytes()), 33, 9)
        })
    });
    group.bench_function("wants", |b| b.iter(|| black_box(rec.wants())));
    group.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
