//! The same plugin written in Rust, C and AssemblyScript, one hooked call each through the real
//! runtime as the proxy makes it (arena copy, call under the epoch deadline, result unpacked).
//! The modules are the release builds `tools/test.sh` makes:
//!
//! ```text
//! cargo build --release --target wasm32-unknown-unknown -p tessera-plugin-filter -p tessera-plugin-metrics
//! sdk/build-languages.sh
//! cargo bench -p tessera-conformance --bench languages
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use tessera_conformance::corpus::Described;
use tessera_wasm::{
    BatchCmd, CmdOutcome, Generation, Instance, PluginSpec, Runtime, RuntimeConfig,
};

const LANGUAGES: [(&str, &str); 3] = [("rust", ""), ("c", "_c"), ("assemblyscript", "_as")];
const FILTER: &str = r#"{"deny_commands":["FLUSHALL","KEYS"],"read_only_keys":["frozen:*"],"max_value_bytes":1048576}"#;
const METRICS: &str = r#"{"client_names":false}"#;

fn wasm(file: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::var("CARGO_TARGET_DIR").map_or(root.join("target"), PathBuf::from);
    let path = dir.join(format!(
        "wasm32-unknown-unknown/release/tessera_plugin_{file}.wasm"
    ));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (see this file's header)", path.display()))
}

fn instance(
    rt: &Arc<Runtime>,
    name: &str,
    file: &str,
    config: &str,
) -> (Arc<Generation>, Instance) {
    let g = rt
        .load(PluginSpec::new(
            name,
            wasm(file),
            config.as_bytes().to_vec(),
        ))
        .expect("plugin loads");
    let inst = rt.instantiate(&g).expect("instance");
    (g, inst)
}

fn call(inst: &mut Instance, g: &Generation, d: &Described) -> CmdOutcome {
    let values = g.hooks.wants(d.id, d.class).expect("hooked");
    inst.on_command(1, d.id, d.class, &d.table(values))
        .expect("answer")
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeConfig::default(), None).expect("runtime");
    let set = Described::new(&["SET", "user:1000:name", "some value of 24 bytes!!"]).expect("SET");
    let flushall = Described::new(&["FLUSHALL"]).expect("FLUSHALL");
    let get = Described::new(&["GET", "acme:user:1"]).expect("GET");
    let mut pass = c.benchmark_group("filter: SET passes");
    for (lang, suffix) in LANGUAGES {
        let (g, mut inst) = instance(&rt, "filter", &format!("filter{suffix}"), FILTER);
        assert_eq!(call(&mut inst, &g, &set), CmdOutcome::Pass);
        let args = set.table(false);
        pass.bench_function(BenchmarkId::from_parameter(lang), |b| {
            b.iter(|| inst.on_command(1, set.id, set.class, std::hint::black_box(&args)))
        });
    }
    pass.finish();
    let mut deny = c.benchmark_group("filter: FLUSHALL denied");
    for (lang, suffix) in LANGUAGES {
        let (g, mut inst) = instance(&rt, "filter", &format!("filter{suffix}"), FILTER);
        assert!(matches!(
            call(&mut inst, &g, &flushall),
            CmdOutcome::Deny(_)
        ));
        let args = flushall.table(false);
        deny.bench_function(BenchmarkId::from_parameter(lang), |b| {
            b.iter(|| inst.on_command(1, flushall.id, flushall.class, std::hint::black_box(&args)))
        });
    }
    deny.finish();
    let mut batch = c.benchmark_group("filter: 16 SETs in one batch");
    for (lang, suffix) in LANGUAGES {
        let (_, mut inst) = instance(&rt, "filter", &format!("filter{suffix}"), FILTER);
        let args = set.table(false);
        let cmds: Vec<BatchCmd<'_>> = (0..16)
            .map(|_| BatchCmd {
                cmd: set.id,
                class: set.class,
                args: &args,
            })
            .collect();
        let mut results = Vec::with_capacity(16);
        batch.bench_function(BenchmarkId::from_parameter(lang), |b| {
            b.iter(|| {
                let mut done = 0;
                while done < cmds.len() {
                    results.clear();
                    done += inst.on_commands(1, std::hint::black_box(&cmds[done..]), &mut results);
                }
            })
        });
    }
    batch.finish();
    let mut observe = c.benchmark_group("metrics: GET observed and its reply counted");
    for (lang, suffix) in LANGUAGES {
        let (g, mut inst) = instance(&rt, "metrics", &format!("metrics{suffix}"), METRICS);
        let CmdOutcome::Observe(_) = call(&mut inst, &g, &get) else {
            panic!("metrics observes GET")
        };
        let args = get.table(false);
        observe.bench_function(BenchmarkId::from_parameter(lang), |b| {
            b.iter(|| {
                let Ok(CmdOutcome::Observe(ctx)) = inst.on_command(1, get.id, get.class, &args)
                else {
                    panic!("observed")
                };
                inst.on_reply_head(1, ctx, std::hint::black_box(b"$5\r\nhello\r\n"))
            })
        });
    }
    observe.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
