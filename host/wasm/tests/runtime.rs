//! The runtime against hostile inputs and hostile plugins, with hand-built modules
//! (`support/`): an input over the plugin's input limit fails that one command before anything
//! is copied; a call-time fault costs only that command (fresh instance, no backoff) and is
//! timed like any hook call; only instantiation that keeps failing backs off; a plugin's bad
//! OBSERVE offset or non-RESP reply is a fault, never a host panic; declarations of commands
//! denied to every client reach `Generation::denied_to_all`; the compiled-module cache keeps
//! only checked modules, and a bounded number of them.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use support::{OnCommand, OnReply, hook_all, manifest, module};
use tessera_plugin_abi::{self as abi, ArgIn, class, cmd};
use tessera_wasm::{
    CallError, Chain, ChainStep, CmdOutcome, FailPolicy, Generation, Input, MAX_CACHED_MODULES,
    PluginSpec, ReplyOutcome, Runtime, RuntimeConfig, Verdict, WorkerChain,
};

fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig::default(), None).expect("runtime")
}

fn load(rt: &Runtime, wasm: Vec<u8>, memory_mb: usize) -> Arc<Generation> {
    let spec = PluginSpec::new("hostile", wasm, b"{}".to_vec()).with_limits(None, Some(memory_mb));
    rt.load(spec).expect("module loads")
}

fn worker(rt: &Arc<Runtime>, g: &Arc<Generation>) -> WorkerChain {
    let mut wc = WorkerChain::new(rt.clone());
    wc.sync(&Arc::new(Chain::new(1, vec![g.clone()])));
    wc
}

fn call(wc: &mut WorkerChain, key: &[u8]) -> Result<CmdOutcome, CallError> {
    let ChainStep::Call(inst) = wc.step(0) else {
        panic!("the plugin is unavailable")
    };
    let args = [
        ArgIn {
            bytes: b"SET",
            key: false,
            elide: false,
        },
        ArgIn {
            bytes: key,
            key: true,
            elide: false,
        },
        ArgIn {
            bytes: b"value",
            key: false,
            elide: true,
        },
    ];
    let r = inst
        .borrow_mut()
        .on_command(1, cmd::SET, class::WRITE, &args);
    if let Err(CallError::Fault(f)) = &r {
        wc.report_fault(0, f);
    }
    r
}

fn created(g: &Generation) -> u64 {
    g.shared.instances.load(Relaxed)
}

#[test]
fn an_input_over_the_limit_fails_that_command_before_anything_is_copied() {
    let rt = runtime();
    // 2 MiB of memory, so the default input limit is 512 KiB.
    let g = load(&rt, module(&hook_all(), OnCommand::Pass, OnReply::Pass), 2);
    assert_eq!(g.spec.input_limit(), 512 << 10);
    let mut wc = worker(&rt, &g);
    assert_eq!(call(&mut wc, b"small").unwrap(), CmdOutcome::Pass);

    // A 3 MiB key: copying it would grow the plugin past its 2 MiB memory cap and fault the
    // instance (the failure this limit exists for). It is refused instead, and named.
    let huge = vec![b'k'; 3 << 20];
    let e = call(&mut wc, &huge).unwrap_err();
    let CallError::TooLarge(t) = &e else {
        panic!("expected TooLarge, got {e:?}")
    };
    assert_eq!((t.input, t.limit), (Input::Command, 512 << 10));
    assert!(t.size > 3 << 20);
    assert!(
        e.to_string()
            .contains("over the plugin's input limit of 524288 bytes"),
        "{e}"
    );
    // Whatever the policy: the client's own input must not walk past a fail-open filter.
    assert_eq!(FailPolicy::Open.when_command_failed(&e), Verdict::Fail);
    assert_eq!(g.shared.inputs_refused[0].load(Relaxed), 1);

    // The instance is unharmed: the next command runs on it, for this client and others.
    assert_eq!(call(&mut wc, b"next").unwrap(), CmdOutcome::Pass);
    assert_eq!(created(&g), 1, "the instance was replaced");
    assert!(g.shared.faults.iter().all(|f| f.load(Relaxed) == 0));

    // Just under the limit is copied, and fits the plugin's memory.
    let big = vec![b'k'; 400 << 10];
    assert_eq!(call(&mut wc, &big).unwrap(), CmdOutcome::Pass);
}

#[test]
fn the_input_limit_is_configurable_and_checked_at_load() {
    let rt = runtime();
    let wasm = module(&hook_all(), OnCommand::Pass, OnReply::Pass);
    let spec = PluginSpec::new("hostile", wasm.clone(), b"{}".to_vec())
        .with_limits(None, Some(2))
        .with_input_limit(Some(8));
    let g = rt.load(spec).unwrap();
    let mut wc = worker(&rt, &g);
    let e = call(&mut wc, &[b'k'; 9 << 10]).unwrap_err();
    assert!(
        matches!(e, CallError::TooLarge(t) if t.limit == 8 << 10),
        "{e:?}"
    );

    let spec = PluginSpec::new("hostile", wasm.clone(), b"{}".to_vec())
        .with_limits(None, Some(2))
        .with_input_limit(Some(2048));
    let e = rt.load(spec).unwrap_err();
    assert!(e.0.contains("above half the plugin's memory limit"), "{e}");
    let spec = PluginSpec::new("hostile", wasm, vec![b' '; 5000]).with_input_limit(Some(4));
    let e = rt.load(spec).unwrap_err();
    assert!(
        e.0.contains("config of 5000 bytes is over its input limit"),
        "{e}"
    );
}

