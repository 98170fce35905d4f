"""Soak of resources across the operations operators repeat: file
descriptors, threads, memory, binlog files and per-tube structures must
stay flat over many cycles of load, reloads, kill -9, role swaps and
misbehaving clients.

Three tubed on 127.0.0.1, every one with -b DIR, -f 0, sync_replicas = 1,
a small max_memory_size (read-behind), 64 KiB binlog files, a 256K
repl_backlog (the default 16M would fill for a long while and hide any
trend) and a [listen soak] Unix socket.  A and B are the pair whose roles
swap (`promote` + `follow`, there and back in every cycle; their
processes live through the whole run, as a server does for months under
systemd); K is a third replica, killed with SIGKILL and restarted in
every cycle (it `follow`s each new primary).  One cycle, on the primary
of the moment:

- SIGHUP reloads of every node with changing policies and budgets
  (max_memory_size, job_memory, max_items, max_age, 200 tube sections
  named for the cycle, the listener's roles and tubes), then a file with
  an error (refused, old one kept), then memcache `reload`; SIGUSR1 drain
  (put answers DRAINING) and SIGUSR2;
- beanstalk: jobs put into TUBES tubes named for the cycle, pipelined;
  a tenth reserved through watch, the rest deleted by id; read-behind:
  bodies far past max_memory_size put and reserved back from the binlog;
- HTTP scrapes of /metrics and /tubes.json while those tubes exist;
  clients that send many commands and never read (beanstalk, memcache,
  HTTP) and close; one per node that neither reads nor closes, which the
  server must close (stall_timeout = 1s);
- memcache: set + get and get/open + get/close on queues of the cycle,
  peek, open + abort, monitor + confirm, an open job whose client leaves;
- fake replicas that send `replicate` and leave (after its answer, before
  it, with junk); workers that leave while they wait (a reserve, a wide
  watch of 1100 tubes, memcache gets with t=);
- pause-tube, list-jobs, stats-tubes, move-job, flush-tube, bury, kick,
  release, fanout into a child made and deleted, max_age expiry into a
  dead-letter tube; producer and worker through the listener's socket;
- B follows a port nobody listens on and K is killed (-9): with no
  replica, two puts are held (sync_replicas 1), one client leaves while
  its reply is held; B follows A again, K restarts, the other reply comes;
- promote B + follow B (A and K), then promote A + follow A (B and K);
- a new replica with an empty binlog takes a full snapshot from A, stops
  cleanly and its directory goes.

One job lives through the whole run (delayed for a day, put before the
first cycle): its record pins the oldest binlog file, so the files can
only go if the binlog migrates it forward (compaction), as on a server
that always holds some jobs.

Once every node is empty again, the test records per process: its fds
(/proc/PID/fd: those on binlog files apart, as the read-behind reader
keeps a cache of up to 8), threads (/proc/PID/task), VmRSS, binlog files
and bytes (stats-binlog) and every file of the binlog directory,
current-tubes, current-connections, job-memory, spilled-jobs.  It
asserts: no fd on a deleted binlog file, at most 2 binlog files (the
current one and the long-lived job's) and at most that job spilled (a
restart may leave its body in the binlog) at any cycle; after WARMUP cycles,
every other count (the files of the binlog directory that are not binlog
files among them) exactly what it was after the warm-up, for A and B
and for each new K (an fd above the count is waited for, with the
suite's ceiling, in case the server is closing it, and named if it
stays); A's and B's RSS, the mean of the last cycles against the mean
of the first ones, within a generous fixed margin (12 MiB, 48 under
ASan).  No timing threshold anywhere: every wait is a poll with the
suite's ceiling.

Default mode (CI): 16 cycles of 2000 tubes (about 25 s here, 40 s under
ASan; keep it under ~90 s).  Manual mode, a longer soak:
    SOAK_ROLES_CYCLES=300 SOAK_ROLES_TUBES=3000 SOAK_VERBOSE=1 \\
        python3 tests/integration/run.py --bin build/tubed -k soak_roles \\
        --timeout 3000
(SOAK_ROLES_CYCLES and SOAK_ROLES_TUBES may be set separately, and
SOAK_ROLES_BACKLOG for the repl_backlog; the run's --timeout must grow
with them.)  SOAK_VERBOSE=1 prints every figure of every cycle;
TUBED_REPL_REPORT=FILE appends them to FILE.  Under ASan
(build/asan/tubed) the nodes run with a small quarantine, and LeakSanitizer
checks A and B at their exit; under valgrind (make BUILD=build/vg
CFLAGS=-DTUBED_SLAB_MALLOC build/vg/tubed, then TUBED_VALGRIND=1
SOAK_ROLES_CYCLES=6) the tubes per cycle are fewer and RSS is not judged
(valgrind's own heap is in it).
"""

import os
import random
import re
import shutil
import socket
import time

