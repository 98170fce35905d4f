"""Several connections: waiting reserves, closing and half-closing
connections, producer/worker/waiting counts, jobs reserved by others."""

import socket
import struct
import threading
import time

from harness import check, eq, fail, wait_until


def test_waiting_reserve_gets_job_from_other_connection(srv):
    w = srv.client()
    p = srv.client()
    w.send(b"reserve\r\n")
    w.expect_silence(0.3)
    wait_until(lambda: p.stats()["current-waiting"] == "1", what="current-waiting 1")
    j = p.put(b"hello")
    eq(w.read_reply(), (b"RESERVED %d 5" % j, b"hello"), "waiting reserve")
    eq(p.stats()["current-waiting"], "0", "current-waiting after")
    eq(p.stats_job(j)["state"], "reserved", "state")


def test_waiting_reserve_on_other_tube(srv):
    w = srv.client()
    w.watch("jobs")
    w.expect("ignore default", "WATCHING 1")
    p = srv.client()
    w.send(b"reserve\r\n")
    p.put(b"not for w")   # default tube
    w.expect_silence(0.3)
    p.use("jobs")
    j = p.put(b"for w")
    eq(w.read_reply(), (b"RESERVED %d 5" % j, b"for w"), "waiting reserve")


def test_one_job_two_waiters(srv):
    w1 = srv.client()
    w2 = srv.client()
    p = srv.client()
    w1.send(b"reserve-with-timeout 10\r\n")
    w2.send(b"reserve-with-timeout 10\r\n")
    wait_until(lambda: p.stats()["current-waiting"] == "2", what="two waiting")
    j = p.put(b"only")
    # Exactly one of them gets it; the other keeps waiting.
    got = None
    deadline = time.monotonic() + 5
    while got is None and time.monotonic() < deadline:
        for w in (w1, w2):
            if w.has_data(0.05):
                got = w
                break
    check(got is not None, "no waiter received the job")
    eq(got.read_reply(), (b"RESERVED %d 4" % j, b"only"), "reply")
    other = w2 if got is w1 else w1
    other.expect_silence(0.3)
    eq(p.stats()["current-waiting"], "1", "one still waiting")


def test_close_releases_reserved_jobs(srv):
    w = srv.client()
    o = srv.client()
    j1 = o.put(b"a", pri=5)
    j2 = o.put(b"b", pri=5)
    eq(w.reserve()[0], j1, "reserve 1")
    eq(w.reserve()[0], j2, "reserve 2")
    eq(o.stats()["current-jobs-reserved"], "2", "reserved")
    w.close()
    wait_until(lambda: o.stats()["current-jobs-reserved"] == "0",
               what="jobs released after close")
    for j in (j1, j2):
        st = o.stats_job(j)
        eq((st["state"], st["reserves"], st["timeouts"], st["releases"], st["pri"]),
           ("ready", "1", "0", "0", "5"), "job %d after its worker closed" % j)
    eq(o.stats()["job-timeouts"], "0", "job-timeouts")
    eq(o.reserve(0)[0], j1, "reserve after release, in order")
    eq(o.reserve(0)[0], j2, "reserve after release, in order")


def test_close_wakes_waiting_reserve(srv):
    w1 = srv.client()
    w2 = srv.client()
    j = w1.put(b"x")
    eq(w1.reserve()[0], j, "reserve")
    w2.send(b"reserve\r\n")
    w2.expect_silence(0.2)
    w1.close()
    eq(w2.read_reply(), (b"RESERVED %d 1" % j, b"x"), "waiter gets the released job")


def test_quit_releases_reserved_jobs(srv):
    w = srv.client()
    o = srv.client()
    j = o.put(b"x")
    eq(w.reserve()[0], j, "reserve")
    w.send(b"quit\r\n")
    w.expect_closed()
    wait_until(lambda: o.stats_job(j)["state"] == "ready", what="job released after quit")


def test_half_close_while_waiting_gets_timed_out(srv):
    w = srv.client()
    o = srv.client()
    w.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="waiting")
    w.shutdown_write()
    w.expect_lines([b"TIMED_OUT"])
    w.expect_closed()
    wait_until(lambda: o.stats()["current-waiting"] == "0", what="no longer waiting")
    # The server is fine and the job queue untouched.
    j = o.put(b"x")
    eq(o.reserve(0)[0], j, "reserve")


