"""Soak, both protocols, policies in force, kill -9: a mixed load on the
beanstalk and memcache ports of one tubed (-b DIR -f 0, --config FILE) is
killed with SIGKILL at random moments and restarted, round after round,
and after every restart the server's whole content is checked against a
precise ledger of what every client was told.

Tubes (CONF; every tube keeps at most 3 KiB of bodies in memory, the
rest only in the binlog: read-behind): p0, p1 plain; lim (max_items with discard_old_when_full);
exp (max_age, move_expired_to dlq) and dlq; fan (fanout) with children
fan+a and fan+b; fl, which only producers and flush-tube touch.

Load: beanstalk producers (put), beanstalk workers (reserve, then delete,
release, bury, touch, or hold until they quit), memcache producers (set,
some with noreply confirmed by a later reply), memcache consumers (get,
get/open + get/close, get/close/open, get/open + get/abort, get/open then
a disconnect, monitor + confirm, get/peek), and an operator (move-job
between p0, p1, lim, exp and dlq, flush-tube fl, kick).

Every body is unique and names itself ("mix:<uid>:..."); a job is keyed
by its uid and, for a fanout copy, the child it was copied into. After a
restart, for every job ever attempted:

- acknowledged (INSERTED, BURIED, STORED, a reply after a noreply set) or
  handed to a client, and not consumed: back exactly once, body intact,
  in a tube it may be in, never reserved; a job held reserved or open at
  the kill, with no command about it in flight, is back ready;
- consumed (DELETED, the VALUE of a plain get, END of get/close or
  confirm, covered by an acknowledged flush-tube): never back, here or in
  any later round; a job handed to a client again after that is an error
  at once;
- uncertain: a command in flight at the kill (put, set, delete, close,
  confirm, move, flush), a plain get in flight (it may have taken any one
  job of its tube: one miss of that tube is allowed per such get), a job
  in lim that a later entry into lim may have discarded: present at most
  once, and whatever the restart shows is then final;
- expiry: a job of exp is in exp or (expired) in dlq; if it entered exp
  more than max_age + SLACK_HI before it is seen it must be in dlq, and
  it may only be in dlq if max_age - SLACK_LO has passed since it entered.

A live job count in lim never exceeds max_items; flush-tube's count lies
between the jobs it surely removed and those it may have.

SOAK_MIXED_ROUNDS (or ROUNDS; default 6) kills per run; SOAK_MIXED_SEED
picks the randomness. The test prints one line: rounds, jobs checked.
"""

import bisect
import collections
import os
import random
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "mc_clients"))

import harness  # noqa: E402
from harness import HOST, Client, TestFailure, fail, no_server, slow, tubed_only  # noqa: E402
from mcproto import Mc, McServer  # noqa: E402

ROUNDS = int(os.environ.get("SOAK_MIXED_ROUNDS", os.environ.get("ROUNDS", "6")))
SEED = int(os.environ.get("SOAK_MIXED_SEED", "0")) or int(time.time())
MAX_AGE = 2.0
SLACK_LO = 0.5      # expiry is never earlier than max_age minus this
SLACK_HI = 5.0      # ... and done by max_age plus this (ASan, loaded machine)
LIM_MAX = 12
# Read-behind everywhere: a small top-level max_memory_size spills every
# tube past its first few KiB of bodies, so kills land during spills,
# read-backs and drains, and the checks below cover spilled jobs too.
CONF = """\
max_memory_size = 3K
[tube lim]
max_items = %d
discard_old_when_full = true
[tube exp]
max_age = %dms
move_expired_to = dlq
[tube fan]
fanout = true
""" % (LIM_MAX, int(MAX_AGE * 1000))

PLAIN = ["p0", "p1"]
CHILDREN = ["fan+a", "fan+b"]
PUT_TUBES = PLAIN + ["lim", "exp", "fan", "fl"]
TAKE_TUBES = PLAIN + ["lim", "exp", "dlq", "fan"] + CHILDREN
MOVE_TUBES = PLAIN + ["lim", "exp", "dlq"]
KICK_TUBES = TAKE_TUBES
ERRS = (OSError, TestFailure, ValueError, IndexError)
READ_TIMEOUT = 30.0
INF = float("inf")
N_BS_PRODUCERS, N_MC_PRODUCERS, N_BS_WORKERS, N_MC_CONSUMERS = 2, 2, 2, 2
PRODUCER_PAUSE = 0.006   # producers would outrun the consumers otherwise


def tube_set(tube):
    """Where a job that enters `tube` may be found later."""
    return {tube, "dlq"} if tube == "exp" else {tube}


