"""Timers compared with beanstalkd 1.12: what a client sees when deadlines
(TTRs, reserve timeouts, the DEADLINE_SOON margin, delays, pauses) fall in
one tick of the server, and the rounding of the seconds it reports.

A late tick is made deterministic by stopping the server (SIGSTOP, by pid)
while several deadlines pass and letting it go on (SIGCONT): the server then
finds them all due in one loop iteration, as a busy server would.  The
deadlines involved are at least half a second apart, so the assertions are
about order and outcome, never about how long anything took.

1.12 can miss the TTR expiry of a job whose worker is idle (compat-notes.md,
reference bugs) unless that worker's connection sent a command after its
reserve had been answered: the holders below send one (`_settle`), so the
tests pass on both servers (run.py --reference).
"""

import re
import signal
import time

from harness import check, eq, slow, tubed_only, wait_until


def _freeze(srv, seconds):
    """Stop the server for `seconds` (its timers fall due meanwhile)."""
    srv.signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        srv.signal(signal.SIGCONT)


def _settle(c):
    """An idle holder's TTR is scheduled on 1.12 once it sent something
    after its reserve was answered; tubed needs nothing."""
    time.sleep(0.2)
    c.expect("list-tube-used", "USING default")


def _state(c, j):
    st = c.stats_job(j)
    return st["state"], st["timeouts"]


@slow
def test_ttr_ending_before_wait_timeout_in_one_tick_gives_job(srv):
    """A job whose TTR ran out before a waiting reserve's timeout goes to
    that reserve even when both are found due in one late tick (old tubed
    ended every due wait first and answered TIMED_OUT, the job then lying
    ready with nobody waiting)."""
    o, h, w = srv.client(), srv.client(), srv.client()
    j = o.put(b"held", ttr=1)            # its TTR ends at ~1 s
    eq(h.reserve()[0], j, "holder reserves")
    _settle(h)
    w.send(b"reserve-with-timeout 2\r\n")  # its timeout at ~2.2 s
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 3.0)                    # both due when the server goes on
    eq(w.read_reply(timeout=10), (b"RESERVED %d 4" % j, b"held"),
       "the waiting reserve gets the job that timed out before its timeout")
    eq(_state(o, j), ("reserved", "1"), "state, timeouts")


@slow
def test_ttr_ending_before_other_workers_margin_in_one_tick(srv):
    """A worker waiting while it holds a job hears DEADLINE_SOON a second
    before that job's TTR; a job of another worker whose TTR ran out before
    that moment goes to it first, even in one late tick (old tubed answered
    DEADLINE_SOON and left the other job ready)."""
    o, h, w = srv.client(), srv.client(), srv.client()
    k = o.put(b"mine", ttr=4)            # w's margin from ~3 s
    eq(w.reserve()[0], k, "w reserves k")
    j = o.put(b"other", ttr=1)           # TTR ends at ~1 s
    eq(h.reserve()[0], j, "h reserves j")
    _settle(h)
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 3.0)                    # goes on at ~3.5 s, before k's TTR
    eq(w.read_reply(timeout=10), (b"RESERVED %d 5" % j, b"other"),
       "the job that timed out first, not DEADLINE_SOON")
    eq(_state(o, j), ("reserved", "1"), "j: state, timeouts")
    eq(_state(o, k)[0], "reserved", "k still w's")


@slow
def test_wait_timeout_before_ttr_in_one_tick_times_out(srv):
    """The other order: a reserve whose timeout came before the TTR of
    another worker's job is TIMED_OUT, and the job is ready afterwards."""
    o, h, w = srv.client(), srv.client(), srv.client()
    j = o.put(b"held", ttr=3)            # TTR ends at ~3 s
    eq(h.reserve()[0], j, "holder reserves")
    _settle(h)
    w.send(b"reserve-with-timeout 1\r\n")  # timeout at ~1.2 s
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 3.5)
    eq(w.read_line(timeout=10), b"TIMED_OUT", "the earlier timeout wins")
    wait_until(lambda: _state(o, j) == ("ready", "1"), what="j back to ready")


@slow
def test_delay_and_ttr_in_one_tick_job_delayed_first(srv):
    """Delays end before TTRs in a tick (as 1.12): a waiting worker gets
    the job whose delay ended, then the one that timed out, although the
    latter has the better priority and its deadline came first."""
    o, h, w = srv.client(), srv.client(), srv.client()
    y = o.put(b"Y", pri=0, ttr=1)
    eq(h.reserve()[0], y, "holder reserves Y")
    _settle(h)
    x = o.put(b"X", pri=10, delay=1)
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 2.0)
    eq(w.read_reply(timeout=10), (b"RESERVED %d 1" % x, b"X"), "delayed job first")
    eq(w.reserve(0), (y, b"Y"), "then the one that timed out")