def test_half_close_with_timeout_reserve(srv):
    w = srv.client()
    o = srv.client()
    j = o.put(b"held", ttr=100)
    eq(w.reserve()[0], j, "reserve")
    w.send(b"reserve-with-timeout 100\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="waiting")
    w.shutdown_write()
    w.expect_lines([b"TIMED_OUT"])
    w.expect_closed()
    wait_until(lambda: o.stats_job(j)["state"] == "ready",
               what="held job released when the half-closed connection ends")


def test_half_close_after_commands_gets_replies(srv):
    c = srv.client()
    c.send(b"use t\r\nput 0 0 10 2\r\nhi\r\nlist-tube-used\r\n")
    c.shutdown_write()
    c.expect_lines([b"USING t", b"INSERTED 1", b"USING t"])
    c.expect_closed()
    o = srv.client()
    eq(o.peek("peek 1"), (1, b"hi"), "job survived the close")


def test_producer_worker_waiting_counts(srv):
    o = srv.client()
    p1 = srv.client()
    p2 = srv.client()
    w1 = srv.client()
    w2 = srv.client()
    p1.put(b"a")
    p2.put(b"b")
    p2.put(b"c")
    w1.reserve(0)
    w1.reserve(0)
    w2.send(b"reserve\r\n")
    w2.read_reply()
    w2.send(b"reserve\r\n")
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="waiting 1")
    st = o.stats()
    eq((st["current-producers"], st["current-workers"], st["current-waiting"],
        st["current-connections"]), ("2", "2", "1", "5"),
       "producers, workers, waiting, connections")
    eq(o.stats_tube("default")["current-waiting"], "1", "tube waiting")
    w2.close()
    p1.close()
    wait_until(lambda: o.stats()["current-connections"] == "3", what="connections 3")
    st = o.stats()
    eq((st["current-producers"], st["current-workers"], st["current-waiting"]),
       ("1", "1", "0"), "producers, workers, waiting after closes")
    eq(o.stats_tube("default")["current-waiting"], "0", "tube waiting")


def test_producer_and_worker_definitions(srv):
    # Producer: a put whose line parsed (even if the body then fails with
    # EXPECTED_CRLF); not a BAD_FORMAT or JOB_TOO_BIG put.  Worker: any
    # reserve command that ran, including reserve-job that found its job.
    o = srv.client()
    expect = {}

    def conn(name, fn):
        c = srv.client()
        fn(c)
        expect[name] = c

    conn("bad-put", lambda c: c.expect("put 0 0 1 x", "BAD_FORMAT"))
    conn("too-big", lambda c: c.expect_raw(b"put 0 0 1 70000\r\n" + b"z" * 70002,
                                           [b"JOB_TOO_BIG"]))
    st = o.stats()
    eq((st["current-producers"], st["current-workers"]), ("0", "0"),
       "producers, workers after BAD_FORMAT and JOB_TOO_BIG puts")
    conn("crlf", lambda c: c.expect_raw(b"put 0 0 1 2\r\nabcd", [b"EXPECTED_CRLF"]))
    eq(o.stats()["current-producers"], "1", "producers after an EXPECTED_CRLF put")
    conn("rj-missing", lambda c: eq(c.cmd_body("reserve-job 99")[0], b"NOT_FOUND",
                                    "reserve-job"))
    eq(o.stats()["current-workers"], "0", "workers after reserve-job NOT_FOUND")
    j = o.put(b"x")
    conn("rj", lambda c: eq(c.cmd_body("reserve-job %d" % j)[0], b"RESERVED %d 1" % j,
                            "reserve-job"))
    eq(o.stats()["current-workers"], "1", "workers after reserve-job")
    conn("rwt0", lambda c: c.expect("reserve-with-timeout 0", "TIMED_OUT"))
    st = o.stats()
    eq((st["current-producers"], st["current-workers"]), ("2", "2"),
       "producers (crlf, o), workers (reserve-job, rwt 0)")


def test_worker_counted_after_reserve_with_timeout(srv):
    w = srv.client()
    o = srv.client()
    w.expect("reserve-with-timeout 0", "TIMED_OUT")
    eq(o.stats()["current-workers"], "1", "worker after a TIMED_OUT reserve")


