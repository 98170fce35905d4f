"""Soak: a bounded mixed load of producers and workers with random
disconnects and, with a binlog (-b DIR -f 0), random kill -9 and restarts.

At the end, every job whose put was acknowledged (INSERTED or BURIED) has
been delivered at least once with the body it was put with, nothing is
left in the server, no job held by a worker that went silent stays
reserved past its TTR, and (with the binlog) no job whose delete was
acknowledged comes back after a restart.

SOAK_SECONDS (default 60) is the time of the whole file: each of the two
tests loads the server for about half of it, then drains.
"""

import os
import random
import shutil
import signal
import tempfile
import threading
import time

import harness
from harness import HOST, Client, TestFailure, check, fail, no_server, slow, tubed_only

SOAK = float(os.environ.get("SOAK_SECONDS", "60"))
TUBES = ["default"] + ["soak-%d" % i for i in range(12)]
N_PRODUCERS = 4
N_WORKERS = 6
CONN_ERRORS = (OSError, TestFailure, ValueError)


class Soak:
    """Shared state of one soak run."""

    def __init__(self, binary, args, seed):
        self.binary = binary
        self.args = list(args)
        self.lock = threading.Lock()
        self.rnd = random.Random(seed)
        self.port = None
        self.gen = 0                 # bumped at every restart
        self.servers = []
        self.problems = []
        self.stop_producing = threading.Event()
        self.stop_chaos = threading.Event()   # workers stop misbehaving
        self.stop_all = threading.Event()
        self.attempted = {}          # uuid -> body
        self.acked = {}              # uuid -> job id
        self.acked_gen = {}          # uuid -> generation of its INSERTED
        self.logs = []               # warnings and errors of every server
        self.delivered = {}          # uuid -> count
        self.deleted = {}            # uuid -> generation of the DELETED reply
        self.resurrected = []
        self.errors = []
        self.ttr_checks = 0
        self.restarts = 0
        self.counts = {"put": 0, "reserve": 0, "delete": 0, "release": 0,
                       "bury": 0, "forget": 0, "drop": 0, "kick": 0}

    # -- server --------------------------------------------------------
    def start(self):
        srv = None
        for attempt in range(5):
            srv = harness.Server(self.binary, self.args, port=self.port)
            try:
                srv.start()
                break
            except harness.ServerError as e:
                srv = None
                if attempt == 4:
                    raise
                if self.port and attempt >= 2:
                    self.port = None      # the port was taken: go elsewhere
                time.sleep(0.2)
        with self.lock:
            self.servers.append(srv)
            self.port = srv.port
            self.gen += 1
        # The listening socket is open before the binlog is replayed, so
        # "accepting" is not "up": wait for a real reply.
        deadline = time.monotonic() + 20
        while True:
            try:
                c = Client(HOST, srv.port, timeout=2.0)
                try:
                    c.expect("list-tube-used", "USING default")
                    break
                finally:
                    c.close()
            except CONN_ERRORS:
                pass
            if not srv.alive() or time.monotonic() > deadline:
                text = srv.stderr_text()
                m = [l for l in text.splitlines() if "ERROR" in l or "SUMMARY" in l
                     or "runtime error" in l or "error:" in l]
                fail("the server did not come back after restart %d (%s): %s"
                     % (self.gen - 1, "exited %r" % srv.proc.poll() if not srv.alive()
                        else "no reply", " / ".join(m[:4]) or text[-600:]))
            time.sleep(0.05)
        return srv

    def current(self):
        return self.servers[-1]

    def kill_and_restart(self):
        srv = self.current()
        srv.signal(signal.SIGKILL)
        try:
            srv.proc.wait(10)
        except Exception:
            pass
        self.keep_log(srv)
        self.problems.extend(srv.stop())
        self.start()
        self.restarts += 1

    def keep_log(self, srv):
        for line in srv.stderr_text().splitlines():
            if ": warning: " in line or ": error: " in line:
                self.logs.append("[server %d] %s" % (self.servers.index(srv) + 1, line))

    def connect(self, timeout=3.0):
        deadline = time.monotonic() + 15
        while True:
            with self.lock:
                port, gen = self.port, self.gen
            try:
                c = Client(HOST, port, timeout=timeout)
                return c, gen
            except OSError:
                if time.monotonic() > deadline or self.stop_all.is_set():
                    raise
                time.sleep(0.05)

    # -- bookkeeping ---------------------------------------------------
    def error(self, msg):
        with self.lock:
            if len(self.errors) < 20:
                self.errors.append(msg)

    def count(self, what):
        with self.lock:
            self.counts[what] += 1


def make_body(rnd, uuid):
    filler = bytes(rnd.choice(b"abcdefghij\r\n\0\xff") for _ in range(rnd.randint(0, 400)))
    return b"soak:" + uuid.encode() + b":" + filler


def uuid_of(body):
    parts = body.split(b":", 2)
    if len(parts) < 3 or parts[0] != b"soak":
        return None
    return parts[1].decode("ascii", "replace")


