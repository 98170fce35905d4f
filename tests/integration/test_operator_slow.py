"""How the operator's commands behave on big tubes: observations, not
assertions. Prints (does not assert) the time of a flush-tube of 200,000
jobs, the longest time another client waited for a trivial reply during it,
and the slowest list-jobs page of a 200,000-job tube, per state asked.
What is asserted is correctness: the counts, and that the pages cover every
job exactly once. Bounded: every read has a deadline, and the set-up stops
at a fixed budget.

Run alone to read the numbers:
    python3 tests/integration/run.py --bin build/tubed -k test_operator_slow -v
"""

import re
import statistics
import sys
import threading
import time

import harness
from harness import check, eq, fail, no_server, slow, tubed_only

EXT = "tubed extension (extensions.md section 2)"
N = 200000
SETUP_BUDGET = 60.0     # seconds; beyond it the test fails instead of hanging


def say(msg):
    sys.stdout.write("    [timing] %s\n" % msg)
    sys.stdout.flush()


def put_fast(c, n, body=b"x", pri=0, delay=0, deadline=None):
    """Pipelined puts in chunks; returns (first id, last id)."""
    first = last = None
    chunk = 2000
    line_ = b"put %d %d 60 %d\r\n%s\r\n" % (pri, delay, len(body), body)
    done = 0
    while done < n:
        k = min(chunk, n - done)
        c.send(line_ * k)
        for _ in range(k):
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            if not m:
                fail("put: %r" % line)
            last = int(m.group(1))
            if first is None:
                first = last
        done += k
        if deadline and time.monotonic() > deadline:
            fail("set-up took more than %.0fs (%d of %d puts)" % (SETUP_BUDGET, done, n))
    return first, last


def timed(c, line, timeout=60.0):
    t = time.perf_counter()
    c.send(line.encode() + b"\r\n")
    reply, body = c.read_reply(timeout)
    return time.perf_counter() - t, reply, body


def page_times(c, tube, state, count=1000, expected_total=None):
    """Page through list-jobs; returns (number of ids, [seconds per page])."""
    frm = 0
    times = []
    total = 0
    prev = 0
    while True:
        dt, reply, body = timed(c, "list-jobs %s %s %d %d" % (tube, state, frm, count))
        times.append(dt)
        check(reply.startswith(b"OK "), "list-jobs: %r" % reply)
        ids = [int(x) for x in harness.parse_yaml_list(body)]
        if not ids:
            break
        check(ids[0] > prev and ids == sorted(ids), "page order")
        prev = ids[-1]
        total += len(ids)
        frm = ids[-1] + 1
    if expected_total is not None:
        eq(total, expected_total, "list-jobs %s %s: ids across pages" % (tube, state))
    return total, times


def fmt(times):
    return "slowest %.2f ms, median %.2f ms over %d pages" % (
        max(times) * 1e3, statistics.median(times) * 1e3, len(times))


class Pinger(threading.Thread):
    """Sends a trivial command over and over on its own connection and
    records the longest wait for its reply."""

    def __init__(self, srv):
        super().__init__(daemon=True)
        self.c = srv.client(timeout=60.0)
        self.stop = threading.Event()
        self.worst = 0.0
        self.n = 0
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                t = time.perf_counter()
                self.c.send(b"list-tube-used\r\n")
                line = self.c.read_line(60.0)
                dt = time.perf_counter() - t
                if line != b"USING default":
                    self.error = "ping: %r" % line
                    return
                self.worst = max(self.worst, dt)
                self.n += 1
        except Exception as e:   # reported by the test
            self.error = repr(e)


