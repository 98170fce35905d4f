"""Helpers for the read-behind tests (test_readbehind*.py; spec
extensions.md §5, kestrel.md §6, doc/binlog.md "Read-behind").

Not a test file (the runner loads only test_*.py).  A server here is a
server.Tubed: a tubed with --config FILE (the text given), -b DIR, and on free 127.0.0.1
ports a memcache listener and the HTTP metrics listener; every port is
picked afresh per start attempt.  Servers are stopped by pid (kill -9 where
a test says so) and the temporary directory is removed at the end.

    with RB(binary, "[tube rb]\\nmax_memory_size = 64K\\n", "-f", "0") as s:
        c = s.bs()                        beanstalk client
        m = s.mc()                        memcache client (mcproto.Mc)
        s.metrics()                       one scrape (http_util.Metrics)
        spilled(c)                        (spilled-jobs, spilled-bytes)
        s.kill9(); s.restart()            same config and binlog directory

Bodies: make_bodies() gives distinct bodies of an exact size that carry
their index and random bytes, CR LF inside, some ending in CR LF, so a body
served from the wrong record, cut or shifted, never passes for another.
"""

import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "mc_clients"))

import harness  # noqa: E402
from harness import DEADLINE, TestFailure, check, eq, fail, wait_for  # noqa: E402,F401
from server import Tubed  # noqa: E402

KIB = 1024


# ------------------------------------------------------------------ bodies

def make_body(tag, i, size, rnd):
    """One body of exactly `size` bytes (size >= 40): '<tag-i>' first, CR LF
    in the middle, random bytes, every third one ending in CR LF."""
    head = b"<%s-%06d>" % (harness._b(tag), i)
    tail = b"\r\n" if i % 3 == 0 else b"|"
    n = size - len(head) - len(tail) - 2
    check(n >= 8, "make_body: size %d too small" % size)
    mid = rnd.randbytes(n)
    cut = n // 2
    return head + mid[:cut] + b"\r\n" + mid[cut:] + tail


def make_bodies(tag, n, size, seed, start=0):
    """n bodies; size is an int or a (lo, hi) range (inclusive)."""
    rnd = random.Random(seed)
    out = []
    for i in range(start, start + n):
        s = size if isinstance(size, int) else rnd.randint(size[0], size[1])
        out.append(make_body(tag, i, s, rnd))
    return out


# ------------------------------------------------------------------ server

class RB(Tubed):
    """tubed --config FILE -b DIR --memcache-port P --metrics-port H ARGS."""

    def __init__(self, binary, conf, *args, memcache=True, metrics=True):
        super().__init__(binary, *args, conf=conf, bdir=True, memcache=memcache,
                         metrics=metrics, prefix="tubed-rb-")


# ------------------------------------------------------------------ stats

def stats_binlog(c):
    line, body = c.cmd_body("stats-binlog")
    check(body is not None and line.startswith(b"OK "),
          "stats-binlog: expected OK <n>, got %r" % line)
    d = harness.parse_yaml_dict(body)
    keys = list(d)
    eq(keys[-2:], ["spilled-jobs", "spilled-bytes"],
       "the last keys of stats-binlog (extensions.md §2)")
    return d


def spilled(c):
    """(spilled-jobs, spilled-bytes) from stats-binlog."""
    d = stats_binlog(c)
    return int(d["spilled-jobs"]), int(d["spilled-bytes"])


def wait_spilled(c, jobs, nbytes=None, what="", timeout=DEADLINE):
    """Poll stats-binlog until spilled-jobs == jobs (and spilled-bytes ==
    nbytes when given); fails with the last value seen."""
    last = [None]

    def done():
        got = last[0] = spilled(c)
        return got if got[0] == jobs and (nbytes is None or got[1] == nbytes) else None

    return wait_for(done, lambda: "%sspilled-jobs %d%s; last seen %r" % (
        what + ": " if what else "", jobs,
        "" if nbytes is None else " and spilled-bytes %d" % nbytes, last[0]),
        timeout)


def mc_tube_stats(m, tube):
    """The memcache queue_<tube>_* stats as {key: int}."""
    st = m.stats()
    pre = "queue_%s_" % tube
    out = {}
    for k, v in st.items():
        if k.startswith(pre):
            rest = k[len(pre):]
            if rest in ("items", "bytes", "mem_items", "mem_bytes",
                        "total_items", "open_transactions"):
                out[rest] = int(v)
    return out


