"""Tube policies: max_age and move_expired_to (spec/extensions.md §1,
"Expiry details").

Durations are small (1-2 s) and every wait polls with a generous deadline;
no test asserts how fast the server is.  To look at the server "between
two sweeps" a test stops it with SIGSTOP, lets the expiry time pass, queues
its commands and resumes it with SIGCONT: the loop then reads the commands
in the same wake-up, before its timers run.
"""

import os
import re
import signal
import time

import harness
from harness import check, eq, fail, no_server, slow, unq
from policy_util import (Policy, bury_job, job_stats, job_where, live,
                         present, put_id, put_line, reserve_job, sleep_until,
                         tube_counter, tube_counts, tube_stats, wait_for)


def _gone(c, jid):
    return not present(c, jid)


def _wait_gone(c, ids, what="expiry"):
    for j in ids:
        wait_for(lambda j=j: _gone(c, j), "job %d to be gone (%s)" % (j, what))


def _stats_total(c, key):
    return int(c.stats()[key])


# ------------------------------------------------------------ plain expiry

@no_server
def test_expiry_of_ready_delayed_buried(binary):
    """Ready, delayed and buried jobs expire: gone from peek, reserve,
    stats-tube and stats counts; other tubes untouched."""
    with Policy(binary, "[tube e]\nmax_age = 2s\n") as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("e")
        w.watch("e")
        w.ignore("default")
        r = put_id(c, b"r")
        d = put_id(c, b"d", delay=3600)
        b = put_id(c, b"b")
        bury_job(w, b)
        c.use("default")
        keep = put_id(c, b"keep")
        _wait_gone(c, [r, d, b])
        for cmd in ("peek-ready", "peek-delayed", "peek-buried"):
            c.use("e")
            eq(c.peek(cmd), None, "%s in e after expiry" % cmd)
        eq(tube_counts(c, "e")[:5], (0, 0, 0, 0, 0), "stats-tube e counts")
        st = c.stats()
        eq([st[k] for k in ("current-jobs-ready", "current-jobs-delayed",
                            "current-jobs-buried", "current-jobs-reserved")],
           ["1", "0", "0", "0"], "stats: only 'keep' is left")
        w.expect("reserve-with-timeout 0", "TIMED_OUT")
        for j in (r, d, b):
            for cmd in ("stats-job %d", "kick-job %d", "reserve-job %d", "delete %d"):
                c.expect(cmd % j, "NOT_FOUND")
        eq(c.peek("peek %d" % keep), (keep, b"keep"), "the job of the other tube")
        # The tube expires its jobs again later: the clock is per job.
        c.use("e")
        r2 = put_id(c, b"r2")
        _wait_gone(c, [r2])


FILLERS = 3000


def _fill(c, tube, n=FILLERS):
    """n jobs put into tube (pipelined).  They expire just before the jobs
    a test looks at: the sweep, which works through expiries a bounded
    batch per loop iteration, is then busy with them when the test's
    commands are read."""
    c.use(tube)
    for i in range(0, n, 500):
        k = min(500, n - i)
        c.send(b"put 0 0 60 1\r\nf\r\n" * k)
        for _ in range(k):
            line = c.read_line()
            check(line.startswith(b"INSERTED "), "filler put: %r" % line)


def _stopped_past_expiry(p, t_last, age, send):
    """Stop the server, let the expiry time of the last job put (at t_last,
    taken after its INSERTED) pass, call send() to queue the commands,
    resume the server.  (On SIGCONT the loop's epoll_wait returns EINTR and
    its timers run first: _fill() keeps the sweep busy.)"""
    p.srv.signal(signal.SIGSTOP)
    try:
        sleep_until(t_last + age + 0.5)
        send()
    finally:
        p.srv.signal(signal.SIGCONT)


