"""The ledger test: no acknowledged change is lost by a failover
(replication.md §6.2, §6.3).

A trio (a primary, two replicas, sync_replicas = 1, -f 0 everywhere).  Each
round: producers (beanstalk puts, memcache sets) and workers (reserve then
delete, some releases; memcache gets) run against the primary and write
down every reply they get; in half the rounds a replica is killed with
kill -9 and restarted meanwhile (it resyncs under load); at a random
moment the primary is killed with kill -9; the
replica with the highest `position` is promoted.  The checker then holds
the promoted server to the ledger:

- every job whose INSERTED a client received, and whose DELETED no client
  received, is there, with its body byte for byte (but for a job whose
  delete was sent and its reply cut off by the kill: that delete may
  have been made, so the job may be gone; if it is there, its body is
  checked);
- no job whose DELETED a client received is there;
- every memcache body whose STORED a client received is there;
- no job is there that no client sent.

Then the other replica and the former primary (restarted from its own
directory) are told to `follow` the promoted server, and each must end with
exactly its jobs (job by job).  The promoted server is the next round's
primary.

The checker proves itself every round: planted faults (an acknowledged job
deleted behind the ledger's back on the real server, a faked INSERTED for a
job no one sent, a faked DELETED for a live job, a changed body, a faked
STORED, a faked get of an item still there) must each be reported.  test_ledger_catches_unsafe_acks runs the same checker on a
failover with sync_replicas = 0 and the replica stopped, where
acknowledgements really go out before the replica has the records: the
checker must report the loss.

TUBED_REPL_LEDGER_ROUNDS (default 3) sets the rounds, TUBED_REPL_LEDGER_SEED
the random seed; faults caught go to $TUBED_REPL_REPORT.
"""

import os
import random
import re
import threading
import time

from harness import TestFailure, check, eq, no_server, slow, tubed_only
from repl_util import (EXT, Cluster, assert_converged, report, rint, snapshot,
                       wait_caught_up, wait_for)

SERVER = "none"

ROUNDS = int(os.environ.get("TUBED_REPL_LEDGER_ROUNDS", "3"))
# Producers pause above this many live jobs (of each kind), so the state
# to check stays the same size however many rounds run: steady churn.
CAP = 2000
CONF = "sync_replicas = 1\n"