class Rec:
    """One job the soak tried to create."""
    __slots__ = ("key", "body", "loc", "acked", "refused", "gone", "maybe_gone",
                 "send_t", "ack_t", "exp_in", "lim_t", "lim_own", "expect_ready",
                 "vanished", "history")

    def __init__(self, key, body, tube, t):
        self.key = key
        self.body = body
        self.loc = tube_set(tube)   # tubes it may be in
        self.acked = False          # surely in the server (until consumed)
        self.refused = False        # surely never stored
        self.gone = None            # why it is surely consumed
        self.maybe_gone = False     # a consuming command had no reply
        self.send_t = t
        self.ack_t = None
        self.exp_in = (t, INF) if tube == "exp" else None   # entered exp within
        self.lim_t = t if tube == "lim" else None
        self.lim_own = tube == "lim"  # its own entry is in this round's list
        self.expect_ready = False   # held at the kill: back, and ready
        self.vanished = False       # left lim, not moved: discarded or consumed
        self.history = []

    def note(self, what):
        if len(self.history) < 12:
            self.history.append(what)


def make_body(rnd, uid):
    filler = bytes(rnd.choice(b"abcdefgh \r\n\0\xff") for _ in range(rnd.randint(0, 200)))
    return b"mix:" + uid.encode() + b":" + filler


def uid_of(body):
    parts = body.split(b":", 2)
    if len(parts) < 3 or parts[0] != b"mix":
        return None
    return parts[1].decode("ascii", "replace")


class Soak:
    def __init__(self, binary, tmpdir_server):
        self.binary = binary
        self.s = tmpdir_server           # McServer (config, binlog dir)
        self.lock = threading.Lock()
        self.recs = {}                   # (uid, copy) -> Rec
        self.lim_entries = []            # [send, end] of every entry into lim
        self.unknown_takes = collections.Counter()
        self.errors = []
        self.counts = collections.Counter()
        self.killed = threading.Event()
        self.kill_t = INF
        self.bport = self.mport = None
        self.checked = 0
        self.present = 0                 # jobs in the server at the last check
        self.round = 0                   # part of every uid
        self.lim_known = {}              # job id -> Rec, of jobs seen in lim
        self.verify_stats = collections.Counter()

    # -- bookkeeping -------------------------------------------------------
    def error(self, msg):
        with self.lock:
            self._error(msg)

    def _error(self, msg):
        if len(self.errors) < 30:
            self.errors.append(msg)

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] += n

    def new_job(self, uid, body, tube):
        """Recs for a put/set of body into tube (copies for fan), and the
        lim entry, if any. Called before the command is sent."""
        t = time.time()
        with self.lock:
            keys = [(uid, "")] + ([(uid, ch) for ch in CHILDREN] if tube == "fan" else [])
            recs = []
            for key in keys:
                r = Rec(key, body, key[1] or tube, t)
                r.note("sent to %s" % tube)
                self.recs[key] = r
                recs.append(r)
            entry = None
            if tube == "lim":
                entry = [t, INF]
                self.lim_entries.append(entry)
            return recs, entry

    def acked(self, recs, entry, how):
        t = time.time()
        with self.lock:
            for r in recs:
                r.acked = True
                r.ack_t = t
                if r.exp_in and r.exp_in[1] == INF:
                    r.exp_in = (r.exp_in[0], t)
                r.note(how)
            if entry:
                entry[1] = t

    def refused(self, recs, entry, how):
        with self.lock:
            for r in recs:
                if r.acked:
                    self._error("%s: refused (%s) but already handed out" % (r.key, how))
                r.refused = True
                r.note(how)
            if entry:
                entry[1] = time.time()

    def delivered(self, body, tube, how):
        """A job of `tube` handed to a client (reserved, taken, opened)."""
        uid = uid_of(body)
        key = (uid, tube if tube in CHILDREN else "")
        with self.lock:
            r = self.recs.get(key)
            if r is None:
                self._error("%s from %s: a job that was never put: %r" % (how, tube, body[:60]))
                return None
            if r.body != body:
                self._error("%s from %s: job %s has another body than was put"
                            % (how, tube, key))
            if r.gone:
                self._error("%s from %s: job %s handed out again after it was %s (history %r)"
                            % (how, tube, key, r.gone, r.history))
            if r.refused:
                self._error("%s: job %s handed out but its put was refused" % (how, key))
            if tube not in r.loc:
                self._error("%s: job %s came from %s, expected in %r (history %r)"
                            % (how, key, tube, sorted(r.loc), r.history))
            r.acked = True      # it exists: a reply about it was sent
            r.note(how)
            self.counts[how] += 1
            return r

    def note(self, r, what):
        with self.lock:
            r.note(what)
            self.counts[what] += 1

    def consumed(self, r, why):
        with self.lock:
            r.gone = why
            r.note(why)
            self.counts[why] += 1

    def lost(self, who, err, held, take_tube=None):
        """A connection failed. After the kill: what it had in flight is
        uncertain, what it held comes back ready. Before: an error."""
        t_err = time.monotonic()
        by_kill = self.killed.wait(15) and t_err >= self.kill_t
        with self.lock:
            if not by_kill:
                self._error("%s: connection failed while the server was up: %s" % (who, err))
            for r, op in held.items():
                if op in ("delete", "close", "confirm"):
                    r.maybe_gone = True
                    r.note("%s in flight at the kill" % op)
                elif op in (None, "touch") and by_kill:
                    # Still ours at the kill. (Not so with a release or an
                    # abort in flight: once done, before its reply, the
                    # job is free, and another client may have taken it,
                    # buried it, deleted it.)
                    r.expect_ready = True
                    r.note("held at the kill (%s)" % (op or "no command in flight"))
                else:
                    r.note("%s in flight at the kill" % op)
            if take_tube:
                self.unknown_takes[take_tube] += 1

    # -- connections ---------------------------------------------------------
    def bs(self):
        return Client(HOST, self.bport, timeout=READ_TIMEOUT)

    def mc(self):
        return Mc(HOST, self.mport, timeout=READ_TIMEOUT)


