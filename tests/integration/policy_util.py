"""Helpers for the tube-policy tests (test_policies*.py).

Not a test file (the runner loads only test_*.py).  Policy is a server.Tubed
(restartable, on free 127.0.0.1 ports, stopped by pid, kill -9 where a test
says so); its config file and binlog directory live in a temporary
directory removed at the end.

    with Policy(binary, CONF, "-z", "100") as p:     # --config FILE + args
        c = p.srv.client()
        ...
        p.rewrite(NEW_CONF); p.reload()               # SIGHUP, wait for it
        p.kill9(); p.restart()                        # with bdir=True
"""

import os
import re
import shutil
import socket
import subprocess
import time

import harness
from harness import TestFailure, check, eq, fail, unq, wait_for  # noqa: F401
from server import Tubed

# Generous: the machine is shared and loaded.  Only ever a ceiling.
DEADLINE = harness.DEADLINE


def sleep_until(t_mono):
    """Sleep until time.monotonic() >= t_mono (scenario set-up, not a speed
    assertion: e.g. 'wait until the job's max_age has surely passed')."""
    while True:
        d = t_mono - time.monotonic()
        if d <= 0:
            return
        time.sleep(min(d, 0.2))


class Policy(Tubed):
    """A tubed with --config FILE (text given) and optional -b DIR."""

    def __init__(self, binary, conf_text, *args, bdir=False, env=None):
        super().__init__(binary, *args, conf=conf_text, bdir=bdir, env=env,
                         prefix="tubed-policy-")
        self.path = self.conf_path
        self.reloads = 0

    def write(self, text):
        self.write_conf(text)

    def rewrite(self, text):
        self.write_conf(text)

    def command_args(self):
        return self.base_args()

    def started(self):
        self.reloads = 0

    def reload(self, expect_ok=True):
        """SIGHUP; wait until the server logged the outcome; return the line."""
        return super().reload(expect_ok=expect_ok)


# ------------------------------------------------------------------ running

