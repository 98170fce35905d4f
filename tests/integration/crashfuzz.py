"""The randomized crash-consistency tester of the binlog and read-behind
(test_binlog_crashfuzz.py runs it; not a test file itself).

One seeded random client drives a tubed with tiny binlog files (so records
are compacted and files deleted all the time) through every journaled
change: put (priorities, delays, TTRs, several tubes: read-behind ones,
full ones that discard, max_age ones that expire or move to a dead-letter
tube, a sync_journal one, an unjournaled one), reserve + delete / release
(with a delay) / bury / touch, reserve-job, a 1 s TTR running out in a
max_timeouts tube (a bury), delete by id, kick, kick-job, move-job,
flush-tube, pipelined puts on two connections at once, fanout (children
registered and let go, copies), reloads that change the read-behind
budgets and turn a tube's journal on and off, and memcache set (with an
expiry) / get (take) / get /open, /close, /abort, delete.  A client-side
ledger holds what each acknowledged reply makes knowable.  At a random
moment the server is killed with SIGKILL (often with a few commands sent
and not yet answered: those are "unsure"; sometimes killed again during
the next start's replay), started again on the same directory in a random
durability mode (-f 0, -f 25, -F: a process crash loses nothing
acknowledged in any of them), and the recovered state is read back
(list-tubes, list-jobs, stats-job, peek of every id) and compared job by
job with the ledger by check_view(), a pure function, so that planted
faults (plant_faults()) prove it can fail.  With disk=True the binlog is
on a small tmpfs that a filler file fills up and empties at random.

Times: the server keeps delay deadlines and expiries in real time; the
ledger keeps for each a range [earliest, latest] of the wall-clock time it
can be (send time .. reply time), and a state that depends on one is
accepted either way only while the check's own window overlaps that range
(TOL is slack for the clocks' rounding, not for speed: the server applies a
due deadline before it answers about the job).  A slow machine widens what
is unsure; it never fails the check.
"""

import os
import random
import re
import shutil
import subprocess
import tempfile
import time

import harness
from harness import Skip, TestFailure, check, fail
from server import Tubed

KIB = 1024
MAX_JOB = 1024
# Tiny files: a few dozen records each, so compaction and file removal
# run all the time (-s is raised to at least -z + 4 KiB).
ARGS = ["-s", "8192", "-z", str(MAX_JOB)]
MODES = [["-f", "0"], ["-f", "0"], ["-f", "25"], ["-F"]]

AGE = 1.0          # max_age of the tubes age and agedel, seconds
TOL = 0.25         # clock slack around a deadline (ms granularity, ticks)

CONF = """\
[tube rb]
max_memory_size = %(rb)s
[tube mq]
max_memory_size = %(mq)s
priority = 7
[tube cap]
max_items = 4
discard_old_when_full = true
[tube sz]
max_size = 3K
discard_old_when_full = true
[tube age]
max_age = 1s
move_expired_to = dead
[tube agedel]
max_age = 1s
[tube sync]
sync_journal = true
[tube nj]
journal = false
[tube tmo]
max_timeouts = 1
[tube tog]
journal = %(tog)s
[tube fan]
fanout = true
"""
# The read-behind budgets a reload switches between ("0": none; a lower
# one spills what is over, none reads every body back).
BUDGETS = ["2K", "1K", "512", "8K", "0"]

PUT_TUBES = ["default", "a", "rb", "rb", "mq", "cap", "sz", "age", "agedel",
             "sync", "nj", "dead", "tog", "fan", "fan"]
FANS = ["fan+a", "fan+b", "fan+c"]     # fanout children of fan
MOVE_TUBES = ["default", "a", "rb", "mq", "cap", "sz", "age", "sync", "nj", "dead",
              "tog"]
WATCHED = ["default", "a", "rb", "cap", "sz", "sync", "nj", "dead", "tog"]
FULL_TUBES = ("cap", "sz")        # a put or move into them may discard
EXPIRE_TO = {"age": "dead", "agedel": None}
TTL_TUBE = "ttl"                  # memcache set with an exptime


class Job:
    """What the acknowledged replies make knowable about one job."""

    def __init__(self, jid, body, tube, pri, ttr):
        self.id = jid
        self.body = body
        self.tube = tube
        self.pri = pri
        self.ttr = ttr
        self.state = "ready"        # ready, delayed, buried, reserved
        self.holder = None          # "w" or "m" while reserved
        self.delay = None           # (earliest, latest) wall deadline
        self.exp = None             # (earliest, latest) wall expiry
        self.exp_to = None          # tube an expired job moves to, or None
        self.tmo = None             # (earliest, latest) end of its TTR: then
                                    # buried (max_timeouts = 1)
        self.unsure = False         # a command on it was not answered
        self.room_gone = False      # the disk was full since it was put
        self.shared = False         # a fanout parent or copy: its body is
                                    # not its own
        self.logged = True          # its last put or move went into a
                                    # journaled tube (tog: as the config
                                    # then said)

    def __repr__(self):
        return ("<job %d %s %s pri %d%s%s%s%s>"
                % (self.id, self.tube, self.state, self.pri,
                   " delay %r" % (self.delay,) if self.delay else "",
                   " exp %r" % (self.exp,) if self.exp else "",
                   " ttr ends %r" % (self.tmo,) if self.tmo else "",
                   " unsure" if self.unsure else ""))


class Ledger:
    def __init__(self):
        self.alive = {}     # id -> Job
        self.dead = {}      # id -> body of a job acknowledged gone
        self.maybe = {}     # body -> (tube, pri, ttr, sent): puts not answered

    def kill(self, jid):
        j = self.alive.pop(jid)
        self.dead[jid] = j.body

    def add(self, j):
        self.dead.pop(j.id, None)   # an id may be given out again after
        check(j.id not in self.alive,  # every record naming it is gone
              "id %d given to a new job while %r is alive"
              % (j.id, self.alive.get(j.id)))
        self.alive[j.id] = j


# ---------------------------------------------------------------- views