# ------------------------------------------------------------------ clients

def bs_producer(st, idx, rnd):
    n = 0
    while not st.killed.is_set():
        recs = entry = None
        try:
            c = st.bs()
        except OSError as e:
            st.lost("bs producer %d" % idx, e, {})
            return
        try:
            tube = rnd.choice(PUT_TUBES)
            c.use(tube)
            for _ in range(rnd.randint(1, 40)):
                if st.killed.is_set():
                    return
                uid = "%d.b%d.%d" % (st.round, idx, n)
                n += 1
                body = make_body(rnd, uid)
                delay = 1 if rnd.random() < 0.08 else 0
                recs, entry = st.new_job(uid, body, tube)
                c.send(b"put %d %d 60 %d\r\n%s\r\n" % (rnd.choice([0, 10, 1024, 2000]), delay,
                                                        len(body), body))
                line = c.read_line()
                parts = line.split()
                if len(parts) == 2 and parts[0] in (b"INSERTED", b"BURIED"):
                    st.acked(recs, entry, "put into %s: %s" % (tube, line.decode()))
                    st.count("put")
                elif line == b"OUT_OF_MEMORY" and tube == "lim":
                    st.refused(recs, entry, "put refused: OUT_OF_MEMORY")
                else:
                    st.error("put into %s: unexpected reply %r" % (tube, line))
                recs = entry = None
                time.sleep(rnd.uniform(0, PRODUCER_PAUSE))
            c.send(b"quit\r\n")
        except ERRS as e:
            st.lost("bs producer %d" % idx, e, {})
            return
        finally:
            c.close()


def mc_producer(st, idx, rnd):
    n = 0
    while not st.killed.is_set():
        try:
            m = st.mc()
        except OSError as e:
            st.lost("mc producer %d" % idx, e, {})
            return
        pending = []     # noreply sets not yet confirmed by a later reply
        try:
            for _ in range(rnd.randint(1, 40)):
                if st.killed.is_set():
                    return
                tube = rnd.choice(PUT_TUBES)
                uid = "%d.m%d.%d" % (st.round, idx, n)
                n += 1
                body = make_body(rnd, uid)
                recs, entry = st.new_job(uid, body, tube)
                # No noreply into lim: a refused set would be silent.
                if tube != "lim" and rnd.random() < 0.25:
                    m.send(b"set %s 0 0 %d noreply\r\n%s\r\n" % (tube.encode(), len(body), body))
                    pending.append((recs, entry, tube))
                    st.count("set noreply")
                    continue
                m.send(b"set %s 0 0 %d\r\n%s\r\n" % (tube.encode(), len(body), body))
                line = m.read_line()
                if line == b"STORED":
                    st.acked(recs, entry, "set into %s: STORED" % tube)
                    st.count("set")
                elif line == b"NOT_STORED" and tube == "lim":
                    st.refused(recs, entry, "set refused: NOT_STORED")
                else:
                    st.error("set into %s: unexpected reply %r" % (tube, line))
                # The reply comes after every earlier noreply set's.
                for p in pending:
                    st.acked(p[0], p[1], "set noreply into %s, then a reply" % p[2])
                pending = []
                time.sleep(rnd.uniform(0, PRODUCER_PAUSE))
            line = m.cmd("version")
            if not line.startswith(b"VERSION "):
                st.error("version: %r" % line)
            for p in pending:
                st.acked(p[0], p[1], "set noreply into %s, then version" % p[2])
        except ERRS as e:
            st.lost("mc producer %d" % idx, e, {})
            return
        finally:
            m.close()


