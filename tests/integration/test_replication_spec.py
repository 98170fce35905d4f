"""replication.md read sentence by sentence: the cases where tubed differed
from what the spec states (each test failed before its fix).

- §1/§4: `follow`'s address is "written as for --replica-of": the same
  strings are refused by both (exit 2 naming replica_of; BAD_FORMAT, and
  the server keeps following its primary), among them a bracketed host
  that is not an IPv6 literal, a relative unix: path and an unbracketed
  IPv6 address; an IPv6 literal in brackets is followed.
- §5: the tubed_replication_* families pass `promtool check metrics` on a
  primary and on a replica (a position, which drops to 0 during a
  snapshot, is a gauge).
- §4: discarded-records counts each change of a former primary's tail
  once (a tail of puts and deletes counts its records, not its records
  plus the jobs they made).
- §2/§4: what the clients of a primary told to `follow` see: waiting
  reserves hear DRAINING, a waiting memcache get hears SERVER_ERROR
  replica (as any get on a replica), replies held for replicas are never
  sent (the connection closes: not acknowledged), later changes are
  refused.
"""

import os
import re
import shutil
import subprocess
import tempfile

import harness
import shim_util
from harness import check, eq, no_server, tubed_only, unq
from policy_util import run_tubed
from repl_util import (EXT, Cluster, assert_converged, body, put_many, rint, snapshot,
                       wait_caught_up, wait_for)

SERVER = "none"

# Every one of these is refused by --replica-of and by follow alike.
BAD_ADDRESSES = [
    "[zz]:11300",            # brackets hold an IPv6 literal, nothing else
    "[127.0.0.1]:11300",
    "[::1%]:11300",          # an empty zone
    "::1:11300",             # IPv6 without brackets: which colon is the port?
    "unix:relative.sock",    # unix: takes an absolute path
    "bad host:11300",        # no space in a name
    "127.0.0.1:0",
    "127.0.0.1:65536",
    "127.0.0.1",
]


@no_server
@tubed_only(EXT)
def test_follow_refuses_what_replica_of_refuses(binary):
    d = tempfile.mkdtemp(prefix="tubed-replspec-")
    errors = []
    try:
        empty = os.path.join(d, "empty.conf")
        open(empty, "w").close()
        keyed = os.path.join(d, "keyed.conf")
        for a in BAD_ADDRESSES:
            with open(keyed, "w") as f:
                f.write("binlog_dir = %s\nreplica_of = %s\n" % (d, a))
            # --check-config: a start that wrongly succeeds does not hang.
            for args, what in ((["--config", empty, "-b", d, "--replica-of", a],
                                "--replica-of %r" % a),
                               (["--config", keyed], "replica_of = %s" % a)):
                rc, out, err = run_tubed(binary, args + ["--check-config"])
                if rc != 2 or "replica_of" not in err:
                    errors.append("%s: exit %r, stderr %r (want exit 2 naming replica_of)"
                                  % (what, rc, err[-160:]))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c = r.bs()
        for a in BAD_ADDRESSES:
            got = c.cmd("follow %s" % a, timeout=10)
            if got != b"BAD_FORMAT":
                errors.append("follow %s: %r (want BAD_FORMAT)" % (a, got))
        check(not errors, "%d address(es) accepted that should be refused:\n    %s"
              % (len(errors), "\n    ".join(errors)))
        eq(unq(r.repl()["primary"]), p.addr, "the replica's primary after the refused follows")
        jid = p.bs().put(b"still followed")
        wait_caught_up(p, r)
        eq(r.admin().peek("peek %d" % jid), (jid, b"still followed"),
           "a put on the primary after the refused follows")