# ------------------------------------------------------------------ clients

def producer(st, idx):
    rnd = random.Random(1000 + idx)
    n = 0
    while not st.stop_producing.is_set():
        try:
            c, gen = st.connect()
        except OSError:
            continue
        try:
            tube = rnd.choice(TUBES)
            if tube != "default":
                c.use(tube)
            for _ in range(rnd.randint(1, 60)):
                if st.stop_producing.is_set():
                    break
                uuid = "p%d-%d" % (idx, n)
                n += 1
                body = make_body(rnd, uuid)
                with st.lock:
                    st.attempted[uuid] = body
                pri = rnd.choice([0, 5, 5, 5, 100])
                delay = 1 if rnd.random() < 0.08 else 0
                ttr = rnd.choice([2, 3])
                head = b"put %d %d %d %d\r\n" % (pri, delay, ttr, len(body))
                if rnd.random() < 0.02:        # drop mid-put
                    c.send(head + body[: len(body) // 2])
                    st.count("drop")
                    break
                c.send(head + body + b"\r\n")
                line = c.read_line()
                parts = line.split()
                if len(parts) == 2 and parts[0] in (b"INSERTED", b"BURIED"):
                    with st.lock:
                        st.acked[uuid] = int(parts[1])
                        st.acked_gen[uuid] = gen
                    st.count("put")
                elif line not in (b"OUT_OF_MEMORY", b"DRAINING"):
                    st.error("put: unexpected reply %r" % line)
            if rnd.random() < 0.3:
                c.send(b"quit\r\n")
        except CONN_ERRORS:
            pass          # the server went away or we dropped it: unknown fate
        finally:
            c.close()


def worker(st, idx):
    rnd = random.Random(2000 + idx)
    while not st.stop_all.is_set():
        try:
            c, gen = st.connect()
        except OSError:
            continue
        forgotten = []     # (due, job id, timeouts before)
        try:
            for t in TUBES:
                if t != "default":
                    c.watch(t)
            while not st.stop_all.is_set():
                now = time.monotonic()
                for f in [f for f in forgotten if f[0] <= now]:
                    forgotten.remove(f)
                    check_ttr(st, c, f)
                c.send(b"reserve-with-timeout 1\r\n")
                line, body = c.read_reply()
                if line in (b"TIMED_OUT",):
                    continue
                if line == b"DEADLINE_SOON":
                    time.sleep(0.2)
                    continue
                parts = line.split()
                if len(parts) != 3 or parts[0] != b"RESERVED":
                    st.error("reserve: unexpected reply %r" % line)
                    break
                jid = int(parts[1])
                st.count("reserve")
                uuid = uuid_of(body)
                with st.lock:
                    want = st.attempted.get(uuid)
                    if want is None:
                        st.errors.append("job %d: body %r was never put" % (jid, body[:60]))
                    elif want != body:
                        st.errors.append("job %d (%s): body differs from what was put"
                                         % (jid, uuid))
                    st.delivered[uuid] = st.delivered.get(uuid, 0) + 1
                    dgen = st.deleted.get(uuid)
                    if dgen is not None and dgen < gen:
                        st.resurrected.append((uuid, jid, dgen, gen))
                chaos = not st.stop_chaos.is_set()
                r = rnd.random() if chaos else 0.0
                if r < 0.75:
                    if rnd.random() < 0.05:
                        c.expect("touch %d" % jid, "TOUCHED")
                    reply = c.cmd("delete %d" % jid)
                    if reply == b"DELETED":
                        with st.lock:
                            st.deleted[uuid] = gen
                        st.count("delete")
                    elif reply != b"NOT_FOUND":
                        st.error("delete: unexpected reply %r" % reply)
                elif r < 0.83:
                    reply = c.cmd("release %d %d %d" % (jid, rnd.choice([0, 5]),
                                                       rnd.choice([0, 0, 1])))
                    if reply not in (b"RELEASED", b"BURIED", b"NOT_FOUND"):
                        st.error("release: unexpected reply %r" % reply)
                    st.count("release")
                elif r < 0.87:
                    reply = c.cmd("bury %d 3" % jid)
                    if reply not in (b"BURIED", b"NOT_FOUND"):
                        st.error("bury: unexpected reply %r" % reply)
                    st.count("bury")
                elif r < 0.92:
                    st.count("drop")   # vanish holding the job
                    break
                else:
                    # Go silent on it: its TTR must give it back.
                    sj = harness.parse_yaml_dict(c.cmd_body("stats-job %d" % jid)[1] or b"---\n")
                    ttr = int(sj.get("ttr", "3"))
                    forgotten.append((time.monotonic() + ttr + 1.5, jid,
                                      int(sj.get("timeouts", "0"))))
                    st.count("forget")
        except CONN_ERRORS:
            pass
        finally:
            c.close()


def check_ttr(st, c, f):
    """A job this connection reserved and then ignored: past its TTR it
    must have timed out (or be gone)."""
    _, jid, timeouts0 = f
    line, body = c.cmd_body("stats-job %d" % jid)
    if line == b"NOT_FOUND":
        return
    sj = harness.parse_yaml_dict(body)
    with st.lock:
        st.ttr_checks += 1
    if int(sj["timeouts"]) <= timeouts0:
        st.error("job %d still reserved %.1fs past its TTR of %ss (state %s, "
                 "timeouts %s)" % (jid, 1.5, sj["ttr"], sj["state"], sj["timeouts"]))


def kicker(st):
    while not st.stop_all.is_set():
        try:
            c, _ = st.connect()
        except OSError:
            continue
        try:
            while not st.stop_all.is_set():
                for t in TUBES:
                    c.use(t)
                    line = c.cmd("kick 1000")
                    if not line.startswith(b"KICKED"):
                        st.error("kick: %r" % line)
                    st.count("kick")
                time.sleep(0.3)
        except CONN_ERRORS:
            pass
        finally:
            c.close()


def server_jobs(st):
    c, _ = st.connect()
    try:
        s = c.stats()
    finally:
        c.close()
    return {k: int(s["current-jobs-" + k]) for k in ("ready", "reserved", "delayed", "buried")}


# -------------------------------------------------------------------- run

def run_soak(binary, args, seconds, kills, keep_dir=None):
    st = Soak(binary, args, seed=int(seconds * 1000) ^ (7 if kills else 3))
    st.start()
    threads = [threading.Thread(target=producer, args=(st, i), daemon=True)
               for i in range(N_PRODUCERS)]
    threads += [threading.Thread(target=worker, args=(st, i), daemon=True)
                for i in range(N_WORKERS)]
    threads.append(threading.Thread(target=kicker, args=(st,), daemon=True))
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + seconds
        rnd = random.Random(99)
        while time.monotonic() < end:
            time.sleep(min(end - time.monotonic(), rnd.uniform(1.5, 4.0)) if kills else 0.2)
            if kills and time.monotonic() < end - 1:
                st.kill_and_restart()
        # Drain: no new jobs, no misbehaving, every acknowledged job out.
        st.stop_producing.set()
        st.stop_chaos.set()
        for t in threads[:N_PRODUCERS]:
            t.join(15)
        deadline = time.monotonic() + 30
        left = None
        while time.monotonic() < deadline:
            with st.lock:
                missing = [u for u in st.acked if u not in st.delivered]
            left = server_jobs(st)
            if not missing and not any(left.values()):
                break
            time.sleep(0.3)
    finally:
        st.stop_all.set()
        for t in threads:
            t.join(10)
        for srv in st.servers:
            st.keep_log(srv)
            st.problems.extend(srv.stop())

    with st.lock:
        missing = sorted(u for u in st.acked if u not in st.delivered)
    report = ("%d acked puts, %d deliveries, %d deletes, %d restarts, counts %r"
              % (len(st.acked), sum(st.delivered.values()), len(st.deleted),
                 st.restarts, st.counts))
    if os.environ.get("SOAK_VERBOSE"):
        print(report)
    msgs = []
    if st.problems:
        msgs.append("server problems: " + "; ".join(st.problems))
    if st.errors:
        msgs.append("errors: " + "; ".join(st.errors[:10]))
    if missing:
        msgs.append("%d acknowledged jobs never delivered, e.g. %s" % (
            len(missing), ", ".join("%s (id %d, acknowledged by server %d)"
                                    % (u, st.acked[u], st.acked_gen[u]) for u in missing[:8])))
        if st.logs:
            msgs.append("server warnings: " + " / ".join(st.logs[:12]))
    if st.resurrected:
        msgs.append("%d jobs came back after an acknowledged delete and a restart, "
                    "e.g. %r" % (len(st.resurrected), st.resurrected[:5]))
    if left and any(left.values()):
        msgs.append("jobs left in the server after the drain: %r" % left)
    if len(st.acked) < 50 or st.counts["reserve"] < 50:
        msgs.append("too little load to mean anything (%s)" % report)
    if msgs:
        if keep_dir:
            keep_dir.append(True)   # the caller keeps the binlog for a look
        fail(" | ".join(msgs) + " [" + report + "]")


@slow
@no_server
def test_soak_disconnects(binary):
    run_soak(binary, [], max(5.0, SOAK / 2 - 8), kills=False)


@slow
@no_server
@tubed_only("tubed's binlog (-b DIR -f 0)")
def test_soak_binlog_kill9_restarts(binary):
    d = tempfile.mkdtemp(prefix="tubed-soak-")
    failed = []
    try:
        run_soak(binary, ["-b", d, "-f", "0", "-s", "200000"], max(6.0, SOAK / 2 - 8),
                 kills=True, keep_dir=failed)
    except TestFailure as e:
        if failed:
            raise TestFailure("%s (binlog kept in %s)" % (e, d))
        raise
    finally:
        if not failed:
            shutil.rmtree(d, ignore_errors=True)
