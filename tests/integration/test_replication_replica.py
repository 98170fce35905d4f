"""A replica to clients and operators (replication.md §1, §2, §5).

- Every beanstalk command that would change a job or a tube answers
  DRAINING on a replica, the connection stays in step, nothing changes;
  every read command answers from the replica's state, as the primary does.
- memcache: every changing command answers SERVER_ERROR replica; get
  q/peek, stats, dump_stats, dump_config, version work.
- HTTP: /primary and /replica on both roles, and /replica once the primary
  is gone.
- stats-replication: the keys in the spec's order, their values on a plain
  server, a primary and a replica; tubed_replication_* metrics.
- Config errors: replica_of or sync_replicas above 0 without a binlog
  directory exit 2 naming the key, also under --check-config; bad values.
"""

import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading

import harness
import repl_util
from harness import check, check_cases, eq, no_server, tubed_only, unq
from policy_util import port_listening, run_tubed
from repl_util import (EXT, REPL_KEYS, Cluster, body, put_many, reserve_job,
                       rint, snapshot, stats_replication, wait_caught_up,
                       wait_for, assert_same)

SERVER = "none"


def _pair_with_jobs(cl):
    """A primary with a job in every state (one held reserved) and a
    caught-up replica.  Returns (p, r, ids, held connection)."""
    p = cl.node("p", "-f", "0")
    r = cl.node("r", "-f", "0", replica_of=p)
    c = p.bs()
    c.use("t")
    ids = put_many(c, [body("rep", i) for i in range(8)],
                   pri=[10, 20, 30, 40, 50, 60, 70, 2 ** 31],
                   delay=[0, 0, 0, 0, 0, 600, 700, 0])
    w = p.bs()
    w.watch("t")
    reserve_job(w, ids[3])
    w.expect("bury %d 5" % ids[3], "BURIED")
    reserve_job(w, ids[4])
    w.expect("bury %d 6" % ids[4], "BURIED")
    reserve_job(w, ids[7])                   # held reserved on the primary
    wait_caught_up(p, r)
    return p, r, ids, w


@no_server
@tubed_only(EXT)
def test_replica_answers_draining_to_every_change(binary):
    with Cluster(binary) as cl:
        p, r, ids, held = _pair_with_jobs(cl)
        before = snapshot(r.admin())
        ready, buried, delayed = ids[0], ids[3], ids[5]
        cases = [
            (b"put 0 0 60 5\r\nhello\r\n", ["DRAINING"]),
            (b"put 1 2 3 0\r\n\r\n", ["DRAINING"]),
            (b"reserve\r\n", ["DRAINING"]),
            (b"reserve-with-timeout 0\r\n", ["DRAINING"]),
            (b"reserve-with-timeout 5\r\n", ["DRAINING"]),
            (b"reserve-job %d\r\n" % ready, ["DRAINING"]),
            (b"delete %d\r\n" % ready, ["DRAINING"]),
            (b"delete %d\r\n" % ids[7], ["DRAINING"]),
            (b"release %d 0 0\r\n" % ready, ["DRAINING"]),
            (b"bury %d 0\r\n" % ready, ["DRAINING"]),
            (b"touch %d\r\n" % ready, ["DRAINING"]),
            (b"kick 10\r\n", ["DRAINING"], "t"),
            (b"kick-job %d\r\n" % buried, ["DRAINING"]),
            (b"kick-job %d\r\n" % delayed, ["DRAINING"]),
            (b"pause-tube t 10\r\n", ["DRAINING"]),
            (b"flush-tube t\r\n", ["DRAINING"]),
            (b"move-job %d other\r\n" % ready, ["DRAINING"]),
            (b"move-job %d other\r\n" % buried, ["DRAINING"]),
        ]
        # kick acts on the used tube: use t first (its USING is expected).
        cases = [((b"use t\r\n" + c[0], ["USING t"] + c[1], "t") if len(c) > 2
                  else c) for c in cases]
        check_cases(r.srv, cases)
        after = snapshot(r.admin())
        assert_same(before, after, "the replica after the refused commands",
                    "before", "after")
        st = r.admin().stats_tube("t")
        eq(st["pause"], "0", "pause of t on the replica after pause-tube")
        # The primary's state is untouched too, and the replica still
        # follows it.
        c = p.bs()
        c.use("t")
        jid = c.put(b"after the refusals")
        wait_caught_up(p, r)
        eq(r.admin().peek("peek %d" % jid), (jid, b"after the refusals"),
           "peek of a job put on the primary after the refusals")


