//! Batched `on_command` calls ([`Instance::on_commands`]): the hooked commands of one
//! client's pipeline given to one instance in one `tp_on_commands` call
//! (`tessera_plugin_abi::batch`), or one `tp_on_command` each for a module built without
//! that export. Per command the outcome is what a call of its own would give: each command's
//! input is checked against the input limit alone, and a fault is charged to the command
//! that was running (the guest's progress counter says which) while the ones before it keep
//! their results and the ones after it are left for a fresh instance.

use tessera_plugin_abi::batch::{
    BATCH_DONE, BATCH_ENTRY, BatchResults, batch_table_size, put_batch_entry, put_batch_header,
};
use tessera_plugin_abi::{self as abi, ArgIn};

use crate::fault::{CallError, Fault, Input};
use crate::instance::{CmdOutcome, Instance, outcome_of};

/// One command of a batch: its ABI id, classes and argument table (key flags and elision
/// decided by the caller, as for [`Instance::on_command`]).
#[derive(Debug, Clone, Copy)]
pub struct BatchCmd<'a> {
    /// ABI command id.
    pub cmd: u16,
    /// `class::*` bits.
    pub class: u32,
    /// The argument table.
    pub args: &'a [ArgIn<'a>],
}

impl Instance {
    /// Runs `on_command` for the first commands of `cmds` and pushes one result for each onto
    /// `results`, in order; returns how many (at least one, unless `cmds` is empty). It stops
    /// early after a fault (the instance is dead: give the rest to a fresh one) and where the
    /// next command would take the call past the input limit (call again with the rest).
    pub fn on_commands(
        &mut self,
        conn: u64,
        cmds: &[BatchCmd<'_>],
        results: &mut Vec<Result<CmdOutcome, CallError>>,
    ) -> usize {
        let Some(first) = cmds.first() else {
            return 0;
        };
        let limit = self.input_limit();
        let mut sizes = Vec::with_capacity(cmds.len());
        let mut total = batch_table_size(0);
        for c in cmds {
            let size = abi::command_size(c.args.iter().copied());
            if size > limit || total + BATCH_ENTRY + size > limit {
                break;
            }
            total += BATCH_ENTRY + size;
            sizes.push(size);
        }
        if sizes.len() < 2 || !self.has_batch() {
            // One command (or one over the limit alone, refused there): the ordinary call.
            results.push(self.on_command(conn, first.cmd, first.class, first.args));
            return 1;
        }
        self.batch_call(conn, &cmds[..sizes.len()], &sizes, total, results)
    }

    fn batch_call(
        &mut self,
        conn: u64,
        cmds: &[BatchCmd<'_>],
        sizes: &[usize],
        total: usize,
        results: &mut Vec<Result<CmdOutcome, CallError>>,
    ) -> usize {
        let n = cmds.len();
        if let Err(e) = self.admit(Input::Command, total) {
            results.push(Err(e));
            return 1;
        }
        let dst = match self.input_buffer(total) {
            Ok(d) => d,
            Err(e) => {
                results.push(Err(e));
                return 1;
            }
        };
        put_batch_header(dst, n);
        let mut off = batch_table_size(n);
        for (i, (c, &size)) in cmds.iter().zip(sizes).enumerate() {
            let table = &mut dst[off..off + size];
            if abi::encode_command(table, c.class, c.args.len(), c.args.iter().copied()).is_none() {
                results.push(Err(CallError::Fault(Fault::bad_output(
                    "argument longer than 1 GiB",
                ))));
                return 1;
            }
            put_batch_entry(dst, i, off, size, c.cmd);
            off += size;
        }
        let progress = self.input_offset() + BATCH_DONE;
        let r = self.guarded_batch(progress, conn, n);
        self.count_batch();
        match r {
            Ok(r) => {
                self.count_batched_calls(n);
                let (_, count, out_len) = abi::unpack(r);
                if count == 0 {
                    // The guest could not read the batch: one call per command instead.
                    let c = &cmds[0];
                    results.push(self.on_command(conn, c.cmd, c.class, c.args));
                    return 1;
                }
                if count as usize != n {
                    let f = Fault::bad_output(format!("did {count} of a batch of {n} commands"));
                    results.push(Err(self.fail(f)));
                    return 1;
                }
                match self.out_range(out_len) {
                    Ok(range) => self.batch_results(range, cmds, n, results),
                    Err(e) => {
                        results.push(Err(e));
                        1
                    }
                }
            }
            Err(e) => {
                // Faulted at command `done`: the ones before it finished (their results are
                // in `out`, described by the descriptor as it was after each of them).
                let done = self.batch_progress(n);
                // The commands done and the one that faulted reached the plugin; the rest not.
                self.count_batched_calls((done + 1).min(n));
                if done == 0 {
                    results.push(Err(e));
                    return 1;
                }
                let Some(range) = self.out_range_after_fault() else {
                    results.push(Err(CallError::Fault(Fault::bad_output(
                        "batch output unreadable after a fault",
                    ))));
                    return 1;
                };
                let got = self.batch_results(range, cmds, done, results);
                if results.last().is_some_and(Result::is_err) {
                    // A result before the fault was unusable: charged there.
                    return got;
                }
                results.push(Err(e));
                got + 1
            }
        }
    }

    /// Decodes the first `n` results of a batch from `out[range]` onto `results`; a result
    /// it cannot use is a fault of that command (the instance dies, the commands after it
    /// are not decoded). Returns how many results it pushed.
    fn batch_results(
        &mut self,
        range: std::ops::Range<usize>,
        cmds: &[BatchCmd<'_>],
        n: usize,
        results: &mut Vec<Result<CmdOutcome, CallError>>,
    ) -> usize {
        let start = results.len();
        let fault = match self.memory_bytes().get(range) {
            None => Some(Fault::bad_output("output outside memory")),
            Some(out) => match BatchResults::parse(out, cmds.len()) {
                Err(_) => Some(Fault::bad_output("batch results outside its output")),
                Ok(view) => view.iter().take(n).zip(cmds).find_map(|(r, c)| {
                    let o = match r {
                        Ok((r, bytes)) => outcome_of(r, bytes, c.args.len()),
                        Err(_) => Err(Fault::bad_output("batch output outside its buffer")),
                    };
                    match o {
                        Ok(o) => {
                            if let CmdOutcome::Deny(_) = &o {
                                self.count_deny();
                            }
                            results.push(Ok(o));
                            None
                        }
                        Err(f) => Some(f),
                    }
                }),
            },
        };
        if let Some(f) = fault {
            let e = self.fail(f);
            results.push(Err(e));
        }
        results.len() - start
    }
}
