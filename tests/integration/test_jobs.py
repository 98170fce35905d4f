"""delete, release, bury, touch, kick, kick-job, peek, peek-ready/delayed/buried."""

from harness import check, eq, fail, unq


def _states(c, ids):
    return [c.stats_job(j)["state"] for j in ids]


# ------------------------------------------------------------------ delete

def test_delete_in_every_state(srv):
    c = srv.client()
    ready = c.put(b"r")
    delayed = c.put(b"d", delay=100)
    res = c.put(b"x")
    buried = c.put(b"b")
    eq(c.cmd_body("reserve-job %d" % buried)[0], b"RESERVED %d 1" % buried, "reserve-job")
    c.expect("bury %d 0" % buried, "BURIED")
    eq(c.cmd_body("reserve-job %d" % res)[0], b"RESERVED %d 1" % res, "reserve-job")
    for j in (ready, delayed, res, buried):
        c.expect("delete %d" % j, "DELETED")
        c.expect("delete %d" % j, "NOT_FOUND")
        eq(c.cmd_body("peek %d" % j), (b"NOT_FOUND", None), "peek after delete")
        eq(c.cmd_body("stats-job %d" % j), (b"NOT_FOUND", None), "stats-job after delete")
    st = c.stats()
    for k in ("current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
              "current-jobs-buried", "current-jobs-urgent"):
        eq(st[k], "0", k)
    eq(st["cmd-delete"], "8", "cmd-delete counts failed deletes too")
    eq(st["total-jobs"], "4", "total-jobs")


def test_delete_unknown_ids(srv):
    c = srv.client()
    c.expect("delete 0", "NOT_FOUND")
    c.expect("delete 1", "NOT_FOUND")
    c.expect("delete 18446744073709551615", "NOT_FOUND")


def test_delete_counts_per_tube(srv):
    c = srv.client()
    c.use("t")
    a = c.put(b"a")
    c.put(b"b")
    c.expect("delete %d" % a, "DELETED")
    c.expect("delete 999", "NOT_FOUND")
    eq(c.stats_tube("t")["cmd-delete"], "1", "tube cmd-delete")
    eq(c.stats_tube("default")["cmd-delete"], "0", "default cmd-delete")
    eq(c.stats()["cmd-delete"], "2", "global cmd-delete")


# ----------------------------------------------------------------- release

def test_release_to_ready_and_delayed(srv):
    c = srv.client()
    j = c.put(b"x", pri=7, ttr=100)
    eq(c.reserve(0)[0], j, "reserve")
    c.expect("release %d 3 0" % j, "RELEASED")
    st = c.stats_job(j)
    eq((st["state"], st["pri"], st["releases"], st["reserves"]),
       ("ready", "3", "1", "1"), "state, pri, releases, reserves")
    eq(c.reserve(0)[0], j, "reserve again")
    c.expect("release %d 4294967295 100" % j, "RELEASED")
    st = c.stats_job(j)
    eq((st["state"], st["pri"], st["delay"], st["releases"]),
       ("delayed", "4294967295", "100", "2"), "state, pri, delay, releases")
    check(98 <= int(st["time-left"]) <= 100, "time-left %r" % st["time-left"])
    s = c.stats()
    eq(s["cmd-release"], "2", "cmd-release")
    eq(s["current-jobs-delayed"], "1", "delayed")
    eq(s["current-jobs-reserved"], "0", "reserved")


def test_release_not_reserved(srv):
    c = srv.client()
    j = c.put(b"x")
    c.expect("release %d 0 0" % j, "NOT_FOUND")
    c.expect("release 999 0 0", "NOT_FOUND")
    d = c.put(b"y", delay=100)
    c.expect("release %d 0 0" % d, "NOT_FOUND")
    eq(c.stats_job(j)["releases"], "0", "releases")


# -------------------------------------------------------------------- bury

def test_bury_and_peek_buried_fifo(srv):
    c = srv.client()
    ids = [c.put(b"job%d" % i, pri=100) for i in range(3)]
    for j in ids:
        eq(c.reserve(0)[0], j, "reserve")
    # Bury in the order 2, 0, 1 with different priorities.
    for j, pri in ((ids[2], 5), (ids[0], 1), (ids[1], 9)):
        c.expect("bury %d %d" % (j, pri), "BURIED")
    st = c.stats_job(ids[0])
    eq((st["state"], st["pri"], st["buries"]), ("buried", "1", "1"), "buried job")
    eq(c.peek("peek-buried"), (ids[2], b"job2"), "peek-buried is the first buried")
    s = c.stats()
    eq(s["current-jobs-buried"], "3", "buried count")
    eq(s["cmd-bury"], "3", "cmd-bury")
    eq(c.stats_tube("default")["current-jobs-buried"], "3", "tube buried")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    # kick takes them in bury order.
    c.expect("kick 1", "KICKED 1")
    eq(c.stats_job(ids[2])["state"], "ready", "first kicked")
    eq(c.peek("peek-buried"), (ids[0], b"job0"), "next buried")