def bs_worker(st, idx, rnd):
    while not st.killed.is_set():
        try:
            c = st.bs()
        except OSError as e:
            st.lost("bs worker %d" % idx, e, {})
            return
        held = {}        # rec -> op in flight (None: just held)
        ids = {}         # rec -> job id
        try:
            tube = rnd.choice(TAKE_TUBES)
            c.watch(tube)
            c.ignore("default")
            for _ in range(rnd.randint(3, 40)):
                if st.killed.is_set():
                    st.lost("bs worker %d" % idx, "stopped", held)
                    return
                c.send(b"reserve-with-timeout 1\r\n")
                line, body = c.read_reply()
                if line == b"TIMED_OUT":
                    continue
                parts = line.split()
                if len(parts) != 3 or parts[0] != b"RESERVED":
                    st.error("reserve from %s: unexpected reply %r" % (tube, line))
                    break
                jid = int(parts[1])
                r = st.delivered(body, tube, "reserved")
                if r is None:
                    continue
                held[r] = None
                ids[r] = jid
                x = rnd.random()
                if x < 0.5 or (x >= 0.9 and len(held) > 3):
                    held[r] = "delete"
                    reply = c.cmd("delete %d" % jid)
                    if reply != b"DELETED":
                        st.error("delete %d: %r" % (jid, reply))
                    else:
                        st.consumed(r, "deleted (bs)")
                    del held[r]
                elif x < 0.65:
                    held[r] = "release"
                    reply = c.cmd("release %d %d 0" % (jid, rnd.choice([0, 100, 5000])))
                    if reply != b"RELEASED":
                        st.error("release %d: %r" % (jid, reply))
                    st.note(r, "released (bs)")
                    del held[r]
                elif x < 0.75:
                    held[r] = "bury"
                    reply = c.cmd("bury %d 10" % jid)
                    if reply != b"BURIED":
                        st.error("bury %d: %r" % (jid, reply))
                    st.note(r, "buried (bs)")
                    del held[r]
                elif x < 0.9:
                    held[r] = "touch"       # it stays held
                    reply = c.cmd("touch %d" % jid)
                    if reply != b"TOUCHED":
                        st.error("touch %d: %r" % (jid, reply))
                    held[r] = "delete"
                    reply = c.cmd("delete %d" % jid)
                    if reply != b"DELETED":
                        st.error("delete %d after touch: %r" % (jid, reply))
                    else:
                        st.consumed(r, "deleted after touch (bs)")
                    del held[r]
                else:
                    st.count("held by a worker")   # kept until it quits
            c.send(b"quit\r\n")
            held = {}
        except ERRS as e:
            st.lost("bs worker %d" % idx, e, held)
            return
        finally:
            c.close()


def mc_consumer(st, idx, rnd):
    while not st.killed.is_set():
        try:
            m = st.mc()
        except OSError as e:
            st.lost("mc consumer %d" % idx, e, {})
            return
        held = {}
        take = [None]    # the tube of a plain get in flight
        try:
            for _ in range(rnd.randint(3, 40)):
                if st.killed.is_set():
                    st.lost("mc consumer %d" % idx, "stopped", held)
                    return
                tube = rnd.choice(TAKE_TUBES)
                x = rnd.random()
                if x < 0.3:
                    key = tube + rnd.choice(["", "", "/t=200"])
                    take[0] = tube
                    m.send(b"get %s\r\n" % key.encode())
                    body = m.read_value(key)
                    take[0] = None
                    if body is not None:
                        r = st.delivered(body, tube, "taken by get")
                        if r is not None:
                            st.consumed(r, "taken by get (mc)")
                elif x < 0.78:
                    key = tube + rnd.choice(["/open", "/open", "/t=200/open"])
                    m.send(b"get %s\r\n" % key.encode())
                    body = m.read_value(key)
                    if body is None:
                        continue
                    r = st.delivered(body, tube, "opened")
                    if r is None:
                        break
                    held[r] = None
                    y = rnd.random()
                    if y < 0.4:
                        held[r] = "close"
                        m.expect(b"get %s/close" % tube.encode(), "END")
                        st.consumed(r, "closed (mc)")
                        del held[r]
                    elif y < 0.55:
                        held[r] = "close"
                        key = tube + "/close/open"
                        m.send(b"get %s\r\n" % key.encode())
                        body = m.read_value(key)
                        st.consumed(r, "closed by close/open (mc)")
                        del held[r]
                        if body is not None:
                            r2 = st.delivered(body, tube, "opened by close/open")
                            if r2 is None:
                                break
                            held[r2] = "abort"
                            m.expect(b"get %s/abort" % tube.encode(), "END")
                            st.count("aborted")
                            del held[r2]
                    elif y < 0.75:
                        held[r] = "abort"
                        m.expect(b"get %s/abort" % tube.encode(), "END")
                        st.count("aborted")
                        del held[r]
                    else:
                        # Gone with the job open: the server gives it back.
                        st.count("open, then disconnect")
                        held = {}
                        break
                elif x < 0.9:
                    m.send(b"monitor %s 1\r\n" % tube.encode())
                    body = m.read_value(tube)
                    if body is None:
                        continue
                    r = st.delivered(body, tube, "opened by monitor")
                    if r is None:
                        break
                    held[r] = None
                    line = m.read_line()
                    if line != b"END":
                        st.error("monitor's final END: %r" % line)
                    held[r] = "confirm"
                    m.expect(b"confirm %s 1" % tube.encode(), "END")
                    st.consumed(r, "confirmed (mc)")
                    del held[r]
                else:
                    key = tube + "/peek"
                    m.send(b"get %s\r\n" % key.encode())
                    body = m.read_value(key)
                    if body is not None:
                        with st.lock:
                            r = st.recs.get((uid_of(body), tube if tube in CHILDREN else ""))
                            if r is None or r.body != body:
                                st._error("peek of %s: a body never put: %r" % (tube, body[:60]))
                        st.count("peeked")
        except ERRS as e:
            st.lost("mc consumer %d" % idx, e, held, take[0])
            return
        finally:
            m.close()


