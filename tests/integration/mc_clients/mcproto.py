"""Helpers for the memcache (kestrel) integration tests: a tubed with both
listeners, and a raw memcache-protocol client.

Not a test file, and not a client script (run_all.sh does not run it): the
test_memcache*.py files import it.

    with McServer(binary, conf="[tube q]\\nmax_items = 2\\n", bdir=True) as s:
        m = s.mc()                 # raw memcache client (harness.Client)
        b = s.bs()                 # beanstalk client on the same server
        m.expect("set q 0 0 1\\r\\na", "STORED")   # raw bytes in, one line out
        m.get("q")                 # b'a' (or None for END)
        s.kill9(); s.restart()     # with bdir: the same binlog directory

Servers listen on free 127.0.0.1 ports (the memcache one is picked per
start attempt, so a collision just retries), and are stopped by pid.
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
sys.path.insert(0, os.path.dirname(HERE))

import harness  # noqa: E402
from harness import TestFailure, check, eq, fail  # noqa: E402

# A ceiling for anything that polls; never a speed assertion.
DEADLINE = 30.0


def free_port():
    """A port nobody listens on right now (127.0.0.1)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((harness.HOST, 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_for(pred, what, timeout=DEADLINE, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            fail("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(interval)


def _listening(port):
    """True if /proc shows a socket listening on 127.0.0.1:port (no probe
    connection: the connection counters stay as they are)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


class Mc(harness.Client):
    """A memcache-protocol client: raw bytes, one reply line at a time."""

    def expect(self, data, expected, timeout=None):
        """Send raw data (str or bytes; "\\r\\n" added unless it ends in
        "\\n") and check the next reply line."""
        data = harness._b(data)
        if not data.endswith(b"\n"):
            data += b"\r\n"
        self.send(data)
        got = self.read_line(timeout)
        exp = harness._b(expected)
        if got != exp:
            raise TestFailure("sent %r: expected %r, got %r"
                              % (harness._short(data), exp, got))
        return got

    def sync(self):
        """A round trip (version): every earlier reply has been read."""
        line = self.cmd("version")
        check(line.startswith(b"VERSION "), "expected VERSION %s, got %r" % (self._ctx(), line))
        return line

    def set(self, key, body, flags=0, exptime=0, noreply=False):
        """set; returns the reply line (None with noreply)."""
        body = harness._b(body)
        self.send(b"set %s %d %d %d%s\r\n%s\r\n"
                  % (harness._b(key), flags, exptime, len(body),
                     b" noreply" if noreply else b"", body))
        return None if noreply else self.read_line()

    def store(self, key, body, **kw):
        eq(self.set(key, body, **kw), b"STORED", "set %s %r" % (key, body))

    def read_value(self, key=None, timeout=None):
        """One get reply: the body of VALUE ... END, or None for END."""
        line = self.read_line(timeout)
        if line == b"END":
            return None
        m = re.fullmatch(rb"VALUE (\S+) 0 (\d+)", line)
        if not m:
            raise TestFailure("expected VALUE <key> 0 <n> or END %s, got %r"
                              % (self._ctx(), line))
        if key is not None:
            eq(m.group(1), harness._b(key), "key echoed in VALUE")
        data = self.read_exact(int(m.group(2)) + 2, timeout)
        check(data[-2:] == b"\r\n", "VALUE data not followed by CRLF: %r" % data[-2:])
        eq(self.read_line(timeout), b"END", "line after the VALUE data")
        return data[:-2]

    def get(self, key, timeout=None):
        self.send(b"get %s\r\n" % harness._b(key))
        return self.read_value(key, timeout)

    def lines_until_end(self, cmd, timeout=None):
        """Send cmd; return the reply lines before END."""
        self.send(harness._b(cmd) + b"\r\n")
        out = []
        while True:
            line = self.read_line(timeout)
            if line == b"END":
                return out
            out.append(line)
            check(len(out) < 100000, "no END after %s" % cmd)

    def stats(self):
        """stats as an ordered dict of str -> str."""
        out = {}
        for line in self.lines_until_end("stats"):
            m = re.fullmatch(rb"STAT (\S+) (.*)", line)
            check(m is not None, "bad stats line %r" % line)
            k = m.group(1).decode()
            check(k not in out, "duplicate stats key %r" % k)
            out[k] = m.group(2).decode()
        return out

    def expect_error_closed(self, data, line):
        """Send data, expect the reply line, then the connection closed."""
        self.expect(data, line)
        self.expect_closed()


class McServer:
    """A tubed with --memcache-port, optionally --config FILE and -b DIR."""

    def __init__(self, binary, *args, conf=None, bdir=False, env=None,
                 memcache=True):
        self.binary = binary
        self.args = [str(a) for a in args]
        self.tmp = tempfile.mkdtemp(prefix="tubed-mc-")
        self.conf_path = None
        if conf is not None:
            self.conf_path = os.path.join(self.tmp, "tubed.conf")
            self.write_conf(conf)
        self.bdir = None
        if bdir:
            self.bdir = os.path.join(self.tmp, "binlog")
            os.mkdir(self.bdir)
        self.env = env
        self.memcache = memcache
        self.srv = None
        self.mport = None
        self.old = []

    def write_conf(self, text):
        tmp = self.conf_path + ".new"
        with open(tmp, "wb") as f:
            f.write(harness._b(text))
        os.rename(tmp, self.conf_path)

    def _argv(self, port):
        self.mport = free_port()
        a = [self.binary, "-l", harness.HOST, "-p", str(port)]
        if self.memcache:
            a += ["--memcache-port", str(self.mport)]
        if self.conf_path:
            a += ["--config", self.conf_path]
        if self.bdir:
            a += ["-b", self.bdir]
        return harness.VALGRIND + a + self.args

    def start(self):
        for _ in range(8):
            self.srv = harness.Server(self.binary, env=self.env, argv=self._argv)
            self.srv.start()
            if not self.memcache:
                return self.srv
            # The beanstalk listener is up; the memcache one is made right
            # after it. A memcache port taken meanwhile: start again.
            deadline = time.monotonic() + 10
            while self.srv.alive() and not _listening(self.mport) and \
                    time.monotonic() < deadline:
                time.sleep(0.01)
            if self.srv.alive() and _listening(self.mport):
                return self.srv
            self.srv.stop()
        fail("tubed with --memcache-port did not start: %s" % self.srv.stderr_text()[-500:])

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        return self

    def mc(self, timeout=harness.DEFAULT_TIMEOUT):
        sock = socket.create_connection((harness.HOST, self.mport), timeout=timeout)
        c = Mc(None, None, timeout=timeout, sock=sock)
        self.srv.clients.append(c)
        return c

    def bs(self, timeout=harness.DEFAULT_TIMEOUT):
        return self.srv.client(timeout)

    def signal(self, sig):
        self.srv.signal(sig)

    def kill9(self):
        s = self.srv
        check(s.alive(), "server died before the test killed it: %s"
              % s.stderr_text()[-800:])
        s.signal(signal.SIGKILL)
        s.proc.wait(10)
        problems = s.stop()
        check(not problems, "; ".join(problems))
        self.old.append(s)
        self.srv = None

    def restart(self):
        return self.start()

    def stop(self):
        if self.srv is None:
            return []
        s, self.srv = self.srv, None
        self.old.append(s)
        return s.stop()

    def __exit__(self, et, ev, tb):
        problems = []
        if self.srv is not None:
            died = not self.srv.alive()
            text = self.srv.stderr_text() if died else ""
            problems = self.stop()
            if problems and died:
                problems.append("its output: %r" % text[-1500:])
        shutil.rmtree(self.tmp, ignore_errors=True)
        if problems:
            if et is None:
                raise TestFailure("; ".join(problems))
            if issubclass(et, (TestFailure, OSError)):
                raise TestFailure("%s | %s" % (ev, "; ".join(problems))) from ev
        return False


def bs_stats_tube(b, tube):
    """stats-tube as a dict, or None for NOT_FOUND."""
    line, body = b.cmd_body("stats-tube " + tube)
    if line == b"NOT_FOUND":
        return None
    return harness.parse_yaml_dict(body)


def bs_job(b, jid):
    """stats-job as a dict, or None for NOT_FOUND."""
    line, body = b.cmd_body("stats-job %d" % jid)
    if line == b"NOT_FOUND":
        return None
    return harness.parse_yaml_dict(body)
