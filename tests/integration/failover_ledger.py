"""The ledger of the fault test (test_failover_faults.py).  Not a test file.

Clients write down every reply with the time they read it and the node
they were talking to.  check() holds a server's jobs (a view: {id: body})
to the ledger and returns the problems, [] when none:

- an acknowledged job (INSERTED received) whose deletion no client was
  told of is there, with its body ("lost", "body");
- no job whose DELETED a client received is there ("came back");
- no job is there whose body no client sent ("never sent");
- a node cut off (by a pause, a cut, or a newer primary) acknowledged
  nothing after the moment it was cut off, plus a grace for replies
  already on the wire ("after the cut");
- exactly one node takes writes once the cluster is settled ("takers").

The checker is pure (data in, problems out), so the test plants faults in
copies of the data (drop an acknowledged job from the view, fake an ack,
fake a late ack, fake a delete, a second taker) and asserts each is
reported: see plant_and_check().

Link is a TCP relay the test puts between a replica and its primary; cut()
stops it forwarding in both directions without closing anything, as a
partition does (neither side sees a close), and close() ends it.
"""

import random
import re
import socket
import threading
import time

import harness
from harness import TestFailure

GRACE = 0.5   # seconds for replies already on the wire at a cut
LIVE_CAP = 3000


class Ledger:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}         # id -> (body, node, time)
        self.deleted = {}       # id -> (node, time)
        self.deleting = set()   # delete sent, reply or not
        self.sent = set()       # every body sent in a put
        self.seq = 0

    def body(self, rnd):
        with self.lock:
            self.seq += 1
            n = self.seq
        return b"<f-%d>" % n + bytes(rnd.randrange(97, 123) for _ in range(rnd.randint(0, 200)))

    def copy(self):
        l = Ledger()
        with self.lock:
            l.acked = dict(self.acked)
            l.deleted = dict(self.deleted)
            l.deleting = set(self.deleting)
            l.sent = set(self.sent)
            l.seq = self.seq
        return l


def check(view, ledger, cutoffs=(), takers=None):
    """Problems of view ({id: body}) against the ledger.  cutoffs: (node,
    time) pairs, a node cut off at that time.  takers: the nodes that took
    a write once settled (None: not checked)."""
    problems = []
    for j, (body, _, _) in sorted(ledger.acked.items()):
        if j in ledger.deleted:
            continue
        got = view.get(j)
        if got is None:
            if j not in ledger.deleting:    # a delete whose reply was cut off
                problems.append("job %d (INSERTED, never DELETED) is lost" % j)
        elif got != body:
            problems.append("job %d: body %r..., acknowledged with %r..."
                            % (j, got[:16], body[:16]))
    for j in sorted(ledger.deleted):
        if j in view:
            problems.append("job %d came back after its DELETED" % j)
    for j, body in sorted(view.items()):
        if body not in ledger.sent:
            problems.append("job %d holds a body never sent: %r" % (j, body[:20]))
    for node, t in cutoffs:
        for j, (_, n, at) in ledger.acked.items():
            if n == node and at > t + GRACE:
                problems.append("job %d INSERTED by %s %.2fs after the cut"
                                % (j, node, at - t))
        for j, (n, at) in ledger.deleted.items():
            if n == node and at > t + GRACE:
                problems.append("job %d DELETED by %s %.2fs after the cut"
                                % (j, node, at - t))
    if takers is not None and len(takers) != 1:
        problems.append("%d nodes take writes once settled: %s"
                        % (len(takers), sorted(takers)))
    return problems


def plant_and_check(view, ledger, cutoffs, takers, rnd, caught):
    """Plant each fault in a copy; the checker must report it."""
    live = [j for j in view if j in ledger.acked and j not in ledger.deleted
            and j not in ledger.deleting]
    plants = []
    if live:
        j = rnd.choice(sorted(live))
        v = dict(view)
        del v[j]
        plants.append(("an acknowledged job dropped from the view", v, ledger,
                       cutoffs, takers, "job %d (INSERTED" % j))
        l = ledger.copy()
        l.deleted[j] = ("planted", 0.0)
        plants.append(("a faked DELETED", view, l, cutoffs, takers,
                       "job %d came back" % j))
    l = ledger.copy()
    fake = max(list(view) + list(ledger.acked) + [0]) + 7
    l.acked[fake] = (b"<never>", "planted", 0.0)
    plants.append(("a faked INSERTED", view, l, cutoffs, takers, "job %d (INSERTED" % fake))
    l = ledger.copy()
    l.acked[fake] = (b"<late>", "stale", 100.0)
    plants.append(("an ack after the cut", view, l, list(cutoffs) + [("stale", 10.0)],
                   takers, "INSERTED by stale"))
    plants.append(("two nodes taking writes", view, ledger, cutoffs,
                   set(takers or ()) | {"planted"}, "nodes take writes"))
    v = dict(view)
    v[fake + 1] = b"<never sent>"
    plants.append(("a job no client sent", v, ledger, cutoffs, takers, "never sent"))
    for what, v, l, cuts, tk, needle in plants:
        got = check(v, l, cuts, tk)
        if not any(needle in p for p in got):
            raise TestFailure("the ledger checker missed %s (%r): it reported %s"
                              % (what, needle, got[:5]))
        caught[what] = caught.get(what, 0) + 1