HOLD_TUBES = ["p0", "p1", "lim", "exp", "fan+a"]


def holder(st, idx, rnd):
    """Takes one job (memcache get/open, or a beanstalk reserve) and holds
    it until the kill: it must come back ready."""
    use_mc = idx % 2 == 0
    tube = rnd.choice(HOLD_TUBES)
    held = {}
    try:
        c = st.mc() if use_mc else st.bs()
    except OSError as e:
        st.lost("holder %d" % idx, e, {})
        return
    try:
        if not use_mc:
            c.watch(tube)
            c.ignore("default")
        while not st.killed.is_set() and not held:
            if use_mc:
                key = tube + "/open/t=300"
                c.send(b"get %s\r\n" % key.encode())
                body = c.read_value(key)
            else:
                c.send(b"reserve-with-timeout 1\r\n")
                line, body = c.read_reply()
                if not line.startswith(b"RESERVED "):
                    body = None
            if body is not None:
                r = st.delivered(body, tube, "held until the kill")
                if r is not None:
                    held[r] = None
        st.killed.wait()
        st.lost("holder %d" % idx, "stopped", held)
    except ERRS as e:
        st.lost("holder %d" % idx, e, held)
    finally:
        c.close()


def operator(st, rnd):
    try:
        c = st.bs()
    except OSError as e:
        st.lost("operator", e, {})
        return
    in_lim = set()      # ids in lim at the last look
    try:
        while not st.killed.is_set():
            time.sleep(rnd.uniform(0.02, 0.15))
            x = rnd.random()
            if x < 0.35:
                in_lim = look_at_lim(st, c, in_lim)
            elif x < 0.7:
                move(st, c, rnd, in_lim)
            elif x < 0.85:
                flush(st, c)
            elif x < 0.92:
                tube = rnd.choice(KICK_TUBES)
                c.use(tube)
                line = c.cmd("kick 20")
                if not line.startswith(b"KICKED"):
                    st.error("kick: %r" % line)
                st.count("kicked", int(line.split()[1]) if line.startswith(b"KICKED ") else 0)
            else:
                kick_one(st, c, rnd)
    except ERRS as e:
        st.lost("operator", e, {})
    finally:
        c.close()


def kick_one(st, c, rnd):
    """kick-job of a buried job, noted in its history."""
    tube = rnd.choice(MOVE_TUBES)
    c.use(tube)
    got = c.peek("peek-buried")
    if got is None:
        return
    jid, body = got
    with st.lock:
        r = st.recs.get((uid_of(body), ""))
    line = c.cmd("kick-job %d" % jid)
    if line not in (b"KICKED", b"NOT_FOUND"):
        st.error("kick-job %d: %r" % (jid, line))
    if r is not None and line == b"KICKED":
        st.note(r, "kicked (job %d)" % jid)


def look_at_lim(st, c, before):
    """The ids in lim now. A job seen there before and gone now, which this
    thread (the only one that moves jobs) did not move out, was discarded
    or consumed: it must never come back."""
    now = set(list_ids(c, "lim"))
    for jid in sorted(now - set(st.lim_known)):
        got = c.peek("peek %d" % jid)
        if got is None:
            now.discard(jid)        # consumed meanwhile
            continue
        with st.lock:
            r = st.recs.get((uid_of(got[1]), ""))
            if r is None or r.body != got[1]:
                st._error("job %d in lim has a body never put: %r" % (jid, got[1][:60]))
            else:
                st.lim_known[jid] = r
    with st.lock:
        for jid in before - now:
            r = st.lim_known.get(jid)
            if r is not None and not r.vanished:
                r.vanished = True
                r.note("left lim (job %d)" % jid)
                st.counts["left lim"] += 1
    return now


def move(st, c, rnd, in_lim):
    src = rnd.choice(MOVE_TUBES)
    dst = rnd.choice([t for t in MOVE_TUBES if t != src])
    c.use(src)
    got = c.peek(rnd.choice(["peek-ready", "peek-ready", "peek-buried", "peek-delayed"]))
    if got is None:
        return
    jid, body = got
    with st.lock:
        r = st.recs.get((uid_of(body), ""))
        if r is None or r.body != body:
            st._error("peek in %s: job %d has a body never put: %r" % (src, jid, body[:60]))
            return
        old_loc, old_exp = r.loc, r.exp_in
        r.loc = r.loc | tube_set(dst)       # either, until the reply
        r.exp_in = None
        entry = None
        if dst == "lim":
            entry = [time.time(), INF]
            st.lim_entries.append(entry)
    t0 = time.time()
    try:
        line = c.cmd("move-job %d %s" % (jid, dst))
    except ERRS:
        with st.lock:
            r.note("move to %s in flight at the kill" % dst)
            if dst == "lim":
                r.lim_t, r.lim_own = entry[0], True
        raise
    t1 = time.time()
    with st.lock:
        if entry:
            entry[1] = t1
        if line == b"MOVED":
            in_lim.discard(jid)
            r.loc = tube_set(dst)
            r.exp_in = (t0, t1) if dst == "exp" else None
            if dst == "lim":
                r.lim_t, r.lim_own = entry[0], True
            r.note("moved to %s" % dst)
            st.counts["moved"] += 1
        elif line in (b"NOT_FOUND", b"OUT_OF_MEMORY"):
            r.loc, r.exp_in = old_loc, old_exp      # not moved
            st.counts["move: %s" % line.decode()] += 1
        else:
            st._error("move-job %d %s: %r" % (jid, dst, line))


