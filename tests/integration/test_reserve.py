"""reserve, reserve-with-timeout, reserve-job: selection order and replies."""

import math
import time

from harness import check, eq, fail, tubed_only, unq, wait_until


def test_reserve_priority_then_fifo(srv):
    c = srv.client()
    ids = {}
    for name, pri in [("a", 5), ("b", 1), ("c", 5), ("d", 0), ("e", 1),
                      ("f", 4294967295), ("g", 0)]:
        ids[name] = c.put(name.encode(), pri=pri)
    got = [c.reserve(0)[1].decode() for _ in range(7)]
    eq(got, ["d", "g", "b", "e", "a", "c", "f"], "reserve order")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")


def test_reserve_reply_exact_bytes(srv):
    c = srv.client()
    c.put(b"ab\r\ncd", pri=3)
    c.send(b"reserve\r\n")
    eq(c.read_exact(len(b"RESERVED 1 6\r\nab\r\ncd\r\n")),
       b"RESERVED 1 6\r\nab\r\ncd\r\n", "raw reserve reply")


def test_reserve_across_watched_tubes_by_priority(srv):
    p = srv.client()
    p.use("t1")
    j1 = p.put(b"t1-pri5", pri=5)
    p.use("t2")
    j2 = p.put(b"t2-pri1", pri=1)
    j3 = p.put(b"t2-pri5", pri=5)
    p.use("t3")
    p.put(b"t3-unwatched", pri=0)
    w = srv.client()
    w.watch("t1")
    w.watch("t2")
    eq(w.reserve(0)[0], j2, "lowest priority across watched tubes")
    eq(w.reserve(0)[0], j1, "then same priority, lower id first")
    eq(w.reserve(0)[0], j3, "then the last one")
    w.expect("reserve-with-timeout 0", "TIMED_OUT")


def test_reserve_only_watched_tubes(srv):
    c = srv.client()
    c.use("elsewhere")
    jid = c.put(b"x")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    c.watch("elsewhere")
    c.expect("ignore default", "WATCHING 1")
    eq(c.reserve(0)[0], jid, "reserve from watched tube")


def test_reserve_not_delayed_or_buried(srv):
    c = srv.client()
    c.put(b"later", delay=100)
    j = c.put(b"b")
    eq(c.reserve(0)[0], j, "ready job")
    c.expect("bury %d 0" % j, "BURIED")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")


def test_reserve_state_and_counters(srv):
    c = srv.client()
    jid = c.put(b"x", ttr=100)
    t0 = time.monotonic()
    c.reserve()
    st = c.stats_job(jid)
    # The TTR runs from the reserve: by stats-job it lost at most the
    # seconds in between (rounded up), and a second more to truncation.
    slack = int(math.ceil(time.monotonic() - t0))
    eq(st["state"], "reserved", "state")
    eq(st["reserves"], "1", "reserves")
    check(99 - slack <= int(st["time-left"]) <= 100, "time-left %r not ~100 (%d s "
          "between the reserve and stats-job)" % (st["time-left"], slack))
    s = c.stats()
    eq(s["current-jobs-reserved"], "1", "current-jobs-reserved")
    eq(s["current-jobs-ready"], "0", "current-jobs-ready")
    eq(s["cmd-reserve"], "1", "cmd-reserve")
    eq(s["cmd-reserve-with-timeout"], "0", "cmd-reserve-with-timeout")
    eq(s["current-workers"], "1", "current-workers")
    eq(c.stats_tube("default")["current-jobs-reserved"], "1", "tube reserved")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    s = c.stats()
    eq(s["cmd-reserve"], "1", "cmd-reserve after rwt")
    eq(s["cmd-reserve-with-timeout"], "1", "cmd-reserve-with-timeout")


def test_reserve_with_timeout_zero(srv):
    c = srv.client()
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    jid = c.put(b"x")
    eq(c.reserve(0), (jid, b"x"), "rwt 0 with a ready job")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")