# ------------------------------------------------------------------ clients

class Clients:
    """Producers and a worker on one node, writing to the ledger.  stop()
    shuts their sockets down (a held reply would keep them waiting)."""

    def __init__(self, node, ledger, rnd, producers=2, worker=True):
        self.node = node
        self.ledger = ledger
        self.stopping = threading.Event()
        self.errors = []
        self.socks = []
        self.threads = []
        fns = [self._producer] * producers + ([self._worker] if worker else [])
        for fn in fns:
            c = node.bs(timeout=60)
            self.socks.append(c)
            t = threading.Thread(target=fn, args=(c, rnd.random()), daemon=True)
            self.threads.append(t)
        for t in self.threads:
            t.start()

    def _producer(self, c, seed):
        rnd = random.Random(seed)
        L = self.ledger
        try:
            c.use("F")
            while not self.stopping.is_set():
                # A steady size over many rounds: the checks read every job.
                if len(L.acked) - len(L.deleted) > LIVE_CAP:
                    time.sleep(0.05)
                    continue
                bodies = [L.body(rnd) for _ in range(rnd.randint(1, 6))]
                with L.lock:
                    L.sent.update(bodies)
                c.send(b"".join(b"put %d 0 120 %d\r\n%s\r\n" % (rnd.randint(0, 9), len(b), b)
                                for b in bodies))
                for b in bodies:
                    line = c.read_line()
                    m = re.fullmatch(rb"INSERTED (\d+)", line)
                    if not m:
                        if line != b"DRAINING":
                            self.errors.append("put answered %r" % line)
                        return
                    with L.lock:
                        L.acked[int(m.group(1))] = (b, self.node.name, time.monotonic())
        except (TestFailure, OSError):
            return

    def _worker(self, c, seed):
        rnd = random.Random(seed)
        L = self.ledger
        try:
            c.watch("F")
            c.ignore("default")
            while not self.stopping.is_set():
                line, _ = c.cmd_body("reserve-with-timeout 1")
                if line == b"TIMED_OUT":
                    continue
                m = re.fullmatch(rb"RESERVED (\d+) \d+", line)
                if not m:
                    if line != b"DRAINING":
                        self.errors.append("reserve answered %r" % line)
                    return
                jid = int(m.group(1))
                if rnd.random() < 0.3:
                    continue            # keep it reserved: ready after a failover
                with L.lock:
                    L.deleting.add(jid)
                line = c.cmd("delete %d" % jid)
                if line != b"DELETED":
                    if line not in (b"DRAINING", b"NOT_FOUND"):
                        self.errors.append("delete %d answered %r" % (jid, line))
                    return
                with L.lock:
                    L.deleted[jid] = (self.node.name, time.monotonic())
        except (TestFailure, OSError):
            return

    def stop(self):
        self.stopping.set()
        for c in self.socks:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(30)
            if t.is_alive():
                raise TestFailure("a client thread on %s did not end" % self.node.name)
        for c in self.socks:
            c.close()


# ------------------------------------------------------------------ link

class Link:
    """A relay on a free 127.0.0.1 port to upstream_port; rate (bytes a
    second) slows the upstream-to-client direction; cut() silences it."""

    def __init__(self, upstream_port, rate=None):
        self.upstream_port = upstream_port
        self.rate = rate
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind((harness.HOST, 0))
        self.lsock.listen(8)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]
        self.addr = "%s:%d" % (harness.HOST, self.port)
        self.open = threading.Event()
        self.open.set()
        self.closed = False
        self.socks = []
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._accept, daemon=True)
        self.t.start()

    def _accept(self):
        while not self.closed:
            try:
                down, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                up = socket.create_connection((harness.HOST, self.upstream_port), timeout=5)
            except OSError:
                down.close()
                continue
            with self.lock:
                self.socks += [up, down]
            for a, b, slow in ((up, down, True), (down, up, False)):
                threading.Thread(target=self._pump, args=(a, b, slow), daemon=True).start()

    def _pump(self, src, dst, slow):
        src.settimeout(None)
        try:
            while True:
                data = src.recv(16384)
                if not data:
                    break
                # A cut holds the bytes: nothing passes, nothing closes.
                while not self.open.wait(0.2):
                    if self.closed:
                        return
                if self.closed:
                    return
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

    def cut(self):
        self.open.clear()

    def close(self):
        self.closed = True
        self.open.set()
        try:
            self.lsock.close()
        except OSError:
            pass
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass
