"""use, watch, ignore, list-tubes, list-tube-used, list-tubes-watched,
pause-tube, and the lifecycle of tubes."""

import time

from harness import check, check_cases, eq, fail, unq, wait_until

NAME_CHARS = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
              "0123456789-+/;.$_()")


def test_use_and_list_tube_used(srv):
    c = srv.client()
    c.expect("list-tube-used", "USING default")
    c.expect("use foo", "USING foo")
    c.expect("list-tube-used", "USING foo")
    c.expect("use foo", "USING foo")
    c.expect("use default", "USING default")
    st = c.stats()
    eq((st["cmd-use"], st["cmd-list-tube-used"]), ("3", "2"), "cmd-use, cmd-list-tube-used")


def test_watch_and_list_tubes_watched(srv):
    c = srv.client()
    eq(c.list_tubes_watched(), ["default"], "initial watch list")
    c.expect("watch b", "WATCHING 2")
    c.expect("watch a", "WATCHING 3")
    c.expect("watch b", "WATCHING 3")
    c.expect("watch default", "WATCHING 3")
    eq(c.list_tubes_watched(), ["default", "b", "a"], "watch list in watch order")
    reply, body = c.cmd_body("list-tubes-watched")
    eq((reply, body), (b"OK 22", b"---\n- default\n- b\n- a\n"), "raw list-tubes-watched")
    eq(c.stats()["cmd-watch"], "4", "cmd-watch")
    eq(c.stats()["cmd-list-tubes-watched"], "3", "cmd-list-tubes-watched")


def test_ignore(srv):
    c = srv.client()
    c.expect("ignore default", "NOT_IGNORED")
    c.expect("ignore nosuch", "WATCHING 1")
    c.expect("watch a", "WATCHING 2")
    c.expect("ignore default", "WATCHING 1")
    eq(c.list_tubes_watched(), ["a"], "watch list")
    c.expect("ignore default", "WATCHING 1")
    c.expect("ignore a", "NOT_IGNORED")
    eq(c.list_tubes_watched(), ["a"], "watch list after NOT_IGNORED")
    eq(c.stats()["cmd-ignore"], "5", "cmd-ignore")


def test_ignore_does_not_create_tube(srv):
    c = srv.client()
    c.expect("ignore ghost", "WATCHING 1")
    eq(c.list_tubes(), ["default"], "tubes")
    c.expect("stats-tube ghost", "NOT_FOUND")
    eq(c.stats()["current-tubes"], "1", "current-tubes")


def test_list_tubes_format(srv):
    c = srv.client()
    eq(c.cmd_body("list-tubes"), (b"OK 14", b"---\n- default\n"), "raw list-tubes")
    c.use("x")
    c.watch("y")
    eq(c.cmd_body("list-tubes"), (b"OK 22", b"---\n- default\n- x\n- y\n"),
       "list-tubes in creation order")
    eq(c.stats()["cmd-list-tubes"], "2", "cmd-list-tubes")


def test_tube_lifecycle(srv):
    c = srv.client()
    d = srv.client()
    eq(c.stats()["current-tubes"], "1", "only default")
    c.use("t")
    eq(sorted(d.list_tubes()), ["default", "t"], "created by use")
    eq(d.stats()["current-tubes"], "2", "current-tubes")
    c.use("default")
    eq(d.list_tubes(), ["default"], "gone when no longer used")
    d.expect("stats-tube t", "NOT_FOUND")
    # Held alive by a job.
    c.use("t")
    j = c.put(b"x")
    c.use("default")
    eq(sorted(d.list_tubes()), ["default", "t"], "kept by a ready job")
    eq(d.stats_tube("t")["current-using"], "0", "current-using")
    # Held by a watcher.
    d.watch("t")
    c.expect("delete %d" % j, "DELETED")
    eq(sorted(c.list_tubes()), ["default", "t"], "kept by a watcher")
    d.ignore("t")
    eq(c.list_tubes(), ["default"], "gone when ignored")
    # Held by a buried job and a delayed job.
    c.use("t")
    j1 = c.put(b"x", delay=100)
    c.use("default")
    eq(sorted(c.list_tubes()), ["default", "t"], "kept by a delayed job")
    c.expect("delete %d" % j1, "DELETED")
    eq(c.list_tubes(), ["default"], "gone after delete")
    # A reserved job keeps its tube too.
    c.use("t")
    j2 = c.put(b"x")
    c.use("default")
    eq(c.cmd_body("reserve-job %d" % j2)[0], b"RESERVED %d 1" % j2, "reserve-job")
    eq(sorted(c.list_tubes()), ["default", "t"], "kept by a reserved job")
    c.expect("bury %d 0" % j2, "BURIED")
    eq(sorted(c.list_tubes()), ["default", "t"], "kept by a buried job")
    c.expect("delete %d" % j2, "DELETED")
    eq(c.list_tubes(), ["default"], "gone")


def test_default_tube_always_exists(srv):
    c = srv.client()
    c.use("other")
    c.watch("other")
    c.expect("ignore default", "WATCHING 1")
    eq(c.list_tubes(), ["default", "other"], "default still listed")
    eq(unq(c.stats_tube("default")["name"]), "default", "stats-tube default")
    eq(c.stats_tube("default")["current-watching"], "0", "nobody watches default")


def test_tube_gone_when_connection_closes(srv):
    c = srv.client()
    d = srv.client()
    c.use("u")
    c.watch("w")
    eq(sorted(d.list_tubes()), ["default", "u", "w"], "tubes")
    c.close()
    wait_until(lambda: d.list_tubes() == ["default"], what="tubes u, w to disappear")
    d.expect("stats-tube u", "NOT_FOUND")
    d.expect("stats-tube w", "NOT_FOUND")


