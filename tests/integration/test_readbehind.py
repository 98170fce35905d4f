"""Read-behind (spec extensions.md §5): a tube's bodies past its
max_memory_size live only in their binlog record, and every command of
both protocols still serves them byte for byte.

Budget B, equal bodies of S bytes: into an empty tube the first floor(B/S)
bodies stay in memory and every later put's body is on disk only once its
INSERTED is read (stats-binlog spilled-jobs / spilled-bytes).  When bodies
in memory leave, the reader thread reads the next spilled ones back, lowest
id first, while the tube's bodies in memory plus the next one fit B
(metrics tubed_binlog_spill_reads_total); a command that needs a body the
read-ahead does not have reads it on the loop, or, a reserve that may wait,
parks until the reader thread brings it (both tubed_binlog_spill_waits_total;
doc/binlog.md).  stats-binlog has only spilled-jobs and spilled-bytes (the
spec's key list); the counters are metrics.  Whatever happens
asynchronously is polled for with a deadline, never slept for.  Restarts,
kill -9, compaction and damage: test_readbehind_crash.py.
"""

import os
import random
import re
import time

import harness
from harness import check, eq, fail, no_server, slow, tubed_only, unq
from policy_util import port_listening, run_tubed, stats_tubes
from readbehind_util import (KIB, RB, mem_bytes, worker, check_bodies, job_stats, list_jobs,
                             make_bodies, mc_tube_stats, peek_body, put_many,
                             reserve_exact, spill_metrics, spilled, wait_for,
                             wait_spilled)

EXT = "read-behind is a tubed extension"




# ------------------------------------------------------------ spilling