#[test]
fn a_call_time_fault_costs_that_command_and_the_next_one_gets_a_fresh_instance() {
    // Every hook call timed (not one in 16), so the count below is every guest call.
    let rt = Runtime::new(
        RuntimeConfig {
            hook_sample: 1,
            ..RuntimeConfig::default()
        },
        None,
    )
    .expect("runtime");
    let g = load(
        &rt,
        module(&hook_all(), OnCommand::TrapOnB, OnReply::Pass),
        4,
    );
    let mut wc = worker(&rt, &g);
    assert_eq!(call(&mut wc, b"calm").unwrap(), CmdOutcome::Pass);
    // A client that makes the plugin trap on every command it sends: each costs only itself.
    for round in 1..=5u64 {
        let e = call(&mut wc, b"boom").unwrap_err();
        let f = e
            .fault()
            .unwrap_or_else(|| panic!("expected a fault, got {e:?}"));
        assert!(f.reason.contains("unreachable"), "{f}");
        assert_eq!(FailPolicy::Open.when_command_failed(&e), Verdict::Fail);
        // No backoff: the very next command (another client's) is served, on a new instance.
        assert_eq!(
            call(&mut wc, b"calm").unwrap(),
            CmdOutcome::Pass,
            "round {round}"
        );
        assert_eq!(created(&g), 1 + round);
    }
    assert_eq!(g.shared.faults[0].load(Relaxed), 5);
    // Every guest call is timed, the ones that trapped too (only those that returned count
    // as calls); `init`, in the probe and in each new instance, is not a hook.
    let hooks = g.shared.latency.snapshot();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!((hooks[0].hook.as_str(), hooks[0].count), ("on_command", 11));
    assert_eq!(g.shared.calls.load(Relaxed), 6);
}

#[test]
fn instantiation_that_keeps_failing_backs_off_and_only_that_follows_the_fail_policy() {
    // Room for one instance: the probe's slot is free again after load, so the first worker
    // gets it and the second cannot instantiate (a reason outside any command).
    let rt = Runtime::new(
        RuntimeConfig {
            max_instances: 1,
            ..RuntimeConfig::default()
        },
        None,
    )
    .unwrap();
    let g = load(&rt, module(&hook_all(), OnCommand::Pass, OnReply::Pass), 4);
    let mut first = worker(&rt, &g);
    assert_eq!(call(&mut first, b"k").unwrap(), CmdOutcome::Pass);
    let mut second = worker(&rt, &g);
    let mut reasons = Vec::new();
    for _ in 0..3 {
        match second.step(0) {
            ChainStep::Unavailable(r) => reasons.push(r),
            ChainStep::Call(_) => panic!("a second instance fit in a pool of one"),
        }
    }
    // The first failure retries at once, the second starts the backoff.
    assert!(!reasons[0].contains("backing off"), "{reasons:?}");
    assert!(reasons[2].contains("backing off"), "{reasons:?}");
    assert_eq!(FailPolicy::Open.when_unavailable(), Verdict::Skip);
    assert_eq!(FailPolicy::Closed.when_unavailable(), Verdict::Fail);
}

#[test]
fn an_observe_with_an_out_of_bounds_ctx_is_a_fault_not_a_host_panic() {
    let rt = runtime();
    let g = load(
        &rt,
        module(&hook_all(), OnCommand::ObserveOutOfBounds, OnReply::Pass),
        4,
    );
    let mut wc = worker(&rt, &g);
    let e = call(&mut wc, b"k").unwrap_err();
    let f = e
        .fault()
        .unwrap_or_else(|| panic!("expected a fault, got {e:?}"));
    assert_eq!(f.kind(), "bad_output");
    assert!(f.reason.contains("out buffer"), "{f}");
    assert_eq!(g.shared.faults[3].load(Relaxed), 1);
}

#[test]
fn a_reply_that_is_not_resp_is_a_fault_of_the_plugin() {
    let rt = runtime();
    let g = load(
        &rt,
        module(&hook_all(), OnCommand::ReplyGarbage, OnReply::Pass),
        4,
    );
    let mut wc = worker(&rt, &g);
    let e = call(&mut wc, b"k").unwrap_err();
    assert!(e.to_string().contains("not one complete RESP reply"), "{e}");
}