@no_server
def test_expired_never_handed_out_between_sweeps(binary):
    """An expired job is never handed out, peeked, kicked or found even
    before the sweep reached it: the server is stopped past the expiry time
    and the commands are read before its timers run.  Each command looks at
    its own tube or job first, so none of them is answered from what an
    earlier one expired."""
    with Policy(binary, "[tube e*]\nmax_age = 5s\n") as p:
        c = p.srv.client()
        w = p.srv.client()
        w.watch("e6")
        w.ignore("default")
        _fill(c, "e0")
        c.watch("e1")
        c.use("e1")                    # kick: a buried and a delayed job
        k_b = put_id(c, b"k-b")
        bury_job(c, k_b)
        k_d = put_id(c, b"k-d", delay=3600)
        c.use("e2")
        put_id(c, b"pr")               # peek-ready
        c.use("e3")
        put_id(c, b"pd", delay=3600)   # peek-delayed
        c.use("e4")
        c.watch("e4")
        pb = put_id(c, b"pb")          # peek-buried
        bury_job(c, pb)
        c.use("e5")
        c.watch("e5")
        p5 = put_id(c, b"p5")          # peek <id>
        kj = put_id(c, b"kj", delay=3600)   # kick-job <id>
        sj = put_id(c, b"sj")          # stats-job <id>
        bury_job(c, sj)
        rj = put_id(c, b"rj")          # reserve-job <id>
        dj = put_id(c, b"dj")          # delete <id>
        c.use("e6")
        put_id(c, b"r6")               # reserve (w watches only e6)
        c.use("e7")
        k7 = put_id(c, b"k7", delay=3600)   # kick: only a delayed job
        t_last = time.monotonic()

        def send():
            c.send(b"use e1\r\nkick 10\r\n"
                   b"use e2\r\npeek-ready\r\n"
                   b"use e3\r\npeek-delayed\r\n"
                   b"use e4\r\npeek-buried\r\n"
                   + b"peek %d\r\nkick-job %d\r\nstats-job %d\r\nreserve-job %d\r\n"
                   % (p5, kj, sj, rj) + b"use e7\r\nkick 10\r\ndelete %d\r\n" % dj)
            w.send(b"reserve-with-timeout 0\r\n")
        _stopped_past_expiry(p, t_last, 5.0, send)
        got = [c.read_line() for _ in range(15)]
        want = [b"USING e1", b"KICKED 0", b"USING e2", b"NOT_FOUND",
                b"USING e3", b"NOT_FOUND", b"USING e4", b"NOT_FOUND",
                b"NOT_FOUND", b"NOT_FOUND", b"NOT_FOUND", b"NOT_FOUND",
                b"USING e7", b"KICKED 0", b"NOT_FOUND"]
        names = ["use", "kick 10 (buried)", "use", "peek-ready", "use", "peek-delayed",
                 "use", "peek-buried", "peek id", "kick-job id", "stats-job id",
                 "reserve-job id", "use", "kick 10 (delayed)", "delete id"]
        bad = ["%s: %r" % (n, g) for n, g, x in zip(names, got, want) if g != x]
        eq(w.read_line(), b"TIMED_OUT", "reserve-with-timeout 0 on e6 (only an expired job)")
        check(not bad, "commands read before the sweep saw expired jobs: %s" % "; ".join(bad))
        for t in ("e1", "e2", "e3", "e4", "e5", "e6", "e7"):
            eq(tube_counts(c, t)[:5], (0, 0, 0, 0, 0), "stats-tube %s afterwards" % t)
        for j in (k_b, k_d, k7):
            eq(present(c, j), False, "job %d (kicked while expired?)" % j)


@no_server
def test_expired_not_counted_between_sweeps(binary):
    """stats-tube and stats right after the time, before any sweep."""
    with Policy(binary, "[tube e*]\nmax_age = 3s\n") as p:
        c = p.srv.client()
        _fill(c, "e0")
        c.use("e")
        put_id(c, b"r")
        put_id(c, b"d", delay=3600)
        _stopped_past_expiry(p, time.monotonic(), 3.0,
                             lambda: c.send(b"stats-tube e\r\nstats\r\n"))
        line, body = c.read_reply()
        if line != b"NOT_FOUND":
            st = harness.parse_yaml_dict(body)
            eq((st["current-jobs-ready"], st["current-jobs-delayed"]), ("0", "0"),
               "stats-tube e read before the sweep")
        line, body = c.read_reply()
        st = harness.parse_yaml_dict(body)
        eq((st["current-jobs-ready"], st["current-jobs-delayed"]), ("0", "0"),
           "stats read before the sweep")


# ------------------------------------------------------------ reserved jobs