def test_bury_not_reserved(srv):
    c = srv.client()
    j = c.put(b"x")
    c.expect("bury %d 0" % j, "NOT_FOUND")
    c.expect("bury 999 0", "NOT_FOUND")
    eq(c.stats_job(j)["state"], "ready", "state")


# ------------------------------------------------------------------- touch

def test_touch(srv):
    c = srv.client()
    j = c.put(b"x", ttr=100)
    c.expect("touch %d" % j, "NOT_FOUND")
    eq(c.reserve(0)[0], j, "reserve")
    c.expect("touch %d" % j, "TOUCHED")
    c.expect("touch 999", "NOT_FOUND")
    eq(c.stats()["cmd-touch"], "3", "cmd-touch")
    eq(c.stats_job(j)["state"], "reserved", "state after touch")


# -------------------------------------------------------------------- kick

def test_kick_buried_before_delayed(srv):
    c = srv.client()
    d1 = c.put(b"d1", delay=100)
    d2 = c.put(b"d2", delay=200)
    b1 = c.put(b"b1")
    b2 = c.put(b"b2")
    for j in (b1, b2):
        eq(c.reserve(0)[0], j, "reserve")
        c.expect("bury %d 0" % j, "BURIED")
    c.expect("kick 1", "KICKED 1")
    eq(_states(c, [b1, b2, d1, d2]), ["ready", "buried", "delayed", "delayed"], "states")
    c.expect("kick 10", "KICKED 1")
    eq(_states(c, [b1, b2, d1, d2]), ["ready", "ready", "delayed", "delayed"], "states")
    c.expect("kick 1", "KICKED 1")
    eq(_states(c, [d1, d2]), ["ready", "delayed"], "shortest delay kicked first")
    c.expect("kick 10", "KICKED 1")
    c.expect("kick 10", "KICKED 0")
    c.expect("kick 0", "KICKED 0")
    st = c.stats_job(d1)
    eq((st["kicks"], st["delay"]), ("1", "100"), "kicks and delay of a kicked job")
    eq(c.stats_job(b1)["kicks"], "1", "kicks of buried")
    eq(c.stats()["cmd-kick"], "6", "cmd-kick")


def test_kick_only_used_tube(srv):
    c = srv.client()
    c.use("a")
    ja = c.put(b"a", delay=100)
    c.use("b")
    jb = c.put(b"b", delay=100)
    c.expect("kick 10", "KICKED 1")
    eq(_states(c, [ja, jb]), ["delayed", "ready"], "only tube b kicked")
    # Buried jobs in another tube do not stop kicking delayed ones here.
    c.use("a")
    jc = c.put(b"c")
    c.watch("a")
    eq(c.cmd_body("reserve-job %d" % jc)[0], b"RESERVED %d 1" % jc, "reserve-job")
    c.expect("bury %d 0" % jc, "BURIED")
    c.use("b")
    jd = c.put(b"d", delay=100)
    c.expect("kick 10", "KICKED 1")
    eq(_states(c, [ja, jc, jd]), ["delayed", "buried", "ready"], "states")


def test_kick_large_bound(srv):
    c = srv.client()
    ids = [c.put(b"%d" % i, delay=100) for i in range(5)]
    c.expect("kick 4294967295", "KICKED 5")
    eq(c.stats()["current-jobs-ready"], "5", "ready")
    for j in ids:
        eq(c.stats_job(j)["state"], "ready", "state")


# ---------------------------------------------------------------- kick-job

def test_kick_job(srv):
    c = srv.client()
    ready = c.put(b"r")
    delayed = c.put(b"d", delay=100)
    c.use("elsewhere")
    buried = c.put(b"b")
    c.use("default")
    res = c.put(b"x")
    eq(c.cmd_body("reserve-job %d" % buried)[0], b"RESERVED %d 1" % buried, "reserve-job")
    c.expect("bury %d 0" % buried, "BURIED")
    eq(c.cmd_body("reserve-job %d" % res)[0], b"RESERVED %d 1" % res, "reserve-job")
    c.expect("kick-job %d" % ready, "NOT_FOUND")
    c.expect("kick-job %d" % res, "NOT_FOUND")
    c.expect("kick-job 999", "NOT_FOUND")
    c.expect("kick-job %d" % delayed, "KICKED")
    # kick-job works on a job in a tube that is not the used one.
    c.expect("kick-job %d" % buried, "KICKED")
    c.expect("kick-job %d" % buried, "NOT_FOUND")
    eq(_states(c, [ready, delayed, buried, res]),
       ["ready", "ready", "ready", "reserved"], "states")
    eq(unq(c.stats_job(buried)["tube"]), "elsewhere", "tube kept")
    eq(c.stats_job(buried)["kicks"], "1", "kicks")
    eq(c.stats_job(delayed)["kicks"], "1", "kicks")


