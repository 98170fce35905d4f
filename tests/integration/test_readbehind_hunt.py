"""Read-behind under operations (spec extensions.md §5, doc/binlog.md
"Read-behind"): what the other read-behind tests did not pin down.

- Memory of a drained read-behind backlog goes back to the kernel (issue
  24's row: within a small margin of the start, whatever the body size).
  Bodies read back used to be malloc'd with their record's head and slack
  around them, and glibc kept that memory after the drain.

Memory figures are VmRSS from /proc/PID/status with generous ceilings
(no timing); under AddressSanitizer every allocation is malloc's and the
memory checks are skipped (LeakSanitizer checks leaks there).
"""

import re
import socket

import harness
from harness import Skip, check, eq, no_server, tubed_only
from readbehind_util import (KIB, RB, check_bodies, job_stats, make_bodies, mem_bytes,
                             put_many, reserve_exact, spilled, wait_for, worker)

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
