"""Tube policies: limits (max_items, max_size, discard_old_when_full),
max_item_size and max_timeouts (spec/extensions.md §1, "Tube keys").

Expiry is in test_policies_expiry.py, fanout in test_policies_fanout.py,
journal / sync_journal / binlog compatibility in test_policies_journal.py,
reload in test_policies_reload.py, byte-compatibility in
test_policies_compat.py.  Every test starts its own server with its own
config file and stops it by pid.
"""

import re

from harness import check, eq, no_server
from policy_util import (Policy, bury_job, job_stats, job_where, live,
                         present, put_id, put_line, reserve_job, tube_counter,
                         tube_counts, wait_for)
from harness import unq


def _ids_present(c, ids):
    return [j for j in ids if present(c, j)]


# ------------------------------------------------------------ full, no discard

@no_server
def test_max_items_full_answers_out_of_memory(binary):
    """A full tube without discard: put answers OUT_OF_MEMORY, the body is
    read and dropped (even one that looks like commands), the next command
    on the connection is answered as usual, nothing queued changes; every
    state counts."""
    with Policy(binary, "[tube lim]\nmax_items = 3\n") as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("lim")
        w.watch("lim")
        a = put_id(c, b"a")
        b = put_id(c, b"b", delay=3600)          # delayed counts
        v = put_id(c, b"v", pri=0)
        reserve_job(w, v)                        # reserved counts
        # Full: the body is swallowed, then list-tube-used is answered.
        body = b"delete %d\r\npeek %d" % (a, a)
        c.send(b"put 0 0 60 %d\r\n%s\r\nlist-tube-used\r\n" % (len(body), body))
        c.expect_lines([b"OUT_OF_MEMORY", b"USING lim"])
        eq(_ids_present(c, [a, b, v]), [a, b, v], "jobs still present after the refused put")
        eq(tube_counts(c, "lim")[1:], (1, 1, 1, 0, 3),
           "stats-tube lim (ready, reserved, delayed, buried, total-jobs)")
        # Buried counts too.
        w.expect("bury %d 0" % v, "BURIED")
        eq(put_line(c, b"x"), b"OUT_OF_MEMORY", "put into a tube full with a buried job")
        # Room again after a delete: exactly one more.
        c.expect("delete %d" % a, "DELETED")
        n = put_id(c, b"n")
        check(n > v, "the new job's id %d is above the earlier ones" % n)
        eq(put_line(c, b"x"), b"OUT_OF_MEMORY", "full again")
        # Other tubes are not limited.
        c.use("default")
        for i in range(5):
            put_id(c, b"d%d" % i)


@no_server
def test_max_size_counts_body_bytes(binary):
    with Policy(binary, "[tube sz]\nmax_size = 10\n") as p:
        c = p.srv.client()
        c.use("sz")
        a = put_id(c, b"123456")
        eq(put_line(c, b"12345"), b"OUT_OF_MEMORY", "6 + 5 bytes > max_size 10")
        put_id(c, b"1234")                       # exactly 10
        eq(put_line(c, b"1"), b"OUT_OF_MEMORY", "10 bytes held, 1 more refused")
        c.expect("delete %d" % a, "DELETED")
        put_id(c, b"123456")


@no_server
def test_max_size_empty_body_fits(binary):
    with Policy(binary, "[tube sz]\nmax_size = 4\n") as p:
        c = p.srv.client()
        c.use("sz")
        put_id(c, b"1234")
        line = put_line(c, b"")
        check(line.startswith(b"INSERTED "), "an empty body in a tube at max_size "
              "(bytes, not jobs, are limited): expected INSERTED, got %r" % line)
        eq(put_line(c, b"5"), b"OUT_OF_MEMORY", "one more byte")


# ------------------------------------------------------------ discarding