class Seen:
    """One job as the restarted server shows it."""

    def __init__(self, jid, tube, state, pri, ttr, time_left, body):
        self.id, self.tube, self.state, self.pri = jid, tube, state, pri
        self.ttr, self.time_left, self.body = ttr, time_left, body

    def copy(self):
        return Seen(self.id, self.tube, self.state, self.pri, self.ttr,
                    self.time_left, self.body)


def expectations(j, ta, tb, restarted):
    """The (tube, state) pairs j may show in the window [ta, tb], None
    standing for "absent"; and whether its state is certain."""
    if j.exp:
        if ta > j.exp[1] + TOL:
            return [(j.exp_to, "ready") if j.exp_to else None]
        alive = _alive_states(j, ta, tb, restarted)
        if tb < j.exp[0] - TOL:
            return alive
        return alive + [(j.exp_to, "ready") if j.exp_to else None]
    return _alive_states(j, ta, tb, restarted)


def _alive_states(j, ta, tb, restarted):
    if restarted and not j.logged:
        return [None]                   # journal = false: gone
    if j.tmo:
        # Held until its TTR ran out, then buried by the server (a record
        # of its own); the client learns it only by asking (Fuzz.ttr_ends),
        # so a kill may come before or after it.
        return [(j.tube, "ready" if restarted else "reserved"), (j.tube, "buried")]
    state = j.state
    if state == "reserved":
        state = "ready" if restarted else "reserved"
    if state == "delayed":
        if ta > j.delay[1] + TOL:
            return [(j.tube, "ready")]
        if tb < j.delay[0] - TOL:
            return [(j.tube, "delayed")]
        return [(j.tube, "delayed"), (j.tube, "ready")]
    return [(j.tube, state)]


def check_view(led, seen, ta, tb, restarted=True):
    """Compare what the server shows (seen: {id: Seen}) with the ledger;
    returns a list of problems (empty: consistent).  Pure: no I/O."""
    problems = []
    for jid, j in sorted(led.alive.items()):
        s = seen.get(jid)
        if j.unsure:
            if s is not None and s.body != j.body:
                problems.append("job %d (unsure) came back with another body "
                                "(%d bytes, expected %d)" % (jid, len(s.body), len(j.body)))
            continue
        opts = expectations(j, ta, tb, restarted)
        if s is None:
            if None not in opts:
                problems.append("job %d lost: expected %s, the server has no "
                                "such job (%r)" % (jid, opts, j))
            continue
        if (s.tube, s.state) not in opts:
            problems.append("job %d is %s in %s, expected %s (%r)"
                            % (jid, s.state, s.tube, opts, j))
        if s.body != j.body:
            problems.append("job %d: body differs (%d bytes %r..., expected %d "
                            "bytes %r...)" % (jid, len(s.body), s.body[:24],
                                              len(j.body), j.body[:24]))
        if s.pri != j.pri:
            problems.append("job %d: pri %d, expected %d" % (jid, s.pri, j.pri))
        if s.ttr != j.ttr:
            problems.append("job %d: ttr %d, expected %d" % (jid, s.ttr, j.ttr))
        if s.state == "delayed" and j.delay and not j.exp:
            # time-left is whole seconds of what remains of the deadline
            lo, hi = j.delay[0] - tb - 1.5, j.delay[1] - ta + 1.5
            if not lo <= s.time_left <= hi:
                problems.append("job %d: time-left %d, expected %.1f..%.1f"
                                % (jid, s.time_left, lo, hi))
    for jid, s in sorted(seen.items()):
        if jid in led.alive:
            continue
        if s.body in led.maybe:
            continue                    # a put whose reply was not read
        if jid in led.dead:
            what = ("with its old body" if led.dead[jid] == s.body
                    else "with another body")
            problems.append("job %d was acknowledged gone and is back (%s, %s "
                            "in %s)" % (jid, what, s.state, s.tube))
        else:
            problems.append("job %d (%s in %s, %d bytes %r...) was never "
                            "acknowledged" % (jid, s.state, s.tube, len(s.body),
                                              s.body[:24]))
    return problems


def plant_faults(led, seen, ta, tb, rnd):
    """Plant each kind of fault in a copy of a view check_view() accepted and
    make sure it reports it.  Returns {kind: caught or not (None: nothing
    to plant it in)}."""
    out = {}
    # Jobs whose tube and state are certain (one expectation, not absence).
    certain = [j for j in led.alive.values() if not j.unsure and
               len(expectations(j, ta, tb, True)) == 1 and
               None not in expectations(j, ta, tb, True) and j.id in seen]

    def run(kind, mutate, jid):
        view = {k: v.copy() for k, v in seen.items()}
        mutate(view)
        probs = check_view(led, view, ta, tb)
        out[kind] = any(re.search(r"\bjob %d\b" % jid, p) for p in probs)

    if certain:
        j = rnd.choice(certain)
        run("drop a job", lambda v: v.pop(j.id), j.id)
        j = rnd.choice(certain)

        def flip(v, jid=j.id):
            b = bytearray(v[jid].body or b"\0")
            i = rnd.randrange(len(b))
            b[i] ^= 0x20
            v[jid].body = bytes(b)
        run("change a body byte", flip, j.id)
        j = rnd.choice(certain)

        def cut(v, jid=j.id):
            v[jid].body = v[jid].body[:-1] if v[jid].body else b"x"
        run("cut a body", cut, j.id)
        j = rnd.choice(certain)

        def pri(v, jid=j.id):
            v[jid].pri += 1
        run("change a priority", pri, j.id)
        j = rnd.choice(certain)

        def tube(v, jid=j.id):
            v[jid].tube = "elsewhere"
        run("move a job to another tube", tube, j.id)
        j = rnd.choice(certain)

        def state(v, jid=j.id):
            v[jid].state = "buried" if v[jid].state != "buried" else "ready"
        run("change a state", state, j.id)
    else:
        for kind in ("drop a job", "change a body byte", "cut a body",
                     "change a priority", "move a job to another tube",
                     "change a state"):
            out[kind] = None
    dead = [jid for jid, body in led.dead.items()
            if jid not in seen and body not in led.maybe]
    if dead:
        jid = rnd.choice(dead)
        run("resurrect a deleted job",
            lambda v: v.__setitem__(jid, Seen(jid, "default", "ready", 0, 60, 0,
                                               led.dead[jid])), jid)
    else:
        out["resurrect a deleted job"] = None
    new = max(list(led.alive) + list(led.dead) + [0]) + 1000
    run("a job never put", lambda v: v.__setitem__(
        new, Seen(new, "default", "ready", 0, 60, 0, b"stranger")), new)
    return out


