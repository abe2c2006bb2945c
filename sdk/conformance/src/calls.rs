//! The checks that call the plugin: hooks as declared, argument tables (alone, batched, after
//! the arena moved), reply tables, awkward arguments, the input limit, and the faults log.

use tessera_wasm::{CallError, CmdOutcome, ReplyOutcome};

use crate::corpus::{self, Described};
use crate::host::{Host, describe, same, show};
use crate::report::Report;

/// The corpus commands the plugin was given and what it answered (one entry per command of
/// the corpus it selects).
pub type Answers = Vec<(Described, CmdOutcome)>;

/// Hooks called as declared: every corpus command goes through the host's own selection; the
/// plugin must answer each selected one, and the runtime's call counter must grow by exactly
/// the number selected (an unselected command never enters the plugin).
pub fn hooks(h: &mut Host, r: &mut Report) -> Answers {
    let corpus = corpus::corpus(&h.hooks().prefixes);
    let before = h.calls();
    let mut answers = Vec::new();
    let mut problems = Vec::new();
    let mut selected = 0;
    for d in &corpus {
        match h.command(1, d) {
            None => {}
            Some(Ok(o)) => {
                selected += 1;
                answers.push((d.clone(), o));
            }
            Some(Err(e)) => {
                selected += 1;
                problems.push(format!("{}: no answer ({e})", d.label()));
            }
        }
    }
    // The runtime counts a call once it returned: every answer, and nothing else.
    let calls = h.calls() - before;
    if calls != answers.len() as u64 {
        problems.push(format!(
            "the runtime counted {calls} calls for {} answers",
            answers.len()
        ));
    }
    let mut notes = vec![format!(
        "{selected} of {} corpus commands selected by the manifest; the plugin was called for exactly those",
        corpus.len()
    )];
    if selected == 0 {
        notes.push(
            "the manifest selects none of the corpus: the other call checks have nothing to run"
                .into(),
        );
    }
    let mut kinds: Vec<String> = answers.iter().map(|(_, o)| kind(o).to_owned()).collect();
    kinds.sort();
    kinds.dedup();
    if !kinds.is_empty() {
        notes.push(format!("answers seen: {}", kinds.join(", ")));
    }
    r.check("hooks called as declared", problems, notes);
    answers
}

fn kind(o: &CmdOutcome) -> &'static str {
    match o {
        CmdOutcome::Pass => "pass",
        CmdOutcome::Deny(_) => "deny",
        CmdOutcome::Reply(_) => "reply",
        CmdOutcome::Rewrite { .. } => "rewrite",
        CmdOutcome::Observe(_) => "observe",
    }
}

/// Argument tables read correctly: the answers must not depend on where the table lies or how
/// it was delivered. The same commands, on a fresh instance, after an input that made the
/// arena grow (so `in` moved), and then as one batch (`tp_on_commands`): every answer must be
/// the one given alone.
pub fn tables(h: &mut Host, answers: &Answers, r: &mut Report) {
    if answers.is_empty() {
        r.skip(
            "argv tables read correctly",
            "no corpus command is selected",
        );
        return;
    }
    let mut problems = Vec::new();
    h.renew();
    if let Some((d, _)) = answers.iter().find(|(d, _)| d.keys.iter().any(|k| *k)) {
        // A key of 256 KiB: the table no longer fits the SDK's initial `in` buffer.
        let mut big = d.clone();
        let i = big.keys.iter().position(|k| *k).expect("has a key");
        big.args[i].extend(std::iter::repeat_n(b'x', 256 << 10));
        if let Some(Err(e)) = h.command(2, &big) {
            problems.push(format!("{}: no answer ({e})", big.label()));
        }
    }
    for (d, before) in answers {
        match h.command(1, d) {
            Some(Ok(o)) if same(before, &o) => {}
            Some(Ok(o)) => problems.push(format!(
                "{}: {} alone, {} after the arena moved",
                d.label(),
                describe(before),
                describe(&o)
            )),
            other => problems.push(format!("{}: no answer ({other:?})", d.label())),
        }
    }
    h.renew();
    let cmds: Vec<Described> = answers.iter().map(|(d, _)| d.clone()).collect();
    let results = h.batch(1, &cmds);
    if results.len() != cmds.len() {
        problems.push(format!(
            "a batch of {} commands gave {} answers",
            cmds.len(),
            results.len()
        ));
    }
    for ((d, before), got) in answers.iter().zip(&results) {
        match got {
            Ok(o) if same(before, o) => {}
            Ok(o) => problems.push(format!(
                "{}: {} alone, {} in a batch",
                d.label(),
                describe(before),
                describe(o)
            )),
            Err(e) => problems.push(format!("{}: no answer in a batch ({e})", d.label())),
        }
    }
    let has_batch = h
        .generation
        .shared
        .batches
        .load(std::sync::atomic::Ordering::Relaxed)
        > 0;
    let notes = vec![if has_batch {
        format!(
            "{} commands alone, after the arena moved, and in one tp_on_commands batch: the same answers",
            cmds.len()
        )
    } else {
        "the module has no tp_on_commands: the host gives a batch one call per command".into()
    }];
    r.check("argv tables read correctly", problems, notes);
}