@no_server
@tubed_only(EXT)
def test_follow_and_replica_of_an_ipv6_literal(binary):
    """[v6]:port: an IPv4-mapped IPv6 literal reaches the primary's
    127.0.0.1 listener through an IPv6 socket (no IPv6 listener needed)."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        v6 = "[::ffff:127.0.0.1]:%d" % p.port
        r = cl.node("r", "-f", "0", replica_of=v6)
        put_many(p.bs(), [body("v6", i) for i in range(5)])
        wait_caught_up(p, r)
        eq(unq(r.repl()["primary"]), v6, "primary as given")
        s = cl.node("s", "-f", "0", replica_of=p)
        wait_caught_up(p, s)
        eq(s.bs().cmd("follow %s" % v6, timeout=10), b"FOLLOWING", "follow [v6]:port")
        wait_caught_up(p, s)
        eq(unq(s.repl()["primary"]), v6, "primary after follow")
        assert_converged(p, s, "a replica following an IPv6 literal")


def _promtool(text):
    path = shutil.which("promtool") or "/usr/bin/promtool"
    if not os.path.exists(path):
        harness.fail("promtool not found: apt-get install prometheus (make deps)")
    r = subprocess.run([path, "check", "metrics"], input=text, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return r.returncode, r.stdout.decode(errors="replace")


@no_server
@tubed_only(EXT)
def test_replication_metrics_pass_promtool(binary):
    from http_util import get
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", conf="sync_replicas = 1\n")
        r = cl.node("r", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("prom", i) for i in range(5)])
        wait_caught_up(p, r)
        for n in (p, r):
            text = get(n, "/metrics").body
            check(b"tubed_replication_position" in text,
                  "node %s: no tubed_replication_position in /metrics" % n.name)
            eq(_promtool(text), (0, ""), "node %s: promtool check metrics (exit status, "
               "output)" % n.name)
            check(b"# TYPE tubed_replication_position gauge" in text,
                  "node %s: tubed_replication_position is not a gauge" % n.name)


@no_server
@tubed_only(EXT)
def test_a_tail_of_puts_and_deletes_counts_each_record_once(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        a = cl.node("a", "-f", "0", replica_of=p)
        c = p.bs()
        base = put_many(c, [body("base", i) for i in range(20)])
        wait_caught_up(p, a)
        switch = rint(a.repl(), "position")
        a.kill9()
        # The tail: 5 puts and 2 deletes of replicated jobs, 7 records
        # that a never gets.
        put_many(c, [body("tail", i) for i in range(5)])
        c.expect("delete %d" % base[0], "DELETED")
        c.expect("delete %d" % base[1], "DELETED")
        tail = rint(p.repl(), "position") - switch
        eq(tail, 7, "records in the tail (the primary's position minus the replica's)")
        # Pointed at a port held (bound, never listening) until a stops
        # following it: no other test's server can answer there.
        with harness.PortReservation() as dead:
            a.restart(replica_of="127.0.0.1:%d" % dead.port)
            eq(a.bs().cmd("promote", timeout=10), b"PROMOTED 2", "promote a")
        before = rint(p.repl(), "discarded-records")
        eq(p.bs().cmd("follow %s" % a.addr, timeout=10), b"FOLLOWING", "follow a")
        wait_caught_up(a, p)
        eq(rint(p.repl(), "discarded-records") - before, tail,
           "discarded-records of the former primary: its tail's records, each once "
           "(not also the 5 jobs its puts made)")
        want = assert_converged(a, p, "the former primary after following")
        check(base[0] in want and base[1] in want, "the jobs whose deletes were discarded "
              "are back")


@no_server
@tubed_only(EXT)
def test_clients_of_a_primary_told_to_follow(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", conf="sync_replicas = 1\n")
        r = cl.node("r", "-f", "0", replica_of=p)
        q = cl.node("q", "-f", "0")
        wait_caught_up(p, r)
        waiting = p.bs()
        waiting.watch("empty")
        waiting.ignore("default")
        waiting.send(b"reserve\r\n")
        timed = p.bs()
        timed.watch("empty")
        timed.ignore("default")
        timed.send(b"reserve-with-timeout 300\r\n")
        mget = p.mc()
        mget.send(b"get nothing/t=300000\r\n")
        mopen = p.mc()
        mopen.send(b"get nothing2/open/t=300000\r\n")
        for k in (waiting, timed, mget, mopen):
            k.expect_silence(0.2)
        r.sigstop()                   # from here replies wait for r
        held = p.bs()
        held.send(b"put 0 0 60 4\r\nheld\r\n")
        mheld = p.mc()
        mheld.send(b"set mq 0 0 4\r\nheld\r\n")
        wait_for(lambda: rint(p.repl(), "waiting-replies") == 2,
                 "two replies waiting for the stopped replica")
        eq(p.bs().cmd("follow %s" % q.addr, timeout=10), b"FOLLOWING", "follow q")
        eq(waiting.read_line(timeout=10), b"DRAINING", "a waiting reserve")
        eq(timed.read_line(timeout=10), b"DRAINING", "a waiting reserve-with-timeout")
        eq(mget.read_line(timeout=10), b"SERVER_ERROR replica", "a waiting memcache get")
        eq(mopen.read_line(timeout=10), b"SERVER_ERROR replica",
           "a waiting memcache get /open")
        # Held replies were never acknowledged: they are not sent.
        held.expect_closed(timeout=10)
        mheld.expect_closed(timeout=10)
        r.sigcont()
        eq(p.bs().cmd(b"put 0 0 60 1\r\nx", timeout=10), b"DRAINING", "a put afterwards")
        eq(mget.cmd("get nothing"), b"SERVER_ERROR replica", "a memcache get afterwards")
        wait_caught_up(q, p)
        assert_converged(q, p, "the former primary after following q")


@no_server
@tubed_only(EXT)
def test_primary_check_is_503_while_draining(binary):
    """GET /primary is 200 "when this server is a primary that takes
    writes": a draining primary (SIGUSR1) answers DRAINING to a put, so a
    load balancer must not send writers there.  /replica and the role in
    stats-replication stay as they were."""
    import signal
    with Cluster(binary) as cl:
        plain = cl.node("plain", bdir=False)
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        for n in (plain, p):
            got = n.get("/primary")
            eq((got.status, got.body), (200, b"primary\n"), "node %s: /primary" % n.name)
            n.signal(signal.SIGUSR1)
            wait_for(lambda: n.bs().stats()["draining"] == "true",
                     "node %s to drain" % n.name)
            eq(n.bs().cmd(b"put 0 0 60 1\r\nx"), b"DRAINING", "node %s: a put" % n.name)
            got = n.get("/primary")
            eq((got.status, got.body), (503, b"primary, draining\n"),
               "node %s: /primary while draining" % n.name)
        eq(unq(p.repl()["role"]), "primary", "the draining primary's role")
        eq(r.get("/replica").status, 200, "/replica on its replica")


def _fail_shim(binary, d):
    """(env for a node, flag path): pwrite fails with EIO while the flag
    file exists (the binlog appends with pwrite at offsets above 0), a
    disk that fails under a running server. Skip when no compiler."""
    flag = os.path.join(d, "fail-pwrite")
    pre = shim_util.build(binary, d, shim_util.DISK_FAULTS_C)
    return {"LD_PRELOAD": pre, "FAIL_PWRITE_FLAG": flag}, flag


def _binlog_healthy(c):
    line, data = c.cmd_body("stats-binlog")
    check(line.startswith(b"OK ") and data, "stats-binlog: %r" % line)
    return harness.parse_yaml_dict(data)["healthy"]


@no_server
@tubed_only(EXT)
def test_primary_check_is_503_while_the_binlog_fails(binary):
    """A primary whose binlog write failed answers OUT_OF_MEMORY to every
    durable command until it recovers: not "a primary that takes writes"
    for GET /primary either."""
    with Cluster(binary) as cl:
        env, flag = _fail_shim(binary, cl.tmp)
        p = cl.node("p", "-f", "0", env=env)
        c = p.bs()
        c.put(b"before")
        eq(p.get("/primary").status, 200, "/primary before the failure")
        open(flag, "w").close()
        w = p.bs()
        w.send(b"put 0 0 60 4\r\nlost\r\n")
        w.expect_closed(timeout=10)       # its reply withdrawn: never acknowledged
        eq(_binlog_healthy(c), "false", "stats-binlog healthy after the failed write")
        got = p.get("/primary")
        eq((got.status, got.body), (503, b"primary, binlog unhealthy\n"),
           "/primary while the binlog is unhealthy")
        eq(p.bs().cmd(b"put 0 0 60 1\r\nx"), b"OUT_OF_MEMORY", "a put meanwhile")
        os.unlink(flag)
        wait_for(lambda: _binlog_healthy(c) == "true", "the binlog to recover")
        got = p.get("/primary")
        eq((got.status, got.body), (200, b"primary\n"), "/primary after the recovery")


@no_server
@tubed_only(EXT)
def test_replica_answers_a_bad_put_as_a_draining_server_does(binary):
    """A put whose body is over the limit, or not followed by CR LF,
    changes nothing anywhere: a replica answers JOB_TOO_BIG or
    EXPECTED_CRLF, as a draining server (SIGUSR1) does, and the connection
    stays in step; a good put is DRAINING.  (Also sent a byte at a time:
    the terminator is checked across reads.)"""
    import signal
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "-z", 100)
        r = cl.node("r", "-f", "0", "-z", 100, replica_of=p)
        d = cl.node("d", "-f", "0", "-z", 100)
        d.signal(signal.SIGUSR1)
        wait_for(lambda: d.bs().stats()["draining"] == "true", "d to drain")
        wait_caught_up(p, r)
        data = (b"put 0 0 60 101\r\n" + b"x" * 101 + b"\r\nput 0 0 60 100\r\n" + b"y" * 100
                + b"\r\nput 0 0 60 3\r\nabcXY\r\nput 0 0 60 2\r\nab\rX\r\n"
                + b"list-tube-used\r\n")
        # (after a bad terminator the rest is read as a command: "XY",
        # then the empty line left by "\rX\r\n")
        want = [b"JOB_TOO_BIG", b"DRAINING", b"EXPECTED_CRLF", b"UNKNOWN_COMMAND",
                b"EXPECTED_CRLF", b"UNKNOWN_COMMAND", b"USING default"]
        for n in (r, d):
            for slowly in (False, True):
                c = n.bs()
                if slowly:
                    c.send_slowly(data)
                else:
                    c.send(data)
                eq([c.read_line() for _ in want], want,
                   "node %s%s: a put over -z, one at -z, two with a bad terminator, "
                   "then a read" % (n.name, " (a byte at a time)" if slowly else ""))


@no_server
@tubed_only(EXT)
def test_waiting_replies_counts_replies_not_connections(binary):
    """§5 waiting-replies: "replies held for replicas now".  Five pipelined
    puts on one connection are five replies; a memcache set that also
    registers a fanout child (two records, one reply) is one."""
    with Cluster(binary, "sync_replicas = 1\n[tube fan]\nfanout = true\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        p.mc().cmd("set fan 0 0 1\r\nx")   # (the parent exists first)
        wait_caught_up(p, r)
        r.sigstop()
        a = p.bs()
        a.send(b"".join(b"put 0 0 60 2\r\np%d\r\n" % i for i in range(5)))
        b = p.mc()
        b.send(b"set q 0 0 1\r\na\r\nset q 0 0 1\r\nb\r\n")
        c = p.mc()
        c.send(b"set fan+child 0 0 1\r\nc\r\n")
        wait_for(lambda: int(p.bs().stats()["current-jobs-ready"]) == 1 + 5 + 2 + 1,
                 "the changes applied on the primary")
        # Counted once durable here and waiting only for the replica: the
        # primary's own fsync may still be running (slow under ASan).
        wait_for(lambda: rint(p.repl(), "waiting-replies") == 8,
                 "waiting-replies of 5 INSERTED, 2 + 1 STORED to be 8")
        eq(int(p.metrics().value("tubed_replication_waiting_replies")), 8,
           "tubed_replication_waiting_replies")
        r.sigcont()
        for i in range(5):
            check(a.read_line(timeout=20).startswith(b"INSERTED "), "put %d released" % i)
        eq([b.read_line(timeout=20), b.read_line(timeout=20), c.read_line(timeout=20)],
           [b"STORED"] * 3, "the sets released")
        eq(rint(p.repl(), "waiting-replies"), 0, "waiting-replies after the release")


@no_server
@tubed_only(EXT)
def test_reload_says_the_command_line_wins(binary):
    """--sync-replicas 1 given, and the file says sync_replicas = 0: the
    command line wins over the file (extensions.md §1), so the reload keeps
    1, and says so in the log rather than leaving an operator who meant to
    release the held replies wondering why nothing happened."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--sync-replicas", 1, conf="sync_replicas = 1\n")
        p.reload("sync_replicas = 0\n")
        eq(p.repl()["sync-replicas"], "1", "sync-replicas after the reload")
        check(re.search(r"reload: sync_replicas in .* differs from the command line, "
                        r"whose value stays", p.stderr()),
              "the reload names sync_replicas: %r" % p.stderr()[-400:])
        q = cl.node("q", "-f", "0", conf="sync_replicas = 1\n")
        q.reload("sync_replicas = 0\n")
        eq(q.repl()["sync-replicas"], "0", "a file's own value changes at a reload")
        check("differs from the command line" not in q.stderr(),
              "no such line without the flag: %r" % q.stderr()[-400:])


