//! Slot hashing (with and without prefix routes), command lookup and the per-slot counters: the
//! per-command routing work.
//! Run: `cargo bench -p tessera-proxy --bench slot_hash`

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use tessera_model::command::CommandTable;
use tessera_model::login::Login;
use tessera_model::router::prefix::Target;
use tessera_model::router::{GroupId, SLOTS, SlotId, SlotTable, SlotTableBuilder};
use tessera_proxy::telemetry::SlotStats;
use tessera_resp::Request;

fn slot_hash(c: &mut Criterion) {
    let mut group = c.benchmark_group("slot_hash");
    group.bench_function("plain_key_16b", |b| {
        b.iter(|| SlotId::of_key(black_box(b"key:000000012345")))
    });
    group.bench_function("tagged_key", |b| {
        b.iter(|| SlotId::of_key(black_box(b"{user:1000}:profile:name")))
    });
    group.finish();
}

/// A table of one group and `routes` prefix routes (`p0:` …), each with a target.
fn table_with_routes(routes: usize) -> SlotTable {
    let mut b = SlotTableBuilder::default();
    for s in 0..SLOTS as u16 {
        b.assign(SlotId(s), GroupId(1), "127.0.0.1:7001");
    }
    for i in 0..routes {
        let target = Target {
            addr: format!("127.0.0.1:{}", 8000 + i).into(),
            login: Login::none(),
        };
        b.prefix_route(&format!("p{i}:"), i, "other", Some(target));
    }
    b.build(1)
}

/// `SlotTable::slot_of`, the key's slot with prefix routes: none (a branch), one, and the
/// most a cluster may have (32) with a key under none of them (every prefix compared).
fn slot_of(c: &mut Criterion) {
    let mut group = c.benchmark_group("slot_of");
    for routes in [0, 1, 32] {
        let t = table_with_routes(routes);
        group.bench_function(format!("{routes}_routes_unrouted_key"), |b| {
            b.iter(|| t.slot_of(black_box(b"key:000000012345")))
        });
    }
    let t = table_with_routes(32);
    group.bench_function("32_routes_routed_key", |b| {
        b.iter(|| t.slot_of(black_box(b"p31:000000012345")))
    });
    group.finish();
}

fn command_lookup(c: &mut Criterion) {
    let table = CommandTable::get();
    let get = Request::from_args(&["get", "key:1"]);
    let zunion = Request::from_args(&["ZUNION", "3", "{t}a", "{t}b", "{t}c", "WITHSCORES"]);
    let mut group = c.benchmark_group("command");
    group.bench_function("lookup_get", |b| {
        b.iter(|| table.lookup(black_box(&get)).map(|c| c.id))
    });
    group.bench_function("keys_zunion", |b| {
        let cmd = table.lookup(&zunion).expect("known");
        b.iter(|| cmd.key_indices(black_box(&zunion)).len())
    });
    group.finish();
}

/// What the per-slot statistics add to a command: the first key's slot, then three relaxed
/// adds on this thread's shard.
fn slot_count(c: &mut Criterion) {
    let stats = SlotStats::new(2);
    let mut group = c.benchmark_group("slot_stats");
    group.bench_function("record", |b| {
        b.iter(|| stats.record(black_box(289), black_box(40), black_box(5)))
    });
    group.bench_function("slot_and_record", |b| {
        b.iter(|| {
            let slot = SlotId::of_key(black_box(b"key:000000012345")).0;
            stats.record(slot, 40, 5)
        })
    });
    group.bench_function("counts_all_slots", |b| {
        b.iter(|| stats.counts().slots.len())
    });
    group.finish();
}

criterion_group!(benches, slot_hash, slot_of, command_lookup, slot_count);
criterion_main!(benches);
