"""Helpers for the replication tests (test_replication*.py; spec
replication.md, doc/replication.md).

Not a test file (the runner loads only test_*.py).  A Cluster owns a
temporary directory and every server a test starts in it; each Node is one
tubed with its own -b DIR, its own --config FILE, and free 127.0.0.1 ports
for beanstalk, memcache and HTTP.  A node keeps its beanstalk port across
restarts (a replica's --replica-of names it); the other ports are picked
afresh per start.  Servers are stopped by pid (a stopped one is sent
SIGCONT first), and the directory is removed at the end.

    with Cluster(binary, conf=CONF) as cl:
        p = cl.node("p", "-f", "0")                   a primary
        r = cl.node("r", replica_of=p)                --replica-of 127.0.0.1:P
        ... writes on p.bs() ...
        wait_caught_up(p, r)                          lag-records 0, same position
        assert_converged(p, r, "after the writes")    job by job

Proxy(port, rate) forwards connections to a node and can slow the stream
(a snapshot cut in the middle, changes during a snapshot); a node made
with unix=True listens on DIR/bs.sock only (--replica-of unix:/path).

The comparer (snapshot() and diff()) reads every job of a server through
list-tubes, list-jobs <tube> all, stats-job and peek, and checks with the
`stats` totals that no job escaped the listing.  Two servers agree when the
same ids exist on both with the same tube, priority, TTR, state (reserved
counts as ready: a reservation is not journaled), delay deadline (time-left
of delayed jobs within a tolerance, the two reads are not simultaneous) and
body, byte for byte.

Figures measured by a test (round trips, RSS, rates) go to the file named
by TUBED_REPL_REPORT, when set, one line each.
"""

import collections
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "mc_clients"))

import harness  # noqa: E402
from harness import TestFailure, check, eq, fail, unq, wait_for  # noqa: E402
from server import Tubed  # noqa: E402

# A ceiling for anything that polls (the machine is shared, ASan is slow);
# never a speed assertion.
DEADLINE = harness.DEADLINE

# The keys of stats-replication, in the spec's order (replication.md §5).
REPL_KEYS = ["role", "epoch", "position", "primary", "connected",
             "lag-records", "sync-replicas", "connected-replicas",
             "caught-up-replicas", "waiting-replies", "discarded-records",
             "last-error"]

EXT = "replication is a tubed extension"

# Under ASan, freed memory sits in a quarantine (256 MiB by default) and
# would show as RSS growth: tests that measure a node's memory start it
# with a small one (no effect on other builds).
SMALL_QUARANTINE = {"ASAN_OPTIONS":
                    "detect_leaks=1:abort_on_error=0:quarantine_size_mb=4"}


