"""Randomized replication: every kind of journaled change, and faults
between them, then job-by-job convergence (replication.md §6.1, §6.3).

A trio (a primary and two replicas, 64 KiB binlog files so that all of
them roll over and compact, a read-behind budget, a journal = false tube,
fanout, a discarding tube, a max_age tube).  Each round runs a batch of
random operations on the primary (puts in every state, reserve-job then
delete / release / bury, deletes, kicks, moves, flushes, new fanout
children, memcache sets, gets, open / close / abort), with one fault in
the middle of the batch:

- kill9-replica   a replica is killed with kill -9 and restarted later;
- stop-replica    a replica is stopped (SIGSTOP) and continued later;
- kill9-primary   the primary (-f 0) is killed with kill -9 once every
                  reply is in and restarted: it must have every job it
                  had (reserved ones ready; the journal = false tube's
                  jobs gone), and its replicas resync;
- restart-primary the primary is stopped (SIGTERM) and started again: a
                  new history, so its replicas, which hold its jobs,
                  get a snapshot while the operations go on;
- resnapshot      a replica is killed, its replication-id removed (it asks
                  for a snapshot, holding jobs), restarted, and told to
                  follow its primary again at once (mid-snapshot, most
                  likely);
- reload          every node reloads a config with other budgets (the
                  read-behind tube's lower or higher, the discarding
                  tube's limit);
- failover        the primary is killed with kill -9 at once, the replica
                  with the highest position is promoted, the other follows
                  it, and the old primary is restarted as it was (a
                  primary, from its own directory) and told to follow;
- switch          a replica is promoted once caught up, the primary and
                  the other replica follow it;
- switch-tail     the same, but the old primary takes writes after the
                  promotion (its tail is discarded when it follows).

After each round every replica must hold exactly the primary's jobs (but
for the journal = false tube, never replicated).

test_replication_fuzz_sync runs half as many rounds with sync_replicas = 1.
TUBED_REPL_FUZZ_ROUNDS (default 5) sets the rounds, TUBED_REPL_FUZZ_SEED
the seed (printed in a failure).
"""

import os
import random

from harness import TestFailure, check, eq, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, assert_same, rint, snapshot,
                       wait_caught_up, wait_for)

SERVER = "none"

ROUNDS = int(os.environ.get("TUBED_REPL_FUZZ_ROUNDS", "5"))
OPS = 300

CONF = """\
[tube fan]
fanout = true

[tube cap]
max_items = 15
discard_old_when_full = true

[tube rb]
max_memory_size = 16K

[tube mem]
journal = false

[tube exp]
max_age = 1s
move_expired_to = exp-dead

[tube dl]
max_timeouts = 1
"""

TUBES = ["t0", "t1", "t2", "fan", "cap", "rb", "mem", "exp", "dl"]
FAULTS = ("kill9-replica", "stop-replica", "kill9-primary", "switch", "switch-tail",
          "restart-primary", "resnapshot", "reload", "failover")


def _journaled(snap):
    return {j: v for j, v in snap.items() if v.tube != "mem"}