def test_reserve_with_timeout_times_out(srv):
    c = srv.client()
    t0 = time.monotonic()
    c.send(b"reserve-with-timeout 1\r\n")
    c.expect_lines([b"TIMED_OUT"], timeout=5)
    dt = time.monotonic() - t0
    check(dt >= 0.5, "reserve-with-timeout 1 answered after only %.2fs" % dt)
    c.expect("list-tube-used", "USING default")


def test_reserve_with_timeout_gets_job_while_waiting(srv):
    w = srv.client()
    p = srv.client()
    w.send(b"reserve-with-timeout 10\r\n")
    w.expect_silence(0.2)
    jid = p.put(b"late")
    eq(w.read_reply(), (b"RESERVED %d 4" % jid, b"late"), "waiting rwt")


def test_reserve_with_timeout_large_values(srv):
    c = srv.client()
    jid = c.put(b"x")
    eq(c.reserve(4294967295)[0], jid, "rwt 4294967295 with a job")
    c.expect("release %d 0 0" % jid, "RELEASED")
    c.expect_raw(b"reserve-with-timeout 000\r\n", [b"RESERVED %d 1" % jid])
    c.read_exact(3)


def test_reserve_with_timeout_fraction(srv):
    # JavaScript clients and Ruby's beaneater print a fractional timeout as
    # "2.5"; 1.12 waits its whole seconds. tubed used to answer BAD_FORMAT,
    # so a worker polling with reserveWithTimeout(0.5) spun on errors.
    w = srv.client()
    p = srv.client()
    w.expect("reserve-with-timeout 0.5", "TIMED_OUT")
    jid = p.put(b"ready")
    w.send(b"reserve-with-timeout 0.25\r\n")
    eq(w.read_reply(), (b"RESERVED %d 5" % jid, b"ready"), "rwt 0.25 with a ready job")
    w.expect("delete %d" % jid, "DELETED")
    w.send(b"reserve-with-timeout 10.75\r\n")
    w.expect_silence(0.2)
    jid = p.put(b"late")
    eq(w.read_reply(), (b"RESERVED %d 4" % jid, b"late"), "waiting rwt 10.75")
    eq(p.stats()["cmd-reserve-with-timeout"], "3", "each one counted")


@tubed_only("documented: only digits '.' digits; 1.12 also takes 1., .5, 0.5x")
def test_reserve_with_timeout_fraction_junk(srv):
    c = srv.client()
    c.put(b"x")
    for arg in ("1.", ".5", "0.5x", "0.5 ", "-0.5", "0.5.5", "0..5", "4294967296.0"):
        c.expect("reserve-with-timeout " + arg, "BAD_FORMAT")
    eq(c.stats_job(1)["state"], "ready", "job not reserved")


@tubed_only("1.13: a negative timeout is BAD_FORMAT (1.12 waits forever)")
def test_reserve_with_timeout_negative_bad_format(srv):
    c = srv.client()
    c.put(b"x")
    c.expect("reserve-with-timeout -1", "BAD_FORMAT")
    c.expect("reserve-with-timeout -0", "BAD_FORMAT")
    eq(c.stats_job(1)["state"], "ready", "job not reserved")


