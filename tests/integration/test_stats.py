"""stats, stats-tube, stats-job: key order, value formats, counters."""

import os
import re

import harness

from harness import (check, eq, fail, no_server, server_args, start_server, tubed_only,
                     unq, wait_until)

STATS_KEYS = """current-jobs-urgent current-jobs-ready current-jobs-reserved
current-jobs-delayed current-jobs-buried cmd-put cmd-peek cmd-peek-ready
cmd-peek-delayed cmd-peek-buried cmd-reserve cmd-reserve-with-timeout cmd-delete
cmd-release cmd-use cmd-watch cmd-ignore cmd-bury cmd-kick cmd-touch cmd-stats
cmd-stats-job cmd-stats-tube cmd-list-tubes cmd-list-tube-used
cmd-list-tubes-watched cmd-pause-tube job-timeouts total-jobs max-job-size
current-tubes current-connections current-producers current-workers
current-waiting total-connections pid version rusage-utime rusage-stime uptime
binlog-oldest-index binlog-current-index binlog-records-migrated
binlog-records-written binlog-max-size draining id hostname os platform""".split()

TUBE_KEYS = """name current-jobs-urgent current-jobs-ready current-jobs-reserved
current-jobs-delayed current-jobs-buried total-jobs current-using
current-watching current-waiting cmd-delete cmd-pause-tube pause
pause-time-left""".split()

JOB_KEYS = """id tube state pri age delay ttr time-left file reserves timeouts
releases buries kicks""".split()

UINT = re.compile(r"(0|[1-9][0-9]*)")
RUSAGE = re.compile(r"[0-9]+\.[0-9]{6}")
QUOTED = re.compile(r'"[^"\\\n]*"')


def test_stats_key_order(srv):
    c = srv.client()
    st = c.stats()
    eq(len(STATS_KEYS), 51, "spec key count")
    eq(list(st)[:51], STATS_KEYS, "stats keys (first 51, in order)")


def test_stats_extra_keys_only_after(srv):
    # Extra keys may follow the 51 standard ones; none may repeat them.
    c = srv.client()
    keys = list(c.stats())
    for k in keys[51:]:
        check(k not in STATS_KEYS, "standard key %r repeated after the first 51" % k)


def test_stats_tube_key_order(srv):
    c = srv.client()
    eq(list(c.stats_tube("default")), TUBE_KEYS, "stats-tube keys")


def test_stats_job_key_order(srv):
    c = srv.client()
    j = c.put(b"x")
    eq(list(c.stats_job(j)), JOB_KEYS, "stats-job keys")


def test_time_left_right_after_the_command_that_set_it(srv):
    """beanstalkd reads its clock anew for each command: in the packet that
    sets a pause, a delay or a TTR, the stats that follow show one whole
    second less than was asked (the loop's one clock reading showed it
    all)."""
    c = srv.client()
    c.send(b"pause-tube default 10\r\nstats-tube default\r\n")
    eq(c.read_line(), b"PAUSED", "pause-tube")
    line, body = c.read_reply()
    eq(harness.parse_yaml_dict(body)["pause-time-left"], "9", "pause-time-left at once")
    c.expect("pause-tube default 0", "PAUSED")
    c.send(b"put 0 100 60 1\r\nx\r\nstats-job 1\r\n")
    line = c.read_line()
    check(line.startswith(b"INSERTED "), "put: %r" % line)
    jid = int(line.split()[1])
    c.send(b"put 0 0 100 1\r\ny\r\nreserve-job %d\r\nstats-job %d\r\n" % (jid + 1, jid + 1))
    _, body = c.read_reply()
    eq(harness.parse_yaml_dict(body)["time-left"], "99", "a delay's time-left at once")
    eq(c.read_line(), b"INSERTED %d" % (jid + 1), "second put")
    eq(c.read_reply()[0], b"RESERVED %d 1" % (jid + 1), "reserve-job")
    _, body = c.read_reply()
    eq(harness.parse_yaml_dict(body)["time-left"], "99", "a TTR's time-left at once")