class Fuzz:
    def __init__(self, cl, rnd):
        self.cl = cl
        self.conf = cl.conf
        self.rnd = rnd
        self.p = cl.node("a", "-f", "0", "-s", 65536)
        self.replicas = [cl.node("b", "-f", "0", "-s", 65536, replica_of=self.p),
                         cl.node("c", "-s", 65536, replica_of=self.p)]
        self.ids = []
        self.children = ["fan+x"]
        self.seq = 0
        self.connect()

    def connect(self):
        self.c = self.p.bs(timeout=30)
        self.w = self.p.bs(timeout=30)       # reserves, keeps some
        self.m = self.p.mc(timeout=30)
        self.opened = False
        for t in TUBES + self.children:
            self.w.watch(t)
        self.c.use(self.children[0])

    # -- operations ----------------------------------------------------------
    def body(self, tube):
        self.seq += 1
        size = self.rnd.choice([0, 10, 100, 700, 2500 if tube == "rb" else 300])
        head = b"<%s-%d>" % (tube.encode(), self.seq)
        return (head + self.rnd.randbytes(size)).replace(b"\r\n", b"..")

    def put(self):
        t = self.rnd.choice(TUBES + self.children)
        self.c.use(t)
        delay = self.rnd.choice([0, 0, 0, 3600])
        b = self.body(t)
        # (dl's jobs have a TTR of a second: kept reserved, they time out
        # and are buried, dead letters)
        ttr = 1 if t == "dl" else self.rnd.choice([600, 900])
        self.c.send(b"put %d %d %d %d\r\n%s\r\n" % (self.rnd.randrange(5000), delay,
                                                    ttr, len(b), b))
        line = self.c.read_line()
        check(line.startswith(b"INSERTED "), "put into %s: %r" % (t, line))
        self.ids.append(int(line.split()[1]))

    def pick(self):
        return self.rnd.choice(self.ids) if self.ids else 1

    def handle(self):
        j = self.pick()
        line, _ = self.w.cmd_body("reserve-job %d" % j)
        if not line.startswith(b"RESERVED"):
            return
        how = self.rnd.choice(["delete", "release", "release-delay", "bury", "keep"])
        if how == "delete":
            self.w.expect("delete %d" % j, "DELETED")
        elif how == "release":
            self.w.expect("release %d %d 0" % (j, self.rnd.randrange(9)), "RELEASED")
        elif how == "release-delay":
            self.w.expect("release %d 1 3600" % j, "RELEASED")
        elif how == "bury":
            self.w.expect("bury %d %d" % (j, self.rnd.randrange(9)), "BURIED")
        # keep: stays reserved by w (ready on the replicas)

    def other(self):
        r = self.rnd.random()
        j = self.pick()
        if r < 0.3:
            line = self.c.cmd("delete %d" % j)
            check(line in (b"DELETED", b"NOT_FOUND"), "delete: %r" % line)
        elif r < 0.45:
            line = self.c.cmd("kick-job %d" % j)
            check(line in (b"KICKED", b"NOT_FOUND"), "kick-job: %r" % line)
        elif r < 0.55:
            self.c.use(self.rnd.choice(TUBES))
            line = self.c.cmd("kick %d" % self.rnd.randrange(1, 5))
            check(line.startswith(b"KICKED"), "kick: %r" % line)
        elif r < 0.8:
            # (not into dl: a moved job keeps its TTR, dl's must be short)
            t = self.rnd.choice([t for t in TUBES if t != "dl"] + self.children + ["mv"])
            line = self.c.cmd("move-job %d %s" % (j, t))
            check(line in (b"MOVED", b"NOT_FOUND", b"OUT_OF_MEMORY"), "move-job: %r" % line)
        elif r < 0.83:
            t = self.rnd.choice(TUBES + self.children + ["mv"])
            line = self.c.cmd("flush-tube %s" % t)
            check(line.startswith(b"FLUSHED") or line == b"NOT_FOUND",
                  "flush-tube: %r" % line)
        elif r < 0.86:
            name = "fan+n%d" % self.seq
            self.c.use(name)
            self.children.append(name)
            self.w.watch(name)
        else:
            self.memcache()

    def memcache(self):
        r = self.rnd.random()
        if self.opened:   # (with an open item, only close or abort: kestrel.md)
            self.m.get(self.rnd.choice(["mq/close", "mq/abort"]))
            self.opened = False
        elif r < 0.04:
            # a queue's administration: a flush, a deleted queue (a fanout
            # child's subscription ends with it)
            q = self.rnd.choice(TUBES + self.children + ["mq"])
            if self.rnd.random() < 0.5:
                self.m.expect("flush %s" % q, "END")
            else:
                self.m.expect("delete %s" % q, "DELETED")
                if q in self.children[1:]:
                    self.children.remove(q)
        elif r < 0.15:
            # an expiry far away: the record with a client's expiry
            self.m.store("mq", self.body("mq"), exptime=3600)
        elif r < 0.5:
            self.m.store("mq", self.body("mq"))
        elif r < 0.8:
            self.m.get("mq")
        else:
            self.opened = self.m.get("mq/open") is not None

    def ops(self, n):
        for _ in range(n):
            r = self.rnd.random()
            if r < 0.45:
                self.put()
            elif r < 0.65:
                self.handle()
            else:
                self.other()

    # -- checks ---------------------------------------------------------------
    def expired(self):
        """Every job of the max_age tube has expired but the reserved ones
        (they expire when released: TTRs are long enough never to run
        out during a test), and no job of dl is reserved (their TTR of a
        second ran out: buried)."""
        c = self.p.bs()

        def done():
            tubes = c.list_tubes()
            if "dl" in tubes and c.stats_tube("dl")["current-jobs-reserved"] != "0":
                return False
            if "exp" not in tubes:
                return True
            st = c.stats_tube("exp")
            return sum(int(st["current-jobs-" + k])
                       for k in ("ready", "delayed", "buried")) == 0
        wait_for(done, "the max_age tube to empty and dl's TTRs to run out")

    def settle(self):
        """No expiry pending on the primary (expired()), then every
        replica caught up and converged."""
        self.expired()
        wait_caught_up(self.p, *self.replicas, timeout=120)
        want = _journaled(snapshot(self.p.admin()))
        for r in self.replicas:
            assert_same(want, _journaled(snapshot(r.admin())), "replica %s" % r.name,
                        "primary %s" % self.p.name, "replica %s" % r.name)
        return want

    # -- faults -----------------------------------------------------------------
    def fault(self, kind):
        rnd = self.rnd
        if kind == "kill9-replica":
            r = rnd.choice(self.replicas)
            r.kill9()
            self.ops(OPS // 3)
            r.restart()
        elif kind == "stop-replica":
            r = rnd.choice(self.replicas)
            r.sigstop()
            self.ops(OPS // 3)
            r.sigcont()
        elif kind == "resnapshot":
            r = rnd.choice(self.replicas)
            r.kill9()
            os.remove(os.path.join(r.bdir, "replication-id"))
            r.restart()
            self.ops(OPS // 10)
            eq(r.bs().cmd("follow %s" % self.p.addr, timeout=10), b"FOLLOWING",
               "follow again on %s" % r.name)
        elif kind == "reload":
            self.small = not getattr(self, "small", False)
            conf = self.conf
            if self.small:
                conf = conf.replace("max_memory_size = 16K", "max_memory_size = 4K")
                conf = conf.replace("max_items = 15", "max_items = 8")
            for n in [self.p] + self.replicas:
                n.reload(conf)
        elif kind == "restart-primary":
            self.p.sigterm()
            self.p.restart()
            self.connect()
        elif kind == "kill9-primary":
            self.expired()
            want = _journaled(snapshot(self.p.admin()))
            self.p.kill9()
            self.p.restart()
            self.connect()
            # A job reserved in the max_age tube is ready after the
            # restart, so it expires then (moved, same id and body).
            for j, v in want.items():
                if v.tube == "exp" and v.state == "reserved":
                    want[j] = v._replace(tube="exp-dead", state="ready")
            self.expired()
            got = snapshot(self.p.admin())
            assert_same(want, got, "the primary after kill -9 and its replay",
                        "before", "after", replica_side=False)
        elif kind == "failover":
            old = self.p
            old.kill9()
            pos = {n.name: rint(n.repl(), "position") for n in self.replicas}
            new = max(self.replicas, key=lambda n: pos[n.name])
            line = new.bs().cmd("promote", timeout=10)
            check(line.startswith(b"PROMOTED "), "promote: %r" % line)
            rest = [n for n in self.replicas if n is not new]
            for n in rest:
                eq(n.bs().cmd("follow %s" % new.addr, timeout=10), b"FOLLOWING",
                   "follow on %s" % n.name)
                n.replica_of = new
            self.p = new
            new.replica_of = None
            self.replicas = rest + [old]
            self.connect()
            self.ops(OPS // 10)
            old.restart(replica_of=None)         # as it was: a primary
            eq(old.bs().cmd("follow %s" % new.addr, timeout=10), b"FOLLOWING",
               "follow on the old primary %s" % old.name)
            old.replica_of = new
        else:
            new = rnd.choice(self.replicas)
            if kind == "switch":
                wait_caught_up(self.p, *self.replicas, timeout=120)
            line = new.bs().cmd("promote", timeout=10)
            check(line.startswith(b"PROMOTED "), "promote: %r" % line)
            if kind == "switch-tail":
                self.ops(OPS // 5)               # the old primary's tail
            old = self.p
            others = [old] + [r for r in self.replicas if r is not new]
            for n in others:
                eq(n.bs().cmd("follow %s" % new.addr, timeout=10), b"FOLLOWING",
                   "follow on %s" % n.name)
                n.replica_of = new              # for its restarts
            new.replica_of = None
            self.p = new
            self.replicas = others
            self.connect()


def _fuzz(binary, conf, rounds):
    seed = int(os.environ.get("TUBED_REPL_FUZZ_SEED", str(random.randrange(10 ** 6))))
    rnd = random.Random(seed)
    faults = [FAULTS[i % len(FAULTS)] for i in range(rounds)]
    rnd.shuffle(faults)
    done = []
    try:
        with Cluster(binary, conf) as cl:
            f = Fuzz(cl, rnd)
            for kind in faults:
                f.ops(OPS // 2)
                f.fault(kind)
                f.ops(OPS // 2)
                f.settle()
                done.append(kind)
            check(unq(f.p.repl()["role"]) == "primary", "the last primary's role")
    except TestFailure as e:
        raise TestFailure("seed %d, rounds done %r, in round %r: %s"
                          % (seed, done, faults[len(done)] if len(done) < len(faults)
                             else None, e)) from e


@no_server
@tubed_only(EXT)
def test_replication_fuzz(binary):
    _fuzz(binary, CONF, ROUNDS)


@no_server
@tubed_only(EXT)
def test_replication_fuzz_sync(binary):
    """The same with sync_replicas = 1: every reply waits for a replica
    (there is always one running), so the acknowledgements' paths run
    through every fault too."""
    _fuzz(binary, "sync_replicas = 1\n" + CONF, max(1, ROUNDS // 2))
