"""Extension bugs found by a hunt against spec/extensions.md: each test
failed before its fix.  The old behaviour is named in each docstring."""

import os
import tempfile

import harness
from harness import check, eq, no_server
from policy_util import (Policy, job_where, put_id, run_tubed, tube_counts,
                         wait_for)


def _list(c, tube, state, frm=0, count=1000):
    """list-jobs as a list of ids (asserts an OK reply)."""
    line, body = c.cmd_body("list-jobs %s %s %d %d" % (tube, state, frm, count))
    check(body is not None and line.startswith(b"OK "),
          "list-jobs %s %s: expected OK n, got %r" % (tube, state, line))
    return [int(x) for x in harness.parse_yaml_list(body)]


# ------------------------------------------------ list-jobs and failed moves

@no_server
def test_list_jobs_shows_job_whose_expiry_move_failed(binary):
    """An expired job that cannot move to its full move_expired_to tube
    stays where it was (extensions.md §1): peek, reserve and stats-tube
    see it, so list-jobs must list it too.  The old list-jobs hid every
    job past its max_age, even one left in its tube waiting for a retry,
    so 'list-jobs b all' answered an empty page for a tube whose
    stats-tube said current-jobs-ready: 2."""
    conf = ("[tube b]\nmax_age = 1s\nmove_expired_to = bx\n"
            "[tube bx]\nmax_items = 1\n")
    with Policy(binary, conf) as p:
        c = p.srv.client()
        c.use("b")
        ids = [put_id(c, b"j%d" % i) for i in range(3)]
        # The first goes to bx and fills it; the others cannot follow.
        wait_for(lambda: job_where(c, ids[0]) == ("bx", "ready"),
                 "job %d to move to bx" % ids[0])
        wait_for(lambda: "cannot move expired job %d" % ids[1]
                 in p.srv.stderr_text(), "the failed move of job %d" % ids[1])
        eq(tube_counts(c, "b")[1], 2, "stats-tube b current-jobs-ready")
        for jid in ids[1:]:
            eq(job_where(c, jid), ("b", "ready"), "stats-job %d" % jid)
        eq(_list(c, "b", "all"), ids[1:], "list-jobs b all")
        eq(_list(c, "b", "ready"), ids[1:], "list-jobs b ready")
        eq(_list(c, "b", "ready", ids[2]), ids[2:], "list-jobs b ready from the last")
        eq(_list(c, "bx", "all"), ids[:1], "list-jobs bx all")


# ------------------------------------------------ fanout turned on at reload

@no_server
def test_reload_turning_fanout_on_makes_existing_children(binary):
    """A tube named P+CHILD is P's fanout child while P has fanout on
    (extensions.md §1), and a reload applies at once.  The old reload only
    let children go when fanout went off; a P+CHILD tube that existed when
    fanout came on (a worker watching it, or a child let go by an earlier
    reload) got no copies until some client named it again, so a worker
    already watching it waited for ever.  Now it is a child from the
    reload on (journaled: it stays across a kill -9), and jobs put into P
    before the reload are still not copied."""
    with Policy(binary, "", bdir=True) as p:
        c = p.srv.client()
        w = p.srv.client()
        w.watch("P+x")                      # exists, an ordinary tube
        c.use("P")
        before = put_id(c, b"before")
        eq(_list(c, "P+x", "all"), [], "P+x before fanout is on")

        p.rewrite("[tube P]\nfanout = true\n")
        p.reload()
        after = put_id(c, b"after")
        copies = _list(c, "P+x", "all")
        eq(len(copies), 1, "copies in P+x of the put after the reload")
        check(copies[0] not in (before, after), "the copy has its own id")
        w.ignore("default")
        got = w.reserve(timeout=0)
        eq(got, (copies[0], b"after"), "the watching worker's job")
        w.expect("delete %d" % got[0], "DELETED")

        # Off, then on again: let go, then a child again.
        p.rewrite("")
        p.reload()
        put_id(c, b"off")
        eq(_list(c, "P+x", "all"), [], "P+x while fanout is off")
        p.rewrite("[tube P]\nfanout = true\n")
        p.reload()
        put_id(c, b"on again")
        eq(len(_list(c, "P+x", "all")), 1, "P+x after fanout came back")

        # Registered in the binlog: after a kill -9 P+x still exists (no
        # client names it) and still gets copies.
        p.kill9()
        p.restart()
        c = p.srv.client()
        check("P+x" in c.list_tubes(), "P+x after the restart: %r" % c.list_tubes())
        c.use("P")
        put_id(c, b"after restart")
        eq(len(_list(c, "P+x", "all")), 2, "P+x jobs after the restart")


# ------------------------------------------ documented reading (not a bug)