def test_stats_value_formats(srv):
    c = srv.client()
    st = c.stats()
    for k in STATS_KEYS:
        v = st[k]
        if k in ("rusage-utime", "rusage-stime"):
            check(RUSAGE.fullmatch(v), "%s: %r is not seconds with six decimals" % (k, v))
        elif k == "draining":
            eq(v, "false", "draining")
        elif k == "id":
            check(re.fullmatch(r"[0-9a-f]{16}", v), "id %r is not 16 hex digits" % v)
        elif k == "version":
            check(QUOTED.fullmatch(v), "version %r is not a quoted string" % v)
        elif k in ("hostname", "os", "platform"):
            pass   # quoting differs between 1.12 and 1.13; see the tubed-only test
        else:
            check(UINT.fullmatch(v), "%s: %r is not a plain unsigned integer" % (k, v))
    eq(st["pid"], str(srv.pid), "pid")
    eq(st["max-job-size"], "65535", "max-job-size")
    eq(st["binlog-max-size"], "10485760", "binlog-max-size without -b")
    for k in ("binlog-oldest-index", "binlog-current-index", "binlog-records-migrated",
              "binlog-records-written"):
        eq(st[k], "0", k)
    eq(st["current-connections"], "1", "current-connections")
    eq(st["current-tubes"], "1", "current-tubes")
    un = os.uname()
    eq(unq(st["hostname"]), un.nodename, "hostname")
    eq(unq(st["os"]), un.version, "os (uname version)")
    eq(unq(st["platform"]), un.machine, "platform")
    # The id is per process: same on a second call.
    eq(c.stats()["id"], st["id"], "id stable within a process")


@tubed_only("1.13: hostname, os, platform are double-quoted (1.12: bare)")
def test_stats_strings_quoted(srv):
    c = srv.client()
    st = c.stats()
    un = os.uname()
    eq(st["hostname"], '"%s"' % un.nodename, "hostname")
    eq(st["os"], '"%s"' % un.version, "os")
    eq(st["platform"], '"%s"' % un.machine, "platform")
    check(QUOTED.fullmatch(st["version"]), "version %r not quoted" % st["version"])
    check(st["version"] != '"1.12"', "version must be tubed's own")


def test_reference_version_is_quoted(srv):
    c = srv.client()
    reply, body = c.cmd_body("stats")
    check(re.search(rb'\nversion: "[^"\n]+"\n', body),
          "version line not quoted in %r" % body[:1200])


@tubed_only("1.13: stats-tube name and stats-job tube are double-quoted")
def test_stats_tube_and_job_names_quoted(srv):
    c = srv.client()
    c.use("my-tube")
    j = c.put(b"x")
    eq(c.stats_tube("my-tube")["name"], '"my-tube"', "stats-tube name")
    eq(c.stats_job(j)["tube"], '"my-tube"', "stats-job tube")
    eq(c.stats_tube("default")["name"], '"default"', "stats-tube default name")


@tubed_only("1.13 quoting: exact stats-tube bytes")
def test_stats_tube_exact_bytes(srv):
    c = srv.client()
    body = (b'---\nname: "default"\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 0\n'
            b"current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\ncurrent-jobs-buried: 0\n"
            b"total-jobs: 0\ncurrent-using: 1\ncurrent-watching: 1\ncurrent-waiting: 0\n"
            b"cmd-delete: 0\ncmd-pause-tube: 0\npause: 0\npause-time-left: 0\n")
    eq(c.cmd_body("stats-tube default"), (b"OK %d" % len(body), body), "stats-tube default")


