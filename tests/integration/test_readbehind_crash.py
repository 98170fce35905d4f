"""Read-behind across restarts, kill -9, compaction and damage (spec
extensions.md §5, doc/binlog.md "Read-behind" and "Startup and damage").

- Replay brings a budgeted tube back fully spilled, without reading its
  bodies; the reader thread then reads back the first budget's worth in id
  order, so spilled-jobs settles to N - floor(B/S) (polled).
- kill -9 at random moments while a producer spills and while workers
  drain (-f 0: INSERTED / DELETED mean on disk): every acknowledged job is
  back byte for byte, no deleted one returns.
- Compaction with 64 KiB files moves spilled jobs' records: still intact,
  also after kill -9.
- A spilled body's record damaged while the server runs: an error reply,
  a log line naming the job, tubed_binlog_spill_errors_total, the job
  buried on the reserve path, every other job served; at the next start
  the damage refuses the start like any other (--recover starts).
"""

import random
import re
import threading
import time

import harness
from harness import TestFailure, check, eq, fail, no_server, slow, tubed_only, unq
from binlog_util import (REC_HDR, find_body, flip_byte, mentions_offset,
                         parse_dir, run_refusing)
from readbehind_util import (KIB, RB, check_bodies, job_stats, list_jobs,
                             make_bodies, peek_body, put_many, reserve_exact,
                             spill_metrics, spilled, stats_binlog, wait_for,
                             wait_spilled)

EXT = "read-behind is a tubed extension"
CONF = "[tube rb]\nmax_memory_size = 64K\n"


def _worker(s, tube):
    w = s.bs()
    w.watch(tube)
    w.ignore("default")
    return w


# ------------------------------------------------------------ restart

