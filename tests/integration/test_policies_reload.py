"""Tube policies at reload (SIGHUP): new settings apply at once to every
job, a bad file leaves the old config in force, reloads under load.

Every test starts its own server with its own config file (rewritten
atomically before each SIGHUP) and waits for the server's log line of the
reload before it looks.
"""

import os
import re
import threading
import time

from harness import TestFailure, check, eq, no_server, unq
from policy_util import (Policy, job_stats, job_where, present, put_id,
                         put_line, reserve_job, sleep_until, tube_counts,
                         wait_for)


@no_server
def test_reload_lowering_max_age_expires_at_once(binary):
    """Jobs already queued take the new max_age: those older than it
    expire at once (ready, delayed, buried), others stay."""
    with Policy(binary, "[tube other]\nmax_items = 10\n") as p:
        c = p.srv.client()
        c.use("e")
        c.watch("e")
        r = put_id(c, b"r")
        d = put_id(c, b"d", delay=3600)
        b = put_id(c, b"b")
        reserve_job(c, b)
        c.expect("bury %d 0" % b, "BURIED")
        c.use("f")
        f = put_id(c, b"f")
        wait_for(lambda: int(job_stats(c, r)["age"]) >= 3, "the jobs to be 3 s old")
        p.rewrite("[tube e]\nmax_age = 1s\n")
        p.reload()
        for j in (r, d, b):
            eq(present(c, j), False, "job %d right after max_age = 1s was loaded" % j)
        eq(tube_counts(c, "e")[:5], (0, 0, 0, 0, 0), "stats-tube e after the reload")
        eq(job_where(c, f), ("f", "ready"), "a job of a tube the change does not name")


@no_server
def test_reload_raising_max_age_keeps_jobs(binary):
    with Policy(binary, "[tube e]\nmax_age = 5s\n") as p:
        c = p.srv.client()
        c.use("e")
        t = time.monotonic()
        j = put_id(c, b"j")
        p.rewrite("[tube e]\nmax_age = 1h\n")
        p.reload()
        sleep_until(t + 6.0)
        eq(job_where(c, j), ("e", "ready"), "job 6 s after max_age went from 5s to 1h")


@no_server
def test_reload_max_age_reaches_reserved_jobs(binary):
    """A job reserved when max_age is given to its tube expires when it
    comes back if it is past the new time."""
    with Policy(binary, "[tube x]\nmax_items = 5\n") as p:
        c = p.srv.client()
        c.use("e")
        c.watch("e")
        j = put_id(c, b"j", ttr=3600)
        reserve_job(c, j)
        wait_for(lambda: int(job_stats(c, j)["age"]) >= 2, "the job to be 2 s old")
        p.rewrite("[tube e]\nmax_age = 1s\n")
        p.reload()
        eq(job_where(c, j), ("e", "reserved"), "still reserved after the reload")
        c.expect("release %d 0 0" % j, "RELEASED")
        eq(present(c, j), False, "the job, released past its new max_age")


@no_server
def test_reload_raising_max_items_admits_more(binary):
    with Policy(binary, "[tube lim]\nmax_items = 1\n") as p:
        c = p.srv.client()
        c.use("lim")
        put_id(c, b"1")
        eq(put_line(c, b"2"), b"OUT_OF_MEMORY", "full at max_items = 1")
        p.rewrite("[tube lim]\nmax_items = 3\n")
        p.reload()
        put_id(c, b"2")
        put_id(c, b"3")
        eq(put_line(c, b"4"), b"OUT_OF_MEMORY", "full at max_items = 3")
        # A new prefix section reaches an existing tube too.
        p.rewrite("[tube lim]\nmax_items = 3\n[tube l*]\nmax_item_size = 2\n")
        p.reload()
        c.expect("delete 1", "DELETED")
        eq(put_line(c, b"abc"), b"JOB_TOO_BIG", "max_item_size from a new [tube l*]")
        # A section removed: back to the defaults.
        p.rewrite("")
        p.reload()
        for i in range(5):
            put_id(c, b"abc%d" % i)