# ---------------------------------------------------------------- reading

def _yaml(c, line):
    l, body = c.cmd_body(line)
    if body is None:
        return l, None
    return l, body


def list_all(c):
    """{id: tube} of every job list-jobs shows, in every tube."""
    l, body = c.cmd_body("list-tubes")
    check(body is not None, "list-tubes: %r" % l)
    out = {}
    for tube in harness.parse_yaml_list(body):
        frm = 0
        while True:
            l, body = c.cmd_body("list-jobs %s all %d 1000" % (tube, frm))
            if l == b"NOT_FOUND":
                break
            check(body is not None, "list-jobs %s: %r" % (tube, l))
            page = [int(x) for x in harness.parse_yaml_list(body)]
            if not page:
                break
            for jid in page:
                out[jid] = tube
            frm = page[-1] + 1
    return out


def read_jobs(c, ids, chunk=100):
    """{id: Seen} for the ids that exist (stats-job and peek, pipelined)."""
    ids = sorted(set(ids))
    out = {}
    for i in range(0, len(ids), chunk):
        part = ids[i:i + chunk]
        c.send(b"".join(b"stats-job %d\r\npeek %d\r\n" % (j, j) for j in part))
        for j in part:
            l, st = c.read_reply()
            l2, body = c.read_reply()
            if l == b"NOT_FOUND":
                # It may have expired between the two commands; never the
                # other way round.
                check(l2 == b"NOT_FOUND", "stats-job %d NOT_FOUND, peek %r" % (j, l2))
                continue
            check(st is not None, "stats-job %d: %r" % (j, l))
            d = harness.parse_yaml_dict(st)
            if l2 == b"NOT_FOUND":
                continue    # expired in between
            check(re.fullmatch(rb"FOUND %d \d+" % j, l2) is not None,
                  "peek %d: %r" % (j, l2))
            out[j] = Seen(j, harness.unq(d["tube"]), harness.unq(d["state"]),
                          int(d["pri"]), int(d["ttr"]), int(d["time-left"]), body)
    return out


# ---------------------------------------------------------------- the run

def mount_tmpfs(size):
    """A fresh directory with a tmpfs of `size` mounted on it (root only;
    a Skip otherwise)."""
    if os.geteuid() != 0:
        raise Skip("the full-disk rounds need root to mount a tmpfs")
    path = tempfile.mkdtemp(prefix="tubed-crashfuzz-mnt-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % size,
                        "tubed-crashfuzz", path], capture_output=True, text=True,
                       timeout=20)
    if r.returncode != 0:
        os.rmdir(path)
        raise Skip("cannot mount a tmpfs: %s" % r.stderr.strip()[:200])
    return path


def umount(path):
    r = subprocess.run(["umount", path], capture_output=True, timeout=20)
    if r.returncode != 0:
        subprocess.run(["umount", "-l", path], capture_output=True, timeout=20)
    shutil.rmtree(path, ignore_errors=True)