@slow
@no_server
@tubed_only(EXT)
def test_operator_timings_200k(binary):
    with harness.start_server(binary) as srv:
        c = srv.client(timeout=60.0)
        w = srv.client(timeout=60.0)
        deadline = time.monotonic() + SETUP_BUDGET
        c.use("big")
        t = time.perf_counter()
        first, last = put_fast(c, N, b"j" * 16, deadline=deadline)
        say("put %d jobs (pipelined): %.2f s" % (N, time.perf_counter() - t))
        eq(last - first + 1, N, "ids")
        # A few jobs of the rare states.
        rare = list(range(first + 7, last, N // 10))[:10]
        c.send(b"".join(b"reserve-job %d\r\nbury %d 0\r\n" % (j, j) for j in rare[:5]))
        for _ in rare[:5]:
            c.read_reply()
            eq(c.read_line(), b"BURIED", "bury")
        w.send(b"".join(b"reserve-job %d\r\n" % j for j in rare[5:]))
        for _ in rare[5:]:
            check(w.read_reply()[0].startswith(b"RESERVED"), "reserve-job")
        c.use("big")
        put_fast(c, 5, b"d", delay=10000)

        for state, total in (("ready", N - 10), ("all", N + 5), ("buried", 5),
                             ("reserved", 5), ("delayed", 5)):
            n, times = page_times(c, "big", state, 1000, total)
            say("list-jobs big %-8s (%d jobs of %d in the tube): %s"
                % (state, n, N + 5, fmt(times)))
        # The same pages asked with count 1 (a rare state in a big tube).
        for state in ("buried", "reserved", "delayed"):
            _, times = page_times(c, "big", state, 1)
            say("list-jobs big %-8s count 1: %s" % (state, fmt(times)))

        # Reserved jobs of another tube: list-jobs of a small tube's
        # reserved jobs while 50,000 jobs are reserved elsewhere.
        c.use("busy")
        bfirst, blast = put_fast(c, 50000, b"b", deadline=deadline + 30)
        for i in range(bfirst, blast + 1, 2000):
            part = range(i, min(i + 2000, blast + 1))
            w.send(b"".join(b"reserve-job %d\r\n" % j for j in part))
            for _ in part:
                check(w.read_reply()[0].startswith(b"RESERVED"), "reserve-job")
        c.use("small")
        s = c.put(b"s")
        w.cmd_body("reserve-job %d" % s)
        _, times = page_times(c, "small", "reserved", 1000, 1)
        say("list-jobs small reserved (1 job; 50,000 reserved in another tube): %s"
            % fmt(times))
        _, times = page_times(c, "small", "ready", 1000, 0)
        say("list-jobs small ready (0 jobs; same server): %s" % fmt(times))

        # stats-tubes with a few big tubes
        dt, reply, body = timed(c, "stats-tubes")
        say("stats-tubes (%d tubes, %d jobs): %.2f ms" % (body.count(b'":\n'),
                                                          N + 50006, dt * 1e3))

        # flush-tube of 200,000 jobs while another client pings
        p = Pinger(srv)
        p.start()
        harness.wait_until(lambda: p.n >= 50 or p.error, timeout=30, what="pings")
        before = p.worst
        dt, reply, _ = timed(c, "flush-tube big", timeout=120.0)
        time.sleep(0.2)
        p.stop.set()
        p.join(60)
        check(p.error is None, "pinger: %s" % p.error)
        eq(reply, b"FLUSHED %d" % (N + 5 - 5), "flush-tube big")
        say("flush-tube big (%d jobs flushed, 5 reserved kept): %.1f ms; "
            "another client's longest wait for a trivial reply during it: %.1f ms "
            "(%.2f ms before the flush, %d pings)"
            % (N, dt * 1e3, p.worst * 1e3, before * 1e3, p.n))
        st = c.stats_tube("big")
        eq((st["current-jobs-ready"], st["current-jobs-reserved"],
            st["current-jobs-buried"], st["current-jobs-delayed"]),
           ("0", "5", "0", "0"), "big after the flush")

        # Buried jobs: 100,000 of them (reserved and buried one by one).
        nb = N // 2
        c.use("graves")
        bfirst, blast = put_fast(c, nb, b"g" * 16, deadline=deadline + 60)
        for i in range(bfirst, blast + 1, 2000):
            part = range(i, min(i + 2000, blast + 1))
            c.send(b"".join(b"reserve-job %d\r\nbury %d 0\r\n" % (j, j) for j in part))
            for _ in part:
                check(c.read_reply()[0].startswith(b"RESERVED"), "reserve-job")
                eq(c.read_line(), b"BURIED", "bury")
        eq(c.stats_tube("graves")["current-jobs-buried"], str(nb), "buried jobs")
        p = Pinger(srv)
        p.start()
        harness.wait_until(lambda: p.n >= 50 or p.error, timeout=30, what="pings")
        dt, reply, _ = timed(c, "flush-tube graves", timeout=120.0)
        time.sleep(0.2)
        p.stop.set()
        p.join(60)
        check(p.error is None, "pinger: %s" % p.error)
        eq(reply, b"FLUSHED %d" % nb, "flush-tube graves")
        say("flush-tube graves (%d buried jobs): %.1f ms; another client's longest "
            "wait during it: %.1f ms" % (nb, dt * 1e3, p.worst * 1e3))


@slow
@no_server
@tubed_only(EXT)
def test_operator_timings_flush_200k_with_binlog(binary):
    """The same flush with -b DIR -f 0: one record, 200,000 jobs unpinned."""
    from binlog_util import TempDir
    with TempDir() as d, harness.start_server(binary, ["-b", d, "-f", "0"]) as srv:
        c = srv.client(timeout=60.0)
        deadline = time.monotonic() + SETUP_BUDGET
        c.use("big")
        t = time.perf_counter()
        put_fast(c, N, b"j" * 16, deadline=deadline)
        say("put %d jobs with -b -f 0 (pipelined): %.2f s" % (N, time.perf_counter() - t))
        p = Pinger(srv)
        p.start()
        harness.wait_until(lambda: p.n >= 50 or p.error, timeout=30, what="pings")
        dt, reply, _ = timed(c, "flush-tube big", timeout=120.0)
        time.sleep(0.2)
        p.stop.set()
        p.join(60)
        check(p.error is None, "pinger: %s" % p.error)
        eq(reply, b"FLUSHED %d" % N, "flush-tube big")
        say("flush-tube big with -b -f 0 (%d jobs): %.1f ms; another client's "
            "longest wait during it: %.1f ms" % (N, dt * 1e3, p.worst * 1e3))
        _, times = page_times(c, "big", "all", 1000, 0)
