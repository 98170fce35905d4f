#!/usr/bin/env python3
"""Differential tester: tubed against the reference beanstalkd.

Starts the reference server (/usr/bin/beanstalkd, 1.12) and the server under
test (--bin) on free 127.0.0.1 ports, sends both the same command streams and
compares every reply byte for byte after normalisation:

  * job ids are mapped, per server, to the order in which they were first seen
    (INSERTED/BURIED/RESERVED/FOUND <id>, stats-job `id:`), so `#1` is the
    first id a server handed out;
  * values that depend on time or on the process are replaced by placeholders
    after their format has been checked: stats `uptime`, `rusage-*`, `pid`,
    `id`, `total-connections`, `version`, `hostname`, `os`, `platform`;
    stats-job `age`, `time-left`; stats-tube `pause-time-left`.  The `OK <n>`
    count is recomputed from the normalised data (the raw count is checked by
    the framing: the data must be followed by exactly `\\r\\n`);
  * the two 1.13 changes tubed makes on purpose (compat-notes.md): a 1.12
    side has its string values quoted (`hostname`, `os`, `platform`,
    stats-tube `name`, stats-job `tube`) and is not sent
    `reserve-with-timeout -N`, for which `BAD_FORMAT` is expected instead;
  * the parsing leniencies of 1.12 listed at the end of compat-notes.md
    (`kick 5x`, `quitxyz`, `reserve-with-timeout x`) may be answered
    `BAD_FORMAT`/`UNKNOWN_COMMAND` by the server under test.  The random
    generator never emits them; one scenario does, where they change nothing.
  * extra keys at the end of `stats` (after `platform`) are allowed.

Not sent, because 1.12 mishandles them (tubed follows compat-notes there):
a command line of 225, 449, ... bytes (its `\r` is the last byte of 1.12's
224-byte buffer: 1.12 answers late and eats the next command), a bare `\r`
inside a line (1.12 never answers again), `reserve-with-timeout` above
4294967295 (1.12 accepts it), and
anything timing-dependent (delays are 0 or hours, TTRs long, `reserve` only
where a job is ready or another connection supplies one).

Streams: scripted scenarios (every command and error of the protocol) and
seeded random streams over several connections.  Each stream gets a fresh pair
of servers, which is stopped by pid afterwards (also on failure).

Usage:
  python3 tests/integration/differential.py --bin build/tubed
  python3 tests/integration/differential.py --bin build/tubed --seed 42 --steps 3000
  python3 tests/integration/differential.py --bin /usr/bin/beanstalkd   # self-check
Options: --ref PATH, --seed N, --steps N, --streams N, --only SUBSTR,
         --no-scenarios, --no-random, --blocking, --blocking-streams N,
         --max-diffs N, --sort-lists, --list, -v.

Blocking streams (--blocking-streams, 2 by default, after the others; all
streams with --blocking) also send reserves that may wait (parked,
which `stats` tells: current-waiting grew), and after each later command
read on the reference which parked reserves it served (as many as
current-waiting fell), expecting the same connections to answer the same
on the server under test.

The last line is `differential: N passed, N failed` (N counts streams); the
exit status is non-zero if any stream showed a difference.
"""

import argparse
import difflib
import os
import random
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

REF_BIN = "/usr/bin/beanstalkd"
REPLY_TIMEOUT = 1.0      # seconds to wait for one reply (a healthy server needs ms)
START_TIMEOUT = 5.0      # seconds for a server to accept connections
U32MAX = 4294967295

# --------------------------------------------------------------------------
# Server processes: started and stopped by the suite's harness (a free
# port, readiness without a probe connection, stop by pid, crash and
# sanitizer reports), wrapped for the two sides of the comparison.

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def _on_signal(signum, frame):
    harness.kill_all_servers()
    sys.exit(128 + signum)


def detect_dialect(binary):
    """'1.12' for a beanstalkd older than 1.13, else '1.13'."""
    try:
        out = subprocess.run([binary, "-v"], capture_output=True, timeout=5)
        text = (out.stdout + out.stderr).decode("latin-1").strip()
    except (OSError, subprocess.TimeoutExpired):
        return "1.13"
    m = re.match(r"beanstalkd (\d+)\.(\d+)", text)
    if m and (int(m.group(1)), int(m.group(2))) < (1, 13):
        return "1.12"
    return "1.13"


class Server:
    def __init__(self, binary, workdir, label, args=()):
        self.binary = binary
        self.label = label
        self.args = tuple(args)
        self.h = None
        self.last_err = ""

    @property
    def proc(self):
        return self.h.proc if self.h else None

    @property
    def port(self):
        return self.h.port

    def start(self):
        try:
            self.h = harness.Server(self.binary, args=self.args).start()
        except harness.ServerError as e:
            raise RuntimeError("%s (%s) did not start: %s" % (self.label, self.binary, e))

    def alive(self):
        return self.h is not None and self.h.alive()

    def crashed(self):
        """Died of a fault signal (a crash, not a stop)."""
        return (self.h is not None and not self.h.alive() and self.proc.returncode is not None
                and -self.proc.returncode in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS,
                                              signal.SIGFPE, signal.SIGILL))

    def signal(self, signum):
        if self.alive():
            self.h.signal(signum)

    def stop(self):
        """0 when the server stopped cleanly (None if never started); else
        1, with what went wrong (a crash, an error exit, a sanitizer
        report) in stderr_tail()."""
        if self.h is None:
            return None
        self.last_err = self.h.stderr_text()
        problems = self.h.stop()
        if problems:
            self.last_err = "\n".join(problems) + "\n" + self.last_err
            return 1
        return 0

    def stderr_tail(self, n=1500):
        text = self.h.stderr_text() if self.h and not self.h.stopped else self.last_err
        return text[-n:]


# --------------------------------------------------------------------------
# Connections and reply framing