def test_using_watching_counts(srv):
    a = srv.client()
    b = srv.client()
    c = srv.client()
    a.use("t")
    b.use("t")
    b.watch("t")
    c.watch("t")
    c.ignore("default")
    st = a.stats_tube("t")
    eq((st["current-using"], st["current-watching"], st["current-waiting"]),
       ("2", "2", "0"), "t: using, watching, waiting")
    st = a.stats_tube("default")
    eq((st["current-using"], st["current-watching"]), ("1", "2"), "default: using, watching")
    c.send(b"reserve\r\n")
    wait_until(lambda: a.stats_tube("t")["current-waiting"] == "1",
               what="current-waiting 1 in t")
    eq(a.stats_tube("default")["current-waiting"], "0", "default waiting")
    b.send(b"reserve\r\n")
    wait_until(lambda: a.stats_tube("t")["current-waiting"] == "2",
               what="current-waiting 2 in t")
    eq(a.stats_tube("default")["current-waiting"], "1", "default waiting")
    eq(a.stats()["current-waiting"], "2", "global waiting")
    b.close()
    wait_until(lambda: a.stats_tube("t")["current-waiting"] == "1",
               what="current-waiting back to 1")
    st = a.stats_tube("t")
    eq((st["current-using"], st["current-watching"]), ("1", "1"), "after close")


def test_tube_name_charset(srv):
    c = srv.client()
    c.expect("use " + NAME_CHARS, "USING " + NAME_CHARS)
    c.expect("watch " + NAME_CHARS, "WATCHING 2")
    for name in ("a", "0", "+x", "/", ";", ".", "..", "$", "_", "(", ")", "a-", "A-b",
                 "x" * 200):
        c.expect("use " + name, "USING " + name)
    eq(unq(c.stats_tube("x" * 200)["name"]), "x" * 200, "200-byte name")


def test_tube_name_invalid(srv):
    long = "n" * 201
    bad_names = ["-a", "-", "a b", "a*b", "a\tb", "a,b", "a:b", "a#b", "a!b", "a%b",
                 "a&b", "a'b", 'a"b', "a<b", "a=b", "a>b", "a?b", "a@b", "a[b",
                 "a\\b", "a]b", "a^b", "a`b", "a{b", "a|b", "a}b", "a~b",
                 "a\x7fb", "a\x01b", "\xe9t\xe9", long]
    cases = []
    for n in bad_names:
        nb = n.encode("latin-1")
        for cmd in (b"use ", b"watch ", b"ignore ", b"stats-tube "):
            cases.append((cmd + nb + b"\r\n", [b"BAD_FORMAT"]))
        cases.append((b"pause-tube " + nb + b" 0\r\n", [b"BAD_FORMAT"]))
    for cmd in (b"use", b"watch", b"ignore", b"stats-tube"):
        cases.append((cmd + b" \r\n", [b"BAD_FORMAT"]))
        cases.append((cmd + b"  foo\r\n", [b"BAD_FORMAT"]))
        cases.append((cmd + b" foo \r\n", [b"BAD_FORMAT"]))
        cases.append((cmd + b" foo bar\r\n", [b"BAD_FORMAT"]))
    check_cases(srv, cases)
    c = srv.client()
    eq(c.list_tubes(), ["default"], "no tube created by a bad name")


def test_pause_tube(srv):
    c = srv.client()
    c.expect("pause-tube nosuch 10", "NOT_FOUND")
    c.expect("pause-tube default 100", "PAUSED")
    st = c.stats_tube("default")
    eq(st["pause"], "100", "pause")
    check(98 <= int(st["pause-time-left"]) <= 100,
          "pause-time-left %r not ~100" % st["pause-time-left"])
    eq(st["cmd-pause-tube"], "1", "tube cmd-pause-tube")
    j = c.put(b"x")
    c.expect("reserve-with-timeout 0", "TIMED_OUT")
    # Other tubes are not paused.
    c.use("free")
    k = c.put(b"y")
    c.watch("free")
    eq(c.reserve(0)[0], k, "job from the unpaused tube")
    # reserve-job ignores the pause; peek too.
    eq(c.peek("peek %d" % j), (j, b"x"), "peek in paused tube")
    c.expect("pause-tube default 0", "PAUSED")
    st = c.stats_tube("default")
    eq((st["pause"], st["pause-time-left"]), ("0", "0"), "after unpause")
    eq(c.reserve(0)[0], j, "job after unpause")
    s = c.stats()
    eq(s["cmd-pause-tube"], "3", "global cmd-pause-tube")
    eq(c.stats_tube("default")["cmd-pause-tube"], "2", "tube cmd-pause-tube")


def test_pause_tube_max_and_existing_tube_only(srv):
    c = srv.client()
    c.use("p")
    c.expect("pause-tube p 4294967295", "PAUSED")
    eq(c.stats_tube("p")["pause"], "4294967295", "pause")
    c.expect("pause-tube p 4294967296", "BAD_FORMAT")
    c.use("default")
    eq(c.list_tubes(), ["default"], "pausing does not keep a tube alive")
    c.expect("pause-tube p 1", "NOT_FOUND")


def test_pause_survives_while_tube_exists(srv):
    c = srv.client()
    c.use("p")
    c.expect("pause-tube p 100", "PAUSED")
    d = srv.client()
    d.watch("p")
    j = c.put(b"x")
    d.expect("reserve-with-timeout 0", "TIMED_OUT")
    eq(d.stats_tube("p")["current-jobs-ready"], "1", "ready in paused tube")
    eq(d.cmd_body("reserve-job %d" % j)[0], b"RESERVED %d 1" % j,
       "reserve-job ignores pause")