@no_server
@tubed_only(EXT)
def test_spill_counts_follow_puts(binary):
    """B = 64 KiB, S = 1 KiB: the first 64 puts stay in memory, each later
    one is counted as spilled as soon as its INSERTED is read; every view
    (stats-binlog, memcache stats, metrics) agrees; a tube without a budget
    never spills."""
    B, S, N = 64 * KIB, KIB, 200
    with RB(binary, "[tube rb]\nmax_memory_size = 64K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("cnt", N, S, 1)
        ids = []
        for i, b in enumerate(bodies[:B // S + 3]):
            ids.append(c.put(b, pri=100))
            want = max(0, i + 1 - B // S)
            eq(spilled(c), (want, want * S),
               "(spilled-jobs, spilled-bytes) right after put #%d" % (i + 1))
        ids += put_many(c, bodies[len(ids):])
        n_sp = N - B // S
        eq(spilled(c), (n_sp, n_sp * S), "after %d puts (pipelined)" % N)
        # A tube with no budget: nothing of it spills.
        c.use("plain")
        pl = put_many(c, make_bodies("pl", 100, 3000, 2))
        eq(spilled(c), (n_sp, n_sp * S), "after 100 puts into a tube without a budget")
        # memcache stats: items/bytes count everything, mem_* what is in memory.
        m = s.mc()
        eq(mc_tube_stats(m, "rb"),
           {"items": N, "bytes": N * S, "total_items": N, "mem_items": B // S,
            "mem_bytes": B, "open_transactions": 0}, "memcache queue_rb_* stats")
        st = mc_tube_stats(m, "plain")
        eq((st["mem_items"], st["mem_bytes"]), (100, 300000), "queue_plain_mem_*")
        # metrics
        mt = s.metrics()
        eq(mt.value("tubed_binlog_spilled_jobs"), n_sp, "tubed_binlog_spilled_jobs")
        eq(mt.value("tubed_binlog_spilled_bytes"), n_sp * S, "tubed_binlog_spilled_bytes")
        eq(mt.value("tubed_tube_memory_bytes", tube="rb"), B, "memory bytes of rb")
        eq(mt.value("tubed_tube_body_bytes", tube="rb"), N * S, "body bytes of rb")
        eq(mt.value("tubed_tube_memory_bytes", tube="plain"), 300000,
           "memory bytes of plain")
        eq(mt.value("tubed_binlog_spill_errors_total"), 0, "spill errors")
        eq(mt.value("tubed_binlog_spill_waits_total"), 0,
           "spill waits before anything read a body")
        eq(mt.value("tubed_binlog_spill_reads_total"), 0,
           "spill reads while no in-memory body left")
        # stats-tubes' current-bytes counts every body, spilled or not.
        eq(int(stats_tubes(c)["rb"]["current-bytes"]), N * S,
           "stats-tubes rb current-bytes")
        check_bodies(c, dict(zip(ids, bodies)), "rb bodies")
        wait_spilled(c, n_sp, n_sp * S, "after peeking every job")
        check_bodies(c, dict(zip(pl, make_bodies("pl", 100, 3000, 2))), "plain bodies")


@no_server
@tubed_only(EXT)
def test_top_level_default_and_sections(binary):
    """Top-level max_memory_size is every tube's default; a section's own
    value (0 = no limit) wins; prefix sections apply."""
    conf = ("max_memory_size = 4K\n[tube big]\nmax_memory_size = 0\n"
            "[tube mid]\nmax_memory_size = 8K\n[tube pre-*]\nmax_memory_size = 2K\n")
    with RB(binary, conf) as s:
        c = s.bs()
        want = {"default": 4, "big": 20, "mid": 8, "other": 4, "pre-x": 2}
        jobs = {}
        for seed, tube in enumerate(want):
            c.use(tube)
            bodies = make_bodies(tube, 20, KIB, 100 + seed)
            jobs.update(zip(put_many(c, bodies), bodies))
        n = sum(20 - k for k in want.values())
        eq(spilled(c), (n, n * KIB), "spilled over five tubes")
        m = s.mc()
        for tube, k in want.items():
            st = mc_tube_stats(m, tube)
            eq((st["items"], st["mem_items"], st["mem_bytes"]), (20, k, k * KIB),
               "queue_%s items / mem_items / mem_bytes" % tube)
            eq(mem_bytes(s, tube), k * KIB, "tubed_tube_memory_bytes{%s}" % tube)
        check_bodies(c, jobs, "bodies of five tubes")


@no_server
@tubed_only(EXT)
def test_varied_sizes_stay_within_budget(binary):
    """Bodies of 1-4 KiB, put one at a time: the tube's bodies in memory
    never exceed B, spilled bytes + bytes in memory = all its bytes, and
    the jobs up to the first one that did not fit are in memory."""
    B = 16 * KIB
    with RB(binary, "[tube rb]\nmax_memory_size = 16K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("var", 60, (KIB, 4 * KIB), 3)
        ids = []
        total = 0
        m = s.mc()
        for b in bodies:
            ids.append(c.put(b))
            total += len(b)
            jobs_sp, bytes_sp = spilled(c)
            st = mc_tube_stats(m, "rb")
            eq((st["items"], st["bytes"]), (len(ids), total), "queue_rb items/bytes")
            eq(st["mem_items"] + jobs_sp, len(ids), "mem_items + spilled-jobs")
            eq(st["mem_bytes"] + bytes_sp, total, "mem_bytes + spilled-bytes")
            check(st["mem_bytes"] <= B, "after put #%d: %d body bytes in memory, "
                  "budget %d" % (len(ids), st["mem_bytes"], B))
        # The prefix that fits is in memory: peeking it reads nothing.
        fit, acc = 0, 0
        while acc + len(bodies[fit]) <= B:
            acc += len(bodies[fit])
            fit += 1
        w0 = spill_metrics(s)[1]
        for j, b in zip(ids[:fit], bodies[:fit]):
            eq(peek_body(c, j), b, "body of in-memory job %d" % j)
        eq(spill_metrics(s)[1], w0, "spill waits after peeking the %d jobs "
           "that fit the budget first" % fit)
        eq(peek_body(c, ids[fit]), bodies[fit], "body of job %d" % ids[fit])
        eq(spill_metrics(s)[1], w0 + 1, "spill waits after peeking job %d, "
           "the first that did not fit" % ids[fit])
        check_bodies(c, dict(zip(ids, bodies)), "bodies of 1-4 KiB")


# ------------------------------------------------------------ reading back

@no_server
@tubed_only(EXT)
def test_read_back_lowest_id_first(binary):
    """Deleting in-memory jobs makes room: exactly that many spilled bodies
    are read back by the reader thread, the lowest ids first."""
    B, S, N = 16 * KIB, KIB, 60
    with RB(binary, "[tube rb]\nmax_memory_size = 16K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("rd", N, S, 4)
        ids = put_many(c, bodies)
        k = B // S
        eq(spilled(c), (N - k, (N - k) * S), "after the puts")
        for j in ids[:5]:
            c.expect("delete %d" % j, "DELETED")
        wait_spilled(c, N - k - 5, (N - k - 5) * S, "after deleting 5 in-memory jobs")
        reads, waits, errors = spill_metrics(s)
        eq((reads, waits, errors), (5, 0, 0), "(reads, waits, errors) after the "
           "read-ahead filled the room of 5 deleted bodies")
        eq(mem_bytes(s, "rb"), B, "memory bytes of rb")
        # The 5 read back are ids[k..k+4]: peeking them reads nothing more.
        for j, b in zip(ids[k:k + 5], bodies[k:k + 5]):
            eq(peek_body(c, j), b, "job %d" % j)
        eq(spill_metrics(s)[1], 0, "spill waits after peeking the jobs read back "
           "(they should be ids %d..%d)" % (ids[k], ids[k + 4]))
        eq(peek_body(c, ids[k + 5]), bodies[k + 5], "job %d" % ids[k + 5])
        eq(spill_metrics(s)[1], 1, "spill waits after peeking job %d (still on "
           "disk)" % ids[k + 5])
        wait_spilled(c, N - k - 5, None, "after the peek (its body goes again)")


@no_server
@tubed_only(EXT)
def test_drain_fifo_across_the_boundary(binary):
    """A worker drains a spilled tube (bodies 1-4 KiB): id order, every body
    intact, each spilled body read back once, and nothing is left spilled
    or in memory at the end."""
    with RB(binary, "[tube rb]\nmax_memory_size = 16K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("fifo", 150, (KIB, 4 * KIB), 5)
        ids = put_many(c, bodies)
        n_sp = spilled(c)[0]
        check(n_sp > 100, "only %d of 150 jobs spilled with a 16 KiB budget" % n_sp)
        w = worker(s, "rb")
        for j, b in zip(ids, bodies):
            reserve_exact(w, j, b, "drain: ")
            w.expect("delete %d" % j, "DELETED")
        w.expect("reserve-with-timeout 0", "TIMED_OUT")
        eq(spilled(c), (0, 0), "spilled after the drain")
        # Every spilled body came back once: by the reader thread (reads;
        # ahead of need, or for a parked worker) or on the loop (a wait).
        # A parked worker's fetch counts as a wait too, so only bounds hold.
        reads, waits, errors = spill_metrics(s)
        check(reads <= n_sp <= reads + waits and errors == 0,
              "after draining %d spilled jobs: reads %d, waits %d, errors %d "
              "(expected reads <= %d <= reads + waits, no errors)"
              % (n_sp, reads, waits, errors, n_sp))
        eq(mem_bytes(s, "rb"), 0, "memory bytes of the empty tube")


@no_server
@tubed_only(EXT)
def test_priority_jump_served_first(binary):
    """More urgent jobs put while the tube is over budget are spilled, yet
    served first, in priority order, with their bodies; then the rest in
    id order."""
    with RB(binary, "[tube rb]\nmax_memory_size = 16K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("base", 40, KIB, 6)
        ids = put_many(c, bodies, pri=100)
        eq(spilled(c), (24, 24 * KIB), "after 40 puts")
        urg = make_bodies("urgent", 3, 2 * KIB, 7)
        upri = [5, 1, 3]
        uids = [c.put(b, pri=p) for b, p in zip(urg, upri)]
        eq(spilled(c), (27, 24 * KIB + 3 * 2 * KIB), "after 3 urgent puts")
        w = worker(s, "rb")
        for i in (1, 2, 0):
            reserve_exact(w, uids[i], urg[i], "urgent pri %d: " % upri[i],
                          plain=(i == 1))
            w.expect("delete %d" % uids[i], "DELETED")
        r, waits, e = spill_metrics(s)
        check(waits >= 1, "no spill wait counted although urgent spilled jobs "
              "were reserved at once (reads %d, waits %d)" % (r, waits))
        for j, b in zip(ids, bodies):
            reserve_exact(w, j, b, "after the urgent ones: ")
            w.expect("delete %d" % j, "DELETED")
        eq(spilled(c), (0, 0), "spilled after the drain")


@no_server
@tubed_only(EXT)
def test_waiting_reserve_keeps_priority_across_tubes(binary):
    """A worker watching a and b whose most urgent ready job (pri 0, b) is
    on disk may wait for its body; a less urgent job (pri 1) put into a
    meanwhile must not be handed to it instead: reserve returns the most
    urgent ready job of the watched tubes, spilled or not."""
    conf = "[tube a]\nmax_memory_size = 4K\n[tube b]\nmax_memory_size = 4K\n"
    with RB(binary, conf) as s:
        c, p = s.bs(), s.bs()
        c.use("b")
        p.use("a")
        w = worker(s, "a", "b")
        wrong = []
        for trial in range(200):
            fill = put_many(c, make_bodies("fb%d" % trial, 4, KIB, trial), pri=5)
            ub = make_bodies("ub", 1, KIB, trial, start=trial)[0]
            u = c.put(ub, pri=0)                 # spilled: b is at its budget
            w.send(b"reserve-with-timeout 5\r\n")
            x = p.put(make_bodies("xa", 1, 100, trial, start=trial)[0], pri=1)
            line, body = w.read_reply()
            m = re.fullmatch(rb"RESERVED (\d+) \d+", line)
            check(m is not None, "trial %d: reserve -> %r" % (trial, line))
            if int(m.group(1)) != u or body != ub:
                wrong.append((trial, u, line.decode()))
            w.expect("delete %d" % int(m.group(1)), "DELETED")
            for j in fill + [u, x]:
                c.cmd("delete %d" % j)
        check(not wrong, "%d of 200 trials: the worker got the pri 1 job put into a "
              "while it waited for the spilled pri 0 job of b: (trial, expected "
              "id, reply) %s" % (len(wrong), wrong[:5]))


# ------------------------------------------------------------ every command

@no_server
@tubed_only(EXT)
def test_peek_variants_and_stats_job_on_spilled(binary):
    """peek, peek-ready, peek-delayed, peek-buried and stats-job on jobs
    whose body is on disk only."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n") as s:
        c = s.bs()
        c.use("rb")
        fill = make_bodies("fill", 8, KIB, 8)
        fids = put_many(c, fill, pri=100)
        eq(spilled(c), (0, 0), "the budget's worth of fillers")
        b = make_bodies("pv", 4, 1500, 9)
        r = c.put(b[0], pri=7)                 # the most urgent ready job
        d1 = c.put(b[1], pri=3, delay=3600)
        d2 = c.put(b[2], pri=4, delay=1800)    # the next delayed one due
        bu = c.put(b[3], pri=9)
        eq(spilled(c), (4, 6000), "after 4 puts over budget")
        eq(peek_body(c, r), b[0], "peek of a spilled ready job")
        eq(spill_metrics(s)[1], 1, "the peek read the body itself (a wait)")
        eq(c.peek("peek-ready"), (r, b[0]), "peek-ready")
        eq(c.peek("peek-delayed"), (d2, b[2]), "peek-delayed")
        eq(peek_body(c, d1), b[1], "peek of a spilled delayed job")
        w = worker(s, "rb")
        eq(w.cmd_body("reserve-job %d" % bu), (b"RESERVED %d 1500" % bu, b[3]),
           "reserve-job of a spilled job")
        w.expect("bury %d 9" % bu, "BURIED")
        eq(c.peek("peek-buried"), (bu, b[3]), "peek-buried")
        for jid, state, pri in ((r, "ready", "7"), (d1, "delayed", "3"),
                                (d2, "delayed", "4"), (bu, "buried", "9")):
            st = job_stats(c, jid)
            eq((unq(st["tube"]), unq(st["state"]), st["pri"]), ("rb", state, pri),
               "stats-job %d" % jid)
        eq(int(job_stats(c, d1)["delay"]), 3600, "delay of job %d" % d1)
        check(3590 <= int(job_stats(c, d1)["time-left"]) <= 3600,
              "time-left of job %d: %s" % (d1, job_stats(c, d1)["time-left"]))
        check_bodies(c, dict(zip(fids + [r, d1, d2, bu], fill + b)), "all bodies")
        eq(spill_metrics(s)[2], 0, "spill errors")


@no_server
@tubed_only(EXT)
def test_job_lifecycle_on_spilled(binary):
    """reserve-job, touch, release (new priority), reserve, bury, kick-job,
    release with a delay, kick, a disconnect with the job reserved, delete:
    the body comes back byte for byte at every step."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n") as s:
        c = s.bs()
        c.use("rb")
        fill = make_bodies("fill", 20, KIB, 10)
        fids = put_many(c, fill, pri=100)
        eq(spilled(c), (12, 12 * KIB), "after 20 puts")
        j, body = fids[15], fill[15]             # spilled
        w = worker(s, "rb")
        eq(w.cmd_body("reserve-job %d" % j), (b"RESERVED %d %d" % (j, KIB), body),
           "reserve-job %d" % j)
        w.expect("touch %d" % j, "TOUCHED")
        w.expect("release %d 7 0" % j, "RELEASED")
        eq(peek_body(c, j), body, "peek after release")
        reserve_exact(w, j, body, "reserve after release with pri 7: ")
        w.expect("bury %d 8" % j, "BURIED")
        eq(c.peek("peek-buried"), (j, body), "peek-buried")
        c.expect("kick-job %d" % j, "KICKED")
        eq(unq(job_stats(c, j)["state"]), "ready", "state after kick-job")
        reserve_exact(w, j, body, "reserve after kick-job: ")
        w.expect("release %d 7 1" % j, "RELEASED")
        eq(unq(job_stats(c, j)["state"]), "delayed", "state after release with delay")
        eq(c.peek("peek-delayed"), (j, body), "peek-delayed")
        c.expect("kick 1", "KICKED 1")
        eq(unq(job_stats(c, j)["state"]), "ready", "state after kick")
        # A worker that disconnects with the job reserved gives it back.
        w2 = worker(s, "rb")
        reserve_exact(w2, j, body, "reserve before disconnecting: ")
        w2.close()
        wait_for(lambda: unq(job_stats(c, j)["state"]) == "ready",
                 "job %d ready again after its worker disconnected" % j)
        reserve_exact(w, j, body, "reserve after the disconnect: ")
        w.expect("delete %d" % j, "DELETED")
        eq(c.cmd("peek %d" % j), b"NOT_FOUND", "peek after delete")
        del fill[15], fids[15]
        # The rest drains in id order (12 - 1 spilled ones among them).
        for jid, b in zip(fids, fill):
            reserve_exact(w, jid, b, "drain: ")
            w.expect("delete %d" % jid, "DELETED")
        eq(spilled(c), (0, 0), "spilled after the drain")
        eq(spill_metrics(s)[2], 0, "spill errors")


@no_server
@tubed_only(EXT)
def test_released_and_buried_bodies_leave_memory(binary):
    """Jobs reserved from the spilled part of a tube have their bodies in
    memory; once released or buried they are jobs of the tube like any
    other, so the tube goes back within its budget (extensions.md §5: at
    most max_memory_size body bytes stay in memory)."""
    B = 8 * KIB
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("rel", 40, KIB, 11)
        ids = put_many(c, bodies)
        eq(spilled(c), (32, 32 * KIB), "after 40 puts")
        w = worker(s, "rb")
        got = []
        for j, b in zip(ids[:24], bodies[:24]):
            reserve_exact(w, j, b, "reserve: ")
            got.append(j)
        eq(spilled(c), (16, 16 * KIB), "with 24 jobs reserved (reserved bodies "
           "are in memory)")
        for j in got[:12]:
            w.expect("release %d 100 0" % j, "RELEASED")
        for j in got[12:]:
            w.expect("bury %d 100" % j, "BURIED")
        last = [None]

        def within():
            last[0] = (mem_bytes(s, "rb"), spilled(c))
            return last[0][0] <= B
        deadline = time.monotonic() + 10
        while not within():
            if time.monotonic() > deadline:
                fail("rb's bodies in memory did not go back within its budget "
                     "of %d bytes after 12 releases and 12 burials: %d bytes "
                     "in memory, (spilled-jobs, spilled-bytes) %r"
                     % (B, last[0][0], last[0][1]))
            time.sleep(0.05)
        check_bodies(c, dict(zip(ids, bodies)), "bodies after release/bury")
        c.expect("kick 100", "KICKED 12")
        for j, b in zip(ids, bodies):
            reserve_exact(w, j, b, "drain: ")
            w.expect("delete %d" % j, "DELETED")


@no_server
@tubed_only(EXT)
def test_move_job_on_spilled(binary):
    """move-job of spilled ready, delayed and buried jobs to a tube without
    a budget and back: same id, state and priority, body intact."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n") as s:
        c = s.bs()
        c.use("rb")
        fill = make_bodies("mv", 20, KIB, 12)
        ids = put_many(c, fill[:18], pri=50)
        dl = c.put(fill[18], pri=60, delay=3600)
        bu = c.put(fill[19], pri=70)
        ids += [dl, bu]
        w = worker(s, "rb")
        eq(w.cmd_body("reserve-job %d" % bu)[1], fill[19], "reserve-job of job %d" % bu)
        w.expect("bury %d 70" % bu, "BURIED")
        rdy = ids[15]
        sp0 = spilled(c)[0]
        check(sp0 >= 11, "spilled-jobs %d: jobs 9-20 were put over budget" % sp0)
        for j in (rdy, dl):
            c.expect("move-job %d other" % j, "MOVED")
        wait_spilled(c, sp0 - 2, None, "the 2 spilled jobs moved to a tube "
                     "without a budget left the spilled count")
        c.expect("move-job %d other" % bu, "MOVED")
        wait_for(lambda: mem_bytes(s, "other") == 3 * KIB,
                 "the 3 bodies moved into other (no budget) in memory")
        for j, state, pri in ((rdy, "ready", "50"), (dl, "delayed", "60"),
                              (bu, "buried", "70")):
            st = job_stats(c, j)
            eq((unq(st["tube"]), unq(st["state"]), st["pri"]), ("other", state, pri),
               "stats-job %d after move-job" % j)
        eq(sorted(list_jobs(c, "other")), sorted([rdy, dl, bu]), "list-jobs other")
        check_bodies(c, dict(zip(ids, fill)), "bodies after moving out")
        # and back into the full tube
        for j in (rdy, dl, bu):
            c.expect("move-job %d rb" % j, "MOVED")
        check_bodies(c, dict(zip(ids, fill)), "bodies after moving back")
        c.expect("kick-job %d" % bu, "KICKED")
        c.expect("kick-job %d" % dl, "KICKED")
        order = sorted(zip(ids, fill), key=lambda t: (50 if t[0] not in (dl, bu)
                                                      else 60 if t[0] == dl else 70,
                                                      t[0]))
        for j, b in order:
            reserve_exact(w, j, b, "drain after the moves: ")
            w.expect("delete %d" % j, "DELETED")
        eq(spilled(c), (0, 0), "spilled after the drain")


@no_server
@tubed_only(EXT)
def test_flush_tube_with_spilled_jobs(binary):
    """flush-tube takes every spilled job (not the reserved one, whose body
    is in memory and intact); memcache flush does the same; nothing is
    left counted as spilled."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n[tube q]\nmax_memory_size = 4K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("fl", 40, KIB, 13)
        ids = put_many(c, bodies)
        w = worker(s, "rb")
        eq(w.cmd_body("reserve-job %d" % ids[30]), (b"RESERVED %d %d" % (ids[30], KIB),
                                                    bodies[30]), "reserve-job")
        c.use("q")
        qb = make_bodies("flq", 20, KIB, 14)
        put_many(c, qb)
        eq(spilled(c), (31 + 16, (31 + 16) * KIB), "before the flushes")
        c.expect("flush-tube rb", "FLUSHED 39")
        wait_spilled(c, 16, 16 * KIB, "after flush-tube rb")
        m = s.mc()
        m.expect("flush q", "END")
        wait_spilled(c, 0, 0, "after memcache flush q")
        c.use("q")
        put_many(c, qb)
        wait_spilled(c, 16, 16 * KIB, "q filled again")
        m.expect("delete q", "DELETED")
        wait_spilled(c, 0, 0, "after memcache delete q")
        w.expect("release %d 1 0" % ids[30], "RELEASED")
        eq(peek_body(c, ids[30]), bodies[30], "the reserved job after the flush")
        eq(list_jobs(c, "rb"), [ids[30]], "list-jobs rb after the flush")
        eq(mem_bytes(s, "rb"), KIB, "memory bytes of rb")


@no_server
@tubed_only(EXT)
@slow
def test_expiry_of_spilled_jobs(binary):
    """max_age on spilled jobs: expired into a dead-letter tube with
    move_expired_to (same ids, bodies intact), or deleted; the spilled
    counts follow."""
    conf = ("[tube ex]\nmax_age = 1s\nmove_expired_to = dead\nmax_memory_size = 4K\n"
            "[tube ex2]\nmax_age = 1s\nmax_memory_size = 4K\n")
    with RB(binary, conf) as s:
        c = s.bs()
        c.use("ex")
        bodies = make_bodies("exp", 20, KIB, 15)
        ids = put_many(c, bodies, pri=[200 - i for i in range(20)])
        c.use("ex2")
        gone = put_many(c, make_bodies("exp2", 20, KIB, 16))
        eq(spilled(c), (32, 32 * KIB), "before expiry")
        wait_for(lambda: sorted(list_jobs(c, "dead")) == ids,
                 "all 20 jobs of ex in dead")
        wait_for(lambda: not list_jobs(c, "ex2"), "ex2 expired")
        for j in gone:
            eq(c.cmd("peek %d" % j), b"NOT_FOUND", "expired job %d of ex2" % j)
        for j in ids:
            eq(unq(job_stats(c, j)["tube"]), "dead", "tube of job %d" % j)
        check_bodies(c, dict(zip(ids, bodies)), "bodies in the dead-letter tube")
        # dead has no budget: nothing of it stays on disk only.
        wait_spilled(c, 0, 0, "spilled once ex is expired into dead (no budget) "
                     "and ex2 deleted")
        w = worker(s, "dead")
        for j, b in sorted(zip(ids, bodies), key=lambda t: (200 - ids.index(t[0]), t[0])):
            reserve_exact(w, j, b, "dead-letter drain: ")
            w.expect("delete %d" % j, "DELETED")


@no_server
@tubed_only(EXT)
def test_fanout_children_spill(binary):
    """Fanout children with a budget spill their copies; every copy is
    served intact in order; the parent (no budget) keeps everything."""
    conf = "[tube fan]\nfanout = true\n[tube fan+*]\nmax_memory_size = 4K\n"
    with RB(binary, conf) as s:
        wa = worker(s, "fan+a")
        wb = worker(s, "fan+b")
        c = s.bs()
        c.use("fan")
        bodies = make_bodies("fan", 20, KIB, 17)
        ids = put_many(c, bodies)
        eq(spilled(c), (32, 32 * KIB), "copies spilled in two children")
        eq(mem_bytes(s, "fan"), 20 * KIB, "memory bytes of the parent")
        eq(mem_bytes(s, "fan+a"), 4 * KIB, "memory bytes of fan+a")
        for w, tube in ((wa, "fan+a"), (wb, "fan+b")):
            cids = list_jobs(c, tube)
            eq(len(cids), 20, "copies in %s" % tube)
            check(not set(cids) & set(ids), "copies have their own ids")
            for j, b in zip(cids, bodies):
                reserve_exact(w, j, b, "%s: " % tube)
                w.expect("delete %d" % j, "DELETED")
        eq(spilled(c), (0, 0), "after draining both children")
        check_bodies(c, dict(zip(ids, bodies)), "parent bodies")


@no_server
@tubed_only(EXT)
@slow
def test_spilled_delayed_jobs_become_ready(binary):
    """Delayed jobs put over budget (the budget held by long-delayed jobs)
    become ready when due and are reserved in priority order, intact; the
    long-delayed bodies make room for them (the bodies kept are those of
    the jobs next in line) and stay on disk, intact."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n") as s:
        c = s.bs()
        c.use("rb")
        hold_bodies = make_bodies("hold", 8, KIB, 21)
        hold = put_many(c, hold_bodies, delay=3600)
        bodies = make_bodies("due", 10, 2 * KIB, 22)
        pris = [(i * 7) % 10 for i in range(10)]
        ids = put_many(c, bodies, pri=pris, delay=1)
        eq(spilled(c), (10, 20 * KIB), "10 delayed jobs over budget")
        wait_for(lambda: int(c.stats_tube("rb")["current-jobs-ready"]) == 10,
                 "the 10 delayed jobs ready")
        w = worker(s, "rb")
        for p, j, b in sorted(zip(pris, ids, bodies)):
            reserve_exact(w, j, b, "due job pri %d: " % p)
            w.expect("delete %d" % j, "DELETED")
        w.expect("reserve-with-timeout 0", "TIMED_OUT")
        eq(spilled(c), (8, 8 * KIB), "spilled after the drain: the long-delayed jobs")
        check_bodies(c, dict(zip(hold, hold_bodies)), "the long-delayed jobs")


# ------------------------------------------------------------ memcache

@no_server
@tubed_only(EXT)
def test_memcache_on_spilled_items(binary):
    """kestrel get, get/peek, get/open, /abort, /close on items whose body
    is on disk only; queue_<q>_mem_items/mem_bytes count what is in memory."""
    with RB(binary, "[tube q]\nmax_memory_size = 8K\n") as s:
        m = s.mc()
        bodies = make_bodies("mc", 30, KIB, 18)
        for b in bodies:
            m.store("q", b)
        eq(spilled(s.bs()), (22, 22 * KIB), "after 30 sets")
        st = mc_tube_stats(m, "q")
        eq((st["items"], st["bytes"], st["mem_items"], st["mem_bytes"]),
           (30, 30 * KIB, 8, 8 * KIB), "queue_q items, bytes, mem_items, mem_bytes")
        # A more urgent job put by beanstalk: spilled, at the head.
        c = s.bs()
        c.use("q")
        ub = make_bodies("mcurgent", 1, 3000, 19)[0]
        u = c.put(ub, pri=0)
        eq(spilled(c), (23, 22 * KIB + 3000), "after the urgent put")
        eq(m.get("q/peek"), ub, "get q/peek (spilled head)")
        eq(m.get("q/open"), ub, "get q/open")
        eq(unq(job_stats(c, u)["state"]), "reserved", "opened job state")
        m.expect("get q/abort", "END")
        eq(m.get("q/open"), ub, "get q/open after abort (same job again)")
        m.expect("get q/close", "END")
        eq(c.cmd("peek %d" % u), b"NOT_FOUND", "closed job deleted")
        got = [m.get("q/open")]
        for _ in range(9):
            got.append(m.get("q/close/open"))
        m.expect("get q/close", "END")
        m2 = s.mc()
        got.append(m2.get("q/open"))
        m2.close()    # disconnect: the open item goes back
        wait_for(lambda: mc_tube_stats(m, "q").get("open_transactions") == 0,
                 "the disconnected open item released")
        while True:
            v = m.get("q")
            if v is None:
                break
            got.append(v)
        eq(len(got), 31, "items fetched")
        eq(got[:10] + got[11:], bodies, "bodies in FIFO order")
        eq(got[10], bodies[10], "the item opened by the disconnected client")
        eq(spilled(c), (0, 0), "spilled after the drain")
        st = mc_tube_stats(m, "q")
        eq((st.get("items", 0), st.get("mem_items", 0), st.get("mem_bytes", 0)),
           (0, 0, 0), "queue_q after the drain")


@no_server
@tubed_only(EXT)
def test_memcache_mem_stats_follow_read_back(binary):
    """queue_<q>_mem_items rises as the read-ahead brings bodies back."""
    with RB(binary, "[tube q]\nmax_memory_size = 8K\n") as s:
        m = s.mc()
        bodies = make_bodies("mcm", 30, KIB, 20)
        for b in bodies:
            m.store("q", b)
        for b in bodies[:4]:
            eq(m.get("q"), b, "get")
        wait_for(lambda: mc_tube_stats(m, "q") ==
                 {"items": 26, "bytes": 26 * KIB, "total_items": 30, "mem_items": 8,
                  "mem_bytes": 8 * KIB, "open_transactions": 0},
                 "queue_q mem_items back at 8 of 26 items")
        eq(spilled(s.bs()), (18, 18 * KIB), "spilled")


@no_server
@tubed_only(EXT)
def test_reload_raises_or_removes_the_budget(binary):
    """A reload applies the new max_memory_size to the jobs already queued
    (extensions.md §1 "Reload"): a larger budget reads more bodies back, no
    budget reads every one back."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("rl", 30, KIB, 23)
        jobs = dict(zip(put_many(c, bodies), bodies))
        eq(spilled(c), (22, 22 * KIB), "with 8K")
        m = s.mc()
        s.write_conf("[tube rb]\nmax_memory_size = 16K\n")
        m.expect("reload", "Reloaded config.")
        wait_spilled(c, 14, 14 * KIB, "after a reload raising the budget to 16K")
        eq(mem_bytes(s, "rb"), 16 * KIB, "memory bytes with 16K")
        s.write_conf("[tube rb]\n")
        m.expect("reload", "Reloaded config.")
        wait_spilled(c, 0, 0, "after a reload removing the budget")
        check_bodies(c, jobs, "bodies after the reloads")
        more = make_bodies("rl2", 10, KIB, 24)
        jobs.update(zip(put_many(c, more), more))
        eq(spilled(c), (0, 0), "puts without a budget")
        eq(mem_bytes(s, "rb"), 40 * KIB, "memory bytes without a budget")


@no_server
@tubed_only(EXT)
def test_reload_lowers_the_budget(binary):
    """A reload lowering max_memory_size applies to the jobs already queued
    (extensions.md §1 "Reload": new settings apply to every job, including
    those already queued): the tube ends with at most the new budget in
    memory, the rest on disk, bodies intact."""
    with RB(binary, "[tube rb]\nmax_memory_size = 16K\n") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("rl", 40, KIB, 26)
        jobs = dict(zip(put_many(c, bodies), bodies))
        eq(spilled(c), (24, 24 * KIB), "with 16K")
        m = s.mc()
        s.write_conf("[tube rb]\nmax_memory_size = 4K\n")
        m.expect("reload", "Reloaded config.")
        more = make_bodies("rl3", 10, KIB, 25)
        jobs.update(zip(put_many(c, more), more))
        last = [None]

        def within():
            last[0] = (mem_bytes(s, "rb"), spilled(c))
            return last[0][0] <= 4 * KIB
        deadline = time.monotonic() + 10
        while not within():
            if time.monotonic() > deadline:
                fail("after a reload lowering the budget from 16K to 4K (and 10 "
                     "more puts) rb still has %d body bytes in memory, "
                     "(spilled-jobs, spilled-bytes) %r"
                     % (last[0][0], last[0][1]))
            time.sleep(0.05)
        eq(last[0][1], (46, 46 * KIB), "spilled with 4K")
        check_bodies(c, jobs, "bodies with 4K")


# ------------------------------------------------------------ randomized

@no_server
@tubed_only(EXT)
def test_random_commands_against_a_model(binary):
    """Random put/reserve/release/bury/kick/kick-job/touch/delete/peek/
    move-job over two budgeted tubes, checked against a model of
    priorities and states at every step; then kill -9 (-f 0) and every job
    is back with its body, state and priority."""
    seed = int(os.environ.get("READBEHIND_SEED", "0")) or random.randrange(1 << 30)
    rnd = random.Random(seed)
    conf = "[tube a]\nmax_memory_size = 8K\n[tube b]\nmax_memory_size = 6K\n"
    with RB(binary, conf, "-f", "0") as s:
        c = s.bs()
        w = worker(s, "a", "b")
        model = {}        # id -> [body, pri, state, tube]
        n = 0

        def ready_head():
            rs = [(v[1], j) for j, v in model.items() if v[2] == "ready"]
            return min(rs)[1] if rs else None

        def reserved():
            return [j for j, v in model.items() if v[2] == "reserved"]

        for step in range(400):
            what = "seed %d step %d: " % (seed, step)
            op = rnd.random()
            if op < 0.35 or not model:
                tube = rnd.choice("ab")
                c.use(tube)
                body = make_bodies("m", 1, rnd.randint(200, 3000), rnd.random(), start=n)[0]
                n += 1
                pri = rnd.randrange(5)
                jid = c.put(body, pri=pri)
                model[jid] = [body, pri, "ready", tube]
            elif op < 0.55:
                h = ready_head()
                if h is None:
                    w.expect("reserve-with-timeout 0", "TIMED_OUT")
                    continue
                line, got = w.cmd_body("reserve-with-timeout 5")
                m = re.fullmatch(rb"RESERVED (\d+) \d+", line)
                check(m is not None, what + "reserve: %r" % line)
                g = int(m.group(1))
                if g != h or got != model[h][0]:
                    fail(what + "reserve: expected job %d (pri %d, tube %s), got "
                         "%d (%s; model: %s), body %s; spilled %r, reads/waits/"
                         "errors %r" % (h, model[h][1], model[h][3], g,
                                        "same body" if got == model[h][0] else
                                        "another body",
                                        model[g][1:] if g in model else "unknown",
                                        "matches" if g in model and
                                        model[g][0] == got else "differs",
                                        spilled(c), spill_metrics(s)))
                model[h][2] = "reserved"
            elif op < 0.75 and reserved():
                j = rnd.choice(reserved())
                k = rnd.random()
                if k < 0.4:
                    p = rnd.randrange(5)
                    w.expect("release %d %d 0" % (j, p), "RELEASED")
                    model[j][1:3] = [p, "ready"]
                elif k < 0.6:
                    w.expect("bury %d %d" % (j, model[j][1]), "BURIED")
                    model[j][2] = "buried"
                elif k < 0.7:
                    w.expect("touch %d" % j, "TOUCHED")
                else:
                    w.expect("delete %d" % j, "DELETED")
                    del model[j]
            elif op < 0.82:
                bs = [j for j, v in model.items() if v[2] == "buried"]
                if bs:
                    j = rnd.choice(bs)
                    c.expect("kick-job %d" % j, "KICKED")
                    model[j][2] = "ready"
            elif op < 0.9:
                j = rnd.choice(list(model))
                if model[j][2] == "reserved":
                    eq(c.cmd("move-job %d a" % j), b"NOT_FOUND", what + "move reserved")
                else:
                    t = rnd.choice("ab")
                    c.expect("move-job %d %s" % (j, t), "MOVED")
                    model[j][3] = t
            elif op < 0.95:
                j = rnd.choice(list(model))
                eq(peek_body(c, j), model[j][0], what + "peek %d" % j)
            else:
                rs = [j for j, v in model.items() if v[2] == "ready" and
                      v[3] == "a" and j not in reserved()]
                if rs:
                    j = min(rs)
                    c.expect("delete %d" % j, "DELETED")
                    del model[j]
        # Everything, then after kill -9 (the worker's jobs come back ready).
        check_bodies(c, {j: v[0] for j, v in model.items()}, "seed %d: bodies" % seed)
        for j, v in model.items():
            st = job_stats(c, j)
            eq((unq(st["tube"]), unq(st["state"]), int(st["pri"])),
               (v[3], v[2], v[1]), "seed %d: stats-job %d" % (seed, j))
        eq(spill_metrics(s)[2], 0, "spill errors")
        s.kill9()
        s.restart()
        c = s.bs()
        check_bodies(c, {j: v[0] for j, v in model.items()},
                     "seed %d: bodies after kill -9" % seed)
        for j, v in model.items():
            st = job_stats(c, j)
            state = "ready" if v[2] == "reserved" else v[2]
            eq((unq(st["tube"]), unq(st["state"]), int(st["pri"])),
               (v[3], state, v[1]), "seed %d: stats-job %d after kill -9" % (seed, j))


# ------------------------------------------------------------ config

@no_server
@tubed_only(EXT)
def test_config_journal_false_refused(binary):
    """max_memory_size where journal = false also applies (wherever each
    was set) is refused at start with FILE:LINE; without -b it is refused
    too; a tube with journal = false and its own max_memory_size = 0 is
    fine."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="tubed-rb-conf-")
    try:
        bdir = os.path.join(d, "binlog")
        os.mkdir(bdir)
        cases = [
            ("max_memory_size = 1M\n[tube cache]\njournal = false\n", True, 3,
             "max_memory_size (line 1) and journal = false (line 3) both apply "
             "to [tube cache]"),
            ("journal = false\n[tube logs*]\nmax_memory_size = 1M\n", True, 3,
             "max_memory_size (line 3) and journal = false (line 1) both apply"),
            ("\nmax_memory_size = 64K\n", False, 2,
             "max_memory_size needs a binlog"),
        ]
        for i, (text, with_b, line, what) in enumerate(cases):
            path = os.path.join(d, "c%d.conf" % i)
            with open(path, "w") as f:
                f.write(text)
            # Held (bound, never listening) for the loop's body: no other
            # test's server can be what listens there.
            res = harness.PortReservation()
            port = res.port
            args = ["-l", harness.HOST, "-p", port, "--config", path]
            if with_b:
                args += ["-b", bdir]
            rc, out, err = run_tubed(binary, args)
            eq(rc, 2, "%r: exit status (stderr %r)" % (text, err[:300]))
            want = "%s:%d: %s" % (path, line, what)
            check(want in err, "%r: expected %r on stderr, got %r" % (text, want, err))
            try:
                check(not port_listening(port), "%r: listening" % text)
            finally:
                res.close()
        path = os.path.join(d, "ok.conf")
        with open(path, "w") as f:
            f.write("max_memory_size = 1M\n[tube cache]\njournal = false\n"
                    "max_memory_size = 0\n")
        rc, out, err = run_tubed(binary, ["--config", path, "-b", bdir,
                                          "--check-config"])
        eq((rc, out), (0, "%s: ok\n" % path), "journal = false with its own "
           "max_memory_size = 0 (stderr %r)" % err)
    finally:
        shutil.rmtree(d, ignore_errors=True)
