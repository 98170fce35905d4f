#!/usr/bin/env python3
"""Run the tubed integration tests.

    python3 tests/integration/run.py --bin build/tubed [--reference] [-k SUBSTR] [-j N] [-v]

Discovers tests/integration/test_*.py, runs every function named test_*, each
with a fresh server (unless marked otherwise, see harness.py), on a small
thread pool.  --reference means the binary is beanstalkd 1.12: tests marked
tubed-only are skipped.  Prints one line per failure and, last, exactly one
line ``integration: N passed, N failed[, N skipped]``.  Exits non-zero if any
test failed.
"""

import argparse
import concurrent.futures
import importlib.util
import inspect
import os
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402


class Test:
    def __init__(self, module, modname, name, fn):
        self.module = module
        self.modname = modname
        self.name = name
        self.fn = fn
        self.id = "%s::%s" % (modname, name)

    @property
    def tubed_only(self):
        return getattr(self.fn, "tubed_only", False)

    @property
    def wants_server(self):
        if getattr(self.fn, "no_server", False):
            return False
        return getattr(self.module, "SERVER", "per-test") != "none"

    @property
    def extra_args(self):
        return list(getattr(self.module, "SERVER_ARGS", [])) + list(
            getattr(self.fn, "server_args", []))


class ImportFailure:
    """A test file that could not be imported: reported as one failure."""

    def __init__(self, fname, error):
        self.id = "%s::<import>" % fname
        self.error = error
        self.tubed_only = False


def discover():
    tests = []
    for fname in sorted(os.listdir(HERE)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        modname = fname[:-3]
        path = os.path.join(HERE, fname)
        spec = importlib.util.spec_from_file_location(modname, path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception:
            tests.append(ImportFailure(fname, traceback.format_exc(limit=3).strip()
                                       .replace("\n", "\n    ")))
            continue
        fns = [(n, f) for n, f in vars(mod).items()
               if n.startswith("test_") and inspect.isfunction(f)
               and f.__module__ == modname]
        fns.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
        for n, f in fns:
            tests.append(Test(mod, fname, n, f))
    return tests


def run_one(test, binary):
    """Returns (status, reason, seconds); status is 'pass' or 'fail'."""
    if isinstance(test, ImportFailure):
        return "fail", "cannot import the test file:\n    " + test.error, 0.0
    t0 = time.monotonic()
    srv = None
    reasons = []
    try:
        if test.wants_server:
            srv = harness.Server(binary, test.extra_args)
            srv.start()
            test.fn(srv)
        else:
            test.fn(binary)
    except harness.Skip as e:
        if srv is not None:
            srv.stop()
        return "skip", str(e), time.monotonic() - t0
    except harness.TestFailure as e:
        reasons.append(str(e))
    except Exception as e:  # unexpected error in the test or a socket error
        tb = traceback.extract_tb(e.__traceback__)
        where = ""
        for fr in reversed(tb):
            if os.path.basename(fr.filename).startswith("test_"):
                where = " at %s:%d" % (os.path.basename(fr.filename), fr.lineno)
                break
        reasons.append("%s: %s%s" % (type(e).__name__, e, where))
    if srv is not None:
        try:
            problems = srv.stop()
        except Exception as e:
            problems = ["stopping server failed: %r" % (e,)]
        reasons.extend(problems)
    dt = time.monotonic() - t0
    if reasons:
        return "fail", " | ".join(reasons), dt
    return "pass", "", dt


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="server binary")
    ap.add_argument("--reference", action="store_true",
                    help="the binary is beanstalkd 1.12: skip tubed-only tests")
    ap.add_argument("-k", dest="filter", action="append", default=[],
                    help="run only tests whose file::name contains SUBSTRING "
                         "(repeatable: any match)")
    ap.add_argument("-j", dest="jobs", type=int, default=4,
                    help="parallel tests (default 4)")
    ap.add_argument("-v", dest="verbose", action="store_true",
                    help="print a line for every test")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="a test still running after this many seconds is "
                         "hung: it fails and the run ends (default 600)")
    opts = ap.parse_args()

    binary = os.path.abspath(opts.bin)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print("run.py: %s is not an executable file" % opts.bin, file=sys.stderr)
        print("integration: 0 passed, 1 failed")
        return 2

    tests = discover()
    if opts.filter:
        tests = [t for t in tests if any(k in t.id for k in opts.filter)]

    results = {}
    skipped = []
    torun = []
    for t in tests:
        if opts.reference and t.tubed_only:
            skipped.append(t)
        else:
            torun.append(t)

    lock = threading.Lock()
    start = time.monotonic()
    counts = {"pass": 0, "fail": 0, "skip": len(skipped)}

    def report(t, status, reason, dt):
        with lock:
            counts[status] += 1
            results[t.id] = status
            if status == "fail":
                print("FAIL %s: %s" % (t.id, reason), flush=True)
            elif opts.verbose:
                print("%s %s (%.1fs)%s" % (status.upper(), t.id, dt,
                                           (": " + reason) if reason else ""),
                      flush=True)

    if opts.verbose:
        for t in skipped:
            print("SKIP %s (tubed-only: %s)" % (t.id, t.tubed_only), flush=True)

    # Long tests first so the pool finishes sooner.
    order = sorted(torun, key=lambda t: -getattr(getattr(t, "fn", None), "slow", 0))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs))
    # The limit is per test and counts from the test's own start, so a
    # slow machine (or a busy one: tests wait for the pool) makes the run
    # longer, never red; only a test that hangs ends it.
    started = {}

    def timed(t):
        with lock:
            started[t.id] = time.monotonic()
        return run_one(t, binary)

    futs = {pool.submit(timed, t): t for t in order}
    pending = set(futs)
    while pending:
        with lock:
            running = [(started[futs[f].id], futs[f]) for f in pending
                       if futs[f].id in started]
        first = min((s for s, _ in running), default=None)
        wait = 1.0 if first is None else first + opts.timeout - time.monotonic()
        done, pending = concurrent.futures.wait(
            pending, timeout=min(max(0.1, wait), 10.0),
            return_when=concurrent.futures.FIRST_COMPLETED)
        for f in done:
            t = futs[f]
            try:
                status, reason, dt = f.result()
            except Exception as e:
                status, reason, dt = "fail", "runner error: %r" % (e,), 0.0
            report(t, status, reason, dt)
        now = time.monotonic()
        with lock:
            hung = [futs[f] for f in pending if futs[f].id in started
                    and now - started[futs[f].id] >= opts.timeout]
        if hung:
            for t in hung:
                report(t, "fail", "still running after %.0fs (the per-test limit, "
                       "--timeout): hung" % opts.timeout, now - started[t.id])
            for f in pending:
                if futs[f] not in hung:
                    report(futs[f], "fail", "not finished: the run ended because "
                           "%s hung" % hung[0].id, 0.0)
            line = "integration: %d passed, %d failed" % (counts["pass"], counts["fail"])
            if counts["skip"]:
                line += ", %d skipped" % counts["skip"]
            print(line, flush=True)
            harness.kill_all_servers()
            os._exit(1)
    pool.shutdown()

    if opts.verbose:
        print("run time %.1fs" % (time.monotonic() - start), flush=True)
    line = "integration: %d passed, %d failed" % (counts["pass"], counts["fail"])
    if counts["skip"]:
        line += ", %d skipped" % counts["skip"]
    print(line, flush=True)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