@no_server
def test_move_ignores_target_max_item_size(binary):
    """extensions.md gives move-job MOVED, NOT_FOUND or OUT_OF_MEMORY
    (target full) and nothing for max_item_size, which judges bodies that
    arrive (put answers JOB_TOO_BIG).  The reading doc/configuration.md
    states: a job that exists moves whatever its size; only max_items and
    max_size refuse, and a refused move leaves no empty tube behind."""
    conf = "[tube small]\nmax_item_size = 1\n[tube tiny]\nmax_size = 1\n"
    with Policy(binary, conf) as p:
        c = p.srv.client()
        jid = put_id(c, b"hello")
        c.use("small")
        eq(c.cmd("put 0 0 60 5\r\nhello"), b"JOB_TOO_BIG", "put into small")
        c.use("default")
        eq(c.cmd("move-job %d tiny" % jid), b"OUT_OF_MEMORY", "move into tiny")
        check("tiny" not in c.list_tubes(), "tiny left behind: %r" % c.list_tubes())
        eq(job_where(c, jid), ("default", "ready"), "job after the refused move")
        eq(c.cmd("move-job %d small" % jid), b"MOVED", "move into small")
        eq(job_where(c, jid), ("small", "ready"), "job after the move")


# ------------------------------------- side ports beside a Unix -l address

@no_server
def test_side_port_with_unix_listen_address_refused(binary):
    """--metrics-port and --memcache-port listen on -l's host.  With
    -l unix:PATH the old server bound PATH again for them: the metrics
    listener replaced the socket file, so a beanstalk client connecting to
    PATH got 'HTTP/1.1 400 Bad Request' and the beanstalk listener was
    unreachable.  Now the pair is refused at start (status 2, nothing
    served, the socket file not created) and by --check-config, with the
    file's line when the file set the port."""
    with tempfile.TemporaryDirectory(prefix="tubed-exthunt-") as d:
        sock = os.path.join(d, "bs.sock")
        for flag, proto in (("--metrics-port", "http"), ("--memcache-port", "memcache")):
            rc, out, err = run_tubed(binary, ["-l", "unix:" + sock, flag, "29999"])
            eq(rc, 2, "exit status of -l unix:PATH %s" % flag)
            eq(err.strip(), "%s 29999 needs a TCP listen address, not unix:%s: give it "
               "one with a [listen] section (protocol = %s)" % (flag, sock, proto),
               "stderr of -l unix:PATH %s" % flag)
            check(not os.path.exists(sock), "%s: socket file created" % flag)
        conf = os.path.join(d, "tubed.conf")
        with open(conf, "w") as f:
            f.write("listen = unix:%s\n# the HTTP port\nmetrics_port = 9100\n" % sock)
        for extra in ([], ["--check-config"]):
            rc, out, err = run_tubed(binary, ["--config", conf] + extra)
            eq(rc, 2, "exit status, file, %r" % extra)
            eq(err.strip(), "%s:3: metrics_port = 9100 needs a TCP listen address, not "
               "unix:%s: give it one with a [listen] section (protocol = http)"
               % (conf, sock), "stderr, file, %r" % extra)
        # A TCP -l on the command line wins over the file's: fine.
        rc, out, err = run_tubed(binary, ["--config", conf, "-l", "127.0.0.1",
                                          "--check-config"])
        eq((rc, out.strip()), (0, conf + ": ok"), "check with -l 127.0.0.1")


# ------------------------------------------- two listeners on one port

@no_server
def test_two_listeners_on_one_port_refused(binary):
    """-p, --memcache-port and --metrics-port share -l's host.  Given one
    port for two of them, the old server said 'ok' to --check-config and
    failed only at bind ('Address already in use', exit 1), after the
    operator had been told the configuration was fine.  Now both the start
    and --check-config refuse it with status 2, naming the two settings
    (with the file's line when the file set them); distinct ports pass."""
    with tempfile.TemporaryDirectory(prefix="tubed-exthunt-") as d:
        for args, want in (
                (["-p", "29998", "--metrics-port", "29998"],
                 "-p and --metrics-port are both port 29998"),
                (["-p", "29997", "--memcache-port", "29996", "--metrics-port", "29996"],
                 "--memcache-port and --metrics-port are both port 29996")):
            rc, out, err = run_tubed(binary, ["-l", "127.0.0.1"] + args)
            eq((rc, err.strip()), (2, want + ": each listener needs its own"), "start %r" % args)
        conf = os.path.join(d, "tubed.conf")
        with open(conf, "w") as f:
            f.write("port = 29995\nmemcache_port = 29995\n")
        rc, out, err = run_tubed(binary, ["--config", conf, "-l", "127.0.0.1", "--check-config"])
        eq((rc, err.strip()), (2, "port (%s:1) and memcache_port (%s:2) are both port 29995: "
                                  "each listener needs its own" % (conf, conf)), "file")
        # The command line wins key by key: a port of its own is fine.
        rc, out, err = run_tubed(binary, ["--config", conf, "-l", "127.0.0.1", "-p", "29994",
                                          "--check-config"])
        eq((rc, out.strip()), (0, conf + ": ok"), "file with -p")