@tubed_only("1.13 quoting: exact stats-job bytes")
def test_stats_job_exact_bytes(srv):
    c = srv.client()
    j = c.put(b"x", pri=7, ttr=30)
    body = (b'---\nid: 1\ntube: "default"\nstate: ready\npri: 7\nage: 0\ndelay: 0\n'
            b"ttr: 30\ntime-left: 0\nfile: 0\nreserves: 0\ntimeouts: 0\nreleases: 0\n"
            b"buries: 0\nkicks: 0\n")
    eq(c.cmd_body("stats-job %d" % j), (b"OK %d" % len(body), body), "stats-job")


def test_stats_tube_values(srv):
    c = srv.client()
    c.use("t")
    c.put(b"a", pri=1)
    c.put(b"b", pri=2000)
    c.put(b"c", delay=100)
    r = c.put(b"d")
    bur = c.put(b"e")
    for j in (r, bur):
        eq(c.cmd_body("reserve-job %d" % j)[0], b"RESERVED %d 1" % j, "reserve-job")
    c.expect("bury %d 0" % bur, "BURIED")
    st = c.stats_tube("t")
    want = {"current-jobs-urgent": "1", "current-jobs-ready": "2",
            "current-jobs-reserved": "1", "current-jobs-delayed": "1",
            "current-jobs-buried": "1", "total-jobs": "5", "current-using": "1",
            "current-watching": "0", "current-waiting": "0", "cmd-delete": "0",
            "cmd-pause-tube": "0", "pause": "0", "pause-time-left": "0"}
    eq({k: st[k] for k in want}, want, "stats-tube t")
    eq(unq(st["name"]), "t", "name")
    g = c.stats()
    eq((g["current-jobs-urgent"], g["current-jobs-ready"], g["current-jobs-reserved"],
        g["current-jobs-delayed"], g["current-jobs-buried"], g["total-jobs"]),
       ("1", "2", "1", "1", "1", "5"), "global job counts")
    c.expect("stats-tube nosuch", "NOT_FOUND")


def test_stats_job_values(srv):
    c = srv.client()
    j = c.put(b"x", pri=3, delay=50, ttr=20)
    st = c.stats_job(j)
    eq(st["id"], str(j), "id")
    eq((st["state"], st["pri"], st["delay"], st["ttr"], st["file"]),
       ("delayed", "3", "50", "20", "0"), "state pri delay ttr file")
    check(48 <= int(st["time-left"]) <= 50, "delayed time-left %r" % st["time-left"])
    check(UINT.fullmatch(st["age"]) and int(st["age"]) <= 2, "age %r" % st["age"])
    c.expect("kick-job %d" % j, "KICKED")
    st = c.stats_job(j)
    eq((st["state"], st["time-left"], st["kicks"]), ("ready", "0", "1"), "after kick")
    eq(c.reserve(0)[0], j, "reserve")
    st = c.stats_job(j)
    check(18 <= int(st["time-left"]) <= 20, "reserved time-left %r" % st["time-left"])
    c.expect("bury %d 9" % j, "BURIED")
    st = c.stats_job(j)
    eq((st["state"], st["pri"], st["time-left"], st["buries"], st["reserves"]),
       ("buried", "9", "0", "1", "1"), "after bury")
    c.expect("stats-job 999", "NOT_FOUND")
    c.expect("stats-job 0", "NOT_FOUND")