class Ledger:
    """What clients were told, shared by the client threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}          # id -> body: INSERTED received
        self.deleted = set()     # ids: DELETED received
        self.deleting = set()    # ids: delete sent (reply or not)
        self.sent = set()        # every body sent in a put (acked or not)
        self.mc_sent = set()
        self.mc_stored = set()   # memcache bodies: STORED received
        self.mc_taken = set()    # memcache bodies a get returned (deleted)
        self.mc_getting = 0      # gets sent whose reply the kill may cut off
        self.seq = 0

    def next_body(self, tag, rnd):
        with self.lock:
            self.seq += 1
            n = self.seq
        pad = rnd.randbytes(rnd.randint(0, 300))
        return b"<%s-%d>" % (tag, n) + pad.replace(b"\r\n", b"..") + b"\r\n!"

    def live(self):
        with self.lock:
            return len(self.acked) - len(self.deleted)

    def copy(self):
        l = Ledger()
        with self.lock:
            l.acked = dict(self.acked)
            l.deleted = set(self.deleted)
            l.deleting = set(self.deleting)
            l.sent = set(self.sent)
            l.mc_sent = set(self.mc_sent)
            l.mc_stored = set(self.mc_stored)
            l.mc_taken = set(self.mc_taken)
            l.mc_getting = self.mc_getting
        return l


# ------------------------------------------------------------ clients

def _producer(node, ledger, stop, seed, errors):
    rnd = random.Random(seed)
    try:
        c = node.bs(timeout=20)
        c.use("L")
        while not stop.is_set():
            if ledger.live() > CAP:
                time.sleep(0.01)
                continue
            n = rnd.randint(1, 8)             # a small pipeline
            bodies = [ledger.next_body(b"p", rnd) for _ in range(n)]
            with ledger.lock:
                ledger.sent.update(bodies)
            c.send(b"".join(b"put %d 0 120 %d\r\n%s\r\n"
                            % (rnd.randint(0, 100), len(b), b) for b in bodies))
            for b in bodies:
                line = c.read_line()
                m = re.fullmatch(rb"INSERTED (\d+)", line)
                if not m:
                    errors.append("put answered %r" % line)
                    return
                with ledger.lock:
                    ledger.acked[int(m.group(1))] = b
    except (TestFailure, OSError):
        return                                # the primary went away


def _worker(node, ledger, stop, seed, errors):
    rnd = random.Random(seed)
    try:
        c = node.bs(timeout=20)
        c.watch("L")
        c.ignore("default")
        while not stop.is_set():
            line, got = c.cmd_body("reserve-with-timeout 1")
            if line == b"TIMED_OUT":
                continue
            m = re.fullmatch(rb"RESERVED (\d+) \d+", line)
            if not m:
                errors.append("reserve answered %r" % line)
                return
            jid = int(m.group(1))
            if rnd.random() < 0.15:
                line = c.cmd("release %d %d 0" % (jid, rnd.randint(0, 50)))
                if line != b"RELEASED":
                    errors.append("release %d answered %r" % (jid, line))
                    return
                continue
            with ledger.lock:
                ledger.deleting.add(jid)
            line = c.cmd("delete %d" % jid)
            if line != b"DELETED":
                errors.append("delete %d answered %r" % (jid, line))
                return
            with ledger.lock:
                ledger.deleted.add(jid)
    except (TestFailure, OSError):
        return


def _mc_producer(node, ledger, stop, seed, errors):
    rnd = random.Random(seed)
    try:
        m = node.mc(timeout=20)
        while not stop.is_set():
            if len(ledger.mc_stored) - len(ledger.mc_taken) > CAP:
                time.sleep(0.01)
                continue
            b = ledger.next_body(b"m", rnd)
            with ledger.lock:
                ledger.mc_sent.add(b)
            m.send(b"set mq 0 0 %d\r\n%s\r\n" % (len(b), b))
            line = m.read_line()
            if line != b"STORED":
                errors.append("set answered %r" % line)
                return
            with ledger.lock:
                ledger.mc_stored.add(b)
    except (TestFailure, OSError):
        return


def _mc_consumer(node, ledger, stop, seed, errors):
    """memcache gets of mq: a VALUE is the item's acknowledged delete."""
    try:
        m = node.mc(timeout=20)
        while not stop.is_set():
            with ledger.lock:
                ledger.mc_getting += 1
            m.send(b"get mq\r\n")
            line = m.read_line()
            if line == b"END":
                with ledger.lock:
                    ledger.mc_getting -= 1
                time.sleep(0.01)
                continue
            mm = re.fullmatch(rb"VALUE mq 0 (\d+)", line)
            if not mm:
                errors.append("get mq answered %r" % line)
                return
            data = m.read_exact(int(mm.group(1)) + 2)[:-2]
            if m.read_line() != b"END":
                errors.append("get mq: no END after the value")
                return
            with ledger.lock:
                ledger.mc_taken.add(data)
                ledger.mc_getting -= 1
    except (TestFailure, OSError):
        return


# ------------------------------------------------------------ checker

def check_ledger(c, ledger, snap=None):
    """Problems (strings) of the server behind client c against the
    ledger; [] when it holds every acknowledged change."""
    problems = []
    if snap is None:
        snap = snapshot(c)
    live = {j: b for j, b in ledger.acked.items() if j not in ledger.deleted}
    for j, b in sorted(live.items()):
        got = snap.get(j)
        if got is None:
            # A delete sent whose reply the kill cut off may have happened.
            if j not in ledger.deleting:
                problems.append("job %d (INSERTED, never DELETED) is lost" % j)
        elif got.body != b:
            problems.append("job %d: body %r..., acknowledged with %r..."
                            % (j, got.body[:20], b[:20]))
    for j in sorted(ledger.deleted):
        if j in snap:
            problems.append("job %d came back after its DELETED" % j)
    mq = {}
    for job in snap.values():
        if job.tube == "mq":
            mq[job.body] = job.id
        elif job.tube == "L":
            if job.body not in ledger.sent:
                problems.append("job %d holds a body no client sent: %r"
                                % (job.id, job.body[:30]))
        else:
            problems.append("job %d in tube %r, where no client put one"
                            % (job.id, job.tube))
    for b in sorted(ledger.mc_taken & set(mq)):
        problems.append("memcache item %r... came back after a get returned "
                        "it" % b[:20])
    lost = sorted(ledger.mc_stored - ledger.mc_taken - set(mq))
    # A get whose reply the kill cut off may have taken one item each.
    if len(lost) > ledger.mc_getting:
        for b in lost:
            problems.append("memcache item %r... (STORED) is lost" % b[:20])
    for b in sorted(set(mq) - ledger.mc_sent):
        problems.append("memcache item %r... was never sent" % b[:20])
    return problems


