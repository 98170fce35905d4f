"""max_age's age ring (src/engine/agering.h): jobs put into a tube with
max_age and no client expiry wait for it in put order, in a ring that
keeps stale entries of deleted jobs until it passes them or compacts.
These tests walk the paths where a job leaves that ring or never joins it
(deletes in bulk, reserve at the time, reloads, flush-tube, restart) and
check that every job still expires when it should, and only then.

Durations are a few seconds; every wait polls with a generous deadline.
"""

import time

from harness import eq, no_server
from policy_util import (Policy, job_where, present, put_id, reserve_job,
                         sleep_until, tube_counter, wait_for)


def _expired(c, tube):
    return int(tube_counter(c, tube, "total-expired"))


def _pipelined_puts(c, n, body=b"x"):
    """n puts sent at once; their ids, in order."""
    c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body) * n)
    ids = []
    for _ in range(n):
        line = c.read_line()
        eq(line[:9], b"INSERTED ", "reply to a pipelined put")
        ids.append(int(line[9:]))
    return ids


def _pipelined_deletes(c, ids):
    c.send(b"".join(b"delete %d\r\n" % j for j in ids))
    for _ in ids:
        eq(c.read_line(), b"DELETED", "reply to a pipelined delete")


@no_server
def test_age_ring_churn_keeps_survivors(binary):
    """Thousands of jobs deleted around a few that stay (the ring compacts
    their stale entries as puts go on): the survivors expire on time, in
    put order, and nothing deleted comes back."""
    with Policy(binary, "[tube e]\nmax_age = 3s\n") as p:
        c = p.srv.client()
        c.use("e")
        t0 = time.monotonic()
        ids = _pipelined_puts(c, 3000)
        keep = [ids[0], ids[1500], ids[-1]]
        _pipelined_deletes(c, [j for j in ids if j not in keep])
        more = _pipelined_puts(c, 2000)
        _pipelined_deletes(c, more[:-1])
        keep.append(more[-1])
        for j in keep:
            eq(job_where(c, j), ("e", "ready"), "job %d before its max_age" % j)
        for j in (ids[1], ids[2999 - 1], more[0]):
            eq(present(c, j), False, "deleted job %d" % j)
        sleep_until(t0 + 3.5)
        wait_for(lambda: _expired(c, "e") == 4, "the 4 survivors to expire")
        for j in keep:
            eq(present(c, j), False, "job %d past its max_age" % j)
        eq(_expired(c, "e"), 4, "total-expired: the survivors, no deleted job")


@no_server
def test_age_ring_reserved_at_its_time(binary):
    """A job reserved when its time comes stays with its worker, and
    expires when released; the job put after it expires on time."""
    with Policy(binary, "[tube e]\nmax_age = 2s\n") as p:
        c = p.srv.client()
        c.use("e")
        c.watch("e")
        t0 = time.monotonic()
        a = put_id(c, b"a", ttr=3600)
        b = put_id(c, b"b")
        reserve_job(c, a)
        sleep_until(t0 + 2.5)
        wait_for(lambda: not present(c, b), "job b to expire")
        eq(job_where(c, a), ("e", "reserved"), "the reserved job past its time")
        c.expect("release %d 0 0" % a, "RELEASED")
        eq(present(c, a), False, "the job, released past its max_age")
        eq(_expired(c, "e"), 2, "total-expired")


@no_server
def test_age_ring_reload_changes_and_removes_max_age(binary):
    """Jobs in the ring follow a lower max_age at once; with max_age gone
    they stay; given one again they expire by it."""
    with Policy(binary, "[tube e]\nmax_age = 1h\n") as p:
        c = p.srv.client()
        c.use("e")
        t0 = time.monotonic()
        old = put_id(c, b"old")
        sleep_until(t0 + 1.5)
        young = put_id(c, b"young")
        p.rewrite("[tube e]\nmax_age = 1s\n")
        p.reload()
        wait_for(lambda: not present(c, old), "the old job to expire under max_age = 1s")
        eq(_expired(c, "e"), 1, "total-expired right after the reload")
        # young is younger than 1 s at the reload (give or take): either way
        # it is gone within another second or so.
        wait_for(lambda: not present(c, young), "the young job to expire")
        kept = put_id(c, b"kept")
        p.rewrite("[tube other]\nmax_items = 5\n")
        p.reload()
        t1 = time.monotonic()
        sleep_until(t1 + 2.0)
        eq(job_where(c, kept), ("e", "ready"), "job 2 s after max_age was removed")
        p.rewrite("[tube e]\nmax_age = 1s\n")
        p.reload()
        wait_for(lambda: not present(c, kept), "the job to expire once max_age is back")


@no_server
def test_age_ring_flush_keeps_reserved(binary):
    """flush-tube empties the ring; a reserved job survives the flush and
    still expires when it comes back past its time."""
    with Policy(binary, "[tube e]\nmax_age = 2s\n") as p:
        c = p.srv.client()
        c.use("e")
        c.watch("e")
        t0 = time.monotonic()
        r = put_id(c, b"r", ttr=3600)
        put_id(c, b"x")
        put_id(c, b"y")
        reserve_job(c, r)
        c.expect("flush-tube e", "FLUSHED 2")
        after = put_id(c, b"after")
        sleep_until(t0 + 2.5)
        eq(job_where(c, r), ("e", "reserved"), "the reserved job past its time")
        c.expect("release %d 0 0" % r, "RELEASED")
        eq(present(c, r), False, "the released job past its max_age")
        wait_for(lambda: not present(c, after), "the job put after the flush to expire")


@no_server
def test_age_ring_jobs_expire_after_restart(binary):
    """Jobs replayed from the binlog keep their max_age (replay puts them
    back in the age ring, in id order, which is creation order)."""
    with Policy(binary, "[tube e]\nmax_age = 3s\n", bdir=True) as p:
        c = p.srv.client()
        c.use("e")
        t0 = time.monotonic()
        ids = _pipelined_puts(c, 50)
        p.kill9()
        p.restart()
        c = p.srv.client()
        c.use("e")
        for j in ids[:3]:
            eq(job_where(c, j), ("e", "ready"), "replayed job %d" % j)
        fresh = put_id(c, b"fresh")
        sleep_until(t0 + 3.5)
        wait_for(lambda: all(not present(c, j) for j in ids), "the replayed jobs to expire")
        wait_for(lambda: not present(c, fresh), "the job put after the restart to expire")