@no_server
def test_reload_bad_file_keeps_old_config(binary):
    with Policy(binary, "[tube lim]\nmax_items = 1\n") as p:
        c = p.srv.client()
        c.use("lim")
        put_id(c, b"1")
        for bad, what in (("[tube lim]\nmax_items = 5\nbogus = 1\n", ":3: unknown key 'bogus'"),
                          ("[tube lim]\nmax_items = x\n", ":2: bad value for max_items"),
                          (None, ": cannot read: ")):
            if bad is None:
                os.unlink(p.path)
            else:
                p.rewrite(bad)
            line = p.reload(expect_ok=False)
            check(p.path + what in line, "reload log line: expected %r, got %r"
                  % (p.path + what, line))
            check("old configuration stays in force" in line or "error" in line,
                  "reload log line %r" % line)
            check(p.srv.alive(), "server died on a bad reload")
            eq(put_line(c, b"2"), b"OUT_OF_MEMORY", "the old max_items = 1 after a bad reload")
        p.rewrite("[tube lim]\nmax_items = 2\n")
        p.reload()
        put_id(c, b"2")
        eq(put_line(c, b"3"), b"OUT_OF_MEMORY", "the good file's max_items = 2")


@no_server
def test_reload_under_load(binary):
    """A producer puts in a loop and a consumer reserves and deletes while
    the file changes and SIGHUP comes again and again: no error reply, no
    crash, every acknowledged job accounted for."""
    confs = [
        "[tube load-*]\nmax_items = 1000000\nmax_age = 1h\nfanout = true\n",
        "[tube load-*]\nmax_items = 2000000\nmax_age = 2h\nmax_item_size = 1K\n"
        "[tube load-a]\nmax_timeouts = 3\n",
        "max_age = 3h\n[tube load-b*]\ndiscard_old_when_full = true\nmax_size = 64M\n",
    ]
    with Policy(binary, confs[0]) as p:
        stop = threading.Event()
        errors = []
        counts = {"put": 0, "del": 0}

        def producer():
            try:
                c = p.srv.client(timeout=30)
                c.use("load-a+copy")
                i = 0
                while not stop.is_set():
                    tube = "load-a" if i % 2 else "load-b"
                    c.use(tube)
                    batch = b"".join(b"put %d 0 60 8\r\n%08d\r\n" % (i % 7, i + k)
                                     for k in range(20))
                    c.send(batch)
                    for _ in range(20):
                        line = c.read_line(timeout=30)
                        if not line.startswith(b"INSERTED "):
                            raise TestFailure("put during reloads: %r" % line)
                        counts["put"] += 1
                    i += 20
            except Exception as e:
                errors.append("producer: %s" % e)

        def consumer():
            try:
                c = p.srv.client(timeout=30)
                c.watch("load-a")
                c.watch("load-b")
                c.ignore("default")
                while not stop.is_set():
                    line, body = c.cmd_body("reserve-with-timeout 1", timeout=30)
                    if line == b"TIMED_OUT":
                        continue
                    m = re.fullmatch(rb"RESERVED (\d+) 8", line)
                    if not m:
                        raise TestFailure("reserve during reloads: %r" % line)
                    c.expect("delete %s" % m.group(1).decode(), "DELETED", timeout=30)
                    counts["del"] += 1
            except Exception as e:
                errors.append("consumer: %s" % e)

        threads = [threading.Thread(target=producer, daemon=True),
                   threading.Thread(target=consumer, daemon=True)]
        for t in threads:
            t.start()
        try:
            wait_for(lambda: counts["put"] >= 100 or errors, "the producer to start")
            for k in range(12):
                p.rewrite(confs[(k + 1) % len(confs)])
                p.reload()
                if errors:
                    break
                before = counts["put"]
                wait_for(lambda: counts["put"] > before or errors,
                         "puts to go on after reload %d" % (k + 1))
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        check(not any(t.is_alive() for t in threads), "a client thread did not finish")
        check(not errors, "; ".join(errors))
        check(p.srv.alive(), "server died under reloads")
        c = p.srv.client()
        st = c.stats()
        left = sum(int(st[k]) for k in ("current-jobs-ready", "current-jobs-reserved",
                                        "current-jobs-delayed", "current-jobs-buried"))
        copies = sum(tube_counts(c, "load-a+copy")[1:5])
        eq(left, counts["put"] - counts["del"] + copies,
           "jobs left = acknowledged puts - deletes + fanout copies")
