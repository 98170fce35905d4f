"""Test harness for the tubed integration suite (Python 3 standard library only).

A test is a function ``test_*(srv)`` in a ``tests/integration/test_*.py`` file.
``srv`` is a running :class:`Server`; ``srv.client()`` opens a connection and
returns a :class:`Client`.  Every read has a deadline (5 s by default), so a
misbehaving server makes a test fail, never hang.

Decorators understood by run.py:

    @tubed_only("why")        skipped with --reference (beanstalkd 1.12):
                              1.13 behaviour, reference bugs, tubed's choices.
    @server_args("-z", "10")  extra command-line arguments for this test's server.
    @no_server                the test gets no server (it calls start_server()
                              itself) and receives the binary path instead.
    @slow                     the test sleeps for seconds: scheduled first.

A test file can set ``SERVER_ARGS = [...]`` to give every test in it extra
arguments, or ``SERVER = "none"`` to run its tests without a server.

Servers are found a free port (bound to port 0, retried on collision); a
port a test must choose before it starts a server of its own (an OCF
agent's, one a script is told) is held with PortReservation.  Servers are
considered up once /proc shows them listening (no probe connection, so the
connection counters start at zero), and are always stopped by pid: SIGTERM,
then SIGKILL after 5 s.  Server.stop() reports a crash (death by a signal we
did not send, an exit on its own, an error status after SIGTERM) and any
AddressSanitizer/UBSan/LeakSanitizer text in the server's output; run.py turns
those into test failures.

A test that restarts a server (kill -9 and replay, reload, config changes)
uses server.Tubed, which owns the temporary directory, config file, binlog
directory and ports across its processes; the helpers' server classes
(binlog_util.Servers, mcproto.McServer, policy_util.Policy,
readbehind_util.RB, http_util.MetricsServer, repl_util.Node) are built on
it.  wait_for(pred, what, timeout) is the one polling loop: a ceiling, never
a speed assertion.

Client: send() raw bytes, read_line() one reply line, read_reply() a line and
its body (OK n / RESERVED id n / FOUND id n), expect*() helpers whose failure
message shows the bytes sent, expected and received, stats()/stats_tube()/
stats_job() parsed into ordered dicts, check_cases() for table-driven raw
protocol cases.
"""

import atexit
import errno
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

DEFAULT_TIMEOUT = 5.0
HOST = "127.0.0.1"

# A suite started with SIGINT ignored (a background job of a script, as
# `make check &` is) would hand that to every server it starts, and tubed,
# like beanstalkd, keeps an inherited SIGINT ignored: the tests that stop a
# server with SIGINT mean one started as from a terminal.
if (threading.current_thread() is threading.main_thread() and
        signal.getsignal(signal.SIGINT) == signal.SIG_IGN):
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Text that only appears when a sanitizer found something.
SANITIZER_PATTERNS = [
    re.compile(rb"ERROR: AddressSanitizer"),
    re.compile(rb"ERROR: LeakSanitizer"),
    re.compile(rb"UndefinedBehaviorSanitizer"),
    re.compile(rb"runtime error: "),
    re.compile(rb"WARNING: ThreadSanitizer"),
    re.compile(rb"MemorySanitizer"),
    re.compile(rb"==\d+==ERROR"),
    re.compile(rb"SUMMARY: \w+Sanitizer"),
]


class TestFailure(AssertionError):
    """A failed check; the message is printed as the reason."""


class Skip(Exception):
    """Raised by a test to skip itself."""


def fail(msg):
    raise TestFailure(msg)


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def eq(got, expected, what="value"):
    if got != expected:
        raise TestFailure("%s: expected %r, got %r" % (what, expected, got))


# ---------------------------------------------------------------- decorators

def tubed_only(reason=""):
    """Mark a test that beanstalkd 1.12 does not pass (documented difference)."""
    def deco(fn):
        fn.tubed_only = reason or True
        return fn
    if callable(reason):  # used bare: @tubed_only
        fn, reason = reason, ""
        return deco(fn)
    return deco


def server_args(*args):
    def deco(fn):
        fn.server_args = [str(a) for a in args]
        return fn
    return deco


def no_server(fn):
    fn.no_server = True
    return fn


def slow(fn):
    """Mark a test that sleeps for several seconds (scheduled first)."""
    fn.slow = 1
    return fn


# ------------------------------------------------------------------- server

_ACTIVATE = """
import os, sys
fd = int(sys.argv[1])
if fd != 3:
    os.dup2(fd, 3)
    os.close(fd)
os.set_inheritable(3, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[2], sys.argv[2:])
"""


