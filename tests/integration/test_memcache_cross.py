"""One store, two protocols (spec kestrel.md §1-§2): jobs put with beanstalk
are taken with memcache get and back, priorities and states are shared;
durability across kill -9 (STORED items, open items, plain gets, expiry
deadlines); the memcache socket under systemd socket activation.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

import harness  # noqa: E402
from harness import check, eq, fail, no_server, slow  # noqa: E402
from mcproto import Mc, McServer, bs_job, bs_stats_tube, wait_for  # noqa: E402


@no_server
def test_beanstalk_put_memcache_get(binary):
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        b.use("q")
        b.put(b"from beanstalk", pri=5000)
        eq(m.get("q"), b"from beanstalk", "a put job, taken by get")
        m.store("q", b"from memcache")
        b.watch("q")
        jid, body = b.reserve(timeout=0)
        eq(body, b"from memcache", "a set job, reserved by beanstalk")
        b.expect("delete %d" % jid, "DELETED")


@no_server
def test_priority_order_across_protocols(binary):
    """A put at priority 0 goes before earlier sets at the tube's priority
    (1024); never a delayed, buried or reserved job."""
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.store("q", b"set-1024")
        b.use("q")
        b.put(b"urgent", pri=0)
        b.put(b"delayed", pri=0, delay=3600)
        bid = b.put(b"buried", pri=0)
        b.watch("q")
        b.ignore("default")
        line, _ = b.cmd_body("reserve-job %d" % bid)
        b.expect("bury %d 0" % bid, "BURIED")
        rid = b.put(b"reserved", pri=0)
        line, _ = b.cmd_body("reserve-job %d" % rid)
        check(line.startswith(b"RESERVED"), "reserve-job: %r" % line)
        eq(m.get("q"), b"urgent", "priority 0 first")
        eq(m.get("q"), b"set-1024", "then the set")
        eq(m.get("q"), None, "delayed, buried and reserved jobs are not served")
        b.expect("kick 1", "KICKED 1")
        eq(m.get("q"), b"buried", "a kicked job")


@no_server
def test_plain_get_is_a_delete(binary):
    """A plain get deletes (beanstalk sees the job gone); an open job is
    reserved; /close deletes; /abort releases with the same id."""
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        b.use("q")
        a = b.put(b"a", pri=10)
        c = b.put(b"c", pri=10)
        eq(m.get("q"), b"a", "get")
        eq(bs_job(b, a), None, "the job is gone")
        eq(m.get("q/open"), b"c", "open")
        st = bs_job(b, c)
        eq((st["state"], st["reserves"]), ("reserved", "1"), "open = reserved")
        m.expect("get q/abort", "END")
        st = bs_job(b, c)
        eq((st["state"], st["pri"], st["releases"]), ("ready", "10", "1"),
           "released with its priority")
        eq(m.get("q/open"), b"c", "open again")
        m.expect("get q/close", "END")
        eq(bs_job(b, c), None, "closed: deleted")


@no_server
def test_beanstalk_reserver_gets_memcache_set(binary):
    """A beanstalk reserve waiting on the tube is woken by a set."""
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        b.watch("q")
        b.send(b"reserve-with-timeout 20\r\n")
        wait_for(lambda: bs_stats_tube(s.bs(), "q") is not None, "the tube")
        m.store("q", b"hello")
        line, body = b.read_reply()
        eq(body, b"hello", "woken by the set")


# ------------------------------------------------------------------ durability

@no_server
def test_durability_kill9(binary):
    """-b DIR -f 0, kill -9: a STORED item is back; an open item is back,
    ready, at the head; an item taken with a plain get stays gone."""
    with McServer(binary, "-f", "0", bdir=True) as s:
        m = s.mc()
        for v in (b"taken", b"opened", b"stored1", b"stored2"):
            m.store("q", v)
        eq(m.get("q"), b"taken", "plain get")
        eq(m.get("q/open"), b"opened", "open")
        m.send(b"set q 0 0 7 noreply\r\nstored3\r\n")
        m.sync()   # a reply after a noreply set: the set is durable too
        s.kill9()
        s.restart()
        m = s.mc()
        eq([m.get("q") for _ in range(5)],
           [b"opened", b"stored1", b"stored2", b"stored3", None],
           "after the restart")


@slow
@no_server
def test_durability_expiry_is_absolute(binary):
    """A job that expired while the server was down is never served."""
    with McServer(binary, "-f", "0", bdir=True) as s:
        m = s.mc()
        m.store("q", b"short", exptime=int(time.time()) + 2)
        m.store("q", b"long", exptime=3600)
        s.kill9()
        t_end = time.monotonic() + 3
        while time.monotonic() < t_end:
            time.sleep(0.1)
        s.restart()
        m = s.mc()
        eq(m.get("q"), b"long", "the expired job is not served")
        m.expect("get q", "END")


@no_server
def test_durability_delete_and_flush(binary):
    with McServer(binary, "-f", "0", bdir=True) as s:
        m = s.mc()
        for q in ("a", "b", "c"):
            m.store(q, b"x")
        m.expect("delete a", "DELETED")
        m.expect("flush b", "END")
        s.kill9()
        s.restart()
        m = s.mc()
        eq([m.get("a"), m.get("b"), m.get("c")], [None, None, b"x"], "after restart")


# ---------------------------------------------------------- socket activation

_ACTIVATE2 = """
import os, sys
fds = [int(sys.argv[1]), int(sys.argv[2])]
tmp = [os.dup(f) for f in fds]
for i, f in enumerate(tmp):
    os.dup2(f, 3 + i)
    os.set_inheritable(3 + i, True)
