"""Read-behind under operations (spec extensions.md §5, doc/binlog.md
"Read-behind"): what the other read-behind tests did not pin down.

- Memory of a drained read-behind backlog goes back to the kernel (issue
  24's row: within a small margin of the start, whatever the body size).
  Bodies read back used to be malloc'd with their record's head and slack
  around them, and glibc kept that memory after the drain.
- A reload that lowers a budget spills buried jobs too, and jobs reserved
  across it spill once given back (they used to keep the tube over its
  budget for as long as they lived).
- A record the disk cannot read (EIO) buries its job when a reserve meets
  it, so the jobs behind it are served (it used to block its tube).
- The read-ahead reads only ready jobs: delayed ones it read first (id
  order) held the budget while every ready job behind them waited.
- Delayed and buried bodies in memory make room for ready ones on disk
  (they held the budget for their whole delay, and every ready job waited).
- A seeded model of random commands, reloads and kill -9 on spilling
  tubes, checked job by job and against the memcache and stats-binlog
  figures and the budgets.

Memory figures are VmRSS from /proc/PID/status with generous ceilings
(no timing); under AddressSanitizer every allocation is malloc's and the
memory checks are skipped (LeakSanitizer checks leaks there).
"""

import os
import random
import re
import shutil
import socket

import harness
import shim_util
from harness import Skip, check, eq, no_server, tubed_only, unq
from readbehind_util import (KIB, RB, check_bodies, job_stats, make_body, make_bodies,
                             mc_tube_stats, mem_bytes, put_many, reserve_exact,
                             spill_metrics, spilled, wait_for, worker)

EXT = "read-behind is a tubed extension"
MIB = 1024 * KIB


def _sanitized(binary):
    with open(binary, "rb") as f:
        return b"__asan_" in f.read()


def _rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * KIB
    raise harness.TestFailure("no VmRSS for pid %d" % pid)


class Pipe:
    """A raw beanstalk connection for pipelined bulk traffic."""

    def __init__(self, port):
        self.sock = socket.create_connection((harness.HOST, port), timeout=30)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _more(self):
        d = self.sock.recv(1 << 20)
        check(d, "server closed the connection")
        self.buf += d

    def lines(self, n):
        out = []
        while len(out) < n:
            i = self.buf.find(b"\r\n")
            if i < 0:
                self._more()
                continue
            out.append(self.buf[:i])
            self.buf = self.buf[i + 2:]
        return out

    def job(self):
        """One RESERVED reply: (id, body)."""
        line = self.lines(1)[0]
        m = re.fullmatch(rb"RESERVED (\d+) (\d+)", line)
        check(m is not None, "expected RESERVED, got %r" % line)
        n = int(m.group(2))
        while len(self.buf) < n + 2:
            self._more()
        body, self.buf = self.buf[:n], self.buf[n + 2:]
        return int(m.group(1)), body

    def setup(self, tube):
        self.sock.sendall(b"use %s\r\nwatch %s\r\nignore default\r\n"
                          % (tube.encode(), tube.encode()))
        got = self.lines(3)
        check(got[0] == b"USING " + tube.encode(), "use: %r" % got)

    def put_same(self, n, body, batch=500):
        rec = b"put 1 0 60 %d\r\n%s\r\n" % (len(body), body)
        for i in range(0, n, batch):
            k = min(batch, n - i)
            self.sock.sendall(rec * k)
            for line in self.lines(k):
                check(line.startswith(b"INSERTED "), "put: %r" % line)

    def drain(self, n, body, batch=500):
        """Reserve and delete n jobs; every body must be `body`."""
        left = n
        while left:
            k = min(batch, left)
            self.sock.sendall(b"reserve-with-timeout 10\r\n" * k)
            ids = []
            for _ in range(k):
                jid, got = self.job()
                check(got == body, "job %d: body of %d bytes, expected %d"
                      % (jid, len(got), len(body)))
                ids.append(jid)
            self.sock.sendall(b"".join(b"delete %d\r\n" % j for j in ids))
            for line in self.lines(k):
                check(line == b"DELETED", "delete: %r" % line)
            left -= k


