"""One restartable tubed for the integration tests (not a test file).

harness.Server is one process: started once, stopped once.  A test that
restarts a server (kill -9 and replay, a reload, a config change) needs an
object that outlives its processes and keeps what they share: the
temporary directory, the config file, the binlog directory and, when asked,
the beanstalk port.  That object is Tubed; the test helpers' server
classes (binlog_util.Servers, mcproto.McServer, policy_util.Policy,
readbehind_util.RB, http_util.MetricsServer, repl_util.Node) are thin
users of it.

    with Tubed(binary, "-f", "0", conf="[tube q]\\n", bdir=True,
               memcache=True, metrics=True) as t:
        c = t.bs(); m = t.mc(); t.metrics()     beanstalk, memcache, HTTP
        t.write_conf(NEW); t.reload()           SIGHUP, wait for the log line
        t.kill9(); t.restart()                  same config and binlog dir
        t.sigterm()                             must exit 0; returns stderr

The command line is  -l 127.0.0.1 -p PORT [--memcache-port M]
[--metrics-port H] [--config FILE] [-b DIR] ARGS EXTRA  (or -l unix:PATH).
Each start attempt picks free ports afresh (the beanstalk one is kept
across restarts with keep_port=True); ports the config file or the
arguments name (a [listen] section's address) are harness.PortReservations
given as ports=, held until the end, with conf a function that renders the
file for their current ports; the server counts as started once
/proc shows it listening on every one of them and it has logged that its
binlog is replayed (it listens before it replays), and a start that fails
because a port was taken meanwhile is tried again.  Servers are stopped by
pid; every process's stop is checked for crashes and sanitizer reports
(harness.Server.stop), and the directory is removed at the end.
"""

import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.join(HERE, "mc_clients") not in sys.path:
    sys.path.insert(0, os.path.join(HERE, "mc_clients"))

import harness  # noqa: E402
from harness import DEADLINE, TestFailure, check, eq, fail, wait_for  # noqa: E402,F401

# Start attempts before giving up (a port taken between picking and binding).
ATTEMPTS = 8


