//! What hot-key counting adds to a command: one `record` call (hash, sketch update, top-K
//! offer) for a key already in the table, and for random keys that churn the table.
//! Run: `cargo bench -p tessera-proxy --bench hotkeys`

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use tessera_proxy::telemetry::{HotKeyRecorder, HotKeys, HotKeysConfig};

fn record(c: &mut Criterion) {
    let hot = Arc::new(HotKeys::new(HotKeysConfig::default(), 1));
    let rec = HotKeyRecorder::new(hot);
    let mut group = c.benchmark_group("hotkeys");
    group.bench_function("record_hot_key", |b| {
        b.iter(|| rec.record(black_box(b"key:000000012345"), 33, 9))
    });
    // A key of 100 000 built in place each time, as a proxy finds it in the request it just
    // read (a table of 100 000 keys would measure cache misses on the table instead).
    let mut key = *b"key:000000000000";
    let mut i = 0u32;
    group.bench_function("record_random_key_100k", |b| {
        b.iter(|| {
            // A multiplicative step walks the keyspace in a scattered order.
            i = (i + 7_919) % 100_000;
            let mut n = i;
            for d in key[10..].iter_mut().rev() {
                *d = b'0' + (n % 10) as u8;
                n /= 10;
            }
            rec.record(black_box(&key), 33, 9)
        })
    });
    // The same, with the sub-window closed every 100 000 records, so the admission floor is
    // that of a live sub-window rather than of one that never ends.
    let mut n_rec = 0u32;
    group.bench_function("record_random_key_100k_rotating", |b| {
        b.iter(|| {
            i = (i + 7_919) % 100_000;
            let mut n = i;
            for d in key[10..].iter_mut().rev() {
                *d = b'0' + (n % 10) as u8;
                n /= 10;
            }
            rec.record(black_box(&key), 33, 9);
            n_rec += 1;
            if n_rec == 100_000 {
                n_rec = 0;
                rec.rotate();
            }
        })
    });
    group.bench_function("wants", |b| b.iter(|| black_box(rec.wants())));
    group.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