@no_server
def test_discard_oldest_ready_first(binary):
    """discard_old_when_full: the oldest READY job goes first, even when
    older delayed and buried jobs are there; never a reserved one."""
    conf = "[tube d]\nmax_items = 5\ndiscard_old_when_full = true\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("d")
        w.watch("d")
        b1 = put_id(c, b"b1")
        bury_job(w, b1)
        d1 = put_id(c, b"d1", delay=3600)
        v1 = put_id(c, b"v1")
        reserve_job(w, v1)
        r1 = put_id(c, b"r1")
        r2 = put_id(c, b"r2")
        n1 = put_id(c, b"n1", delay=3600)
        eq(_ids_present(c, [b1, d1, v1, r1, r2, n1]), [b1, d1, v1, r2, n1],
           "after one put into the full tube: the oldest ready job (r1) went")
        n2 = put_id(c, b"n2", delay=3600)
        eq(_ids_present(c, [b1, d1, v1, r2, n1, n2]), [b1, d1, v1, n1, n2],
           "second put: the last ready job (r2) went")
        # No ready job left: the oldest delayed one goes (d1, not n1).
        n3 = put_id(c, b"n3", delay=3600)
        eq(_ids_present(c, [b1, d1, v1, n1, n2, n3]), [b1, v1, n1, n2, n3],
           "third put: no ready job, the oldest delayed one (d1) went")
        eq(tube_counts(c, "d")[1:5], (0, 1, 3, 1), "ready, reserved, delayed, buried")
        eq(job_where(c, v1), ("d", "reserved"), "the reserved job")


@no_server
def test_discard_buried_after_delayed_never_reserved(binary):
    conf = "[tube d]\nmax_items = 2\ndiscard_old_when_full = true\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("d")
        w.watch("d")
        v = put_id(c, b"v")
        reserve_job(w, v)
        b = put_id(c, b"b")
        bury_job(w, b)
        # Only a reserved and a buried job: the buried one goes.
        n1 = put_id(c, b"n1")
        eq(_ids_present(c, [v, b, n1]), [v, n1], "the buried job went, not the reserved one")
        n2 = put_id(c, b"n2", delay=3600)
        eq(_ids_present(c, [v, n1, n2]), [v, n2], "then the ready one")
        n3 = put_id(c, b"n3")
        eq(_ids_present(c, [v, n2, n3]), [v, n3], "then the delayed one")
        eq(job_where(c, v), ("d", "reserved"), "the reserved job is untouched")
        w.expect("delete %d" % v, "DELETED")