/// Replies the suite plays as the backend's, of every type and one large one.
fn replies() -> Vec<Vec<u8>> {
    let mut big = b"$65536\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'v', 65536));
    big.extend_from_slice(b"\r\n");
    vec![
        b"+OK\r\n".to_vec(),
        b"-ERR wrong type\r\n".to_vec(),
        b"$-1\r\n".to_vec(),
        b":42\r\n".to_vec(),
        b"$5\r\nhello\r\n".to_vec(),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n".to_vec(),
        b"%1\r\n+k\r\n:1\r\n".to_vec(),
        big,
    ]
}

/// Reply tables read correctly: each observed command's reply, and a rewrite's replies for a
/// `merge = plugin`, of every RESP type; every answer must be usable (the runtime checks a
/// replacement is one RESP reply).
pub fn reply_tables(h: &mut Host, answers: &Answers, r: &mut Report) {
    let observed: Vec<&(Described, CmdOutcome)> = answers
        .iter()
        .filter(|(_, o)| {
            matches!(o, CmdOutcome::Observe(_)) || matches!(o, CmdOutcome::Rewrite { merge: 0, .. })
        })
        .collect();
    if observed.is_empty() {
        r.skip(
            "reply tables read correctly",
            "the plugin observes no corpus command and asks for no merge of its own",
        );
        return;
    }
    h.renew();
    let mut problems = Vec::new();
    let mut n = 0;
    for (d, _) in &observed {
        for reply in replies() {
            // Call on_command first, as the proxy does: the ctx is the instance's own.
            let Some(Ok(o)) = h.command(1, d) else {
                problems.push(format!("{}: no answer before its reply", d.label()));
                continue;
            };
            let got = match o {
                CmdOutcome::Observe(ctx) => h.reply(1, ctx, &[&reply]),
                CmdOutcome::Rewrite { ctx, count, .. } => {
                    let all: Vec<&[u8]> = (0..count).map(|_| reply.as_slice()).collect();
                    h.reply(1, ctx, &all)
                }
                other => {
                    problems.push(format!(
                        "{}: observed once, then {}",
                        d.label(),
                        describe(&other)
                    ));
                    continue;
                }
            };
            n += 1;
            if got.is_none() {
                problems.push(format!("{} → {}: no answer", d.label(), show(&reply)));
            }
        }
    }
    let notes = vec![format!(
        "{n} replies of {} observed commands (heads only: {})",
        observed.len(),
        h.hooks().observe_heads
    )];
    r.check("reply tables read correctly", problems, notes);
}

/// Awkward but valid commands the plugin selects (empty and binary keys, 1000 arguments, an
/// unknown command for a plugin that hooks everything) must each get an answer.
pub fn hostile(h: &mut Host, r: &mut Report) {
    h.renew();
    let mut problems = Vec::new();
    let mut n = 0;
    for d in corpus::hostile(&h.hooks().prefixes) {
        match h.command(3, &d) {
            None => {}
            Some(Ok(_)) => n += 1,
            Some(Err(e)) => problems.push(format!("{}: no answer ({e})", d.label())),
        }
    }
    let selected = n + problems.len();
    if selected == 0 {
        r.skip("awkward arguments", "the manifest selects none of them");
        return;
    }
    r.check(
        "awkward arguments",
        problems,
        vec![format!("{n} of {selected} selected answered")],
    );
}

/// The input limit: a command exactly at the plugin's input limit is taken (the plugin's arena
/// and memory hold whatever the host may copy), one byte over it is refused before anything is
/// copied, and the instance goes on answering as before.
///
/// On an instance with a CPU budget of its own (a second): what is judged here is memory and
/// the arena. A plugin whose work grows with the input (a glob over a 4 MiB key) may need more
/// than the default budget for such a command, which then fails alone, under either fail
/// policy; that is the budget doing its job, not a broken plugin.
pub fn input_limit(h: &mut Host, wasm: &[u8], config: &[u8], answers: &Answers, r: &mut Report) {
    const NAME: &str = "input limit handled";
    let limits = crate::host::Limits {
        cpu_budget_ms: 1000,
        memory_mb: h.generation.spec.memory_limit >> 20,
    };
    match Host::load(h.generation.name(), wasm, config, &limits) {
        Ok(mut own) => {
            at_the_limit(&mut own, answers, r);
            h.faults.append(&mut own.faults);
        }
        Err(e) => r.check(NAME, vec![e.0], vec![]),
    }
}