def _restart_settles(binary, how):
    B, S, N = 64 * KIB, KIB, 200
    k = B // S
    with RB(binary, CONF, "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("rs", N, S, 30)
        pris = [(i % 5) * 10 for i in range(N)]
        delays = [3600 if i % 17 == 5 else 0 for i in range(N)]
        ids = put_many(c, bodies, pri=pris, delay=delays)
        eq(spilled(c), (N - k, (N - k) * S), "after %d puts" % N)
        c.use("plain")
        pb = make_bodies("plain", 30, 2000, 31)
        pids = put_many(c, pb)
        w = _worker(s, "rb")
        buried = ids[-5:]
        for j, b in zip(buried, bodies[-5:]):
            eq(w.cmd_body("reserve-job %d" % j)[1], b, "reserve-job %d" % j)
            w.expect("bury %d 3" % j, "BURIED")
        held = ids[100]
        eq(w.cmd_body("reserve-job %d" % held)[1], bodies[100], "reserve-job %d" % held)
        want = {}
        for i, j in enumerate(ids):
            state = ("buried" if j in buried else
                     "delayed" if delays[i] else "ready")
            want[j] = (state, 3 if j in buried else pris[i])
        if how == "sigterm":
            s.sigterm()
        else:
            s.kill9()
        s.restart()
        c = s.bs()
        # Fully spilled at replay, then the first budget's worth read back.
        wait_spilled(c, N - k, (N - k) * S, "after the restart (%s)" % how)
        reads, waits, errors = spill_metrics(s)
        eq((reads, waits, errors), (k, 0, 0), "(reads, waits, errors) after the "
           "restart: replay reads no body, the reader thread reads the first "
           "%d" % k)
        # Those first k are the lowest ids of the ready jobs (the read-ahead
        # passes delayed and buried ones): peeking them reads nothing more.
        ready = [i for i, j in enumerate(ids) if not delays[i] and j not in buried]
        for i in ready[:k]:
            eq(peek_body(c, ids[i]), bodies[i], "job %d" % ids[i])
        eq(spill_metrics(s)[1], 0, "spill waits after peeking the first %d ready ids" % k)
        nxt = ready[k]
        eq(peek_body(c, ids[nxt]), bodies[nxt], "job %d" % ids[nxt])
        eq(spill_metrics(s)[1], 1, "spill waits after peeking job %d" % ids[nxt])
        check_bodies(c, dict(zip(ids, bodies)), "rb after the restart (%s)" % how)
        check_bodies(c, dict(zip(pids, pb)), "plain after the restart (%s)" % how)
        for j in ids:
            st = job_stats(c, j)
            eq((unq(st["tube"]), unq(st["state"]), int(st["pri"])),
               ("rb",) + want[j], "stats-job %d after the restart (%s)" % (j, how))
            if want[j][0] == "delayed":
                check(3000 < int(st["time-left"]) <= 3600,
                      "time-left of delayed job %d: %s" % (j, st["time-left"]))
        wait_spilled(c, N - k, (N - k) * S, "after peeking everything")
        eq(spill_metrics(s)[2], 0, "spill errors")
        # Drain: priority, then id; the delayed and buried ones stay.
        w = _worker(s, "rb")
        order = sorted((want[j][1], j) for j in ids if want[j][0] == "ready")
        body_of = dict(zip(ids, bodies))
        for _, j in order:
            reserve_exact(w, j, body_of[j], "drain after the restart: ")
            w.expect("delete %d" % j, "DELETED")
        w.expect("reserve-with-timeout 0", "TIMED_OUT")


@no_server
@tubed_only(EXT)
def test_clean_restart_comes_back_spilled(binary):
    _restart_settles(binary, "sigterm")


@no_server
@tubed_only(EXT)
def test_kill9_restart_comes_back_spilled(binary):
    _restart_settles(binary, "kill -9")


# ------------------------------------------------------------ kill -9 under load

S_CRASH = 1000
K_CRASH = 64 * KIB // S_CRASH      # 65 bodies fit the budget


def _settled_count(s, c, tube, lo, hi, what):
    """Wait until spilled-jobs <= hi (the read-ahead is done), then check
    it is >= lo."""
    last = [None]

    def ok():
        last[0] = spilled(c)
        return last[0][0] <= hi
    deadline = time.monotonic() + 30
    while not ok():
        if time.monotonic() > deadline:
            fail("%s: spilled-jobs did not settle to %d (at least %d); last %r"
                 % (what, hi, lo, last[0]))
        time.sleep(0.02)
    if last[0][0] < lo:
        fail("%s: spilled-jobs %d, expected at least %d: %d body bytes of %s "
             "in memory, budget %d (records-migrated %s, reads/waits/errors %r)"
             % (what, last[0][0], lo,
                int(s.metrics().value("tubed_tube_memory_bytes", tube=tube)), tube,
                64 * KIB, stats_binlog(c)["records-migrated"], spill_metrics(s)))
    eq(last[0][1], last[0][0] * S_CRASH, "%s: spilled-bytes" % what)


@slow
@no_server
@tubed_only(EXT)
def test_kill9_while_spilling(binary):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    with RB(binary, CONF, "-f", "0") as s:
        present = {}
        uncertain = 0
        for rno in range(3):
            lock = threading.Lock()
            killed = threading.Event()
            inserted = {}
            inflight = [0]
            errors = []
            port = s.srv.port

            def producer(tid, wseed):
                r = random.Random(wseed)
                try:
                    c = harness.Client(harness.HOST, port, timeout=10)
                    c.use("rb")
                except (OSError, TestFailure) as e:
                    if not killed.is_set():
                        errors.append("producer %d: %r" % (tid, e))
                    return
                try:
                    for i in range(100000):   # until the kill
                        body = make_bodies("r%dt%d" % (rno, tid), 1, S_CRASH,
                                           r.random(), start=i)[0]
                        with lock:
                            inflight[0] += 1
                        c.send(b"put %d 0 60 %d\r\n%s\r\n"
                               % (r.randrange(3), len(body), body))
                        line = c.read_line()
                        m = re.fullmatch(rb"INSERTED (\d+)", line)
                        if not m:
                            errors.append("producer %d: put -> %r" % (tid, line))
                            return
                        with lock:
                            inflight[0] -= 1
                            inserted[int(m.group(1))] = body
                except (TestFailure, OSError) as e:
                    if not killed.is_set():
                        errors.append("producer %d: %s" % (tid, str(e)[:200]))
                finally:
                    c.close()

            threads = [threading.Thread(target=producer, args=(t, rnd.random()),
                                        daemon=True) for t in range(2)]
            for t in threads:
                t.start()
            # Past the budget (the first round), then a random moment.
            wait_for(lambda: len(inserted) >= (K_CRASH + 20 if rno == 0 else 20)
                     or errors, "round %d: puts acknowledged" % rno)
            time.sleep(rnd.uniform(0.0, 0.25))
            killed.set()
            s.kill9()
            for t in threads:
                t.join(15)
            check(not any(t.is_alive() for t in threads), "producers still running")
            check(not errors, "round %d (seed %d): %s" % (rno, seed, errors[:3]))
            present.update(inserted)
            uncertain += inflight[0]
            s.restart()
            c = s.bs()
            what = "round %d (seed %d), kill -9 while spilling" % (rno, seed)
            check_bodies(c, present, what)
            total = len(list_jobs(c, "rb"))
            check(len(present) <= total <= len(present) + uncertain,
                  "%s: %d jobs in rb, %d acknowledged (+ at most %d in flight)"
                  % (what, total, len(present), uncertain))
            n_sp = max(0, total - K_CRASH)
            _settled_count(s, c, "rb", n_sp, n_sp, what)
            eq(spill_metrics(s)[2], 0, "%s: spill errors" % what)


@no_server
@tubed_only(EXT)
def test_restarts_that_migrate_records_stay_within_budget(binary):
    """Four rounds of 800 puts and kill -9: the restarts move the old
    files' records on (records-migrated) while the reader thread reads the
    first budget's worth back; every time the tube settles at exactly its
    budget in memory (N - floor(B/S) spilled), bodies intact."""
    with RB(binary, CONF, "-f", "0") as s:
        jobs = {}
        for rno in range(4):
            c = s.bs()
            c.use("rb")
            bodies = make_bodies("mig%d" % rno, 800, S_CRASH, 70 + rno)
            jobs.update(zip(put_many(c, bodies), bodies))
            s.kill9()
            s.restart()
            c = s.bs()
            n = len(jobs)
            what = "restart %d (%d jobs)" % (rno + 1, n)
            _settled_count(s, c, "rb", n - K_CRASH, n - K_CRASH, what)
            # Settled: no read-back still in flight may add to memory.
            time.sleep(0.3)
            mem = int(s.metrics().value("tubed_tube_memory_bytes", tube="rb"))
            sb = stats_binlog(c)
            eq((mem, spilled(c)), (K_CRASH * S_CRASH, (n - K_CRASH, (n - K_CRASH) * S_CRASH)),
               "%s: (tubed_tube_memory_bytes, (spilled-jobs, spilled-bytes)); "
               "records-migrated %s" % (what, sb["records-migrated"]))
        check(int(stats_binlog(c)["records-migrated"]) > 0,
              "no record was migrated by the restarts: the test did not cover "
              "what it is for")
        check_bodies(c, jobs, "after 4 restarts")


@slow
@no_server
@tubed_only(EXT)
def test_kill9_while_draining(binary):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    with RB(binary, CONF, "-f", "0") as s:
        present = {}
        deleted, buried = set(), set()
        for rno in range(3):
            # A fresh backlog on top of what is left: most of it spilled.
            c = s.bs()
            c.use("rb")
            bodies = make_bodies("dr%d" % rno, 300, S_CRASH, seed + rno)
            present.update(zip(put_many(c, bodies,
                                        pri=[rnd.randrange(3) for _ in bodies]),
                               bodies))
            check(spilled(c)[0] >= len(present) - K_CRASH - 40,
                  "round %d: %r spilled of %d jobs" % (rno, spilled(c), len(present)))
            lock = threading.Lock()
            killed = threading.Event()
            dels, burs, maybe_del, maybe_bur = set(), set(), set(), set()
            errors = []
            port = s.srv.port

            def worker(tid, wseed):
                r = random.Random(wseed)
                try:
                    w = harness.Client(harness.HOST, port, timeout=10)
                    w.watch("rb")
                    w.ignore("default")
                except (OSError, TestFailure) as e:
                    if not killed.is_set():
                        errors.append("worker %d: %r" % (tid, e))
                    return
                try:
                    while True:
                        line, body = w.cmd_body("reserve-with-timeout 1")
                        if line == b"TIMED_OUT":
                            return
                        m = re.fullmatch(rb"RESERVED (\d+) \d+", line)
                        if not m:
                            errors.append("worker %d: reserve -> %r" % (tid, line))
                            return
                        j = int(m.group(1))
                        if present.get(j) != body:
                            errors.append("worker %d: job %d reserved with another "
                                          "body (%r...)" % (tid, j, body[:20]))
                            return
                        x = r.random()
                        if x < 0.75:
                            with lock:
                                maybe_del.add(j)
                            eq(w.cmd("delete %d" % j), b"DELETED", "delete %d" % j)
                            with lock:
                                maybe_del.discard(j)
                                dels.add(j)
                        elif x < 0.85:
                            with lock:
                                maybe_bur.add(j)
                            eq(w.cmd("bury %d 1" % j), b"BURIED", "bury %d" % j)
                            with lock:
                                maybe_bur.discard(j)
                                burs.add(j)
                        else:
                            eq(w.cmd("release %d %d 0" % (j, r.randrange(3))),
                               b"RELEASED", "release %d" % j)
                except (TestFailure, OSError) as e:
                    if not killed.is_set():
                        errors.append("worker %d: %s" % (tid, str(e)[:200]))
                finally:
                    w.close()

            threads = [threading.Thread(target=worker, args=(t, rnd.random()),
                                        daemon=True) for t in range(3)]
            for t in threads:
                t.start()
            # Some deletes in, then a random moment.
            wait_for(lambda: len(dels) >= 5 or errors or
                     not any(t.is_alive() for t in threads),
                     "round %d: deletes acknowledged" % rno)
            time.sleep(rnd.uniform(0.0, 0.2))
            killed.set()
            s.kill9()
            for t in threads:
                t.join(15)
            check(not any(t.is_alive() for t in threads), "workers still running")
            what = "round %d (seed %d), kill -9 while draining" % (rno, seed)
            check(not errors, "%s: %s" % (what, errors[:3]))
            check(dels, "%s: no delete acknowledged before the kill" % what)
            s.restart()
            c = s.bs()
            for j in dels:
                present.pop(j, None)
            deleted |= dels
            buried |= burs
            got = {}
            ids = sorted(set(present) | deleted)
            for i in range(0, len(ids), 100):
                part = ids[i:i + 100]
                c.send(b"".join(b"peek %d\r\n" % j for j in part))
                for j in part:
                    line, body = c.read_reply()
                    got[j] = body if line.startswith(b"FOUND") else None
            back = sorted(j for j in deleted if got[j] is not None)
            lost = sorted(j for j in present if got[j] is None and j not in maybe_del)
            changed = sorted(j for j in present
                             if got[j] is not None and got[j] != present[j])
            check(not (back or lost or changed),
                  "%s: %d deleted jobs back %s, %d acknowledged jobs lost %s, %d "
                  "with another body %s" % (what, len(back), back[:8], len(lost),
                                            lost[:8], len(changed), changed[:8]))
            for j in maybe_del:
                if got[j] is None:
                    present.pop(j, None)
                    deleted.add(j)
            states = {}
            for j in present:
                states[j] = unq(job_stats(c, j)["state"])
            wrong = sorted(j for j in buried if j in present and states[j] != "buried")
            check(not wrong, "%s: acknowledged burials not buried: %s" % (what, wrong[:8]))
            wrong = sorted(j for j in present if j not in buried and j not in maybe_bur
                           and states[j] != "ready")
            check(not wrong, "%s: jobs not ready after the restart: %s"
                  % (what, [(j, states[j]) for j in wrong[:8]]))
            for j in maybe_bur:
                if states.get(j) == "buried":
                    buried.add(j)
            m = len(present)
            eq(len(list_jobs(c, "rb")), m, "%s: jobs in rb" % what)
            nb = sum(1 for j in present if states[j] != "buried")
            _settled_count(s, c, "rb", max(0, m - K_CRASH), max(0, m - min(K_CRASH, nb)),
                           what)
            # Kick the buried ones for the next round.
            if buried:
                c.use("rb")
                line = c.cmd("kick 1000")
                check(line.startswith(b"KICKED "), "kick: %r" % line)
                buried = set()
        # Finally drain what is left: every body intact.
        w = _worker(s, "rb")
        while True:
            line, body = w.cmd_body("reserve-with-timeout 0")
            if line == b"TIMED_OUT":
                break
            j = int(line.split()[1])
            check(present.get(j) == body, "final drain: job %d body" % j)
            w.expect("delete %d" % j, "DELETED")
            del present[j]
        eq(sorted(present), [], "jobs not served by the final drain")
        eq(spilled(c), (0, 0), "spilled after the final drain")


# ------------------------------------------------------------ compaction

@slow
@no_server
@tubed_only(EXT)
def test_compaction_moves_spilled_records(binary):
    """Spilled jobs in the first 64 KiB files; churn in another tube until
    compaction has moved their records on and the first files are gone:
    every spilled body intact, also after kill -9."""
    args = ["-f", "0", "-s", "65536"]
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n", *args) as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("cmp", 60, KIB, 40)
        ids = put_many(c, bodies)
        jobs = dict(zip(ids, bodies))
        eq(spilled(c), (52, 52 * KIB), "after 60 puts")
        first = {n for n, p in parse_dir(s.bdir) if find_body([(n, p)], bodies[-1])}
        check(first, "the last rb body is in no binlog file")
        sb0 = stats_binlog(c)
        c.use("churn")
        churn = make_bodies("churn", 20, KIB, 41)
        deadline = time.monotonic() + 40
        while True:
            cids = put_many(c, churn)
            c.send(b"".join(b"delete %d\r\n" % j for j in cids))
            for _ in cids:
                c.expect_lines(["DELETED"])
            sb = stats_binlog(c)
            if int(sb["oldest-file"]) > max(first) and \
                    int(sb["records-migrated"]) > int(sb0["records-migrated"]):
                break
            if time.monotonic() > deadline:
                fail("compaction did not move the spilled jobs' records past "
                     "binlog.%d: %r" % (max(first), sb))
            # keep peeking while the records move
            j = random.choice(ids)
            eq(peek_body(c, j), jobs[j], "job %d during the churn" % j)
        check(int(sb["compactions"]) > 0, "compactions: %r" % sb)
        check_bodies(c, jobs, "rb after compaction")
        wait_spilled(c, 52, 52 * KIB, "after compaction")
        w = _worker(s, "rb")
        for j in ids[:5]:
            reserve_exact(w, j, jobs[j], "after compaction: ")
            w.expect("delete %d" % j, "DELETED")
            del jobs[j]
        eq(spill_metrics(s)[2], 0, "spill errors")
        s.kill9()
        s.restart()
        c = s.bs()
        wait_spilled(c, 55 - 8, (55 - 8) * KIB, "after compaction and kill -9")
        check_bodies(c, jobs, "rb after compaction and kill -9")
        w = _worker(s, "rb")
        for j in sorted(jobs):
            reserve_exact(w, j, jobs[j], "drain after kill -9: ")
            w.expect("delete %d" % j, "DELETED")
        eq(spill_metrics(s)[2], 0, "spill errors after the restart")


# ------------------------------------------------------------ damage

def _damage(s, body, at=None):
    """Flip one byte inside body's J record (in the middle of the body).
    Returns (file name, record offset, flipped offset)."""
    hits = find_body(parse_dir(s.bdir), body)
    eq(len(hits), 1, "records holding the body to damage")
    n, p, r = hits[0]
    off = r.off + REC_HDR + r.payload.index(body) + (len(body) // 2 if at is None else at)
    flip_byte(p.path, off)
    return p.name, r.off, off


def _names_job(text, jid):
    return re.search(r"^.*\bjob %d\b.*$" % jid, text, re.M) is not None


@no_server
@tubed_only(EXT)
def test_damaged_spilled_record_at_run_time(binary):
    conf = "[tube rb]\nmax_memory_size = 8K\n[tube q]\nmax_memory_size = 4K\n"
    with RB(binary, conf, "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("dmg", 30, KIB, 50)
        ids = put_many(c, bodies, pri=100)
        vb = make_bodies("victim", 1, 2 * KIB, 51)[0]
        v = c.put(vb, pri=1)                     # spilled, at the head
        eq(spilled(c), (23, 22 * KIB + 2 * KIB), "after the puts")
        jobs = dict(zip(ids, bodies))
        x = ids[12]                              # spilled, read ahead later
        fname, roff, off = _damage(s, vb)
        xname, xroff, xoff = _damage(s, jobs[x])
        # peek: an error reply, logged with the job id, counted.
        line, body = c.cmd_body("peek %d" % v)
        eq((line, body), (b"INTERNAL_ERROR", None), "peek of the damaged job %d" % v)
        wait_for(lambda: _names_job(s.stderr(), v),
                 "a log line naming job %d" % v)
        check(spill_metrics(s)[2] >= 1, "spill errors after the failed peek")
        eq(c.cmd("peek-ready"), b"INTERNAL_ERROR", "peek-ready (the damaged job "
           "is at the head)")
        # A reserve that cannot wait (timeout 0) reads on the loop: an error
        # reply, the job buried, the next job served.
        w = _worker(s, "rb")
        line = w.cmd("reserve-with-timeout 0")
        check(re.fullmatch(rb"[A-Z_]+", line) is not None and
              line not in (b"TIMED_OUT", b"DEADLINE_SOON"),
              "reserve-with-timeout 0 meeting the damaged job %d: expected an "
              "error reply, got %r" % (v, line))
        eq(unq(job_stats(c, v)["state"]), "buried", "state of the damaged job %d" % v)
        reserve_exact(w, ids[0], bodies[0], "the reserve after the damaged job: ")
        w.expect("release %d 100 0" % ids[0], "RELEASED")
        # The read-ahead meets x once room is made before it: counted,
        # logged, and x (ready) is buried.
        errs0 = spill_metrics(s)[2]
        for j in ids[:12]:
            c.expect("delete %d" % j, "DELETED")
            del jobs[j]
        wait_for(lambda: spill_metrics(s)[2] > errs0,
                 "the read-ahead to count the damaged record of job %d" % x)
        wait_for(lambda: _names_job(s.stderr(), x), "a log line naming job %d" % x)
        wait_for(lambda: unq(job_stats(c, x)["state"]) == "buried",
                 "job %d (its read-ahead failed) buried" % x)
        del jobs[x]
        # A reserve that may wait, with a damaged spilled job z at the head:
        # z is buried and the worker gets the next job.
        zb = make_bodies("zvictim", 1, 2 * KIB, 54)[0]
        sp0 = spilled(c)
        z = c.put(zb, pri=0)
        eq(spilled(c), (sp0[0] + 1, sp0[1] + len(zb)), "job %d put over budget" % z)
        _damage(s, zb)
        reserve_exact(w, ids[13], jobs[ids[13]], "a reserve-with-timeout 5 with the "
                      "damaged job %d at the head: " % z)
        eq(unq(job_stats(c, z)["state"]), "buried", "state of the damaged job %d" % z)
        check(_names_job(s.stderr(), z), "no log line names job %d" % z)
        w.expect("release %d 100 0" % ids[13], "RELEASED")
        for j in sorted(jobs):
            reserve_exact(w, j, jobs[j], "after the damaged jobs: ")
        for j in sorted(jobs):
            w.expect("release %d 100 0" % j, "RELEASED")
        check_bodies(c, jobs, "the undamaged jobs")
        # memcache: get/peek and a plain get on a damaged item of q read on
        # the loop (SERVER_ERROR, the item buried); a get that may wait
        # (t=) with a damaged item at the head gets the next item.
        m = s.mc()
        qb = make_bodies("dq", 6, KIB, 52)
        for b in qb:
            m.store("q", b)
        c.use("q")
        yb = make_bodies("qvictim", 1, KIB, 53)[0]
        y = c.put(yb, pri=0)
        _damage(s, yb)
        line = m.cmd("get q/peek")
        check(line.startswith(b"SERVER_ERROR"), "get q/peek of a damaged item: %r" % line)
        m2 = s.mc()
        line = m2.cmd("get q")
        check(line.startswith(b"SERVER_ERROR"), "get q of a damaged item: %r" % line)
        eq(unq(job_stats(c, y)["state"]), "buried", "the damaged item after get")
        y2b = make_bodies("qvictim2", 1, KIB, 55)[0]
        y2 = c.put(y2b, pri=0)
        _damage(s, y2b)
        m3 = s.mc()
        eq(m3.get("q/t=5000"), qb[0], "get q/t=5000 with the damaged item %d at "
           "the head" % y2)
        eq(unq(job_stats(c, y2)["state"]), "buried", "the damaged item %d" % y2)
        got = [m3.get("q") for _ in qb[1:]]
        eq(got, qb[1:], "the undamaged items of q")
        check(s.srv.alive(), "the server died")
        errs = spill_metrics(s)[2]
        check(errs >= 5, "tubed_binlog_spill_errors_total %d after 5 damaged records"
              % errs)
        # At the next start the damage refuses the start.
        s.sigterm()
        rc, err = run_refusing(binary, s.base_args())
        check(fname in err and mentions_offset(err, [roff, roff + REC_HDR, off, xroff,
                                                     xroff + REC_HDR, xoff]),
              "start after damage in %s: stderr should name the file and an "
              "offset, got %r" % (fname, err[-600:]))
        s.restart(extra=["--recover"])
        c = s.bs()
        check_bodies(c, jobs, "--recover: the undamaged jobs of rb")
        for j in (v, x, y, z, y2):
            eq(c.cmd("peek %d" % j), b"NOT_FOUND", "--recover: damaged job %d" % j)


@no_server
@tubed_only(EXT)
def test_damaged_spilled_record_refuses_start(binary):
    """Damage to a spilled job's record made while the server is down:
    the start is refused naming the file and offset; --recover keeps the
    others, spilled again per the budget."""
    with RB(binary, "[tube rb]\nmax_memory_size = 8K\n", "-f", "0") as s:
        c = s.bs()
        c.use("rb")
        bodies = make_bodies("dms", 40, KIB, 60)
        ids = put_many(c, bodies)
        s.kill9()
        bad = ids[25]
        fname, roff, off = _damage(s, bodies[25])
        rc, err = run_refusing(binary, s.base_args())
        check(fname in err and mentions_offset(err, [roff, roff + REC_HDR, off]),
              "damaged record of spilled job %d in %s at %d: stderr should name "
              "the file and offset, got %r" % (bad, fname, roff, err[-600:]))
        s.restart(extra=["--recover"])
        c = s.bs()
        jobs = dict(zip(ids, bodies))
        del jobs[bad]
        eq(c.cmd("peek %d" % bad), b"NOT_FOUND", "--recover: the damaged job")
        wait_spilled(c, 39 - 8, 31 * KIB, "after --recover")
        check_bodies(c, jobs, "--recover: every other job")