@slow
def test_pause_end_and_ttr_in_one_tick_paused_job_first(srv):
    """Pauses end before TTRs in a tick (as 1.12): the paused tube's ready
    job goes to its waiter before a better job of that tube whose TTR ran
    out in the same tick."""
    o, h, w = srv.client(), srv.client(), srv.client()
    o.use("t")
    h.watch("t")
    w.watch("t")
    w.ignore("default")
    y = o.put(b"Y", pri=0, ttr=1)
    eq(h.reserve()[0], y, "holder reserves Y")
    _settle(h)
    x = o.put(b"X", pri=10)
    o.expect("pause-tube t 1", "PAUSED")
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 2.0)
    eq(w.read_reply(timeout=10), (b"RESERVED %d 1" % x, b"X"), "paused tube's job")
    eq(w.reserve(0), (y, b"Y"), "then the one that timed out")


@slow
def test_many_ttrs_in_one_tick_waiter_gets_first_expired(srv):
    """Several jobs of one worker time out in one tick: a waiting worker
    gets the one whose TTR ended first, the rest go ready in priority
    order."""
    o, h, w = srv.client(), srv.client(), srv.client()
    a = o.put(b"A", pri=10, ttr=3)
    b = o.put(b"B", pri=5, ttr=1)
    c = o.put(b"C", pri=0, ttr=2)
    eq([h.reserve()[0] for _ in range(3)], [c, b, a], "holder reserves all")
    _settle(h)
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 3.5)
    eq(w.read_reply(timeout=10), (b"RESERVED %d 1" % b, b"B"), "first to time out")
    eq(w.reserve(0)[0], c, "then by priority")
    eq(w.reserve(0)[0], a, "last")
    eq(o.stats()["job-timeouts"], "3", "job-timeouts")


@slow
@tubed_only("1.12 gives the job to the waiter and overwrites RESERVED with "
            "DEADLINE_SOON: the client never learns it holds the job")
def test_own_ttr_passing_while_stopped_deadline_soon_then_ready(srv):
    """A worker waiting in reserve while its own job's TTR passes in one
    late tick hears DEADLINE_SOON (its margin came first) and the job goes
    back to ready with a timeout counted; it is not silently reserved to
    the worker again (1.12's lost reply, doc/protocol.md)."""
    o, w = srv.client(), srv.client()
    j = o.put(b"J", ttr=2)
    eq(w.reserve()[0], j, "reserve")
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 3.0)
    eq(w.read_line(timeout=10), b"DEADLINE_SOON", "the margin first")
    eq(_state(o, j), ("ready", "1"), "state, timeouts")
    eq(w.reserve(0), (j, b"J"), "the worker may take it again")


def _watch_only(w, *tubes):
    for t in tubes:
        w.watch(t)
    w.ignore("default")


@slow
def test_pauses_ending_in_one_tick_best_job_first(srv):
    """Two tubes whose pauses end in one tick hand their waiter the best
    job across both, as 1.12's process_queue() does (old tubed served the
    tubes one after the other, in the order their pauses ended)."""
    o, w = srv.client(), srv.client()
    _watch_only(w, "p", "q")
    o.use("p")
    p = o.put(b"P", pri=10)
    o.use("q")
    q = o.put(b"Q", pri=0)
    o.expect("pause-tube p 1", "PAUSED")   # ends first...
    o.expect("pause-tube q 2", "PAUSED")   # ...but q's job is better
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 3.0)
    eq(w.read_reply(timeout=10), (b"RESERVED %d 1" % q, b"Q"), "best job first")
    eq(w.reserve(0), (p, b"P"), "then the other")


@slow
def test_pauses_ending_in_one_tick_two_waiters(srv):
    """The same with a waiter per tube and one watching both: every
    waiter is served, the best jobs first."""
    o, wp, wq = srv.client(), srv.client(), srv.client()
    _watch_only(wp, "p")
    _watch_only(wq, "q")
    o.use("p")
    p1 = o.put(b"p1", pri=10)
    o.use("q")
    q1 = o.put(b"q1", pri=0)
    o.expect("pause-tube p 1", "PAUSED")
    o.expect("pause-tube q 2", "PAUSED")
    wp.send(b"reserve\r\n")
    wq.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "2", what="both wait")
    _freeze(srv, 3.0)
    eq(wp.read_reply(timeout=10)[0], b"RESERVED %d 2" % p1, "p's waiter")
    eq(wq.read_reply(timeout=10)[0], b"RESERVED %d 2" % q1, "q's waiter")


def _delay_and_pause_in_one_tick(srv, delayed_pri):
    """X (pri 10) in a tube paused for 1 s, D (delayed_pri) delayed 1 s in
    another, one worker waiting on both, the server stopped across both
    ends: the order the worker gets them in, as [(id, body), ...]."""
    o, w = srv.client(), srv.client()
    _watch_only(w, "t1", "t2")
    o.use("t1")
    o.put(b"X", pri=10)
    o.expect("pause-tube t1 1", "PAUSED")
    o.use("t2")
    o.put(b"D", pri=delayed_pri, delay=1)
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w waits")
    _freeze(srv, 2.5)
    line, body = w.read_reply(timeout=10)
    check(line.startswith(b"RESERVED "), "first reply: %r" % line)
    return [body, w.reserve(0)[1]]