class Tubed:
    """A tubed that can be stopped, killed, reloaded and started again."""

    def __init__(self, binary, *args, conf=None, bdir=False, memcache=False,
                 metrics=False, env=None, keep_port=False, unix=False,
                 tmp=None, prefix="tubed-", label="server", ports=()):
        self.binary = binary
        # Ports chosen in advance that the config (or args) name: held
        # until __exit__, and moved by a first start that collides on one
        # (harness.start_on); conf is then a function of nothing that
        # renders the file for their current ports.
        self.reserved = list(ports)
        self.conf_fn = conf if callable(conf) else None
        if self.conf_fn is not None:
            conf = self.conf_fn()
        self.args = [str(a) for a in args]
        self.label = label          # in failure messages ("node r", ...)
        self.own_tmp = tmp is None
        self.tmp = tempfile.mkdtemp(prefix=prefix) if tmp is None else tmp
        self.conf_path = None
        if conf is not None:
            self.conf_path = os.path.join(self.tmp, "tubed.conf")
            self.write_conf(conf)
        self.bdir = None
        if bdir is True:
            self.bdir = os.path.join(self.tmp, "binlog")
            os.mkdir(self.bdir)
        elif bdir:
            self.bdir = bdir
        self.memcache = memcache
        self.with_metrics = metrics
        self.env = env              # the server's environment (None: ours)
        self.keep_port = keep_port
        # unix: the beanstalk listener is TMP/bs.sock only (no TCP port).
        self.unix_path = os.path.join(self.tmp, "bs.sock") if unix else None
        self.port = None
        self.mport = None           # memcache port of the current process
        self.hport = None           # metrics (HTTP) port of the current process
        self.extra = []
        self.srv = None             # the running harness.Server
        self.old = []               # processes already stopped or killed

    # -- files ---------------------------------------------------------------
    def write_conf(self, text):
        """Replace the config file atomically: a reload never sees half."""
        tmp = self.conf_path + ".new"
        with open(tmp, "wb") as f:
            f.write(harness._b(text))
        os.rename(tmp, self.conf_path)

    # -- command line --------------------------------------------------------
    def config_args(self):
        """--config FILE and -b DIR, as this server has them."""
        a = []
        if self.conf_path:
            a += ["--config", self.conf_path]
        if self.bdir:
            a += ["-b", self.bdir]
        return a

    def base_args(self):
        """Every argument but the listeners' (for a run that must refuse to
        start, say)."""
        return self.config_args() + self.args

    def _argv(self, port):
        """The command line for one start attempt on beanstalk `port` (a
        subclass may wrap or extend it)."""
        if self.unix_path:
            a = [self.binary, "-l", "unix:" + self.unix_path]
        else:
            a = [self.binary, "-l", harness.HOST, "-p", str(port)]
        self.mport = self.hport = None
        if self.memcache:
            self.mport = harness._free_port()
            a += ["--memcache-port", str(self.mport)]
        if self.with_metrics:
            self.hport = harness._free_port()
            a += ["--metrics-port", str(self.hport)]
        return harness.VALGRIND + a + self.base_args() + self.extra

    def extra_ports(self):
        """The ports besides the beanstalk one the server must listen on."""
        return [p for p, on in ((self.mport, self.memcache),
                                (self.hport, self.with_metrics)) if on]

    # -- processes -----------------------------------------------------------
    def start(self, extra=(), replayed=True):
        """Start (or start again: same directory, config and binlog; the same
        beanstalk port with keep_port).  `extra` arguments go last and hold
        for this start only.  Returns the harness.Server once the binlog is
        replayed (replayed=False: once it listens).  With reserved ports, a
        start before any ran on them that collides on one is tried again
        with them moved (and the file rendered again)."""
        if not self.reserved:
            return self._start(extra, replayed)
        box = {}

        def attempt():
            if self.conf_fn is not None:
                self.write_conf(self.conf_fn())
            try:
                box["srv"] = self._start(extra, replayed)
            except harness.ServerError as e:
                return str(e)
            return None
        out = harness.start_on(self.reserved, attempt)
        check(out is None, "%s did not start: %s" % (self.label, out))
        return box["srv"]

    def _start(self, extra, replayed):
        self.extra = [str(x) for x in extra]
        fixed = self.keep_port and self.port is not None
        last = ""
        for _ in range(ATTEMPTS):
            srv = harness.Server(self.binary, argv=self._argv, env=self.env,
                                 port=self.port if fixed else None,
                                 unix_path=self.unix_path)
            srv.name = self.label
            try:
                srv.start(replayed=replayed)
            except harness.ServerError as e:
                if not (fixed or self.unix_path):
                    raise       # harness.Server tried free ports already
                # The fixed port may still be held by a connection of the
                # old process for a moment: try again.
                last = str(e)
                time.sleep(0.3)
                continue
            self.srv = srv
            if not self.unix_path:
                self.port = srv.port
            if self._wait_extra_ports():
                self.started()
                return srv
            last = srv.stderr_text()[-500:]
            self.srv = None
            srv.stop()
        fail("%s did not start with all its ports: %s" % (self.label, last))

    def restart(self, extra=()):
        return self.start(extra)

    def started(self):
        """Called once a start succeeded (a subclass resets its state)."""

    def _wait_extra_ports(self):
        ports = self.extra_ports()
        if not ports:
            return True
        srv = self.srv
        deadline = time.monotonic() + 10
        while srv.alive():
            if harness.listening(srv.pid, ports=ports):
                return srv.alive()
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return False

    def _retire(self):
        s, self.srv = self.srv, None
        self.old.append(s)
        return s

    @property
    def pid(self):
        return self.srv.pid

    def alive(self):
        return self.srv is not None and self.srv.alive()

    def signal(self, sig):
        self.srv.signal(sig)

    def kill9(self):
        """SIGKILL by pid; returns the killed server's output."""
        text = self.srv.kill9()
        self._retire()
        return text

    def sigterm(self, timeout=15):
        """SIGTERM; the server must exit 0; returns its output."""
        text = self.srv.sigterm(timeout)
        self._retire()
        return text

    def stop(self):
        """Stop by pid; returns the problems (harness.Server.stop), with the
        output of a server that had died on its own."""
        if self.srv is None:
            return []
        return stop_server(self._retire())

    def listen_ports(self):
        """The TCP ports the running server listens on, as /proc shows
        them (its [listen] sections' too)."""
        return harness.listen_ports(self.srv.pid)

    def stderr(self):
        """The output of the current process (or of the last one)."""
        s = self.srv if self.srv is not None else self.old[-1]
        return s.stderr_text()

    # -- reload --------------------------------------------------------------
    def reload_lines(self):
        return reload_lines(self.srv)

    def reload(self, conf=None, expect_ok=True):
        """Rewrite the config (if given), SIGHUP, wait until the server logged
        the outcome; returns that line."""
        if conf is not None:
            self.write_conf(conf)
        return reload(self.srv, self.conf_path, expect_ok)

    # -- clients -------------------------------------------------------------
    def client(self, timeout=harness.DEFAULT_TIMEOUT):
        return self.srv.client(timeout)

    bs = client

    def mc(self, timeout=harness.DEFAULT_TIMEOUT):
        """A memcache client (mcproto.Mc) on the memcache port."""
        from mcproto import Mc
        sock = socket.create_connection((harness.HOST, self.mport), timeout=timeout)
        c = Mc(None, None, timeout=timeout, sock=sock)
        self.srv.clients.append(c)
        return c

    def http(self, timeout=5.0, rcvbuf=None):
        """A raw HTTP connection (http_util.HttpConn) on the metrics port."""
        from http_util import HttpConn
        return HttpConn(self.hport, timeout, rcvbuf)

    def metrics(self):
        """One scrape of /metrics (http_util.Metrics)."""
        from http_util import Metrics, get
        r = get(self, "/metrics")
        eq(r.status, 200, "%s: GET /metrics status" % self.label)
        return Metrics(r.text())

    # -- context -------------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.remove_dir()
            for r in self.reserved:
                r.close()
            raise
        return self

    def remove_dir(self):
        if self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __exit__(self, et, ev, tb):
        problems = self.stop()
        self.remove_dir()
        for r in self.reserved:
            r.close()
        raise_problems(problems, et, ev)
        return False