def flush(st, c):
    t_s = time.time()
    try:
        line = c.cmd("flush-tube fl")
    except ERRS:
        with st.lock:
            for r in st.recs.values():
                if "fl" in r.loc and not r.gone and not r.refused:
                    r.maybe_gone = True
                    r.note("flush in flight at the kill")
        raise
    t_a = time.time()
    if line == b"NOT_FOUND":
        n = 0
    elif line.startswith(b"FLUSHED "):
        n = int(line.split()[1])
    else:
        st.error("flush-tube fl: %r" % line)
        return
    with st.lock:
        sure, maybe = [], []
        for r in st.recs.values():
            if "fl" not in r.loc or r.gone or r.refused:
                continue
            if not r.maybe_gone and r.ack_t is not None and r.ack_t < t_s:
                sure.append(r)
            elif r.maybe_gone or r.send_t < t_a:
                maybe.append(r)
        if not len(sure) <= n <= len(sure) + len(maybe):
            st._error("flush-tube fl answered FLUSHED %d; %d jobs were surely in it and "
                      "%d more may have been" % (n, len(sure), len(maybe)))
        for r in sure:
            r.gone = "flushed"
            r.note("flushed")
        for r in maybe:
            r.maybe_gone = True
            r.note("maybe flushed")
        st.counts["flushed"] += n


# ------------------------------------------------------------------- checks

def list_ids(c, tube):
    ids, start = [], 1
    while True:
        line, body = c.cmd_body("list-jobs %s all %d 1000" % (tube, start))
        if line == b"NOT_FOUND":
            return ids
        if body is None or not line.startswith(b"OK "):
            fail("list-jobs %s: %r" % (tube, line))
        page = [int(x) for x in harness.parse_yaml_list(body)]
        ids += page
        if len(page) < 1000:
            return ids
        start = page[-1] + 1


def snapshot(c):
    """{id: (tube, state, body)} of every job, and the time bounds."""
    v0 = time.time()
    tubes = c.list_tubes()
    # exp before dlq: a job expiring meanwhile is listed in one of them.
    tubes.sort(key=lambda t: (t != "exp", t))
    ids = []
    for t in tubes:
        ids += list_ids(c, t)
    ids = sorted(set(ids))
    jobs = {}
    for i in range(0, len(ids), 200):
        batch = ids[i:i + 200]
        c.send(b"".join(b"peek %d\r\nstats-job %d\r\n" % (j, j) for j in batch))
        for j in batch:
            line, body = c.read_reply()
            sline, sbody = c.read_reply()
            if line == b"NOT_FOUND":
                continue         # expired (deleted) between list and peek
            if not line.startswith(b"FOUND %d " % j) or not sline.startswith(b"OK "):
                fail("peek/stats-job %d: %r / %r" % (j, line, sline))
            sj = harness.parse_yaml_dict(sbody)
            jobs[j] = (harness.unq(sj["tube"]), harness.unq(sj["state"]), body, sj)
    return jobs, v0, time.time()