def _self_check(c, ledger, snap, rnd, caught):
    """Planted faults in the ledger's view; the checker must report each."""
    live = sorted(j for j in ledger.acked if j not in ledger.deleted
                  and j not in ledger.deleting and j in snap)
    plants = []
    l1 = ledger.copy()
    fake = max(list(snap) + list(ledger.acked) + [0]) + 1000
    l1.acked[fake] = b"never sent"
    plants.append(("a faked INSERTED", l1, "job %d " % fake))
    if live:
        j = rnd.choice(live)
        l2 = ledger.copy()
        l2.deleted.add(j)
        plants.append(("a faked DELETED", l2, "job %d came back" % j))
        k = rnd.choice(live)
        l3 = ledger.copy()
        l3.acked[k] = l3.acked[k] + b"?"
        plants.append(("a changed body", l3, "job %d: body" % k))
    l4 = ledger.copy()
    fakes = [b"<never stored %d>" % i for i in range(l4.mc_getting + 1)]
    l4.mc_stored.update(fakes)
    plants.append(("a faked STORED", l4, "memcache item %r... (STORED) is lost"
                   % fakes[0][:20]))
    mq = [j.body for j in snap.values() if j.tube == "mq"]
    if mq:
        l5 = ledger.copy()
        taken = rnd.choice(mq)
        l5.mc_taken.add(taken)
        plants.append(("a faked get", l5, "memcache item %r... came back"
                       % taken[:20]))
    for what, l, needle in plants:
        got = check_ledger(c, l, snap)
        check(any(needle in p for p in got), "the ledger checker missed %s "
              "(%r): it reported %s" % (what, needle, got[:5]))
        caught[what] = caught.get(what, 0) + 1


def _plant_lost_job(c, ledger, rnd, caught):
    """A real fault: an acknowledged job deleted on the server behind the
    ledger's back (the primary's replicas follow, so the reply comes); the
    checker must report exactly that job lost."""
    snap = snapshot(c)
    live = sorted(j for j in ledger.acked if j not in ledger.deleted
                  and j not in ledger.deleting and j in snap)
    if not live:
        return
    j = rnd.choice(live)
    eq(c.cmd("delete %d" % j), b"DELETED", "planting a lost job: delete %d" % j)
    got = check_ledger(c, ledger)
    check(got == ["job %d (INSERTED, never DELETED) is lost" % j],
          "the ledger checker, with job %d deleted behind its back, "
          "reported %s" % (j, got[:5]))
    what = "a lost record on the server"
    caught[what] = caught.get(what, 0) + 1
    with ledger.lock:
        ledger.deleted.add(j)               # its DELETED was received above


# ------------------------------------------------------------ rounds

def _workload(p, ledger, rnd, seconds):
    stop = threading.Event()
    errors = []
    threads = []
    for i, fn in enumerate((_producer, _producer, _worker, _worker, _worker,
                            _mc_producer, _mc_consumer)):
        t = threading.Thread(target=fn, args=(p, ledger, stop, rnd.random(), errors),
                             daemon=True)
        threads.append(t)
        t.start()
    time.sleep(seconds)
    return stop, threads, errors