@no_server
def test_reserved_job_expires_when_it_comes_back(binary):
    """A reserved job passing its time stays reserved (its worker may still
    delete it) and expires the moment it is released, buried, its TTR runs
    out or its worker disconnects."""
    with Policy(binary, "[tube e]\nmax_age = 1s\n") as p:
        c = p.srv.client()
        c.use("e")
        ws = {}
        ids = {}
        for how in ("release", "release-delay", "bury", "ttr", "disconnect", "delete"):
            ws[how] = p.srv.client()
            ws[how].watch("e")
            ids[how] = put_id(c, how.encode(), ttr=(3 if how == "ttr" else 3600))
            reserve_job(ws[how], ids[how])
        t_put = time.monotonic()
        sleep_until(t_put + 1.5)
        # Past its time, still reserved: never taken from its worker.
        for how, j in ids.items():
            if how != "ttr":      # (its TTR may be out already on a slow machine)
                eq(job_where(c, j), ("e", "reserved"),
                   "job %s past max_age while reserved" % how)
        ws["release"].expect("release %d 0 0" % ids["release"], "RELEASED")
        ws["release-delay"].expect("release %d 0 3600" % ids["release-delay"], "RELEASED")
        ws["bury"].expect("bury %d 0" % ids["bury"], "BURIED")
        ws["delete"].expect("delete %d" % ids["delete"], "DELETED")
        for how in ("release", "release-delay", "bury"):
            eq(present(c, ids[how]), False, "job %s right after it came back" % how)
        ws["disconnect"].close()
        _wait_gone(c, [ids["disconnect"]], "worker disconnected")
        # The TTR one: never seen ready (a watcher waiting on e gets nothing).
        x = p.srv.client()
        x.watch("e")
        x.ignore("default")
        x.send(b"reserve-with-timeout 1\r\n")
        _wait_gone(c, [ids["ttr"]], "TTR ran out")
        line = x.read_line(timeout=30)
        eq(line, b"TIMED_OUT", "a waiter on e while the expired reserved job timed out")
        eq(tube_counts(c, "e")[:5], (0, 0, 0, 0, 0), "stats-tube e")


@no_server
def test_reserved_job_not_past_time_unaffected(binary):
    """Control: in a tube with a long max_age, release/bury work as usual."""
    with Policy(binary, "[tube e]\nmax_age = 1h\n") as p:
        c = p.srv.client()
        c.use("e")
        c.watch("e")
        j = put_id(c, b"j")
        reserve_job(c, j)
        c.expect("release %d 0 0" % j, "RELEASED")
        eq(job_where(c, j), ("e", "ready"), "released job")
        reserve_job(c, j)
        c.expect("bury %d 0" % j, "BURIED")
        eq(job_where(c, j), ("e", "buried"), "buried job")


# ------------------------------------------------------------ move_expired_to

MOVE = """\
[tube src]
max_age = 1s
move_expired_to = dead
"""


@no_server
def test_move_expired_to_keeps_the_job(binary):
    """move_expired_to: same id, priority, TTR, body and counters; state
    ready, whatever state it expired in."""
    with Policy(binary, MOVE.replace("max_age = 1s", "max_age = 3s")) as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("src")
        w.watch("src")
        j = put_id(c, b"payload", pri=7, ttr=33)
        # Give it counters: a reserve+release, a reserve+bury, a kick.
        reserve_job(w, j)
        w.expect("release %d 7 0" % j, "RELEASED")
        reserve_job(w, j)
        w.expect("bury %d 7" % j, "BURIED")
        w.expect("kick-job %d" % j, "KICKED")
        before = job_stats(c, j)
        d = put_id(c, b"delayed", pri=3, delay=3600, ttr=44)
        b = put_id(c, b"buried", pri=4, ttr=55)
        bury_job(w, b, pri=4)
        for jid in (j, d, b):
            wait_for(lambda jid=jid: job_where(c, jid) == ("dead", "ready"),
                     "job %d to move to dead" % jid)
        after = job_stats(c, j)
        for k in ("id", "pri", "ttr", "reserves", "timeouts", "releases",
                  "buries", "kicks"):
            eq(after[k], before[k], "stats-job %s after the move" % k)
        eq(unq(after["state"]), "ready", "state after the move")
        eq(c.peek("peek %d" % j), (j, b"payload"), "body after the move")
        eq([job_stats(c, d)[k] for k in ("pri", "ttr")], ["3", "44"], "delayed job's pri, ttr")
        eq([job_stats(c, b)[k] for k in ("pri", "ttr")], ["4", "55"], "buried job's pri, ttr")
        eq(tube_counts(c, "src")[:5], (0, 0, 0, 0, 0), "src is empty")
        eq(tube_counter(c, "src", "total-expired"), 3, "src total-expired (stats-tubes)")
        eq(tube_counts(c, "dead")[1:5], (3, 0, 0, 0), "dead: three ready jobs")
        # A worker watching dead gets them, in priority order.
        w.watch("dead")
        w.ignore("src")
        got = [w.reserve(timeout=0)[0] for _ in range(3)]
        eq(got, [d, b, j], "reserve order in dead (pri 3, 4, 7)")