def report(line):
    """Append a measured figure to $TUBED_REPL_REPORT (if set)."""
    path = os.environ.get("TUBED_REPL_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(time.strftime("%H:%M:%S ") + line + "\n")


# ------------------------------------------------------------------ nodes

class Node(Tubed):
    """One tubed of a cluster: -b DIR, --config FILE, beanstalk + memcache
    + metrics ports on 127.0.0.1, optionally --replica-of another node.
    A server.Tubed that keeps its beanstalk port across restarts."""

    def __init__(self, cluster, name, args, conf, replica_of, memcache,
                 metrics, bdir, env, unix=False, ports=()):
        self.cluster = cluster
        self.name = name
        d = os.path.join(cluster.tmp, name)
        os.mkdir(d)
        # unix: the beanstalk listener is DIR/bs.sock only (no TCP ports).
        super().__init__(cluster.binary, *args,
                         conf=cluster.conf if conf is None else conf,
                         bdir=bdir, memcache=memcache and not unix,
                         metrics=metrics and not unix, env=env,
                         keep_port=True, unix=unix, tmp=d,
                         label="node %s" % name, ports=ports)
        self.dir = d
        self.replica_of = replica_of
        self.stopped_sig = False  # SIGSTOP sent and no SIGCONT since
        self._admin = None

    @property
    def addr(self):
        if self.unix_path:
            return "unix:" + self.unix_path
        return "%s:%d" % (harness.HOST, self.port)

    def config_args(self):
        a = super().config_args()
        ro = self.replica_of
        if ro is not None:
            a += ["--replica-of", ro.addr if isinstance(ro, Node) else ro]
        return a

    # -- processes -----------------------------------------------------------
    def start(self, extra=(), replica_of=False):
        """Start (or restart, on the same beanstalk port).  replica_of:
        False keeps the current setting, None drops it, else a Node or
        "host:port"."""
        if replica_of is not False:
            self.replica_of = replica_of
        super().start(extra)
        return self

    restart = start

    def started(self):
        self.stopped_sig = False
        self._admin = None

    def signal(self, sig):
        self.srv.signal(sig)
        if sig == signal.SIGSTOP:
            self.stopped_sig = True
        elif sig == signal.SIGCONT:
            self.stopped_sig = False

    def sigstop(self):
        self.signal(signal.SIGSTOP)

    def sigcont(self):
        self.signal(signal.SIGCONT)

    def _retire(self):
        self._admin = None
        return super()._retire()

    def kill9(self):
        self.stopped_sig = False    # SIGKILL ends a stopped process too
        return super().kill9()

    def sigterm(self, timeout=15):
        """SIGTERM (SIGCONT first if stopped); the server must exit 0;
        returns its stderr."""
        if self.stopped_sig:
            self.sigcont()
        return super().sigterm(timeout)

    def stop(self):
        """Stop by pid (SIGCONT first if stopped); returns the problems."""
        if self.srv is None:
            return []
        if self.stopped_sig and self.srv.alive():
            try:
                self.sigcont()
            except ProcessLookupError:
                pass
        return ["node %s: %s" % (self.name, p) for p in super().stop()]

    def rss(self):
        """VmRSS of the server process in bytes."""
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        fail("no VmRSS for pid %d" % self.pid)

    # -- clients (bs, mc, http, metrics, reload: server.Tubed) ----------------
    def get(self, path):
        with self.http() as h:
            h.request("GET", path, {"Connection": "close"})
            return h.read_response()

    def admin(self):
        """A cached beanstalk connection for polling."""
        if self._admin is None or self._admin.eof:
            self._admin = self.bs()
        return self._admin

    def repl(self):
        """stats-replication of this node (a fresh read)."""
        try:
            return stats_replication(self.admin())
        except TestFailure:
            self._admin = None
            raise

    def __repr__(self):
        return "<node %s %s>" % (self.name, self.addr if self.port else "-")


class Cluster:
    """A temporary directory and the nodes started in it."""

    def __init__(self, binary, conf=""):
        self.binary = binary
        self.conf = conf
        self.tmp = tempfile.mkdtemp(prefix="tubed-repl-")
        self.nodes = []

    def node(self, name, *args, conf=None, replica_of=None, memcache=True,
             metrics=True, bdir=True, env=None, start=True, unix=False, ports=()):
        """ports: harness.PortReservations the node's conf names (conf then
        a function rendering the file for their current ports), held until
        the cluster ends (server.Tubed ports=)."""
        n = Node(self, name, args, conf, replica_of, memcache, metrics, bdir,
                 env, unix, ports)
        self.nodes.append(n)
        if start:
            n.start()
        return n

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        problems = []
        for n in self.nodes:
            try:
                problems.extend(n.stop())
            except Exception as e:  # pragma: no cover
                problems.append("stopping node %s failed: %r" % (n.name, e))
            for r in n.reserved:
                r.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if problems:
            if et is None:
                raise TestFailure("; ".join(problems))
            if issubclass(et, (TestFailure, OSError)):
                raise TestFailure("%s | %s" % (ev, "; ".join(problems))) from ev
        return False


# ------------------------------------------------------------------ stats

class NotImplemented_(TestFailure):
    """The server does not know the command: no use polling."""


def stats_replication(c):
    """stats-replication as an ordered dict (values verbatim)."""
    line, body = c.cmd_body("stats-replication")
    if line in (b"UNKNOWN_COMMAND", b"BAD_FORMAT"):
        raise NotImplemented_("stats-replication answered %r: the server does "
                              "not implement it (replication.md §5)" % line)
    check(body is not None and line.startswith(b"OK "),
          "stats-replication: expected OK <n> and data, got %r" % line)
    d = harness.parse_yaml_dict(body)
    eq(list(d)[:len(REPL_KEYS)], REPL_KEYS,
       "stats-replication keys in order (replication.md §5)")
    return d


def rint(d, key):
    v = d[key]
    check(re.fullmatch(r"0|[1-9][0-9]*", v) is not None,
          "stats-replication %s: expected an unsigned integer, got %r" % (key, v))
    return int(v)


def role(node):
    return unq(node.repl()["role"])


def caught_up(p, r):
    """(True, "") when replica r is connected, lag 0, at p's position."""
    for n in (p, r):
        if not n.alive():
            fail("node %s is not running (%s); its output: %s"
                 % (n.name, harness._describe_rc(n.srv.proc.poll())
                    if n.srv else "stopped", n.stderr()[-1200:]))
    try:
        ps = p.repl()
        rs = r.repl()
    except NotImplemented_:
        raise
    except (TestFailure, OSError) as e:
        return False, "stats-replication failed: %s" % e
    ok = (rs["connected"] == "true" and rint(rs, "lag-records") == 0
          and rint(rs, "position") == rint(ps, "position")
          and unq(rs["role"]) == "replica")
    return ok, "primary %s %s, replica %s %s" % (
        p.name, _short_repl(ps), r.name, _short_repl(rs))


def _short_repl(d):
    return "{%s}" % ", ".join("%s: %s" % (k, d[k]) for k in REPL_KEYS if k in d)


def wait_caught_up(p, *replicas, timeout=DEADLINE):
    """Wait until every replica is connected to p, has lag-records 0 and
    p's position (p should take no writes meanwhile)."""
    for r in replicas:
        last = [""]

        def pred():
            ok, why = caught_up(p, r)
            last[0] = why
            return ok
        wait_for(pred, lambda: "replica %s to catch up with %s: %s"
                 % (r.name, p.name, last[0]), timeout=timeout)


# ------------------------------------------------------------------ proxy

class Proxy:
    """A TCP proxy on a free 127.0.0.1 port to upstream_port: each
    connection is forwarded both ways; `rate` (bytes a second, None for no
    limit) slows the upstream-to-client direction, so a snapshot takes
    long enough to be cut in the middle; cut(n) drops the connection after
    n more bytes towards the client (`cuts` counts those drops).  It
    connects upstream afresh for each connection, so it outlives the
    upstream's restarts."""

    def __init__(self, upstream_port, rate=None):
        import threading
        self.threading = threading
        self.upstream_port = upstream_port
        self.rate = rate
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind((harness.HOST, 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.addr = "%s:%d" % (harness.HOST, self.port)
        self.stop = False
        self.conns = 0
        self.left = None
        self.cuts = 0
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        self.lsock.settimeout(0.2)
        while not self.stop:
            try:
                down, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection((harness.HOST, self.upstream_port),
                                              timeout=5)
            except OSError:
                down.close()
                continue
            self.conns += 1
            for a, b, slow in ((up, down, True), (down, up, False)):
                self.threading.Thread(target=self._pump, args=(a, b, slow),
                                      daemon=True).start()

    def cut(self, n):
        self.left = n

    def _pump(self, src, dst, slow):
        src.settimeout(None)
        try:
            while not self.stop:
                data = src.recv(16384)
                if not data:
                    break
                if slow and self.left is not None:
                    if len(data) >= self.left:
                        dst.sendall(data[:self.left])
                        self.left = None
                        self.cuts += 1
                        break
                    self.left -= len(data)
                dst.sendall(data)
                if slow and self.rate:
                    time.sleep(len(data) / float(self.rate))
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        try:
            self.lsock.close()
        except OSError:
            pass


# ------------------------------------------------------------------ jobs

# deadline: when the time-left runs out, on this process's monotonic clock
# (the reply's arrival + time-left), so two snapshots taken seconds apart
# compare delays without that gap.
Job = collections.namedtuple("Job", "id tube pri ttr state time_left body deadline")


def list_jobs(c, tube, state="all"):
    """Every id of list-jobs <tube> <state>, paged."""
    out, frm = [], 0
    while True:
        line, body = c.cmd_body("list-jobs %s %s %d 1000" % (tube, state, frm))
        if line == b"NOT_FOUND":
            return out
        check(body is not None and line.startswith(b"OK "),
              "list-jobs %s %s %d 1000: %r" % (tube, state, frm, line))
        page = [int(x) for x in harness.parse_yaml_list(body)]
        if not page:
            return out
        out += page
        frm = page[-1] + 1


def _pipelined(c, cmds, chunk=200):
    """Send commands in chunks; yields (line, body) per command."""
    for i in range(0, len(cmds), chunk):
        part = cmds[i:i + chunk]
        c.send(b"".join(part))
        for _ in part:
            yield c.read_reply()


def snapshot(c, bodies=True, ids=None):
    """{id: Job} of every job on the server behind client c.

    With ids None: every tube's jobs (list-tubes, list-jobs all), and the
    `stats` totals must match the count (no job outside the listing).
    With ids: just those (a sample); a missing one is left out.

    The listing is not atomic: a job the server moves on its own meanwhile
    (a max_age move into a tube listed before its own) is in no page, and
    the totals count it (seen under ASan on a loaded machine: 'expected
    11, got 10').  A mismatch is read again; a job really outside the
    listing stays outside every time."""
    for _ in range(5):
        out, total = _snapshot(c, bodies, ids)
        if total is None or len(out) == total:
            return out
    eq(len(out), total, "jobs listed by list-tubes/list-jobs against the "
       "stats totals, five times (a job outside the listing, or one that "
       "changed meanwhile each time)")
    return out


def _snapshot(c, bodies, ids):
    """(snapshot, the stats totals or None)."""
    check_totals = ids is None
    if ids is None:
        ids = []
        for t in c.list_tubes():
            ids += list_jobs(c, t)
    ids = sorted(set(ids))
    stats, seen = {}, {}
    cmds = [b"stats-job %d\r\n" % j for j in ids]
    for j, (line, body) in zip(ids, _pipelined(c, cmds)):
        if line == b"NOT_FOUND":
            continue
        check(body is not None and line.startswith(b"OK "),
              "stats-job %d: expected OK n or NOT_FOUND, got %r" % (j, line))
        stats[j] = harness.parse_yaml_dict(body)
        seen[j] = time.monotonic()
    got = {}
    if bodies:
        keep = sorted(stats)
        cmds = [b"peek %d\r\n" % j for j in keep]
        for j, (line, body) in zip(keep, _pipelined(c, cmds)):
            if line == b"NOT_FOUND":
                del stats[j]
                continue
            check(re.fullmatch(rb"FOUND %d \d+" % j, line) is not None,
                  "peek %d: expected FOUND %d <n>, got %r" % (j, j, line))
            got[j] = body
    out = {}
    for j, st in stats.items():
        eq(int(st["id"]), j, "id in stats-job %d" % j)
        left = int(st["time-left"])
        out[j] = Job(j, unq(st["tube"]), int(st["pri"]), int(st["ttr"]),
                     unq(st["state"]), left, got.get(j), seen[j] + left)
    total = None
    if check_totals:
        s = c.stats()
        total = sum(int(s[k]) for k in ("current-jobs-ready", "current-jobs-reserved",
                                         "current-jobs-delayed", "current-jobs-buried"))
    return out, total


def _norm_state(s):
    return "ready" if s == "reserved" else s


def diff(a, b, an="primary", bn="replica", tol=3, replica_side=True):
    """Differences (strings) between snapshots a and b, [] when they agree
    in the sense of replication.md §6.1.  replica_side: b is a replica, so
    none of its jobs may be reserved."""
    out = []
    for j in sorted(set(a) - set(b)):
        out.append("job %d (%s, %s) is on %s, not on %s"
                   % (j, a[j].tube, a[j].state, an, bn))
    for j in sorted(set(b) - set(a)):
        out.append("job %d (%s, %s) is on %s, not on %s"
                   % (j, b[j].tube, b[j].state, bn, an))
    for j in sorted(set(a) & set(b)):
        x, y = a[j], b[j]
        for f in ("tube", "pri", "ttr"):
            if getattr(x, f) != getattr(y, f):
                out.append("job %d: %s %r on %s, %r on %s"
                           % (j, f, getattr(x, f), an, getattr(y, f), bn))
        if _norm_state(x.state) != _norm_state(y.state):
            out.append("job %d: state %s on %s, %s on %s (reserved counts "
                       "as ready)" % (j, x.state, an, y.state, bn))
        elif x.state == "delayed" and abs(x.deadline - y.deadline) > tol:
            out.append("job %d: delayed, time-left %d on %s, %d on %s (their "
                       "deadlines %.1f s apart)" % (j, x.time_left, an,
                                                    y.time_left, bn,
                                                    abs(x.deadline - y.deadline)))
        if replica_side and y.state == "reserved":
            out.append("job %d is reserved on %s (a replica hands out no job)"
                       % (j, bn))
        if x.body != y.body:
            out.append("job %d: body differs (%d bytes on %s, %d on %s: %r... "
                       "vs %r...)" % (j, len(x.body or b""), an,
                                      len(y.body or b""), bn,
                                      (x.body or b"")[:24], (y.body or b"")[:24]))
    return out


def assert_same(a, b, what, an="primary", bn="replica", **kw):
    d = diff(a, b, an, bn, **kw)
    check(not d, "%s: %d difference(s) between %s (%d jobs) and %s (%d jobs): %s"
          % (what, len(d), an, len(a), bn, len(b), "; ".join(d[:12])))


def assert_converged(p, r, what, **kw):
    """Snapshot p and r (already caught up) and compare job by job."""
    a = snapshot(p.admin())
    b = snapshot(r.admin())
    assert_same(a, b, what, "%s (%s)" % (p.name, role_of(p)),
                "%s (%s)" % (r.name, role_of(r)), **kw)
    return a


def role_of(n):
    try:
        return role(n)
    except Exception:
        return "?"


# ------------------------------------------------------------------ writes

def put_many(c, bodies, pri=100, delay=0, ttr=60, batch=50):
    """Pipelined puts; returns the ids in order."""
    ids = []
    pris = pri if isinstance(pri, (list, tuple)) else [pri] * len(bodies)
    delays = delay if isinstance(delay, (list, tuple)) else [delay] * len(bodies)
    for i in range(0, len(bodies), batch):
        part = range(i, min(i + batch, len(bodies)))
        c.send(b"".join(b"put %d %d %d %d\r\n%s\r\n"
                        % (pris[k], delays[k], ttr, len(bodies[k]), bodies[k])
                        for k in part))
        for k in part:
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            check(m is not None, "put #%d: expected INSERTED <id>, got %r"
                  % (k, line))
            ids.append(int(m.group(1)))
    return ids


def body(tag, i, size=64):
    """A distinct body carrying its tag and index, CR LF inside."""
    head = b"<%s-%06d>\r\n" % (harness._b(tag), i)
    fill = (b"%d|" % (i * 7919)) * (size // 4 + 1)
    return (head + fill)[:max(size, len(head))]


def reserve_job(c, jid):
    line, got = c.cmd_body("reserve-job %d" % jid)
    check(re.fullmatch(rb"RESERVED %d \d+" % jid, line) is not None,
          "reserve-job %d: expected RESERVED %d n, got %r" % (jid, jid, line))
    return got


def rss_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def percentile(xs, p):
    if not xs:
        return 0.0
    s = sorted(xs)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.5)) - 1))
    return s[k]