@no_server
def test_discard_order_through_every_transition(binary):
    """The discard order (oldest ready, else oldest delayed, else oldest
    buried; never reserved) holds while jobs move between states after the
    tube's first discard, when the server keeps its index of ids: released
    and kicked jobs come back with their old ids, delayed ones become
    ready, jobs are moved in with lower ids, deleted and flushed. A model
    of the tube predicts every job each put discards, over 1,500 random
    steps (seeded)."""
    import random
    rnd = random.Random(20261124)
    cap = 12
    conf = "[tube d]\nmax_items = %d\ndiscard_old_when_full = true\n" % cap
    with Policy(binary, conf) as p:
        c = p.srv.client()      # producer, in tube d
        w = p.srv.client()      # worker
        o = p.srv.client()      # producer of older jobs, in tube side
        c.use("d")
        w.watch("d")
        w.ignore("default")
        o.use("side")
        model = {}              # id -> state, for the jobs of d
        side = []               # ids waiting in tube side (older than d's later jobs)

        def expect_discard(n_new):
            """Ids the model says one put into d discards; None if it cannot
            make room (only reserved jobs): then nothing is discarded."""
            if sum(1 for s in model.values() if s == "reserved") + n_new > cap:
                return None
            gone = []
            while len(model) + n_new > cap:
                for st in ("ready", "delayed", "buried"):
                    ids = sorted(j for j, s in model.items() if s == st)
                    if ids:
                        gone.append(ids[0])
                        del model[ids[0]]
                        break
            return gone

        def check_all(step):
            got = {}
            for j in list(model):
                where = job_where(c, j)
                got[j] = where[1] if where else None
            eq(got, model, "step %d: the tube's jobs and states" % step)

        for step in range(1500):
            op = rnd.random()
            by = lambda st: sorted(j for j, s in model.items() if s == st)
            if op < 0.35:
                delay = 3600 if rnd.random() < 0.2 else 0
                gone = expect_discard(1)
                if gone is None:
                    eq(put_line(c, b"full", delay=delay), b"OUT_OF_MEMORY",
                       "step %d: only reserved jobs, nothing to discard" % step)
                    continue
                jid = put_id(c, b"j%d" % step, delay=delay)
                model[jid] = "delayed" if delay else "ready"
                for g in gone:
                    check(not present(c, g), "step %d: job %d should have been discarded" % (step, g))
            elif op < 0.5 and by("ready"):
                j = rnd.choice(by("ready"))
                reserve_job(w, j)
                model[j] = "reserved"
            elif op < 0.6 and by("reserved"):
                j = rnd.choice(by("reserved"))
                if rnd.random() < 0.5:
                    w.expect("release %d 0 0" % j, "RELEASED")
                    model[j] = "ready"
                else:
                    w.expect("bury %d 0" % j, "BURIED")
                    model[j] = "buried"
            elif op < 0.67 and (by("buried") or by("delayed")):
                j = rnd.choice(by("buried") + by("delayed"))
                c.expect("kick-job %d" % j, "KICKED")
                model[j] = "ready"
            elif op < 0.72 and model:
                j = rnd.choice([j for j, s in model.items() if s != "reserved"] or [None])
                if j is not None:
                    c.expect("delete %d" % j, "DELETED")
                    del model[j]
            elif op < 0.82:
                side.append(put_id(o, b"s%d" % step))
            elif op < 0.92 and side:
                # An older job moved in: it is ready in d with its old id,
                # and moving in makes room the same way a put does.
                gone = expect_discard(1)
                if gone is None:
                    continue
                j = side.pop(rnd.randrange(len(side)))
                o.expect("move-job %d d" % j, "MOVED")
                model[j] = "ready"
                for g in gone:
                    check(not present(c, g), "step %d: job %d should have been discarded "
                          "by the move" % (step, g))
            elif op < 0.93:
                # flush-tube takes every job but the reserved ones.
                line = c.cmd("flush-tube d")
                check(re.fullmatch(rb"FLUSHED \d+", line) is not None, "flush-tube: %r" % line)
                model = {j: s for j, s in model.items() if s == "reserved"}
            if step % 100 == 99:
                check_all(step)
        check_all(1500)
        check(int(tube_counter(c, "d", "total-discarded")) > 100,
              "the walk discarded often (%s)" % tube_counter(c, "d", "total-discarded"))


@no_server
def test_discard_by_size_deletes_several(binary):
    conf = "[tube d]\nmax_size = 10\ndiscard_old_when_full = true\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        c.use("d")
        a = put_id(c, b"aaaa")
        b = put_id(c, b"bbbb")
        x = put_id(c, b"cc")
        # 8 bytes must go: a and b (the two oldest), not c.
        n = put_id(c, b"12345678")
        eq(_ids_present(c, [a, b, x, n]), [x, n], "jobs left after an 8-byte put")
        eq(c.peek("peek %d" % n), (n, b"12345678"), "the new job")
        eq(tube_counter(c, "d", "total-discarded"), 2, "d total-discarded (stats-tubes)")


@no_server
def test_discard_cannot_make_room_deletes_nothing(binary):
    """If even discarding every non-reserved job cannot make room, nothing
    is deleted and put answers OUT_OF_MEMORY."""
    conf = ("[tube d]\nmax_size = 10\ndiscard_old_when_full = true\n"
            "[tube n]\nmax_items = 1\ndiscard_old_when_full = true\n")
    with Policy(binary, conf) as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("d")
        w.watch("d")
        w.watch("n")
        v = put_id(c, b"12345678")     # 8 bytes, reserved
        reserve_job(w, v)
        r = put_id(c, b"r")            # 1 byte, ready
        b = put_id(c, b"b")            # 1 byte, buried
        bury_job(w, b)
        # 8 reserved + 3 new > 10 whatever goes: nothing is deleted.
        c.send(b"put 0 0 60 3\r\nxyz\r\nlist-tube-used\r\n")
        c.expect_lines([b"OUT_OF_MEMORY", b"USING d"])
        eq(_ids_present(c, [v, r, b]), [v, r, b], "nothing deleted by the refused put")
        # 8 reserved + 2 fits once both small ones go.
        n = put_id(c, b"xy")
        eq(_ids_present(c, [v, r, b, n]), [v, n], "after a 2-byte put")
        # max_items = 1 with the one job reserved.
        c.use("n")
        v2 = put_id(c, b"v2")
        reserve_job(w, v2)
        eq(put_line(c, b"x"), b"OUT_OF_MEMORY", "max_items 1, the only job reserved")
        eq(job_where(c, v2), ("n", "reserved"), "the reserved job")


