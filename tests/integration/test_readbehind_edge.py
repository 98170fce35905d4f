"""Read-behind edge cases (spec extensions.md §5, doc/binlog.md
"Read-behind"): interactions of spilled jobs with moves, expiry, reloads,
flushes, binlog write errors, file-descriptor exhaustion, kill -9 and
parked (waiting) reserves.

Some tests need a read in flight for a while, or a binlog write that
fails: a small LD_PRELOAD shim (built here with cc, into the test's
temporary directory) slows pread() in the reader thread while a flag file
exists, and fails pwrite() past a file's header while another one exists.
Those tests are skipped when no C compiler is there.  The fd tests run
the server under prlimit --nofile.
"""

import os
import re
import shutil
import signal
import socket
import time

import harness
import shim_util
from harness import Skip, check, eq, fail, no_server, tubed_only, unq
from readbehind_util import (KIB, RB, mem_bytes, worker, check_bodies, job_stats, make_bodies,
                             mc_tube_stats, put_many, reserve_exact,
                             spill_metrics, spilled, stats_binlog, wait_for,
                             wait_spilled)

EXT = "read-behind is a tubed extension"

class RBX(RB):
    """RB with the fault shim preloaded (shim=True) and/or a file
    descriptor limit (nofile=N, via prlimit)."""

    def __init__(self, binary, conf, *args, shim=False, nofile=None, slow_ms=600,
                 **kw):
        super().__init__(binary, conf, *args, **kw)
        self.env = {}
        self.nofile = nofile
        self.slow_flag = os.path.join(self.tmp, "slow-pread")
        self.fail_flag = os.path.join(self.tmp, "fail-pwrite")
        if nofile is not None and not shutil.which("prlimit"):
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise Skip("needs prlimit")
        if shim:
            try:
                pre = shim_util.build(binary, self.tmp, shim_util.DISK_FAULTS_C)
            except Skip:
                shutil.rmtree(self.tmp, ignore_errors=True)
                raise
            self.env = {"LD_PRELOAD": pre, "SLOW_PREAD_FLAG": self.slow_flag,
                        "SLOW_PREAD_MS": str(slow_ms), "FAIL_PWRITE_FLAG": self.fail_flag}

    def _argv(self, port):
        a = super()._argv(port)
        if self.nofile is not None:
            a = ["prlimit", "--nofile=%d:%d" % (self.nofile, self.nofile)] + a
        return a

    def slow_reads(self, on=True):
        if on:
            open(self.slow_flag, "w").close()
        elif os.path.exists(self.slow_flag):
            os.unlink(self.slow_flag)

    def fail_writes(self, on=True):
        if on:
            open(self.fail_flag, "w").close()
        elif os.path.exists(self.fail_flag):
            os.unlink(self.fail_flag)




def _hog_fds(port, limit=200):
    """Open connections until the server takes no more; returns them."""
    socks = []
    for _ in range(limit):
        try:
            k = socket.create_connection((harness.HOST, port), timeout=2)
            k.sendall(b"list-tubes\r\n")
            k.settimeout(1)
            if not k.recv(100):
                k.close()
                break
        except OSError:
            break
        socks.append(k)
    check(socks, "could not open a single connection")
    return socks


def _states(c, ids):
    out = {}
    for j in ids:
        st = job_stats(c, j)
        out[j] = unq(st["state"]) if st else None
    return out


# A parked worker's reserve-with-timeout: the time it must not wait for.
PARKED_TIMEOUT = 30


def _parked(s, w, line):
    """Send a reserve on w and wait until the server has parked it for a
    body (tubed_binlog_spill_waits_total goes up)."""
    before = spill_metrics(s)[1]
    w.send(line.encode() + b"\r\n")
    wait_for(lambda: spill_metrics(s)[1] > before, "the reserve parked for a body",
             timeout=5)


# ------------------------------------------------------- confirmed bugs