def counter(s, name, **labels):
    """One sample of the metrics scrape, as an int."""
    return int(s.metrics().value(name, **labels))


def spill_metrics(s):
    """(reads, waits, errors) counters."""
    m = s.metrics()
    return (int(m.value("tubed_binlog_spill_reads_total")),
            int(m.value("tubed_binlog_spill_waits_total")),
            int(m.value("tubed_binlog_spill_errors_total")))


# ------------------------------------------------------------------ client

def put_many(c, bodies, pri=100, delay=0, ttr=60, batch=50):
    """Pipelined puts (batches); returns the ids in order."""
    ids = []
    pris = pri if isinstance(pri, (list, tuple)) else [pri] * len(bodies)
    delays = delay if isinstance(delay, (list, tuple)) else [delay] * len(bodies)
    for i in range(0, len(bodies), batch):
        part = range(i, min(i + batch, len(bodies)))
        c.send(b"".join(b"put %d %d %d %d\r\n%s\r\n"
                        % (pris[k], delays[k], ttr, len(bodies[k]), bodies[k])
                        for k in part))
        for k in part:
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            check(m is not None, "put #%d: expected INSERTED <id>, got %r" % (k, line))
            ids.append(int(m.group(1)))
    return ids


def peek_body(c, jid):
    """peek <id> → body (asserts FOUND with that id)."""
    line, body = c.cmd_body("peek %d" % jid)
    check(re.fullmatch(rb"FOUND %d \d+" % jid, line) is not None,
          "peek %d: expected FOUND %d <n>, got %r" % (jid, jid, line))
    return body


def check_bodies(c, jobs, what, chunk=100):
    """Every id of {id: body} peeks back byte for byte."""
    ids = sorted(jobs)
    bad, lost = [], []
    for i in range(0, len(ids), chunk):
        part = ids[i:i + chunk]
        c.send(b"".join(b"peek %d\r\n" % j for j in part))
        for j in part:
            line, body = c.read_reply()
            if line == b"NOT_FOUND":
                lost.append(j)
                continue
            check(re.fullmatch(rb"FOUND %d \d+" % j, line) is not None,
                  "%s: peek %d answered %r" % (what, j, line))
            if body != jobs[j]:
                bad.append(j)
    check(not lost and not bad, "%s: %d of %d jobs NOT_FOUND %s, %d with another "
          "body %s" % (what, len(lost), len(ids), lost[:8], len(bad), bad[:8]))


def reserve_exact(c, jid, body, what="", timeout=None, plain=False):
    """reserve-with-timeout (plain: reserve) must hand out jid with body."""
    line, got = c.cmd_body("reserve" if plain else
                           "reserve-with-timeout %d" % (timeout or 5))
    m = re.fullmatch(rb"RESERVED (\d+) (\d+)", line)
    check(m is not None, "%sexpected RESERVED %d, got %r" % (what, jid, line))
    eq(int(m.group(1)), jid, "%sid reserved" % what)
    check(got == body, "%sjob %d: body differs (%d bytes, expected %d: %r...)"
          % (what, jid, len(got), len(body), got[:30]))


def job_stats(c, jid):
    line, body = c.cmd_body("stats-job %d" % jid)
    if line == b"NOT_FOUND":
        return None
    check(body is not None, "stats-job %d: %r" % (jid, line))
    return harness.parse_yaml_dict(body)


def list_jobs(c, tube, state="all"):
    """Every id of list-jobs <tube> <state>, paged."""
    out, frm = [], 0
    while True:
        line, body = c.cmd_body("list-jobs %s %s %d 1000" % (tube, state, frm))
        if line == b"NOT_FOUND":
            return out
        check(body is not None, "list-jobs: %r" % line)
        page = [int(x) for x in harness.parse_yaml_list(body)]
        if not page:
            return out
        out += page
        frm = page[-1] + 1


def worker(s, *tubes):
    """A beanstalk connection to s watching exactly `tubes`."""
    w = s.bs()
    for t in tubes:
        w.watch(t)
    if "default" not in tubes:
        w.ignore("default")
    return w


def mem_bytes(s, tube):
    """tubed_tube_memory_bytes of `tube` (metrics)."""
    return int(s.metrics().value("tubed_tube_memory_bytes", tube=tube))