def test_stats_counters(srv):
    c = srv.client()
    j = c.put(b"x")
    c.cmd_body("peek %d" % j)
    c.cmd_body("peek-ready")
    c.cmd_body("peek-delayed")
    c.cmd_body("peek-buried")
    c.reserve()
    c.cmd("reserve-with-timeout 0")
    c.cmd("touch %d" % j)
    c.cmd("release %d 0 0" % j)
    c.reserve()
    c.cmd("bury %d 0" % j)
    c.cmd("kick 1")
    c.cmd("use a")
    c.cmd("watch a")
    c.cmd("ignore a")
    c.cmd_body("stats-job %d" % j)
    c.cmd_body("stats-tube default")
    c.cmd_body("list-tubes")
    c.cmd("list-tube-used")
    c.cmd_body("list-tubes-watched")
    c.cmd("pause-tube default 0")
    c.cmd("delete %d" % j)
    st = c.stats()
    want = {"cmd-put": 1, "cmd-peek": 1, "cmd-peek-ready": 1, "cmd-peek-delayed": 1,
            "cmd-peek-buried": 1, "cmd-reserve": 2, "cmd-reserve-with-timeout": 1,
            "cmd-delete": 1, "cmd-release": 1, "cmd-use": 1, "cmd-watch": 1,
            "cmd-ignore": 1, "cmd-bury": 1, "cmd-kick": 1, "cmd-touch": 1,
            "cmd-stats": 1, "cmd-stats-job": 1, "cmd-stats-tube": 1,
            "cmd-list-tubes": 1, "cmd-list-tube-used": 1,
            "cmd-list-tubes-watched": 1, "cmd-pause-tube": 1, "total-jobs": 1,
            "job-timeouts": 0, "current-producers": 1, "current-workers": 1}
    eq({k: int(st[k]) for k in want}, want, "counters")


def test_counters_not_incremented_by_bad_format(srv):
    c = srv.client()
    for line in ("delete x", "release 1", "bury x 1", "touch ", "kick ", "peek x",
                 "stats-job -1", "stats-tube a b", "use -x", "watch a b", "ignore -a",
                 "pause-tube a", "put 1", "reserve-with-timeout 99999999999999999999",
                 "list-tubes x", "peek-ready x", "stats x"):
        c.expect(line, "BAD_FORMAT")
    st = c.stats()
    bad = {k: v for k, v in st.items() if k.startswith("cmd-") and v != "0"
           and k != "cmd-stats"}
    eq(bad, {}, "cmd-* counters after only BAD_FORMAT commands")
    eq(st["cmd-stats"], "1", "cmd-stats")


def test_connection_counts(srv):
    a = srv.client()
    st = a.stats()
    base_total = int(st["total-connections"])
    eq(st["current-connections"], "1", "current-connections")
    b = srv.client()
    c = srv.client()
    b.expect("list-tube-used", "USING default")   # make sure both were accepted
    c.expect("list-tube-used", "USING default")
    st = a.stats()
    eq(st["current-connections"], "3", "current-connections")
    eq(int(st["total-connections"]), base_total + 2, "total-connections")
    b.close()
    c.send(b"quit\r\n")
    c.expect_closed()
    wait_until(lambda: a.stats()["current-connections"] == "1",
               what="current-connections back to 1")
    eq(int(a.stats()["total-connections"]), base_total + 2, "total-connections kept")


@no_server
def test_stats_id_differs_between_processes(binary):
    with start_server(binary) as s1, start_server(binary) as s2:
        a = s1.client().stats()["id"]
        b = s2.client().stats()["id"]
        check(a != b, "two server processes have the same id %s" % a)


@server_args("-z", "1000")
def test_max_job_size_in_stats(srv):
    c = srv.client()
    eq(c.stats()["max-job-size"], "1000", "max-job-size")


def test_stats_reply_length_matches(srv):
    c = srv.client()
    for cmd in ("stats", "stats-tube default", "list-tubes", "list-tubes-watched"):
        c.send(cmd.encode() + b"\r\n")
        line = c.read_line()
        m = re.fullmatch(rb"OK (\d+)", line)
        check(m, "%s: reply %r" % (cmd, line))
        n = int(m.group(1))
        data = c.read_exact(n + 2)
        eq(data[-2:], b"\r\n", "%s: data followed by CRLF" % cmd)
        check(b"\r" not in data[:-2], "%s: CR inside data" % cmd)
        check(data.endswith(b"\n\r\n"), "%s: last data line ends with LF" % cmd)
    c.expect("list-tube-used", "USING default")