# ------------------------------------------------------------ release etc.

@no_server
def test_release_never_fails_on_a_limit(binary):
    """Limits count jobs in every state: release (also with a delay), bury
    and kick of a job already counted never fail, also after a reload made
    the tube over-full."""
    with Policy(binary, "[tube lim]\nmax_items = 3\nmax_size = 3\n") as p:
        c = p.srv.client()
        c.use("lim")
        c.watch("lim")
        ids = [put_id(c, b"x") for _ in range(3)]
        eq(put_line(c, b"y"), b"OUT_OF_MEMORY", "full")
        for j in ids:
            reserve_job(c, j)
        c.expect("release %d 5 0" % ids[0], "RELEASED")
        c.expect("release %d 5 3600" % ids[1], "RELEASED")
        c.expect("bury %d 5" % ids[2], "BURIED")
        c.expect("kick 1", "KICKED 1")
        # Lower the limits below what the tube holds.
        p.rewrite("[tube lim]\nmax_items = 1\nmax_size = 1\n")
        p.reload()
        for j in (ids[0], ids[2]):
            reserve_job(c, j)
        c.expect("release %d 1 0" % ids[0], "RELEASED")
        c.expect("bury %d 1" % ids[2], "BURIED")
        c.expect("kick-job %d" % ids[2], "KICKED")
        c.expect("kick-job %d" % ids[1], "KICKED")
        eq(tube_counts(c, "lim")[1:5], (3, 0, 0, 0), "all three ready again")
        eq(put_line(c, b"y"), b"OUT_OF_MEMORY", "still over the limit")


# ------------------------------------------------------------ max_item_size

@no_server
def test_max_item_size_job_too_big(binary):
    conf = ("[tube small]\nmax_item_size = 10\n"
            "[tube wide]\nmax_item_size = 1000\n"
            "[tube none]\nmax_item_size = 0\n")
    with Policy(binary, conf, "-z", "100") as p:
        c = p.srv.client()
        c.use("small")
        a = put_id(c, b"x" * 10)
        # Too big: the body is swallowed, even if it looks like a command.
        body = b"peek %d\r\n" % a
        body += b"z" * (11 - len(body))
        c.send(b"put 0 0 60 11\r\n%s\r\nlist-tube-used\r\n" % body)
        c.expect_lines([b"JOB_TOO_BIG", b"USING small"])
        # A body far above the limit, sent in pieces.
        big = b"q" * 5000
        c.send(b"put 0 0 60 %d\r\n" % len(big))
        c.send(big[:2500])
        c.send(big[2500:] + b"\r\nlist-tube-used\r\n")
        c.expect_lines([b"JOB_TOO_BIG", b"USING small"])
        eq(tube_counts(c, "small")[5], 1, "total-jobs of small")
        # Other tubes: -z.
        c.use("default")
        put_id(c, b"x" * 100)
        eq(put_line(c, b"x" * 101), b"JOB_TOO_BIG", "default: -z 100")
        # Above -z: -z is the ceiling.
        c.use("wide")
        put_id(c, b"x" * 100)
        eq(put_line(c, b"x" * 101), b"JOB_TOO_BIG", "wide (max_item_size 1000 > -z 100)")
        # 0: only empty bodies.
        c.use("none")
        put_id(c, b"")
        eq(put_line(c, b"x"), b"JOB_TOO_BIG", "max_item_size = 0")
        c.expect("list-tube-used", "USING none")


# ------------------------------------------------------------ max_timeouts

