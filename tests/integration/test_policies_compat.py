"""Compatibility: a config file in force that names no tube a client uses
changes nothing a client sees (spec/extensions.md: "a client or operator
that uses none of it sees beanstalkd").

1. A scripted session's reply bytes with such a file are identical to those
   of a server started without --config (only values that depend on time
   or on the process are masked, with their format checked).
2. The differential tester's scripted scenarios (differential.py) against
   Debian's beanstalkd 1.12 pass with such a file in force.
"""

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

import harness
from harness import check, eq, fail, no_server, slow
from policy_util import Policy

# Names none of the sessions below use.
UNUSED_CONF = """\
# server keys that change nothing a client sees here
stall_timeout = 30s
max_connections = 0
max_job_size = 65535

[tube unused-by-the-session]
max_items = 1
max_size = 1
max_item_size = 0
max_age = 1s
move_expired_to = zz-dead
max_timeouts = 1
fanout = true
discard_old_when_full = true

[tube zz-*]
journal = false
sync_journal = true
max_age = 1s
priority = 5
ttr = 1s
"""

# Values that depend on time or on the process: masked after a format check.
VOLATILE = {
    "uptime": r"\d+", "rusage-utime": r"\d+\.\d+", "rusage-stime": r"\d+\.\d+",
    "pid": r"\d+", "id": r"\S+", "hostname": r".*", "os": r".*", "platform": r".*",
    "age": r"\d+", "time-left": r"\d+", "job-memory": r"\d+",
}


def _session():
    """(connection, bytes) steps; replies are read until the connection
    answered every command of the step (counted by lines)."""
    big = b"x" * 65536
    return [
        ("a", b"put 5 0 120 3\r\nabc\r\n", 1),
        ("a", b"put 1 0 120 0\r\n\r\n", 1),
        ("a", b"put 9 3600 120 4\r\nlate\r\n", 1),
        ("a", b"use t1\r\nput 0 0 120 5\r\nhello\r\n", 2),
        ("a", b"use a+b\r\nput 0 0 120 4\r\nplus\r\n", 2),
        ("b", b"watch t1\r\nwatch a+b\r\nlist-tubes-watched\r\n", 3),
        ("b", b"reserve-with-timeout 0\r\n", 1),
        ("b", b"reserve-with-timeout 0\r\n", 1),
        ("b", b"release 4 10 0\r\nbury 5 3\r\n", 2),
        ("b", b"reserve-job 1\r\ntouch 1\r\nbury 1 7\r\n", 3),
        ("a", b"use default\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\n", 4),
        ("a", b"kick 10\r\nkick-job 3\r\nkick-job 99\r\n", 3),
        ("a", b"stats-job 1\r\nstats-job 3\r\nstats-job 99\r\n", 3),
        ("a", b"stats-tube default\r\nstats-tube t1\r\nstats-tube a+b\r\n"
              b"stats-tube nope\r\n", 4),
        ("a", b"list-tubes\r\nlist-tube-used\r\n", 2),
        ("a", b"pause-tube t1 0\r\npause-tube nope 1\r\n", 2),
        ("a", b"put 0 0 120 65536\r\n" + big + b"\r\n", 1),
        ("a", b"put 0 0 120 2\r\nabXY", 1),
        ("a", b"bogus\r\nput x\r\ndelete x\r\nuse -bad\r\n", 4),
        ("b", b"delete 4\r\ndelete 5\r\ndelete 4\r\n", 3),
        ("b", b"ignore a+b\r\nignore t1\r\nignore default\r\n", 3),
        ("a", b"stats\r\n", 1),
        ("a", b"list-tubes\r\nquit\r\n", 1),
    ]


def _read_replies(c, n):
    out = []
    for _ in range(n):
        line, body = c.read_reply()
        out.append((line, body))
    return out


def _mask(line, body):
    """Normalise one reply: mask volatile YAML values, recompute OK <n>."""
    if body is None or not line.startswith(b"OK "):
        return line + b"\r\n" + (b"" if body is None else body + b"\r\n")
    lines = body.split(b"\n")
    for i, l in enumerate(lines):
        k, sep, v = l.partition(b": ")
        key = k.decode("latin-1")
        if sep and key in VOLATILE:
            val = v.decode("latin-1")
            if not re.fullmatch(VOLATILE[key], val.strip('"')):
                fail("stats value %s: %r has an unexpected format" % (key, val))
            lines[i] = k + b": <" + k + b">"
    data = b"\n".join(lines)
    return b"OK <n>\r\n" + data + b"\r\n"


def _transcript(srv):
    conns = {}
    out = []
    for name, data, n in _session():
        if name not in conns:
            conns[name] = srv.client()
        c = conns[name]
        c.send(data)
        for line, body in _read_replies(c, n):
            out.append((name, data[:40], _mask(line, body)))
    return out


@no_server
def test_unused_config_changes_no_reply_byte(binary):
    with harness.start_server(binary) as plain:
        want = _transcript(plain)
    with Policy(binary, UNUSED_CONF) as p:
        got = _transcript(p.srv)
    diffs = ["%s %r:\n      without --config %r\n      with --config    %r"
             % (w[0], w[1], w[2][:300], g[2][:300])
             for w, g in zip(want, got) if w != g]
    eq(len(got), len(want), "number of replies")
    check(not diffs, "%d replies differ:\n    %s" % (len(diffs), "\n    ".join(diffs[:8])))


@slow
@no_server
def test_differential_with_config_against_beanstalkd(binary):
    """differential.py's scripted scenarios, tubed started with a config
    file that names none of their tubes, against beanstalkd 1.12."""
    ref = "/usr/bin/beanstalkd"
    if not os.access(ref, os.X_OK):
        raise harness.Skip("no %s" % ref)
    d = tempfile.mkdtemp(prefix="tubed-compat-")
    try:
        conf = os.path.join(d, "tubed.conf")
        with open(conf, "w") as f:
            f.write(UNUSED_CONF)
        wrapper = os.path.join(d, "tubed-with-config")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec '%s' --config '%s' \"$@\"\n" % (binary, conf))
        os.chmod(wrapper, stat.S_IRWXU)
        here = os.path.dirname(os.path.abspath(__file__))
        cmd = [sys.executable, os.path.join(here, "differential.py"), "--bin", wrapper,
               "--ref", ref, "--no-random", "--test-dialect", "1.13"]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=150,
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            fail("differential.py did not finish within 150 s")
        out = r.stdout.decode("utf-8", "replace")
        last = out.strip().splitlines()[-1] if out.strip() else ""
        m = re.fullmatch(r"differential: (\d+) passed, (\d+) failed", last)
        check(m is not None, "differential.py's last line %r (stderr %r)"
              % (last, r.stderr[-300:]))
        failed = [l for l in out.splitlines()
                  if l.startswith(("FAILED", "ERROR", "    "))]
        check(m.group(2) == "0" and r.returncode == 0,
              "with a config file in force: %s\n    %s" % (last, "\n    ".join(failed[:30])))
        check(int(m.group(1)) >= 20, "only %s scenarios ran" % m.group(1))
    finally:
        shutil.rmtree(d, ignore_errors=True)
