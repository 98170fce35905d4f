"""Time-based behaviour: delays, TTR expiry, DEADLINE_SOON, reserve timeouts,
pause-tube, touch.  Delays and TTRs are 1-3 s; assertions are about order and
state, with generous slack wherever time is involved."""

import time

from harness import check, eq, fail, slow, tubed_only, wait_until


def _elapsed(t0):
    return time.monotonic() - t0


@slow
def test_delayed_job_becomes_ready(srv):
    c = srv.client()
    t0 = time.monotonic()
    j = c.put(b"later", delay=1)
    eq(c.stats_job(j)["state"], "delayed", "state right after put")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    eq(c.reserve(timeout=10, read_timeout=10), (j, b"later"), "reserve waits for the delay")
    check(_elapsed(t0) >= 0.5, "delayed job reserved after only %.2fs" % _elapsed(t0))
    st = c.stats_job(j)
    eq((st["state"], st["delay"], st["reserves"]), ("reserved", "1", "1"),
       "state, delay, reserves")


@slow
def test_delayed_jobs_in_delay_order(srv):
    c = srv.client()
    j_long = c.put(b"long", delay=2)
    j_short = c.put(b"short", delay=1)
    eq(c.reserve(timeout=10, read_timeout=10)[0], j_short, "shorter delay first")
    eq(c.reserve(timeout=10, read_timeout=10)[0], j_long, "then the longer one")


@slow
def test_delayed_job_to_waiting_reserve_in_other_tube(srv):
    w = srv.client()
    w.watch("later")
    p = srv.client()
    p.use("later")
    w.send(b"reserve\r\n")
    j = p.put(b"x", delay=1)
    w.expect_silence(0.3)
    eq(w.read_reply(timeout=10), (b"RESERVED %d 1" % j, b"x"), "waiting reserve")


@slow
def test_ttr_expiry_back_to_ready(srv):
    w = srv.client()
    o = srv.client()
    j = o.put(b"work", ttr=1)
    eq(w.reserve()[0], j, "reserve")
    # Poll through the worker's own connection: 1.12 can miss the expiry
    # while the worker is idle (tubed-only tests below cover that).
    wait_until(lambda: w.stats_job(j)["state"] == "ready", timeout=6,
               what="job back to ready after its TTR")
    st = o.stats_job(j)
    eq((st["timeouts"], st["reserves"], st["releases"]), ("1", "1", "0"),
       "timeouts, reserves, releases")
    g = o.stats()
    eq((g["job-timeouts"], g["current-jobs-reserved"], g["current-jobs-ready"]),
       ("1", "0", "1"), "job-timeouts, reserved, ready")
    eq(o.reserve(0)[0], j, "another connection reserves it")
    # The first worker lost it.
    w.expect("delete %d" % j, "NOT_FOUND")
    w.expect("touch %d" % j, "NOT_FOUND")
    w.expect("release %d 0 0" % j, "NOT_FOUND")
    w.expect("bury %d 0" % j, "NOT_FOUND")
    o.expect("delete %d" % j, "DELETED")


@slow
def test_ttr_expiry_wakes_waiting_reserve(srv):
    # A second worker waiting in reserve gets the job when the first
    # worker's TTR ends.  The first worker keeps talking (1.12 can miss the
    # expiry while it is idle; see the tubed-only test).
    w1 = srv.client()
    w2 = srv.client()
    j = w1.put(b"job", ttr=1)
    eq(w1.reserve()[0], j, "first worker")
    w2.send(b"reserve\r\n")
    deadline = time.monotonic() + 8
    while not w2.has_data(0.2):
        if time.monotonic() > deadline:
            fail("waiting reserve got nothing 8s after a 1s TTR")
        w1.expect("list-tube-used", "USING default")
    eq(w2.read_reply(), (b"RESERVED %d 3" % j, b"job"), "second worker")
    st = w2.stats_job(j)
    eq((st["timeouts"], st["reserves"]), ("1", "2"), "timeouts, reserves")


@slow
@tubed_only("1.12 bug (compat-notes): TTR expiry missed while the worker is idle")
def test_ttr_expiry_wakes_waiting_reserve_worker_idle(srv):
    w1 = srv.client()
    w2 = srv.client()
    j = w1.put(b"job", ttr=1)
    eq(w1.reserve()[0], j, "first worker")
    w2.send(b"reserve\r\n")
    eq(w2.read_reply(timeout=6), (b"RESERVED %d 3" % j, b"job"), "second worker")
    st = w2.stats_job(j)
    eq((st["timeouts"], st["reserves"]), ("1", "2"), "timeouts, reserves")


@slow
def test_ttr_expiry_counts_each_time(srv):
    c = srv.client()
    j = c.put(b"x", ttr=1)
    eq(c.reserve()[0], j, "reserve 1")
    # Our own connection gets DEADLINE_SOON, then the job again after expiry.
    c.expect("reserve-with-timeout 5", "DEADLINE_SOON")
    wait_until(lambda: c.stats_job(j)["state"] == "ready", timeout=6,
               what="first expiry")
    eq(c.reserve(0)[0], j, "reserve 2")
    wait_until(lambda: c.stats_job(j)["state"] == "ready", timeout=6,
               what="second expiry")
    st = c.stats_job(j)
    eq((st["timeouts"], st["reserves"]), ("2", "2"), "timeouts, reserves")
    eq(c.stats()["job-timeouts"], "2", "job-timeouts")


