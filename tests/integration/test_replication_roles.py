"""Changing roles: promote, follow, epochs (replication.md §4).

- promote on a primary answers its epoch and changes nothing, as often as
  asked; on a replica it starts epoch + 1 at once, the server takes writes
  with ids above every id it has seen, the jobs the old primary had
  reserved are ready, and its timers run from the replicated deadlines.
- follow: a former primary (with an unreplicated tail) follows the
  promoted one, refuses writes from the reply on, ends with exactly the
  new primary's jobs and counts discarded-records; a replica switches to
  another primary.
- Epoch fencing: a server never follows a primary of a lower epoch
  (connected false, last-error says so, its jobs stay).
- promote and follow from a non-loopback address answer NOT_ALLOWED
  (tested inside a network namespace made by the test, where a client can
  have a non-loopback source), and allow_remote_admin opens them.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import harness
from harness import check, eq, no_server, tubed_only, unq
from repl_util import (EXT, Cluster, assert_converged, assert_same, body,
                       put_many, report, reserve_job, rint, snapshot,
                       wait_caught_up, wait_for)

SERVER = "none"
HERE = os.path.dirname(os.path.abspath(__file__))


def _promoted(c, epoch, what):
    line = c.cmd("promote", timeout=10)
    eq(line, b"PROMOTED %d" % epoch, "%s: promote" % what)


@no_server
@tubed_only(EXT)
def test_promote_on_a_primary_changes_nothing(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs()
        jid = c.put(b"stays")
        before = snapshot(c)
        for i in range(3):
            _promoted(c, 1, "primary, time %d" % (i + 1))
        d = p.repl()
        eq((unq(d["role"]), d["epoch"]), ("primary", "1"), "role and epoch")
        assert_same(before, snapshot(c), "jobs after promote on a primary",
                    "before", "after", replica_side=False)
        nxt = c.put(b"next")
        check(nxt > jid, "a put after promote: id %d after %d" % (nxt, jid))
        plain = cl.node("plain", bdir=False)
        _promoted(plain.bs(), 1, "a primary without -b")


@no_server
@tubed_only(EXT)
def test_promote_a_replica(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("t")
        ids = put_many(c, [body("pro", i) for i in range(50)],
                       delay=[0] * 49 + [4])
        timed = ids[-1]                       # becomes ready on a timer
        w = p.bs()
        w.watch("t")
        held = ids[:5]
        for j in held:
            reserve_job(w, j)                 # reserved on the old primary
        last = c.put(b"the highest id")
        c.expect("delete %d" % last, "DELETED")   # its id was still seen
        wait_caught_up(p, r)
        want = snapshot(p.admin())
        del want[timed]
        # A promoted replica serves as the primary at once (replication.md):
        # its first put is answered INSERTED, not DRAINING and not held for
        # replicas or a primary it no longer has (held, it never comes: the
        # read's deadline ends the test).  The time it took is a figure for
        # the report, not a claim: a loaded machine takes longer.
        rc = r.bs(timeout=30)
        t0 = time.monotonic()
        _promoted(rc, 2, "replica")
        rc.use("t")
        jid = rc.put(b"first write of epoch 2", pri=1000)
        dt = time.monotonic() - t0
        report("promote to first answered put: %.1f ms" % (dt * 1000))
        check(jid > last, "the first id of the promoted server (%d) is not "
              "above every id it has seen (%d)" % (jid, last))
        _promoted(rc, 2, "promoted replica, asked again")
        d = r.repl()
        eq((unq(d["role"]), d["epoch"], unq(d["primary"])),
           ("primary", "2", ""), "role, epoch, primary after promote")
        got = snapshot(r.admin())
        del got[jid], got[timed]
        assert_same(want, got, "the promoted replica's jobs",
                    "old primary", "promoted", replica_side=False)
        for j in held:
            eq(unq(rc.stats_job(j)["state"]), "ready",
               "job %d, reserved on the old primary" % j)
        ww = r.bs()
        ww.watch("t")
        ww.ignore("default")
        got_id, got_body = ww.reserve(5)
        eq(got_id, held[0], "the promoted server hands out the jobs")
        # The delayed job's 4 s run out on the promoted server's timers.
        wait_for(lambda: unq(rc.stats_job(timed)["state"]) == "ready",
                 "the delayed job to become ready on the promoted server")
        # It no longer follows the old primary.
        n = len(snapshot(r.admin()))
        c.put(b"not for r")
        time.sleep(1.0)
        after = snapshot(r.admin())
        eq(len(after), n, "jobs on the promoted server after a put on the "
           "old primary")
        check(all(j.body != b"not for r" for j in after.values()),
              "a put on the old primary reached the promoted server")
        eq(rint(r.repl(), "connected-replicas"), 0, "connected-replicas")


@no_server
@tubed_only(EXT)
def test_former_primary_follows_and_discards_its_tail(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        put_many(c, [body("old", i) for i in range(40)], delay=[0, 0, 600, 0] * 10)
        wait_caught_up(p, r)
        rc = r.bs()
        _promoted(rc, 2, "replica")
        # The old primary goes on taking writes for a while: its tail.
        tail = put_many(c, [body("tail", i) for i in range(15)])
        c.expect("delete 3", "DELETED")
        # The new primary takes its own.
        rc.use("new")
        put_many(rc, [body("new", i) for i in range(20)])
        rc.expect("delete 4", "DELETED")
        eq(c.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        # From the reply on, the former primary refuses writes.
        c.send(b"put 0 0 60 4\r\nlate\r\n")
        eq(c.read_line(), b"DRAINING", "put on the former primary after follow")
        wait_caught_up(r, p)
        assert_converged(r, p, "the former primary after follow")
        d = p.repl()
        eq((unq(d["role"]), d["epoch"], unq(d["primary"])),
           ("replica", "2", r.addr), "role, epoch, primary after follow")
        check(rint(d, "discarded-records") >= 15, "discarded-records after "
              "dropping 15 puts and a delete: %s" % d["discarded-records"])
        tails = [j for j in snapshot(p.admin()).values() if j.body.startswith(b"<tail-")]
        eq(tails, [], "jobs of the discarded tail on the former primary")
        # It keeps following.
        jid = rc.put(b"after the follow")
        wait_caught_up(r, p)
        eq(p.bs().peek("peek %d" % jid), (jid, b"after the follow"),
           "a put on the new primary reaches the former one")


@no_server
@tubed_only(EXT)
def test_replica_switches_primary(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("sw", i) for i in range(30)])
        wait_caught_up(p, r1, r2)
        _promoted(r1.bs(), 2, "r1")
        c2 = r2.bs()
        eq(c2.cmd("follow %s" % r1.addr, timeout=10), b"FOLLOWING", "follow on r2")
        put_many(r1.bs(), [body("sw2", i) for i in range(10)])
        wait_caught_up(r1, r2)
        assert_converged(r1, r2, "r2 after switching to r1")
        d = r2.repl()
        eq((unq(d["primary"]), d["epoch"]), (r1.addr, "2"), "r2's primary, epoch")
        eq(rint(r1.repl(), "connected-replicas"), 1, "r1's connected-replicas")


@no_server
@tubed_only(EXT)
def test_epoch_fencing(binary):
    """r2 has followed r1 into epoch 2; told to follow the old primary
    (epoch 1), it never connects, says why, and keeps its jobs."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        put_many(p.bs(), [body("ep", i) for i in range(20)])
        wait_caught_up(p, r1, r2)
        _promoted(r1.bs(), 2, "r1")
        c2 = r2.bs()
        eq(c2.cmd("follow %s" % r1.addr, timeout=10), b"FOLLOWING", "follow r1")
        wait_caught_up(r1, r2)
        eq(r2.repl()["epoch"], "2", "r2's epoch after following r1")
        before = snapshot(r2.admin())
        put_many(p.bs(), [body("stale", i) for i in range(5)])  # epoch 1 writes
        eq(c2.cmd("follow %s" % p.addr, timeout=10), b"FOLLOWING",
           "follow the stale primary (accepted; the handshake fences)")
        wait_for(lambda: "epoch" in unq(r2.repl()["last-error"]).lower(),
                 lambda: "last-error to mention the epoch: %r" % r2.repl())
        time.sleep(2.5)                       # it retries; never follows
        d = r2.repl()
        eq((d["connected"], d["epoch"]), ("false", "2"),
           "r2 told to follow a lower epoch: connected, epoch")
        assert_same(before, snapshot(r2.admin()), "r2's jobs after being "
                    "told to follow a lower epoch", "before", "after")
        check("epoch" in r2.stderr().lower(), "r2 logs why it does not "
              "follow: %r" % r2.stderr()[-600:])
        # The old primary restarted is still fenced.
        p.kill9()
        p.restart()
        time.sleep(2.5)
        eq(r2.repl()["connected"], "false", "r2 after the old primary's restart")
        assert_same(before, snapshot(r2.admin()), "r2's jobs", "before", "after")


