"""Tube policies: fanout (spec/extensions.md §1, "Fanout").

With fanout = true on P, a tube P+CHILD created by name (use, watch) is a
child of P: every job put into P from then on is copied, with its own id,
into every child.  Children stay (empty or not) and survive restarts.
"""

from harness import check, eq, no_server, unq
from policy_util import (Policy, job_stats, job_where, live, present, put_id,
                         put_line, reserve_job, tube_counter, tube_counts,
                         tube_stats, wait_for)


def _copies(c, tube, ids_range):
    """[(id, stats-job)] of the jobs in tube among the ids in ids_range."""
    out = []
    for j in ids_range:
        st = job_stats(c, j)
        if st is not None and unq(st["tube"]) == tube:
            out.append((j, st))
    return out


@no_server
def test_fanout_copies_into_children(binary):
    """Jobs put before a child existed are not copied; later ones are, with
    their own ids and the original's priority, delay, TTR and body."""
    with Policy(binary, "[tube P]\nfanout = true\n") as p:
        c = p.srv.client()
        c.use("P")
        j0 = put_id(c, b"before")
        a = p.srv.client()
        a.use("P+a")                         # child created by use
        b = p.srv.client()
        b.watch("P+b")                       # child created by watch
        j1 = put_id(c, b"one", pri=5, ttr=7)
        j2 = put_id(c, b"two", pri=9, delay=3600, ttr=11)
        check(j2 > j1 > j0, "ids grow")
        # P itself keeps its three jobs.
        eq(tube_counts(c, "P")[1:4], (2, 0, 1), "P: ready, reserved, delayed")
        top = j2 + 10
        orig = {j1: (b"one", "5", "0", "7", "ready"), j2: (b"two", "9", "3600", "11", "delayed")}
        seen_ids = set()
        for child in ("P+a", "P+b"):
            eq(tube_counts(c, child)[1:4], (1, 0, 1), "%s: ready, reserved, delayed" % child)
            got = _copies(c, child, range(1, top))
            eq(len(got), 2, "copies in %s: %r" % (child, [g[0] for g in got]))
            bodies = {}
            for jid, st in got:
                check(jid not in (j0, j1, j2), "a copy has the original's id %d" % jid)
                check(jid not in seen_ids, "two copies share id %d" % jid)
                seen_ids.add(jid)
                body = c.peek("peek %d" % jid)[1]
                bodies[body] = (body, st["pri"], st["delay"], st["ttr"], unq(st["state"]))
            eq(sorted(bodies.values()), sorted(orig.values()),
               "copies in %s (body, pri, delay, ttr, state)" % child)
        # Ids go on above the copies.
        j3 = put_id(c, b"three")
        check(j3 > max(seen_ids), "the next put's id %d is above the copies' %r"
              % (j3, sorted(seen_ids)))
        # Copies are independent: deleting the original leaves them.
        c.expect("delete %d" % j1, "DELETED")
        eq(tube_counts(c, "P+a")[1], 2, "P+a keeps its ready copies (one, three)")


@no_server
def test_fanout_full_child_drops_its_copy(binary):
    conf = ("[tube P]\nfanout = true\n"
            "[tube P+small]\nmax_items = 1\n"
            "[tube P+keep]\nmax_items = 1\ndiscard_old_when_full = true\n")
    with Policy(binary, conf) as p:
        c = p.srv.client()
        x = p.srv.client()
        x.use("P+small")
        x.use("P+keep")
        x.use("P+all")
        c.use("P")
        ids = [put_id(c, b"m%d" % i) for i in range(3)]
        eq(tube_counts(c, "P")[1], 3, "every put into P succeeded")
        eq(tube_counts(c, "P+small")[1], 1, "P+small (full, no discard) holds one copy")
        eq(tube_counts(c, "P+keep")[1], 1, "P+keep (discard) holds one copy")
        eq(tube_counts(c, "P+all")[1], 3, "P+all holds three copies")
        small = _copies(c, "P+small", range(1, max(ids) + 20))
        keep = _copies(c, "P+keep", range(1, max(ids) + 20))
        eq([c.peek("peek %d" % small[0][0])[1]], [b"m0"], "P+small keeps the first copy")
        eq([c.peek("peek %d" % keep[0][0])[1]], [b"m2"], "P+keep keeps the last copy")
        # Dropped copies are counted in the child's total-discarded
        # (stats-tubes, spec §2), as are the copies discarded to make room.
        eq(tube_counter(c, "P+small", "total-discarded"), 2, "P+small total-discarded")
        eq(tube_counter(c, "P+keep", "total-discarded"), 2, "P+keep total-discarded")
        eq(tube_counter(c, "P+all", "total-discarded"), 0, "P+all total-discarded")
        eq(tube_counter(c, "P", "total-discarded"), 0, "P total-discarded")


