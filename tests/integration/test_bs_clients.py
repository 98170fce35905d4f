"""Real beanstalk client libraries against tubed, each through its normal
API (tests/integration/bs_clients/, README.md there): npm fivebeans, jackd,
node-beanstalk and beanstalkd.

Each script runs against a fresh tubed and, when `beanstalkd` is on PATH,
against a fresh beanstalkd too: the same script must pass on both (the
reference run keeps the checks honest), and the two servers must end with
the same `stats` counters. A missing node or npm is a
failure, not a skip: CI installs them (Makefile DEPS); the npm clients are
installed here with `npm ci` when node_modules is missing. Each script
prints PASS/FAIL per check and "N passed, N failed".
"""

import fcntl
import os
import re
import shutil
import subprocess

from harness import check, eq, fail, no_server, start_server, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "bs_clients")
PKG = os.path.join(CLIENTS, "node")


def _need(ok, what):
    if not ok:
        fail("%s is not installed (see tests/integration/bs_clients/README.md; "
             "`make deps` installs the Debian packages)" % what)


def _node_with(module):
    """The node binary, after `npm ci` in bs_clients/node if `module` is
    not installed there yet. The tests here run in parallel (run.py -j)
    and `npm ci` starts by deleting node_modules, so one installs at a
    time, under a lock on package.json that other processes respect too."""
    node = shutil.which("node") or shutil.which("nodejs")
    _need(node, "nodejs")
    with open(os.path.join(PKG, "package.json"), "rb") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if not os.path.isdir(os.path.join(PKG, "node_modules", module)):
            npm = shutil.which("npm")
            _need(npm, "npm")
            r = subprocess.run([npm, "ci", "--prefix", PKG, "--no-audit", "--no-fund"],
                               capture_output=True, timeout=300)
            check(r.returncode == 0, "npm ci in %s failed: %s" % (
                PKG, (r.stdout + r.stderr).decode("utf-8", "replace")[-600:]))
    return node


# stats keys that differ between two servers whatever the clients did.
VOLATILE = {"pid", "uptime", "rusage-utime", "rusage-stime", "id", "hostname",
            "version", "os", "platform", "binlog-current-index",
            "binlog-oldest-index", "binlog-max-size"}


def _run_script(binary, argv, server, timeout=60):
    """Run one client script against a fresh server (`binary`); check that
    every check passed. Returns the script's output and the server's
    `stats` once the script's connections are gone."""
    with start_server(binary) as s:
        try:
            r = subprocess.run(argv + ["127.0.0.1", str(s.port)], capture_output=True,
                               timeout=timeout, stdin=subprocess.DEVNULL, cwd=CLIENTS)
        except subprocess.TimeoutExpired:
            fail("%s against %s did not finish within %ds" % (" ".join(argv), server, timeout))
        out = r.stdout.decode("utf-8", "replace")
        err = r.stderr.decode("utf-8", "replace")
        lines = out.strip().splitlines()
        fails = [l for l in lines if l.startswith("FAIL")]
        check(not fails and r.returncode == 0,
              "%s against %s: exit %d; %s; stderr: %s" % (
                  os.path.basename(argv[-1]), server, r.returncode,
                  "; ".join(fails) or out[-400:], err[-400:]))
        check(lines and re.fullmatch(r"\d+ passed, 0 failed", lines[-1]) is not None,
              "%s: last line: %r" % (server, lines[-1:] or ""))
        return out, _settled_stats(s.client(), server)


def _settled_stats(c, server):
    """`stats` once c is the only connection left (the server has seen the
    script's connections close, so current-* counts are final)."""
    def settled():
        st = c.stats()
        return st if st["current-connections"] == "1" else None
    return wait_for(settled, "%s: the script's connections closed" % server)


def _run_both(binary, argv, checks):
    """The script against tubed, then the reference run against beanstalkd
    when it is installed; each must pass all `checks` checks, and the two
    servers must end with the same `stats` counters (every key beanstalkd
    has, but the volatile ones)."""
    out, got = _run_script(binary, argv, "tubed")
    eq(out.count("PASS"), checks, "%s checks passed against tubed" % argv[-1])
    reference = shutil.which("beanstalkd")
    if reference and os.path.realpath(reference) != os.path.realpath(binary):
        out, want = _run_script(reference, argv, "beanstalkd")
        eq(out.count("PASS"), checks, "%s checks passed against beanstalkd" % argv[-1])
        diff = ["%s: beanstalkd %s, tubed %s" % (k, v, got.get(k))
                for k, v in want.items() if k not in VOLATILE and got.get(k) != v]
        check(not diff, "stats after %s differ: %s" % (os.path.basename(argv[-1]),
                                                        "; ".join(diff)))


@no_server
def test_bs_client_fivebeans(binary):
    node = _node_with("fivebeans")
    _run_both(binary, [node, os.path.join(CLIENTS, "fivebeans.js")], 59)


@no_server
def test_bs_client_jackd(binary):
    node = _node_with("jackd")
    _run_both(binary, [node, os.path.join(CLIENTS, "jackd.js")], 57)


@no_server
def test_bs_client_node_beanstalk(binary):
    node = _node_with("node-beanstalk")
    _run_both(binary, [node, os.path.join(CLIENTS, "node_beanstalk.js")], 59)


@no_server
def test_bs_client_npm_beanstalkd(binary):
    node = _node_with("beanstalkd")
    _run_both(binary, [node, os.path.join(CLIENTS, "npm_beanstalkd.js")], 57)