def _round(cl, nodes, ledger, rnd, n, caught, figures):
    p, replicas = nodes[0], nodes[1:]
    before = len(ledger.acked), len(ledger.deleted)
    stop, threads, errors = _workload(p, ledger, rnd, rnd.uniform(0.3, 1.5))
    if rnd.random() < 0.5:
        # A replica dies too and comes back while the clients go on: it
        # resyncs under load (the other one keeps acknowledging), and may
        # still be mid-snapshot (position 0) when the primary dies.
        x = rnd.choice(replicas)
        x.kill9()
        x.restart(replica_of=p)
        figures.append("round %d: replica %s killed and restarted" % (n, x.name))
        time.sleep(rnd.uniform(0.0, 1.0))
    p.kill9()
    stop.set()
    for t in threads:
        t.join(30)
        check(not t.is_alive(), "round %d: a client thread did not end" % n)
    check(not errors, "round %d: unexpected replies: %s" % (n, errors[:5]))
    acks = len(ledger.acked) - before[0], len(ledger.deleted) - before[1]
    check(acks[0] > 0, "round %d: no put was acknowledged in the round "
          "(the trio took no writes)" % n)
    for r in replicas:
        wait_for(lambda: r.repl()["connected"] == "false",
                 "round %d: %s to see its primary gone" % (n, r.name))
    pos = {r.name: rint(r.repl(), "position") for r in replicas}
    best = max(pos.values())
    top = [r for r in replicas if pos[r.name] == best]
    new = rnd.choice(top)
    epoch = int(new.repl()["epoch"])
    line = new.admin().cmd("promote", timeout=10)
    eq(line, b"PROMOTED %d" % (epoch + 1), "round %d: promote %s" % (n, new.name))
    c = new.bs(timeout=20)
    snap = snapshot(c)
    problems = check_ledger(c, ledger, snap)
    check(not problems, "round %d: after kill -9 of %s and promote of %s "
          "(positions %s), %d problem(s): %s"
          % (n, p.name, new.name, pos, len(problems), "; ".join(problems[:10])))
    _self_check(c, ledger, snap, rnd, caught)
    figures.append("round %d: %d puts and %d deletes acknowledged, positions "
                   "%s, promoted %s, %d jobs" % (n, acks[0], acks[1], pos,
                                                 new.name, len(snap)))
    # The others follow the promoted server; the old primary comes back
    # from its own directory first.
    followers = [r for r in replicas if r is not new]
    p.restart(replica_of=None)
    for f in followers + [p]:
        eq(f.admin().cmd("follow %s" % new.addr, timeout=10), b"FOLLOWING",
           "round %d: follow on %s" % (n, f.name))
    wait_caught_up(new, *(followers + [p]))
    _plant_lost_job(c, ledger, rnd, caught)
    wait_caught_up(new, *(followers + [p]))
    for f in followers + [p]:
        assert_converged(new, f, "round %d: %s following %s" % (n, f.name, new.name))
    return [new] + followers + [p]


def _rounds(binary, names, what):
    seed = int(os.environ.get("TUBED_REPL_LEDGER_SEED", str(random.randrange(10 ** 6))))
    rnd = random.Random(seed)
    caught, figures = {}, []
    ledger = Ledger()
    with Cluster(binary, CONF) as cl:
        p = cl.node(names[0], "-f", "0")
        nodes = [p] + [cl.node(x, "-f", "0", replica_of=p) for x in names[1:]]
        wait_caught_up(p, *nodes[1:])
        t0 = time.monotonic()
        for n in range(1, ROUNDS + 1):
            try:
                nodes = _round(cl, nodes, ledger, rnd, n, caught, figures)
            except TestFailure as e:
                raise TestFailure("%s, seed %d: %s" % (what, seed, e)) from e
    report("ledger (%s): %d rounds (seed %d) in %.1f s; planted faults caught: %s"
           % (what, ROUNDS, seed, time.monotonic() - t0, caught))
    for f in figures:
        report("ledger (%s) %s" % (what, f))


@slow
@no_server
@tubed_only(EXT)
def test_ledger_failover_rounds(binary):
    """A trio: the other replica and the old primary follow the promoted one."""
    _rounds(binary, ["a", "b", "c"], "trio")


@slow
@no_server
@tubed_only(EXT)
def test_ledger_failover_rounds_pair(binary):
    """A pair: when the replica was restarted in the round, the primary may
    die while it is still receiving its snapshot; it is promoted anyway
    (the only one), and must hold every acknowledged change all the same
    (while it resyncs, sync_replicas = 1 acknowledges nothing new)."""
    _rounds(binary, ["a", "b"], "pair")


@no_server
@tubed_only(EXT)
def test_ledger_catches_unsafe_acks(binary):
    """sync_replicas = 0 and the replica stopped: INSERTED goes out before
    the replica has the record (far more than the socket buffers hold), the
    primary is killed, the replica promoted: the checker must see the
    acknowledged jobs that are gone."""
    ledger = Ledger()
    rnd = random.Random(7)
    with Cluster(binary, "sync_replicas = 0\n") as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        r.sigstop()
        c = p.bs(timeout=20)
        c.use("L")
        big = 60000
        for i in range(800):                   # 48 MB of records
            b = b"<u-%d>" % i + rnd.randbytes(big)
            ledger.sent.add(b)
            c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(b), b))
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            check(m is not None, "put %d: %r" % (i, line))
            ledger.acked[int(m.group(1))] = b
        p.kill9()
        r.sigcont()
        wait_for(lambda: r.repl()["connected"] == "false",
                 "the replica to see its primary gone")
        eq(r.admin().cmd("promote", timeout=10), b"PROMOTED 2", "promote")
        problems = check_ledger(r.bs(timeout=20), ledger)
        lost = [x for x in problems if x.endswith("is lost")]
        check(lost, "the checker saw no loss after acknowledgements that went "
              "out before the replica had the records: %s" % problems[:5])
        check(len(lost) == len(problems), "other problems: %s"
              % [x for x in problems if x not in lost][:5])
        report("ledger: unsafe acks (sync_replicas 0, replica stopped): the "
               "checker reported %d of 800 acknowledged jobs lost" % len(lost))