@no_server
def test_move_expired_reserved_job_on_release(binary):
    """A reserved job past its time, released: it moves (same id) to the
    dead-letter tube, ready."""
    with Policy(binary, MOVE) as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("src")
        w.watch("src")
        j = put_id(c, b"x", pri=5, ttr=3600)
        reserve_job(w, j)
        t = time.monotonic()
        sleep_until(t + 1.5)
        eq(job_where(c, j), ("src", "reserved"), "reserved past its time")
        w.expect("release %d 6 3600" % j, "RELEASED")
        eq(job_where(c, j), ("dead", "ready"), "right after the release")
        eq(job_stats(c, j)["pri"], "6", "the release's priority is kept")


@no_server
def test_move_expired_chain(binary):
    """A -> B -> C: the age clock restarts in each tube, so the job expires
    again under the target's own max_age."""
    conf = """\
[tube A]
max_age = 1s
move_expired_to = B
[tube B]
max_age = 1s
move_expired_to = C
[tube C]
max_age = 1s
"""
    with Policy(binary, conf) as p:
        c = p.srv.client()
        c.use("A")
        j = put_id(c, b"chain", pri=9, ttr=99)
        wait_for(lambda: job_where(c, j) != ("A", "ready"), "job to leave A")
        where = job_where(c, j)
        check(where in (("B", "ready"), ("C", "ready")),
              "job %d after leaving A: %r" % (j, where))
        wait_for(lambda: job_where(c, j) != ("B", "ready"), "job to leave B")
        where = job_where(c, j)
        check(where in (("C", "ready"), None), "job %d after leaving B: %r" % (j, where))
        # C has no move_expired_to: deleted in the end.
        _wait_gone(c, [j])
        for t in ("A", "B", "C"):
            eq(tube_counts(c, t)[:5], (0, 0, 0, 0, 0), "tube %s at the end" % t)


@slow
@no_server
def test_move_expired_restarts_the_age_clock(binary):
    """The job's clock restarts when move_expired_to puts it into the
    target: a max_age given to the target afterwards counts from the move,
    not from the put.  (A's max_age 8 s; B gets max_age 6 s once the job is
    in B: measured from the put the job would be 2 s overdue at once.)"""
    conf_a = "[tube A]\nmax_age = 8s\nmove_expired_to = B\n"
    with Policy(binary, conf_a) as p:
        c = p.srv.client()
        c.use("A")
        j = put_id(c, b"clock")
        wait_for(lambda: job_where(c, j) == ("B", "ready"), "job to move to B")
        p.rewrite(conf_a + "[tube B]\nmax_age = 6s\n")
        p.reload()
        eq(job_where(c, j), ("B", "ready"),
           "right after giving B max_age = 6s (the job entered B just now; "
           "it was put 8 s ago)")
        _wait_gone(c, [j], "B's max_age")


