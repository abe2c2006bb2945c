//! `tessera-conformance <module.wasm> [--config JSON] [--cases FILE] [--name NAME]
//! [--cpu-budget-ms N] [--memory-mb N]`: runs the conformance suite on one plugin module and
//! prints the report. Exit status 0 when every check passed, 1 when one failed, 2 on a usage
//! error.

use std::process::ExitCode;

use tessera_conformance::{Cases, Options, run};

const USAGE: &str = "usage: tessera-conformance <module.wasm> [--config JSON] [--cases FILE] [--name NAME] [--cpu-budget-ms N] [--memory-mb N]";

fn main() -> ExitCode {
    match parse(std::env::args().skip(1).collect()) {
        Ok((path, wasm, opts)) => {
            let report = run(&path, &wasm, &opts);
            print!("{report}");
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("tessera-conformance: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The module path, its bytes and the options.
fn parse(args: Vec<String>) -> Result<(String, Vec<u8>, Options), String> {
    let mut it = args.into_iter();
    let mut path = None;
    let mut config: Option<String> = None;
    let mut cases: Option<Cases> = None;
    let mut name = None;
    let mut cpu = None;
    let mut memory = None;
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--config" => config = Some(value()?),
            "--cases" => {
                let file = value()?;
                let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
                cases = Some(Cases::parse(&text)?);
            }
            "--name" => name = Some(value()?),
            "--cpu-budget-ms" => cpu = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "--memory-mb" => memory = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "-h" | "--help" => return Err("help".into()),
            _ if path.is_none() && !a.starts_with('-') => path = Some(a),
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    let path = path.ok_or("no module given")?;
    let wasm = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    // The config: --config, else the cases file's, else {}.
    let config = match (config, cases.as_ref().and_then(|c| c.config.as_ref())) {
        (Some(c), _) => c.into_bytes(),
        (None, Some(v)) => v.to_string().into_bytes(),
        (None, None) => b"{}".to_vec(),
    };
    let mut opts = Options::new(name.unwrap_or_else(|| default_name(&path)), config);
    if let Some(ms) = cpu {
        opts.limits.cpu_budget_ms = ms;
    }
    if let Some(mb) = memory {
        opts.limits.memory_mb = mb;
    }
    opts.cases = cases;
    Ok((path, wasm, opts))
}

/// `…/tessera_plugin_filter.wasm` → `filter`; anything else → the file stem, made a valid
/// plugin name.
fn default_name(path: &str) -> String {
    let stem = std::path::Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem.strip_prefix("tessera_plugin_").unwrap_or(&stem);
    let name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() {
        "plugin".into()
    } else {
        name
    }
}