def test_reserve_job_states(srv):
    c = srv.client()
    ready = c.put(b"ready")
    delayed = c.put(b"delayed", delay=100)
    c.use("other")
    other = c.put(b"other-tube")
    buried = c.put(b"to-bury")
    c.use("default")
    eq(c.cmd_body("reserve-job %d" % buried), (b"RESERVED %d 7" % buried, b"to-bury"),
       "reserve-job of a ready job in an unwatched tube")
    c.expect("bury %d 0" % buried, "BURIED")
    for jid, body in [(ready, b"ready"), (delayed, b"delayed"),
                      (other, b"other-tube"), (buried, b"to-bury")]:
        eq(c.cmd_body("reserve-job %d" % jid),
           (b"RESERVED %d %d" % (jid, len(body)), body), "reserve-job %d" % jid)
        eq(c.stats_job(jid)["state"], "reserved", "state of %d" % jid)
    st = c.stats()
    eq(st["current-jobs-reserved"], "4", "reserved count")
    eq(st["current-jobs-delayed"], "0", "delayed count")
    eq(st["current-jobs-buried"], "0", "buried count")
    eq(st["current-jobs-ready"], "0", "ready count")
    # Already reserved (by us): NOT_FOUND.
    eq(c.cmd_body("reserve-job %d" % ready), (b"NOT_FOUND", None), "reserve-job twice")
    eq(c.cmd_body("reserve-job 999"), (b"NOT_FOUND", None), "reserve-job unknown id")
    eq(c.cmd_body("reserve-job 0"), (b"NOT_FOUND", None), "reserve-job 0")
    # Reserved by another connection: NOT_FOUND.
    d = srv.client()
    eq(d.cmd_body("reserve-job %d" % ready), (b"NOT_FOUND", None),
       "reserve-job of a job reserved by another connection")
    eq(c.stats_job(delayed)["reserves"], "1", "reserves")
    c.expect("release %d 0 0" % delayed, "RELEASED")
    eq(c.stats_job(delayed)["state"], "ready", "released job")


def test_reserve_job_never_deadline_soon(srv):
    c = srv.client()
    j1 = c.put(b"short", ttr=1)
    j2 = c.put(b"next", ttr=100)
    eq(c.reserve()[0], j1, "first reserve")
    # We now hold a job within its last second: plain reserve would be
    # DEADLINE_SOON, but reserve-job is not.
    eq(c.cmd_body("reserve-job %d" % j2), (b"RESERVED %d 4" % j2, b"next"),
       "reserve-job inside the safety margin")


def test_reserve_job_does_not_count_commands(srv):
    # beanstalkd 1.12 counts reserve-job and kick-job in no cmd-* counter.
    c = srv.client()
    jid = c.put(b"x")
    before = {k: v for k, v in c.stats().items() if k.startswith("cmd-")}
    c.cmd_body("reserve-job %d" % jid)
    c.expect("bury %d 0" % jid, "BURIED")
    c.expect("kick-job %d" % jid, "KICKED")
    c.cmd_body("reserve-job 12345")
    c.expect("kick-job 12345", "NOT_FOUND")
    after = {k: v for k, v in c.stats().items() if k.startswith("cmd-")}
    before["cmd-stats"] = str(int(before["cmd-stats"]) + 1)
    before["cmd-bury"] = str(int(before["cmd-bury"]) + 1)
    diff = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    eq(diff, {}, "cmd-* counters changed by reserve-job/kick-job (before, after)")


def test_reserve_after_release_uses_new_priority(srv):
    c = srv.client()
    a = c.put(b"a", pri=10)
    b = c.put(b"b", pri=20)
    eq(c.reserve(0)[0], a, "first")
    c.expect("release %d 30 0" % a, "RELEASED")
    eq(c.reserve(0)[0], b, "b now comes first")
    eq(c.reserve(0)[0], a, "then a")
    eq(c.stats_job(a)["pri"], "30", "new pri")


def test_reserve_waiting_is_fifo_by_connection(srv):
    # Two connections wait; two jobs arrive; each connection gets one job.
    w1 = srv.client()
    w2 = srv.client()
    p = srv.client()
    w1.send(b"reserve\r\n")
    w2.send(b"reserve\r\n")
    wait_until(lambda: p.stats()["current-waiting"] == "2", what="current-waiting 2")
    j1 = p.put(b"one")
    j2 = p.put(b"two")
    r1 = w1.read_reply()
    r2 = w2.read_reply()
    eq(sorted([r1, r2]), [(b"RESERVED %d 3" % j1, b"one"), (b"RESERVED %d 3" % j2, b"two")],
       "each waiter got one job")
    eq(p.stats()["current-waiting"], "0", "current-waiting after")


def test_reserve_body_exact(srv):
    c = srv.client()
    body = bytes(range(256)) * 4
    jid = c.put(body)
    eq(c.reserve(0), (jid, body), "binary body")