# ------------------------------------------------------------ memory

@no_server
@tubed_only(EXT)
def test_drained_backlog_gives_memory_back(binary):
    """A 16 MiB budget, 400,000 bodies of 100 bytes (40 MB, most spilled),
    drained with reserve + delete: RSS comes back within 16 MiB of what it
    was before the puts (it stayed ~45 MiB above: each body read back was
    malloc'd with its ~90-byte record head and slack, and glibc kept it)."""
    if _sanitized(binary):
        raise Skip("ASan build: malloc behind every allocation")
    n, size, budget = 400000, 100, 16 * MIB
    body = b"b" * (size - 2) + b"\r\n"
    with RB(binary, "[tube rb]\nmax_memory_size = 16M\n",
            memcache=False, metrics=False) as s:
        p = Pipe(s.port)
        p.setup("rb")
        start = _rss(s.pid)
        p.put_same(n, body)
        c = s.bs()
        jobs, nbytes = spilled(c)
        check(jobs >= n - budget // size - 1,
              "spilled-jobs %d after %d puts over a %d-byte budget" % (jobs, n, budget))
        p.drain(n, body)
        eq(spilled(c), (0, 0), "spilled after the drain")
        eq(int(c.stats_tube("rb")["current-jobs-ready"]), 0, "ready after the drain")
        grew = _rss(s.pid) - start
        check(grew <= 16 * MIB, "RSS after draining is %.1f MiB above the start "
              "(ceiling 16 MiB)" % (grew / MIB))


# ------------------------------------------------------------ reloads