import harness
from harness import HOST, check, eq, no_server, slow, tubed_only, wait_for
from http_util import get as http_get
from repl_util import (EXT, SMALL_QUARANTINE, Cluster, report, rint,
                       stats_replication, wait_caught_up)

SERVER = "none"

VALGRIND = bool(harness.VALGRIND)
CYCLES = int(os.environ.get("SOAK_ROLES_CYCLES", "16"))
TUBES = int(os.environ.get("SOAK_ROLES_TUBES", "150" if VALGRIND else "2000"))
WARMUP = 2
VERBOSE = bool(os.environ.get("SOAK_VERBOSE"))
MIB = 1024 * 1024

# Every node: sync_replicas 1 (a primary acknowledges a change once one
# replica has it), read-behind past a few KiB, and per cycle a changing
# set of policies and budgets (reloaded by SIGHUP).
CONF = """\
sync_replicas = 1
stall_timeout = 1s
max_memory_size = {mem}
job_memory = {jobmem}
[tube pol]
max_items = {items}
discard_old_when_full = true
max_age = {age}
max_timeouts = 3
[tube rb]
max_memory_size = {rbmem}
[tube fan]
fanout = true
[tube exp]
max_age = 300ms
move_expired_to = dlq
{sections}"""

BODY = b"x" * 40
RB_BODY = 900          # read-behind bodies: 40 of them, far past max_memory_size
RB_JOBS = 40


# A listener with a role, its tubes changing at every reload.
LISTEN = """[listen soak]
address = unix:{path}
role = {roles}
tubes = s{cycle}-*, c{cycle}-*
"""


def sock_path(cl, name):
    return os.path.join(cl.tmp, name, "soak.sock")


def conf_for(cycle, sock):
    v = cycle % 3
    sections = "".join("[tube cfg-%d-%d]\nmax_items = %d\n" % (cycle, k, 10 + k)
                       for k in range(200))
    sections += LISTEN.format(path=sock, cycle=cycle, roles=(
        "producer, worker", "producer, worker, read", "worker, producer")[v])
    return CONF.format(mem=("4K", "2K", "8K")[v], jobmem=("0", "64M", "32M")[v],
                       items=(50, 500, 5)[v], age=("1h", "10m", "0")[v],
                       rbmem=("1K", "3K", "2K")[v], sections=sections)


def is_asan(binary):
    with open(binary, "rb") as f:
        return b"__asan_" in f.read()    # gcc links libasan dynamically


# ------------------------------------------------------------------ figures

def proc_figures(pid):
    fds = len(os.listdir("/proc/%d/fd" % pid))
    tasks = len(os.listdir("/proc/%d/task" % pid))
    rss = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return fds, tasks, rss


# An fd on a binlog file: the writer's, and the read-behind reader's cache
# of up to SPILL_FDS (8) files it read from lately.
BINLOG_FD = re.compile(r"/binlog/binlog\.\d+( \(deleted\))?$")
SPILL_FDS = 8
# Binlog files once a cycle is over: the one being written and, at most,
# the one holding the long-lived job's record until it is migrated.
MAX_FILES = 2


def other_fds(pid):
    """The fds of pid but those on binlog files."""
    return len([t for t in fd_targets(pid) if not BINLOG_FD.search(t)])


def fd_targets(pid):
    """What each fd of pid is: a file's path, or a TCP socket as
    "tcp LOCALPORT->REMOTEPORT STATE" (/proc/net/tcp), for a message that
    says which fd is new."""
    tcp = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            x = line.split()
            tcp["socket:[%s]" % x[9]] = "tcp %d->%d st %s" % (
                int(x[1].rsplit(":", 1)[1], 16), int(x[2].rsplit(":", 1)[1], 16), x[3])
    out = []
    d = "/proc/%d/fd" % pid
    for fd in os.listdir(d):
        try:
            t = os.readlink(os.path.join(d, fd))
        except OSError:
            continue
        out.append(tcp.get(t, t))
    return sorted(out)


def binlog_dir_files(node):
    """Every file in the binlog directory (binlog.N, the lock, the
    history id...): none may pile up."""
    return len(os.listdir(node.bdir))