#[test]
fn an_observed_reply_over_the_limit_is_not_copied_and_the_policy_decides() {
    let rt = runtime();
    let wasm = module(&hook_all(), OnCommand::Observe, OnReply::Trap);
    let spec = PluginSpec::new("hostile", wasm, b"{}".to_vec())
        .with_limits(None, Some(2))
        .with_input_limit(Some(64));
    let g = rt.load(spec).unwrap();
    let mut wc = worker(&rt, &g);
    assert_eq!(call(&mut wc, b"k").unwrap(), CmdOutcome::Observe(77));
    let ChainStep::Call(inst) = wc.step(0) else {
        panic!("unavailable")
    };
    let mut reply = b"$70000\r\n".to_vec();
    reply.extend(std::iter::repeat_n(b'v', 70000));
    reply.extend_from_slice(b"\r\n");
    let e = inst.borrow_mut().on_reply(1, 77, &[&reply]).unwrap_err();
    assert!(
        matches!(e, CallError::TooLarge(t) if t.input == Input::Reply),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("cannot take this reply"), "{e}");
    // Not copied, so not trapped: the plugin would have trapped on any reply it saw.
    assert!(!inst.borrow().is_dead());
    assert_eq!(FailPolicy::Open.when_reply_failed(&e), Verdict::Skip);
    assert_eq!(FailPolicy::Closed.when_reply_failed(&e), Verdict::Fail);
    // A reply it does see makes it trap: a fault, and the instance is dead.
    let e = inst
        .borrow_mut()
        .on_reply(1, 77, &[b"+OK\r\n"])
        .unwrap_err();
    assert!(e.fault().is_some(), "{e:?}");
    assert_eq!(
        inst.borrow_mut().on_reply(1, 77, &[b"+OK\r\n"]),
        Err(CallError::Dead)
    );
    let _ = ReplyOutcome::Pass;
}

#[test]
fn denied_to_all_declarations_reach_the_generation() {
    let rt = runtime();
    let m = manifest(abi::ManifestBuilder {
        commands: vec![(cmd::FLUSHALL, 0), (cmd::CONFIG, abi::HOOK_VALUES)],
        denied_classes: class::DANGEROUS,
        denied: vec![b"flushall".to_vec(), b"CONFIG|SET".to_vec()],
        ..abi::ManifestBuilder::default()
    });
    let g = load(&rt, module(&m, OnCommand::Pass, OnReply::Pass), 4);
    let d = g.denied_to_all();
    assert_eq!(d.commands, ["CONFIG|SET", "FLUSHALL"]);
    assert_eq!(d.classes, class::DANGEROUS);
    let chain = Chain::new(1, vec![g.clone()]);
    assert_eq!(chain.denied_to_all(), *d);

    // A plugin that declares nothing declares nothing.
    let g = load(&rt, module(&hook_all(), OnCommand::Pass, OnReply::Pass), 4);
    assert!(g.denied_to_all().is_empty());

    // A malformed declaration refuses the plugin at load, with the reason.
    let m = manifest(abi::ManifestBuilder {
        denied: vec![b"NOSUCHCOMMAND".to_vec()],
        ..abi::ManifestBuilder::default()
    });
    let spec = PluginSpec::new(
        "hostile",
        module(&m, OnCommand::Pass, OnReply::Pass),
        vec![],
    );
    let e = rt.load(spec).unwrap_err();
    assert!(e.0.contains("unknown command"), "{e}");
}

/// `base` with a custom section carrying `n`: the same plugin, another sha256.
fn variant(base: &[u8], n: u32) -> Vec<u8> {
    let mut content = vec![1, b'v'];
    content.extend_from_slice(&n.to_le_bytes());
    let mut out = base.to_vec();
    out.push(0); // custom section
    out.push(content.len() as u8);
    out.extend_from_slice(&content);
    out
}

// Issue 25, item 12: compiled modules were cached forever, refused ones too; every upload of
// new bytes grew the cache.
#[test]
fn issue_25_the_module_cache_keeps_only_checked_modules_and_a_bounded_number() {
    let rt = runtime();
    // Valid WebAssembly, but not a plugin: compiled, refused, not kept.
    let e = rt.check_module(b"\0asm\x01\0\0\0").unwrap_err();
    assert!(e.0.contains("not a Tessera plugin"), "{e}");
    let no_memory = variant(b"\0asm\x01\0\0\0", 7);
    rt.check_module(&no_memory).unwrap_err();
    assert_eq!(rt.cached_modules().0, 0, "a refused module was kept");

    let base = module(&hook_all(), OnCommand::Pass, OnReply::Pass);
    let n = MAX_CACHED_MODULES as u32 + 8;
    for i in 0..n {
        rt.check_module(&variant(&base, i)).expect("a plugin");
    }
    let (kept, bytes) = rt.cached_modules();
    assert_eq!(kept, MAX_CACHED_MODULES, "{bytes} bytes");
    // An evicted module (the least recently used) compiles again when it is needed.
    let g = load(&rt, variant(&base, 0), 4);
    let mut wc = worker(&rt, &g);
    assert_eq!(call(&mut wc, b"k").unwrap(), CmdOutcome::Pass);
    assert_eq!(rt.cached_modules().0, MAX_CACHED_MODULES);
}