@no_server
@tubed_only(EXT)
def test_move_of_the_job_a_worker_waits_for(binary):
    """A worker parked for the spilled top job of src (its read in flight);
    that job is moved to another tube. src still has a job ready in memory:
    the worker must get it once the read is answered, not wait for its
    timeout (or, with a plain reserve, for ever).

    The worker's own timeout tells the two apart, not a clock: one far
    above the read (0.6 s), so that a worker left waiting answers
    TIMED_OUT, and a server served late by a slow machine still answers
    RESERVED."""
    with RBX(binary, "[tube src]\nmax_memory_size = 100\n", shim=True) as s:
        c = s.bs()
        c.use("src")
        x = c.put(b"X" * 90, pri=100)
        y = c.put(b"Y" * 90, pri=0)          # over budget: on disk only
        wait_spilled(c, 1, 90, "Y spilled")
        s.slow_reads()
        w = worker(s, "src")
        _parked(s, w, "reserve-with-timeout %d" % PARKED_TIMEOUT)
        c.expect("move-job %d other" % y, "MOVED")
        t0 = time.monotonic()
        line, body = w.read_reply(timeout=2 * PARKED_TIMEOUT)
        took = time.monotonic() - t0
        eq(line, b"RESERVED %d 90" % x,
           "the waiting worker after the job it waited for moved away (%.1fs; "
           "TIMED_OUT: it waited for its %d s)" % (took, PARKED_TIMEOUT))
        eq(body, b"X" * 90, "body of X")


@no_server
@tubed_only(EXT)
def test_failed_recovery_keeps_spilled_bodies(binary):
    """A binlog write error, then the recovery's own writes fail too (the
    disk still failing for two seconds), then the disk is fine again: every
    acknowledged spilled job must still have its body, before and after a
    kill -9 restart."""
    with RBX(binary, "[tube rb]\nmax_memory_size = 2K\n", "-f", "0", shim=True) as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("rec", 12, KIB, 21)
        ids = put_many(c, bodies)
        jobs = dict(zip(ids, bodies))
        wait_spilled(c, 10, 10 * KIB, "10 of 12 spilled")
        s.fail_writes()
        p = s.bs()
        p.use("rb")
        p.send(b"put 1 0 60 5\r\nhello\r\n")   # its write fails: unhealthy
        # The failed write (binlog.1), then two recovery attempts (one a
        # second) whose writes (into the fresh binlog.2, binlog.3) fail too.
        # (stats-binlog each time: an idle server does not try to recover)
        wait_for(lambda: stats_binlog(c) and
                 re.search(r"binlog: write binlog\.3:", s.stderr()),
                 "two failed recovery attempts", timeout=6, interval=0.1)
        s.fail_writes(False)
        wait_for(lambda: stats_binlog(c)["healthy"] == "true", "the binlog recovers",
                 timeout=5, interval=0.1)
        check_bodies(c, jobs, "after the recovery")
        s.kill9()
        s.restart()
        check_bodies(s.bs(), jobs, "after kill -9 and a restart")


@no_server
@tubed_only(EXT)
def test_reload_shrink_finishes_without_traffic(binary):
    """A reload lowers the budget of a tube holding 3000 bodies in memory:
    the shrink (512 jobs per loop iteration) must finish by itself, with no
    client sending anything meanwhile (-F: no fsync timer either)."""
    with RB(binary, "[tube rb]\nmax_memory_size = 100M\n", "-F") as s:
        c = s.bs()
        c.use("rb")
        put_many(c, make_bodies("sh", 3000, 200, 22), batch=500)
        eq(spilled(c), (0, 0), "before the reload")
        s.write_conf("[tube rb]\nmax_memory_size = 10K\n")
        s.srv.signal(signal.SIGHUP)
        wait_for(lambda: "reloaded" in s.stderr(), "the reload", timeout=5)
        time.sleep(2)                        # idle: nobody talks to it
        n = spilled(c)[0]                    # the first look after the idle time
        check(n >= 3000 - 10 * KIB // 200 - 1,
              "2 s after the reload, with no traffic, only %d of ~2950 bodies "
              "left memory (the shrink advances one batch per loop wake-up)" % n)