def figures(node):
    """Everything measured of one node, once it is empty again."""
    c = node.admin()
    s = c.stats()
    line, body = c.cmd_body("stats-binlog")
    check(body is not None, "node %s: stats-binlog: %r" % (node.name, line))
    b = harness.parse_yaml_dict(body)
    _, tasks, rss = proc_figures(node.pid)
    # The fds before the scrape below, not after: the server closes the
    # scrape's socket only after sending the reply, so a test that reads
    # /proc as soon as it has the reply may still see it (CLOSE_WAIT on the
    # HTTP port, under load).  Counted at the warm-up, that fd made every
    # later cycle look one fd short.  Here, every client of the cycle is
    # gone (wait_conns(); a connection's fd is closed as it is uncounted)
    # and only the admin connection of the test is open.
    fdl = fd_targets(node.pid)
    # The server-wide count of unsent replies (outbudget): with every
    # client gone or read, it is back to zero, or large replies would one
    # day be refused to everyone.
    r = http_get(node, "/metrics")
    m = re.search(rb"^tubed_unread_reply_bytes (\d+)$", r.body, re.M)
    check(m is not None, "node %s: no tubed_unread_reply_bytes in /metrics" % node.name)
    logs = [t for t in fdl if BINLOG_FD.search(t)]
    return {
        "pid": node.pid, "fds": len(fdl) - len(logs), "threads": tasks, "rss": rss,
        "fd-list": fdl, "binlog-fds": len(logs),
        "deleted-fds": len([t for t in logs if t.endswith(" (deleted)")]),
        "tubes": int(s["current-tubes"]),
        "conns": int(s["current-connections"]),
        "job-memory": int(s["job-memory"]),
        "unread-bytes": int(m.group(1)),
        "binlog-files": int(b["files"]), "dir-files": binlog_dir_files(node),
        "other-files": binlog_dir_files(node) - int(b["files"]),
        "binlog-bytes": int(b["bytes-on-disk"]),
        "live-bytes": int(b["live-bytes"]),
        "spilled": int(b["spilled-jobs"]),
    }


def empty(node):
    """(True, state) once the node holds only the long-lived job (keep_job)
    and the tubes default and keep."""
    s = node.admin().stats()
    jobs = sum(int(s["current-jobs-" + k]) for k in
               ("ready", "reserved", "delayed", "buried"))
    return jobs == 1 and s["current-jobs-delayed"] == "1" and \
        s["current-tubes"] == "2", ("jobs %d (delayed %s), tubes %s" % (
            jobs, s["current-jobs-delayed"], s["current-tubes"]))


def keep_job(p):
    """One job that lives through the whole run (delayed for a day), as a
    server that runs for months always holds some: its record pins the
    oldest binlog file, so the binlog must migrate it forward (compaction)
    to remove files as the cycles write."""
    c = p.bs()
    c.use("keep")
    jid = c.put(b"kept for the whole run", delay=86400)
    c.close()
    return jid


def wait_empty(node):
    last = [""]

    def pred():
        ok, last[0] = empty(node)
        return ok
    wait_for(pred, lambda: "node %s to be empty again: %s" % (node.name, last[0]))


def wait_conns(node, want):
    """current-connections settles to `want` (closes we made are seen by
    the server a moment later)."""
    last = [None]

    def pred():
        last[0] = int(node.admin().stats()["current-connections"])
        return last[0] == want
    wait_for(pred, lambda: "node %s: current-connections %s, want %d"
             % (node.name, last[0], want))


# ------------------------------------------------------------------ load

def read_lines(c, n):
    return [c.read_line() for _ in range(n)]