@no_server
def test_fanout_children_persist_across_kill9(binary):
    """A child stays, empty or not, watched or not, and survives kill -9
    with -b: list-tubes shows it and puts into P are copied into it."""
    with Policy(binary, "[tube P]\nfanout = true\n", bdir=True) as p:
        c = p.srv.client()
        c.use("P+a")
        c.watch("P+b")
        c.use("P")
        c.ignore("P+b")
        j = put_id(c, b"x")
        c.use("default")
        c.close()
        c = p.srv.client()
        tubes = c.list_tubes()
        for t in ("P+a", "P+b"):
            check(t in tubes, "child %s after its creator left: list-tubes %r" % (t, tubes))
        # Empty the children: they stay.
        for t in ("P+a", "P+b"):
            for jid, _ in _copies(c, t, range(1, j + 10)):
                c.expect("delete %d" % jid, "DELETED")
        tubes = c.list_tubes()
        for t in ("P+a", "P+b"):
            check(t in tubes, "empty child %s: list-tubes %r" % (t, tubes))
        p.kill9()
        p.restart()
        c = p.srv.client()
        tubes = c.list_tubes()
        for t in ("P+a", "P+b"):
            check(t in tubes, "child %s after kill -9 and restart: list-tubes %r" % (t, tubes))
        eq(present(c, j), True, "P's job after the restart")
        c.use("P")
        j2 = put_id(c, b"after")
        for t in ("P+a", "P+b"):
            got = _copies(c, t, range(j2 + 1, j2 + 5))
            eq(len(got), 1, "copy of the post-restart put in %s" % t)
            eq(c.peek("peek %d" % got[0][0])[1], b"after", "body of the copy in %s" % t)


@no_server
def test_fanout_copies_survive_kill9(binary):
    with Policy(binary, "[tube P]\nfanout = true\n", bdir=True) as p:
        c = p.srv.client()
        c.use("P+a")
        c.use("P")
        j = put_id(c, b"x", pri=3, ttr=30)
        copies = _copies(c, "P+a", range(j + 1, j + 5))
        eq(len(copies), 1, "one copy")
        cid = copies[0][0]
        p.kill9()
        p.restart()
        c = p.srv.client()
        eq(job_where(c, cid), ("P+a", "ready"), "the copy after kill -9")
        st = job_stats(c, cid)
        eq((st["pri"], st["ttr"]), ("3", "30"), "pri, ttr of the copy after restart")
        eq(c.peek("peek %d" % cid), (cid, b"x"), "body of the copy")


@no_server
def test_plus_is_ordinary_without_fanout(binary):
    """Without fanout, '+' is an ordinary character: no copies, and a tube
    goes away when unused, as in beanstalkd."""
    with Policy(binary, "[tube other]\nfanout = true\n") as p:
        c = p.srv.client()
        x = p.srv.client()
        x.use("Q+a")
        c.use("Q")
        j = put_id(c, b"x")
        eq(tube_counts(c, "Q+a")[:6], (0, 0, 0, 0, 0, 0), "Q+a gets no copy")
        eq(_copies(c, "Q+a", range(1, j + 5)), [], "no copies anywhere in Q+a")
        x.use("default")
        eq("Q+a" in c.list_tubes(), False, "Q+a is gone once unused (list-tubes %r)"
           % c.list_tubes())
        # And a put into Q+a is an ordinary put.
        c.use("Q+a")
        k = put_id(c, b"y")
        eq(job_where(c, k), ("Q+a", "ready"), "job put into Q+a")