def reload_lines(srv):
    """The reload outcomes a server logged so far."""
    return re.findall(r"^tubed: \w+: reload(?:ed|:) .*$", srv.stderr_text(), re.M)


def reload(srv, conf_path, expect_ok=True):
    """SIGHUP the server; wait until it logged the outcome; returns that
    line, checked to be a success (expect_ok) or a refusal.  The loop
    handles a signal batch per iteration, so a command sent after this is
    answered under the new configuration."""
    before = len(reload_lines(srv))
    srv.signal(signal.SIGHUP)
    lines = wait_for(lambda: (lambda l: l if len(l) > before else None)(
        reload_lines(srv)), "%s to log its reload" % srv.name)
    line = lines[before]
    if expect_ok:
        check(line.startswith("tubed: info: reloaded %s" % conf_path),
              "%s reload: expected 'reloaded %s', got %r"
              % (srv.name, conf_path, line))
    else:
        check("reloaded" not in line,
              "reload of a bad file: expected an error, got %r" % line)
    return line


def stop_server(srv):
    """harness.Server.stop(), plus the output of a server that had died on
    its own (a stopped one, or one never started, has no problems)."""
    if srv is None or srv.stopped or srv.proc is None:
        return []
    died = not srv.alive()
    text = srv.stderr_text() if died else ""
    try:
        problems = srv.stop()
    except Exception as e:  # pragma: no cover
        problems = ["stopping %s failed: %r" % (srv.name, e)]
    if problems and died:
        problems.append("its output: %r" % text[-1500:])
    return problems


def raise_problems(problems, et=None, ev=None):
    """At the end of a with block: turn the servers' problems into a
    failure; while a test failure (or a socket error) is already on its
    way, add them to it."""
    if not problems:
        return
    if et is None:
        raise TestFailure("; ".join(problems))
    if issubclass(et, (TestFailure, OSError)):
        raise TestFailure("%s | %s" % (ev, "; ".join(problems))) from ev