@no_server
@tubed_only(EXT)
def test_reload_lowering_the_budget_spills_buried_jobs(binary):
    """100 bodies of 10 KiB in a tube without a budget, 50 of them buried;
    a reload gives it 64 KiB: the buried bodies go to disk too (the budget
    counts every state), and come back byte for byte, after kick and kill
    -9 as well (the reload's spill skipped the buried list: 500 KiB of
    buried bodies stayed in memory for as long as they lived)."""
    n, size, budget = 100, 10 * KIB, 64 * KIB
    with RB(binary, "[tube rb]\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("bur", n, size, 11)
        ids = put_many(c, bodies)
        jobs = dict(zip(ids, bodies))
        w = worker(s, "rb")
        for jid in ids[:50]:
            reserve_exact(w, jid, jobs[jid], "bury round: ")
            eq(w.cmd("bury %d 7" % jid), b"BURIED", "bury %d" % jid)
        eq(mem_bytes(s, "rb"), n * size, "bodies in memory before the reload")
        s.reload("[tube rb]\nmax_memory_size = 64K\n")
        wait_for(lambda: mem_bytes(s, "rb") <= budget,
                 lambda: "bodies in memory %d after the reload, budget %d"
                 % (mem_bytes(s, "rb"), budget))
        eq(int(c.stats_tube("rb")["current-jobs-buried"]), 50, "buried jobs")
        check_bodies(c, jobs, "after the reload")
        eq(c.cmd("kick 50"), b"KICKED 50", "kick")
        check(mem_bytes(s, "rb") <= budget, "bodies in memory %d after kick"
              % mem_bytes(s, "rb"))
        s.kill9()
        s.restart()
        c = s.bs()
        eq(int(c.stats_tube("rb")["current-jobs-ready"]), n, "ready after kill -9")
        check_bodies(c, jobs, "after kill -9")


@no_server
@tubed_only(EXT)
def test_jobs_reserved_across_a_lowering_reload_spill_when_given_back(binary):
    """20 bodies of 10 KiB reserved by a worker when a reload gives their
    tube 32 KiB: they keep their bodies while reserved (spill.h), and go to
    disk once given back (release, release with a delay, bury, the worker's
    disconnect) with the tube over budget; a delete spills nothing. They
    used to stay in memory until they left the tube, whatever its budget."""
    n, size, budget = 30, 10 * KIB, 32 * KIB
    with RB(binary, "[tube rb]\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("back", n, size, 12)
        ids = put_many(c, bodies)
        jobs = dict(zip(ids, bodies))
        w = worker(s, "rb")
        for jid in ids[:20]:
            reserve_exact(w, jid, jobs[jid], "reserve round: ")
        s.reload("[tube rb]\nmax_memory_size = 32K\n")
        # the 10 unreserved go; the 20 reserved keep theirs
        wait_for(lambda: mem_bytes(s, "rb") <= 20 * size,
                 lambda: "bodies in memory %d after the reload" % mem_bytes(s, "rb"))
        eq(mem_bytes(s, "rb"), 20 * size, "reserved bodies stay in memory")
        eq(w.cmd("delete %d" % ids[0]), b"DELETED", "delete")
        del jobs[ids[0]]
        eq(w.cmd("release %d 5 0" % ids[1]), b"RELEASED", "release")
        eq(w.cmd("release %d 5 1000" % ids[2]), b"RELEASED", "release, delayed")
        eq(w.cmd("bury %d 5" % ids[3]), b"BURIED", "bury")
        w.close()  # the other 16 come back by the disconnect
        wait_for(lambda: mem_bytes(s, "rb") <= budget,
                 lambda: "bodies in memory %d once given back, budget %d"
                 % (mem_bytes(s, "rb"), budget))
        st = c.stats_tube("rb")
        eq((int(st["current-jobs-ready"]), int(st["current-jobs-delayed"]),
            int(st["current-jobs-buried"]), int(st["current-jobs-reserved"])),
           (n - 3, 1, 1, 0), "ready, delayed, buried, reserved")
        check_bodies(c, jobs, "once given back")
        eq(job_stats(c, ids[2])["state"], "delayed", "state of the delayed one")
        s.kill9()
        s.restart()
        c = s.bs()
        check_bodies(c, jobs, "after kill -9")
        eq(job_stats(c, ids[3])["state"], "buried", "state of the buried one")


# ------------------------------------------------------------ a model

class Model:
    """Seeded random commands on three tubes (two with budgets that reloads
    change, one plain), every reply checked, and the server's view checked
    against the model now and then and after each kill -9 (-f 0: every
    acknowledged change survives; reserved jobs come back ready)."""

    TUBES = ("rb", "rb2", "plain")
    SIZES = (0, 1, 50, 300, 1000, 2500, 5000)

    def __init__(self, s, seed):
        self.s = s
        self.rnd = random.Random(seed)
        self.jobs = {}        # id -> {tube, body, pri, state}
        self.reserved = set()
        self.budget = {"rb": 3 * KIB, "rb2": KIB}
        self.seq = 0
        self.connect()

    def connect(self):
        self.c = self.s.bs()
        self.w = worker(self.s, *self.TUBES)

    def job(self, jid):
        return self.jobs[jid]

    def step(self):
        rnd, c, w = self.rnd, self.c, self.w
        op = rnd.random()
        if op < 0.4:
            t = rnd.choice(self.TUBES)
            c.use(t)
            size = rnd.choice(self.SIZES)
            body = make_body("m", self.seq, size, rnd) if size >= 40 else b"y" * size
            self.seq += 1
            pri, delay = rnd.randint(0, 5), rnd.choice((0, 0, 0, 1000))
            jid = c.put(body, pri=pri, delay=delay)
            self.jobs[jid] = dict(tube=t, body=body, pri=pri,
                                  state="delayed" if delay else "ready")
        elif op < 0.55:
            line, body = w.cmd_body("reserve-with-timeout 0")
            if line.startswith(b"RESERVED"):
                jid = int(line.split()[1])
                check(body == self.job(jid)["body"], "reserve %d: body differs" % jid)
                self.job(jid)["state"] = "reserved"
                self.reserved.add(jid)
            else:
                eq(line, b"TIMED_OUT", "reserve-with-timeout 0")
        elif op < 0.75 and self.reserved:
            jid = rnd.choice(sorted(self.reserved))
            self.reserved.discard(jid)
            k = rnd.random()
            if k < 0.4:
                eq(w.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
                del self.jobs[jid]
            elif k < 0.6:
                eq(w.cmd("bury %d 3" % jid), b"BURIED", "bury %d" % jid)
                self.job(jid).update(state="buried", pri=3)
            elif k < 0.8:
                eq(w.cmd("release %d 4 1000" % jid), b"RELEASED", "release %d" % jid)
                self.job(jid).update(state="delayed", pri=4)
            else:
                eq(w.cmd("release %d 2 0" % jid), b"RELEASED", "release %d" % jid)
                self.job(jid).update(state="ready", pri=2)
        elif op < 0.82 and self.jobs:
            jid = rnd.choice(sorted(self.jobs))
            if self.job(jid)["state"] in ("buried", "delayed"):
                eq(c.cmd("kick-job %d" % jid), b"KICKED", "kick-job %d" % jid)
                self.job(jid)["state"] = "ready"
        elif op < 0.88 and self.jobs:
            jid = rnd.choice(sorted(self.jobs))
            if self.job(jid)["state"] != "reserved":
                eq(c.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
                del self.jobs[jid]
        elif op < 0.93 and self.jobs:
            jid, t = rnd.choice(sorted(self.jobs)), rnd.choice(self.TUBES)
            if self.job(jid)["state"] != "reserved":
                eq(c.cmd("move-job %d %s" % (jid, t)), b"MOVED", "move-job %d" % jid)
                self.job(jid)["tube"] = t
        elif op < 0.935:
            t = rnd.choice(self.TUBES)
            gone = [j for j, v in self.jobs.items() if v["tube"] == t and v["state"] != "reserved"]
            line = c.cmd("flush-tube %s" % t)
            check(line in (b"FLUSHED %d" % len(gone), b"NOT_FOUND"), "flush-tube: %r" % line)
            for jid in gone:
                del self.jobs[jid]
        elif op < 0.955:
            self.s.kill9()
            self.s.restart()
            self.connect()
            self.reserved.clear()
            for v in self.jobs.values():
                if v["state"] == "reserved":
                    v["state"] = "ready"
            self.check("after kill -9")
        elif op < 0.97:
            b1 = rnd.choice((0, KIB, 3 * KIB, 20 * KIB))
            b2 = rnd.choice((0, KIB, 500))
            self.s.reload("[tube rb]\n%s[tube rb2]\n%s" % tuple(
                "max_memory_size = %d\n" % b if b else "" for b in (b1, b2)))
            self.budget = {"rb": b1, "rb2": b2}
        else:
            self.check("now")

    def mc_view(self):
        m = self.s.mc()
        try:
            return {t: mc_tube_stats(m, t) for t in self.TUBES}
        finally:
            m.close()

    def check(self, what):
        c = self.c
        bad = []
        for jid, j in sorted(self.jobs.items()):
            st = job_stats(c, jid)
            if st is None:
                bad.append((jid, "missing"))
                continue
            line, body = c.cmd_body("peek %d" % jid)
            if body != j["body"]:
                bad.append((jid, "body of %d bytes, expected %d" % (len(body or b""), len(j["body"]))))
            got = (st["state"], unq(st["tube"]), int(st["pri"]))
            if got != (j["state"], j["tube"], j["pri"]):
                bad.append((jid, got, (j["state"], j["tube"], j["pri"])))
        total = 0
        for t in self.TUBES:
            if c.cmd_body("stats-tube %s" % t)[0] == b"NOT_FOUND":
                continue
            st = c.stats_tube(t)
            total += sum(int(st["current-jobs-" + k]) for k in ("ready", "reserved", "delayed", "buried"))
        if total != len(self.jobs):
            bad.append(("jobs in the tubes", total, len(self.jobs)))
        # the memcache view: items and bytes not reserved, and what of them is
        # in memory; the spilled totals are the rest
        view, sj, sb = self.mc_view(), 0, 0
        for t, st in view.items():
            if not st:
                continue
            mine = [v for v in self.jobs.values() if v["tube"] == t and v["state"] != "reserved"]
            if (st["items"], st["bytes"]) != (len(mine), sum(len(v["body"]) for v in mine)):
                bad.append(("memcache items, bytes", t, st))
            sj += st["items"] - st["mem_items"]
            sb += st["bytes"] - st["mem_bytes"]
        if spilled(c) != (sj, sb):
            bad.append(("stats-binlog spilled", spilled(c), (sj, sb)))
        check(not bad, "%s: %d differences from the model: %s" % (what, len(bad), bad[:6]))
        # the budgets hold (the reload's spill and the evictions are
        # asynchronous: polled)
        for t, b in self.budget.items():
            if b:
                wait_for(lambda: self.mc_view()[t].get("mem_bytes", 0) <= b,
                         lambda: "%s: %s has %r in memory, budget %d"
                         % (what, t, self.mc_view()[t], b))


@no_server
@tubed_only(EXT)
def test_model_with_reloads_moves_flushes_and_kill9(binary):
    """Three seeds of 1,200 random commands (put of 0 B-5,000 B bodies,
    reserve, delete, bury, release with and without a delay, kick-job,
    move-job, flush-tube, budget reloads, kill -9) on tubes with tiny
    binlog files (compaction runs): ids, bodies, states, priorities and
    tubes match the model; memcache's items/bytes and stats-binlog's
    spilled figures agree with it; a tube's bodies in memory stay within
    its budget. (Seeds 41, 43 and 44 failed the budget check before the
    reload's spill took buried and given-back jobs.)"""
    conf = "[tube rb]\nmax_memory_size = 3K\n[tube rb2]\nmax_memory_size = 1K\n"
    for seed in (41, 43, 44):
        with RB(binary, conf, "-f", "0", "-s", "12000", "-z", "8000") as s:
            m = Model(s, seed)
            for _ in range(1200):
                m.step()
            m.check("seed %d, the end" % seed)
            s.kill9()
            s.restart()
            m.connect()
            for v in m.jobs.values():
                if v["state"] == "reserved":
                    v["state"] = "ready"
            m.check("seed %d, the end, after kill -9" % seed)


@no_server
@tubed_only(EXT)
def test_journal_turned_off_and_on_under_read_behind(binary):
    """200 bodies of 1,000 B under a 4 KiB budget (196 spilled); a reload
    that turns the tube's journal off (taking its budget away: both together
    are refused) reads every body back; deletes made then are logged all
    the same, and jobs put then are not. A reload that brings the budget and
    the journal back spills the logged jobs again; the unlogged ones stay
    in memory (doc/binlog.md). After kill -9: the logged jobs not deleted,
    byte for byte, and nothing else."""
    with RB(binary, "[tube rb]\nmax_memory_size = 4K\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("jr", 200, 1000, 2)
        ids = put_many(c, bodies)
        jobs = dict(zip(ids, bodies))
        eq(spilled(c), (196, 196000), "spilled")
        s.reload("[tube rb]\nmax_memory_size = 4K\njournal = false\n", expect_ok=False)
        eq(spilled(c), (196, 196000), "spilled after a refused reload")
        s.reload("[tube rb]\njournal = false\n")
        wait_for(lambda: spilled(c) == (0, 0),
                 lambda: "spilled %r after the budget went" % (spilled(c),))
        eq(mem_bytes(s, "rb"), 200000, "bodies in memory")
        check_bodies(c, jobs, "journal off")
        for jid in ids[:100]:
            eq(c.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
            del jobs[jid]
        unlogged = put_many(c, make_bodies("un", 5, 1000, 3))
        s.reload("[tube rb]\nmax_memory_size = 4K\n")
        wait_for(lambda: spilled(c) == (100, 100000),
                 lambda: "spilled %r with the budget back" % (spilled(c),))
        eq(mem_bytes(s, "rb"), 5000, "the unlogged bodies stay in memory")
        check_bodies(c, jobs, "journal on again")
        s.kill9()
        s.restart()
        c = s.bs()
        eq(int(c.stats_tube("rb")["current-jobs-ready"]), 100, "ready after kill -9")
        check_bodies(c, jobs, "after kill -9")
        for jid in ids[:100] + unlogged:
            eq(c.cmd("peek %d" % jid), b"NOT_FOUND", "peek %d after kill -9" % jid)


# ------------------------------------------------------------ read errors

EIO_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* While EIO_FLAG exists, a pread() whose bytes hold "POISONED-RECORD"
 * fails with EIO: one record the disk cannot read, whoever reads it. */
ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    const char *flag = getenv("EIO_FLAG");
    ssize_t k;

    if (!real)
        real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    k = real(fd, buf, n, off);
    if (k > 0 && flag && access(flag, F_OK) == 0 && memmem(buf, (size_t)k, "POISONED-RECORD", 15)) {
        errno = EIO;
        return -1;
    }
    return k;
}
ssize_t pread64(int fd, void *buf, size_t n, off_t off) __attribute__((alias("pread")));
"""


class EioRB(RB):
    """RB with EIO_SHIM preloaded; eio(True) makes the poisoned record
    unreadable."""

    def __init__(self, binary, conf, *args, **kw):
        super().__init__(binary, conf, *args, **kw)
        try:
            pre = shim_util.build(binary, self.tmp, EIO_SHIM, "eio")
        except Skip:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self.flag = os.path.join(self.tmp, "eio")
        self.env = {"LD_PRELOAD": pre, "EIO_FLAG": self.flag}

    def eio(self, on):
        if on:
            open(self.flag, "w").close()
        elif os.path.exists(self.flag):
            os.unlink(self.flag)


@no_server
@tubed_only(EXT)
def test_a_record_the_disk_cannot_read_does_not_stop_its_tube(binary):
    """100 bodies of 1,000 B under a 2 KiB budget; the disk answers EIO for
    the record of the 41st. A worker reserving one job at a time gets every
    other job, in order, byte for byte, and at most one OUT_OF_MEMORY: the
    job the disk cannot give back is buried (kept, logged, counted), and
    kicked and reserved once the disk reads again, its body intact. (It
    stayed at the head of the queue: every reserve after it answered
    OUT_OF_MEMORY for as long as the disk failed, and the 59 jobs behind
    it were never served.) A server short of descriptors still leaves its
    jobs ready (test_readbehind_edge's fd tests)."""
    with EioRB(binary, "[tube rb]\nmax_memory_size = 2K\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("eio", 100, 1000, 21)
        bodies[40] = bodies[40][:20] + b"POISONED-RECORD" + bodies[40][35:]
        ids = put_many(c, bodies)
        bad = ids[40]
        eq(job_stats(c, bad)["state"], "ready", "the poisoned job before the fault")
        s.eio(True)
        w = worker(s, "rb")
        got, ooms = [], 0
        while len(got) < 99:
            line, body = w.cmd_body("reserve-with-timeout 2")
            if line == b"OUT_OF_MEMORY":
                ooms += 1
                check(ooms <= 1, "a second OUT_OF_MEMORY after %d jobs: the tube is "
                      "stuck behind job %d" % (len(got), bad))
                continue
            m = re.fullmatch(rb"RESERVED (\d+) \d+", line)
            check(m is not None, "reserve after %d jobs: %r" % (len(got), line))
            jid = int(m.group(1))
            check(jid != bad, "the unreadable job %d was handed out" % jid)
            eq(body, bodies[ids.index(jid)], "body of job %d" % jid)
            eq(w.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
            got.append(jid)
        eq(got, ids[:40] + ids[41:], "the order jobs came in")
        eq(job_stats(c, bad)["state"], "buried", "the unreadable job")
        check(spill_metrics(s)[2] >= 1, "tubed_binlog_spill_errors_total counts the failure")
        check("job %d" % bad in s.stderr(), "the log names job %d" % bad)
        s.eio(False)
        eq(c.cmd("kick 1"), b"KICKED 1", "kick")
        reserve_exact(w, bad, bodies[40], "once the disk reads again: ")


# ------------------------------------------------------------ read-ahead

@no_server
@tubed_only(EXT)
def test_read_ahead_skips_delayed_jobs_until_they_are_ready(binary):
    """A 64 KiB budget filled by 64 ready bodies of 1 KiB, then 300 jobs
    put with a delay of an hour and 300 ready ones (both spilled). Draining
    the ready ones leaves no body in memory: the read-ahead passed the
    delayed jobs (it read them first, in id order, and their bodies held
    the budget: every ready job after them was a wait, and 64 delayed
    bodies stayed in memory). Kicked, the delayed jobs are read ahead and
    served byte for byte."""
    with RB(binary, "[tube rb]\nmax_memory_size = 64K\n") as s:
        c = s.bs()
        c.use("rb")
        first = make_bodies("f", 64, KIB, 3)
        later = make_bodies("d", 300, KIB, 1)
        ready = make_bodies("r", 300, KIB, 2)
        ids = put_many(c, first)
        dids = put_many(c, later, delay=3600)
        ids += put_many(c, ready)
        w = worker(s, "rb")
        for jid, body in zip(ids, first + ready):
            reserve_exact(w, jid, body, "drain: ", plain=True)
            eq(w.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
        wait_for(lambda: mem_bytes(s, "rb") == 0,
                 lambda: "%d bytes of delayed bodies in memory with nothing ready"
                 % mem_bytes(s, "rb"))
        eq(int(c.stats_tube("rb")["current-jobs-delayed"]), 300, "delayed jobs")
        eq(c.cmd("kick 300"), b"KICKED 300", "kick")
        wait_for(lambda: mem_bytes(s, "rb") == 64 * KIB,
                 lambda: "bodies read ahead after the kick: %d" % mem_bytes(s, "rb"))
        for jid, body in zip(dids, later):
            reserve_exact(w, jid, body, "after the kick: ", plain=True)
            eq(w.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
        eq(spilled(c), (0, 0), "spilled at the end")


@no_server
@tubed_only(EXT)
def test_delayed_bodies_in_memory_make_room_for_ready_ones(binary):
    """A 64 KiB budget filled by 64 bodies of 1 KiB put with a delay of an
    hour, then 300 ready jobs (spilled): the delayed bodies go to disk and
    the read-ahead brings the ready ones (the spec keeps the bodies of the
    jobs next in line). They used to hold the budget for their whole
    delay, the read-ahead read nothing, and every ready job was a wait.
    Peeking the ready jobs the read-ahead brought reads nothing more; all
    bodies are intact, after kill -9 too."""
    with RB(binary, "[tube rb]\nmax_memory_size = 64K\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        later = make_bodies("d", 64, KIB, 1)
        ready = make_bodies("r", 300, KIB, 2)
        dids = put_many(c, later, delay=3600)
        rids = put_many(c, ready)
        jobs = dict(zip(dids + rids, later + ready))
        wait_for(lambda: spill_metrics(s)[0] >= 32,
                 lambda: "ready bodies read ahead: %r (reads, waits, errors); %d bytes "
                 "in memory" % (spill_metrics(s), mem_bytes(s, "rb")))
        check(mem_bytes(s, "rb") <= 64 * KIB, "bodies in memory %d" % mem_bytes(s, "rb"))
        # the read-ahead has the lowest ids of the ready jobs on disk now
        wait_for(lambda: mem_bytes(s, "rb") == 64 * KIB,
                 lambda: "bodies in memory %d" % mem_bytes(s, "rb"))
        before = spill_metrics(s)
        w = worker(s, "rb")
        for jid in rids[:32]:
            reserve_exact(w, jid, jobs[jid], "drain: ", timeout=5)
            eq(w.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
            del jobs[jid]
        eq(spill_metrics(s)[1], before[1], "spill waits while draining what was read ahead")
        check_bodies(c, jobs, "after the drain")
        eq(int(c.stats_tube("rb")["current-jobs-delayed"]), 64, "delayed jobs")
        s.kill9()
        s.restart()
        c = s.bs()
        check_bodies(c, jobs, "after kill -9")