def test_deadline_soon_on_issuing_reserve(srv):
    c = srv.client()
    j = c.put(b"x", ttr=1)   # TTR 1: the safety margin starts at once
    eq(c.reserve()[0], j, "reserve")
    c.expect("reserve", "DEADLINE_SOON")
    c.expect("reserve-with-timeout 0", "DEADLINE_SOON")
    c.expect("reserve-with-timeout 10", "DEADLINE_SOON")
    # The job is still ours to delete (or already timed out if we were slow).
    line = c.cmd("delete %d" % j)
    check(line in (b"DELETED", b"NOT_FOUND"), "delete: %r" % line)


def test_deadline_soon_not_when_job_ready(srv):
    c = srv.client()
    j1 = c.put(b"short", ttr=1)
    j2 = c.put(b"ready", ttr=100)
    eq(c.reserve()[0], j1, "reserve the short job")
    eq(c.reserve(), (j2, b"ready"), "a ready job wins over DEADLINE_SOON")
    c.expect("reserve-with-timeout 0", "DEADLINE_SOON")


def test_deadline_soon_only_for_own_jobs(srv):
    a = srv.client()
    b = srv.client()
    j = a.put(b"x", ttr=1)
    eq(a.reserve()[0], j, "a reserves")
    b.expect("reserve-with-timeout 0", "TIMED_OUT")


@slow
def test_deadline_soon_while_waiting(srv):
    c = srv.client()
    j = c.put(b"x", ttr=3)
    t0 = time.monotonic()
    eq(c.reserve()[0], j, "reserve")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    c.send(b"reserve\r\n")
    c.expect_lines([b"DEADLINE_SOON"], timeout=8)
    dt = _elapsed(t0)
    check(dt >= 1.0, "DEADLINE_SOON after only %.2fs of a 3s TTR" % dt)
    # Within the last second the job is still reserved.
    c.expect("reserve", "DEADLINE_SOON")
    c.expect("touch %d" % j, "TOUCHED")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    c.expect("delete %d" % j, "DELETED")


@slow
def test_deadline_soon_while_waiting_with_timeout(srv):
    c = srv.client()
    j = c.put(b"x", ttr=2)
    eq(c.reserve()[0], j, "reserve")
    c.send(b"reserve-with-timeout 30\r\n")
    c.expect_lines([b"DEADLINE_SOON"], timeout=8)
    c.expect("release %d 0 0" % j, "RELEASED")
    eq(c.reserve(0)[0], j, "reserve again")


@slow
def test_waiting_reserve_in_margin_gets_new_job(srv):
    c = srv.client()
    p = srv.client()
    j = c.put(b"held", ttr=3)
    eq(c.reserve()[0], j, "reserve")
    c.send(b"reserve\r\n")
    c.expect_silence(0.3)
    k = p.put(b"new")
    eq(c.read_reply(), (b"RESERVED %d 3" % k, b"new"), "waiting reserve gets the new job")


def test_reserve_with_timeout_zero_three_answers(srv):
    c = srv.client()
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    j = c.put(b"x", ttr=1)
    eq(c.reserve(0)[0], j, "a job")
    c.expect("reserve-with-timeout 0", "DEADLINE_SOON")


@slow
def test_reserve_with_timeout_positive(srv):
    c = srv.client()
    p = srv.client()
    t0 = time.monotonic()
    c.send(b"reserve-with-timeout 2\r\n")
    c.expect_lines([b"TIMED_OUT"], timeout=8)
    check(_elapsed(t0) >= 1.0, "TIMED_OUT after only %.2fs of 2" % _elapsed(t0))
    eq(c.stats()["current-waiting"], "0", "current-waiting after timeout")
    # A job that arrives in time is delivered.
    c.send(b"reserve-with-timeout 5\r\n")
    time.sleep(0.3)
    j = p.put(b"x")
    eq(c.read_reply(), (b"RESERVED %d 1" % j, b"x"), "job within the timeout")
    # A delayed job that becomes ready within the timeout is delivered too.
    k = p.put(b"y", delay=1)
    eq(c.reserve(timeout=5, read_timeout=8)[0], k, "delayed job within timeout")


@slow
def test_commands_queued_behind_waiting_reserve(srv):
    # Commands pipelined after a blocking reserve are answered after it.
    c = srv.client()
    c.send(b"reserve-with-timeout 1\r\nlist-tube-used\r\nuse x\r\n")
    c.expect_lines([b"TIMED_OUT", b"USING default", b"USING x"], timeout=8)


