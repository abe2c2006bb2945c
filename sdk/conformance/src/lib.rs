//! The Tessera plugin conformance suite: runs any plugin module (Rust, AssemblyScript, C …) in
//! the real runtime (`tessera-wasm`) through the same checks, and reports each one.
//!
//! What it checks, in order (`run`): the module loads (ABI marker, exports, imports, `init`
//! accepts the config); its exports match its manifest; the manifest is the same on every
//! load; hooks are called as declared (commands it did not select never reach it); argument
//! tables are read correctly (the same answers alone, after the arena moved, and in a batch);
//! reply tables are read correctly; awkward arguments get answers; the input limit is handled;
//! `on_close` / `on_tick` run; metrics are named as declared; the plugin's own cases file
//! holds; and no call faulted (trap, CPU budget, memory cap, unusable output), each fault
//! reported with whether it cost only that call.
//!
//! Layout: `corpus` (commands described as the proxy describes them), `host` (the runtime
//! driven as the proxy drives it, and the fault log), `calls` (checks that call the plugin),
//! `expect` (checks against the plugin's declarations), `cases` (the cases file), `report`,
//! and `consts` (the ABI constants generated for the C and AssemblyScript SDKs).

pub mod calls;
pub mod cases;
pub mod consts;
pub mod corpus;
pub mod expect;
pub mod host;
pub mod report;

pub use cases::Cases;
pub use host::Limits;
pub use report::{Report, Status};

/// How to run the suite on one module.
#[derive(Debug, Clone)]
pub struct Options {
    /// The plugin's name (metric prefix, error texts).
    pub name: String,
    /// The config bytes given to `init`.
    pub config: Vec<u8>,
    pub limits: Limits,
    pub cases: Option<Cases>,
}

impl Options {
    /// The proxy's defaults: 5 ms of CPU per call; 16 MiB of memory (a quarter of the proxy's
    /// default, so a plugin that cannot live in a small instance is found here).
    pub fn new(name: impl Into<String>, config: impl Into<Vec<u8>>) -> Self {
        Self {
            name: name.into(),
            config: config.into(),
            limits: Limits {
                cpu_budget_ms: 5,
                memory_mb: 16,
            },
            cases: None,
        }
    }
}

/// Runs every check on `wasm`; `module` names it in the report.
pub fn run(module: &str, wasm: &[u8], opts: &Options) -> Report {
    let mut r = Report::new(format!(
        "{module} as plugin {:?}, config {}",
        opts.name,
        String::from_utf8_lossy(&opts.config)
    ));
    let mut h = match host::Host::load(&opts.name, wasm, &opts.config, &opts.limits) {
        Ok(h) => {
            r.check("module loads", vec![], vec![expect::summary(h.hooks())]);
            h
        }
        Err(e) => {
            r.check("module loads", vec![e.0], vec![]);
            return r;
        }
    };
    expect::exports(&h, wasm, &mut r);
    expect::stable_manifest(&h, wasm, &opts.config, &opts.limits, &mut r);
    let answers = calls::hooks(&mut h, &mut r);
    calls::tables(&mut h, &answers, &mut r);
    calls::reply_tables(&mut h, &answers, &mut r);
    calls::hostile(&mut h, &mut r);
    calls::input_limit(&mut h, wasm, &opts.config, &answers, &mut r);
    calls::close_and_tick(&mut h, &mut r);
    expect::metrics(&h, opts.cases.as_ref(), &mut r);
    if let Some(c) = &opts.cases {
        // A runtime of its own: the samples must count the cases' commands only.
        match host::Host::load(&opts.name, wasm, &opts.config, &opts.limits) {
            Ok(mut fresh) => {
                expect::cases(&mut fresh, c, &mut r);
                h.faults.append(&mut fresh.faults);
            }
            Err(e) => r.check("the plugin's own cases", vec![e.0], vec![]),
        }
    }
    calls::faults(&h, &mut r);
    r
}