def _in_namespace(binary, flags, why, *args):
    """repl_netns.py run under `unshare FLAGS` (a namespace of its own that
    vanishes with it): its JSON output. Skips where namespaces cannot be
    made."""
    unshare = shutil.which("unshare")
    ip = shutil.which("ip")
    if not unshare or not ip or os.geteuid() != 0:
        raise harness.Skip("needs root, unshare and ip " + why)
    d = tempfile.mkdtemp(prefix="tubed-repl-ns-")
    try:
        r = subprocess.run([unshare] + flags + [sys.executable,
                            os.path.join(HERE, "repl_netns.py"), binary, d] + list(args),
                           capture_output=True, timeout=90)
        if r.returncode != 0 and b"unshare" in r.stderr[:200]:
            raise harness.Skip("unshare %s failed: %r" % (" ".join(flags), r.stderr[:200]))
        check(r.returncode == 0, "repl_netns.py %s: %r %r" % (" ".join(args), r.stdout[-500:],
                                                              r.stderr[-800:]))
        return json.loads(r.stdout.decode())
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_admin_from_a_remote_address(binary):
    out = _in_namespace(binary, ["-n"], "to make a network namespace where a "
                        "client has a non-loopback address")
    eq(out["remote_plain"], "USING default", "a plain command from "
       "10.9.0.2 (the namespace works)")
    eq(out["remote_promote"], "NOT_ALLOWED", "promote from 10.9.0.2")
    eq(out["remote_follow"], "NOT_ALLOWED", "follow from 10.9.0.2")
    check(out["role_after"].startswith("INSERTED"), "a put after the "
          "refused follow (still a primary): %r" % out["role_after"])
    eq(out["local_promote"], "PROMOTED 1", "promote from 127.0.0.1")
    eq(out["loopback2_promote"], "PROMOTED 1", "promote from 127.0.0.2 (a loopback "
       "address: this host)")
    eq(out["reload_true_promote"], "PROMOTED 1", "promote from 10.9.0.2 after a reload "
       "setting allow_remote_admin = true")
    eq(out["reload_false_promote"], "NOT_ALLOWED", "promote from 10.9.0.2 after a "
       "reload setting allow_remote_admin = false")
    eq(out["open_promote"], "PROMOTED 1", "promote from 10.9.0.2 with "
       "allow_remote_admin = true")
    check("10.9.0.2" in out["log"], "the refused attempt is logged with "
          "its address: %r" % out["log"][-800:])