def run_tubed(binary, args, timeout=15.0):
    """Run tubed to completion; returns (rc, stdout, stderr) as text.  Fails
    if it has not exited after timeout (then it is killed by pid)."""
    p = subprocess.Popen([binary] + [str(a) for a in args],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, close_fds=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
        fail("tubed %s was still running after %.0fs (stderr %r)"
             % (" ".join(map(str, args)), timeout, err[-400:]))
    return (p.returncode, out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"))


def port_listening(port):
    """True if something accepts connections on 127.0.0.1:port."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect((harness.HOST, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


# ------------------------------------------------------------------ client

def put_line(c, body, pri=0, delay=0, ttr=60):
    """put; returns the reply line (INSERTED n, OUT_OF_MEMORY, ...)."""
    if isinstance(body, str):
        body = body.encode()
    c.send(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body))
    return c.read_line()


def put_id(c, body, pri=0, delay=0, ttr=60):
    line = put_line(c, body, pri, delay, ttr)
    m = re.fullmatch(rb"INSERTED (\d+)", line)
    check(m is not None, "put %r: expected INSERTED <id>, got %r" % (body, line))
    return int(m.group(1))


def reserve_job(c, jid):
    """reserve-job <id> (asserts RESERVED with that id); returns the body."""
    line, body = c.cmd_body("reserve-job %d" % jid)
    check(re.fullmatch(rb"RESERVED %d \d+" % jid, line) is not None,
          "reserve-job %d: expected RESERVED %d n, got %r" % (jid, jid, line))
    return body


def bury_job(c, jid, pri=0):
    """Reserve job jid on c and bury it."""
    reserve_job(c, jid)
    c.expect("bury %d %d" % (jid, pri), "BURIED")


def present(c, jid):
    """peek <id>: True (FOUND), False (NOT_FOUND)."""
    got = c.peek("peek %d" % jid)
    if got is not None:
        eq(got[0], jid, "id in the FOUND reply to peek %d" % jid)
    return got is not None


def job_stats(c, jid):
    """stats-job as a dict, or None for NOT_FOUND."""
    line, body = c.cmd_body("stats-job %d" % jid)
    if line == b"NOT_FOUND":
        return None
    check(body is not None and line.startswith(b"OK "),
          "stats-job %d: expected OK n or NOT_FOUND, got %r" % (jid, line))
    return harness.parse_yaml_dict(body)


def job_where(c, jid):
    """(tube, state) of job jid, or None if it is gone."""
    st = job_stats(c, jid)
    if st is None:
        return None
    return unq(st["tube"]), unq(st["state"])


def tube_stats(c, tube):
    """stats-tube as a dict, or None for NOT_FOUND."""
    line, body = c.cmd_body("stats-tube " + tube)
    if line == b"NOT_FOUND":
        return None
    check(body is not None and line.startswith(b"OK "),
          "stats-tube %s: expected OK n or NOT_FOUND, got %r" % (tube, line))
    return harness.parse_yaml_dict(body)


def tube_counts(c, tube):
    """(urgent, ready, reserved, delayed, buried, total-jobs) of a tube;
    all zero if the tube does not exist."""
    st = tube_stats(c, tube)
    if st is None:
        return (0, 0, 0, 0, 0, 0)
    return tuple(int(st[k]) for k in (
        "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
        "current-jobs-delayed", "current-jobs-buried", "total-jobs"))


def live(c, tube):
    """Jobs of a tube in every state (ready+reserved+delayed+buried)."""
    _, r, v, d, b, _ = tube_counts(c, tube)
    return r + v + d + b


# ------------------------------------------------------------------ fsync gate

# An LD_PRELOAD shim: while the file $TUBED_TEST_GATE/closed exists,
# fdatasync() and fsync() wait (at most 120 s) before doing their work, and
# each call that waited is counted in $TUBED_TEST_GATE/waited.  So a test
# can hold the disk sync and see which replies wait for it.
GATE_SRC = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int gate(void)
{
    const char *d = getenv("TUBED_TEST_GATE");
    char path[4096];
    int waited = 0;

    if (!d)
        return 0;
    snprintf(path, sizeof path, "%s/closed", d);
    for (int i = 0; i < 12000 && access(path, F_OK) == 0; i++) {
        struct timespec ts = {0, 10000000};
        waited = 1;
        nanosleep(&ts, NULL);
    }
    if (waited) {
        snprintf(path, sizeof path, "%s/waited", d);
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
        if (fd >= 0) {
            if (write(fd, "w\n", 2) < 0) {}
            close(fd);
        }
    }
    return waited;
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    gate();
    return real(fd);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    gate();
    return real(fd);
}
"""


def build_gate(tmpdir):
    """Compile the shim into tmpdir; returns (shim path, gate dir) or
    raises harness.Skip if there is no C compiler."""
    src = os.path.join(tmpdir, "gate.c")
    so = os.path.join(tmpdir, "gate.so")
    gdir = os.path.join(tmpdir, "gate")
    os.mkdir(gdir)
    with open(src, "w") as f:
        f.write(GATE_SRC)
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise harness.Skip("no C compiler for the fsync gate shim")
    r = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", so, src, "-ldl"],
                       capture_output=True, timeout=60)
    check(r.returncode == 0, "building the gate shim: %r" % r.stderr[-500:])
    return so, gdir


def gate_env(so, gdir):
    return {"LD_PRELOAD": so, "TUBED_TEST_GATE": gdir,
            "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:verify_asan_link_order=0"}


def stats_tubes(c):
    """stats-tubes (spec §2) parsed: {tube: {key: value}}."""
    line, body = c.cmd_body("stats-tubes")
    check(body is not None and line.startswith(b"OK "),
          "stats-tubes: expected OK n, got %r" % line)
    check(body.startswith(b"---\n"), "stats-tubes data: %r" % body[:40])
    out, cur = {}, None
    for raw in body[4:].decode("utf-8", "replace").split("\n"):
        if not raw:
            continue
        if raw.startswith('"') and raw.endswith('":'):
            cur = out.setdefault(raw[1:-2], {})
        else:
            check(cur is not None and raw.startswith("  ") and ": " in raw,
                  "stats-tubes line %r" % raw)
            k, _, v = raw[2:].partition(": ")
            cur[k] = v
    return out


def tube_counter(c, tube, key):
    """One of stats-tubes' extension counters of a tube (0 if no tube)."""
    return int(stats_tubes(c).get(tube, {}).get(key, "0"))