def _time_out(c, w, jid, ntimeouts):
    """Reserve jid on w and wait (polling stats-job on c) until its TTR ran
    out for the ntimeouts-th time; returns its (tube, state)."""
    reserve_job(w, jid)
    wait_for(lambda: int(job_stats(c, jid)["timeouts"]) >= ntimeouts,
             "job %d's TTR to run out (timeouts %d)" % (jid, ntimeouts))
    st = job_stats(c, jid)
    eq(int(st["timeouts"]), ntimeouts, "timeouts of job %d" % jid)
    return unq(st["tube"]), unq(st["state"])


@no_server
def test_max_timeouts_buries(binary):
    """After max_timeouts TTR timeouts the job is buried (a dead letter):
    peek-buried shows it, kick brings it back."""
    with Policy(binary, "[tube mt]\nmax_timeouts = 2\n") as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("mt")
        w.watch("mt")
        j = put_id(c, b"poison", pri=7, ttr=1)
        ctl = put_id(c, b"ok", pri=9, ttr=1)
        eq(_time_out(c, w, j, 1), ("mt", "ready"), "after the first timeout")
        eq(_time_out(c, w, j, 2), ("mt", "buried"), "after the second timeout")
        eq(c.peek("peek-buried"), (j, b"poison"), "peek-buried in mt")
        st = job_stats(c, j)
        eq((st["pri"], st["reserves"], st["buries"]), ("7", "2", "0"),
           "pri, reserves, buries of the dead letter")
        eq(tube_counts(c, "mt")[1:5], (1, 0, 0, 1), "mt: ctl ready, j buried")
        c.expect("kick 1", "KICKED 1")
        eq(job_where(c, j), ("mt", "ready"), "kicked back")
        # A job not past the limit goes back to ready as usual, and the
        # limit is per tube: default's jobs never get buried this way.
        eq(_time_out(c, w, ctl, 1), ("mt", "ready"), "ctl after one timeout")
        eq(tube_counter(c, "mt", "total-timeouts"), 3, "mt total-timeouts (stats-tubes)")
        c.use("default")
        w.watch("default")
        dj = put_id(c, b"d", ttr=1)
        eq(_time_out(c, w, dj, 1), ("default", "ready"), "default after one timeout")
        eq(_time_out(c, w, dj, 2), ("default", "ready"), "default after two timeouts")


@no_server
def test_limit_accounting_follows_jobs(binary):
    """The bytes and jobs a limit counts follow the jobs: freed by delete,
    expiry and move_expired_to, taken by the target of a move; a reserved
    job's bytes count as discardable again once it is released."""
    conf = ("[tube src]\nmax_size = 5\nmax_age = 1s\nmove_expired_to = dead\n"
            "[tube dead]\nmax_size = 6\n"
            "[tube d]\nmax_size = 10\ndiscard_old_when_full = true\n")
    with Policy(binary, conf) as p:
        c = p.srv.client()
        w = p.srv.client()
        c.use("src")
        j = put_id(c, b"12345")
        wait_for(lambda: job_where(c, j) == ("dead", "ready"), "the job to move to dead")
        # src's 5 bytes are free again; dead holds 5 of its 6.
        k = put_id(c, b"abcde")
        c.expect("delete %d" % k, "DELETED")     # (before it can expire too)
        c.use("dead")
        put_id(c, b"x")
        eq(put_line(c, b"y"), b"OUT_OF_MEMORY", "dead: 5 moved + 1 bytes of max_size 6")
        c.expect("delete %d" % j, "DELETED")
        put_id(c, b"12345")
        # Reserved, then released: discardable again.
        c.use("d")
        w.watch("d")
        v = put_id(c, b"12345678")
        reserve_job(w, v)
        eq(put_line(c, b"12345"), b"OUT_OF_MEMORY", "8 reserved bytes + 5 > 10")
        w.expect("release %d 0 0" % v, "RELEASED")
        n = put_id(c, b"12345")
        eq([present(c, v), present(c, n)], [False, True],
           "after the release the 8-byte job is discarded for the 5-byte one")
        # Reserved then deleted: its bytes are gone.
        reserve_job(w, n)
        w.expect("delete %d" % n, "DELETED")
        put_id(c, b"1234567890")