fn at_the_limit(h: &mut Host, answers: &Answers, r: &mut Report) {
    const NAME: &str = "input limit handled";
    let Some((d, before)) = answers.iter().find(|(d, _)| d.keys.iter().any(|k| *k)) else {
        r.skip(NAME, "no selected corpus command has a key to grow");
        return;
    };
    let limit = h.generation.spec.input_limit();
    let key = d.keys.iter().position(|k| *k).expect("has a key");
    let with_key_len = |len: usize| {
        let mut big = d.clone();
        let pad = len.saturating_sub(big.args[key].len());
        big.args[key].extend(std::iter::repeat_n(b'x', pad));
        big
    };
    let values = h.selects(d).unwrap_or(false);
    let size = |c: &Described| tessera_plugin_abi::command_size(c.table(values).into_iter());
    let base = size(d) - d.args[key].len();
    let under = with_key_len(limit - base);
    let over = with_key_len(limit - base + 1);
    let mut problems = Vec::new();
    h.renew();
    match h.command(4, &under) {
        Some(Ok(_)) => {}
        other => problems.push(format!(
            "a {}-byte input (the limit) got no answer: {other:?}",
            size(&under)
        )),
    }
    match h.command(4, &over) {
        Some(Err(CallError::TooLarge(_))) => {}
        other => problems.push(format!(
            "a {}-byte input (over the limit) was not refused: {other:?}",
            size(&over)
        )),
    }
    match h.command(1, d) {
        Some(Ok(o)) if same(before, &o) => {}
        other => problems.push(format!(
            "after the refused input, {} got {other:?} instead of {}",
            d.label(),
            describe(before)
        )),
    }
    r.check(
        NAME,
        problems,
        vec![format!(
            "input limit {limit} B of a {} MiB memory limit, grown through {} (CPU budget {} ms here)",
            h.generation.spec.memory_limit >> 20,
            d.label(),
            h.generation.spec.cpu_budget.as_millis()
        )],
    )
}

/// `on_close` and `on_tick` where the manifest asks for them.
pub fn close_and_tick(h: &mut Host, r: &mut Report) {
    let (close, tick) = (h.hooks().want_close, h.hooks().tick_ms);
    if !close && tick == 0 {
        r.skip("on_close and on_tick", "the manifest asks for neither");
        return;
    }
    let before = h.faults.len();
    for conn in 1..=4 {
        h.close_and_tick(conn);
    }
    let problems = h.faults[before..]
        .iter()
        .map(|f| format!("{}: {}", f.call, f.reason))
        .collect();
    r.check(
        "on_close and on_tick",
        problems,
        vec![format!("on_close: {close}, tick every {tick} ms")],
    );
}

/// No call faulted (trap, CPU budget, memory cap, unusable output) in any check; for each one
/// that did, whether it cost only that call (a fresh instance answered a known command as
/// before).
pub fn faults(h: &Host, r: &mut Report) {
    let mut problems = Vec::new();
    for f in &h.faults {
        let after = match (f.contained, f.fresh) {
            (Some(true), _) => "the next command got a fresh instance, which answered as before",
            (Some(false), _) => {
                "and the next command, on a fresh instance, did NOT answer as before"
            }
            (None, true) => {
                "a fresh instance was created for the next call (no earlier answer to replay)"
            }
            (None, false) => "and NO fresh instance could be created",
        };
        problems.push(format!("{} → {}; {after}", f.call, f.reason));
    }
    let notes = if problems.is_empty() {
        vec![format!(
            "{} calls, none faulted (CPU budget {} ms, memory limit {} MiB)",
            h.calls(),
            h.generation.spec.cpu_budget.as_millis(),
            h.generation.spec.memory_limit >> 20
        )]
    } else {
        vec![format!("{} of the calls faulted", problems.len())]
    };
    r.check("no call faults", problems, notes);
}

/// `Pass`, `Replace` or `Error` as the report and the cases file name them.
pub fn reply_word(o: &ReplyOutcome) -> String {
    match o {
        ReplyOutcome::Pass => "pass".into(),
        ReplyOutcome::Replace(b) => format!("replace {}", show(b)),
        ReplyOutcome::Error(t) => format!("error {:?}", String::from_utf8_lossy(t)),
    }
}