def verify(st, c, label):
    """Check the restarted server against the ledger, then make what it
    shows the ledger's new certainty."""
    jobs, v0, v1 = snapshot(c)
    stats = c.stats()
    errs = []

    def err(msg):
        if len(errs) < 25:
            errs.append("%s: %s" % (label, msg))

    if stats["current-jobs-reserved"] != "0":
        err("%s jobs reserved after a restart" % stats["current-jobs-reserved"])
    total = sum(int(stats["current-jobs-" + k]) for k in ("ready", "delayed", "buried"))
    if total != len(jobs):
        err("stats count %d jobs, list-jobs %d" % (total, len(jobs)))
    lim_live = sum(1 for v in jobs.values() if v[0] == "lim")
    if lim_live > LIM_MAX:
        err("lim holds %d jobs, max_items is %d" % (lim_live, LIM_MAX))
    by_key = collections.defaultdict(list)
    counters = {}
    for jid, (tube, state, body, sj) in jobs.items():
        uid = uid_of(body)
        key = (uid, tube if tube in CHILDREN else "")
        r = st.recs.get(key)
        if r is None:
            err("job %d in %s: never put (%r)" % (jid, tube, body[:60]))
            continue
        if r.body != body:
            err("job %d %s: body differs from what was put" % (jid, key))
        by_key[key].append((jid, tube, state))
        counters[jid] = " ".join("%s=%s" % (k, sj.get(k)) for k in (
            "reserves", "timeouts", "releases", "buries", "kicks", "age"))
    ends = sorted(e[1] for e in st.lim_entries)
    takes = collections.Counter(st.unknown_takes)
    stat = collections.Counter()
    for key, r in sorted(st.recs.items()):
        hits = by_key.get(key, [])
        if len(hits) > 1:
            err("job %s is there %d times: %r (history %r)" % (key, len(hits), hits, r.history))
        if r.gone or r.refused or r.vanished:
            if hits:
                err("job %s came back: %s, now %r (history %r)"
                    % (key, r.gone or ("refused" if r.refused else "it had left lim"),
                       hits, r.history))
            stat["gone"] += 1
            continue
        discardable = False
        if "lim" in r.loc and r.lim_t is not None:
            later = len(ends) - bisect.bisect_right(ends, r.lim_t)
            discardable = later >= (2 if r.lim_own else 1)
        if hits:
            jid, tube, state = hits[0]
            stat["present"] += 1
            if tube not in r.loc:
                err("job %s (id %d) is in %s, expected in %r (history %r)"
                    % (key, jid, tube, sorted(r.loc), r.history))
            if r.exp_in and tube == "exp" and v0 > r.exp_in[1] + MAX_AGE + SLACK_HI:
                err("job %s (id %d) still in exp %.1fs after it entered (max_age %.1fs)"
                    % (key, jid, v0 - r.exp_in[1], MAX_AGE))
            if r.exp_in and tube == "dlq" and v1 < r.exp_in[0] + MAX_AGE - SLACK_LO:
                err("job %s (id %d) expired into dlq %.1fs after it entered exp"
                    % (key, jid, v1 - r.exp_in[0]))
            if r.expect_ready and state != "ready":
                err("job %s (id %d) held at the kill is %s in %s after the restart "
                    "(history %r; stats-job %s)"
                    % (key, jid, state, tube, r.history, counters[jid]))
            if r.expect_ready:
                stat["held at the kill, back"] += 1
            if r.exp_in and tube == "dlq":
                stat["expired into dlq"] += 1
            continue
        if not r.acked or r.maybe_gone:
            stat["uncertain, absent"] += 1
            continue
        if discardable and not r.expect_ready:
            stat["discarded"] += 1
            continue
        if not r.expect_ready:
            t = next((t for t in sorted(r.loc) if takes[t] > 0), None)
            if t is not None:
                takes[t] -= 1
                stat["taken by a get in flight"] += 1
                continue
        err("job %s lost: acknowledged, not consumed, not back (history %r)"
            % (key, r.history))
    st.checked += len(st.recs)
    st.present = stat["present"]
    for k, v in stat.items():
        st.verify_stats[k] += v
    # What the server shows is now certain.
    for key, r in st.recs.items():
        hits = by_key.get(key, [])
        if hits and not r.gone and not r.refused:
            tube = hits[0][1]
            r.loc = {tube}
            r.acked, r.maybe_gone, r.expect_ready = True, False, False
            r.ack_t = r.send_t = 0.0
            if tube != "exp":
                r.exp_in = None
            else:
                r.loc = tube_set("exp")
            r.lim_t, r.lim_own = (v1 if tube == "lim" else None), False
        elif not r.gone and not r.refused:
            r.gone = "absent after a restart" if not r.vanished else "left lim"
            r.note(r.gone)
    st.lim_entries = []
    st.unknown_takes.clear()
    st.lim_known.clear()
    return errs


# -------------------------------------------------------------------- run

def wait_up(s):
    """The listeners open before the binlog is replayed: wait for replies
    on both ports."""
    deadline = time.monotonic() + 60
    while True:
        try:
            c = Client(HOST, s.srv.port, timeout=30)
            m = Mc(HOST, s.mport, timeout=30)
            try:
                c.expect("list-tube-used", "USING default")
                m.sync()
                return
            finally:
                c.close()
                m.close()
        except ERRS:
            if not s.srv.alive() or time.monotonic() > deadline:
                fail("the server did not come up: %s" % s.srv.stderr_text()[-800:])
            time.sleep(0.05)


def run_round(st, rnd, seconds):
    st.round += 1
    st.killed.clear()
    st.kill_t = INF
    st.bport, st.mport = st.s.srv.port, st.s.mport
    threads = []
    kinds = ([bs_producer] * N_BS_PRODUCERS + [mc_producer] * N_MC_PRODUCERS +
             [bs_worker] * N_BS_WORKERS + [mc_consumer] * N_MC_CONSUMERS + [holder] * 2)
    for i, fn in enumerate(kinds):
        threads.append(threading.Thread(target=fn, args=(st, i, random.Random(rnd.random())),
                                        daemon=True))
    threads.append(threading.Thread(target=operator, args=(st, random.Random(rnd.random())),
                                    daemon=True))
    for t in threads:
        t.start()
    time.sleep(seconds)
    srv = st.s.srv
    st.kill_t = time.monotonic()
    srv.signal(signal.SIGKILL)
    srv.proc.wait(30)
    st.killed.set()
    for t in threads:
        t.join(60)
        if t.is_alive():
            st.error("a client thread did not stop after the kill")
    problems = srv.stop()
    if problems:
        st.error("server problems: " + "; ".join(problems))
    st.s.old.append(srv)
    st.s.srv = None