@no_server
@tubed_only(EXT)
def test_replica_serves_reads(binary):
    with Cluster(binary) as cl:
        p, r, ids, held = _pair_with_jobs(cl)
        pc, rc = p.bs(), r.bs()
        for c in (pc, rc):
            c.use("t")
        for cmd in ("peek-ready", "peek-delayed", "peek-buried",
                    "peek %d" % ids[2], "peek %d" % ids[6], "peek 999999"):
            eq(rc.cmd_body(cmd), pc.cmd_body(cmd), "%s on the replica "
               "against the primary" % cmd)
        # The job reserved on the primary is ready on the replica.
        eq(unq(rc.stats_job(ids[7])["state"]), "ready",
           "stats-job of the job reserved on the primary")
        for j in ids[:7]:
            a, b = pc.stats_job(j), rc.stats_job(j)
            for k in ("id", "tube", "state", "pri", "ttr", "delay"):
                eq(b[k], a[k], "stats-job %d %s on the replica" % (j, k))
        for j in ids[5:7]:
            a, b = pc.stats_job(j), rc.stats_job(j)
            check(abs(int(a["time-left"]) - int(b["time-left"])) <= 3,
                  "time-left of delayed job %d: %s on the primary, %s on the "
                  "replica" % (j, a["time-left"], b["time-left"]))
        st = rc.stats_tube("t")
        for k, v in (("current-jobs-ready", "4"), ("current-jobs-delayed", "2"),
                     ("current-jobs-buried", "2"), ("current-jobs-reserved", "0")):
            eq(st[k], v, "stats-tube t %s on the replica" % k)
        eq(rc.list_tubes(), pc.list_tubes(), "list-tubes")
        for state, want in (("ready", [ids[0], ids[1], ids[2], ids[7]]),
                            ("delayed", ids[5:7]), ("buried", ids[3:5]),
                            ("reserved", [])):
            line, data = rc.cmd_body("list-jobs t %s 0 1000" % state)
            eq(harness.parse_yaml_list(data or b"---\n"),
               [str(j) for j in want], "list-jobs t %s on the replica (%r)"
               % (state, line))
        for cmd in ("stats", "stats-tubes", "stats-binlog", "stats-replication"):
            line, data = rc.cmd_body(cmd)
            check(line.startswith(b"OK ") and data and data.startswith(b"---\n"),
                  "%s on the replica: %r" % (cmd, line))
        rc.expect("list-tube-used", "USING t")
        rc.expect("use other", "USING other")
        rc.expect("watch t", "WATCHING 2")
        rc.expect("watch u", "WATCHING 3")
        rc.expect("ignore u", "WATCHING 2")
        eq(rc.list_tubes_watched(), ["default", "t"], "list-tubes-watched")
        rc.send(b"quit\r\n")
        rc.expect_closed()


def _mc_once(r, data):
    """Send data on a fresh memcache connection; the first reply line."""
    m = r.mc()
    m.send(data)
    try:
        return m.read_line()
    finally:
        m.close()