@no_server
@tubed_only(EXT)
def test_reload_of_replica_of(binary):
    """replica_of is read at start only: a reload that changes it is
    accepted, logs that it waits for the restart, and the replica keeps
    its primary; a reload whose replica_of the next start would refuse (a
    malformed address, no binlog) is refused now, naming FILE:LINE and the
    key, and the old configuration stays in force."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        q = cl.node("q", "-f", "0")
        r = cl.node("r", "-f", "0", conf="replica_of = %s\n" % p.addr)
        wait_caught_up(p, r)
        r.reload("replica_of = %s\n" % q.addr)
        check(re.search(r"replica_of changed in .*; that takes effect at the next restart",
                        r.stderr()), "the reload names replica_of: %r" % r.stderr()[-400:])
        jid = p.bs().put(b"still p's")
        wait_caught_up(p, r)
        eq(unq(r.repl()["primary"]), p.addr, "the primary after the reload")
        for bad in ("[zz]:1", "%s" % q.addr.split(":")[0]):
            line = r.reload("sync_replicas = 3\nreplica_of = %s\n" % bad, expect_ok=False)
            check("tubed.conf:2: replica_of" in line, "reload of replica_of = %s: %r"
                  % (bad, line))
            eq(r.repl()["sync-replicas"], "0", "sync_replicas after the refused reload")
        plain = cl.node("plain", bdir=False, conf="")
        line = plain.reload("replica_of = %s\n" % p.addr, expect_ok=False)
        check("tubed.conf:1: replica_of needs a binlog" in line,
              "reload adding replica_of without a binlog: %r" % line)
        eq(r.admin().peek("peek %d" % jid), (jid, b"still p's"), "the replica follows p")


@no_server
@tubed_only(EXT)
def test_two_replicas_on_a_unix_socket_are_two_series(binary):
    """§5: per-replica lag "labelled by the replica's address".  Every
    peer of a Unix socket has the same address: the label adds the
    replica's pid, so two replicas are two series, not one name twice."""
    from http_util import get
    with Cluster(binary) as cl:
        sock = os.path.join(cl.tmp, "p.sock")
        p = cl.node("p", "-f", "0", conf="[listen repl]\naddress = unix:%s\n" % sock)
        r1 = cl.node("r1", "-f", "0", replica_of="unix:" + sock)
        r2 = cl.node("r2", "-f", "0", replica_of="unix:" + sock)
        p.bs().put(b"x")
        wait_caught_up(p, r1, r2)
        lag = p.metrics().series("tubed_replication_replica_lag_records")
        labels = sorted(l.get("replica", "") for l, v in lag)
        eq(labels, sorted("unix pid %d" % n.pid for n in (r1, r2)),
           "the replica labels of two replicas on a Unix socket")
        eq(_promtool(get(p, "/metrics").body), (0, ""), "promtool check metrics")