class Fuzz:
    def __init__(self, binary, seed, log, disk=False):
        self.rnd = random.Random(seed)
        self.seed = seed
        self.log = log
        self.led = Ledger()
        self.disk = disk        # the binlog on a small tmpfs that fills up
        self.full = False       # the filler leaves (almost) no room
        self.mnt = None
        bdir = True
        if disk:
            self.mnt = mount_tmpfs("4M")
            bdir = os.path.join(self.mnt, "binlog")
            os.mkdir(bdir)
        self.t = Tubed(binary, *ARGS, conf=CONF % {"rb": "2K", "mq": "1K", "tog": "true"},
                       bdir=bdir, memcache=True, prefix="tubed-crashfuzz-")
        self.nbody = 0
        self.tog = True         # tog's journal setting in force
        self.subs = set()       # the registered fanout children
        self.soft = set()       # registered on a full disk: not journaled
        self.unknown = set()    # soft ones after a restart: gone or not
        self.floor = 0          # every id given out in this life is above
        self.stats = {"ops": 0, "kills": 0, "terms": 0, "unsure": 0,
                      "maybe-puts": 0, "discards": 0, "expired": 0,
                      "flushed": 0, "reused-ids": 0, "checked": 0}
        self.caught = {}
        self.c = self.w = self.m = None

    # -- helpers -------------------------------------------------------
    def body(self):
        self.nbody += 1
        r = self.rnd
        size = r.choice((0, 5, 40, 200, 600, 900, r.randrange(1, MAX_JOB)))
        head = b"<s%d-b%d>" % (self.seed, self.nbody)
        pad = r.randbytes(max(0, size - len(head)))
        if r.random() < 0.3:
            pad = pad[:len(pad) // 2] + b"\r\n" + pad[len(pad) // 2:]
        return (head + pad)[:MAX_JOB]

    def connect(self):
        self.c = self.t.bs()
        self.w = self.t.bs()
        for tube in WATCHED:
            self.w.expect("watch %s" % tube, "WATCHING %d" % (WATCHED.index(tube) + 1))
        self.m = self.t.mc()
        self.c2 = self.t.bs()
        self.holders = []

    def jobs(self, pred):
        return [j for j in self.led.alive.values() if pred(j)]

    def settle(self):
        """Apply what the clock alone has made certain."""
        now = time.time()
        for j in list(self.led.alive.values()):
            # An expired job that found no room to move waits for the next
            # try: such a job stays unsure until the restart shows it.
            if j.exp and now > j.exp[1] + TOL and not (self.full or j.room_gone):
                self.stats["expired"] += 1
                if j.exp_to:
                    j.tube, j.state, j.exp, j.delay = j.exp_to, "ready", None, None
                else:
                    self.led.kill(j.id)
                continue
            if j.state == "delayed" and now > j.delay[1] + TOL:
                j.state, j.delay = "ready", None


    def ttr_ends(self):
        """Ask about the held jobs of tmo whose TTR should have run out: a
        stats-job that says buried comes after the bury's record was
        written (records go out before the replies of their iteration)."""
        now = time.time()
        due = [j for j in self.led.alive.values() if j.tmo and now > j.tmo[1] + TOL]
        for j in due:
            l, body = self.c.cmd_body("stats-job %d" % j.id)
            check(body is not None, "stats-job %d (%r): %r" % (j.id, j, l))
            st = harness.unq(harness.parse_yaml_dict(body)["state"])
            # With no room for the bury's record it goes back to ready.
            check(st in ("reserved", "buried") or
                  (st == "ready" and (j.room_gone or self.full)),
                  "job %d (%r) is %s" % (j.id, j, st))
            if st != "reserved":
                j.state, j.holder, j.tmo = st, None, None

    def stable(self, j):
        """A job an operation may target: no expiry pending."""
        return not j.exp and not j.unsure and not j.tmo

    def refused(self, l):
        """Is l the answer to a durable command the binlog had no room for
        (allowed only while the disk is full; nothing changed then)?"""
        if self.full and l in (b"OUT_OF_MEMORY", b"NOT_STORED", b"SERVER_ERROR"):
            self.stats["refused"] = self.stats.get("refused", 0) + 1
            return True
        return False

    def op_disk(self):
        """Fill the tmpfs up to a few KiB, or make room again."""
        filler = os.path.join(self.mnt, "filler")
        if self.full:
            os.unlink(filler)
            self.full = False
            return
        st = os.statvfs(self.mnt)
        free = st.f_bavail * st.f_frsize
        leave = self.rnd.choice((0, 4096, 12288, 24576))
        # Unbuffered: a write the tmpfs cut short raises here, never
        # again at the close.
        with open(filler, "wb", buffering=0) as f:
            left = max(0, free - leave)
            while left > 0:
                n = min(left, 1 << 20)
                try:
                    left -= f.write(b"\xa5" * n) or n
                except OSError:
                    break
        self.full = True
        for j in self.led.alive.values():
            j.room_gone = True
        self.stats["fills"] = self.stats.get("fills", 0) + 1

    def journaled(self, tube):
        return tube != "nj" and (tube != "tog" or self.tog)

    def note_id(self, jid):
        self.floor = max(self.floor, jid)

    def reconcile_full(self, tube):
        """After a put or move into a tube that discards when full: the
        ledger's jobs of it that list-jobs no longer shows were discarded."""
        listed = set()
        frm = 0
        while True:
            l, body = self.c.cmd_body("list-jobs %s all %d 1000" % (tube, frm))
            if l == b"NOT_FOUND":
                break
            page = [int(x) for x in harness.parse_yaml_list(body)]
            if not page:
                break
            listed.update(page)
            frm = page[-1] + 1
        for j in self.jobs(lambda j: j.tube == tube):
            if j.id not in listed:
                check(j.state != "reserved", "reserved job %d of %s discarded"
                      % (j.id, tube))
                self.led.kill(j.id)
                self.stats["discards"] += 1
        for jid in listed:
            check(jid in self.led.alive and self.led.alive[jid].tube == tube,
                  "list-jobs %s shows job %d the ledger does not have there (%r)"
                  % (tube, jid, self.led.alive.get(jid)))

    def resolve(self, ids):
        """Read jobs back at once and take what they show (after a flush
        that met an expiry in progress)."""
        seen = read_jobs(self.c, ids)
        for jid in ids:
            j = self.led.alive.get(jid)
            if not j:
                continue
            s = seen.get(jid)
            if s is None:
                self.led.kill(jid)
                continue
            check(s.body == j.body, "job %d: body differs" % jid)
            if j.exp and s.tube != j.tube:
                j.exp = None        # moved by its expiry
            j.tube, j.state, j.pri = s.tube, s.state, s.pri
            if j.state == "delayed" and not j.delay:
                j.delay = (time.time(), time.time() + s.time_left + 1)

    # -- operations (acknowledged) -------------------------------------
    def op_put(self):
        r = self.rnd
        tube = r.choice(PUT_TUBES)
        body = self.body()
        pri = r.choice((0, 1, 5, 1024, r.randrange(1 << 32)))
        delay = r.choice((0, 0, 0, 0, 1, 2, 3600))
        ttr = r.choice((30, 60, 120, 600))
        t0 = time.time()
        l = self.c.cmd("use %s" % tube)
        l = self.c.cmd(b"put %d %d %d %d\r\n%s" % (pri, delay, ttr, len(body), body))
        t1 = time.time()
        if (l == b"OUT_OF_MEMORY" and tube in FULL_TUBES) or self.refused(l):
            return
        m = re.fullmatch(rb"INSERTED (\d+)", l)
        check(m is not None, "put into %s: %r" % (tube, l))
        jid = int(m.group(1))
        check(jid > self.floor, "put: id %d is not above %d, given out already in "
              "this life" % (jid, self.floor))
        if jid in self.led.dead:
            self.stats["reused-ids"] += 1
        self.note_id(jid)
        j = Job(jid, body, tube, pri, ttr)
        j.logged = self.journaled(tube)
        if delay:
            j.state, j.delay = "delayed", (t0 + delay, t1 + delay)
        if tube in EXPIRE_TO:
            j.exp, j.exp_to = (t0 + AGE, t1 + AGE), EXPIRE_TO[tube]
        self.led.add(j)
        if tube in FULL_TUBES:
            self.reconcile_full(tube)
        if tube == "fan":
            self.fan_copies(j)

    def fan_copies(self, j):
        """The copies a put into fan made, one in each registered child
        (none on a full disk, where a copy may find no room), and none in
        a child let go."""
        for child in FANS:
            l, data = self.c.cmd_body("list-jobs %s all %d 10" % (child, j.id + 1))
            page = [] if l == b"NOT_FOUND" else [int(x) for x in
                                                 harness.parse_yaml_list(data)]
            if child in self.unknown:
                # Registered on a full disk (no C record), then a restart:
                # the first put with room for a copy shows whether it is
                # still a child.
                if not page and self.full:
                    continue
                self.unknown.discard(child)
                if not page:
                    self.subs.discard(child)
                    continue
            if child not in self.subs:
                check(not page, "a put into fan (job %d) was copied into %s, "
                      "which is not a child (%r)" % (j.id, child, page))
                continue
            check(len(page) == 1 or (not page and self.full),
                  "a put into fan (job %d): copies in the child %s: %r"
                  % (j.id, child, page))
            for cid in page:
                k = Job(cid, j.body, child, j.pri, j.ttr)
                k.state, k.delay, k.shared = j.state, j.delay, True
                self.note_id(cid)
                self.led.add(k)
            j.shared = True

    def op_subscribe(self):
        """A fanout child comes into existence (a C record), or a memcache
        delete lets it go (and deletes its jobs but reserved ones)."""
        r = self.rnd
        child = r.choice(FANS)
        mine = self.jobs(lambda j: j.tube == child)
        if child in self.subs:
            # (a full disk: no room for the flush record, nothing changes)
            l = self.m.cmd("delete %s" % child)
            if self.refused(l):
                # memcache's SERVER_ERROR closes the connection: its open
                # job goes back to ready
                self.m.expect_closed()
                for j in self.held("m"):
                    j.state, j.holder = "ready", None
                self.m = self.t.mc()
                return
            check(l == b"DELETED", "memcache delete %s: %r" % (child, l))
            for j in mine:
                if j.state != "reserved":
                    self.led.kill(j.id)
            self.subs.discard(child)
            self.soft.discard(child)
            self.unknown.discard(child)
        elif not mine:
            # (a tube that still exists would not come into existence)
            self.c2.expect("use %s" % child, "USING %s" % child)
            self.c2.expect("use default", "USING default")
            self.subs.add(child)
            if self.full:
                # No room for its C record: it stays registered until a
                # restart (logged, doc/binlog.md), and the client is not told.
                self.soft.add(child)
            self.stats["subscribes"] = self.stats.get("subscribes", 0) + 1

    def op_reserve(self):
        l, body = self.w.cmd_body("reserve-with-timeout 0")
        if l == b"TIMED_OUT":
            return
        m = re.fullmatch(rb"RESERVED (\d+) \d+", l)
        check(m is not None, "reserve: %r" % l)
        jid = int(m.group(1))
        j = self.led.alive.get(jid)
        check(j is not None, "reserve handed out job %d, not in the ledger" % jid)
        check(j.body == body, "reserve: job %d body differs" % jid)
        if j.exp and j.exp_to in WATCHED and time.time() >= j.exp[0] - TOL:
            # moved to its dead-letter tube by its expiry just now
            j.tube, j.state, j.exp, j.delay = j.exp_to, "ready", None, None
        check(j.tube in WATCHED and j.state in ("ready", "delayed"),
              "reserve handed out %r" % j)
        j.state, j.holder, j.delay = "reserved", "w", None

    def held(self, who):
        return self.jobs(lambda j: j.state == "reserved" and j.holder == who
                         and not j.tmo)

    def op_finish(self):
        """delete, release (maybe delayed) or bury a job w holds, or touch."""
        mine = self.held("w")
        if not mine:
            return self.op_reserve()
        r = self.rnd
        j = r.choice(mine)
        what = r.choice(("delete", "release", "release", "bury", "touch"))
        if what == "delete":
            self.w.expect("delete %d" % j.id, "DELETED")
            self.led.kill(j.id)
        elif what == "touch":
            self.w.expect("touch %d" % j.id, "TOUCHED")
        elif what == "bury":
            pri = r.choice((j.pri, 3, 1 << 31))
            l = self.w.cmd("bury %d %d" % (j.id, pri))
            if self.refused(l):
                return
            check(l == b"BURIED", "bury %d: %r" % (j.id, l))
            j.state, j.holder, j.pri = "buried", None, pri
        else:
            pri = r.choice((j.pri, 2, 999))
            delay = r.choice((0, 0, 1, 2, 3600))
            t0 = time.time()
            l = self.w.cmd("release %d %d %d" % (j.id, pri, delay))
            t1 = time.time()
            if self.refused(l):
                return
            check(l == b"RELEASED", "release %d: %r" % (j.id, l))
            j.holder, j.pri = None, pri
            if delay:
                j.state, j.delay = "delayed", (t0 + delay, t1 + delay)
            else:
                j.state = "ready"

    def op_delete(self):
        cand = self.jobs(lambda j: self.stable(j) and j.state != "reserved")
        if cand:
            j = self.rnd.choice(cand)
            self.c.expect("delete %d" % j.id, "DELETED")
            self.led.kill(j.id)

    def op_kick_job(self):
        now = time.time()
        cand = self.jobs(lambda j: self.stable(j) and (
            j.state == "buried" or (j.state == "delayed" and j.delay[0] > now + 1)))
        if cand:
            j = self.rnd.choice(cand)
            l = self.c.cmd("kick-job %d" % j.id)
            if self.refused(l):
                return
            check(l == b"KICKED", "kick-job %d: %r" % (j.id, l))
            j.state, j.delay = "ready", None

    def op_kick(self):
        if self.full:
            return      # a kick may stop part way: which ones is unknown
        now = time.time()
        tube = self.rnd.choice(WATCHED)
        mine = self.jobs(lambda j: j.tube == tube)
        if any(not self.stable(j) for j in mine):
            return
        buried = [j for j in mine if j.state == "buried"]
        delayed = [j for j in mine if j.state == "delayed"]
        if not buried and any(j.delay[0] - TOL <= now + 1 for j in delayed):
            return      # one may become ready meanwhile: the count is unsure
        self.c.expect("use %s" % tube, "USING %s" % tube)
        who = buried or delayed
        self.c.expect("kick 1000", "KICKED %d" % len(who))
        for j in who:
            j.state, j.delay = "ready", None

    def op_move(self):
        cand = self.jobs(lambda j: self.stable(j) and j.state != "reserved"
                         and j.tube != "tmo")
        if not cand:
            return
        j = self.rnd.choice(cand)
        to = self.rnd.choice(MOVE_TUBES)
        if to == "mq" and j.shared:
            return      # memcache get finds a job by its body
        t0 = time.time()
        l = self.c.cmd("move-job %d %s" % (j.id, to))
        t1 = time.time()
        if (l == b"OUT_OF_MEMORY" and to in FULL_TUBES) or self.refused(l):
            return
        check(l == b"MOVED", "move-job %d %s: %r" % (j.id, to, l))
        if to == j.tube:
            return
        j.tube = to
        j.logged = self.journaled(to)
        if to in EXPIRE_TO:
            j.exp, j.exp_to = (t0 + AGE, t1 + AGE), EXPIRE_TO[to]
        if to in FULL_TUBES:
            self.reconcile_full(to)

    def op_flush(self):
        tube = self.rnd.choice(PUT_TUBES + [TTL_TUBE])
        mine = self.jobs(lambda j: j.tube == tube or (j.exp and j.exp_to == tube))
        l = self.c.cmd("flush-tube %s" % tube)
        now = time.time()
        m = re.fullmatch(rb"FLUSHED (\d+)", l)
        if self.refused(l):
            return
        if l == b"NOT_FOUND":
            left = [j for j in mine if j.tube == tube and
                    not (j.exp and now >= j.exp[0] - TOL)]
            check(not left, "flush-tube %s: NOT_FOUND with jobs %r" % (tube, left[:3]))
            self.resolve([j.id for j in mine])      # expired meanwhile
            return
        check(m is not None, "flush-tube %s: %r" % (tube, l))
        sure = all(not j.exp or now < j.exp[0] - TOL for j in mine)
        gone = [j for j in mine if j.tube == tube and j.state != "reserved"]
        if sure:
            check(int(m.group(1)) == len(gone), "flush-tube %s: FLUSHED %s, the "
                  "ledger has %d jobs %r" % (tube, m.group(1), len(gone), gone[:4]))
            for j in gone:
                self.led.kill(j.id)
        else:
            # An expiry in progress: what went is read back.
            self.resolve([j.id for j in mine])
        self.stats["flushed"] += int(m.group(1))

    def mc_new_id(self, tube, body):
        """The id of the job a memcache set just made (the only one in the
        tube above every id given out so far)."""
        frm = self.floor + 1
        l, data = self.c.cmd_body("list-jobs %s all %d 1000" % (tube, frm))
        check(data is not None, "list-jobs %s: %r" % (tube, l))
        page = [int(x) for x in harness.parse_yaml_list(data)]
        check(len(page) == 1, "after a memcache set into %s: list-jobs from %d "
              "shows %r" % (tube, frm, page))
        return page[0]

    def op_mc_set(self):
        r = self.rnd
        tube = r.choice(("mq", "mq", "rb", TTL_TUBE, "cap"))
        body = self.body()
        exptime = 2 if tube == TTL_TUBE else 0
        t0 = time.time()
        l = self.m.set(tube, body, exptime=exptime)
        t1 = time.time()
        if (tube in FULL_TUBES and l != b"STORED") or self.refused(l):
            return
        check(l == b"STORED", "set %s: %r" % (tube, l))
        jid = self.mc_new_id(tube, body)
        if jid in self.led.dead:
            self.stats["reused-ids"] += 1
        self.note_id(jid)
        j = Job(jid, body, tube, 7 if tube == "mq" else 1024, 60)
        if exptime:
            # exptime counts from the server's whole second (memcached's
            # clock): it ends up to a second early
            j.exp, j.exp_to = (t0 + exptime - 1, t1 + exptime), None
        self.led.add(j)
        if tube in FULL_TUBES:
            self.reconcile_full(tube)

    def op_mc_get(self):
        r = self.rnd
        held = self.held("m")
        if held:
            j = held[0]
            if r.random() < 0.5 or self.full:
                self.m.expect("get mq/close", "END")
                self.led.kill(j.id)
            else:
                self.m.expect("get mq/abort", "END")
                j.state, j.holder = "ready", None
            return
        opn = r.random() < 0.4
        self.m.send(b"get mq%s\r\n" % (b"/open" if opn else b""))
        body = self.m.read_value("mq/open" if opn else "mq")
        if body is None:
            return
        hits = self.jobs(lambda j: j.body == body and j.tube == "mq")
        check(len(hits) == 1, "memcache get mq: body %r... is %d ledger jobs"
              % (body[:24], len(hits)))
        j = hits[0]
        check(j.tube == "mq" and j.state in ("ready", "delayed"),
              "memcache get mq took %r" % j)
        if opn:
            j.state, j.holder, j.delay = "reserved", "m", None
        else:
            self.led.kill(j.id)

    def op_peek(self):
        cand = self.jobs(self.stable)
        if cand:
            j = self.rnd.choice(cand)
            l, body = self.c.cmd_body("peek %d" % j.id)
            check(l.startswith(b"FOUND %d " % j.id) and body == j.body,
                  "peek %d: %r, body %s" % (j.id, l, "equal" if body == j.body
                                            else "differs"))

    def op_bulk_put(self):
        """Pipelined puts on two connections at once (one group commit
        covers several clients)."""
        r = self.rnd
        tube = r.choice(("a", "rb", "rb", "sync", "default", "nj", "mq"))
        sent = {self.c: [], self.c2: []}
        t0 = time.time()
        for conn in sent:
            conn.send(b"use %s\r\n" % tube.encode())
        for _ in range(r.randrange(5, 60)):
            conn = r.choice((self.c, self.c2))
            body, pri = self.body(), r.choice((0, 3, 1024))
            delay = r.choice((0, 0, 0, 3600))
            conn.send(b"put %d %d 60 %d\r\n%s\r\n" % (pri, delay, len(body), body))
            sent[conn].append((body, pri, delay))
        for conn, puts in sent.items():
            conn.expect_lines([b"USING " + tube.encode()])
            for body, pri, delay in puts:
                l = conn.read_line()
                if self.refused(l):
                    continue
                m = re.fullmatch(rb"INSERTED (\d+)", l)
                check(m is not None, "bulk put into %s: %r" % (tube, l))
                jid = int(m.group(1))
                check(jid > self.floor,
                      "put: id %d not above %d" % (jid, self.floor))
                j = Job(jid, body, tube, pri, 60)
                j.logged = self.journaled(tube)
                if delay:
                    j.state, j.delay = "delayed", (t0 + delay, time.time() + delay)
                if jid in self.led.dead:
                    self.stats["reused-ids"] += 1
                self.led.add(j)
        self.floor = max([self.floor] + list(self.led.alive))

    def op_reserve_job(self):
        """reserve-job by id (a delayed or buried one is an S record); in
        the tube tmo with a 1 s TTR, left to run out: then buried."""
        r = self.rnd
        if r.random() < 0.5:
            t0 = time.time()
            self.c.expect("use tmo", "USING tmo")
            body = self.body()
            l = self.c.cmd(b"put 5 0 1 %d\r\n%s" % (len(body), body))
            if self.refused(l):
                return
            m = re.fullmatch(rb"INSERTED (\d+)", l)
            check(m is not None, "put into tmo: %r" % l)
            j = Job(int(m.group(1)), body, "tmo", 5, 1)
            j.room_gone = self.full
            self.note_id(j.id)
            self.led.add(j)
            w2 = self.t.bs()        # held open: its close would release
            self.holders.append(w2)
            l, got = w2.cmd_body("reserve-job %d" % j.id)
            if self.refused(l):
                return          # (the job stays, ready, in tmo)
            check(l == b"RESERVED %d %d" % (j.id, len(body)) and got == body,
                  "reserve-job %d: %r" % (j.id, l))
            j.state, j.holder, j.tmo = "reserved", "w2", (t0 + 1, time.time() + 1)
            return
        cand = self.jobs(lambda j: self.stable(j) and j.state != "reserved"
                         and j.tube not in ("mq", "tmo"))
        if not cand:
            return
        j = r.choice(cand)
        l, got = self.w.cmd_body("reserve-job %d" % j.id)
        if self.refused(l):
            return
        check(l == b"RESERVED %d %d" % (j.id, len(j.body)) and got == j.body,
              "reserve-job %d (%r): %r" % (j.id, j, l))
        j.state, j.holder, j.delay = "reserved", "w", None

    def op_reload(self):
        """SIGHUP with other read-behind budgets."""
        r = self.rnd
        self.tog = r.random() < 0.5
        self.t.reload(CONF % {"rb": r.choice(BUDGETS), "mq": r.choice(BUDGETS),
                              "tog": "true" if self.tog else "false"})
        self.stats["reloads"] = self.stats.get("reloads", 0) + 1

    OPS = [("op_put", 30), ("op_reserve", 10), ("op_finish", 14),
           ("op_delete", 6), ("op_kick_job", 4), ("op_kick", 2),
           ("op_move", 8), ("op_flush", 1), ("op_mc_set", 8),
           ("op_mc_get", 8), ("op_peek", 4), ("op_reload", 1),
           ("op_bulk_put", 2), ("op_reserve_job", 3),
           ("op_subscribe", 1)]

    def step(self):
        self.settle()
        self.ttr_ends()
        ops = self.OPS + ([("op_disk", 3)] if self.disk else [])
        names = [n for n, _ in ops]
        weights = [w for _, w in ops]
        name = self.rnd.choices(names, weights)[0]
        getattr(self, name)()
        self.stats["ops"] += 1

    # -- the crash -----------------------------------------------------
    def burst(self):
        """Send a few changes without reading their replies: whatever the
        kill leaves of them is unsure."""
        r = self.rnd
        led = self.led
        for _ in range(r.randrange(1, 6)):
            kind = r.choice(("put", "put", "delete", "finish", "move", "set",
                             "get", "kick-job"))
            if kind == "put":
                tube = r.choice(PUT_TUBES)
                body = self.body()
                pri, delay = r.choice((0, 9)), r.choice((0, 3600))
                self.c.send(b"use %s\r\nput %d %d 60 %d\r\n%s\r\n"
                            % (tube.encode(), pri, delay, len(body), body))
                led.maybe[body] = (tube, pri, delay, time.time())
                self.stats["maybe-puts"] += 1
                if tube in FULL_TUBES:
                    for j in self.jobs(lambda j, t=tube: j.tube == t):
                        j.unsure = True
            elif kind == "set":
                body = self.body()
                self.m.send(b"set mq 0 0 %d\r\n%s\r\n" % (len(body), body))
                led.maybe[body] = ("mq", 7, 0, time.time())
                self.stats["maybe-puts"] += 1
            elif kind == "get":
                if self.held("m"):
                    continue    # a get while holding one: ERROR, closed
                self.m.send(b"get mq\r\n")
                for j in self.jobs(lambda j: j.tube == "mq"):
                    j.unsure = True
            else:
                cand = self.jobs(lambda j: self.stable(j) and
                                 j.state != "reserved" and j.tube != "tmo")
                mine = [j for j in self.held("w") if not j.unsure]
                if kind == "finish" and mine:
                    j = r.choice(mine)
                    self.w.send(r.choice((b"delete %d\r\n", b"release %d 5 0\r\n",
                                          b"bury %d 6\r\n", b"release %d 1 3600\r\n"))
                                % j.id)
                elif cand and kind != "finish":
                    j = r.choice(cand)
                    if kind == "delete":
                        self.c.send(b"delete %d\r\n" % j.id)
                    elif kind == "kick-job":
                        self.c.send(b"kick-job %d\r\n" % j.id)
                    else:
                        to = r.choice(("a", "rb", "nj", "sync", "default"))
                        self.c.send(b"move-job %d %s\r\n" % (j.id, to.encode()))
                else:
                    continue
                j.unsure = True
        self.stats["unsure"] += sum(1 for j in led.alive.values() if j.unsure)

    def binlog_figures(self):
        """Add what stats-binlog counts to the run's figures (that the
        tiny files do make compaction and read-behind happen)."""
        l, body = self.c.cmd_body("stats-binlog")
        check(body is not None, "stats-binlog: %r" % l)
        d = harness.parse_yaml_dict(body)
        for k in ("compactions", "records-migrated", "spilled-jobs"):
            self.stats[k] = self.stats.get(k, 0) + int(d[k])
        self.stats["max-files"] = max(self.stats.get("max-files", 0), int(d["files"]))

    def crash(self):
        r = self.rnd
        self.binlog_figures()
        if r.random() < 0.3:
            time.sleep(r.choice((0.3, 1.2)))     # let delays and expiries pass
            self.ttr_ends()
        if r.random() < 0.1:
            self.t.sigterm()
            self.stats["terms"] += 1
        else:
            if r.random() < 0.7:
                self.burst()
                pause = r.choice((0, 0, 0.0005, 0.002, 0.01))
                if pause:
                    time.sleep(pause)
            self.t.kill9()
            self.stats["kills"] += 1
        if self.full:
            self.op_disk()      # room again: a start makes a new file
        for j in self.led.alive.values():
            if j.state == "reserved" and not j.tmo:
                j.state, j.holder = "ready", None
        self.c = self.w = self.m = self.c2 = None
        self.holders = []

    # -- after a restart -----------------------------------------------
    def observe(self):
        c = self.t.bs()
        ta = time.time()
        listed = list_all(c)
        seen = read_jobs(c, set(listed) | set(self.led.alive))
        tb = time.time()
        for jid, s in seen.items():
            if jid in listed and listed[jid] != s.tube:
                # moved by an expiry between the two reads: fine; anything
                # else is not
                check(listed[jid] in EXPIRE_TO and EXPIRE_TO[listed[jid]] == s.tube,
                      "job %d listed in %s, stats-job says %s"
                      % (jid, listed[jid], s.tube))
        c.close()
        return seen, ta, tb

    def check_restart(self, rnd_no):
        seen, ta, tb = self.observe()
        c = self.t.bs()
        l, body = c.cmd_body("list-tubes")
        tubes = set(harness.parse_yaml_list(body))
        c.close()
        self.unknown |= self.soft
        self.soft = set()
        sure = self.subs - self.unknown
        check(sure <= tubes, "seed %d, after restart %d: the fanout children "
              "%s are gone (tubes: %s)" % (self.seed, rnd_no, sorted(sure - tubes),
                                           sorted(tubes)))
        probs = check_view(self.led, seen, ta, tb)
        if probs:
            fail("seed %d, after restart %d: %d problems:\n  %s"
                 % (self.seed, rnd_no, len(probs), "\n  ".join(probs[:25])))
        self.stats["checked"] += len(seen)
        for kind, ok in plant_faults(self.led, seen, ta, tb, self.rnd).items():
            if ok is None:
                continue
            a, b = self.caught.get(kind, (0, 0))
            self.caught[kind] = (a + (1 if ok else 0), b + 1)
            check(ok, "seed %d: the checker missed a planted fault: %s"
                  % (self.seed, kind))
        self.adopt(seen, ta, tb)

    def adopt(self, seen, ta, tb):
        """The ledger takes what the server shows (unsure jobs resolved,
        expiries and deadlines that passed, unjournaled jobs gone)."""
        led = self.led
        for jid, j in list(led.alive.items()):
            s = seen.get(jid)
            if s is None:
                led.kill(jid)
                continue
            if j.exp and s.tube != j.tube:
                j.exp = None        # moved by its expiry
            was_delayed = j.state == "delayed"
            j.tube, j.state, j.pri, j.unsure, j.holder = s.tube, s.state, s.pri, False, None
            j.tmo = None
            j.logged = True         # it came back from its record
            if j.state == "delayed" and not (was_delayed and j.delay):
                j.delay = (ta + s.time_left - 1, tb + s.time_left + 1)
            if j.state != "delayed":
                j.delay = None
            if j.tube in EXPIRE_TO and not j.exp:
                j.exp, j.exp_to = (0, tb + AGE + 1), EXPIRE_TO[j.tube]
        for jid, s in seen.items():
            if jid in led.alive:
                continue
            tube, pri, delay, sent = led.maybe[s.body]
            j = Job(jid, s.body, s.tube, s.pri, s.ttr)
            j.state = s.state
            if s.state == "delayed":
                j.delay = (ta + s.time_left - 1, tb + s.time_left + 1)
            if s.tube in EXPIRE_TO:
                j.exp, j.exp_to = (sent + AGE, tb + AGE), EXPIRE_TO[s.tube]
            led.add(j)
        led.maybe.clear()
        self.floor = max(seen) if seen else 0

    # -- the whole run -------------------------------------------------
    def run(self, rounds, ops=(60, 220)):
        r = self.rnd
        t = self.t
        try:
            t.start(extra=r.choice(MODES))
            for n in range(rounds):
                self.connect()
                for _ in range(r.randrange(*ops)):
                    self.step()
                self.crash()
                if r.random() < 0.2:
                    # killed again at once: while it replays, or just after
                    t.start(extra=r.choice(MODES), replayed=False)
                    t.kill9()
                    self.stats["double-kills"] = self.stats.get("double-kills", 0) + 1
                t.start(extra=r.choice(MODES))
                self.check_restart(n + 1)
            self.log("seed %d: %r; planted faults caught %r"
                     % (self.seed, self.stats, self.caught))
        except (TestFailure, OSError) as e:
            tail = ""
            if t.srv is not None:
                tail = "\nserver log (last lines):\n" + "\n".join(
                    t.srv.stderr_text().splitlines()[-12:])
            raise TestFailure("seed %d (TUBED_CRASHFUZZ_SEED=%d to repeat): %s%s"
                              % (self.seed, self.seed, e, tail)) from None
        finally:
            problems = t.stop()
            shutil.rmtree(t.tmp, ignore_errors=True)
            if self.mnt:
                umount(self.mnt)
            if problems:
                raise TestFailure("seed %d: %s" % (self.seed, "; ".join(problems)))
        return self.stats, self.caught
