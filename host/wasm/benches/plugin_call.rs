//! One hooked call through the runtime, as the proxy makes it: the host's argv (with key flags)
//! copied into the guest arena, `tp_on_command` run under the epoch deadline, the result
//! unpacked. Plugins are the release wasm32 builds (`tools/test.sh` builds them):
//!
//! ```text
//! cargo build --release --target wasm32-unknown-unknown -p tessera-plugin-filter -p tessera-plugin-bucket
//! cargo bench -p tessera-wasm --bench plugin_call
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use tessera_plugin_abi::{ArgIn, class, cmd};
use tessera_wasm::{
    BatchCmd, Chain, ChainStep, CmdOutcome, PluginSpec, Runtime, RuntimeConfig, WorkerChain,
};

fn wasm(name: &str) -> Option<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    std::fs::read(dir.join(format!(
        "wasm32-unknown-unknown/release/tessera_plugin_{name}.wasm"
    )))
    .ok()
}

fn worker(rt: &Arc<Runtime>, name: &str, config: &str) -> Option<WorkerChain> {
    let spec = PluginSpec::new(name, wasm(name)?, config.as_bytes().to_vec());
    let g = rt.load(spec).expect("plugin loads");
    let mut wc = WorkerChain::new(rt.clone());
    wc.sync(&Arc::new(Chain::new(1, vec![g])));
    Some(wc)
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default(), None).expect("runtime");
    let set = [
        ArgIn {
            bytes: b"SET",
            key: false,
            elide: false,
        },
        ArgIn {
            bytes: b"user:1000:name",
            key: true,
            elide: false,
        },
        ArgIn {
            bytes: b"some value of 24 bytes!!",
            key: false,
            elide: true,
        },
    ];
    let Some(mut filter) = worker(
        &rt,
        "filter",
        r#"{"deny_commands":["FLUSHALL","KEYS"],"read_only_keys":["frozen:*"],"max_value_bytes":1048576}"#,
    ) else {
        eprintln!("plugin_call: build the plugins for wasm32 first (see the file's header)");
        return;
    };
    let ChainStep::Call(inst) = filter.step(0) else {
        panic!("instance")
    };
    let mut inst = inst.borrow_mut();
    assert_eq!(
        inst.on_command(1, cmd::SET, class::WRITE, &set).unwrap(),
        CmdOutcome::Pass
    );
    c.bench_function("filter: SET passes (arena copy + call + unpack)", |b| {
        b.iter(|| inst.on_command(1, cmd::SET, class::WRITE, std::hint::black_box(&set)))
    });
    let flushall = [ArgIn {
        bytes: b"FLUSHALL",
        key: false,
        elide: false,
    }];
    c.bench_function("filter: FLUSHALL denied (error text read back)", |b| {
        b.iter(|| {
            inst.on_command(
                1,
                cmd::FLUSHALL,
                class::WRITE | class::DANGEROUS,
                std::hint::black_box(&flushall),
            )
        })
    });
    // Issue 14: a pipeline's SETs in one call, against one call each (per batch; divide by
    // its size for the cost per command).
    for n in [16usize, 128] {
        let batch: Vec<BatchCmd<'_>> = (0..n)
            .map(|_| BatchCmd {
                cmd: cmd::SET,
                class: class::WRITE,
                args: &set,
            })
            .collect();
        let mut results = Vec::with_capacity(n);
        c.bench_function(&format!("filter: {n} SETs, one call each"), |b| {
            b.iter(|| {
                for c in &batch {
                    let _ = inst.on_command(1, c.cmd, c.class, std::hint::black_box(c.args));
                }
            })
        });
        c.bench_function(&format!("filter: {n} SETs in one batch"), |b| {
            b.iter(|| {
                let mut done = 0;
                while done < n {
                    results.clear();
                    done += inst.on_commands(1, std::hint::black_box(&batch[done..]), &mut results);
                }
            })
        });
    }
    drop(inst);

    if let Some(mut bucket) = worker(
        &rt,
        "bucket",
        r#"{"patterns":[{"prefix":"big:","buckets":8}]}"#,
    ) {
        let ChainStep::Call(inst) = bucket.step(0) else {
            panic!("instance")
        };
        let mut inst = inst.borrow_mut();
        let hset = [
            ArgIn {
                bytes: b"HSET",
                key: false,
                elide: false,
            },
            ArgIn {
                bytes: b"big:user:1",
                key: true,
                elide: false,
            },
            ArgIn {
                bytes: b"f1",
                key: false,
                elide: false,
            },
            ArgIn {
                bytes: b"v1",
                key: false,
                elide: false,
            },
            ArgIn {
                bytes: b"f2",
                key: false,
                elide: false,
            },
            ArgIn {
                bytes: b"v2",
                key: false,
                elide: false,
            },
            ArgIn {
                bytes: b"f3",
                key: false,
                elide: false,
            },
            ArgIn {
                bytes: b"v3",
                key: false,
                elide: false,
            },
        ];
        let first = inst.on_command(1, cmd::HSET, class::WRITE, &hset).unwrap();
        assert!(matches!(first, CmdOutcome::Rewrite { .. }), "{first:?}");
        c.bench_function("bucket: HSET of 3 fields rewritten into buckets", |b| {
            b.iter(|| inst.on_command(1, cmd::HSET, class::WRITE, std::hint::black_box(&hset)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
