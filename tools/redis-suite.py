#!/usr/bin/env python3
"""Runs units of Redis's own test suite in external mode against a server or a Tessera proxy,
and counts passed, failed and aborted tests per unit:

    tools/redis-suite.py --src DIR --port 19000 unit/multi unit/type/list ...

DIR is a Redis source tree of the server's version (its `runtest`, `tests/` and a `src/` with
redis-server, redis-cli and redis-benchmark, which may be links to the installed ones). A test
Runs with `--singledb` (the proxy serves database 0 only; the suite otherwise SELECTs 9), or
with `--cluster-mode`: Redis Cluster's rules, which a slot-routing proxy shares. A test
that raises an exception ends the suite's run of its unit; the unit is run again with that
test and the tests that failed before it skipped (and counted as failed) until it runs to its
end, so one failure does not hide or break the tests after it; a test the suite's timeout
caught (`[TIMEOUT]`) counts as one that raised. Not part of CI: Redis's suite is not in this repository.
"""

import argparse
import re
import subprocess
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RESULT = re.compile(r"^\[(ok|err|exception|skip|ignore)\]: (.*?)(?: \(\d+ ms\))?$")
# The test running when an exception was raised, from Tcl's trace.
TRACE = re.compile(r'^"test (?:\{(.+?)\}|"(.+?)") \{')
# The test a `[TIMEOUT]` caught, from the clients' state report that follows it.
IN_PROGRESS = re.compile(r"=> \(IN PROGRESS\) (.+)$")


VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[[^\]]*\]")


def skip_pattern(name):
    """What --skiptest needs for a test name as the trace shows it: the name itself, or a
    regexp when it holds Tcl substitutions (`$type`, `[cmd]`), whose values the trace lacks."""
    if not VARIABLE.search(name):
        return name
    parts = VARIABLE.split(name)
    return "/^" + ".*".join(re.escape(p) for p in parts) + "$"


def run_unit(args, unit):
    skipped = []
    # name → passed, from the last run that reported it (a later run starts on fresh servers).
    result = {}
    err = set()
    for _ in range(args.max_restarts):
        if args.before:
            # A test that raised may have left a setting behind (maxmemory …).
            subprocess.run(args.before, shell=True, check=True)
        cmd = ["./runtest", "--host", args.host, "--port", str(args.port), "--single", unit,
               "--clients", "1", "--timeout", "120"] + args.mode
        for t in args.tags:
            cmd += ["--tags", t]
        for s in skipped:
            cmd += ["--skiptest", s]
        proc = subprocess.run(cmd, cwd=args.src, capture_output=True, text=True,
                              timeout=args.unit_timeout)
        exception = None
        raised = False
        for line in (ANSI.sub("", l) for l in proc.stdout.splitlines()):
            if raised and exception is None:
                t = TRACE.match(line.strip())
                if t:
                    exception = t.group(1) or t.group(2)
                    break
            if line.startswith("[TIMEOUT]"):
                # Ends the run like an exception; the report names the test it caught.
                raised = True
                continue
            stuck = IN_PROGRESS.search(line)
            if raised and exception is None and stuck:
                exception = stuck.group(1).strip()
                continue
            m = RESULT.match(line.strip())
            if not m:
                continue
            kind, name = m.groups()
            if kind in ("ok", "err"):
                result[name] = kind == "ok"
            elif kind == "exception":
                raised = True
        if not raised:
            break
        if exception is None:
            # Raised between tests (a server left busy by a test that failed before, say):
            # run again without the tests that failed so far; give up if there is none new.
            failed = [skip_pattern(n) for n, passed in result.items() if not passed]
            fresh = [f for f in failed if f not in skipped]
            if not fresh:
                err.add(f"(an exception outside any test, run {len(skipped) + 1})")
                break
            skipped.extend(fresh)
            continue
        pattern = skip_pattern(exception)
        if pattern in skipped:
            # Skipping it did not help (raised outside a test): the rest of the unit is lost.
            err.add(f"(the rest of the unit after: {exception})")
            break
        err.add(exception)
        skipped.append(pattern)
        # A test that failed before it may have left the shared client in a state (an open
        # MULTI, a setting) that made this one raise: the next run skips those too (they stay
        # counted as failed), so one failure does not cascade into the tests after it.
        skipped.extend(p for p in (skip_pattern(n) for n, ok in result.items() if not ok)
                       if p not in skipped)
    ok = {n for n, passed in result.items() if passed} - err
    err |= {n for n, passed in result.items() if not passed}
    if args.verbose:
        for name in sorted(err):
            print(f"    failed: {name}", flush=True)
    return len(ok), len(err), skipped


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--src", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--tags", action="append", default=[])
    p.add_argument("--cluster-mode", action="store_const", dest="mode",
                   const=["--cluster-mode"], default=["--singledb"],
                   help="Redis Cluster's rules (one slot per command; skips tests tagged "
                        "cluster:skip) instead of plain --singledb")
    p.add_argument("--before", help="shell command run before each run of a unit, e.g. one "
                   "that restarts the servers with their settings as configured")
    p.add_argument("-v", "--verbose", action="store_true", help="name the failed tests")
    p.add_argument("--max-restarts", type=int, default=60)
    p.add_argument("--unit-timeout", type=int, default=900)
    p.add_argument("units", nargs="+")
    args = p.parse_args()
    total_ok = total_err = 0
    for unit in args.units:
        ok, err, aborted = run_unit(args, unit)
        total_ok += ok
        total_err += err
        print(f"{unit:24} passed {ok:4}  failed {err:4}  (aborting exceptions: {len(aborted)})",
              flush=True)
    print(f"{'total':24} passed {total_ok:4}  failed {total_err:4}")


if __name__ == "__main__":
    sys.exit(main())