@no_server
@tubed_only(EXT)
def test_replica_of_a_name_tries_each_address(binary):
    """A primary's name may resolve to several addresses (IPv6 and IPv4,
    say) while the primary listens on one: the replica tries the next
    address when one refuses, as clients do, instead of the first for
    ever. In a namespace whose /etc/hosts gives the name two addresses."""
    out = _in_namespace(binary, ["-m", "-n"], "for a namespace with its own "
                        "/etc/hosts", "names")
    if len(out["order"]) < 2:
        raise harness.Skip("the resolver gave one address for two hosts "
                           "lines: %r" % out["order"])
    eq(out["put"], "INSERTED 1", "the put on the primary at %s" % out["order"][1])
    check(out["peek"].startswith("FOUND 1"), "the replica of twohomed has the "
          "job (it tried %s, refused, then %s): %r; log %s"
          % (out["order"][0], out["order"][1], out["peek"], out["log"][-1500:]))


@no_server
@tubed_only(EXT)
def test_cli_replication_promote_follow(binary):
    """tubed-cli replication (text and --json), promote, follow."""
    from cli_util import cli_path, run_cli
    cli_path(binary)
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        run = run_cli(binary, r.port, "replication")
        run.ok()
        check("replica" in run.text and p.addr in run.text,
              "tubed-cli replication on the replica: %r" % run.text[:400])
        run = run_cli(binary, r.port, "--json", "replication")
        run.ok()
        d = run.json()
        eq((d.get("role"), d.get("primary")), ("replica", p.addr),
           "tubed-cli --json replication: %r" % d)
        run = run_cli(binary, r.port, "promote")
        run.ok()
        check("2" in run.text, "tubed-cli promote: %r" % run.text)
        eq(r.repl()["epoch"], "2", "epoch after tubed-cli promote")
        run = run_cli(binary, p.port, "follow", r.addr)
        run.ok()
        wait_caught_up(r, p)
        eq(unq(p.repl()["role"]), "replica", "role after tubed-cli follow")