def beanstalk_load(p, cycle, tubes, rnd):
    """Jobs into `tubes` unique tubes; a tenth reserved by watching, the
    rest deleted by id.  Every tube ends empty and unused."""
    c = p.bs(timeout=30)
    names = ["c%d-%d" % (cycle, i) for i in range(tubes)]
    ids = {}
    for k in range(0, tubes, 200):
        chunk = names[k:k + 200]
        c.send(b"".join(b"use %s\r\nput %d 0 60 %d\r\n%s\r\n"
                        % (n.encode(), rnd.randint(0, 2000), len(BODY), BODY)
                        for n in chunk))
        for n in chunk:
            eq(c.read_line(), b"USING " + n.encode(), "use %s" % n)
            line = c.read_line()
            check(line.startswith(b"INSERTED "), "put into %s: %r" % (n, line))
            ids[n] = int(line.split()[1])
    # Reserve some of them through watch, one tube at a time.
    w = p.bs(timeout=30)
    w.watch(names[0])
    w.ignore("default")
    by_id = {i: n for n, i in ids.items()}
    for i, n in enumerate(names[: max(1, tubes // 10)]):
        if i:
            w.watch(n)
            w.ignore(names[i - 1])
        jid, body = w.reserve(timeout=5)
        eq(by_id.get(jid), n, "job reserved from %s" % n)
        eq(body, BODY, "body reserved from %s" % n)
        eq(w.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
        del ids[n]
    w.close()
    rest = list(ids.values())
    for k in range(0, len(rest), 200):
        chunk = rest[k:k + 200]
        c.send(b"".join(b"delete %d\r\n" % j for j in chunk))
        for j, line in zip(chunk, read_lines(c, len(chunk))):
            eq(line, b"DELETED", "delete %d" % j)
    c.send(b"use default\r\n")
    eq(c.read_line(), b"USING default", "use default")
    return c


def readbehind_load(p, cycle):
    """Bodies past max_memory_size live in the binlog only; reserving
    reads them back."""
    c = p.bs(timeout=30)
    c.use("rb")
    bodies = [(b"<rb-%d-%d>" % (cycle, i)).ljust(RB_BODY, b".") for i in range(RB_JOBS)]
    c.send(b"".join(b"put 10 0 60 %d\r\n%s\r\n" % (len(b), b) for b in bodies))
    for line in read_lines(c, RB_JOBS):
        check(line.startswith(b"INSERTED "), "put into rb: %r" % line)
    c.watch("rb")
    c.ignore("default")
    got = []
    for _ in range(RB_JOBS):
        jid, body = c.reserve(timeout=10)
        got.append(body)
        eq(c.cmd("delete %d" % jid), b"DELETED", "delete rb job %d" % jid)
    eq(sorted(got), sorted(bodies), "read-behind bodies reserved back")
    c.close()


def memcache_load(p, cycle, queues):
    m = p.mc(timeout=30)
    names = ["m%d-%d" % (cycle, i) for i in range(queues)]
    m.send(b"".join(b"set %s 0 0 %d\r\n%s\r\n" % (n.encode(), len(BODY), BODY)
                    for n in names))
    for n, line in zip(names, read_lines(m, len(names))):
        eq(line, b"STORED", "set %s" % n)
    for n in names[: queues // 2]:
        eq(m.get(n), BODY, "get %s" % n)
    for n in names[queues // 2:]:
        eq(m.get(n + "/open"), BODY, "get %s/open" % n)
        eq(m.get(n + "/close"), None, "get %s/close" % n)
    # A queue only looked at (get of nothing) is not kept either.
    eq(m.get("m%d-empty" % cycle), None, "get of an empty queue")
    # peek, open + abort, monitor + confirm, and an open job whose client
    # leaves: each on a queue of its own, each job consumed in the end.
    q = ["m%d-x%d" % (cycle, i) for i in range(4)]
    for n in q:
        m.store(n, BODY)
    eq(m.get(q[0] + "/peek"), BODY, "peek")
    eq(m.get(q[0]), BODY, "get after peek")
    eq(m.get(q[1] + "/open"), BODY, "open")
    eq(m.get(q[1] + "/abort"), None, "abort")
    eq(m.get(q[1]), BODY, "get after abort")
    m.send(b"monitor %s 1 1\r\n" % q[2].encode())
    eq(m.read_value(q[2]), BODY, "monitor")
    eq(m.read_line(), b"END", "the monitor stream's last END")
    eq(m.cmd("confirm %s 1" % q[2]), b"END", "confirm")
    leaver = p.mc(timeout=10)
    eq(leaver.get(q[3] + "/open"), BODY, "open, then leave")
    leaver.close()
    eq(m.get(q[3] + "/t=10000"), BODY, "the job the leaver held")
    m.close()


def waiters(p, cycle):
    """Workers that wait and leave: a blocking reserve on unique tubes, a
    wide watch (past 1024 tubes: the engine-wide wait), a memcache get
    waiting with a timeout; each connection closes while it waits."""
    socks = []
    b = p.bs(timeout=30)
    b.send(b"".join(b"watch w%d-%d\r\n" % (cycle, i) for i in range(5)) + b"reserve\r\n")
    read_lines(b, 5)
    wide = p.bs(timeout=30)
    n = 1100
    wide.send(b"".join(b"watch ww%d-%d\r\n" % (cycle, i) for i in range(n)))
    read_lines(wide, n)
    wide.send(b"reserve-with-timeout 0\r\n")
    eq(wide.read_line(), b"TIMED_OUT", "wide reserve-with-timeout 0")
    wide.send(b"reserve-with-timeout 30\r\n")
    m = p.mc(timeout=30)
    m.send(b"get mw%d/t=30000\r\nget mw%d-open/open/t=30000\r\n" % (cycle, cycle))
    socks += [b, wide, m]
    # Every wait has begun once this round trip is answered.
    eq(p.admin().stats()["current-waiting"] != "0", True, "someone waits")
    for c in socks:
        c.close()


def extensions_load(p, cycle):
    """pause-tube, flush-tube, move-job, list-jobs, stats-tubes, delayed,
    buried and kicked jobs, fanout children, max_age expiry into a dead
    letter tube, on tubes named for the cycle."""
    c = p.bs(timeout=30)
    x = "x%d" % cycle
    c.use(x)
    ids = [c.put(BODY, delay=(i % 3 == 0) * 100) for i in range(30)]
    eq(c.cmd("pause-tube %s 1" % x), b"PAUSED", "pause-tube")
    lines, body = c.cmd_body("list-jobs %s all 0 10" % x)
    check(body is not None, "list-jobs: %r" % lines)
    c.cmd_body("stats-tubes")
    c.watch(x)
    for j in ids[1:4]:
        c.cmd("bury %d" % j)            # NOT_FOUND: not reserved; harmless
    for i, j in enumerate(ids[10:20]):
        eq(c.cmd("move-job %d %s-m%d" % (j, x, i)), b"MOVED", "move-job %d" % j)
        eq(c.cmd("delete %d" % j), b"DELETED", "delete moved %d" % j)
    line = c.cmd("flush-tube %s" % x)
    check(line.startswith(b"FLUSHED "), "flush-tube: %r" % line)
    c.ignore(x)
    # Buried and kicked, on a tube of its own.
    c.use(x + "-k")
    j = c.put(BODY)
    c.watch(x + "-k")
    c.ignore("default")
    jid, _ = c.reserve(timeout=5)
    eq(c.cmd("bury %d 1" % jid), b"BURIED", "bury")
    eq(c.cmd("kick 1"), b"KICKED 1", "kick")
    jid, _ = c.reserve(timeout=5)
    eq(c.cmd("release %d 1 0" % jid), b"RELEASED", "release")
    eq(c.cmd("delete %d" % j), b"DELETED", "delete kicked")
    # Fanout: a child made for the cycle, fed, emptied, deleted.
    child = "fan+c%d" % cycle
    c.watch(child)
    c.use("fan")
    j = c.put(BODY)
    c.ignore(x + "-k")
    c.watch("fan")
    got = sorted(c.reserve(timeout=5)[0] for _ in range(2))
    for g in got:
        eq(c.cmd("delete %d" % g), b"DELETED", "delete fanout job %d" % g)
    check(j in got, "the parent's job among %r" % got)
    c.ignore(child)
    m = p.mc(timeout=10)
    eq(m.cmd("delete %s" % child), b"DELETED", "memcache delete of %s" % child)
    m.close()
    # max_age: the job expires into dlq.
    c.use("exp")
    c.put(BODY)
    c.watch("dlq")
    c.ignore("fan")
    jid, _ = c.reserve(timeout=10)
    eq(c.cmd("delete %d" % jid), b"DELETED", "delete expired job")
    c.close()


def listener_load(p, cycle):
    """Producer and worker through the [listen soak] socket, on a tube its
    reloaded pattern allows; a tube it does not is refused."""
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.settimeout(10)
    u.connect(p.soak_sock)
    c = harness.Client(None, None, timeout=10, sock=u)
    t = "s%d-x" % cycle
    c.use(t)
    c.watch(t)
    for _ in range(5):
        c.put(BODY)
    for _ in range(5):
        jid, body = c.reserve(timeout=5)
        eq(c.cmd("delete %d" % jid), b"DELETED", "delete %d through the listener" % jid)
    line = c.cmd("use s%d-x" % (cycle + 1))
    check(not line.startswith(b"USING"), "use of a tube the listener may not "
          "touch: %r" % line)
    c.close()


def scrapes(node):
    for path in ("/metrics", "/tubes.json"):
        r = http_get(node, path)
        eq(r.status, 200, "node %s: GET %s" % (node.name, path))


def deaf_clients(node):
    """Clients that send and never read: beanstalk (list-tubes while the
    cycle's tubes exist: far past the back-pressure mark), memcache
    (stats), HTTP (pipelined GETs); each closes with replies unread."""
    socks = []
    for port, req, n in ((node.port, b"list-tubes\r\nstats\r\n", 300),
                         (node.mport, b"stats\r\n", 300),
                         (node.hport, b"GET /tubes.json HTTP/1.1\r\nHost: x\r\n\r\n", 30)):
        s = socket.create_connection((HOST, port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        data = req * n
        try:
            while data:
                data = data[s.send(data):]
        except BlockingIOError:
            pass        # the server stopped reading us: back-pressure
        socks.append(s)
    time.sleep(0.05)
    for s in socks:
        s.close()


def stalled_client(node):
    """A client that never reads nor leaves, with far more replies due than
    the 256 KiB the server queues before it stops reading it (the kernel's
    buffers take some MiB first): the server closes it after stall_timeout
    (1s).  Returns the socket, kept open by the test until the cycle is
    measured, so only the server can have closed it."""
    s = socket.create_connection((HOST, node.port), timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    data = b"stats\r\n" * 300000
    try:
        while data:
            data = data[s.send(data):]
    except BlockingIOError:
        pass
    return s


def bad_reload(nodes):
    """A file with an error: every node logs it and keeps the old one;
    then kestrel's `reload` command (memcache) reloads the good one."""
    for n in nodes:
        with open(n.conf_path) as f:
            good = f.read()
        n.reload(good + "[tube bad]\nmax_items = lots\n", expect_ok=False)
        n.write_conf(good)
    m = nodes[0].mc(timeout=10)
    eq(m.cmd("reload"), b"Reloaded config.", "memcache reload")
    m.close()


def drain(p):
    """SIGUSR1: put answers DRAINING; SIGUSR2: back to normal."""
    import signal
    c = p.admin()
    p.signal(signal.SIGUSR1)
    wait_for(lambda: c.stats()["draining"] == "true", "draining: true")
    c.send(b"put 0 0 60 2\r\nhi\r\n")
    eq(c.read_line(), b"DRAINING", "put while draining")
    p.signal(signal.SIGUSR2)
    wait_for(lambda: c.stats()["draining"] == "false", "draining: false")


def follow_nowhere(r, p):
    """A replica told to follow a port nobody listens on tries and fails;
    the caller has it follow its primary again later. By address, not by
    name: a name is looked up in libc's own thread (getaddrinfo_a), which
    lingers idle for a second after a lookup, so the threads counted at
    the end of a cycle would depend on when the last retry ran (names are
    tested in test_replication_replica and test_replication_roles).
    Returns the port's harness.PortReservation (bound, never listening),
    which the caller closes once the replica follows elsewhere: while it is
    held the connects are refused and no other test's server can answer."""
    dead = harness.PortReservation()
    try:
        eq(r.admin().cmd("follow 127.0.0.1:%d" % dead.port, timeout=10), b"FOLLOWING",
           "follow on node %s" % r.name)
        wait_for(lambda: "refused" in stats_replication(r.admin())["last-error"]
                 or "connect" in stats_replication(r.admin())["last-error"],
                 lambda: "node %s to fail to connect: %r" % (
                     r.name, stats_replication(r.admin())["last-error"]))
    except BaseException:
        dead.close()
        raise
    return dead


def held_puts(p, cycle):
    """With no replica connected (sync_replicas 1), two puts whose replies
    are held: one client waits for its reply, one leaves at once.  Returns
    the waiting client."""
    wait_for(lambda: stats_replication(p.admin())["connected-replicas"] == "0",
             "node %s to have no replica" % p.name)
    t = "h%d" % cycle
    x = p.bs(timeout=30)
    x.use(t)
    x.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(BODY), BODY))
    y = p.bs(timeout=30)
    y.use(t)
    y.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(BODY), BODY))
    wait_for(lambda: stats_replication(p.admin())["waiting-replies"] == "2",
             lambda: "two held replies on %s: %r" % (p.name, stats_replication(p.admin())))
    y.close()
    return x


def held_done(p, x, cycle):
    """The replica is back: the waiting put is acknowledged; both jobs go."""
    line = x.read_line()
    check(line.startswith(b"INSERTED "), "held put: %r" % line)
    x.watch("h%d" % cycle)
    x.ignore("default")
    for _ in range(2):
        jid, _ = x.reserve(timeout=10)
        eq(x.cmd("delete %d" % jid), b"DELETED", "delete held job %d" % jid)
    x.close()


def fake_replicas(p):
    """Replicas that connect and leave: one reads its answer and a bit of
    the snapshot, one leaves before reading anything, one sends junk."""
    epoch = rint(stats_replication(p.admin()), "epoch")
    for how in ("read", "leave", "bad"):
        s = socket.create_connection((HOST, p.port), timeout=10)
        line = b"replicate x y\r\n" if how == "bad" else b"replicate %d 0\r\n" % epoch
        s.sendall(line)
        if how != "leave":
            got = s.recv(4096)
            check(got.startswith(b"REPLICATING " if how == "read" else b"BAD_FORMAT"),
                  "fake replica (%s): %r" % (how, got[:80]))
        s.close()


# ------------------------------------------------------------------ roles

def promote(node, want_epoch):
    eq(node.admin().cmd("promote", timeout=10), b"PROMOTED %d" % want_epoch,
       "promote on node %s" % node.name)


def follow(node, primary):
    eq(node.admin().cmd("follow %s" % primary.addr, timeout=10), b"FOLLOWING",
       "follow on node %s" % node.name)
    node.replica_of = primary      # a later restart keeps following it


def swap(old, new, others):
    """new (a caught-up replica of old) becomes the primary; old and the
    others follow it."""
    epoch = rint(stats_replication(new.admin()), "epoch")
    promote(new, epoch + 1)
    follow(old, new)
    for o in others:
        follow(o, new)
    wait_caught_up(new, old, *others)


# ------------------------------------------------------------------ the run

def fresh_replica(p, make):
    """A new replica with an empty binlog: a full snapshot from p, then a
    clean stop (exit 0; LeakSanitizer and valgrind check it there) and
    its directory removed."""
    f = make()
    wait_caught_up(p, f)
    f.sigterm()
    f.cluster.nodes.remove(f)
    shutil.rmtree(f.dir, ignore_errors=True)


def one_cycle(cycle, p, r, k, rnd, make_fresh):
    for n in (p, r, k):
        n.reload(conf_for(cycle, n.soak_sock))
    bad_reload([p, r, k])
    stalled = [stalled_client(p), stalled_client(r)]
    drain(p)
    bc = beanstalk_load(p, cycle, TUBES, rnd)
    for n in (p, r):
        scrapes(n)
        deaf_clients(n)
    bc.close()
    readbehind_load(p, cycle)
    memcache_load(p, cycle, max(10, TUBES // 10))
    fake_replicas(p)
    waiters(p, cycle)
    extensions_load(p, cycle)
    listener_load(p, cycle)
    # No replica for a moment: B follows nowhere, K is killed (-9); puts
    # wait for a replica, one client leaves while its reply is held.
    dead = follow_nowhere(r, p)
    try:
        k.kill9()
        x = held_puts(p, cycle)
        follow(r, p)
    finally:
        dead.close()
    k.start(replica_of=p)
    held_done(p, x, cycle)
    wait_caught_up(p, r, k)
    # Roles: B takes over, then A again.
    swap(p, r, [k])
    swap(r, p, [k])
    fresh_replica(p, make_fresh)
    return stalled


def measure(cycle, nodes, table):
    for n in nodes:
        wait_empty(n)
    # The admin connection of each node, plus a primary's two replicas.
    primary = nodes[0]
    wait_conns(primary, 3)
    for n in nodes[1:]:
        wait_conns(n, 1)
    row = {}
    for n in nodes:
        row[n.name] = f = figures(n)
        if len(table) > WARMUP:
            settle_fds(n, f, table[WARMUP][n.name])
    table.append(row)
    line = "cycle %d: " % cycle + "; ".join(
        "%s pid %d fds %d+%d threads %d rss %.1fM tubes %d conns %d jobmem %d "
        "binlog %d files (%d in dir) %d bytes live %d spilled %d"
        % (name, f["pid"], f["fds"], f["binlog-fds"], f["threads"], f["rss"] / MIB,
           f["tubes"],
           f["conns"], f["job-memory"], f["binlog-files"], f["dir-files"],
           f["binlog-bytes"], f["live-bytes"], f["spilled"])
        for name, f in row.items())
    if VERBOSE:
        print(line, flush=True)
    report("soak_roles " + line)


def settle_fds(node, f, base):
    """An fd above the warm-up's count may be one the server is about to
    close (a peer's reset not yet read): wait (with the suite's ceiling)
    for the count to come back, and say which fd it was.  One that never
    goes is left for judge() to report."""
    if f["fds"] == base["fds"]:
        return
    # (binlog files apart, as in the count: the writer's spare and the
    # reader's cache come and go)
    now = {t for t in fd_targets(node.pid) if not BINLOG_FD.search(t)}
    was = {t for t in base["fd-list"] if not BINLOG_FD.search(t)}
    extra = sorted(now - was)
    try:
        wait_for(lambda: other_fds(node.pid) == base["fds"], "fds back")
    except harness.TestFailure:
        f["fd-extra"] = extra
        # Below the warm-up's count, the fd to look for is one the
        # warm-up had.
        f["fd-gone"] = sorted(was - now)
        return
    f["fds"], f["fd-list"] = base["fds"], fd_targets(node.pid)
    f["settled"] = extra
    report("soak_roles node %s: %d fds at first, back to %d; extra %r"
           % (node.name, len(extra) + base["fds"], base["fds"], extra))
    if VERBOSE:
        print("node %s: fds settled back to %d; extra was %r"
              % (node.name, base["fds"], extra), flush=True)


def judge(table, asan):
    """No growth after the warm-up: exact for counts, a margin for RSS."""
    base = table[WARMUP]
    problems = []
    exact = ("fds", "threads", "tubes", "conns", "other-files", "job-memory")
    for ci, row in enumerate(table):
        for name, f in row.items():
            if f["unread-bytes"]:
                problems.append("node %s cycle %d: %d bytes of unsent replies counted "
                                "with no client left to read them" % (
                                    name, ci, f["unread-bytes"]))
            if f["deleted-fds"]:
                problems.append("node %s cycle %d: fds on deleted binlog files (disk "
                                "not given back): %r" % (name, ci, [
                                    t for t in f["fd-list"] if BINLOG_FD.search(t)
                                    and t.endswith("(deleted)")]))
            if f["spilled"] > 1:
                problems.append("node %s cycle %d: %d jobs spilled; only the "
                                "long-lived one is left" % (name, ci, f["spilled"]))
            if f["binlog-files"] > MAX_FILES:
                problems.append("node %s cycle %d: %d binlog files (%d bytes); with "
                                "one live record, at most %d" % (
                                    name, ci, f["binlog-files"], f["binlog-bytes"],
                                    MAX_FILES))
            if f["binlog-fds"] > SPILL_FDS + f["dir-files"]:
                problems.append("node %s cycle %d: %d fds on binlog files, more than "
                                "the writer's and the reader's %d" % (
                                    name, ci, f["binlog-fds"], SPILL_FDS))
    for ci, row in enumerate(table[WARMUP + 1:], WARMUP + 1):
        for name, f in row.items():
            for key in exact:
                if f[key] != base[name][key]:
                    problems.append("node %s cycle %d: %s %d, %d after the warm-up "
                                    "(cycle %d)%s" % (
                                        name, ci, key, f[key], base[name][key], WARMUP,
                                        "; new fds %r, fds of the warm-up gone %r" % (
                                            f["fd-extra"], f["fd-gone"])
                                        if key == "fds" and "fd-extra" in f else ""))
    if not VALGRIND:
        margin = (48 if asan else 12) * MIB
        span = max(1, (len(table) - WARMUP) // 2)
        for name in ("a", "b"):
            first = [row[name]["rss"] for row in table[WARMUP:WARMUP + span]]
            last = [row[name]["rss"] for row in table[-span:]]
            grow = sum(last) / len(last) - sum(first) / len(first)
            if grow > margin:
                problems.append("node %s: RSS grew by %.1f MiB (first cycles %s, "
                                "last %s; margin %d MiB)" % (
                                    name, grow / MIB, [r // 1024 for r in first],
                                    [r // 1024 for r in last], margin // MIB))
    check(not problems, "growth across cycles:\n  " + "\n  ".join(problems[:20]))


@no_server
@tubed_only(EXT)
@slow
def test_soak_roles_resources_stay_flat(binary):
    check(CYCLES > WARMUP + 1, "SOAK_ROLES_CYCLES must be above %d" % (WARMUP + 1))
    asan = is_asan(binary)
    env = dict(os.environ, **SMALL_QUARANTINE) if asan else None
    rnd = random.Random(CYCLES * 7919 + TUBES)
    args = ("-f", "0", "-s", "65536", "--repl-backlog", os.environ.get("SOAK_ROLES_BACKLOG", "256K"))
    with Cluster(binary) as cl:
        def node(name, **kw):
            n = cl.node(name, *args, env=env, start=False,
                        conf=conf_for(0, sock_path(cl, name)), **kw)
            n.soak_sock = sock_path(cl, name)
            return n.start()
        a = node("a")
        b = node("b", replica_of=a)
        k = node("k", replica_of=a)
        kept = keep_job(a)
        wait_caught_up(a, b, k)
        table = []
        for cycle in range(CYCLES):
            stalled = one_cycle(cycle, a, b, k, rnd,
                                lambda: node("f%d" % cycle, replica_of=a))
            measure(cycle, [a, b, k], table)
            for sock in stalled:
                sock.close()
            eq([n.name for n in (a, b, k)], ["a", "b", "k"], "nodes")
        judge(table, asan)
        pa, pb = table[0]["a"]["pid"], table[-1]["a"]["pid"]
        eq(pa, pb, "node a lived through the run")
        for n in (a, b, k):
            eq(harness.parse_yaml_dict(n.admin().cmd_body("stats-job %d" % kept)[1])
               ["state"], "delayed", "node %s: the long-lived job" % n.name)
            check(int(harness.parse_yaml_dict(n.admin().cmd_body("stats-binlog")[1])
                      ["records-migrated"]) > 0 or n is k,
                  "node %s: the binlog never migrated the long-lived job's "
                  "record (no compaction ran)" % n.name)


# ------------------------------------------------------------------ focused

def deleted_files(pid):
    """The fds of pid on binlog files that no longer exist (disk not given
    back; valgrind's own deleted files do not count)."""
    return [t for t in fd_targets(pid) if BINLOG_FD.search(t) and t.endswith(" (deleted)")]


@no_server
@tubed_only("read-behind is a tubed extension")
def test_soak_readbehind_reader_lets_go_of_deleted_binlog_files(binary):
    """The read-behind reader thread keeps up to 8 binlog files open.  Once
    the binlog removes a file, the thread must close it even when it has
    nothing more to read: the old code closed such fds only at its next
    read, so after a queue emptied the deleted files (up to 8 times
    binlog_file_size of disk) stayed held for as long as nothing was
    spilled again."""
    from readbehind_util import RB, wait_spilled
    with RB(binary, "[tube rb]\nmax_memory_size = 1K\n", "-f", "0",
            "-s", "65536") as s:
        c = s.bs()
        c.use("rb")
        big = b"r" * 900
        for _ in range(20):
            c.put(big)
        wait_spilled(c, 19, what="after 20 puts of 900 bytes over a 1K budget")
        c.watch("rb")
        c.ignore("default")
        for _ in range(20):
            jid, body = c.reserve(timeout=10)
            eq(body, big, "a body read back")
            eq(c.cmd("delete %d" % jid), b"DELETED", "delete %d" % jid)
        held = [t for t in fd_targets(s.pid) if "/binlog." in t]
        first = min(int(t.rsplit(".", 1)[1].split()[0]) for t in held)
        # Records elsewhere until every file the reader read is removed.
        c.use("other")
        filler = b"f" * 2000
        while int(harness.parse_yaml_dict(c.cmd_body("stats-binlog")[1])
                  ["oldest-file"]) <= first + 1:
            eq(c.cmd("delete %d" % c.put(filler)), b"DELETED", "filler")
        wait_for(lambda: not deleted_files(s.pid),
                 lambda: "the server to close its deleted binlog files: %r"
                 % deleted_files(s.pid))