@no_server
@tubed_only(EXT)
def test_replica_memcache_refusals(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        pm = p.mc()
        for i in range(3):
            pm.store("q", b"item %d" % i)
        wait_caught_up(p, r)
        before = snapshot(r.admin())
        refused = [b"set q 0 0 1\r\na\r\n", b"set new 0 0 1\r\na\r\n",
                   b"get q\r\n", b"get q/open\r\n", b"get q/close\r\n",
                   b"get q/abort\r\n", b"get q/close/open\r\n",
                   b"get q/t=100\r\n", b"gets q\r\n",
                   b"delete q\r\n", b"flush q\r\n", b"flush_all\r\n",
                   b"flush_expired q\r\n", b"flush_all_expired\r\n"]
        bad = []
        for data in refused:
            got = _mc_once(r, data)
            if got != b"SERVER_ERROR replica":
                bad.append((data, got))
        check(not bad, "memcache on the replica: expected SERVER_ERROR "
              "replica, got: %s" % bad)
        after = snapshot(r.admin())
        assert_same(before, after, "the replica after the refused memcache "
                    "commands", "before", "after")
        m = r.mc()
        eq(m.get("q/peek"), b"item 0", "get q/peek on the replica")
        m.sync()
        st = m.stats()
        check("queue_q_items" in st, "stats on the replica: no queue_q_items "
              "(%s)" % list(st)[-8:])
        eq(st["queue_q_items"], "3", "queue_q_items on the replica")
        lines = m.lines_until_end("dump_stats")
        check(b"queue 'q' {" in lines, "dump_stats on the replica: %r" % lines[:5])
        m.lines_until_end("dump_config")
        # The primary still takes them.
        eq(pm.get("q"), b"item 0", "get q on the primary")


@no_server
@tubed_only(EXT)
def test_http_primary_and_replica(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        got = p.get("/primary")
        eq((got.status, got.body.strip()), (200, b"primary"), "GET /primary on the primary")
        got = p.get("/replica")
        eq(got.status, 503, "GET /replica on the primary (body %r)" % got.body)
        got = r.get("/replica")
        eq((got.status, got.body.strip()), (200, b"replica"), "GET /replica on the replica")
        got = r.get("/primary")
        eq(got.status, 503, "GET /primary on the replica (body %r)" % got.body)
        check(b"replica" in got.body, "GET /primary on a replica: the body "
              "names the role: %r" % got.body)
        eq(r.get("/healthz").status, 200, "GET /healthz on the replica")
        p.kill9()
        wait_for(lambda: r.get("/replica").status == 503,
                 "GET /replica to answer 503 once the primary is gone")
        got = r.get("/replica")
        check(got.body.strip(), "GET /replica 503 says why: %r" % got.body)


@no_server
@tubed_only(EXT)
def test_server_without_a_binlog_says_so(binary):
    """Replication needs a binlog on both ends. A server started without -b
    answers `follow` NO_BINLOG (not BAD_FORMAT: the address was fine) and
    stays a primary; tubed-cli says why; a replica pointed at it says in
    last-error that it keeps no binlog (it used to call it a replica)."""
    from cli_util import run_cli
    with Cluster(binary) as cl:
        plain = cl.node("plain", bdir=False)
        p = cl.node("p", "-f", "0")
        eq(plain.admin().cmd("follow %s" % p.addr, timeout=10), b"NO_BINLOG",
           "follow on a server without -b")
        eq(unq(plain.repl()["role"]), "primary", "it stays a primary")
        plain.admin().put(b"still taken")
        run = run_cli(binary, plain.port, "follow", p.addr)
        check(run.rc != 0 and "NO_BINLOG" in run.err and "-b" in run.err,
              "tubed-cli follow on a server without -b: %r" % run)
        r = cl.node("r", "-f", "0", replica_of=plain)
        wait_for(lambda: "no binlog" in unq(r.repl()["last-error"]),
                 "the replica's last-error to say its primary keeps no binlog",
                 timeout=20)
        eq(r.repl()["connected"], "false", "connected")


@no_server
@tubed_only(EXT)
def test_stats_replication_keys_and_values(binary):
    with Cluster(binary) as cl:
        plain = cl.node("plain", bdir=False)
        d = stats_replication(plain.admin())
        eq({k: d[k] for k in REPL_KEYS},
           {"role": '"primary"', "epoch": "1", "position": d["position"],
            "primary": '""', "connected": "true", "lag-records": "0",
            "sync-replicas": "0", "connected-replicas": "0",
            "caught-up-replicas": "0", "waiting-replies": "0",
            "discarded-records": "0", "last-error": '""'},
           "stats-replication of a server without -b")
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        c = p.bs()
        pos0 = rint(p.repl(), "position")
        for i in range(3):
            c.put(b"x%d" % i)
        wait_caught_up(p, r)
        ps, rs = p.repl(), r.repl()
        check(rint(ps, "position") >= pos0 + 3, "position after 3 puts: %d "
              "then %s" % (pos0, ps["position"]))
        eq(rs["position"], ps["position"], "replica's position")
        eq({k: ps[k] for k in REPL_KEYS if k != "position"},
           {"role": '"primary"', "epoch": "1", "primary": '""',
            "connected": "true", "lag-records": "0", "sync-replicas": "0",
            "connected-replicas": "1", "caught-up-replicas": "1",
            "waiting-replies": "0", "discarded-records": "0",
            "last-error": '""'}, "stats-replication of the primary")
        eq({k: rs[k] for k in ("role", "epoch", "primary", "connected",
                               "lag-records", "discarded-records", "last-error")},
           {"role": '"replica"', "epoch": "1", "primary": '"%s"' % p.addr,
            "connected": "true", "lag-records": "0", "discarded-records": "0",
            "last-error": '""'}, "stats-replication of the replica")
        # Metrics: tubed_replication_* on both; the primary's per-replica
        # lag is labelled by the replica's address.
        for n in (p, r):
            fams = [f for f in n.metrics().families
                    if f.startswith("tubed_replication_")]
            check(fams, "node %s: no tubed_replication_* family in /metrics"
                  % n.name)
        m = p.metrics()
        labelled = [(name, l) for name, l, v in m.samples
                    if name.startswith("tubed_replication_")
                    and any(harness.HOST in x for x in l.values())]
        check(labelled, "no tubed_replication_* sample of the primary is "
              "labelled with its replica's address: %s"
              % [x for x in m.samples if x[0].startswith("tubed_replication_")][:8])
        # The replica's stats-replication while its primary is away.
        p.kill9()
        wait_for(lambda: r.repl()["connected"] == "false",
                 "the replica to say connected: false")
        check(unq(r.repl()["last-error"]), "last-error of a replica whose "
              "primary is gone: %r" % r.repl()["last-error"])


# ------------------------------------------------------------ config

def _tmp():
    return tempfile.mkdtemp(prefix="tubed-repl-conf-")


def _conf(d, text):
    path = os.path.join(d, "tubed.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def _refused(binary, args, key, what, errors):
    """Run tubed expecting exit 2 and a message naming key; a mismatch is
    added to errors (every case is reported, not just the first)."""
    rc, out, err = run_tubed(binary, args)
    if rc != 2:
        errors.append("%s: exit status %r, expected 2 (stderr %r)"
                      % (what, rc, err[-200:]))
    elif not (key in err or key.replace("_", "-") in err):
        errors.append("%s: the message should name %s: %r"
                      % (what, key, err[-200:]))
    return err


@no_server
@tubed_only(EXT)
def test_config_errors(binary):
    d = _tmp()
    errors = []
    # Held (bound, never listening) for the test: no other test's server
    # can be what listens there when a refused start is checked.
    res = harness.PortReservation()
    try:
        port = res.port
        base = ["-l", harness.HOST, "-p", port]
        _refused(binary, base + ["--replica-of", "127.0.0.1:11300"],
                 "replica_of", "--replica-of without -b", errors)
        check(not port_listening(port), "a refused start left a listener")
        _refused(binary, base + ["--sync-replicas", "1"], "sync_replicas",
                 "--sync-replicas 1 without -b", errors)
        empty = _conf(d, "")
        _refused(binary, base + ["--config", empty, "--check-config",
                                 "--replica-of", "127.0.0.1:11300"],
                 "replica_of", "--check-config --replica-of without -b", errors)
        path = _conf(d, "replica_of = 127.0.0.1:11300\n")
        _refused(binary, base + ["--config", path], "replica_of",
                 "replica_of in the file without a binlog", errors)
        _refused(binary, base + ["--config", path, "--check-config"],
                 "replica_of", "--check-config: replica_of without a binlog", errors)
        path = _conf(d, "sync_replicas = 2\n")
        _refused(binary, base + ["--config", path, "--check-config"],
                 "sync_replicas", "--check-config: sync_replicas without a binlog",
                 errors)
        bdir = os.path.join(d, "b")
        os.mkdir(bdir)
        for text in ("sync_replicas = 0\n",
                     "replica_of = 127.0.0.1:11300\nbinlog_dir = %s\n" % bdir,
                     "sync_replicas = 1\nbinlog_dir = %s\n" % bdir,
                     "allow_remote_admin = true\n",
                     "replica_of = [::1]:11300\nbinlog_dir = %s\n" % bdir,
                     "replica_of = unix:/run/tubed.sock\nbinlog_dir = %s\n" % bdir):
            path = _conf(d, text)
            rc, out, err = run_tubed(binary, base + ["--config", path,
                                                     "--check-config"])
            if (rc, out, err) != (0, "%s: ok\n" % path, ""):
                errors.append("--check-config of %r: expected exit 0 and "
                              "'FILE: ok', got %r" % (text, (rc, out, err[-200:])))
        for text, key in (("sync_replicas = -1\nbinlog_dir = %s\n" % bdir, "sync_replicas"),
                          ("sync_replicas = many\nbinlog_dir = %s\n" % bdir, "sync_replicas"),
                          ("replica_of = 127.0.0.1\nbinlog_dir = %s\n" % bdir, "replica_of"),
                          ("replica_of = 127.0.0.1:99999\nbinlog_dir = %s\n" % bdir, "replica_of"),
                          ("allow_remote_admin = maybe\n", "allow_remote_admin"),
                          ("[tube t]\nsync_replicas = 1\n", "sync_replicas"),
                          ("[tube t]\nallow_remote_admin = true\n", "allow_remote_admin")):
            path = _conf(d, text)
            n = len(errors)
            err = _refused(binary, base + ["--config", path, "--check-config"],
                           key, "--check-config of %r" % text, errors)
            if len(errors) == n and not re.search(re.escape(path) + r":\d+:", err):
                errors.append("--check-config of %r: the error should name "
                              "FILE:LINE: %r" % (text, err[-200:]))
        check(not errors, "%d config case(s) wrong:\n    %s"
              % (len(errors), "\n    ".join(errors)))
    finally:
        res.close()
        shutil.rmtree(d, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_status_json_role_and_lag(binary):
    """/tubes.json (the status page's data) carries the role and the lag
    once replication is in use; a plain server's is unchanged."""
    import json
    with Cluster(binary) as cl:
        plain = cl.node("plain", bdir=False)
        d = json.loads(plain.get("/tubes.json").text())
        eq(sorted(d), ["server", "tubes"], "members of a plain server's tubes.json")
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        p.bs().put(b"x")
        wait_caught_up(p, r)
        for n, role in ((p, "primary"), (r, "replica")):
            d = json.loads(n.get("/tubes.json").text())
            check("replication" in d, "node %s: no replication member in "
                  "tubes.json: %s" % (n.name, sorted(d)))
            rep = d["replication"]
            eq((rep.get("role"), rep.get("lag-records")), (role, 0),
               "node %s: role and lag in tubes.json (%r)" % (n.name, rep))


@no_server
@tubed_only(EXT)
def test_replication_metrics_match_stats(binary):
    """tubed_replication_* (doc/monitoring.md) carry what stats-replication
    says; a server that never used replication shows none."""
    with Cluster(binary) as cl:
        plain = cl.node("plain", bdir=False)
        fams = [f for f in plain.metrics().families
                if f.startswith("tubed_replication_")]
        eq(fams, [], "tubed_replication_* families of a plain server")
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("met", i) for i in range(7)])
        wait_caught_up(p, r)
        for n, primary in ((p, 1), (r, 0)):
            m, d = n.metrics(), n.repl()
            got = {k: int(m.value("tubed_replication_" + k)) for k in (
                "primary", "connected", "epoch", "position", "lag_records",
                "sync_replicas", "connected_replicas", "caught_up_replicas",
                "waiting_replies", "discarded_records_total")}
            want = {"primary": primary, "connected": 1,
                    "epoch": rint(d, "epoch"), "position": rint(d, "position"),
                    "lag_records": 0, "sync_replicas": 0,
                    "connected_replicas": rint(d, "connected-replicas"),
                    "caught_up_replicas": rint(d, "caught-up-replicas"),
                    "waiting_replies": 0, "discarded_records_total": 0}
            eq(got, want, "node %s: tubed_replication_* against "
               "stats-replication" % n.name)
        lag = p.metrics().series("tubed_replication_replica_lag_records")
        eq(len(lag), 1, "per-replica lag samples on the primary: %r" % lag)
        labels, value = lag[0]
        check(labels.get("replica", "").startswith(harness.HOST + ":"),
              "the replica label: %r" % labels)
        eq(value, 0.0, "the caught-up replica's lag")


# ------------------------------------------------- a name that takes long

class _NsNode(repl_util.Node):
    """A node started in a mount namespace of its own whose
    /etc/resolv.conf is the file `resolv`."""
    resolv = None

    def _argv(self, port):
        return (["unshare", "-m", "sh", "-c",
                 'mount --bind "$0" /etc/resolv.conf && exec "$@"', self.resolv]
                + super()._argv(port))


def _nxdomain(query):
    """A DNS answer to query: no such name (RCODE 3), the question kept."""
    flags = 0x8180 | 3 | (query[2] & 0x01) << 8   # QR, RD as asked, RA, NXDOMAIN
    return query[:2] + struct.pack(">HHHHH", flags, 1, 0, 0, 0) + query[12:]


class _SilentDns:
    """A name server on 127.0.0.1:53 that answers nothing until told to
    (then no such name, to the queries held and to later ones)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind(("127.0.0.1", 53))
        except OSError as e:
            self.sock.close()
            raise harness.Skip("cannot serve DNS on 127.0.0.1:53: %s" % e)
        self.sock.settimeout(0.2)
        self.queries = []
        self.answer = threading.Event()
        self.done = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        held = []
        while not self.done:
            try:
                q, peer = self.sock.recvfrom(4096)
                self.queries.append(q)
                held.append((q, peer))
            except socket.timeout:
                pass
            if self.answer.is_set():
                for q, peer in held:
                    self.sock.sendto(_nxdomain(q), peer)
                held = []

    def close(self):
        self.done = True
        self.thread.join()
        self.sock.close()


@no_server
@tubed_only(EXT)
def test_replica_serves_while_its_primarys_name_is_looked_up(binary):
    # replication.md §1: a replica whose primary is unreachable keeps
    # serving reads. Its primary's name goes to a name server that does
    # not answer (the resolver would wait 30 s): the replica answers its
    # clients meanwhile (the lookup blocked the loop for the resolver's
    # whole timeout, at every retry), then reports the failed lookup.
    # 20 s is a hang ceiling, not a speed: the reply needs no lookup.
    if harness.VALGRIND or not shutil.which("unshare"):
        raise harness.Skip("needs unshare (and no valgrind)")
    dns = _SilentDns()
    try:
        with Cluster(binary) as cl:
            resolv = os.path.join(cl.tmp, "resolv.conf")
            with open(resolv, "w") as f:
                f.write("nameserver 127.0.0.1\noptions timeout:30 attempts:1\n")
            probe = subprocess.run(["unshare", "-m", "sh", "-c",
                                    'mount --bind "$0" /etc/resolv.conf', resolv],
                                   capture_output=True, timeout=30)
            if probe.returncode != 0:
                raise harness.Skip("cannot bind-mount resolv.conf in a mount namespace: %s"
                                   % probe.stderr.decode(errors="replace").strip())
            r = _NsNode(cl, "r", (), None, "tubed-primary.example:11300", True, True,
                        True, None)
            r.resolv = resolv
            cl.nodes.append(r)
            r.start()
            wait_for(lambda: dns.queries, "the replica's lookup of its primary's name")
            c = r.bs()
            line = c.cmd("list-tubes", timeout=20)
            check(line.startswith(b"OK "), "list-tubes during the lookup: %r" % line)
            c.read_exact(int(line.split()[1]) + 2)
            eq(c.cmd("put 0 0 1 1\r\nx", timeout=20), b"DRAINING", "put on the replica")
            dns.answer.set()
            wait_for(lambda: "tubed-primary.example" in r.repl().get("last-error", ""),
                     "last-error naming the lookup that failed")
            eq(r.repl()["connected"], "false", "connected")
    finally:
        dns.close()