@slow
def test_pause_tube_delays_reserve(srv):
    c = srv.client()
    j = c.put(b"x")
    t0 = time.monotonic()
    c.expect("pause-tube default 1", "PAUSED")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    st = c.stats_tube("default")
    eq(st["pause"], "1", "pause")
    check(st["pause-time-left"] in ("0", "1"), "pause-time-left %r" % st["pause-time-left"])
    eq(c.reserve(timeout=10, read_timeout=10)[0], j, "reserved after the pause")
    check(_elapsed(t0) >= 0.5, "reserved %.2fs into a 1s pause" % _elapsed(t0))
    st = c.stats_tube("default")
    eq((st["pause"], st["pause-time-left"]), ("0", "0"), "pause after it ended")


@slow
def test_unpause_with_zero_wakes_waiting_reserve(srv):
    c = srv.client()
    w = srv.client()
    j = c.put(b"x")
    c.expect("pause-tube default 100", "PAUSED")
    w.send(b"reserve\r\n")
    w.expect_silence(0.3)
    eq(c.stats_tube("default")["current-waiting"], "1", "waiting")
    c.expect("pause-tube default 0", "PAUSED")
    eq(w.read_reply(timeout=3), (b"RESERVED %d 1" % j, b"x"), "reserve after unpause")


@slow
def test_job_put_into_paused_tube_waits(srv):
    c = srv.client()
    w = srv.client()
    c.expect("pause-tube default 1", "PAUSED")
    w.send(b"reserve\r\n")
    j = c.put(b"x")
    w.expect_silence(0.2)
    eq(w.read_reply(timeout=8), (b"RESERVED %d 1" % j, b"x"), "reserve after the pause")


@slow
def test_touch_extends_ttr(srv):
    c = srv.client()
    o = srv.client()
    j = c.put(b"x", ttr=3)
    eq(c.reserve()[0], j, "reserve")
    time.sleep(1.5)
    c.expect("touch %d" % j, "TOUCHED")
    tl = int(o.stats_job(j)["time-left"])
    check(tl >= 1, "time-left %d right after touch with TTR 3" % tl)
    time.sleep(2.0)   # 3.5 s after reserve: past the original deadline
    st = o.stats_job(j)
    eq((st["state"], st["timeouts"]), ("reserved", "0"), "state after original deadline")
    # Poll from the worker's own connection: 1.12 misses the expiry of a
    # touched job while the worker is idle (see the tubed-only test below).
    wait_until(lambda: c.stats_job(j)["state"] == "ready", timeout=6,
               what="expiry after the extended TTR")
    eq(o.stats_job(j)["timeouts"], "1", "timeouts")


@slow
@tubed_only("1.12 bug (compat-notes): TTR expiry missed while the worker is idle "
            "(after a touch, 1.12 never expires the job until the worker speaks)")
def test_ttr_expiry_after_touch_while_worker_idle(srv):
    c = srv.client()
    o = srv.client()
    j = c.put(b"x", ttr=1)
    eq(c.reserve()[0], j, "reserve")
    c.expect("touch %d" % j, "TOUCHED")
    o.send(b"reserve\r\n")
    eq(o.read_reply(timeout=6), (b"RESERVED %d 1" % j, b"x"), "waiter gets the job")
    eq(o.stats_job(j)["timeouts"], "1", "timeouts")


@slow
def test_release_with_delay(srv):
    c = srv.client()
    w = srv.client()
    j = c.put(b"x")
    eq(c.reserve(0)[0], j, "reserve")
    c.expect("release %d 0 1" % j, "RELEASED")
    eq(c.stats_job(j)["state"], "delayed", "state")
    w.send(b"reserve\r\n")
    eq(w.read_reply(timeout=8), (b"RESERVED %d 1" % j, b"x"), "after the release delay")


@slow
@tubed_only("1.12 bug (compat-notes): TTR expiry missed while the worker is idle")
def test_ttr_expiry_while_worker_idle(srv):
    # beanstalkd 1.12 leaves a job taken with reserve-job reserved, with a
    # negative time-left, until the worker's connection sends something.
    w = srv.client()
    o = srv.client()
    j = o.put(b"x", ttr=1)
    eq(w.cmd_body("reserve-job %d" % j)[0], b"RESERVED %d 1" % j, "reserve-job")
    time.sleep(2.5)
    st = o.stats_job(j)
    eq((st["state"], st["timeouts"], st["time-left"]), ("ready", "1", "0"),
       "state, timeouts, time-left 1.5s after the TTR ended")
    eq(o.stats()["job-timeouts"], "1", "job-timeouts")


@slow
@tubed_only("1.12 bug (compat-notes): TTR expiry missed while the worker is idle")
def test_ttr_expiry_after_reserve_job_wakes_waiter(srv):
    w = srv.client()
    o = srv.client()
    j = o.put(b"x", ttr=1)
    eq(w.cmd_body("reserve-job %d" % j)[0], b"RESERVED %d 1" % j, "reserve-job")
    o.send(b"reserve\r\n")
    eq(o.read_reply(timeout=6), (b"RESERVED %d 1" % j, b"x"), "waiter gets the job")