def prepare(st):
    """The fanout children, which stay across restarts."""
    c = Client(HOST, st.s.srv.port, timeout=30)
    try:
        for ch in CHILDREN:
            c.watch(ch)
    finally:
        c.close()


@slow
def binlog_spilled(s):
    """stats-binlog spilled-jobs now, on a connection of its own."""
    c = s.bs(timeout=30)
    try:
        reply, body = c.cmd_body("stats-binlog")
        if not reply.startswith(b"OK ") or body is None:
            raise TestFailure("stats-binlog: got %r" % reply)
        for line in body.decode().splitlines():
            if line.startswith("spilled-jobs: "):
                return int(line.split(": ")[1])
        raise TestFailure("stats-binlog has no spilled-jobs: %r" % body)
    finally:
        c.close()
        s.srv.clients.remove(c)


@no_server
@tubed_only("tubed's binlog, config file, memcache port and operator commands")
def test_soak_mixed_kill9(binary):
    rnd = random.Random(SEED)
    with McServer(binary, "-f", "0", "-s", "200000", conf=CONF, bdir=True) as s:
        st = Soak(binary, s)
        wait_up(s)
        prepare(st)
        errs = []
        rounds = 0
        spilled = []  # stats-binlog spilled-jobs after each restart
        for k in range(ROUNDS):
            run_round(st, rnd, rnd.uniform(1.0, 2.5))
            rounds += 1
            s.restart()
            wait_up(s)
            spilled.append(binlog_spilled(s))
            c = s.bs(timeout=30)
            errs += verify(st, c, "after kill %d" % (k + 1))
            c.close()
            s.srv.clients.remove(c)
            if errs or st.errors:
                break
        if not errs and not st.errors:
            # A clean stop (SIGTERM) and start changes nothing.
            problems = s.stop()
            if problems:
                errs.append("server problems at SIGTERM: " + "; ".join(problems))
            s.restart()
            wait_up(s)
            c = s.bs(timeout=30)
            errs += verify(st, c, "after a clean restart")
            c.close()
            s.srv.clients.remove(c)
        vs = st.verify_stats
        print("soak_mixed: seed %d, %d kill -9 rounds, %d jobs, %d job checks (%s), "
              "%d jobs in the end; spilled jobs after each restart %s; ops %s"
              % (SEED, rounds, len(st.recs), st.checked,
                 ", ".join("%s %d" % kv for kv in sorted(vs.items())), st.present,
                 spilled, ", ".join("%s %d" % kv for kv in sorted(st.counts.items()))),
              flush=True)
        msgs = []
        if st.errors:
            msgs.append("during the load: " + " | ".join(st.errors[:12]))
        if errs:
            msgs.append("after restarts: " + " | ".join(errs[:12]))
        if not msgs:
            # The load did what it is for.
            need = {"put": 50, "set": 50, "deleted (bs)": 10, "taken by get (mc)": 5,
                    "closed (mc)": 5, "moved": 5, "reserved": 50, "opened": 20}
            short = ["%s %d < %d" % (k, st.counts[k], v) for k, v in need.items()
                     if st.counts[k] < v]
            if st.verify_stats["held at the kill, back"] < 1:
                short.append("no job was held at a kill")
            if max(spilled) < 1:
                short.append("no body was ever spilled (read-behind untested)")
            if short:
                msgs.append("too little load to mean anything: " + ", ".join(short))
        if msgs:
            fail(" || ".join(msgs) + " [seed %d]" % SEED)


@no_server
@tubed_only("tubed's config file and memcache port")
def test_clean_stop_with_expiring_and_delayed_jobs(binary):
    """Regression (found by the soak above, at its SIGTERM): a tube whose
    jobs have an expiry (max_age, or a memcache set's exptime) and that
    also holds delayed jobs. At the stop every job was freed in table
    order while the tube's expiry heap still pointed at them; detaching a
    delayed job re-timed the tube, which read the freed top of that heap
    (heap-use-after-free in tube_due, reported under ASan; the harness
    fails on it). After the fix the stop is clean and nothing is lost."""
    with McServer(binary, "-f", "0", conf="[tube ex]\nmax_age = 1h\n", bdir=True) as s:
        b, m = s.bs(), s.mc()
        b.use("ex")
        for i in range(40):
            b.put(b"r%d" % i)
            b.put(b"d%d" % i, delay=3600)
        b.use("q")              # no max_age: the set's exptime is the expiry
        for i in range(40):
            m.store("q", b"s%d" % i, exptime=3600)
            b.put(b"qd%d" % i, delay=3600)
        problems = s.stop()
        if problems:
            fail("stopping: " + "; ".join(problems))
        s.restart()
        b = s.bs(timeout=30)
        for tube, ready, delayed in (("ex", 40, 40), ("q", 40, 40)):
            st = b.stats_tube(tube)
            if (int(st["current-jobs-ready"]), int(st["current-jobs-delayed"])) != (ready, delayed):
                fail("%s after the restart: %s ready, %s delayed; expected %d and %d"
                     % (tube, st["current-jobs-ready"], st["current-jobs-delayed"],
                        ready, delayed))