@no_server
@tubed_only(EXT)
def test_move_into_a_budgeted_tube_spills(binary):
    """Jobs moved into a tube with a budget from one without (move-job, and
    expiry with move_expired_to, the usual dead-letter set-up) must not keep
    the budgeted tube's bodies in memory past its budget for good."""
    conf = ("[tube rb]\nmax_memory_size = 16K\n"
            "[tube src]\nmax_age = 1s\nmove_expired_to = rb\n")
    with RB(binary, conf) as s:
        c = s.bs()
        c.use("plain")
        bodies = make_bodies("mv", 100, KIB, 23)
        ids = put_many(c, bodies)
        for j in ids:
            c.expect("move-job %d rb" % j, "MOVED")
        c.use("src")
        eb = make_bodies("ex", 100, KIB, 24)
        eids = put_many(c, eb)
        wait_for(lambda: mc_tube_stats(s.mc(), "rb")["items"] == 200,
                 "the expired jobs moved into rb", timeout=6)
        check_bodies(c, dict(zip(ids + eids, bodies + eb)), "bodies in rb")
        time.sleep(0.2)
        mem = mem_bytes(s, "rb")
        check(mem <= 16 * KIB + KIB,
              "rb (max_memory_size 16K) holds %d body bytes in memory after 200 "
              "jobs of 1 KiB were moved in; spilled %r" % (mem, spilled(c)))


@no_server
@tubed_only(EXT)
def test_fd_exhaustion_does_not_bury_the_backlog(binary):
    """The server is out of file descriptors (too many clients) when the
    read-ahead wants its first spilled body: a transient EMFILE must not
    bury ready jobs (it buried the whole spilled backlog, one after the
    other); once fds are free the jobs are served in order."""
    with RBX(binary, "[tube rb]\nmax_memory_size = 4K\n", nofile=40) as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("fd", 20, 1000, 25)
        ids = put_many(c, bodies)
        wait_spilled(c, 16, 16000, "16 spilled")
        socks = _hog_fds(s.srv.port)
        for j in ids[:4]:                       # room: the read-ahead starts
            c.expect("delete %d" % j, "DELETED")
        time.sleep(0.5)
        for k in socks:
            k.close()
        time.sleep(0.2)
        st = _states(c, ids[4:])
        buried = sorted(j for j, v in st.items() if v != "ready")
        check(not buried, "after a transient EMFILE in the read-ahead, %d of 16 "
              "ready jobs are no longer ready: %s (errors counted: %d)"
              % (len(buried), buried[:8], spill_metrics(s)[2]))
        w = worker(s, "rb")
        for j, b in zip(ids[4:], bodies[4:]):
            reserve_exact(w, j, b, "drain: ")
            w.expect("delete %d" % j, "DELETED")


@no_server
@tubed_only(EXT)
def test_fd_exhaustion_during_compaction_loses_nothing(binary):
    """Compaction (small -s) meets spilled jobs while the server is out of
    file descriptors: the open of the old file fails with EMFILE, which is
    not damage. No acknowledged job may be deleted."""
    with RBX(binary, "[tube rb]\nmax_memory_size = 1K\n", "-s", "8192", "-z", "1024",
             nofile=40) as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("cf", 6, 900, 26)
        ids = put_many(c, bodies)
        wait_spilled(c, 5, 4500, "5 spilled")
        c.use("churn")
        cids = put_many(c, make_bodies("ch", 60, 900, 27))
        socks = _hog_fds(s.srv.port)
        for j in cids:                          # live bytes drop: compaction
            c.expect("delete %d" % j, "DELETED")
        time.sleep(1.5)
        for k in socks:
            k.close()
        time.sleep(0.2)
        st = _states(c, ids)
        gone = sorted(j for j, v in st.items() if v is None)
        check(not gone, "compaction under EMFILE deleted %d of 6 acknowledged "
              "jobs: %s" % (len(gone), gone))
        check_bodies(c, dict(zip(ids, bodies)), "bodies after the compaction")


# ------------------------------------------- interactions that work

@no_server
@tubed_only(EXT)
def test_flush_while_a_worker_waits_for_a_body(binary):
    """flush-tube while a worker is parked for a spilled body in flight: the
    worker keeps waiting (nothing is left), gets the next put; nothing is
    counted as spilled afterwards."""
    with RBX(binary, "[tube rb]\nmax_memory_size = 2K\n", shim=True) as s:
        c = s.bs()
        c.use("rb")
        put_many(c, make_bodies("fw", 10, KIB, 28), pri=[50] * 2 + [10] * 8)
        wait_spilled(c, 8, 8 * KIB, "8 spilled")
        s.slow_reads()
        w = worker(s, "rb")
        _parked(s, w, "reserve-with-timeout %d" % PARKED_TIMEOUT)
        c.expect("flush-tube rb", "FLUSHED 10")
        w.expect_silence(0.8)                  # the read came back: nothing
        s.slow_reads(False)
        nb = b"after-the-flush"
        jid = c.put(nb)
        eq(w.read_reply(timeout=2 * PARKED_TIMEOUT), (b"RESERVED %d %d" % (jid, len(nb)), nb),
           "the waiting worker gets the put after the flush (TIMED_OUT: it waited for "
           "its %d s)" % PARKED_TIMEOUT)
        wait_spilled(c, 0, 0, "after the flush")
        eq(mc_tube_stats(s.mc(), "rb")["mem_items"], 0, "queue_rb_mem_items")