@no_server
@tubed_only(EXT)
def test_ledger_checker_on_one_server(binary):
    """The checker without replication: one server with -f 0, the same
    clients, kill -9 and a restart from its binlog (where every
    acknowledgement is on disk): no problem reported (no false alarm), and
    every planted fault reported."""
    rnd = random.Random(11)
    ledger = Ledger()
    caught = {}
    with Cluster(binary) as cl:
        p = cl.node("one", "-f", "0")
        stop, threads, errors = _workload(p, ledger, rnd, 1.0)
        p.kill9()
        stop.set()
        for t in threads:
            t.join(30)
        check(not errors, "unexpected replies: %s" % errors[:5])
        check(ledger.acked and ledger.deleted and ledger.mc_stored,
              "the clients got no acknowledgement of each kind: %d puts, %d "
              "deletes, %d sets" % (len(ledger.acked), len(ledger.deleted),
                                   len(ledger.mc_stored)))
        p.restart()
        c = p.bs(timeout=20)
        snap = snapshot(c)
        problems = check_ledger(c, ledger, snap)
        check(not problems, "the checker on a server that lost nothing: %s"
              % problems[:10])
        if not any(j.tube == "mq" for j in snap.values()):
            # The getters took every item before the kill (a loaded machine
            # runs them ahead of the setters): store one, so that the faked
            # get has an item to be planted on.
            b = ledger.next_body(b"m", rnd)
            eq(p.mc(timeout=20).cmd(b"set mq 0 0 %d\r\n%s" % (len(b), b)),
               b"STORED", "a set for the faked get")
            ledger.mc_sent.add(b)
            ledger.mc_stored.add(b)
            snap = snapshot(c)
        _self_check(c, ledger, snap, rnd, caught)
        _plant_lost_job(c, ledger, rnd, caught)
        eq(sorted(caught), ["a changed body", "a faked DELETED", "a faked INSERTED",
                            "a faked STORED", "a faked get",
                            "a lost record on the server"], "planted faults caught")


@no_server
@tubed_only(EXT)
def test_ledger_promote_mid_resync(binary):
    """A pair, sync_replicas = 1: the replica is restarted and resyncs
    through a proxy that slows its snapshot; the primary dies while the
    snapshot is half-way (position 0) and the replica, the only one, is
    promoted: every change acknowledged before is there (nothing new was
    acknowledged meanwhile: the only replica had not reached E)."""
    from repl_util import Proxy, body, put_many
    ledger = Ledger()
    with Cluster(binary, CONF) as cl:
        p = cl.node("p", "-f", "0")
        proxy = Proxy(p.port)
        try:
            r = cl.node("r", "-f", "0", replica_of=proxy.addr)
            c = p.bs(timeout=20)
            c.use("L")
            bodies = [body("mr", i, 1500) for i in range(3000)]
            ledger.sent.update(bodies)
            ids = put_many(c, bodies, batch=200)
            ledger.acked.update(zip(ids, bodies))
            for j in ids[::7]:
                c.expect("delete %d" % j, "DELETED")
                ledger.deleted.add(j)
            r.kill9()
            # Without its replication id it cannot go on from its position
            # (a partial resync): it asks for a snapshot.
            os.unlink(os.path.join(r.bdir, "replication-id"))
            proxy.rate = 10 ** 6               # 4.5 MB at 1 MB/s
            r.restart()
            wait_for(lambda: (lambda d: d["connected"] == "true" and
                              d["position"] == "0")(r.repl()),
                     "the replica's resync to begin", interval=0.01)
            # Changes now wait for the replica, which has not reached E.
            c.send(b"put 0 0 60 9\r\nunacked!!\r\n")
            ledger.sent.add(b"unacked!!")
            c.send(b"delete %d\r\n" % ids[1])
            ledger.deleting.add(ids[1])
            c.expect_silence(0.5)
            eq(r.repl()["position"], "0", "the replica is still in its "
               "snapshot just before the kill")
            p.kill9()
            wait_for(lambda: r.repl()["connected"] == "false",
                     "the replica to see its primary gone")
            eq(r.admin().cmd("promote", timeout=10), b"PROMOTED 2", "promote")
            problems = check_ledger(r.bs(timeout=20), ledger)
            check(not problems, "after promoting a replica mid-resync: %d "
                  "problem(s): %s" % (len(problems), "; ".join(problems[:10])))
        finally:
            proxy.close()