# TUBED_VALGRIND=1 runs every server the harness starts under valgrind's
# memcheck: any error or definite leak makes the server exit 99, which the
# harness reports as a failure ("exited with an error after SIGTERM").
VALGRIND = (["valgrind", "-q", "--leak-check=full", "--error-exitcode=99",
             "--errors-for-leak-kinds=definite,indirect"]
            if os.environ.get("TUBED_VALGRIND") else [])
STOP_WAIT = 30 if VALGRIND else 5


def _free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((HOST, 0))
        return s.getsockname()[1]
    finally:
        s.close()


class PortReservation:
    """A TCP port chosen in advance for servers a test starts on a command
    line or an agent's parameters of its own (an OCF node, a tubed whose
    port a script is told), held until close().

    A port from _free_port() is free when picked and used seconds later: in
    between, another test's outgoing connection may get it (connect() takes
    its port from the same range) and the server fails with 'Address
    already in use'.  Here a socket stays bound to the port on each of
    `hosts`, with SO_REUSEADDR and never listening: while it is, connect()
    skips the port, binds to port 0 and binds without SO_REUSEADDR are
    refused it, and the server (tubed binds with SO_REUSEADDR) still binds
    and listens there, at its first start and at every restart.  port_taken()
    and listening() do not count it (it does not listen).

    One way around it remains: a server of another test that was given the
    same number just before it was reserved, and binds it with SO_REUSEADDR.
    start() tries such a start again on a new port, but only before anything
    ever ran on the reservation: after that the port is an address others
    know (a replica follows it, a peer list names it), and a collision is
    reported, not moved past.  A reservation may cover several addresses
    (nodes on 127.0.0.2 and 127.0.0.3 that share one port)."""

    ATTEMPTS = 5

    def __init__(self, *hosts):
        self.hosts = hosts or (HOST,)
        self.socks = []
        self.port = None
        self.used = False      # something ran on it: it no longer moves
        self.move()

    def move(self):
        """Give the port up and hold another one; returns it."""
        check(not self.used, "port %s moved after a server ran on it" % self.port)
        self.close()
        for _ in range(100):
            socks = []
            try:
                for host in self.hosts:
                    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                                      socket.SOCK_STREAM)
                    socks.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind((host, socks[0].getsockname()[1] if len(socks) > 1 else 0))
            except OSError as e:
                for s in socks:
                    s.close()
                if e.errno != errno.EADDRINUSE:
                    raise
                continue
            self.socks = socks
            self.port = socks[0].getsockname()[1]
            return self.port
        raise TestFailure("no port free on every one of %s" % (self.hosts,))

    def start(self, attempt):
        """attempt() starts the server on self.port and returns None once it
        runs, else the output of the start that failed; returned as is,
        unless it failed on the port before anything ran here (see the
        class): then it is tried again on a new port."""
        return start_on([self], attempt)

    def close(self):
        for s in self.socks:
            s.close()
        self.socks = []

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False


def start_on(reservations, attempt):
    """PortReservation.start() for a server on several reserved ports (its
    beanstalk port, a [listen] section's, a metrics port): attempt() starts
    it on their current ports and returns None once it runs, else the
    output of the start that failed.  A start that failed with 'Address
    already in use' while nothing ever ran on any of them is tried again
    with every one moved (the message need not say which port it was)."""
    out = None
    for _ in range(PortReservation.ATTEMPTS):
        out = attempt()
        if out is None:
            for r in reservations:
                r.used = True
            return None
        if any(r.used for r in reservations) or "Address already in use" not in out:
            break
        for r in reservations:
            r.move()
    return out


def start_reserved(res, make):
    """A harness Server that make() builds for res.port, started through
    res.start() (moved past a collision before its first start); res is
    closed either way, for tubed to bind the port.  Returns (server, None)
    once it runs, else (the last server tried, the failed start's output)."""
    box = {}

    def attempt():
        box["srv"] = make()
        try:
            box["srv"].start()
        except ServerError as e:
            return str(e)
        return None
    try:
        out = res.start(attempt)
    finally:
        res.close()
    return box["srv"], out