os.environ["LISTEN_FDS"] = "2"
os.environ["LISTEN_FDNAMES"] = "tubed.socket:memcache"
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[3], sys.argv[3:])
"""


@no_server
def test_socket_activation_memcache_named_socket(binary):
    """The socket named "memcache" serves memcache (no --memcache-port
    needed); the other one beanstalk."""
    socks = []
    for _ in range(2):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.bind((harness.HOST, 0))
        ls.listen(16)
        socks.append(ls)
    env = dict(os.environ)
    for k in ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"):
        env.pop(k, None)
    fds = [x.fileno() for x in socks]
    proc = subprocess.Popen([sys.executable, "-c", _ACTIVATE2, str(fds[0]), str(fds[1]),
                             binary], pass_fds=fds, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        b = harness.Client(harness.HOST, socks[0].getsockname()[1])
        b.expect("list-tube-used", "USING default")
        m = Mc(harness.HOST, socks[1].getsockname()[1])
        m.store("q", b"activated")
        eq(m.get("q"), b"activated", "memcache on the inherited socket")
        b.close()
        m.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            fail("tubed did not stop on SIGTERM")
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
        for ls in socks:
            ls.close()
    eq(rc, 0, "exit status (output: %r)" % err[-500:])


@no_server
def test_systemd_memcache_socket_unit(binary):
    """pkg/systemd/tubed-memcache.socket names its socket for tubed, and
    systemd-analyze verify accepts it with tubed.service."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    unit = os.path.join(root, "pkg", "systemd", "tubed-memcache.socket")
    with open(unit) as f:
        text = f.read()
    for line in ("ListenStream=127.0.0.1:22133", "FileDescriptorName=memcache",
                 "Service=tubed.service"):
        check(("\n" + line + "\n") in text, "the unit has %s" % line)
    sa = shutil.which("systemd-analyze")
    if not sa:
        raise harness.Skip("systemd-analyze not installed")
    d = tempfile.mkdtemp(prefix="tubed-mc-unit-")
    try:
        mandir = os.path.join(d, "man", "man1")
        os.makedirs(mandir)
        shutil.copy(os.path.join(root, "man", "tubed.1"), mandir)
        with open(os.path.join(root, "pkg", "systemd", "tubed.service")) as f:
            svc = f.read()
        with open(os.path.join(d, "tubed.service"), "w") as f:
            f.write(svc.replace("=/usr/bin/tubed ", "=%s " % binary))
        for u in ("tubed.socket", "tubed-memcache.socket"):
            shutil.copy(os.path.join(root, "pkg", "systemd", u), d)
        env = dict(os.environ, MANPATH=os.path.join(d, "man"), SYSTEMD_LOG_LEVEL="warning")
        r = subprocess.run([sa, "verify"] + [os.path.join(d, u) for u in (
            "tubed-memcache.socket", "tubed.socket", "tubed.service")],
            capture_output=True, timeout=60, env=env)
        out = (r.stdout + r.stderr).decode("utf-8", "replace").strip()
        eq(r.returncode, 0, "systemd-analyze verify status (%s)" % out)
        check(not out, "systemd-analyze verify complains:\n%s" % out)
    finally:
        shutil.rmtree(d, ignore_errors=True)
