//! The same plugins written in Rust, C (Zig's `cc`) and AssemblyScript, called as the proxy
//! calls them: the `filter` example's `tp_on_command` on a SET that passes and a FLUSHALL it
//! denies, a batch of 16 SETs, and the `metrics` example's `tp_on_command` and `tp_on_reply`.
//! What differs between the rows is only the guest's code. Plugins are the release wasm32
//! builds (`tools/test.sh` builds them all):
//!
//! ```text
//! cargo build --release --target wasm32-unknown-unknown -p tessera-plugin-filter -p tessera-plugin-metrics
//! sdk/build-languages.sh
//! cargo bench -p tessera-wasm --bench plugin_languages
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use tessera_plugin_abi::{ArgIn, class, cmd};
use tessera_wasm::{BatchCmd, Chain, ChainStep, PluginSpec, Runtime, RuntimeConfig, WorkerChain};

/// The module suffixes of each language's build (`tessera_plugin_<name><suffix>.wasm`).
const LANGUAGES: [(&str, &str); 3] = [("rust", ""), ("c", "_c"), ("assemblyscript", "_as")];

const FILTER_CONFIG: &str = r#"{"deny_commands":["FLUSHALL","KEYS"],"read_only_keys":["frozen:*"],"max_value_bytes":1048576}"#;

fn wasm(file: &str) -> Option<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    std::fs::read(dir.join(format!(
        "wasm32-unknown-unknown/release/tessera_plugin_{file}.wasm"
    )))
    .ok()
}

/// `name` built in the language of `suffix`, loaded into a worker's chain; `None` (said on
/// stderr) when that build is missing.
fn worker(rt: &Arc<Runtime>, name: &str, suffix: &str, config: &str) -> Option<WorkerChain> {
    let file = format!("{name}{suffix}");
    let Some(module) = wasm(&file) else {
        eprintln!("plugin_languages: no {file}.wasm; build the plugins first (see the header)");
        return None;
    };
    let g = rt
        .load(PluginSpec::new(name, module, config.as_bytes().to_vec()))
        .expect("plugin loads");
    let mut wc = WorkerChain::new(rt.clone());
    wc.sync(&Arc::new(Chain::new(1, vec![g])));
    Some(wc)
}

fn arg(bytes: &[u8], key: bool) -> ArgIn<'_> {
    ArgIn {
        bytes,
        key,
        elide: false,
    }
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default(), None).expect("runtime");
    let set = [
        arg(b"SET", false),
        arg(b"user:1000:name", true),
        arg(b"some value of 24 bytes!!", false),
    ];
    let flushall = [arg(b"FLUSHALL", false)];
    let batch: Vec<BatchCmd<'_>> = (0..16)
        .map(|_| BatchCmd {
            cmd: cmd::SET,
            class: class::WRITE,
            args: &set,
        })
        .collect();
    let mut results = Vec::with_capacity(batch.len());
    for (lang, suffix) in LANGUAGES {
        if let Some(mut filter) = worker(&rt, "filter", suffix, FILTER_CONFIG) {
            let ChainStep::Call(inst) = filter.step(0) else {
                panic!("instance")
            };
            let mut inst = inst.borrow_mut();
            c.bench_function(&format!("{lang} filter: SET passes"), |b| {
                b.iter(|| inst.on_command(1, cmd::SET, class::WRITE, std::hint::black_box(&set)))
            });
            c.bench_function(&format!("{lang} filter: FLUSHALL denied"), |b| {
                b.iter(|| {
                    inst.on_command(
                        1,
                        cmd::FLUSHALL,
                        class::WRITE | class::DANGEROUS,
                        std::hint::black_box(&flushall),
                    )
                })
            });
            c.bench_function(&format!("{lang} filter: 16 SETs in one batch"), |b| {
                b.iter(|| {
                    let mut done = 0;
                    while done < batch.len() {
                        results.clear();
                        done +=
                            inst.on_commands(1, std::hint::black_box(&batch[done..]), &mut results);
                    }
                })
            });
        }
        if let Some(mut metrics) = worker(&rt, "metrics", suffix, "{}") {
            let ChainStep::Call(inst) = metrics.step(0) else {
                panic!("instance")
            };
            let mut inst = inst.borrow_mut();
            c.bench_function(&format!("{lang} metrics: SET counted"), |b| {
                b.iter(|| inst.on_command(1, cmd::SET, class::WRITE, std::hint::black_box(&set)))
            });
            let ok: &[u8] = b"+OK\r\n";
            c.bench_function(&format!("{lang} metrics: its reply observed"), |b| {
                b.iter(|| inst.on_reply(1, 0, std::hint::black_box(&[ok])))
            });
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