def test_reserved_by_other_connection(srv):
    a = srv.client()
    b = srv.client()
    j = a.put(b"mine", ttr=100)
    eq(a.reserve()[0], j, "a reserves")
    b.expect("delete %d" % j, "NOT_FOUND")
    b.expect("release %d 0 0" % j, "NOT_FOUND")
    b.expect("bury %d 0" % j, "NOT_FOUND")
    b.expect("touch %d" % j, "NOT_FOUND")
    b.expect("kick-job %d" % j, "NOT_FOUND")
    eq(b.cmd_body("reserve-job %d" % j), (b"NOT_FOUND", None), "reserve-job")
    eq(b.peek("peek %d" % j), (j, b"mine"), "peek still works")
    st = b.stats_job(j)
    eq((st["state"], st["releases"], st["buries"]), ("reserved", "0", "0"), "unchanged")
    a.expect("touch %d" % j, "TOUCHED")
    a.expect("bury %d 1" % j, "BURIED")
    # Once buried, anyone may delete it.
    b.expect("delete %d" % j, "DELETED")


def test_many_connections(srv):
    conns = [srv.client() for _ in range(100)]
    for i, c in enumerate(conns):
        c.send(b"put 0 0 10 %d\r\n%s\r\n" % (len(b"%d" % i), b"%d" % i))
    ids = set()
    for c in conns:
        line = c.read_line()
        check(line.startswith(b"INSERTED "), "put reply %r" % line)
        ids.add(int(line.split()[1]))
    eq(sorted(ids), list(range(1, 101)), "ids")
    o = srv.client()
    st = o.stats()
    eq((st["current-connections"], st["current-producers"], st["total-jobs"]),
       ("101", "100", "100"), "connections, producers, jobs")
    bodies = set()
    for c in conns:
        c.send(b"reserve-with-timeout 5\r\n")
    for c in conns:
        line, body = c.read_reply()
        check(line.startswith(b"RESERVED "), "reserve reply %r" % line)
        bodies.add(body)
    eq(len(bodies), 100, "distinct jobs reserved")
    for c in conns:
        c.close()
    wait_until(lambda: o.stats()["current-jobs-ready"] == "100",
               what="all jobs released after closing 100 connections")
    eq(o.stats()["current-connections"], "1", "connections after close")


def test_concurrent_producers(srv):
    n_threads, per = 8, 200
    errors = []

    def produce(k):
        try:
            c = srv.client()
            data = b"".join(b"put 0 0 10 4\r\n%04d\r\n" % (k * per + i) for i in range(per))
            c.send(data)
            for _ in range(per):
                line = c.read_line()
                if not line.startswith(b"INSERTED "):
                    errors.append(line)
        except Exception as e:   # noqa
            errors.append(repr(e))

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    eq(errors[:3], [], "producer errors")
    o = srv.client()
    eq(o.stats()["total-jobs"], str(n_threads * per), "total-jobs")
    eq(o.stats()["current-jobs-ready"], str(n_threads * per), "ready")


def test_client_disconnect_mid_body(srv):
    c = srv.client()
    c.send(b"put 0 0 10 100\r\n" + b"x" * 50)
    c.close()
    o = srv.client()
    wait_until(lambda: o.stats()["current-connections"] == "1", what="connection gone")
    eq(o.stats()["total-jobs"], "0", "no job from a half-sent put")
    # The put's line parsed, so it had taken id 1 already.
    eq(o.put(b"ok"), 2, "next id")


def test_client_disconnect_mid_line_and_with_reply_pending(srv):
    c = srv.client()
    c.send(b"list-tube-us")
    c.close()
    d = srv.client()
    d.use("x")
    body = b"y" * 60000
    d.put(body)
    # Ask for lots of output and go away without reading it.
    d.send(b"peek 1\r\n" * 200)
    d.close()
    o = srv.client()
    wait_until(lambda: o.stats()["current-connections"] == "1", what="connections gone")
    eq(o.peek("peek 1"), (1, body), "job intact")


def test_reset_connection(srv):
    # A client that resets its connection (RST) while waiting.
    c = srv.client()
    c.send(b"reserve\r\n")
    o = srv.client()
    wait_until(lambda: o.stats()["current-waiting"] == "1", what="waiting")
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.sock.close()
    wait_until(lambda: o.stats()["current-connections"] == "1", what="reset connection gone")
    eq(o.stats()["current-waiting"], "0", "waiting")
    j = o.put(b"x")
    eq(o.reserve(0)[0], j, "job not given to the dead connection")