def spawn_on(reservations, argv, what, log_path=None, timeout=10, **popen_kw):
    """A process (a tubed, another server) started on reserved ports, once
    /proc shows it listening on every one of them: argv() is its command
    line for their current ports (called at each attempt), its output goes
    to log_path (None: a temporary file); a start that exits first is
    tried again through start_on(), and fails the test with the output if
    it cannot be.  The caller stops it by pid."""
    box = {}

    def attempt():
        ports = [r.port for r in reservations]
        if log_path is None:
            log = tempfile.TemporaryFile()
        else:
            log = open(log_path, "w+b")
        with log:
            p = subprocess.Popen(argv(), stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=log, **popen_kw)
            try:
                wait_for(lambda: p.poll() is not None or listening(p.pid, ports=ports),
                         "%s listening on %s" % (what, ports), timeout=timeout)
            except BaseException:
                p.kill()
                p.wait()
                raise
            if p.poll() is None:
                box["p"] = p
                return None
            log.seek(0)
            return log.read().decode("utf-8", "replace")
    out = start_on(reservations, attempt)
    check(out is None, "%s did not start: %s" % (what, out))
    return box["p"]


def _listening_inodes(ports=(), unix_path=None):
    """{inode ("socket:[N]"): port} of the sockets listening on one of
    `ports` (any local address of /proc/net/tcp{,6}) or on the UNIX path
    (port None); None if /proc cannot tell.  One read of each table: on a
    busy machine /proc/net/tcp holds tens of thousands of lines."""
    inodes = {}
    try:
        if unix_path:
            # Any socket path on the machine may be bytes that are not
            # UTF-8 (test_http_hunt makes one): read them as os.fsdecode does.
            with open("/proc/net/unix", errors="surrogateescape") as f:
                next(f)
                for line in f:
                    parts = line.split()
                    # Flags 00010000 = listening (__SO_ACCEPTCON).
                    if (len(parts) >= 8 and parts[7] == unix_path
                            and int(parts[3], 16) & 0x10000):
                        inodes["socket:[%s]" % parts[6]] = None
            return inodes
        want = set(ports)
        seen = False
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                f = open(table)
            except OSError:
                continue
            seen = True
            with f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A":
                        port = int(parts[1].rsplit(":", 1)[1], 16)
                        if port in want:
                            inodes["socket:[%s]" % parts[9]] = port
        return inodes if seen else None
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def listen_ports(pid):
    """The TCP ports process pid listens on (sorted), read from /proc; None
    if /proc cannot tell."""
    fddir = "/proc/%d/fd" % pid
    try:
        mine = set()
        for fd in os.listdir(fddir):
            try:
                mine.add(os.readlink(os.path.join(fddir, fd)))
            except OSError:
                pass
        ports = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                f = open(table)
            except OSError:
                continue
            with f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and "socket:[%s]" % parts[9] in mine:
                        ports.add(int(parts[1].rsplit(":", 1)[1], 16))
        return sorted(ports)
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def port_taken(port):
    """Cheap pre-check: does something listen on the loopback port (IPv4 or
    IPv6, any address)?  A bind with SO_REUSEADDR fails with EADDRINUSE
    only then (a TIME_WAIT socket does not stop it); a family the machine
    lacks is skipped.  May say yes for a port some other socket holds:
    listening() is the word that counts."""
    for family, host in ((socket.AF_INET, HOST), (socket.AF_INET6, "::1")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return True
        finally:
            s.close()
    return False


def listening(pid, port=None, unix_path=None, ports=None):
    """Does process pid hold a listening socket on TCP `port` (every one of
    `ports`, if given) or on the UNIX `unix_path`?  Read from /proc, so no
    probe connection moves the server's connection counters, and a port
    another program took does not count.  None if /proc cannot tell."""
    if ports is None:
        ports = [] if unix_path else [port]
    if not unix_path and not all(port_taken(p) for p in ports):
        return False    # not yet (or no longer): no need to read /proc
    inodes = _listening_inodes(ports, unix_path)
    if inodes is None:
        return None
    fddir = "/proc/%d/fd" % pid
    held = set()
    try:
        for fd in os.listdir(fddir):
            try:
                link = os.readlink(os.path.join(fddir, fd))
            except OSError:
                continue
            if link in inodes:
                held.add(inodes[link])
    except OSError:
        return False     # the process is gone
    if unix_path:
        return bool(held)
    return held >= set(ports)


class ServerError(TestFailure):
    pass


_live_lock = threading.Lock()
_live = set()


def kill_all_servers():
    """Kill every server still running (used when the run is aborted)."""
    with _live_lock:
        procs = list(_live)
    for p in procs:
        try:
            p.kill()
            p.wait(5)
        except Exception:
            pass


atexit.register(kill_all_servers)


# tubed's last start-up line (src/main.c), logged after the replay.
_STARTED = re.compile(r"^tubed: info: tubed \S+ started, pid \d+$", re.M)


class Server:
    """One server process.

    By default it listens on a free 127.0.0.1 port (``-l 127.0.0.1 -p PORT``
    followed by ``args``).  ``unix_path`` makes it listen on a UNIX socket
    (``-l unix:PATH``); ``listener`` (a listening socket) is handed over by
    systemd-style socket activation (fd 3, LISTEN_FDS=1, LISTEN_PID).
    """

    def __init__(self, binary, args=(), env=None, unix_path=None, listener=None,
                 argv=None, port=None):
        self.binary = binary
        self.argv = argv            # optional: port -> full command line
        self.fixed_port = port
        self.args = list(args)
        self.env = env
        self.unix_path = unix_path
        self.listener = listener
        self.proc = None
        self.port = None
        self.stderr_path = None
        self._stderr_file = None
        self._signalled = set()   # signals we sent that may end the process
        self.clients = []
        self.stopped = False
        self.returncode = None
        self.name = "server"     # in failure messages ("node r", ...)

    @property
    def pid(self):
        return self.proc.pid

    def _command(self, port):
        if self.unix_path:
            cmd = [self.binary, "-l", "unix:" + self.unix_path] + self.args
        else:
            cmd = [self.binary, "-l", HOST, "-p", str(port)] + self.args
        return VALGRIND + cmd

    def start(self, attempts=8, replayed=True):
        """replayed=False: started once it listens, even if it is tubed
        still replaying its binlog (a test that kills it mid-replay)."""
        last = ""
        for _ in range(attempts):
            if self.listener is not None:
                port = self.listener.getsockname()[1]
            elif self.unix_path:
                port = None
            elif self.fixed_port:
                port = self.fixed_port
            else:
                port = _free_port()
            fd, path = tempfile.mkstemp(prefix="tubed-it-", suffix=".stderr")
            self._stderr_file = os.fdopen(fd, "w+b")
            self.stderr_path = path
            env = dict(os.environ)
            env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
            env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
            env.pop("LISTEN_FDS", None)
            env.pop("LISTEN_PID", None)
            if self.env:
                env.update(self.env)
            cmd = self.argv(port) if self.argv else self._command(port)
            kw = {}
            if self.listener is not None:
                # A small exec wrapper puts the socket on fd 3 and sets
                # LISTEN_PID to its own pid, which the server inherits.
                lfd = self.listener.fileno()
                env["LISTEN_FDS"] = "1"
                cmd = [sys.executable, "-c", _ACTIVATE, str(lfd)] + cmd
                kw = dict(pass_fds=(lfd,))
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=self._stderr_file,
                stderr=self._stderr_file, env=env, close_fds=True, **kw)
            self.port = port
            with _live_lock:
                _live.add(self.proc)
            if self._wait_accepting(10.0):
                if replayed:
                    self._wait_started(cmd, 10.0)
                return self
            # Did not come up: port collision or a startup failure.
            rc = self.proc.poll()
            if rc is None:
                self._kill_quietly()
            with _live_lock:
                _live.discard(self.proc)
            err = self.stderr_text()
            if len(err) > 600:
                err = err[:400] + " ... " + err[-150:]
            last = "server %r did not start listening (%s); its output: %s" % (
                cmd, _describe_rc(self.proc.returncode),
                " | ".join(l for l in err.strip().splitlines() if l.strip()))
            self._cleanup_stderr()
            if self.listener is not None or self.unix_path or self.fixed_port:
                break
        raise ServerError(last)

    def connect(self, timeout):
        if self.unix_path:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            try:
                s.connect(self.unix_path)
            except OSError:
                s.close()
                raise
            return s
        return socket.create_connection((HOST, self.port), timeout=timeout)

    def _wait_accepting(self, timeout):
        """Wait until the server listens.

        Readiness is read from /proc (our process holds a listening socket on
        the port or path), so no probe connection is made and the server's
        connection counters start at zero.  Without /proc, fall back to a
        probe connection.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.listener is not None:
                return True   # already listening; connections queue up
            owned = self._listening()
            if owned is None:   # cannot tell from /proc
                try:
                    s = self.connect(0.5)
                except OSError:
                    time.sleep(0.02)
                    continue
                s.close()
                return self.proc.poll() is None
            if owned:
                return True
            time.sleep(0.01)
        return False

    def _wait_started(self, cmd, timeout):
        """Wait for tubed's "started" line, which it logs once the binlog
        is replayed: it listens before it replays, so a test that looks at
        the binlog directory, or kills the server, right after start() would
        otherwise race the replay.  Reading stderr makes no connection, so
        the server's counters stay at zero.  Other programs (beanstalkd, a
        wrapper) and a server that exits or stays silent keep the old
        meaning of started: listening."""
        if not any(os.path.basename(str(a)) == "tubed" for a in cmd):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if _STARTED.search(self.stderr_text()):
                return
            time.sleep(0.01)

    def _listening(self):
        """True/False: does our process hold the listening socket?  None if
        /proc cannot tell.  (Also guards against another program having
        taken the free port.)"""
        if self.unix_path:
            return listening(self.proc.pid, unix_path=self.unix_path)
        return listening(self.proc.pid, self.port)

    def _kill_quietly(self):
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass

    def _cleanup_stderr(self):
        try:
            self._stderr_file.close()
        except Exception:
            pass
        try:
            os.unlink(self.stderr_path)
        except OSError:
            pass

    def stderr_text(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def signal(self, sig):
        """Send a signal to the server (e.g. SIGUSR1 for drain mode)."""
        if sig in (signal.SIGTERM, signal.SIGKILL):
            self._signalled.add(sig)
        os.kill(self.proc.pid, sig)

    def alive(self):
        return self.proc.poll() is None

    def _check_alive(self, before):
        check(self.alive(), "%s died before %s (%s): %s"
              % (self.name, before, _describe_rc(self.proc.poll()),
                 self.stderr_text()[-800:]))

    def kill9(self):
        """SIGKILL by pid, wait for it, stop (asserting no sanitizer report
        and no other problem); returns the server's output."""
        self._check_alive("the test killed it")
        self.signal(signal.SIGKILL)
        self.proc.wait(10)
        text = self.stderr_text()
        problems = self.stop()
        check(not problems, "%s: %s" % (self.name, "; ".join(problems)))
        return text

    def sigterm(self, timeout=10):
        """SIGTERM by pid; assert the server exits with status 0 within
        `timeout` seconds (a ceiling) and reports no problem; returns its
        output."""
        self._check_alive("SIGTERM")
        self.signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
        text = self.stderr_text()
        problems = [p for p in self.stop() if "exited on its own" not in p]
        check(rc is not None, "%s still running %ds after SIGTERM"
              % (self.name, timeout))
        eq(rc, 0, "%s: exit status after SIGTERM (stderr: %s)"
           % (self.name, text[-500:].strip()))
        check(not problems, "%s: %s" % (self.name, "; ".join(problems)))
        return text

    def client(self, timeout=DEFAULT_TIMEOUT):
        c = Client(None, None, timeout=timeout, sock=self.connect(timeout))
        self.clients.append(c)
        return c

    def stop(self):
        """Stop the server by pid and return a list of problems (empty if ok).

        A problem is: the process ended before we stopped it, it died of a
        signal we did not send, it exited with an error status, or its output
        contains a sanitizer report.
        """
        if self.stopped:
            return []
        self.stopped = True
        problems = []
        for c in self.clients:
            c.close()
        rc = self.proc.poll()
        if rc is not None:
            if not (rc < 0 and -rc in self._signalled):
                problems.append("server exited on its own during the test "
                                "(%s)" % _describe_rc(rc))
        else:
            self._signalled.add(signal.SIGTERM)
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                rc = self.proc.wait(STOP_WAIT)
            except subprocess.TimeoutExpired:
                self._signalled.add(signal.SIGKILL)
                try:
                    os.kill(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                rc = self.proc.wait(10)
            ok = rc in (0, 128 + signal.SIGTERM) or (
                rc < 0 and -rc in self._signalled)
            if not ok:
                if rc < 0:
                    problems.append("server crashed (%s)" % _describe_rc(rc))
                else:
                    problems.append("server exited with an error after SIGTERM "
                                    "(%s)" % _describe_rc(rc))
        self.returncode = rc
        with _live_lock:
            _live.discard(self.proc)
        try:
            self._stderr_file.flush()
        except Exception:
            pass
        text = self.stderr_text().encode("utf-8", "replace")
        for pat in SANITIZER_PATTERNS:
            m = pat.search(text)
            if m:
                start = max(0, text.rfind(b"\n", 0, m.start()) + 1)
                excerpt = text[start:start + 1500].decode("utf-8", "replace")
                problems.append("sanitizer report in server output:\n" + excerpt)
                break
        self._cleanup_stderr()
        return problems


def _describe_rc(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "signal %d" % -rc
        return "killed by %s" % name
    return "exit status %d" % rc


class start_server:
    """Context manager for tests that start their own server(s):

        with start_server(binary, ["-z", "10"]) as srv: ...

    The server is stopped on exit and problems are raised as TestFailure.
    """

    def __init__(self, binary, args=(), env=None, **kw):
        self.srv = Server(binary, args, env, **kw)

    def __enter__(self):
        return self.srv.start()

    def __exit__(self, et, ev, tb):
        problems = self.srv.stop()
        if problems and et is None:
            raise TestFailure("; ".join(problems))
        return False


# ------------------------------------------------------------------- client

class Client:
    """A blocking client with a deadline on every read."""

    def __init__(self, host, port, timeout=DEFAULT_TIMEOUT, sock=None):
        self.timeout = timeout
        if sock is None:
            sock = socket.create_connection((host, port), timeout=timeout)
        self.sock = sock
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.last_sent = b""

    # -- low level -------------------------------------------------------
    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        """Send raw bytes (remembered for failure messages)."""
        if isinstance(data, str):
            data = data.encode()
        self.last_sent = data
        self.sock.sendall(data)

    def send_slowly(self, data, chunk=1, pause=0.0):
        """Send in small writes (default one byte each)."""
        if isinstance(data, str):
            data = data.encode()
        self.last_sent = data
        for i in range(0, len(data), chunk):
            self.sock.sendall(data[i:i + chunk])
            if pause:
                time.sleep(pause)

    def shutdown_write(self):
        self.sock.shutdown(socket.SHUT_WR)

    def _ctx(self):
        s = self.last_sent
        if len(s) > 300:
            s = s[:150] + b"...(%d bytes)..." % len(s) + s[-100:]
        return "after sending %r" % (s,)

    def _fill(self, deadline, what):
        """Read more bytes into the buffer; raise on timeout or EOF."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TestFailure("timed out waiting for %s %s; received so far %r"
                              % (what, self._ctx(), self.buf[:300]))
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TestFailure("timed out waiting for %s %s; received so far %r"
                              % (what, self._ctx(), self.buf[:300]))
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            raise TestFailure("connection closed by server while waiting for "
                              "%s %s; received so far %r"
                              % (what, self._ctx(), self.buf[:300]))
        self.buf += data

    def read_line(self, timeout=None):
        """Read exactly one reply line; returns it without the CRLF."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                if b"\n" in line:
                    raise TestFailure("reply line contains a bare LF: %r %s"
                                      % (line, self._ctx()))
                return line
            if len(self.buf) > 1000:
                raise TestFailure("no CRLF in %d bytes of reply %s: %r"
                                  % (len(self.buf), self._ctx(), self.buf[:200]))
            self._fill(deadline, "a reply line")

    def read_exact(self, n, timeout=None):
        """n bytes; timeout bounds each wait for more of them, not the
        whole (a big body on a slow machine is never cut off)."""
        span = self.timeout if timeout is None else timeout
        while len(self.buf) < n:
            self._fill(time.monotonic() + span, "%d bytes of data" % n)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_reply(self, timeout=None):
        """Read one reply; returns (line, body) with body None for plain lines.

        Bodies follow ``OK n``, ``RESERVED id n`` and ``FOUND id n``; the body's
        trailing CRLF is checked and stripped.
        """
        line = self.read_line(timeout)
        parts = line.split(b" ")
        n = None
        if parts[0] == b"OK" and len(parts) == 2:
            n = parts[1]
        elif parts[0] in (b"RESERVED", b"FOUND") and len(parts) == 3:
            n = parts[2]
        if n is None:
            return line, None
        if not n.isdigit():
            raise TestFailure("bad length in reply %r %s" % (line, self._ctx()))
        data = self.read_exact(int(n) + 2, timeout)
        if data[-2:] != b"\r\n":
            raise TestFailure("body of %r not followed by CRLF: got %r %s"
                              % (line, data[-2:], self._ctx()))
        return line, data[:-2]

    def has_data(self, timeout=0.0):
        """True if reply bytes are available (buffered, not consumed)."""
        if self.buf:
            return True
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return False
        if not data:
            self.eof = True
            raise TestFailure("connection closed unexpectedly %s" % self._ctx())
        self.buf += data
        return True

    def expect_silence(self, seconds):
        """Assert the server sends nothing for `seconds`."""
        if self.buf:
            raise TestFailure("unexpected data %r %s" % (self.buf, self._ctx()))
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return
        if not data:
            self.eof = True
            raise TestFailure("connection closed unexpectedly %s" % self._ctx())
        self.buf += data
        raise TestFailure("expected no reply yet %s, got %r" % (self._ctx(), data))

    def expect_closed(self, timeout=None):
        """Assert the server closes the connection without sending anything."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if self.buf:
            raise TestFailure("expected connection close %s, got %r"
                              % (self._ctx(), self.buf))
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TestFailure("expected connection close %s, it stayed open"
                                  % self._ctx())
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
                return
            raise TestFailure("expected connection close %s, got %r"
                              % (self._ctx(), data))

    # -- commands ---------------------------------------------------------
    def cmd(self, line, timeout=None):
        """Send one command line (CRLF added) and return the reply line."""
        if isinstance(line, str):
            line = line.encode()
        self.send(line + b"\r\n")
        return self.read_line(timeout)

    def cmd_body(self, line, timeout=None):
        """Send one command line and return (reply line, body or None)."""
        if isinstance(line, str):
            line = line.encode()
        self.send(line + b"\r\n")
        return self.read_reply(timeout)

    def expect(self, line, expected, timeout=None):
        """Send `line` (CRLF added) and check the reply line is `expected`."""
        if isinstance(expected, str):
            expected = expected.encode()
        got = self.cmd(line, timeout)
        if got != expected:
            raise TestFailure("sent %r: expected %r, got %r"
                              % (self.last_sent, expected + b"\r\n", got + b"\r\n"))
        return got

    def expect_raw(self, data, expected_lines, timeout=None):
        """Send raw bytes, then check the next reply lines (list) exactly."""
        if isinstance(data, str):
            data = data.encode()
        self.send(data)
        self.expect_lines(expected_lines, timeout)

    def expect_lines(self, expected_lines, timeout=None):
        got = []
        for exp in expected_lines:
            if isinstance(exp, str):
                exp = exp.encode()
            line = self.read_line(timeout)
            got.append(line)
            if line != exp:
                raise TestFailure("sent %r: expected replies %r, got %r (then %r)"
                                  % (_short(self.last_sent),
                                     [_b(e) + b"\r\n" for e in expected_lines],
                                     [g + b"\r\n" for g in got], self.buf[:100]))

    def put(self, body=b"", pri=0, delay=0, ttr=60):
        """put a job, return its id (asserts INSERTED)."""
        if isinstance(body, str):
            body = body.encode()
        self.send(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body))
        line = self.read_line()
        m = re.fullmatch(rb"INSERTED (\d+)", line)
        if not m:
            raise TestFailure("put: expected INSERTED <id>, got %r %s"
                              % (line, self._ctx()))
        return int(m.group(1))

    def reserve(self, timeout=None, read_timeout=None):
        """reserve (or reserve-with-timeout); returns (id, body).

        Fails on any reply other than RESERVED.
        """
        if timeout is None:
            self.send(b"reserve\r\n")
        else:
            self.send(b"reserve-with-timeout %d\r\n" % timeout)
        line, body = self.read_reply(read_timeout)
        m = re.fullmatch(rb"RESERVED (\d+) (\d+)", line)
        if not m:
            raise TestFailure("%r: expected RESERVED, got %r"
                              % (self.last_sent, line))
        return int(m.group(1)), body

    def use(self, tube):
        self.expect("use " + tube, "USING " + tube)

    def watch(self, tube):
        line = self.cmd("watch " + tube)
        check(line.startswith(b"WATCHING "),
              "watch %s: expected WATCHING n, got %r" % (tube, line))
        return int(line.split()[1])

    def ignore(self, tube):
        return self.cmd("ignore " + tube)

    def _yaml(self, line, what):
        reply, body = self.cmd_body(line)
        if body is None or not reply.startswith(b"OK "):
            raise TestFailure("%s: expected OK <n> and data, got %r" % (what, reply))
        return body

    def stats(self):
        return parse_yaml_dict(self._yaml("stats", "stats"))

    def stats_tube(self, tube):
        return parse_yaml_dict(self._yaml("stats-tube " + tube, "stats-tube " + tube))

    def stats_job(self, jid):
        return parse_yaml_dict(self._yaml("stats-job %d" % jid, "stats-job %d" % jid))

    def list_tubes(self):
        return parse_yaml_list(self._yaml("list-tubes", "list-tubes"))

    def list_tubes_watched(self):
        return parse_yaml_list(self._yaml("list-tubes-watched", "list-tubes-watched"))

    def peek(self, what):
        """peek/peek-ready/...: returns (id, body) or None for NOT_FOUND."""
        line, body = self.cmd_body(what)
        if line == b"NOT_FOUND":
            return None
        m = re.fullmatch(rb"FOUND (\d+) (\d+)", line)
        if not m:
            raise TestFailure("%s: expected FOUND or NOT_FOUND, got %r" % (what, line))
        return int(m.group(1)), body


def _b(x):
    return x.encode() if isinstance(x, str) else x


def _short(s):
    if len(s) > 300:
        return s[:150] + b"...(%d bytes)..." % len(s) + s[-100:]
    return s


# -------------------------------------------------------------------- YAML

def parse_yaml_dict(data):
    """Parse the server's YAML dictionary into an ordered dict of str -> str.

    Checks the framing strictly: ``---\\n`` then ``key: value\\n`` lines.
    Values are returned verbatim (quotes included).
    """
    if not data.startswith(b"---\n"):
        raise TestFailure("YAML data does not start with '---\\n': %r" % data[:50])
    if not data.endswith(b"\n"):
        raise TestFailure("YAML data does not end with '\\n': %r" % data[-50:])
    out = {}
    for raw in data[4:-1].split(b"\n"):
        if b"\r" in raw:
            raise TestFailure("CR inside YAML data line %r" % raw)
        key, sep, value = raw.partition(b": ")
        if not sep or not key:
            raise TestFailure("bad YAML line %r" % raw)
        k = key.decode()
        if k in out:
            raise TestFailure("duplicate YAML key %r" % k)
        out[k] = value.decode("utf-8", "replace")
    return out


def parse_yaml_list(data):
    if not data.startswith(b"---\n"):
        raise TestFailure("YAML list does not start with '---\\n': %r" % data[:50])
    if not data.endswith(b"\n"):
        raise TestFailure("YAML list does not end with '\\n': %r" % data[-50:])
    items = []
    body = data[4:-1]
    if not body:
        return items
    for raw in body.split(b"\n"):
        if not raw.startswith(b"- "):
            raise TestFailure("bad YAML list line %r" % raw)
        items.append(raw[2:].decode())
    return items


# A ceiling for anything that polls (the machine is shared, ASan and
# valgrind are slow); never a speed assertion.
DEADLINE = 30.0


def wait_for(pred, what="condition", timeout=DEADLINE, interval=0.02):
    """Poll pred() until it returns a true value, and return that value;
    fail after `timeout` seconds.  `what` names the awaited condition in the
    failure message; a callable `what` is called then, so the message can
    show the last state seen.  The one polling loop of the suite."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TestFailure("timed out after %.1fs waiting for %s"
                              % (timeout, what() if callable(what) else what))
        time.sleep(interval)


def wait_until(pred, timeout=5.0, interval=0.05, what="condition"):
    """wait_for with the older argument order (timeout first)."""
    return wait_for(pred, what, timeout, interval)


def unq(value):
    """Strip the double quotes 1.13 puts around YAML string values."""
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        return value[1:-1]
    return value


SYNC = b"list-tube-used\r\n"


def check_cases(srv, cases, sync=True, timeout=3.0):
    """Run table-driven raw-protocol cases, each on its own connection.

    A case is ``(bytes_to_send, [expected reply lines])``.  With ``sync``, a
    ``list-tube-used`` is sent after the case and its ``USING <tube>`` reply
    is expected too (the tube is taken from the case's third element, default
    ``default``), which checks that the connection is still in step.
    All connections are served at once with one shared deadline, and every
    mismatching case is reported.
    """
    conns = []
    for case in cases:
        send, expected = case[0], [_b(e) for e in case[1]]
        tube = case[2] if len(case) > 2 else "default"
        if sync:
            send = send + SYNC
            expected = expected + [b"USING " + _b(tube)]
        c = srv.client()
        c.send(send)
        conns.append((case[0], expected, c))
    deadline = time.monotonic() + timeout
    errors = []
    for send, expected, c in conns:
        got = []
        try:
            for _ in expected:
                got.append(c.read_line(max(0.05, deadline - time.monotonic())))
        except TestFailure as e:
            msg = str(e)
            got.append("<%s>" % ("timeout" if "timed out" in msg else
                                 "closed" if "closed" in msg else msg[:80]))
        if got != expected:
            errors.append("sent %r: expected %s, got %s" % (
                _short(send), _fmt_lines(expected), _fmt_lines(got)))
        c.close()
    if errors:
        raise TestFailure("%d of %d cases failed:\n    " % (len(errors), len(cases))
                          + "\n    ".join(errors))


def _fmt_lines(lines):
    out = []
    for l in lines:
        out.append(repr(l + b"\r\n") if isinstance(l, bytes) else l)
    return "[" + ", ".join(out) + "]"