DATA_REPLY = re.compile(rb"(?:OK (\d+)|RESERVED \d+ (\d+)|FOUND \d+ (\d+))")


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False

    def send(self, data):
        try:
            self.sock.settimeout(5)
            self.sock.sendall(data)
            return None
        except OSError as e:
            return "<SEND-ERROR %s>" % e.__class__.__name__

    def _fill(self, deadline):
        if self.eof:
            raise EOFError
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        try:
            d = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError
        except OSError:
            d = b""
        if not d:
            self.eof = True
            raise EOFError
        self.buf += d

    def read_reply(self, timeout):
        """One reply: a line, plus <n>+2 bytes for OK/RESERVED/FOUND.
        On EOF or timeout returns what was read followed by <EOF>/<TIMEOUT>."""
        deadline = time.monotonic() + timeout
        try:
            while b"\r\n" not in self.buf:
                if len(self.buf) > (1 << 20):
                    out, self.buf = self.buf, b""
                    return out + b"<NO-CRLF>"
                self._fill(deadline)
            i = self.buf.index(b"\r\n")
            line = self.buf[:i]
            m = DATA_REPLY.fullmatch(line)
            need = i + 2
            if m:
                n = int(next(g for g in m.groups() if g is not None))
                need += n + 2
                while len(self.buf) < need:
                    self._fill(deadline)
            out, self.buf = self.buf[:need], self.buf[need:]
            return out
        except EOFError:
            out, self.buf = self.buf, b""
            return out + b"<EOF>"
        except TimeoutError:
            out, self.buf = self.buf, b""
            return out + b"<TIMEOUT>"

    def half_close_and_drain(self, timeout):
        """shutdown(SHUT_WR), then read until the server closes."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._fill(deadline)
        except EOFError:
            out, self.buf = self.buf, b""
            return out + b"<EOF>"
        except TimeoutError:
            out, self.buf = self.buf, b""
            return out + b"<TIMEOUT>"

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# One side (server + its connections + its id map) and normalisation

JOBREF = re.compile(rb"\{j(-?\d+)\}")
SORT_LISTS = False     # --sort-lists: compare list-tubes* as sets
NONEXISTENT_ID = b"4000000000"

STATS_FIRST_KEY = "current-jobs-urgent"
STATS_LAST_KEY = "platform"
QUOTED_112 = {                 # dict kind -> keys that 1.13 quotes
    "stats": ("version", "hostname", "os", "platform"),
    "stats-tube": ("name",),
    "stats-job": ("tube",),
}


class Side:
    def __init__(self, server, dialect):
        self.server = server
        self.dialect = dialect
        self.conns = {}
        self.ids = []          # raw ids in order of first sight
        self.index = {}        # raw id -> position (1-based)
        self.notes = []        # things worth telling (extra stats keys)

    def conn(self, name):
        c = self.conns.get(name)
        if c is None or c.eof:
            if c is not None:
                c.close()
            c = Conn(self.server.port)
            self.conns[name] = c
        return c

    def drop(self, name):
        c = self.conns.pop(name, None)
        if c is not None:
            c.close()

    def close_all(self):
        for name in list(self.conns):
            self.drop(name)

    def resolve(self, data):
        def sub(m):
            k = int(m.group(1))
            try:
                return self.ids[k]
            except IndexError:
                return NONEXISTENT_ID
        return JOBREF.sub(sub, data)

    def job(self, raw):
        if raw not in self.index:
            self.ids.append(raw)
            self.index[raw] = len(self.ids)
        return b"#%d" % self.index[raw]

    # -- normalisation ----------------------------------------------------

    def normalize(self, reply):
        i = reply.find(b"\r\n")
        if i < 0:
            return reply
        line, rest = reply[:i], reply[i:]
        m = re.fullmatch(rb"(INSERTED|BURIED) (\d+)", line)
        if m:
            return m.group(1) + b" " + self.job(m.group(2)) + rest
        m = re.fullmatch(rb"(RESERVED|FOUND) (\d+) (\d+)", line)
        if m:
            return b"%s %s %s%s" % (m.group(1), self.job(m.group(2)), m.group(3), rest)
        m = re.fullmatch(rb"OK (\d+)", line)
        if m:
            n = int(m.group(1))
            body = rest[2:]
            if len(body) != n + 2 or not body.endswith(b"\r\n"):
                return reply           # framing broken: compare raw
            new = self._norm_yaml(body[:-2])
            return b"OK %d\r\n%s\r\n" % (len(new), new)
        return reply

    def _norm_yaml(self, data):
        if not data.startswith(b"---\n") or not data.endswith(b"\n"):
            return data
        lines = data[4:-1].split(b"\n")
        if not lines or lines[0].startswith(b"- ") or lines == [b""]:
            if SORT_LISTS and all(ln.startswith(b"- ") for ln in lines):
                return b"---\n" + b"\n".join(sorted(lines)) + b"\n"
            return data                # a list: nothing to normalise
        pairs = []
        for ln in lines:
            k, sep, v = ln.partition(b": ")
            if not sep:
                return data
            pairs.append((k.decode("latin-1"), v))
        kind = {"current-jobs-urgent": "stats", "name": "stats-tube",
                "id": "stats-job"}.get(pairs[0][0])
        if kind is None:
            return data
        out = []
        for k, v in pairs:
            if self.dialect == "1.12" and k in QUOTED_112[kind] \
                    and not (v.startswith(b'"') and v.endswith(b'"') and len(v) >= 2):
                v = b'"' + v + b'"'
            out.append(k.encode() + b": " + self._norm_value(kind, k, v))
            if kind == "stats" and k == STATS_LAST_KEY:
                extra = [k2 for k2, _ in pairs[len(out):]]
                if extra:
                    note = "extra stats keys after platform: %s" % ", ".join(extra)
                    if note not in self.notes:
                        self.notes.append(note)
                break
        return b"---\n" + b"\n".join(out) + b"\n"

    def _norm_value(self, kind, k, v):
        digits = re.fullmatch(rb"\d+", v) is not None
        if kind == "stats":
            if k in ("uptime", "pid", "total-connections") and digits:
                return b"<N>"
            if k in ("rusage-utime", "rusage-stime") and re.fullmatch(rb"\d+\.\d{6}", v):
                return b"<SECONDS>"
            if k == "id" and re.fullmatch(rb"[0-9a-f]{16}", v):
                return b"<RANDOM-ID>"
            if k in ("version", "hostname", "os", "platform"):
                if len(v) >= 2 and v.startswith(b'"') and v.endswith(b'"'):
                    return b'"<STRING>"'
                return b"<UNQUOTED>"
        elif kind == "stats-job":
            if k == "id" and digits:
                return self.job(v)
            if k in ("age", "time-left") and digits:
                return b"<N>"
        elif kind == "stats-tube":
            if k == "pause-time-left" and digits:
                return b"<N>"
        return v


# --------------------------------------------------------------------------
# Steps

class Step:
    """kind: cmd (send, read n replies), send (no reply expected now),
    read (n replies), close (half-close, read to EOF), sleep, signal,
    await (until n wait on a tube, see await_waiting), park and collect
    (blocking reserves of random streams, see Runner.park/collect)."""

    def __init__(self, kind, conn=None, data=b"", n=1, timeout=REPLY_TIMEOUT,
                 arg=None):
        self.kind, self.conn, self.data, self.n = kind, conn, data, n
        self.timeout, self.arg = timeout, arg

    def describe(self):
        if self.kind in ("cmd", "send"):
            d = self.data if len(self.data) <= 120 else \
                self.data[:100] + b"...(%d bytes)" % len(self.data)
            return "%s %s %r" % (self.kind, self.conn, d)
        if self.kind == "read":
            return "read %s (%d replies)" % (self.conn, self.n)
        if self.kind == "close":
            return "half-close %s" % self.conn
        if self.kind == "park":
            return "park %s %r" % (self.conn, self.data)
        return "%s %r" % (self.kind, self.arg)


def cmd(conn, data, n=1, timeout=REPLY_TIMEOUT, cuts=None):
    """Send data (in pieces split at the offsets in cuts, if given) and
    read n replies."""
    return Step("cmd", conn, data, n, timeout, arg=cuts)


def send(conn, data):
    return Step("send", conn, data, 0)


def read(conn, n=1, timeout=REPLY_TIMEOUT):
    return Step("read", conn, n=n, timeout=timeout)


def close(conn):
    return Step("close", conn)


def sleep(sec):
    return Step("sleep", arg=sec)


def sig(signum):
    return Step("signal", arg=signum)


def await_waiting(tube, n):
    """Block until n connections wait in a reserve on tube, on each server
    (polled with stats-tube on a connection of its own, `_sync`): a reserve
    sent on another connection is then surely parked, with no sleep that
    could be too short.  The side that needed fewer polls gets more, so
    both count as many stats-tube commands."""
    return Step("await", arg=(tube, n))


def classify(data):
    """Documented differences that a single command line can trigger."""
    m = re.fullmatch(rb"reserve-with-timeout (.*)\r\n", data, re.S)
    if m:
        arg = m.group(1)
        if re.fullmatch(rb"-\d+", arg):
            return "rwt-negative"          # 1.13: BAD_FORMAT; 1.12 waits
        if not re.fullmatch(rb" *\d+", arg):
            return "lenient"               # `reserve-with-timeout x`
        return None
    m = re.fullmatch(rb"kick (.*)\r\n", data, re.S)
    if m and re.fullmatch(rb" *[-+]?\d+.*", m.group(1), re.S) \
            and not re.fullmatch(rb" *\d+", m.group(1)):
        return "lenient"                   # `kick 5x`, `kick -1`, `kick 5 6`
    if data.startswith(b"quit") and data != b"quit\r\n" and data.endswith(b"\r\n") \
            and data.count(b"\r\n") == 1:
        return "lenient"                   # `quitxyz`
    return None


LENIENT_ALTERNATIVES = (b"BAD_FORMAT\r\n", b"UNKNOWN_COMMAND\r\n")


class Difference(Exception):
    pass


class Runner:
    """Runs steps on both sides and records differences."""

    def __init__(self, name, ref, test, max_diffs, verbose):
        self.name, self.ref, self.test = name, ref, test
        self.max_diffs, self.verbose = max_diffs, verbose
        self.diffs = 0
        self.accepted = 0
        self.pos = 0
        self.last_ref = []      # normalised reference replies of the last step
        self.parks = self.parked = self.served = 0   # --blocking figures

    def run(self, step):
        self.pos += 1
        k = step.kind
        if k == "sleep":
            time.sleep(step.arg)
            self.last_ref = []
            return
        if k == "signal":
            self.ref.server.signal(step.arg)
            self.test.server.signal(step.arg)
            self.last_ref = []
            return
        if k == "park":
            self.park(step)
            return
        if k == "collect":
            self.collect(step)
            return
        if k == "await":
            polls = {side: self.await_waiting(side, step) for side in (self.ref, self.test)}
            self.equalize(polls, b"stats-tube %s\r\n" % step.arg[0])
            self.last_ref = []
            return
        policy = classify(step.data) if k == "cmd" else None
        sent = {}
        synth = {}
        for side in (self.ref, self.test):
            if k in ("cmd", "send"):
                data = side.resolve(step.data)
                sent[side] = data
                if policy == "rwt-negative" and side.dialect == "1.12":
                    synth[side] = [b"BAD_FORMAT\r\n"] * step.n
                    continue
                conn = side.conn(step.conn)
                err = None
                cuts = [0] + [c for c in (step.arg or []) if 0 < c < len(data)] + [len(data)]
                for a, b in zip(cuts, cuts[1:]):
                    err = err or conn.send(data[a:b])
                if err:
                    synth[side] = [err.encode()] * max(step.n, 1)
        replies = {}
        for side in (self.ref, self.test):
            if side in synth:
                raw = synth[side]
            elif k == "close":
                raw = [side.conn(step.conn).half_close_and_drain(step.timeout + 1)]
                side.drop(step.conn)
            elif k in ("cmd", "read"):
                c = side.conn(step.conn)
                raw = [c.read_reply(step.timeout) for _ in range(step.n)]
                if c.eof:
                    side.drop(step.conn)
            else:
                raw = []
            replies[side] = (raw, [side.normalize(r) for r in raw])
        rraw, rnorm = replies[self.ref]
        traw, tnorm = replies[self.test]
        self.last_ref = rnorm
        if any(r.endswith(b"<TIMEOUT>") for r in rnorm):
            # The stream expected a reply the reference does not give: the
            # stream itself is wrong (or the reference is stuck).
            self.report(step, sent, rraw, rnorm, traw, tnorm,
                        why="the reference server did not reply")
            raise Difference("stream out of step with the reference")
        if self.verbose:
            print("  [%s %d] %s -> %r" % (self.name, self.pos, step.describe(),
                                          b"".join(rnorm)[:200]))
        if rnorm == tnorm:
            return
        if policy == "lenient" and len(tnorm) == 1 and tnorm[0] in LENIENT_ALTERNATIVES:
            self.accepted += 1
            if self.verbose:
                print("  [%s %d] accepted documented leniency difference: %r vs %r"
                      % (self.name, self.pos, rnorm, tnorm))
            if rnorm[0].endswith(b"<EOF>"):
                # 1.12 closed the connection (`quitxyz`): close ours too.
                self.test.conn(step.conn).half_close_and_drain(2)
                self.test.drop(step.conn)
            return
        self.report(step, sent, rraw, rnorm, traw, tnorm)

    AWAIT_CEILING = 10.0     # seconds; a healthy server needs ms

    # -- blocking reserves in random streams (RandomStream --blocking) ------

    @staticmethod
    def _waiting(side):
        """current-waiting of the server, by one `stats` on `_sync`."""
        c = side.conn("_sync")
        c.send(b"stats\r\n")
        m = re.search(rb"\ncurrent-waiting: (\d+)\n", c.read_reply(REPLY_TIMEOUT))
        return int(m.group(1)) if m else -1

    @staticmethod
    def _has_reply(conn, timeout=0.0):
        if conn.buf:
            return True
        try:
            return bool(select.select([conn.sock], [], [], timeout)[0])
        except (OSError, ValueError):
            return True         # a closed socket: reading says so

    def _settle(self, side, step):
        """Send a reserve and find out whether it was answered or parked:
        ("reply", reply, polls) or ("parked", None, polls).  Parked means
        `stats` counted one more waiting connection, so a later reply can
        only come from something the stream does."""
        before = self._waiting(side)
        c = side.conn(step.conn)
        c.send(side.resolve(step.data))
        polls = 1
        deadline = time.monotonic() + self.AWAIT_CEILING
        while True:
            if self._has_reply(c):
                return "reply", c.read_reply(REPLY_TIMEOUT), polls
            polls += 1
            if self._waiting(side) == before + 1:
                return "parked", None, polls
            if time.monotonic() > deadline:
                return "stuck", None, polls
            time.sleep(0.002)

    def park(self, step):
        out = {side: self._settle(side, step) for side in (self.ref, self.test)}
        self.equalize({side: o[2] for side, o in out.items()}, b"stats\r\n")
        (rk, rr, _), (tk, tr, _) = out[self.ref], out[self.test]
        step.outcome = rk
        self.parks += 1
        self.parked += rk == "parked"
        if rk == "stuck":
            self.report(step, {}, [], [b"<NEITHER-REPLY-NOR-WAIT>"], [], [b""],
                        why="the reference neither answered nor parked the reserve")
            raise Difference("stream out of step with the reference")
        rnorm = [self.ref.normalize(rr)] if rr is not None else []
        tnorm = [self.test.normalize(tr)] if tr is not None else []
        self.last_ref = rnorm
        if self.verbose:
            print("  [%s %d] %s -> %s %r" % (self.name, self.pos, step.describe(), rk,
                                           b"".join(rnorm)[:100]))
        if rk != tk:
            self.report(step, {}, [], [b"<%s> " % rk.encode()] + rnorm, [],
                        [b"<%s> " % tk.encode()] + tnorm)
            raise Difference("one server parked the reserve, the other did not")
        if rnorm != tnorm:
            self.report(step, {}, [rr], rnorm, [tr], tnorm)

    def collect(self, step):
        """After a command, the parked reserves (step.arg) that it served:
        on the reference, `stats` says how many, and their replies are
        awaited; the same connections must have answered the same on the
        server under test, and no other."""
        parked = step.arg
        nref, ntest = self._waiting(self.ref), self._waiting(self.test)
        served = len(parked) - nref
        deadline = time.monotonic() + self.AWAIT_CEILING
        ready = []
        while True:
            ready = [c for c in parked if self._has_reply(self.ref.conn(c))]
            if len(ready) >= served or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        step.outcome = {}
        self.last_ref = []
        if self.verbose:
            print("  [%s %d] collect %s: waiting %d, served %s" % (
                self.name, self.pos, parked, nref, sorted(ready)))
        for c in sorted(ready):
            rraw = self.ref.conn(c).read_reply(REPLY_TIMEOUT)
            traw = self.test.conn(c).read_reply(REPLY_TIMEOUT)
            rn, tn = self.ref.normalize(rraw), self.test.normalize(traw)
            step.outcome[c] = rn
            self.served += 1
            if rn != tn:
                self.report(Step("read", c), {}, [rraw], [rn], [traw], [tn])
        extra = [c for c in parked if c not in ready and self._has_reply(self.test.conn(c))]
        if nref != ntest or extra or len(ready) != served:
            self.report(step, {}, [], [b"waiting %d, served %r" % (nref, sorted(ready))], [],
                        [b"waiting %d, also answered %r" % (ntest, extra)],
                        why="parked reserves served differently")
            raise Difference("parked reserves out of step")

    def equalize(self, polls, line):
        """Send line on `_sync` to the side that polled less, until both
        sent it as often (polls: side -> count)."""
        most = max(polls.values())
        for side, n in polls.items():
            c = side.conn("_sync")
            for _ in range(most - n):
                c.send(line)
                c.read_reply(REPLY_TIMEOUT)

    def await_waiting(self, side, step):
        """Polls until the condition holds; returns how many it sent."""
        tube, n = step.arg
        want = b"\ncurrent-waiting: %d\n" % n
        c = side.conn("_sync")
        deadline = time.monotonic() + self.AWAIT_CEILING
        polls = 0
        while True:
            c.send(b"stats-tube %s\r\n" % tube)
            polls += 1
            reply = c.read_reply(REPLY_TIMEOUT)
            if want in reply:
                return polls
            if time.monotonic() > deadline or not reply.startswith(b"OK "):
                label = "reference" if side is self.ref else "tested"
                print("DIFF %s position %d: %s" % (self.name, self.pos, step.describe()))
                print("    %s never had %d waiting on %r: %r" % (label, n, tube, _clip(reply)))
                self.diffs += 1
                raise Difference("await failed")
            time.sleep(0.005)

    def report(self, step, sent, rraw, rnorm, traw, tnorm, why=None):
        if b"".join(rnorm).endswith(b"<EOF>") and self.ref.server.crashed():
            # beanstalkd 1.12 itself crashed (it does, rarely, on random
            # streams: "epollq_apply: sockwant: Bad file descriptor"):
            # nothing is left to compare with; run_stream() says so.
            raise Difference("the reference crashed")
        self.diffs += 1
        rs, ts = b"".join(rnorm), b"".join(tnorm)
        print("DIFF %s position %d: %s" % (self.name, self.pos, step.describe()))
        if why:
            print("    (%s)" % why)
        if sent and sent.get(self.ref) != sent.get(self.test):
            print("    sent to reference: %r" % _clip(sent.get(self.ref)))
            print("    sent to tested:    %r" % _clip(sent.get(self.test)))
        print("    reference: %r" % _clip(rs))
        print("    tested:    %r" % _clip(ts))
        rr, tr = b"".join(rraw), b"".join(traw)
        if rr != rs or tr != ts:
            print("    reference raw: %r" % _clip(rr))
            print("    tested raw:    %r" % _clip(tr))
        if rs.startswith(b"OK ") and ts.startswith(b"OK "):
            for ln in difflib.unified_diff(
                    rs.decode("latin-1").split("\n"), ts.decode("latin-1").split("\n"),
                    "reference", "tested", n=0, lineterm=""):
                if not ln.startswith(("---", "+++", "@@")):
                    print("      %s" % ln)
        if self.diffs >= self.max_diffs:
            raise Difference("stopped after %d differences" % self.diffs)
        if any(t.endswith(b"<TIMEOUT>") for t in tnorm):
            raise Difference("the tested server did not reply: stream stopped")
        if not self.test.server.alive():
            raise Difference("the tested server is gone: stream stopped")


def _clip(b, n=700):
    if b is None:
        return b
    return b if len(b) <= n else b[:n] + b"...(%d bytes)" % len(b)


_notes_shown = set()


def run_stream(name, steps, args, make_steps=None, server_args=()):
    """Fresh servers (both started with server_args), run steps (a list, or
    a generator object with next/observe), stop servers.  Returns True when
    no difference was found."""
    workdir = tempfile.mkdtemp(prefix="tubed-diff-")
    ref = Side(Server(args.ref, workdir, "reference", server_args), args.ref_dialect)
    test = Side(Server(args.bin, workdir, "tested", server_args), args.test_dialect)
    runner = Runner(name, ref, test, args.max_diffs, args.verbose)
    ok = True
    void = False
    t0 = time.monotonic()
    try:
        ref.server.start()
        test.server.start()
        if make_steps is not None:
            gen = make_steps(ref)
            for _ in range(args.steps):
                step = gen.next_step()
                runner.run(step)
                gen.observe(step, runner.last_ref)
            steps = gen.finish()
        for step in steps:
            runner.run(step)
        # Final check on every connection still open: no reply left over.
        for cname in sorted(set(ref.conns) | set(test.conns)):
            runner.run(cmd(cname, b"list-tube-used\r\n"))
    except Difference as e:
        print("    (%s: %s)" % (name, e))
    except Exception as e:           # a server that refuses connections, etc.
        if not ref.server.crashed():
            print("ERROR %s at position %d: %s: %s" % (name, runner.pos,
                                                     e.__class__.__name__, e))
            ok = False
    finally:
        ref.close_all()
        test.close_all()
        if ref.server.crashed():
            # Not a difference: the reference is gone. What was compared
            # before counts (runner.diffs); the tested server is still
            # checked below.
            void = True
            print("VOID   %s: the reference crashed (signal %d) at position %d, a bug of "
                  "its own; the stream is compared up to there\n%s" % (
                      name, -ref.server.proc.returncode, runner.pos,
                      ref.server.stderr_tail()))
        for side, label in ((ref, "reference"), (test, "tested")):
            if side is ref and void:
                continue
            if side.server.proc is not None and not side.server.alive():
                print("ERROR %s: %s server died (status %s) at position %d\n%s" % (
                    name, label, side.server.proc.returncode, runner.pos,
                    side.server.stderr_tail()))
                ok = False
        ref.server.stop()
        rc = test.server.stop()
        if rc not in (None, 0, -signal.SIGTERM):
            # e.g. a sanitizer build reporting leaks or errors at exit
            print("ERROR %s: tested server exited with status %s on SIGTERM\n%s" % (
                name, rc, test.server.stderr_tail()))
            ok = False
        for n in test.notes:
            if n not in _notes_shown:      # say it once per run
                _notes_shown.add(n)
                print("note: tested server: %s (first seen in %s)" % (n, name))
        for f in os.listdir(workdir):
            os.unlink(os.path.join(workdir, f))
        os.rmdir(workdir)
    ok = ok and runner.diffs == 0
    status = ("void" if void else "ok") if ok else "FAILED"
    extra = " (%d documented differences accepted)" % runner.accepted if runner.accepted else ""
    if runner.parks:
        extra += " (%d blocking reserves, %d parked, %d served later)" % (
            runner.parks, runner.parked, runner.served)
    print("%-6s %s: %d steps, %.2f s%s" % (status, name, runner.pos,
                                          time.monotonic() - t0, extra))
    return ok


# --------------------------------------------------------------------------
# Scripted scenarios

def put(body, pri=0, delay=0, ttr=120):
    return b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body)


SCENARIOS = []


def scenario(fn):
    SCENARIOS.append((fn.__name__.replace("_", "-"), fn))
    return fn


def server_flags(*flags):
    """Decorator (under @scenario): start both servers with these flags."""
    def mark(fn):
        fn.server_args = flags
        return fn
    return mark


@scenario
def put_basic():
    return [
        cmd("c", put(b"hello")),
        cmd("c", b"peek {j0}\r\n"),
        cmd("c", put(b"")),
        cmd("c", b"peek {j1}\r\n"),
        cmd("c", put(b"line1\r\nline2\r\n\r\n")),
        cmd("c", b"peek {j2}\r\n"),
        cmd("c", put(bytes(range(256)))),
        cmd("c", b"peek {j3}\r\n"),
        cmd("c", put(b"x", pri=U32MAX, delay=0, ttr=U32MAX)),
        cmd("c", b"stats-job {j4}\r\n"),
        cmd("c", put(b"y", pri=0, delay=U32MAX, ttr=0)),
        cmd("c", b"stats-job {j5}\r\n"),          # ttr 0 -> 1
        cmd("c", b"put 1 0 60 5\r\nhello\r\n"),
        cmd("c", b"put  1  0  60  5\r\nhello\r\n"),   # several spaces before numbers
        cmd("c", b"put 4294967296 0 60 1\r\n"),
        cmd("c", b"put 1 4294967296 60 1\r\n"),
        cmd("c", b"put 1 0 4294967296 1\r\n"),
        cmd("c", b"put 1 0 60 -1\r\n"),
        cmd("c", b"put -1 0 60 1\r\n"),
        cmd("c", b"put +1 0 60 1\r\n"),
        cmd("c", b"put 1 0 60\r\n"),
        cmd("c", b"put 1 0 60 1 1\r\n"),
        cmd("c", b"put 1 0 60 1 \r\n"),
        cmd("c", b"put 1x 0 60 1\r\n"),
        cmd("c", b"put a b c d\r\n"),
        cmd("c", b"put\r\n"),
        cmd("c", b"put \r\n"),
        cmd("c", b"put 1 0 60 18446744073709551616\r\n"),
        cmd("c", b"put 0 0 60 3\r\nabcXY"),              # EXPECTED_CRLF
        cmd("c", b"put 0 0 60 3\r\nabc\n\n"),            # EXPECTED_CRLF
        cmd("c", b"put 0 0 60 3\r\nabcde\r\n", n=2),     # EXPECTED_CRLF + empty line
        cmd("c", put(b"after")),                          # skipped ids?
        cmd("c", b"peek 7\r\n"),
        cmd("c", b"peek 8\r\n"),
        cmd("c", b"peek 9\r\n"),
        cmd("c", b"peek 10\r\n"),
        cmd("c", b"peek 11\r\n"),
        cmd("c", b"peek 12\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def put_sizes():
    return [
        cmd("c", put(b"a" * 65535)),
        cmd("c", b"peek {j0}\r\n"),
        cmd("c", put(b"b" * 65536)),                     # JOB_TOO_BIG
        cmd("c", put(b"c" * 100000)),                    # JOB_TOO_BIG
        cmd("c", put(b"d" * 65534)),
        cmd("c", b"put 0 0 60 65536\r\n" + b"e" * 65536 + b"XY"),
        cmd("c", put(b"ok")),
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def use_and_tubes():
    name200 = b"n" * 200
    return [
        cmd("c", b"list-tube-used\r\n"),
        cmd("c", b"use foo\r\n"),
        cmd("c", b"list-tube-used\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"stats-tube foo\r\n"),
        cmd("c", put(b"in foo")),
        cmd("c", b"use " + name200 + b"\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"stats-tube " + name200 + b"\r\n"),
        cmd("c", b"use " + name200 + b"n\r\n"),            # 201 bytes
        cmd("c", b"use AZaz09-+/;.$_()\r\n"),
        cmd("c", b"use -leading\r\n"),
        cmd("c", b"use a*b\r\n"),
        cmd("c", b"use a:b\r\n"),
        cmd("c", b"use a b\r\n"),
        cmd("c", b"use foo \r\n"),
        cmd("c", b"use  foo\r\n"),
        cmd("c", b"use \xc3\xa9\r\n"),
        cmd("c", b"use \r\n"),
        cmd("c", b"use\r\n"),
        cmd("c", b"use a\x00b\r\n"),
        cmd("c", b"use ,\r\n"),
        cmd("c", b"use default\r\n"),
        cmd("c", b"list-tubes\r\n"),       # the 200-byte tube is gone
        cmd("c", b"stats-tube " + name200 + b"\r\n"),
        cmd("c", b"stats-tube foo\r\n"),   # foo stays: it holds a job
        cmd("c", b"stats-tube nosuch\r\n"),
        cmd("c", b"stats-tube -x\r\n"),
        cmd("c", b"stats-tube \r\n"),
        cmd("c", b"stats-tube\r\n"),
        cmd("c", b"stats-tube foo \r\n"),
        cmd("c", b"stats\r\n"),
        cmd("d", b"list-tube-used\r\n"),
        cmd("d", b"use foo\r\n"),
        cmd("c", b"stats-tube foo\r\n"),
        cmd("c", b"stats-tube default\r\n"),
    ]


@scenario
def watch_ignore():
    return [
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"watch a\r\n"),
        cmd("c", b"watch b\r\n"),
        cmd("c", b"watch a\r\n"),
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"ignore default\r\n"),
        cmd("c", b"ignore nosuch\r\n"),
        cmd("c", b"ignore default\r\n"),
        cmd("c", b"ignore a\r\n"),
        cmd("c", b"ignore b\r\n"),              # NOT_IGNORED
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"watch -a\r\n"),
        cmd("c", b"watch a b\r\n"),
        cmd("c", b"watch \r\n"),
        cmd("c", b"watch\r\n"),
        cmd("c", b"ignore\r\n"),
        cmd("c", b"ignore \r\n"),
        cmd("c", b"ignore b \r\n"),
        cmd("c", b"ignore -b\r\n"),
        cmd("c", b"watch " + b"w" * 200 + b"\r\n"),
        cmd("c", b"watch " + b"w" * 201 + b"\r\n"),
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"stats-tube b\r\n"),
        cmd("c", b"stats\r\n"),
        cmd("c", b"list-tubes-watched \r\n"),
        cmd("c", b"list-tubes \r\n"),
        cmd("c", b"list-tube-used \r\n"),
    ]


@scenario
def reserve_order():
    return [
        cmd("p", b"use t1\r\n"),
        cmd("p", put(b"p5-a", pri=5)),
        cmd("p", put(b"p5-b", pri=5)),
        cmd("p", put(b"p1", pri=1)),
        cmd("p", put(b"p2000", pri=2000)),
        cmd("p", b"use t2\r\n"),
        cmd("p", put(b"t2-p3", pri=3)),
        cmd("p", put(b"t2-p0", pri=0)),
        cmd("p", put(b"t2-max", pri=U32MAX)),
        cmd("w", b"reserve-with-timeout 0\r\n"),       # default is empty
        cmd("w", b"watch t1\r\n"),
        cmd("w", b"watch t2\r\n"),
        cmd("w", b"stats\r\n"),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"reserve-with-timeout 10\r\n"),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"ignore t2\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"reserve-with-timeout 00\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"watch t2\r\n"),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"stats-tube t1\r\n"),
        cmd("w", b"stats-tube t2\r\n"),
        cmd("w", b"stats\r\n"),
        cmd("w", b"reserve \r\n"),
        cmd("w", b"reservex\r\n"),
        cmd("w", b"reserve-with-timeout\r\n"),
        cmd("w", b"reserve-with-timeout 99999999999999999999\r\n"),
        cmd("w", b"reserve-with-timeout 0 \r\n"),
        cmd("w", b"RESERVE\r\n"),
    ]


@scenario
def reserve_blocking():
    return [
        send("w", b"reserve\r\n"),
        sleep(0.1),
        cmd("o", b"stats\r\n"),
        cmd("o", b"stats-tube default\r\n"),
        cmd("p", put(b"wake", pri=7)),
        read("w"),
        cmd("o", b"stats-tube default\r\n"),
        send("w", b"reserve-with-timeout 30\r\n"),
        sleep(0.1),
        cmd("p", b"use other\r\n"),
        cmd("p", put(b"other tube")),
        cmd("o", b"stats\r\n"),
        cmd("p", b"use default\r\n"),
        cmd("p", put(b"second")),
        read("w"),
        cmd("w", b"reserve-with-timeout 1\r\n", timeout=4),   # TIMED_OUT after 1 s
        send("w", b"reserve\r\n"),
        sleep(0.1),
        close("w"),                 # half-close while waiting: TIMED_OUT
        cmd("o", b"stats\r\n"),     # its reserved jobs are ready again
        cmd("o", b"stats-job {j0}\r\n"),
        cmd("o", b"stats-job {j2}\r\n"),
        cmd("o", b"peek-ready\r\n"),
    ]


@scenario
def reserve_two_waiters():
    return [
        cmd("a", b"watch q\r\n"),
        cmd("b", b"watch q\r\n"),
        send("a", b"reserve\r\n"),
        sleep(0.05),
        send("b", b"reserve\r\n"),
        sleep(0.1),
        cmd("o", b"stats-tube q\r\n"),
        cmd("o", b"use q\r\n"),
        cmd("o", put(b"first")),
        read("a"),
        cmd("o", put(b"second")),
        read("b"),
        cmd("o", b"stats-tube q\r\n"),
        cmd("o", b"stats\r\n"),
    ]


@scenario
def deadline_soon():
    # ttr 1: the job is inside its one-second safety margin at once.
    return [
        cmd("w", put(b"short", ttr=1)),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"reserve-with-timeout 5\r\n"),
        cmd("w", put(b"ready one", ttr=100)),
        cmd("w", b"reserve-with-timeout 0\r\n"),   # a ready job wins over DEADLINE_SOON
        cmd("w", put(b"by id", ttr=100)),
        cmd("w", b"reserve-job {j2}\r\n"),          # never DEADLINE_SOON
        cmd("w", b"touch {j0}\r\n"),
        cmd("w", b"delete {j0}\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"stats\r\n"),
    ]


@scenario
def reserve_job():
    return [
        cmd("p", b"use rj\r\n"),
        cmd("p", put(b"ready")),
        cmd("p", put(b"delayed", delay=5000)),
        cmd("p", put(b"to bury")),
        cmd("w", b"reserve-job {j2}\r\n"),
        cmd("w", b"bury {j2} 9\r\n"),
        cmd("w", b"reserve-job {j0}\r\n"),         # from a tube it does not watch
        cmd("w", b"reserve-job {j1}\r\n"),         # delayed
        cmd("w", b"reserve-job {j2}\r\n"),         # buried
        cmd("w", b"stats-job {j1}\r\n"),
        cmd("w", b"stats-job {j2}\r\n"),
        cmd("x", b"reserve-job {j0}\r\n"),         # reserved by w
        cmd("w", b"reserve-job {j0}\r\n"),         # reserved by itself
        cmd("w", b"reserve-job 999\r\n"),
        cmd("w", b"reserve-job 0\r\n"),
        cmd("w", b"reserve-job\r\n"),
        cmd("w", b"reserve-job \r\n"),
        cmd("w", b"reserve-job -1\r\n"),
        cmd("w", b"reserve-job 1x\r\n"),
        cmd("w", b"reserve-job 18446744073709551615\r\n"),
        cmd("w", b"reserve-job 18446744073709551616\r\n"),
        cmd("w", b"stats-tube rj\r\n"),
        cmd("w", b"stats\r\n"),
        cmd("w", b"release {j0} 1 0\r\n"),
        cmd("w", b"release {j1} 1 0\r\n"),
        cmd("w", b"release {j2} 1 0\r\n"),
        cmd("p", b"peek-ready\r\n"),
        cmd("p", b"stats-job {j1}\r\n"),
    ]


@scenario
def delete_cases():
    return [
        cmd("p", put(b"ready")),
        cmd("p", put(b"delayed", delay=5000)),
        cmd("p", put(b"buried")),
        cmd("p", put(b"reserved by w")),
        cmd("w", b"reserve-job {j2}\r\n"),
        cmd("w", b"bury {j2} 0\r\n"),
        cmd("w", b"reserve-job {j3}\r\n"),
        cmd("x", b"delete {j3}\r\n"),              # reserved by another: NOT_FOUND
        cmd("p", b"delete {j0}\r\n"),
        cmd("p", b"delete {j1}\r\n"),
        cmd("p", b"delete {j2}\r\n"),
        cmd("w", b"delete {j3}\r\n"),
        cmd("w", b"delete {j3}\r\n"),
        cmd("w", b"delete 0\r\n"),
        cmd("w", b"delete 18446744073709551615\r\n"),
        cmd("w", b"delete 18446744073709551616\r\n"),
        cmd("w", b"delete -1\r\n"),
        cmd("w", b"delete +1\r\n"),
        cmd("w", b"delete 1 \r\n"),
        cmd("w", b"delete  1\r\n"),
        cmd("w", b"delete 1 2\r\n"),
        cmd("w", b"delete x\r\n"),
        cmd("w", b"delete\r\n"),
        cmd("w", b"delete \r\n"),
        cmd("w", b"stats-tube default\r\n"),
        cmd("w", b"stats\r\n"),
    ]


@scenario
def release_bury_touch():
    return [
        cmd("p", put(b"job A", pri=10)),
        cmd("p", put(b"job B", pri=20)),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"release {j0} 30 0\r\n"),
        cmd("w", b"stats-job {j0}\r\n"),
        cmd("w", b"reserve\r\n"),                   # B (20) now before A (30)
        cmd("w", b"touch {j1}\r\n"),
        cmd("x", b"touch {j1}\r\n"),
        cmd("x", b"release {j1} 1 0\r\n"),
        cmd("x", b"bury {j1} 1\r\n"),
        cmd("w", b"release {j1} 5 3000\r\n"),       # to delayed
        cmd("w", b"stats-job {j1}\r\n"),
        cmd("w", b"peek-delayed\r\n"),
        cmd("w", b"release {j1} 5 0\r\n"),          # not reserved any more
        cmd("w", b"touch {j1}\r\n"),
        cmd("w", b"reserve\r\n"),
        cmd("w", b"bury {j0} 77\r\n"),
        cmd("w", b"stats-job {j0}\r\n"),
        cmd("w", b"bury {j0} 77\r\n"),
        cmd("w", b"peek-buried\r\n"),
        cmd("w", b"release 999 1 1\r\n"),
        cmd("w", b"release {j0} 1\r\n"),
        cmd("w", b"release {j0} 1 1 1\r\n"),
        cmd("w", b"release {j0} 4294967296 0\r\n"),
        cmd("w", b"release {j0} 1 4294967296\r\n"),
        cmd("w", b"release {j0} -1 0\r\n"),
        cmd("w", b"release\r\n"),
        cmd("w", b"release \r\n"),
        cmd("w", b"bury {j0}\r\n"),
        cmd("w", b"bury {j0} 1 1\r\n"),
        cmd("w", b"bury {j0} 4294967296\r\n"),
        cmd("w", b"bury\r\n"),
        cmd("w", b"bury \r\n"),
        cmd("w", b"touch\r\n"),
        cmd("w", b"touch \r\n"),
        cmd("w", b"touch x\r\n"),
        cmd("w", b"touch 1 \r\n"),
        cmd("w", b"stats\r\n"),
    ]


@scenario
def peek_commands():
    return [
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"peek-delayed\r\n"),
        cmd("c", b"peek-buried\r\n"),
        cmd("c", b"use pk\r\n"),
        cmd("c", put(b"r1", pri=9)),
        cmd("c", put(b"r2", pri=3)),
        cmd("c", put(b"d1", delay=9000)),
        cmd("c", put(b"d2", delay=3000)),
        cmd("c", put(b"d3", delay=3000)),
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"peek-delayed\r\n"),
        cmd("c", b"peek-buried\r\n"),
        cmd("w", b"watch pk\r\n"),
        cmd("w", b"reserve-job {j0}\r\n"),
        cmd("w", b"bury {j0} 1\r\n"),
        cmd("c", b"peek-buried\r\n"),
        cmd("c", b"peek {j0}\r\n"),
        cmd("c", b"peek {j2}\r\n"),
        cmd("c", b"peek 0\r\n"),
        cmd("c", b"peek 99\r\n"),
        cmd("c", b"peek\r\n"),
        cmd("c", b"peek \r\n"),
        cmd("c", b"peek x\r\n"),
        cmd("c", b"peek 1 \r\n"),
        cmd("c", b"peek  1\r\n"),
        cmd("c", b"peek-ready \r\n"),
        cmd("c", b"peek-readyx\r\n"),
        cmd("c", b"peek-delayed \r\n"),
        cmd("c", b"peek-buried 1\r\n"),
        cmd("c", b"use default\r\n"),
        cmd("c", b"peek-ready\r\n"),         # used tube only
        cmd("c", b"peek-buried\r\n"),
        cmd("c", b"peek {j1}\r\n"),          # any tube
        cmd("w", b"reserve-job {j1}\r\n"),
        cmd("c", b"peek {j1}\r\n"),          # reserved jobs can be peeked
        cmd("c", b"stats\r\n"),
    ]


@scenario
def kick_commands():
    return [
        cmd("c", b"kick 10\r\n"),
        cmd("c", put(b"d1", delay=4000)),
        cmd("c", put(b"d2", delay=2000)),
        cmd("c", put(b"b1")),
        cmd("c", put(b"b2")),
        cmd("c", put(b"b3")),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"bury {j2} 5\r\n"),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"bury {j3} 5\r\n"),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"bury {j4} 5\r\n"),
        cmd("c", b"kick 0\r\n"),
        cmd("c", b"kick 1\r\n"),                 # buried first
        cmd("c", b"peek-buried\r\n"),
        cmd("c", b"kick 10\r\n"),                # the other two buried only
        cmd("c", b"kick 1\r\n"),                 # now delayed: shortest first
        cmd("c", b"peek-delayed\r\n"),
        cmd("c", b"kick 4294967295\r\n"),
        cmd("c", b"kick 5\r\n"),
        cmd("c", b"stats-job {j1}\r\n"),
        cmd("c", b"stats-job {j2}\r\n"),
        cmd("c", put(b"d3", delay=4000)),
        cmd("c", put(b"b4")),
        cmd("c", b"reserve-job {j6}\r\n"),
        cmd("c", b"bury {j6} 1\r\n"),
        cmd("c", b"kick-job {j5}\r\n"),          # delayed
        cmd("c", b"kick-job {j6}\r\n"),          # buried
        cmd("c", b"kick-job {j6}\r\n"),          # ready now
        cmd("c", b"reserve-job {j6}\r\n"),
        cmd("c", b"kick-job {j6}\r\n"),          # reserved
        cmd("c", b"kick-job 999\r\n"),
        cmd("c", b"kick-job\r\n"),
        cmd("c", b"kick-job \r\n"),
        cmd("c", b"kick-job x\r\n"),
        cmd("c", b"kick-job 1 \r\n"),
        cmd("c", b"kick\r\n"),
        cmd("c", b"kick \r\n"),
        cmd("c", b"kick x\r\n"),
        cmd("c", b"kick  3\r\n"),
        cmd("c", b"kick 99999999999999999999999\r\n"),
        # A bound above 32 bits: 1.12 keeps its low 32 bits.
        cmd("c", put(b"b5")),
        cmd("c", b"reserve-job {j7}\r\n"),
        cmd("c", b"bury {j7} 5\r\n"),
        cmd("c", b"kick 4294967296\r\n"),      # 0: KICKED 0
        cmd("c", b"kick 99999999999\r\n"),      # 1215752191: KICKED 1
        cmd("c", b"kick 18446744073709551616\r\n"),  # past 64 bits
        cmd("c", b"kick 18446744073709551615\r\n"),
        cmd("c", b"stats-job {j5}\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def kick_other_tube():
    return [
        cmd("c", b"use k1\r\n"),
        cmd("c", put(b"a", delay=3000)),
        cmd("c", b"use k2\r\n"),
        cmd("c", put(b"b", delay=3000)),
        cmd("c", b"kick 10\r\n"),            # only k2's job
        cmd("c", b"stats-tube k1\r\n"),
        cmd("c", b"kick-job {j0}\r\n"),       # kick-job works in any tube
        cmd("c", b"use k1\r\n"),
        cmd("c", b"peek-delayed\r\n"),
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"stats-tube k2\r\n"),
    ]


@scenario
def equal_delays_in_command_order():
    # Pipelined in one write: a put and a release with the same delay.  The
    # release comes due second although its job is older (CI's random
    # stream found tubed ordering such ties by id).
    return [
        cmd("c", put(b"old")),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", put(b"new", delay=1000) + b"release {j0} 0 1000\r\npeek-delayed\r\n", n=3),
        cmd("c", b"put 0 2000 60 1\r\na\r\nput 0 2000 60 1\r\nb\r\n", n=2),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("c", b"kick 1\r\npeek-ready\r\n", n=2),
    ]


@scenario
def kick_wakes_in_kick_order():
    # beanstalkd hands each kicked job to a waiting reserve as it is
    # kicked: a waiter gets the first job kicked, not the best of the
    # kick.  Buried jobs go in burial order, delayed ones by deadline.
    return [
        cmd("p", b"use k\r\nwatch k\r\nignore default\r\n", n=3),
        cmd("w", b"watch k\r\nignore default\r\n", n=2),
        cmd("p", put(b"b10", pri=10) + put(b"b5", pri=5) + put(b"b1", pri=1), n=3),
        cmd("p", b"reserve-job {j0}\r\nbury {j0} 10\r\nreserve-job {j1}\r\n"
                 b"bury {j1} 5\r\nreserve-job {j2}\r\nbury {j2} 1\r\n", n=6),
        send("w", b"reserve\r\n"),
        await_waiting(b"k", 1),
        cmd("p", b"kick 3\r\n"),
        read("w"),                                  # b10, the first buried
        cmd("p", b"peek-ready\r\n"),
        cmd("p", b"stats-job {j0}\r\n"),
        cmd("p", b"reserve-with-timeout 0\r\nreserve-with-timeout 0\r\n", n=2),
        cmd("p", put(b"d3000", pri=1, delay=3000) + put(b"d1000", pri=9, delay=1000) +
            put(b"d2000", pri=5, delay=2000), n=3),
        send("w", b"reserve\r\n"),
        await_waiting(b"k", 1),
        cmd("p", b"kick 10\r\n"),
        read("w"),                                  # d1000: soonest deadline
        cmd("p", b"peek-ready\r\n"),              # d3000 (pri 1)
        cmd("p", b"stats-tube k\r\n"),
    ]


@scenario
def close_returns_jobs_in_reserve_order():
    # A closing connection's reserved jobs go back one by one, oldest
    # reservation first, each to a waiting reserve at once (beanstalkd).
    return [
        cmd("p", b"use a\r\n"),
        cmd("p", put(b"a9", pri=9)),
        cmd("p", b"use b\r\n"),
        cmd("p", put(b"b1", pri=1)),
        cmd("p", b"use a\r\n"),
        cmd("p", put(b"a0", pri=0)),
        cmd("x", b"reserve-job {j0}\r\nreserve-job {j1}\r\nreserve-job {j2}\r\n", n=3),
        cmd("w", b"watch a\r\nwatch b\r\nignore default\r\n", n=3),
        cmd("v", b"watch a\r\nignore default\r\n", n=2),
        send("w", b"reserve\r\n"),
        await_waiting(b"a", 1),
        send("v", b"reserve\r\n"),
        await_waiting(b"a", 2),
        close("x"),
        read("w"),                                  # a9: reserved first
        read("v"),                                  # a0: b has no waiter left
        cmd("p", b"use b\r\npeek-ready\r\n", n=2),
        cmd("p", b"stats-job {j0}\r\nstats-job {j1}\r\nstats-job {j2}\r\n", n=3),
        cmd("p", b"stats-tube a\r\n"),
    ]


@scenario
def delays_end_in_deadline_order_to_waiter():
    # Two jobs delayed 1 s, put in one write: the first put comes due
    # first and is handed to the waiting reserve although the second has
    # the better priority.  (Waits for the delays; races with nothing.)
    return [
        cmd("p", b"use dd\r\n"),
        cmd("w", b"watch dd\r\nignore default\r\n", n=2),
        cmd("v", b"watch dd\r\nignore default\r\n", n=2),
        cmd("p", put(b"first", pri=50, delay=1) + put(b"second", pri=1, delay=1), n=2),
        send("w", b"reserve\r\n"),
        await_waiting(b"dd", 1),
        read("w", timeout=5),
        cmd("v", b"reserve-with-timeout 5\r\n", timeout=6),
        cmd("p", b"stats-job {j0}\r\nstats-job {j1}\r\n", n=2),
    ]


@scenario
def waiters_in_beanstalkd_set_order():
    # beanstalkd keeps a tube's waiting connections in a set whose removal
    # moves the last into the hole and takes from a cursor that stays
    # (ms_take): of four waiting, three puts serve the first, second and
    # fourth; afterwards the later of two waiting is served first.
    steps = [cmd(c, b"watch wq\r\nignore default\r\n", n=2) for c in "abcd"]
    steps.append(cmd("p", b"use wq\r\n"))
    for i, c in enumerate("abcd"):
        steps += [send(c, b"reserve\r\n"), await_waiting(b"wq", i + 1)]
    steps += [
        cmd("p", put(b"1")), cmd("p", put(b"2")), cmd("p", put(b"3")),
        read("a"), read("b"), read("d"),
        cmd("p", put(b"4")), read("c"),
        send("a", b"reserve\r\n"), await_waiting(b"wq", 1),
        send("b", b"reserve\r\n"), await_waiting(b"wq", 2),
        cmd("p", put(b"5")), cmd("p", put(b"6")),
        read("a"), read("b"),
    ]
    # A waiter of two tubes leaves both sets when served: the other set's
    # order moves.  Enough jobs in both tubes that every waiter gets one.
    steps += [
        cmd("a", b"watch x\r\n"),
        cmd("d", b"watch x\r\nignore wq\r\n", n=2),
        send("a", b"reserve\r\n"), await_waiting(b"wq", 1),
        send("b", b"reserve\r\n"), await_waiting(b"wq", 2),
        send("d", b"reserve\r\n"), await_waiting(b"x", 2),
        send("c", b"reserve\r\n"), await_waiting(b"wq", 3),
        cmd("p", put(b"7")),
        cmd("p", b"use x\r\n"), cmd("p", put(b"8")),
        cmd("p", b"use wq\r\n"), cmd("p", put(b"9")), cmd("p", put(b"10")),
        cmd("p", b"use x\r\n"), cmd("p", put(b"11")), cmd("p", put(b"12")),
        read("a"), read("b"), read("c"), read("d"),
        cmd("p", b"peek-ready\r\nuse wq\r\npeek-ready\r\n", n=3),
    ]
    return steps


@scenario
def waiter_leaving_moves_the_last():
    # A waiter that leaves (its timeout, its connection closing) is
    # replaced in the tube's set by the last one: the next job goes there,
    # not to the one that waited longest.
    steps = [cmd(c, b"watch wl\r\nignore default\r\n", n=2) for c in "abcdef"]
    steps += [
        cmd("p", b"use wl\r\n"),
        send("a", b"reserve-with-timeout 1\r\n"), await_waiting(b"wl", 1),
        send("b", b"reserve\r\n"), await_waiting(b"wl", 2),
        send("c", b"reserve\r\n"), await_waiting(b"wl", 3),
        read("a", timeout=5),                       # TIMED_OUT: c takes its place
        await_waiting(b"wl", 2),
        cmd("p", put(b"1")),
        read("c"),
        cmd("p", put(b"2")),
        read("b"),
        send("d", b"reserve\r\n"), await_waiting(b"wl", 1),
        send("e", b"reserve\r\n"), await_waiting(b"wl", 2),
        send("f", b"reserve\r\n"), await_waiting(b"wl", 3),
        close("d"),
        await_waiting(b"wl", 2),
        cmd("p", put(b"3")), cmd("p", put(b"4")),
        read("e"), read("f"),
    ]
    return steps


@scenario
def pipelined_puts_to_waiters():
    # Puts in one write reach three waiting reserves, each put's job going
    # out before the next put is read (and a release and a kick among them).
    steps = [cmd(c, b"watch pp\r\nignore default\r\n", n=2) for c in "abc"]
    steps += [
        cmd("p", b"use pp\r\nwatch pp\r\n", n=2),
        cmd("p", put(b"held", pri=3)),
        cmd("p", put(b"buried", pri=4)),
        cmd("p", b"reserve-job {j0}\r\nreserve-job {j1}\r\nbury {j1} 4\r\n", n=3),
        send("a", b"reserve\r\n"), await_waiting(b"pp", 1),
        send("b", b"reserve-with-timeout 100\r\n"), await_waiting(b"pp", 2),
        send("c", b"reserve\r\n"), await_waiting(b"pp", 3),
        cmd("p", put(b"p9", pri=9) + b"release {j0} 3 0\r\n" + put(b"p0", pri=0) +
            b"kick 1\r\n", n=4),
        read("a"), read("b"), read("c"),
        cmd("p", b"peek-ready\r\nstats-tube pp\r\n", n=2),
    ]
    return steps


@scenario
def pause_with_waiters():
    # Waiters of a paused tube wait; when the pause ends they get the best
    # jobs, in the set's order; pause-tube 0 ends a pause at once.
    steps = [cmd(c, b"watch pz\r\nignore default\r\n", n=2) for c in "ab"]
    steps += [
        cmd("p", b"use pz\r\n"),
        cmd("p", b"pause-tube pz 1\r\n"),
        cmd("p", put(b"p5", pri=5) + put(b"p1", pri=1) + put(b"p7", pri=7), n=3),
        send("a", b"reserve\r\n"), await_waiting(b"pz", 1),
        send("b", b"reserve\r\n"), await_waiting(b"pz", 2),
        cmd("p", b"peek-ready\r\n"),
        read("a", timeout=5), read("b", timeout=5),
        cmd("p", b"pause-tube pz 100\r\n"),
        send("a", b"reserve\r\n"), await_waiting(b"pz", 1),
        send("b", b"reserve-with-timeout 50\r\n"), await_waiting(b"pz", 2),
        cmd("p", put(b"p3", pri=3)),
        cmd("p", b"pause-tube pz 0\r\n"),
        read("a", timeout=5), read("b", timeout=5),
        cmd("p", b"stats-tube pz\r\n"),
    ]
    return steps


@scenario
@server_flags("-z", "10")
def max_job_size_10():
    # -z 10: a body of exactly 10 bytes is taken; 11 is JOB_TOO_BIG after
    # the body is read and thrown away, also pipelined and in pieces.
    return [
        cmd("c", put(b"0123456789")),
        cmd("c", put(b"0123456789a")),
        cmd("c", put(b"")),
        cmd("c", b"put 0 0 60 11\r\n" + b"x" * 11 + b"\r\n" + put(b"ok"), n=2),
        cmd("c", b"put 0 0 60 10\r\n0123456789XY"),
        cmd("c", b"put 0 0 60 11\r\n" + b"y" * 11 + b"\r\n", cuts=[14, 20]),
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
@server_flags("-z", "0")
def max_job_size_0():
    return [
        cmd("c", put(b"")),
        cmd("c", put(b"a")),
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"reserve-with-timeout 0\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def delays_end_across_tubes_in_deadline_order():
    # Delays of 1 s in tubes da, db, da, put in one write, end in the order
    # they were put, across tubes: two waiters watching both get the first
    # two (da's first, then db's), whichever tube they are in.
    steps = [cmd(c, b"watch da\r\nwatch db\r\nignore default\r\n", n=3) for c in "ab"]
    steps += [
        cmd("p", b"use da\r\n" + put(b"da1", delay=1) + b"use db\r\n" + put(b"db1", delay=1) +
            b"use da\r\n" + put(b"da2", delay=1), n=6),
        send("a", b"reserve\r\n"), await_waiting(b"da", 1),
        send("b", b"reserve\r\n"), await_waiting(b"da", 2),
        read("a", timeout=5), read("b", timeout=5),
        cmd("p", b"watch da\r\nreserve-with-timeout 5\r\n", n=2, timeout=6),
    ]
    return steps


@scenario
def deadline_soon_while_waiting():
    # A reserve that waits while its connection holds a job with a TTR of
    # 2 s answers DEADLINE_SOON when the last second begins.  Only replies
    # that do not depend on how late the client reads come after.
    return [
        cmd("w", b"use ds\r\nwatch ds\r\nignore default\r\n", n=3),
        cmd("w", put(b"short", ttr=2)),
        cmd("w", b"reserve\r\n"),
        send("w", b"reserve-with-timeout 100\r\n"),
        await_waiting(b"ds", 1),
        read("w", timeout=5),                        # DEADLINE_SOON
        close("w"),                                  # the job goes back
        cmd("p", b"use ds\r\npeek-ready\r\n", n=2),
    ]


@scenario
def pipelined_after_waiting_reserve():
    # Requests pipelined behind a reserve that waits wait with it and are
    # answered, in order, after its job; a half-close then ends the next.
    return [
        cmd("w", b"watch pw\r\n"),
        send("w", b"reserve\r\nlist-tube-used\r\nuse pw\r\nreserve-with-timeout 0\r\n"
                  b"reserve\r\n"),
        await_waiting(b"pw", 1),
        cmd("p", b"stats-tube pw\r\nuse pw\r\n", n=2),
        cmd("p", put(b"one") + put(b"two"), n=2),
        read("w", n=4),             # RESERVED, OK (default), USING, RESERVED
        await_waiting(b"pw", 1),    # the last reserve waits again
        close("w"),                 # TIMED_OUT, then the server closes
        cmd("p", b"stats-tube pw\r\npeek-ready\r\n", n=2),
        # Half-closed while waiting with requests behind: TIMED_OUT, then
        # the requests are answered before the server closes.
        cmd("x", b"watch pw2\r\n"),
        send("x", b"reserve\r\nlist-tube-used\r\nreserve-with-timeout 5\r\n"),
        await_waiting(b"pw2", 1),
        close("x"),
        cmd("p", b"stats-tube pw\r\n"),
    ]


@scenario
def many_tubes_watcher_in_set_order():
    # A connection watching 20 tubes waits in each tube's set like any
    # other: after a take the cursor's waiter, the one that came second,
    # gets the job.
    steps = [cmd("m", b"".join(b"watch m%d\r\n" % i for i in range(20)), n=20)]
    steps += [
        cmd("n", b"watch m7\r\n"),
        cmd("p", b"use m7\r\n" + put(b"taken"), n=2),
        cmd("t", b"watch m7\r\nreserve-with-timeout 0\r\n", n=2),
        send("m", b"reserve\r\n"), await_waiting(b"m7", 1),
        send("n", b"reserve\r\n"), await_waiting(b"m7", 2),
        cmd("p", put(b"one")), read("n"),
        cmd("p", put(b"two")), read("m"),
    ]
    return steps


@scenario
def delay_ends_before_reserve_timeout():
    # put with delay 1, then at once reserve-with-timeout 1: the delay ends
    # first (a little earlier), and beanstalkd hands the job over even when
    # both fall in one tick; the reserve never times out.
    return [
        cmd("p", b"use dt\r\n"),
        cmd("w", b"watch dt\r\nignore default\r\n", n=2),
        cmd("p", put(b"due", delay=1)),
        cmd("w", b"reserve-with-timeout 1\r\n", timeout=5),
        cmd("p", put(b"due2", pri=3, delay=2)),
        cmd("w", b"reserve-with-timeout 2\r\n", timeout=6),
        cmd("w", b"stats-job {j0}\r\nstats-job {j1}\r\n", n=2),
    ]


@scenario
def stats_counters():
    steps = [cmd("c", b"stats\r\n")]
    for line in (b"put 0 0 60 1\r\nx\r\n", b"peek 1\r\n", b"peek-ready\r\n",
                 b"peek-delayed\r\n", b"peek-buried\r\n", b"reserve-with-timeout 0\r\n",
                 b"release 1 0 0\r\n", b"reserve\r\n", b"bury 1 0\r\n",
                 b"kick 1\r\n", b"kick-job 1\r\n", b"reserve\r\n", b"touch 1\r\n",
                 b"delete 1\r\n", b"use s\r\n", b"watch s\r\n", b"ignore s\r\n",
                 b"stats-job 1\r\n", b"stats-tube s\r\n", b"list-tubes\r\n",
                 b"list-tube-used\r\n", b"list-tubes-watched\r\n", b"pause-tube s 0\r\n",
                 b"reserve-job 1\r\n",
                 # bad-format variants: which of these count?
                 b"peek x\r\n", b"use -\r\n", b"watch -\r\n", b"ignore -\r\n",
                 b"stats-job x\r\n", b"stats-tube -\r\n", b"pause-tube - 1\r\n",
                 b"delete x\r\n", b"release x 0 0\r\n", b"bury x 0\r\n", b"touch x\r\n",
                 b"kick x\r\n", b"kick-job x\r\n", b"put x 0 0 1\r\n",
                 b"reserve-job x\r\n", b"stats \r\n", b"list-tubes \r\n"):
        steps.append(cmd("c", line))
        steps.append(cmd("c", b"stats\r\n"))
    return steps


@scenario
def stats_job_states():
    return [
        cmd("c", b"use sj\r\n"),
        cmd("c", b"watch sj\r\n"),
        cmd("c", put(b"j", pri=1023, delay=0, ttr=300)),
        cmd("c", put(b"k", pri=1024, delay=6000, ttr=300)),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"stats-job {j1}\r\n"),
        cmd("c", b"stats-tube sj\r\n"),
        cmd("c", b"stats\r\n"),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"release {j0} 2000 0\r\n"),
        cmd("c", b"stats-tube sj\r\n"),          # urgent count follows the new pri
        cmd("c", b"reserve\r\n"),
        cmd("c", b"bury {j0} 3\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"kick 1\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"stats-job 999\r\n"),
        cmd("c", b"stats-job 0\r\n"),
        cmd("c", b"stats-job\r\n"),
        cmd("c", b"stats-job \r\n"),
        cmd("c", b"stats-job 1 \r\n"),
        cmd("c", b"stats-job -1\r\n"),
        cmd("c", b"stats-job 18446744073709551616\r\n"),
        cmd("c", b"stats-tube sj\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def list_tubes_order():
    steps = []
    for name in (b"m", b"a", b"z", b"b(1)", b"$x", b"q.q", b"y_y", b"Z;"):
        steps.append(cmd("c", b"use " + name + b"\r\n"))
        steps.append(cmd("c", put(name)))
    steps += [
        cmd("c", b"list-tubes\r\n"),
        cmd("w", b"watch a\r\n"),
        cmd("w", b"watch q.q\r\n"),
        cmd("w", b"watch new\r\n"),
        cmd("w", b"list-tubes-watched\r\n"),
        cmd("w", b"ignore default\r\n"),
        cmd("w", b"list-tubes-watched\r\n"),
        cmd("w", b"reserve-job {j0}\r\n"),
        cmd("w", b"delete {j0}\r\n"),            # tube m becomes empty
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"use m\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"stats\r\n"),
    ]
    return steps


@scenario
def list_tubes_after_removal():
    # The order of list-tubes after tubes disappear (the reference moves the
    # last tube into the hole left by a removed one).
    steps = [cmd("c", b"watch %s\r\n" % t) for t in (b"a", b"b", b"c", b"d", b"e")]
    steps += [
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"ignore b\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"ignore a\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"watch f\r\n"),
        cmd("c", b"watch b\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"ignore d\r\n"),
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"ignore default\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"list-tubes-watched\r\n"),
    ]
    return steps


@scenario
def list_tubes_after_close():
    # A closing connection drops its watched and used tubes at once: the
    # order in which they go decides the order of list-tubes afterwards.
    return [
        cmd("y", b"watch a\r\n"),
        cmd("x", b"watch p\r\n"),
        cmd("x", b"watch q\r\n"),
        cmd("x", b"use u\r\n"),
        cmd("x", b"watch r\r\n"),
        cmd("y", b"watch s\r\n"),
        cmd("y", b"watch t\r\n"),
        cmd("y", b"use v\r\n"),
        cmd("y", b"list-tubes\r\n"),
        close("x"),
        cmd("y", b"list-tubes\r\n"),
        cmd("z", b"watch p\r\n"),
        cmd("z", b"use q\r\n"),
        cmd("z", b"watch default\r\n"),
        cmd("z", b"ignore default\r\n"),
        cmd("y", b"list-tubes\r\n"),
        cmd("z", b"quit\r\n"),
        cmd("y", b"list-tubes\r\n"),
    ]


@scenario
def pause_tube():
    return [
        cmd("c", b"pause-tube nosuch 10\r\n"),
        cmd("c", put(b"j")),
        cmd("c", b"pause-tube default 5000\r\n"),
        cmd("c", b"stats-tube default\r\n"),
        cmd("c", b"reserve-with-timeout 0\r\n"),   # paused: no job
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"reserve-job {j0}\r\n"),         # by id even when paused
        cmd("c", b"release {j0} 0 0\r\n"),
        cmd("c", b"pause-tube default 0\r\n"),     # unpause at once
        cmd("c", b"stats-tube default\r\n"),
        cmd("c", b"reserve-with-timeout 0\r\n"),
        cmd("c", b"pause-tube default 4294967295\r\n"),
        cmd("c", b"pause-tube default 4294967296\r\n"),
        cmd("c", b"pause-tube default -1\r\n"),
        cmd("c", b"pause-tube default  7\r\n"),
        cmd("c", b"pause-tube  default 7\r\n"),
        cmd("c", b"pause-tube default 7 \r\n"),
        cmd("c", b"pause-tube default\r\n"),
        cmd("c", b"pause-tube default \r\n"),
        cmd("c", b"pause-tube\r\n"),
        cmd("c", b"pause-tube \r\n"),
        cmd("c", b"pause-tube -x 1\r\n"),
        cmd("c", b"pause-tube a*b 1\r\n"),
        cmd("c", b"pause-tube " + b"p" * 200 + b" 4294967295\r\n"),  # 224-byte line
        cmd("c", b"use " + b"p" * 200 + b"\r\n"),
        cmd("c", b"pause-tube " + b"p" * 200 + b" 4294967295\r\n"),
        cmd("c", b"stats-tube " + b"p" * 200 + b"\r\n"),
        cmd("c", b"pause-tube " + b"p" * 200 + b" 0\r\n"),
        cmd("c", b"stats-tube default\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def quit_command():
    return [
        cmd("a", b"list-tube-used\r\n"),
        cmd("a", b"quit\r\n"),
        cmd("b", b"use x\r\n"),
        cmd("b", b"stats-tube x\r\n"),
        cmd("b", b"put 0 0 60 2\r\nhi\r\nquit\r\n", n=2),     # pipelined: reply then close
        cmd("c", b"stats\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("d", b"reserve-job {j0}\r\n"),
        cmd("d", b"quit\r\n"),                    # reserved job goes back
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"QUIT\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def malformed_lines():
    lines = [b"\r\n", b" \r\n", b"  \r\n", b"\x00\r\n", b"stats\x00\r\n",
             b"foo\r\n", b"STATS\r\n", b"Stats\r\n", b" stats\r\n", b"stats \r\n",
             b"stats x\r\n", b"statsx\r\n", b"stats-\r\n", b"list\r\n",
             b"list-tubes-watched \r\n", b"list-tubes-watchedx\r\n",
             b"list-tube-usedx\r\n", b"peek-delayedx\r\n", b"peek-buriedx\r\n",
             b"\tstats\r\n", b"stats\t\r\n", b"stats\n\r\n", b"\nstats\r\n",
             b"use\tfoo\r\n", b"put\t0 0 1 1\r\n", b"delete\t1\r\n",
             b"kick-job 1 1\r\n", b"reserve-job 1 1\r\n", b"stats-job 1 1\r\n",
             b"touch 1 1\r\n", b"peek 1 1\r\n", b"\xff\xfe\r\n",
             b"put 0 0 1 1\x00\r\n", b"delete 1\x00\r\n", b"use foo\x00\r\n",
             b"r\r\n", b"reserve-\r\n", b"peek-\r\n", b"kick-\r\n",
             b"stats-jobs 1\r\n", b"stats-tubes default\r\n", b"pause-tubes default 1\r\n",
             b"watch-tube x\r\n", b"list-tube\r\n", b"list-tubes-used\r\n"]
    steps = [cmd("c", ln) for ln in lines]
    steps.append(cmd("c", b"list-tube-used\r\n"))
    steps.append(cmd("c", b"stats\r\n"))
    return steps


@scenario
def long_lines():
    # Lengths count the \r\n.  beanstalkd 1.12 mis-handles a line whose \r is
    # the last byte of its 224-byte buffer (length 225, 449, ...): not used.
    steps = []
    for total in (224, 226, 227, 300, 447, 450, 672, 1000, 5000, 70000):
        steps.append(cmd("c", b"x" * (total - 2) + b"\r\n"))
        steps.append(cmd("c", b"list-tube-used\r\n"))
    steps += [
        cmd("c", b"y" * 1000 + b"\r\nlist-tube-used\r\n", n=2),   # pipelined after
        cmd("c", b"use " + b"u" * 300 + b"\r\n"),
        cmd("c", b"put 0 0 60 " + b"1" * 300 + b"\r\n"),
        cmd("c", b"stats-tube " + b"s" * 220 + b"\r\n"),
        cmd("c", b"delete " + b"9" * 250 + b"\r\n"),
        cmd("c", b"list-tube-used\r\n"),
        cmd("c", b"use " + b"v" * 200 + b"\r\n"),
        cmd("c", b"put 0 0 60 3\r\nabc\r\n"),
        cmd("c", b"stats\r\n"),
    ]
    return steps


@scenario
def fragmented_input():
    return [
        send("c", b"us"),
        sleep(0.05),
        send("c", b"e fr"),
        sleep(0.05),
        send("c", b"ag\r"),
        sleep(0.05),
        cmd("c", b"\n"),
        send("c", b"put 3 0 60 10\r"),
        sleep(0.05),
        send("c", b"\n01234"),
        sleep(0.05),
        send("c", b"56789\r"),
        sleep(0.05),
        cmd("c", b"\n"),
        send("c", b"peek-ready\r\nlist-tube-used\r\nsta"),
        read("c", 2),
        cmd("c", b"ts-tube frag\r\n"),
        cmd("c", b"list-tube-used\r\nlist-tubes\r\npeek-ready\r\nwatch frag\r\n"
                 b"reserve\r\ndelete {j0}\r\nstats-tube frag\r\n", n=7),
        cmd("c", b"".join(put(b"%d" % i) for i in range(50)), n=50),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def multi_connections():
    return [
        cmd("p1", b"use jobs\r\n"),
        cmd("p2", b"use jobs\r\n"),
        cmd("w1", b"watch jobs\r\n"),
        cmd("w2", b"watch jobs\r\n"),
        cmd("w2", b"ignore default\r\n"),
        cmd("p1", put(b"one", pri=2)),
        cmd("p2", put(b"two", pri=1)),
        cmd("w1", b"reserve\r\n"),
        cmd("p1", put(b"three", pri=0)),
        cmd("w2", b"reserve\r\n"),
        cmd("w1", b"reserve-with-timeout 0\r\n"),
        cmd("w2", b"reserve-with-timeout 0\r\n"),
        cmd("o", b"stats\r\n"),
        cmd("o", b"stats-tube jobs\r\n"),
        cmd("w2", b"delete {j1}\r\n"),           # w1 holds it
        cmd("w1", b"delete {j1}\r\n"),
        cmd("w1", b"release {j2} 0 0\r\n"),
        cmd("w1", b"touch {j2}\r\n"),
        cmd("w2", b"touch {j2}\r\n"),
        cmd("o", b"stats-tube jobs\r\n"),
        close("w2"),                              # holds {j2}: back to ready
        cmd("o", b"stats-job {j2}\r\n"),
        cmd("o", b"stats-tube jobs\r\n"),
        cmd("w1", b"reserve\r\n"),
        cmd("w1", b"reserve-with-timeout 0\r\n"),
        close("p1"),
        close("p2"),
        cmd("o", b"stats\r\n"),
        close("w1"),
        cmd("o", b"stats\r\n"),
        cmd("o", b"stats-tube jobs\r\n"),
        cmd("o", b"list-tubes\r\n"),
    ]


@scenario
def tube_lifecycle():
    return [
        cmd("a", b"use t\r\n"),
        cmd("b", b"watch t\r\n"),
        cmd("o", b"list-tubes\r\n"),
        cmd("a", b"use default\r\n"),
        cmd("o", b"stats-tube t\r\n"),            # still watched by b
        cmd("b", b"ignore t\r\n"),
        cmd("o", b"stats-tube t\r\n"),            # gone
        cmd("a", b"use t\r\n"),
        cmd("a", put(b"keeps t alive", delay=5000)),
        cmd("a", b"use default\r\n"),
        cmd("o", b"stats-tube t\r\n"),
        cmd("o", b"delete {j0}\r\n"),
        cmd("o", b"stats-tube t\r\n"),
        cmd("o", b"pause-tube t 10\r\n"),
        cmd("o", b"watch p\r\n"),
        cmd("o", b"pause-tube p 100\r\n"),
        cmd("o", b"ignore p\r\n"),
        cmd("o", b"stats-tube p\r\n"),            # paused but unreferenced
        cmd("o", b"list-tubes\r\n"),
        cmd("o", b"stats\r\n"),
        close("a"),
        close("b"),
        cmd("o", b"stats\r\n"),
    ]


@scenario
def drain_mode():
    return [
        cmd("c", put(b"before")),
        sig(signal.SIGUSR1),
        sleep(0.3),
        cmd("c", put(b"while draining")),          # DRAINING, uses an id
        cmd("c", put(b"x" * 70000)),               # too big wins
        cmd("c", b"put 0 0 60 1\r\nxyz"),          # EXPECTED_CRLF wins
        cmd("c", b"put 0 0 60 1 1\r\n"),
        cmd("c", b"stats\r\n"),
        cmd("c", b"reserve\r\n"),
        cmd("c", b"delete {j0}\r\n"),
        cmd("c", b"use d\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("c", b"peek 1\r\n"),
        cmd("c", b"peek 2\r\n"),
        cmd("c", b"stats-job 2\r\n"),
        cmd("c", b"stats-tube d\r\n"),
    ]


@scenario
def rwt_negative_113():
    # Documented 1.13 change: a negative timeout is BAD_FORMAT.  A job is
    # ready, so a 1.12 server would have reserved it (it is not asked).
    return [
        cmd("c", put(b"ready")),
        cmd("c", b"reserve-with-timeout -1\r\n"),
        cmd("c", b"reserve-with-timeout -5\r\n"),
        cmd("c", b"reserve-with-timeout -0\r\n"),
        cmd("c", b"peek-ready\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
    ]


@scenario
def rwt_fraction():
    # A fractional timeout, as JavaScript clients and Ruby's beaneater print
    # one (reserveWithTimeout(2.5)): 1.12 waits its whole seconds. No wait
    # here: either nothing is ready and the whole part is 0, or a job is.
    return [
        cmd("c", b"reserve-with-timeout 0.5\r\n"),
        cmd("p", put(b"one")),
        cmd("c", b"reserve-with-timeout 0.25\r\n"),
        cmd("c", b"delete {j0}\r\n"),
        cmd("p", put(b"two")),
        cmd("c", b"reserve-with-timeout 10.75\r\n"),
        cmd("c", b"release {j1} 0 0\r\n"),
        cmd("c", b"reserve-with-timeout 4294967295.5\r\n"),
        cmd("c", b"reserve-with-timeout 00.000\r\n"),
        cmd("c", b"stats-job {j1}\r\n"),
        cmd("c", b"stats\r\n"),
    ]


@scenario
def documented_leniencies():
    # 1.12 accepts these by accident; tubed may answer BAD_FORMAT or
    # UNKNOWN_COMMAND.  Nothing is ready/buried/delayed, so either answer
    # leaves the same state behind.  Statistics are not compared after them.
    return [
        cmd("c", b"kick 5x\r\n"),
        cmd("c", b"kick 5 6\r\n"),
        cmd("c", b"kick -1\r\n"),
        cmd("c", b"reserve-with-timeout x\r\n"),
        cmd("c", b"reserve-with-timeout \r\n"),
        cmd("c", b"reserve-with-timeout 0x\r\n"),
        cmd("c", b"list-tube-used\r\n"),
        cmd("c", b"quitxyz\r\n"),
        cmd("d", b"quit \r\n"),
    ]


@scenario
def numeric_edges():
    # Leading zeros everywhere a number goes, the 32-bit maxima in release
    # and bury, and lines of 222 to 224 bytes made long by zeros.
    def pad(prefix, rest, total):
        return prefix + b"0" * (total - len(prefix) - len(rest) - 2) + rest + b"\r\n"
    steps = [
        cmd("c", b"put 00001 000 0060 0001\r\nb\r\n"),
        cmd("c", b"put 0 0 60 01\r\nf\r\n"),
        cmd("c", b"put 00000000000000000000000001 0 60 1\r\ng\r\n"),
        cmd("c", b"stats-job 0001\r\n"),
        cmd("c", b"peek 0002\r\n"),
        cmd("c", b"reserve-job 001\r\n"),
        cmd("c", b"release {j0} 4294967295 4294967295\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"reserve-job {j0}\r\n"),
        cmd("c", b"bury {j0} 4294967296\r\n"),
        cmd("c", b"bury {j0} -1\r\n"),
        cmd("c", b"bury {j0} 4294967295\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"kick-job 00001\r\n"),
        cmd("c", b"stats-job {j0}\r\n"),
        cmd("c", b"bury 1\r\nbury\r\nbury \r\ntouch\r\ntouch \r\nrelease\r\nrelease \r\n"
                 b"peek\r\npeek \r\n", n=9),
    ]
    for total in (222, 223, 224):
        steps += [
            cmd("c", pad(b"put ", b"1 0 60 1", total) + b"x\r\n"),
            cmd("c", pad(b"put 1 0 60 ", b"1", total) + b"y\r\n"),
            cmd("c", pad(b"peek ", b"1", total) + b"list-tube-used\r\n", n=2),
            cmd("c", pad(b"kick ", b"1", total)),
            cmd("c", pad(b"reserve-with-timeout ", b"0", total)),
            cmd("c", pad(b"pause-tube default ", b"0", total)),
        ]
    steps += [
        cmd("c", pad(b"put ", b"1 0 60 1", 226) + b"z\r\nlist-tube-used\r\n", n=3),
        cmd("c", b"stats-tube default\r\n"),
        cmd("c", b"stats\r\n"),
    ]
    return steps


@scenario
def command_word_suffixes():
    # A command word run into its argument or followed by junk: which
    # are BAD_FORMAT, which UNKNOWN_COMMAND, and that none acts on job 1.
    lines = [b"kick-jobx 1", b"reserve-jobx 1", b"stats-jobx 1", b"peekx 1", b"deletex 1",
             b"usex foo", b"watchx foo", b"ignorex foo", b"touchx 1", b"releasex 1 0 0",
             b"buryx 1 0", b"kickx 1", b"putx 0 0 60 1", b"stats-tubex default",
             b"reserve-with-timeoutx 0", b"reserve-with-timeout0", b"list-tubesx",
             b"peek-readyx", b"stats-tubedefault", b"usefoo", b"watchfoo", b"peek1",
             b"delete1", b"kick1", b"kick-job1", b"touch1", b"release1 0 0", b"bury1 0",
             b"put0 0 60 1", b"stats-job1", b"reserve-job1", b"ignorefoo", b"kick\t1",
             b"use\x0bfoo", b"list-tube-used\x00", b"peek-ready ",
             b"pause-tube default 0x", b"pause-tube default 1 1", b"pause-tube default 01",
             b"pause-tube default +1", b"pause-tube -- 1", b"pause-tube default\t1",
             b"release 1 0 0 ", b"bury 1 0 ", b"touch 1  ", b"kick-job 01", b"kick-job +1",
             b"kick-job 1\t", b"peek 1\t", b"stats-job  1"]
    steps = [cmd("c", put(b"job1"))]
    steps += [cmd("c", ln + b"\r\n") for ln in lines]
    steps.append(cmd("c", b"stats-job {j0}\r\nlist-tubes\r\nlist-tube-used\r\n"
                          b"list-tubes-watched\r\nstats-tube default\r\n", n=5))
    steps.append(cmd("c", b"stats\r\n"))
    return steps


@scenario
def drain_mid_put():
    # SIGUSR1 between a put's line and the end of its body: the put is
    # judged when its body is complete (DRAINING), as is a too-big body
    # that spans the signal; a reserve waiting meanwhile is not disturbed.
    return [
        cmd("w", b"watch dm\r\n"),
        send("c", b"put 0 0 60 5\r\nab"),
        send("b", b"put 0 0 60 70000\r\n" + b"y" * 1000),
        send("w", b"reserve-with-timeout 100\r\n"),
        await_waiting(b"dm", 1),
        sig(signal.SIGUSR1),
        sleep(0.3),
        cmd("c", b"cde\r\n"),
        cmd("b", b"y" * 69000 + b"\r\n"),
        cmd("c", b"use dm\r\n" + put(b"x") + b"stats-tube dm\r\n", n=3),
        send("c", b"put 0 0 60 1\r\nxy"),
        cmd("c", b"z"),                            # EXPECTED_CRLF wins
        cmd("c", b"stats\r\n"),
        cmd("c", b"peek 1\r\npeek 2\r\npeek 3\r\npeek 4\r\n", n=4),
        close("w"),
    ]


@scenario
def half_close_mid_request():
    # The client half-closes inside a request: a put's body, a command
    # line without its CRLF, a too-big body, an over-long line.  Nothing
    # is answered for the unfinished request and nothing is created.
    return [
        send("a", b"use hc\r\nput 0 0 60 5\r\nab"),
        close("a"),
        send("b", b"use hc\r\nstats"),
        close("b"),
        send("c", b"put 0 0 60 70000\r\nabc"),
        close("c"),
        send("d", b"x" * 300),
        close("d"),
        send("e", b"watch hc\r\nreserve\r\nlist-tube-used\r\n"),
        close("e"),
        send("f", b"\r\n\r\nput 0 0 60 1\r\nx\r\nquit"),
        close("f"),
        cmd("o", b"stats-tube default\r\nstats-tube hc\r\nlist-tubes\r\npeek-ready\r\n", n=4),
        cmd("o", b"stats\r\n"),
    ]


@scenario
def deadline_soon_with_unready_jobs():
    # DEADLINE_SOON needs no ready job in a watched tube: a paused tube's
    # ready job holds it off only while the reserve may wait (1.12's
    # conn_ready counts it); delayed and buried jobs never do.  The held
    # job has TTR 1, so it is in its safety margin from the start; every
    # step here comes well within that second.
    return [
        cmd("p", b"use pz\r\n" + put(b"p") + b"pause-tube pz 100\r\n", n=3),
        cmd("p", b"use default\r\n" + put(b"d", delay=100) + put(b"b"), n=3),
        cmd("p", b"reserve-job {j2}\r\nbury {j2} 0\r\n", n=2),
        cmd("w", put(b"short", ttr=1) + b"reserve\r\n", n=2),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"watch pz\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("w", b"ignore pz\r\nreserve-with-timeout 0\r\n", n=2),
        cmd("w", b"delete {j3}\r\n"),
        cmd("w", b"reserve-with-timeout 0\r\n"),
        cmd("p", b"stats-tube pz\r\nstats-tube default\r\n", n=2),
    ]


@scenario
def many_watched_tubes_lists():
    # A connection watching more than 1024 tubes (tubed serves it apart):
    # the order of its watch list after ignores, list-tubes, and which
    # job its reserves take across tubes (priority, then id).
    n = 1030
    return [
        cmd("c", b"".join(b"watch w%d\r\n" % i for i in range(n)), n=n),
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"".join(b"ignore w%d\r\n" % i for i in range(0, n, 3)), n=len(range(0, n, 3))),
        cmd("c", b"list-tubes-watched\r\n"),
        cmd("c", b"list-tubes\r\n"),
        cmd("p", b"use w1028\r\n" + put(b"late tube", pri=5) + b"use w1\r\n" +
            put(b"early tube", pri=5) + b"use w500\r\n" + put(b"urgent", pri=2) +
            b"use w3\r\n" + put(b"not watched", pri=0), n=8),
        cmd("c", b"reserve-with-timeout 0\r\n" * 4, n=4),
        cmd("c", b"stats\r\n"),
    ]


# --------------------------------------------------------------------------
# Random streams

NAME_CHARS = "ABCXYZabcxyz0123456789-+/;.$_()"
PAUSE_ZERO = re.compile(rb"pause-tube \S+ +0\r\n")
FIXED_TUBES = [b"default", b"a", b"b", b"tube-1", b"x.y", b"$_;+/()", b"Z" * 200]
DELAYS = [0, 0, 0, 0, 1000, 2000, 5000, 100000, U32MAX]   # 0 or far away
TTRS = [60, 120, 3600, 100000, U32MAX]


class RandomStream:
    """Valid and invalid commands over several connections.

    The generator follows the reference server's replies to aim commands at
    jobs that exist and at jobs a connection holds, but never relies on them:
    every command it emits gets exactly one reply from a conforming server,
    never blocks, and never depends on timing (delays are 0 or far away, TTRs
    are long, reserve only with timeout 0)."""

    def __init__(self, seed, ref, blocking=False):
        self.rng = random.Random(seed)
        self.ref = ref
        # Blocking streams get more connections: up to all but one wait.
        self.conns = ["c%d" % i for i in range(6 if blocking else 4)]
        self.tubes = list(FIXED_TUBES)
        self.reserved = {c: [] for c in self.conns}   # job refs held
        self.pending = None     # what the command being generated may change
        self.pendings = []      # one per command of the step
        # --blocking: some reserves wait (Step park); after each command
        # while any waits, a collect step reads what it served.
        self.blocking = blocking
        self.parked = set()
        self.queue = []

    # -- helpers -----------------------------------------------------------

    def njobs(self):
        return len(self.ref.ids)

    def tube(self):
        r = self.rng
        if r.random() < 0.1 and len(self.tubes) < 14:
            n = r.randint(1, 12)
            name = r.choice(NAME_CHARS.replace("-", "")) + \
                "".join(r.choice(NAME_CHARS) for _ in range(n - 1))
            self.tubes.append(name.encode())
        return r.choice(self.tubes)

    def bad_tube(self):
        return self.rng.choice([b"-a", b"a*b", b"a b", b"", b"Z" * 201, b"a,b",
                                b"\xe9", b"a\x00b", b"a:b", b"a\tb", b"b "])

    def job(self, conn=None):
        r = self.rng
        held = self.reserved.get(conn) if conn else None
        x = r.random()
        if held and x < 0.5:
            return b"{j%d}" % r.choice(held)
        n = self.njobs()
        if n and x < 0.85:
            return b"{j%d}" % r.randrange(n)
        return r.choice([b"0", b"%d" % r.randint(1, n + 3), b"999999", b"4294967296",
                         b"18446744073709551615"])

    def bad_number(self):
        return self.rng.choice([b"-1", b"+1", b"1x", b"x", b"", b"1 ", b"1 2",
                                b"18446744073709551616", b"99999999999999999999999",
                                b"0x10", b"1.5", b"\x001"])

    def pri(self):
        return self.rng.choice([0, 1, 5, 1023, 1024, 2000, self.rng.randint(0, U32MAX),
                                U32MAX])

    def body(self):
        r = self.rng
        x = r.random()
        if x < 0.1:
            n = 0
        elif x < 0.6:
            n = r.randint(1, 20)
        elif x < 0.9:
            n = r.randint(20, 300)
        elif x < 0.98:
            n = r.randint(1000, 5000)
        else:
            n = 65535
        if n > 300:
            unit = bytes(r.randrange(256) for _ in range(300))
            return (unit * (n // 300 + 1))[:n]
        if r.random() < 0.5:
            return bytes(r.randrange(256) for _ in range(n))
        return bytes(r.choice(b"abcXYZ 0123\r\n") for _ in range(n))

    # -- generation --------------------------------------------------------

    def next_step(self):
        r = self.rng
        self.pendings = []
        if self.queue:
            return self.queue.pop(0)
        x = r.random()
        if 0.015 <= x < 0.03:   # any connection may go, a parked one too
            c = r.choice(self.conns)
            self.pendings = [("gone", c)]
            self.parked.discard(c)
            self._collect_after()
            return close(c)
        c = r.choice([k for k in self.conns if k not in self.parked])
        if x < 0.015:
            self.pendings = [("gone", c)]
            self._collect_after()
            return cmd(c, b"quit\r\n")
        if self.blocking and x < 0.08 and len(self.parked) < len(self.conns) - 1:
            return Step("park", c, r.choice([b"reserve\r\n",
                                              b"reserve-with-timeout 3600\r\n"]))
        self._collect_after()
        # Mostly one command per step; sometimes several in one write
        # (pipelining), sometimes one command written in pieces.
        n = r.choice([2, 3, 5]) if r.random() < 0.06 else 1
        data = b""
        for i in range(n):
            self.pending = None
            one = self.valid(c) if r.random() < 0.72 else self.invalid(c)
            data += one
            self.pendings.append(self.pending)
            if self.parked and PAUSE_ZERO.fullmatch(one) and i < n - 1:
                # beanstalkd ends such a pause a nanosecond later, at its
                # next tick, which may come before or after the commands
                # pipelined behind (waiters served before or with them):
                # it differs from itself there.  Nothing follows it.
                n = i + 1
                break
        cuts = None
        if n == 1 and len(data) > 1 and r.random() < 0.05:
            cuts = sorted(r.sample(range(1, len(data)), min(3, len(data) - 1)))
        return cmd(c, data, n=n, cuts=cuts)

    def valid(self, c):
        r = self.rng
        k = r.choice(["put"] * 8 + ["use"] * 2 + ["watch"] * 2 + ["ignore"] * 2 +
                     ["rwt0"] * 6 + ["reserve-job"] * 2 + ["delete"] * 3 +
                     ["release"] * 3 + ["bury"] * 3 + ["touch"] + ["peek"] * 2 +
                     ["peek-ready", "peek-delayed", "peek-buried"] +
                     ["kick"] * 2 + ["kick-job"] * 2 + ["stats"] * 2 + ["stats-job"] * 3 +
                     ["stats-tube"] * 2 + ["list-tubes", "list-tube-used",
                                           "list-tubes-watched"] + ["pause-tube"])
        if k == "put":
            body = self.body()
            self.pending = ("put", c)
            return b"put %d %d %d %d\r\n%s\r\n" % (self.pri(), r.choice(DELAYS),
                                                   r.choice(TTRS), len(body), body)
        if k in ("use", "watch", "ignore"):
            t = self.tube()
            return b"%s %s\r\n" % (k.encode(), t)
        if k == "rwt0":
            self.pending = ("reserve", c)
            return b"reserve-with-timeout 0\r\n"
        if k == "reserve-job":
            self.pending = ("reserve", c)
            return b"reserve-job %s\r\n" % self.job()
        if k in ("delete", "bury", "release", "touch"):
            j = self.job(c)
            self.pending = (k, c, j)
            if k == "release":
                return b"release %s %d %d\r\n" % (j, self.pri(), r.choice(DELAYS))
            if k == "bury":
                return b"bury %s %d\r\n" % (j, self.pri())
            return b"%s %s\r\n" % (k.encode(), j)
        if k in ("peek", "kick-job", "stats-job"):
            return b"%s %s\r\n" % (k.encode(), self.job())
        if k == "kick":
            return b"kick %d\r\n" % r.choice([0, 1, 1, 2, 3, 10, 1000, U32MAX])
        if k == "stats-tube":
            return b"stats-tube %s\r\n" % self.tube()
        if k == "pause-tube":
            return b"pause-tube %s %d\r\n" % (self.tube(), r.choice([0, 0, 1000, 100000,
                                                                     U32MAX]))
        return k.encode() + b"\r\n"

    def invalid(self, c):
        r = self.rng
        k = r.randrange(16)
        j = self.job(c)
        if k == 0:
            return r.choice([b"", b"foo", b"STATS", b"Put 0 0 1 1", b"reserve-job",
                             b"peek", b"kick", b"delete", b"touch", b"kick-job", b"use",
                             b"watch", b"ignore", b" stats", b"stats-jobs 1", b"\xff",
                             b"list", b"reserve-withtimeout 0", b"bury", b"release",
                             b"pause", b"put"]) + b"\r\n"
        if k == 1:      # no-argument commands with something after them
            return r.choice([b"stats", b"reserve", b"list-tubes", b"list-tube-used",
                             b"list-tubes-watched", b"peek-ready", b"peek-delayed",
                             b"peek-buried"]) + r.choice([b" ", b"x", b" x", b"\x00"]) + b"\r\n"
        if k == 2:      # bad tube names
            return b"%s %s\r\n" % (r.choice([b"use", b"watch", b"ignore", b"stats-tube"]),
                                   self.bad_tube())
        if k == 3:
            return b"pause-tube %s %d\r\n" % (self.bad_tube(), r.randint(0, 10))
        if k == 4:
            return b"pause-tube %s %s\r\n" % (self.tube(), self.bad_number())
        if k == 5:      # bad job ids
            return b"%s %s\r\n" % (r.choice([b"delete", b"touch", b"peek", b"kick-job",
                                             b"stats-job", b"reserve-job"]),
                                   self.bad_number())
        if k == 6:
            args = [j, b"%d" % self.pri(), b"0"]
            args[r.randrange(3)] = self.bad_number()
            return b"release " + b" ".join(args) + b"\r\n"
        if k == 7:
            args = [j, b"%d" % self.pri()]
            args[r.randrange(2)] = self.bad_number()
            return b"bury " + b" ".join(args) + b"\r\n"
        if k == 8:      # put with a bad line (no body follows)
            args = [b"%d" % self.pri(), b"0", b"60", b"%d" % r.randint(0, 9)]
            choice = r.randrange(4)
            if choice == 0:     # (no space inside: `1 ` would make a valid put)
                args[r.randrange(4)] = r.choice([b"-1", b"+1", b"1x", b"x", b"0x10",
                                                 b"18446744073709551616", b"1.5"])
            elif choice == 1:
                args.pop(r.randrange(4))
            elif choice == 2:
                args.append(b"1")
            else:
                args[r.randrange(3)] = b"4294967296"
            return b"put " + b" ".join(args) + b"\r\n"
        if k == 9:      # body not followed by \r\n: exactly bytes+2 consumed
            body = self.body()[:300]
            return b"put %d 0 60 %d\r\n%s%s" % (self.pri(), len(body), body,
                                                r.choice([b"XY", b"\n\r", b"\r\r", b"ab"]))
        if k == 10:     # too big
            n = r.choice([65536, 65537, 70000])
            return b"put 0 0 60 %d\r\n%s\r\n" % (n, b"z" * n)
        if k == 11:     # long line; length != 1 (mod 224) (a 1.12 defect)
            n = r.choice([224, 226, 230, 300, 446, 500, 1000, 3000])
            return r.choice([b"stats", b"use ", b"put ", b"x"]).ljust(n - 2, b"y") + b"\r\n"
        if k == 12:     # NUL inside
            return r.choice([b"stats\x00", b"use a\x00", b"\x00", b"peek 1\x00",
                             b"list-tubes\x00x"]) + b"\r\n"
        if k == 13:     # extra / missing arguments
            return r.choice([b"delete %s 1" % j, b"touch %s 1" % j, b"peek %s x" % j,
                             b"release %s 1" % j, b"bury %s" % j, b"release %s" % j,
                             b"stats-job %s 1" % j, b"kick-job %s 0" % j,
                             b"reserve-job %s 1" % j, b"use a b", b"watch a b",
                             b"pause-tube a", b"pause-tube a 1 1"]) + b"\r\n"
        if k == 14:     # several spaces before a number (accepted by 1.12)
            return r.choice([b"peek  %s" % j, b"stats-job  %s" % j, b"kick  1",
                             b"pause-tube default  0", b"kick-job  %s" % j]) + b"\r\n"
        return r.choice([b"stats-tube", b"stats-job", b"pause-tube", b"reserve-job",
                         b"peek ", b"delete ", b"use ", b"kick "]) + b"\r\n"

    # -- following the reference -------------------------------------------

    def _collect_after(self):
        """The step being made may serve parked reserves: look next."""
        if self.parked:
            self.queue.append(Step("collect", arg=sorted(self.parked)))

    def observe(self, step, ref_replies):
        if step.kind == "park":
            if step.outcome == "parked":
                self.parked.add(step.conn)
            else:
                self._observe(("reserve", step.conn), ref_replies[0])
            return
        if step.kind == "collect":
            for c, reply in step.outcome.items():
                self.parked.discard(c)
                self._observe(("reserve", c), reply)
            return
        for p, reply in zip(self.pendings, ref_replies):
            if p:
                self._observe(p, reply)

    def _observe(self, p, reply):
        if p[0] == "gone":
            self.reserved[p[1]] = []
        elif p[0] == "reserve":
            m = re.match(rb"RESERVED #(\d+) ", reply)
            if m:
                self.reserved[p[1]].append(int(m.group(1)) - 1)
        elif p[0] in ("delete", "release", "bury"):
            m = re.fullmatch(rb"\{j(\d+)\}", p[2])
            if m and reply in (b"DELETED\r\n", b"RELEASED\r\n", b"BURIED\r\n"):
                k = int(m.group(1))
                if k in self.reserved[p[1]]:
                    self.reserved[p[1]].remove(k)

    def finish(self):
        """Steps after the random part: a look at the whole state."""
        steps = [close(c) for c in sorted(self.parked)]   # TIMED_OUT, gone
        for c in self.conns:
            steps.append(cmd(c, b"list-tubes-watched\r\n"))
            steps.append(cmd(c, b"list-tube-used\r\n"))
        steps.append(cmd("c0", b"stats\r\n"))
        steps.append(cmd("c0", b"list-tubes\r\n"))
        for t in self.tubes:
            steps.append(cmd("c0", b"stats-tube %s\r\n" % t))
        for k in range(self.njobs()):
            steps.append(cmd("c0", b"stats-job {j%d}\r\n" % k))
        return steps


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=False, help="server under test (e.g. build/tubed)")
    ap.add_argument("--ref", default=REF_BIN, help="reference beanstalkd")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--steps", type=int, default=2500, help="steps per random stream")
    ap.add_argument("--streams", type=int, default=4, help="random streams")
    ap.add_argument("--only", action="append", default=[],
                    help="run only streams whose name contains this (repeatable)")
    ap.add_argument("--no-scenarios", action="store_true")
    ap.add_argument("--no-random", action="store_true")
    ap.add_argument("--blocking", action="store_true",
                    help="every random stream also parks reserves that wait for a job")
    ap.add_argument("--blocking-streams", type=int, default=2,
                    help="random streams with parked reserves after the others "
                         "(seeds follow theirs; none with --blocking)")
    ap.add_argument("--max-diffs", type=int, default=8,
                    help="stop a stream after this many differences")
    ap.add_argument("--test-dialect", choices=["auto", "1.12", "1.13"], default="auto")
    ap.add_argument("--sort-lists", action="store_true",
                    help="compare list-tubes/list-tubes-watched ignoring order "
                         "(to look past a known ordering difference)")
    ap.add_argument("--list", action="store_true", help="list scenario names")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    if args.list:
        for name, _ in SCENARIOS:
            print(name)
        return 0
    if not args.bin:
        ap.error("--bin is required")
    for path in (args.bin, args.ref):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            print("differential: %s is not an executable file" % path)
            print("differential: 0 passed, 1 failed")
            return 2
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    global SORT_LISTS
    SORT_LISTS = args.sort_lists
    args.ref_dialect = detect_dialect(args.ref)
    if args.test_dialect == "auto":
        args.test_dialect = detect_dialect(args.bin)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    print("differential: reference %s (%s), tested %s (%s)" % (
        args.ref, args.ref_dialect, args.bin, args.test_dialect))
    print("seed: %d (rerun with --seed %d)" % (args.seed, args.seed))
    sys.stdout.flush()

    def wanted(name):
        return not args.only or any(s in name for s in args.only)

    started = time.monotonic()
    passed = failed = 0
    if not args.no_scenarios:
        for name, fn in SCENARIOS:
            if not wanted(name):
                continue
            ok = run_stream(name, fn(), args, server_args=getattr(fn, "server_args", ()))
            passed, failed = passed + ok, failed + (not ok)
            sys.stdout.flush()
    if not args.no_random:
        for i in range(args.streams):
            name = "random-%d" % i
            if not wanted(name):
                continue
            seed = args.seed + i
            ok = run_stream("%s(seed %d)" % (name, seed), [], args,
                            make_steps=lambda ref, s=seed: RandomStream(s, ref, args.blocking))
            passed, failed = passed + ok, failed + (not ok)
            sys.stdout.flush()
        for i in range(0 if args.blocking else args.blocking_streams):
            name = "random-blocking-%d" % i
            if not wanted(name):
                continue
            seed = args.seed + args.streams + i
            ok = run_stream("%s(seed %d)" % (name, seed), [], args,
                            make_steps=lambda ref, s=seed: RandomStream(s, ref, True))
            passed, failed = passed + ok, failed + (not ok)
            sys.stdout.flush()
    print("time: %.1f s" % (time.monotonic() - started))
    print("differential: %d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