# -------------------------------------------------------------------- peek

def test_peek_any_state(srv):
    c = srv.client()
    ready = c.put(b"ready")
    delayed = c.put(b"delayed", delay=100)
    res = c.put(b"reserved")
    c.use("other")
    other = c.put(b"other")
    eq(c.cmd_body("reserve-job %d" % res)[0], b"RESERVED %d 8" % res, "reserve-job")
    d = srv.client()
    for j, body in ((ready, b"ready"), (delayed, b"delayed"), (res, b"reserved"),
                    (other, b"other")):
        eq(d.cmd_body("peek %d" % j), (b"FOUND %d %d" % (j, len(body)), body), "peek %d" % j)
    eq(d.cmd_body("peek 999"), (b"NOT_FOUND", None), "peek unknown")
    eq(d.cmd_body("peek 0"), (b"NOT_FOUND", None), "peek 0")
    eq(d.stats()["cmd-peek"], "6", "cmd-peek")
    eq(c.stats_job(res)["state"], "reserved", "peek does not change state")


def test_peek_ready_delayed_buried(srv):
    c = srv.client()
    eq(c.peek("peek-ready"), None, "peek-ready empty")
    eq(c.peek("peek-delayed"), None, "peek-delayed empty")
    eq(c.peek("peek-buried"), None, "peek-buried empty")
    r1 = c.put(b"r1", pri=10)
    r2 = c.put(b"r2", pri=5)
    c.put(b"r3", pri=5)
    d1 = c.put(b"d1", delay=300)
    d2 = c.put(b"d2", delay=200)
    c.put(b"d3", delay=250)
    eq(c.peek("peek-ready"), (r2, b"r2"), "peek-ready: lowest pri, then id")
    eq(c.peek("peek-delayed"), (d2, b"d2"), "peek-delayed: shortest delay left")
    eq(c.peek("peek-buried"), None, "peek-buried none")
    eq(c.cmd_body("reserve-job %d" % r1)[0], b"RESERVED %d 2" % r1, "reserve-job")
    c.expect("bury %d 0" % r1, "BURIED")
    eq(c.peek("peek-buried"), (r1, b"r1"), "peek-buried")
    st = c.stats()
    eq((st["cmd-peek-ready"], st["cmd-peek-delayed"], st["cmd-peek-buried"], st["cmd-peek"]),
       ("2", "2", "3", "0"), "peek counters")
    eq(c.stats_job(d1)["state"], "delayed", "peek does not change state")


def test_peek_commands_use_used_tube(srv):
    c = srv.client()
    c.use("a")
    ra = c.put(b"ra")
    da = c.put(b"da", delay=100)
    ba = c.put(b"ba")
    eq(c.cmd_body("reserve-job %d" % ba)[0], b"RESERVED %d 2" % ba, "reserve-job")
    c.expect("bury %d 0" % ba, "BURIED")
    c.use("b")
    eq(c.peek("peek-ready"), None, "peek-ready in b")
    eq(c.peek("peek-delayed"), None, "peek-delayed in b")
    eq(c.peek("peek-buried"), None, "peek-buried in b")
    # Watching does not matter, only use.
    c.watch("a")
    eq(c.peek("peek-ready"), None, "peek-ready in b while watching a")
    c.use("a")
    eq(c.peek("peek-ready"), (ra, b"ra"), "peek-ready in a")
    eq(c.peek("peek-delayed"), (da, b"da"), "peek-delayed in a")
    eq(c.peek("peek-buried"), (ba, b"ba"), "peek-buried in a")


def test_urgent_counts(srv):
    c = srv.client()
    c.put(b"a", pri=1023)
    c.put(b"b", pri=1024)
    c.put(b"c", pri=0)
    c.put(b"d", pri=0, delay=100)
    st = c.stats()
    eq((st["current-jobs-urgent"], st["current-jobs-ready"]), ("2", "3"), "global urgent, ready")
    ts = c.stats_tube("default")
    eq((ts["current-jobs-urgent"], ts["current-jobs-ready"]), ("2", "3"), "tube urgent, ready")
    j, _ = c.reserve(0)
    eq(c.stats()["current-jobs-urgent"], "1", "urgent after reserving one")
    c.expect("release %d 5000 0" % j, "RELEASED")
    eq(c.stats()["current-jobs-urgent"], "1", "urgent after release with pri 5000")