@no_server
@tubed_only(EXT)
def test_follow_with_a_bad_address_changes_nothing(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        c = p.bs()
        bad = []
        for addr in ("nohost", "1.2.3.4:", ":11300", "1.2.3.4:99999",
                     "1.2.3.4:0", "[::1", "[::1]", "unix:", "1.2.3.4:11300x"):
            line = c.cmd("follow %s" % addr, timeout=10)
            if line == b"FOLLOWING":
                bad.append(addr)
                break
        check(not bad, "follow %s answered FOLLOWING" % bad)
        eq(unq(p.repl()["role"]), "primary", "role after the refused follows")
        c.put(b"still a primary")


@no_server
@tubed_only(EXT)
def test_no_chains(binary):
    """A server told to follow a replica does not (NOT_PRIMARY): it stays
    unconnected and says why; the replica is unaffected."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        wait_caught_up(p, r)
        r2 = cl.node("r2", "-f", "0", replica_of=r)
        wait_for(lambda: unq(r2.repl()["last-error"]),
                 lambda: "r2's last-error: %r" % r2.repl())
        time.sleep(1.5)
        eq(r2.repl()["connected"], "false", "r2 following a replica: connected")
        jid = p.bs().put(b"x")
        wait_caught_up(p, r)
        eq(r.bs().peek("peek %d" % jid), (jid, b"x"), "r still follows p")


@no_server
@tubed_only(EXT)
def test_follow_drops_reservations(binary):
    """A worker's reservation on a primary that is told to follow: its
    delete and touch answer DRAINING from then on, and the job is wherever
    the new primary has it."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        jid = c.put(b"reserved at the switch")
        wait_caught_up(p, r)
        w = p.bs()
        got, _ = w.reserve(5)
        eq(got, jid, "reserved")
        eq(r.bs().cmd("promote", timeout=10), b"PROMOTED 2", "promote r")
        eq(c.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        w.expect("touch %d" % jid, "DRAINING")
        w.expect("delete %d" % jid, "DRAINING")
        wait_caught_up(r, p)
        assert_converged(r, p, "after the switch")
        eq(unq(p.bs().stats_job(jid)["state"]), "ready", "the job on p")


@no_server
@tubed_only(EXT)
def test_cut_off_primary_cannot_acknowledge(binary):
    """sync_replicas = 1, a trio: r1 is promoted and r2 follows it while
    the old primary still runs (a partition): a put on the old primary is
    never acknowledged, and once it follows r1 that put is gone."""
    with Cluster(binary, "sync_replicas = 1\n") as cl:
        p = cl.node("p", "-f", "0")
        r1 = cl.node("r1", "-f", "0", replica_of=p)
        r2 = cl.node("r2", "-f", "0", replica_of=p)
        c = p.bs()
        c.put(b"before the split")
        wait_caught_up(p, r1, r2)
        eq(r1.bs().cmd("promote", timeout=10), b"PROMOTED 2", "promote r1")
        eq(r2.bs().cmd("follow %s" % r1.addr, timeout=10), b"FOLLOWING",
           "r2 follows r1")
        wait_caught_up(r1, r2)
        c.send(b"put 0 0 60 10\r\nsplit put!\r\n")
        c.expect_silence(2.5)
        # The new pair takes writes.
        jid = r1.bs().put(b"on the new primary")
        eq(p.admin().cmd("follow %s" % r1.addr, timeout=10), b"FOLLOWING",
           "the old primary follows r1")
        wait_caught_up(r1, p)
        snap = assert_converged(r1, p, "the old primary after the split")
        check(all(j.body != b"split put!" for j in snap.values()),
              "the unacknowledged put of the cut-off primary survived")
        check(jid in snap, "the new primary's job")
        try:
            line = c.read_line(timeout=2)
        except harness.TestFailure:
            line = None
        check(line is None or not line.startswith(b"INSERTED"),
              "the cut-off primary acknowledged a put: %r" % line)


@no_server
@tubed_only(EXT)
def test_follow_between_a_puts_line_and_its_body(binary):
    """A put whose line came before follow and whose body comes after
    answers DRAINING (memcache: SERVER_ERROR replica), and the job is not
    made; an open memcache job goes back."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        m0 = p.mc()
        m0.store("q", b"opened at the switch")
        wait_caught_up(p, r)
        eq(m0.get("q/open"), b"opened at the switch", "get q/open")
        eq(r.bs().cmd("promote", timeout=10), b"PROMOTED 2", "promote r")
        c = p.bs()
        c.send(b"put 0 0 60 10\r\n")
        m = p.mc()
        m.send(b"set q 0 0 10\r\n")
        time.sleep(0.3)
        eq(p.admin().cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        c.send(b"0123456789\r\n")
        eq(c.read_line(), b"DRAINING", "the put's reply")
        m.send(b"0123456789\r\n")
        eq(m.read_line(), b"SERVER_ERROR replica", "the set's reply")
        wait_caught_up(r, p)
        snap = assert_converged(r, p, "after follow")
        check(all(j.body != b"0123456789" for j in snap.values()),
              "the put or set made a job")
        eq([j.state for j in snap.values()], ["ready"], "the opened job")


@no_server
@tubed_only(EXT)
def test_ping_pong_failovers(binary):
    """Two servers swap roles six times, with writes (and a job held
    reserved) between the swaps: the epoch goes up by one each time, and
    after each swap the follower converges to the new primary."""
    with Cluster(binary) as cl:
        a = cl.node("a", "-f", "0")
        b = cl.node("b", "-f", "0", replica_of=a)
        primary, other = a, b
        for k in range(6):
            c = primary.bs()
            c.use("pp")
            put_many(c, [body("pp%d" % k, i, 300) for i in range(40)],
                     delay=[0, 0, 0, 900] * 10)
            c.expect("delete %d" % (c.put(b"gone %d" % k)), "DELETED")
            w = primary.bs()
            w.watch("pp")
            w.reserve(5)                       # held across the swap
            wait_caught_up(primary, other)
            assert_converged(primary, other, "swap %d: before" % k)
            eq(other.admin().cmd("promote", timeout=10),
               b"PROMOTED %d" % (k + 2), "swap %d: promote %s" % (k, other.name))
            eq(primary.admin().cmd("follow %s" % other.addr, timeout=10),
               b"FOLLOWING", "swap %d: follow on %s" % (k, primary.name))
            primary, other = other, primary
            wait_caught_up(primary, other)
            assert_converged(primary, other, "swap %d: after" % k)
            eq(other.repl()["epoch"], "%d" % (k + 2), "swap %d: the follower's "
               "epoch" % k)


# --------------------------------------------------- expiry after promotion

AGED_CONF = """\
[tube aged]
max_age = 6s
"""
# The window: the primary must be stopped before its own timers expire
# what the replica has to keep (a slow, sanitized run may miss it: skip).
WINDOW = 6.0


def _past_window(t0, what):
    """Wait until WINDOW (and a half second) after t0."""
    if time.monotonic() - t0 > WINDOW - 0.5:
        raise harness.Skip("%s took over %.1f s to set up" % (what, WINDOW - 0.5))
    time.sleep(t0 + WINDOW + 0.5 - time.monotonic())


def _ready(c, tube):
    """Ready jobs of a tube; 0 once it is gone (emptied and unused)."""
    if tube not in c.list_tubes():
        return 0
    try:
        return rint(c.stats_tube(tube), "current-jobs-ready")
    except Exception:               # NOT_FOUND: gone since list-tubes
        if tube in c.list_tubes():
            raise
        return 0


@no_server
@tubed_only(EXT)
def test_promoted_replica_expires_max_age(binary):
    """A replica expires nothing while it follows (its primary's records
    do that); promoted, its own timers expire what max_age makes due,
    with no client looking the jobs up."""
    with Cluster(binary, conf=AGED_CONF) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        c = p.bs()
        c.use("aged")
        t0 = time.monotonic()
        put_many(c, [body("aged", i) for i in range(5)])
        wait_caught_up(p, r)
        p.sigstop()                 # its expiry records would reach r
        _past_window(t0, "the puts and the catch-up")
        rc = r.bs()
        eq(_ready(rc, "aged"), 5, "jobs past max_age on a replica")
        _promoted(rc, 2, "replica")
        wait_for(lambda: _ready(rc, "aged") == 0,
                 "the promoted server's timers to expire the aged jobs")
        p.sigcont()


@no_server
@tubed_only(EXT)
def test_promoted_replica_expires_items(binary):
    """The same for a memcache item's own expiry, with no max_age anywhere:
    promoted, the replica's timers drop the item when it is due."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        m = p.mc()
        t0 = time.monotonic()
        m.store("q", b"expires", exptime=int(WINDOW))
        m.store("q", b"stays")
        wait_caught_up(p, r)
        p.sigstop()
        _past_window(t0, "the stores and the catch-up")
        rc = r.bs()
        eq(_ready(rc, "q"), 2, "items past their expiry on a replica")
        _promoted(rc, 2, "replica")
        wait_for(lambda: _ready(rc, "q") == 1,
                 "the promoted server's timers to expire the item")
        eq(r.mc().get("q"), b"stays", "the item left")
        p.sigcont()


@no_server
@tubed_only(EXT)
def test_former_primary_promoted_again_expires_items(binary):
    """An item stored with an expiry on a primary that then follows (and
    resumes from the new primary's backlog, keeping its jobs) expires on
    its timers once it is promoted again."""
    with Cluster(binary) as cl:
        a = cl.node("a", "-f", "0")
        b = cl.node("b", "-f", "0", replica_of=a)
        t0 = time.monotonic()
        a.mc().store("q", b"expires", exptime=int(WINDOW))
        a.mc().store("q", b"stays")
        wait_caught_up(a, b)
        bc = b.bs()
        _promoted(bc, 2, "b")
        ac = a.bs()
        eq(ac.cmd("follow %s" % b.addr, timeout=10), b"FOLLOWING", "a follows b")
        if time.monotonic() - t0 > WINDOW - 0.5:   # a may have expired it
            raise harness.Skip("the store, promote and follow took over %.1f s"
                               % (WINDOW - 0.5))
        wait_caught_up(b, a)
        eq(_ready(ac, "q"), 2, "a's items while it follows")
        b.sigstop()
        time.sleep(max(0.0, t0 + WINDOW + 0.5 - time.monotonic()))
        eq(_ready(ac, "q"), 2, "a's items past their expiry while it follows")
        _promoted(ac, 3, "a again")
        wait_for(lambda: _ready(ac, "q") == 1,
                 "a's timers to expire the item once promoted again")
        b.sigcont()


@no_server
@tubed_only(EXT)
def test_put_whose_body_spans_a_follow_is_refused(binary):
    """A put whose command came while the server was a primary and whose
    body ends after follow made it a replica: DRAINING, as any write on a
    replica (spec/replication.md section 2), never INSERTED."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0")
        c, admin = p.bs(), p.bs()
        c.send(b"put 0 0 60 4\r\nla")
        eq(admin.cmd("stats-job 1"), b"NOT_FOUND", "nothing put yet (the body is not in)")
        eq(admin.cmd("follow %s" % r.addr, timeout=10), b"FOLLOWING", "follow")
        c.send(b"te\r\n")
        eq(c.read_line(), b"DRAINING", "the put whose body ended on a replica")