@no_server
@tubed_only(EXT)
def test_timeout0_takes_the_job_a_worker_waits_for(binary):
    """A worker parked for a spilled body; another takes that job with
    reserve-with-timeout 0 (read on the loop, body intact); the parked one
    gets the next job (ready in memory) once the read returns."""
    with RBX(binary, "[tube rb]\nmax_memory_size = 1100\n", shim=True) as s:
        c = s.bs()
        c.use("rb")
        a = make_bodies("t0", 2, KIB, 29)
        x = c.put(a[0], pri=100)
        y = c.put(a[1], pri=1)                 # on disk only
        wait_spilled(c, 1, KIB, "y spilled")
        s.slow_reads()
        w = worker(s, "rb")
        _parked(s, w, "reserve-with-timeout %d" % PARKED_TIMEOUT)
        w2 = worker(s, "rb")
        eq(w2.cmd_body("reserve-with-timeout 0"), (b"RESERVED %d %d" % (y, KIB), a[1]),
           "reserve-with-timeout 0 takes y, read on the loop")
        eq(w.read_reply(timeout=2 * PARKED_TIMEOUT), (b"RESERVED %d %d" % (x, KIB), a[0]),
           "the parked worker gets x (TIMED_OUT: it waited for its %d s)" % PARKED_TIMEOUT)


@no_server
@tubed_only(EXT)
def test_delete_of_the_job_a_worker_waits_for(binary):
    """A worker parked for a spilled body; that job is deleted: the worker
    gets the next job, ready in memory."""
    with RBX(binary, "[tube rb]\nmax_memory_size = 1100\n", shim=True) as s:
        c = s.bs()
        c.use("rb")
        a = make_bodies("dl", 2, KIB, 30)
        x = c.put(a[0], pri=100)
        y = c.put(a[1], pri=1)
        wait_spilled(c, 1, KIB, "y spilled")
        s.slow_reads()
        w = worker(s, "rb")
        _parked(s, w, "reserve-with-timeout %d" % PARKED_TIMEOUT)
        c.expect("delete %d" % y, "DELETED")
        eq(w.read_reply(timeout=2 * PARKED_TIMEOUT), (b"RESERVED %d %d" % (x, KIB), a[0]),
           "the parked worker gets x (TIMED_OUT: it waited for its %d s)" % PARKED_TIMEOUT)
        eq(spilled(c), (0, 0), "spilled after the delete")


@no_server
@tubed_only(EXT)
def test_memcache_waiting_get_on_spilled_item(binary):
    """memcache get q/t=3000 and get q/open parked for a body in flight get
    it byte for byte; abort gives it back (it leaves memory again), close
    deletes; mem_items/mem_bytes and spilled-jobs follow."""
    with RBX(binary, "[tube q]\nmax_memory_size = 1K\n", shim=True) as s:
        c = s.bs()
        c.use("q")
        bodies = make_bodies("mq", 4, 1000, 31)
        ids = put_many(c, bodies)
        wait_spilled(c, 3, 3000, "3 spilled")
        m = s.mc()
        c.expect("delete %d" % ids[0], "DELETED")   # the one in memory
        s.slow_reads()
        eq(m.get("q/t=3000", timeout=5), bodies[1], "get q/t=3000 (read in flight)")
        s.slow_reads(False)
        eq(m.get("q/open", timeout=5), bodies[2], "get q/open")
        st = mc_tube_stats(m, "q")
        eq((st["items"], st["open_transactions"]), (1, 1), "one left, one open")
        m.send(b"get q/abort\r\n")
        eq(m.read_line(), b"END", "abort")
        wait_spilled(c, 1, 1000, "the aborted item goes back over budget")
        st = mc_tube_stats(m, "q")
        eq((st["items"], st["mem_items"], st["bytes"], st["mem_bytes"]),
           (2, 1, 2000, 1000), "after the abort")
        check_bodies(c, {ids[2]: bodies[2], ids[3]: bodies[3]}, "bodies left")


