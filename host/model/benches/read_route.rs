//! The routing step of a read-only command with replica reads: `route` (every command before
//! replica reads, and writes now) against `read_route` under each read policy.
//! Run: `cargo bench -p tessera-model --bench read_route`

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use tessera_model::router::replicas::{ReadMode, ReadPolicy, ReplicaRegistry, now_us};
use tessera_model::router::{GroupId, SLOTS, SlotId, SlotTable, SlotTableBuilder};

/// Two groups of a master and two replicas each, every replica proven fresh.
fn table(mode: ReadMode, reg: &ReplicaRegistry) -> SlotTable {
    let mut b = SlotTableBuilder::default();
    for s in 0..SLOTS as u16 {
        let (g, m) = if s < 512 { (1, "m:1") } else { (2, "m:2") };
        b.assign(SlotId(s), GroupId(g), m);
    }
    b.replicas(GroupId(1), &["r:1".into(), "r:2".into()], reg)
        .replicas(GroupId(2), &["r:3".into(), "r:4".into()], reg)
        .read_policy(ReadPolicy {
            mode,
            max_lag_ms: 3_600_000,
        });
    b.build(1)
}

fn read_route(c: &mut Criterion) {
    let reg = ReplicaRegistry::default();
    let master = table(ReadMode::Master, &reg);
    let prefer = table(ReadMode::PreferReplica, &reg);
    let mut group = c.benchmark_group("read_route");
    let slot = SlotId::of_key(b"key:000000012345");
    group.bench_function("route", |b| b.iter(|| master.route(black_box(slot))));
    group.bench_function("read_route_master", |b| {
        b.iter(|| master.read_route(black_box(slot)))
    });
    group.bench_function("read_route_prefer_none_fresh", |b| {
        b.iter(|| prefer.read_route(black_box(slot)))
    });
    for r in ["r:1", "r:2", "r:3", "r:4"] {
        reg.get(r).prove(now_us());
    }
    group.bench_function("read_route_prefer_fresh", |b| {
        b.iter(|| prefer.read_route(black_box(slot)))
    });
    group.finish();
}

criterion_group!(benches, read_route);
criterion_main!(benches);