@no_server
def test_move_expired_into_full_tube(binary):
    """A full dead-letter tube without discard: the job stays where it was
    (and is still served there) until there is room."""
    conf = MOVE + "[tube dead]\nmax_items = 1\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        c.use("src")
        j1 = put_id(c, b"one")
        j2 = put_id(c, b"two")
        t = time.monotonic()
        wait_for(lambda: job_where(c, j1) == ("dead", "ready"), "j1 to move to dead")
        sleep_until(t + 2.5)          # j2's time has surely come too
        eq(job_where(c, j2), ("src", "ready"), "j2 while dead is full")
        eq(c.peek("peek %d" % j2), (j2, b"two"), "peek j2 while dead is full")
        c.expect("delete %d" % j1, "DELETED")
        wait_for(lambda: job_where(c, j2) == ("dead", "ready"), "j2 to move once there is room")


@no_server
def test_move_expired_into_full_tube_with_discard(binary):
    conf = MOVE + "[tube dead]\nmax_items = 1\ndiscard_old_when_full = true\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        c.use("src")
        j1 = put_id(c, b"one")
        j2 = put_id(c, b"two")
        wait_for(lambda: job_where(c, j2) == ("dead", "ready"), "j2 to move to dead")
        eq(present(c, j1), False, "j1, discarded from dead to make room for j2")
        eq(tube_counts(c, "dead")[1], 1, "ready jobs in dead")


@no_server
def test_top_level_max_age_and_dead_letter_override(binary):
    """A top-level max_age applies to every tube; the dead-letter tube opts
    out with its own max_age = 0 (doc/configuration.md's advice)."""
    conf = "max_age = 1s\nmove_expired_to = expired\n[tube expired]\nmax_age = 0\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        a = put_id(c, b"a")
        c.use("other")
        b = put_id(c, b"b")
        for j in (a, b):
            wait_for(lambda j=j: job_where(c, j) == ("expired", "ready"),
                     "job %d to move to expired" % j)
        t = time.monotonic()
        sleep_until(t + 1.5)
        eq([job_where(c, j) for j in (a, b)], [("expired", "ready")] * 2,
           "jobs stay in the dead-letter tube (max_age = 0 there)")


@no_server
def test_one_reply_per_reserve_when_expiry_meets_unpause(binary):
    """A worker waits in reserve on src (paused) and dead.  When the pause
    ends in the same loop iteration in which src's top job is past its
    max_age, that job moves to dead and the worker gets it: it must get
    nothing else for its one reserve (here the next job of src, K).  The
    server is stopped across both moments so that they fall in one
    iteration, as on a busy server."""
    with Policy(binary, "[tube src]\nmax_age = 3s\nmove_expired_to = dead\n") as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("src")
        c.expect("pause-tube src 4", "PAUSED")
        t0 = time.monotonic()
        j = put_id(c, b"J", pri=0)
        w.watch("src")
        w.watch("dead")
        w.ignore("default")
        w.send(b"reserve\r\n")
        sleep_until(t0 + 2.5)
        k = put_id(c, b"K", pri=1)            # expires at t0 + 5.5
        p.srv.signal(signal.SIGSTOP)
        try:
            sleep_until(t0 + 4.6)             # J's time and the unpause passed
        finally:
            p.srv.signal(signal.SIGCONT)
        line, body = w.read_reply(timeout=30)
        m = re.fullmatch(rb"RESERVED (\d+) 1", line)
        check(m is not None, "reply to reserve: %r" % line)
        got = int(m.group(1))
        check(got in (j, k), "reserved id %d (J=%d, K=%d)" % (got, j, k))
        # Exactly one reply: the next line must answer the next command.
        w.send(b"list-tube-used\r\n")
        eq(w.read_line(), b"USING default",
           "after one reserve answered RESERVED %d: a second reply was queued "
           "(the worker's next command is answered out of step)" % got)
        other = k if got == j else j
        check(job_where(c, other) is None or job_where(c, other)[1] != "reserved",
              "job %d is reserved too, though the worker sent one reserve: %r"
              % (other, job_where(c, other)))


@no_server
def test_expiry_in_paused_tube(binary):
    """Jobs of a paused tube expire too (pause stops handing out, not the
    clock)."""
    with Policy(binary, "[tube e]\nmax_age = 1s\n") as p:
        c = p.srv.client()
        c.use("e")
        c.expect("pause-tube e 3600", "PAUSED")
        j = put_id(c, b"j")
        _wait_gone(c, [j])
        eq(tube_counts(c, "e")[:5], (0, 0, 0, 0, 0), "stats-tube e")