@no_server
def test_not_found_commands_create_no_child(binary):
    """Commands that answer NOT_FOUND for unknown tubes create nothing."""
    with Policy(binary, "[tube P]\nfanout = true\n") as p:
        c = p.srv.client()
        c.expect("stats-tube P+z", "NOT_FOUND")
        c.expect("pause-tube P+z 10", "NOT_FOUND")
        c.use("P")
        j = put_id(c, b"x")
        eq("P+z" in c.list_tubes(), False, "list-tubes %r" % c.list_tubes())
        c.expect("stats-tube P+z", "NOT_FOUND")


@no_server
def test_fanout_at_top_level(binary):
    """fanout = true at the top level: every tube is a parent."""
    with Policy(binary, "fanout = true\n") as p:
        c = p.srv.client()
        x = p.srv.client()
        x.watch("jobs+audit")
        c.use("jobs")
        j = put_id(c, b"payload")
        got = _copies(c, "jobs+audit", range(j + 1, j + 5))
        eq(len(got), 1, "copy in jobs+audit")
        eq(c.peek("peek %d" % got[0][0])[1], b"payload", "its body")


@no_server
def test_fanout_off_at_reload_lets_children_go(binary):
    """Turning fanout off at reload ends the subscriptions: puts are no
    longer copied, and an unused empty child goes away."""
    with Policy(binary, "[tube P]\nfanout = true\n") as p:
        c = p.srv.client()
        x = p.srv.client()
        x.use("P+a")
        x.use("default")
        check("P+a" in c.list_tubes(), "child P+a exists")
        p.rewrite("[tube P]\nfanout = false\n")
        p.reload()
        eq("P+a" in c.list_tubes(), False, "P+a after fanout was turned off: list-tubes %r"
           % c.list_tubes())
        x.use("P+a")
        c.use("P")
        j = put_id(c, b"x")
        eq(tube_counts(c, "P+a")[1], 0, "no copy in P+a with fanout off")


@no_server
def test_fanout_children_follow_own_keys(binary):
    """A child follows its own tube keys: max_age there expires the copy,
    not the original."""
    conf = "[tube P]\nfanout = true\n[tube P+tmp]\nmax_age = 3s\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        x = p.srv.client()
        x.use("P+tmp")
        c.use("P")
        j = put_id(c, b"x")
        copies = _copies(c, "P+tmp", range(j + 1, j + 5))
        eq(len(copies), 1, "copy in P+tmp")
        wait_for(lambda: not present(c, copies[0][0]), "the copy to expire in P+tmp")
        eq(job_where(c, j), ("P", "ready"), "the original in P")


@no_server
def test_fanout_copy_follows_child_max_item_size(binary):
    """Children follow their own tube keys: a copy larger than the child's
    max_item_size is not put into it (counted as discarded); the put into
    P and the other children are unaffected."""
    conf = "[tube P]\nfanout = true\n[tube P+small]\nmax_item_size = 2\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        x = p.srv.client()
        x.use("P+small")
        x.use("P+big")
        c.use("P")
        j = put_id(c, b"12345")
        k = put_id(c, b"12")
        eq(tube_counts(c, "P+big")[1], 2, "P+big holds both copies")
        got = [c.peek("peek %d" % jid)[1] for jid, _ in _copies(c, "P+small", range(1, k + 10))]
        eq(got, [b"12"], "bodies in P+small (max_item_size 2)")
        eq(tube_counter(c, "P+small", "total-discarded"), 1,
           "P+small total-discarded (the copy too big for it)")
        eq(tube_counter(c, "P+big", "total-discarded"), 0, "P+big total-discarded")
