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

McServer is a server.Tubed: free 127.0.0.1 ports (the memcache one is
picked per start attempt, so a collision just retries), stopped by pid.
"""

import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import harness  # noqa: E402
from harness import DEADLINE, TestFailure, check, eq, fail, wait_for  # noqa: E402,F401
from server import Tubed  # noqa: E402


def free_port():
    """A port nobody listens on right now (127.0.0.1)."""
    return harness._free_port()


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


class McServer(Tubed):
    """A tubed with --memcache-port, optionally --config FILE and -b DIR."""

    def __init__(self, binary, *args, conf=None, bdir=False, env=None,
                 memcache=True):
        super().__init__(binary, *args, conf=conf, bdir=bdir, env=env,
                         memcache=memcache, prefix="tubed-mc-")


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


def settle(sec):
    """Scenario set-up (let an expiry come due), never a speed assertion."""
    t_end = time.monotonic() + sec
    while time.monotonic() < t_end:
        time.sleep(0.05)