@no_server
@tubed_only(EXT)
def test_ids_after_a_restart_then_a_promotion(binary):
    """§4 promote: "New job ids continue above every id the replica has
    seen".  A replica that got a snapshot learns its primary's next id from
    the snapshot's end only (the highest ids may be deleted jobs'); it kept
    it in memory, so after a kill -9 and a promotion it gave out an id its
    primary had given out (1048578 after r's 1048578 and 1048579).  When
    the highest id is a live job's, its record keeps it: the restart keeps
    that job."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        first = p.bs().put(b"keep")
        wait_caught_up(p, r)
        p.kill9()
        wait_for(lambda: r.repl()["connected"] == "false", "r to see p gone")
        eq(r.admin().cmd("promote"), b"PROMOTED 2", "promote r")
        c = r.bs()
        given = [c.put(b"a"), c.put(b"b")]
        for jid in given:
            c.expect("delete %d" % jid, "DELETED")
        s = cl.node("s", "-f", "0", replica_of=r)
        wait_caught_up(r, s)
        s.kill9()
        s.restart()
        eq(sorted(snapshot(s.admin())), [first], "s's jobs after its restart")
        r.kill9()
        wait_for(lambda: s.repl()["connected"] == "false", "s to see r gone")
        eq(s.admin().cmd("promote"), b"PROMOTED 3", "promote s")
        new = s.bs().put(b"new")
        check(new > max(given), "s's first id %d after its promotion: r had given "
              "out %s" % (new, given))
        u = cl.node("u", "-f", "0", replica_of=s)
        wait_caught_up(s, u)
        u.kill9()
        u.restart()
        eq(sorted(snapshot(u.admin())), [first, new], "u's jobs after its "
           "restart (the highest id is a live job's)")


@no_server
@tubed_only(EXT)
def test_follow_behind_a_write_without_sync_replicas(binary):
    """§4 follow on a primary: "from this reply on, it is a replica". With
    sync_replicas 0 no reply waits for replicas, so a write pipelined in
    front of the follow is answered as usual, also when its reply still
    waits for this server's binlog (-f 0, or the write not yet made): the
    connection was closed with no reply at all, the put applied."""
    for flags in ((), ("-f", "0")):
        with Cluster(binary) as cl:
            p = cl.node("p", *flags)
            c = p.bs()
            c.send(b"put 0 0 60 1\r\na\r\nfollow unix:/nonexistent/tubed.sock\r\n"
                   b"put 0 0 60 1\r\nb\r\n")
            c.expect_lines([b"INSERTED 1", b"FOLLOWING", b"DRAINING"])
            eq(p.bs().cmd(b"peek 1", timeout=10), b"FOUND 1 1", "the put, kept (%s)" % (flags,))


@no_server
@tubed_only(EXT)
def test_follow_behind_a_waiting_reply_on_the_same_connection(binary):
    """§4 follow on a primary: its replies still waiting for replicas are
    withdrawn (never acknowledged) and their connections close.  A later
    reply on such a connection must not go out in their place: the
    FOLLOWING of a follow pipelined behind a waiting put was sent as the
    first reply (a client read it as the put's answer).  (A memcache get
    waiting behind a waiting set already closed with nothing: checked
    too.)"""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", conf="sync_replicas = 1\n")
        q = cl.node("q", "-f", "0")
        m = p.mc()
        m.send(b"set mq 0 0 4\r\nheld\r\nget nothing/t=300000\r\n")
        c = p.bs()
        c.send(b"put 0 0 60 4\r\nheld\r\nfollow %s\r\nput 0 0 60 1\r\nx\r\n"
               b"list-tube-used\r\n" % q.addr.encode())
        c.expect_closed(timeout=10)
        m.expect_closed(timeout=10)
        wait_for(lambda: unq(p.repl()["role"]) == "replica", "p to follow q")
        eq(p.bs().cmd(b"put 0 0 60 1\r\nx", timeout=10), b"DRAINING", "a put afterwards")
        wait_caught_up(q, p)
        assert_converged(q, p, "the former primary after following q")
