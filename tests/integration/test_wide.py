"""Workers watching many tubes: past 16 watched tubes a connection keeps a
hash index of its watch list (and past 1024 waits once, server-wide,
instead of in every tube). Everything a client sees must stay exactly as
for a narrow watcher (and as beanstalkd): which job a reserve gets, waiting
counts, the order between waiters, watch-list order."""

from harness import check, eq, wait_until

N = 300  # well past the 16 where the wide path starts


def wide_worker(srv, n=N, prefix="w"):
    w = srv.client()
    for i in range(n):
        eq(w.cmd("watch %s%d" % (prefix, i)), b"WATCHING %d" % (i + 2), "watch")
    return w


def test_wide_reserve_picks_best_across_tubes(srv):
    w = wide_worker(srv)
    p = srv.client()
    ids = {}
    for i, pri in [(5, 50), (250, 7), (17, 7), (100, 900)]:
        p.use("w%d" % i)
        ids[i] = p.put(b"job%d" % i, pri=pri)
    # Fewer tubes have jobs than the worker watches: the server-wide list is
    # scanned. Smallest priority first, then smallest id.
    order = [ids[250], ids[17], ids[5], ids[100]]
    for jid in order:
        rid, _ = w.reserve(timeout=0)
        eq(rid, jid, "reserve order")
        w.expect("delete %d" % rid, "DELETED")
    eq(w.cmd("reserve-with-timeout 0"), b"TIMED_OUT", "nothing left")


def test_wide_reserve_with_many_ready_tubes(srv):
    # More ready tubes than watched ones: the watch list is scanned instead.
    p = srv.client()
    for i in range(40):
        p.use("r%d" % i)
        p.put(b"x", pri=100 + i)
    w = wide_worker(srv, n=20, prefix="r")
    rid, body = w.reserve(timeout=0)
    eq(p.stats_job(rid)["tube"].strip('"'), "r0", "best job of the watched tubes")


def test_wide_waiter_gets_job_put_later(srv):
    w = wide_worker(srv)
    p = srv.client()
    w.send(b"reserve-with-timeout 10\r\n")
    wait_until(lambda: p.stats()["current-waiting"] == "1", what="waiting")
    eq(p.stats_tube("w123")["current-waiting"], "1", "stats-tube counts the wide waiter")
    eq(p.stats_tube("default")["current-waiting"], "1", "default too")
    p.use("w299")
    jid = p.put(b"late")
    eq(w.read_reply(), (b"RESERVED %d 4" % jid, b"late"), "served")
    eq(p.stats()["current-waiting"], "0", "not waiting any more")
    eq(p.stats_tube("w123")["current-waiting"], "0", "tube count back to 0")


def test_wide_waiter_not_served_from_unwatched_tube(srv):
    w = wide_worker(srv)
    p = srv.client()
    w.send(b"reserve-with-timeout 10\r\n")
    wait_until(lambda: p.stats()["current-waiting"] == "1", what="waiting")
    p.use("elsewhere")
    p.put(b"not yours")
    w.expect_silence(0.3)
    p.use("w7")
    jid = p.put(b"yours")
    eq(w.read_reply(), (b"RESERVED %d 5" % jid, b"yours"), "served from a watched tube")


def test_first_come_first_served_between_narrow_and_wide(srv):
    p = srv.client()
    narrow = srv.client()
    narrow.watch("w3")
    wide = wide_worker(srv)
    # The wide worker waits first, the narrow one second: the first job
    # goes to the wide one, the second to the narrow one.
    wide.send(b"reserve-with-timeout 10\r\n")
    wait_until(lambda: p.stats()["current-waiting"] == "1", what="wide waiting")
    narrow.send(b"reserve-with-timeout 10\r\n")
    wait_until(lambda: p.stats()["current-waiting"] == "2", what="both waiting")
    p.use("w3")
    j1 = p.put(b"one")
    eq(wide.read_reply(), (b"RESERVED %d 3" % j1, b"one"), "wide first")
    narrow.expect_silence(0.2)
    j2 = p.put(b"two")
    eq(narrow.read_reply(), (b"RESERVED %d 3" % j2, b"two"), "then narrow")


def test_wide_ignore_and_list_order(srv):
    w = wide_worker(srv, n=40)
    eq(w.cmd("ignore w0"), b"WATCHING 40", "ignore")
    eq(w.cmd("ignore w0"), b"WATCHING 40", "ignore again: not watched")
    eq(w.cmd("ignore nosuch"), b"WATCHING 40", "ignore unknown")
    watched = w.list_tubes_watched()
    # The last entry took the freed place, as in beanstalkd.
    eq(watched[:3], ["default", "w39", "w1"], "order after ignore")
    eq(len(set(watched)), 40, "no duplicates")
    eq(w.cmd("watch w5"), b"WATCHING 40", "watching again is a no-op")
    for i in range(1, 40):
        w.cmd("ignore w%d" % i)
    eq(w.list_tubes_watched(), ["default"], "back to narrow")
    eq(w.cmd("ignore default"), b"NOT_IGNORED", "last one stays")


def test_wide_worker_close_releases_and_drops_tubes(srv):
    w = wide_worker(srv, n=50)
    p = srv.client()
    p.use("w10")
    jid = p.put(b"held")
    rid, _ = w.reserve(timeout=0)
    eq(rid, jid, "reserved")
    w.close()
    wait_until(lambda: p.stats_job(jid)["state"] == "ready", what="released on close")
    tubes = p.list_tubes()
    check(sorted(tubes) == ["default", "w10"], "empty tubes gone: %r" % tubes)