@slow
def test_delay_and_pause_ending_in_one_tick_best_job_first(srv):
    """A delay and a pause ending in one tick: the paused tube's job and
    the delayed one go out by priority (1.12 unpauses every tube due at
    the first hand-out of the tick; old tubed gave the delayed job first
    whatever its priority)."""
    eq(_delay_and_pause_in_one_tick(srv, 20), [b"X", b"D"], "the better job, then the delayed one")


@slow
def test_delay_and_pause_ending_in_one_tick_delayed_job_better(srv):
    """The converse: the delayed job is the better one and goes first."""
    eq(_delay_and_pause_in_one_tick(srv, 0), [b"D", b"X"], "the better job, then the paused tube's")


@slow
def test_later_delays_in_one_tick_go_out_as_they_end(srv):
    """Delays ending in one tick still go out in the order they ended, one
    by one (the first to a waiter although a later one is better), also
    when a pause ends in that tick."""
    o, w1, w2 = srv.client(), srv.client(), srv.client()
    _watch_only(w1, "d", "p")
    o.use("d")
    d1 = o.put(b"d1", pri=20, delay=1)
    d2 = o.put(b"d2", pri=0, delay=2)
    o.use("p")
    o.expect("pause-tube p 1", "PAUSED")   # nothing in it
    w1.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w1 waits")
    _watch_only(w2, "d")
    w2.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "2", what="w2 waits")
    _freeze(srv, 3.0)
    eq(w1.read_reply(timeout=10)[0], b"RESERVED %d 2" % d1, "w1: the first to end")
    eq(w2.read_reply(timeout=10)[0], b"RESERVED %d 2" % d2, "w2: the second")


@slow
def test_ttrs_of_two_workers_in_one_tick_come_back_by_worker(srv):
    """Jobs of two workers whose TTRs all passed in one late tick come back
    worker by worker, as 1.12 ticks a connection once for all its jobs: h1's
    (TTRs at 1 s and 3 s) before h2's (2 s), so three waiters get A, C, B
    in the order beanstalkd serves them (old tubed: A, B, C)."""
    o, h1, h2 = srv.client(), srv.client(), srv.client()
    ws = [srv.client() for _ in range(3)]
    a = o.put(b"A", pri=5, ttr=1)
    c = o.put(b"C", pri=5, ttr=3)
    b = o.put(b"B", pri=5, ttr=2)
    eq([h1.reserve()[0] for _ in range(2)], [a, c], "h1 reserves A, C")
    _settle(h1)
    eq(h2.reserve()[0], b, "h2 reserves B")
    _settle(h2)
    for i, w in enumerate(ws):
        w.send(b"reserve\r\n")
        wait_until(lambda: o.stats()["current-waiting"] == str(i + 1),
                   what="%d waiting" % (i + 1))
    _freeze(srv, 4.0)
    got = [w.read_reply(timeout=10)[0] for w in ws]
    # The cursor of 1.12's waiting set serves the second waiter first, then
    # the first, then the third (doc/protocol.md).
    eq(got, [b"RESERVED %d 1" % c, b"RESERVED %d 1" % a, b"RESERVED %d 1" % b],
       "who got which")
    eq(o.stats()["job-timeouts"], "3", "job-timeouts")


@slow
def test_ttr_between_two_wait_timeouts_in_one_tick(srv):
    """Two waiters whose timeouts (1 s and 3 s) fall on either side of a
    TTR (2 s), all found due in one late tick: the first times out, the
    second gets the job (old tubed: both TIMED_OUT, the job left ready)."""
    o, h, w1, w2 = srv.client(), srv.client(), srv.client(), srv.client()
    j = o.put(b"J", ttr=2)
    eq(h.reserve()[0], j, "holder reserves")
    _settle(h)
    w1.send(b"reserve-with-timeout 1\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w1 waits")
    w2.send(b"reserve-with-timeout 3\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "2", what="w2 waits")
    _freeze(srv, 4.0)
    eq(w1.read_line(timeout=10), b"TIMED_OUT", "w1's timeout came first")
    eq(w2.read_reply(timeout=10), (b"RESERVED %d 1" % j, b"J"), "w2 gets the job")


@slow
def test_delay_ending_after_wait_timeout_in_one_tick_still_served(srv):
    """Delays end before waits in a tick (as 1.12): a reserve whose timeout
    passed before the delay ended still gets the job when both are found
    due in one late tick; a second waiter times out."""
    o, w1, w2 = srv.client(), srv.client(), srv.client()
    d = o.put(b"D", delay=2)
    w1.send(b"reserve-with-timeout 1\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="w1 waits")
    w2.send(b"reserve-with-timeout 3\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "2", what="w2 waits")
    _freeze(srv, 4.0)
    eq(w1.read_reply(timeout=10), (b"RESERVED %d 1" % d, b"D"), "w1 served first")
    eq(w2.read_line(timeout=10), b"TIMED_OUT", "w2")