@no_server
@tubed_only(EXT)
def test_move_spilled_between_budgeted_tubes(binary):
    """move-job of spilled jobs from one budgeted tube to another with a
    smaller budget, and back: bodies intact, each tube within its budget,
    the spilled counts add up."""
    with RB(binary, "[tube a]\nmax_memory_size = 8K\n[tube b]\nmax_memory_size = 3K\n") as s:
        c = s.bs()
        c.use("a")
        bodies = make_bodies("ab", 30, KIB, 32)
        ids = put_many(c, bodies)
        jobs = dict(zip(ids, bodies))
        wait_spilled(c, 22, 22 * KIB, "22 spilled in a")
        for j in ids[10:]:
            c.expect("move-job %d b" % j, "MOVED")
        wait_for(lambda: mem_bytes(s, "b") <= 3 * KIB and mem_bytes(s, "a") <= 8 * KIB,
                 "both tubes within budget", timeout=5)
        wait_spilled(c, 30 - 8 - 3, None, "30 jobs, 11 bodies in memory")
        check_bodies(c, jobs, "after moving 20 to b")
        for j in ids[10:20]:
            c.expect("move-job %d a" % j, "MOVED")
        wait_for(lambda: mem_bytes(s, "b") <= 3 * KIB and mem_bytes(s, "a") <= 8 * KIB,
                 "both tubes within budget after moving back", timeout=5)
        check_bodies(c, jobs, "after moving 10 back")
        w = worker(s, "a", "b")
        for j in sorted(ids):
            reserve_exact(w, j, jobs[j], "drain both: ")
            w.expect("delete %d" % j, "DELETED")
        eq(spilled(c), (0, 0), "spilled after the drain")


@no_server
@tubed_only(EXT)
def test_kill9_during_reload_shrink(binary):
    """kill -9 while a reload-driven shrink is half done (-f 0): every body
    comes back intact, the tube comes back spilled to its new budget."""
    with RB(binary, "[tube rb]\nmax_memory_size = 10M\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("ks", 2000, 300, 33)
        ids = put_many(c, bodies, batch=500)
        jobs = dict(zip(ids, bodies))
        w = worker(s, "rb")
        for j in ids[:5]:                      # some reserved, some buried
            reserve_exact(w, j, jobs[j], "before the reload: ")
        w.expect("bury %d 5" % ids[0], "BURIED")
        s.write_conf("[tube rb]\nmax_memory_size = 30K\n")
        s.srv.signal(signal.SIGHUP)
        wait_for(lambda: spilled(c)[0] >= 1000, "half the shrink", timeout=10)
        s.kill9()
        s.restart()
        c = s.bs()
        check_bodies(c, jobs, "after kill -9 during the shrink")
        wait_for(lambda: mem_bytes(s, "rb") <= 30 * 1024, "rb within its budget",
                 timeout=10)


@no_server
@tubed_only(EXT)
def test_reserve_timeout_zero_vs_waiting_reserve_order(binary):
    """Priority order across the spilled boundary with both reserve kinds
    and a worker watching two budgeted tubes: every job comes out in (pri,
    id) order."""
    conf = "[tube p]\nmax_memory_size = 2K\n[tube q]\nmax_memory_size = 2K\n"
    with RB(binary, conf) as s:
        c = s.bs()
        jobs = {}
        for t, seed in (("p", 34), ("q", 35)):
            c.use(t)
            b = make_bodies(t, 10, KIB, seed)
            pris = [(i * 7) % 5 for i in range(10)]
            ids = put_many(c, b, pri=pris)
            for j, body, pr in zip(ids, b, pris):
                jobs[j] = (pr, body)
        order = sorted(jobs, key=lambda j: (jobs[j][0], j))
        w = worker(s, "p", "q")
        for k, j in enumerate(order):
            line, body = w.cmd_body("reserve-with-timeout %d" % (k % 2))
            eq(line, b"RESERVED %d %d" % (j, KIB), "reserve #%d" % k)
            eq(body, jobs[j][1], "body of %d" % j)
            w.expect("delete %d" % j, "DELETED")
        eq(spilled(c), (0, 0), "drained")
