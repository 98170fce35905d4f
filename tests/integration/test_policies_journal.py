"""Tube policies and the binlog: journal = false, sync_journal = true,
expiry across restarts, and the previous release's binlog (version 1).

Every test uses its own binlog directory, kills its server with SIGKILL by
pid where it says so, and restarts it on the same directory.
"""

import os
import shutil
import struct
import tempfile
import time

import harness
from harness import check, eq, no_server, slow, unq
from binlog_util import crc32c, find_body, parse_dir
from policy_util import (Policy, build_gate, gate_env, job_stats, job_where,
                         present, put_id, put_line, reserve_job, sleep_until,
                         tube_counts, wait_for)


# ------------------------------------------------------------ journal = false

@no_server
def test_journal_false_jobs_gone_after_kill9(binary):
    """journal = false: exactly that tube's jobs are gone after kill -9 and
    a restart, the others are back; the tube's ids are never given out
    again (also when the last ids given were its own)."""
    conf = "[tube mem]\njournal = false\n"
    with Policy(binary, conf, bdir=True) as p:
        c = p.srv.client()
        a = put_id(c, b"<disk-default>")
        c.use("disk")
        d = put_id(c, b"<disk-tube>", delay=3600)
        c.use("mem")
        m1 = put_id(c, b"<mem-1>")
        m2 = put_id(c, b"<mem-2>", delay=3600)
        c.watch("mem")
        m3 = put_id(c, b"<mem-3>")
        reserve_job(c, m3)
        c.expect("bury %d 0" % m3, "BURIED")
        m4 = put_id(c, b"<mem-4>")            # the highest id given out
        files = parse_dir(p.bdir)
        for body in (b"<mem-1>", b"<mem-2>", b"<mem-3>", b"<mem-4>"):
            eq(find_body(files, body), [], "binlog records holding %r" % body)
        check(find_body(files, b"<disk-tube>"), "the disk tube's job is in the binlog")
        p.kill9()
        p.restart()
        c = p.srv.client()
        eq(c.peek("peek %d" % a), (a, b"<disk-default>"), "default's job after restart")
        eq(job_where(c, d), ("disk", "delayed"), "disk's job after restart")
        for m in (m1, m2, m3, m4):
            eq(present(c, m), False, "mem's job %d after restart" % m)
        eq("mem" in c.list_tubes(), False, "list-tubes after restart: %r" % c.list_tubes())
        n = put_id(c, b"new")
        check(n > m4, "first id after the restart is %d: ids up to %d were given "
              "out before (journal = false ids must not be reused)" % (n, m4))


@no_server
def test_journal_false_ids_not_reused_after_clean_restart(binary):
    """The same after a clean stop (SIGTERM): ids given to a journal = false
    tube's jobs are never given out again."""
    with Policy(binary, "[tube mem]\njournal = false\n", bdir=True) as p:
        c = p.srv.client()
        put_id(c, b"disk")
        c.use("mem")
        last = max(put_id(c, b"m%d" % i) for i in range(3))
        problems = p.stop()
        check(not problems, "; ".join(problems))
        p.restart()
        c = p.srv.client()
        n = put_id(c, b"new")
        check(n > last, "first id after a clean restart is %d: ids up to %d were "
              "given out before" % (n, last))


@no_server
def test_journal_false_moves(binary):
    """A job expiring out of a journal = false tube into a journaled one is
    journaled from then on; one moving into a journal = false tube leaves
    the binlog (it does not come back in its old tube)."""
    conf = ("[tube mem]\njournal = false\nmax_age = 1s\nmove_expired_to = disk\n"
            "[tube src]\nmax_age = 1s\nmove_expired_to = mem2\n"
            "[tube mem2]\njournal = false\n")
    with Policy(binary, conf, bdir=True) as p:
        c = p.srv.client()
        c.use("mem")
        a = put_id(c, b"<a>", pri=4)
        c.use("src")
        b = put_id(c, b"<b>", pri=6)
        wait_for(lambda: job_where(c, a) == ("disk", "ready"), "a to move to disk")
        wait_for(lambda: job_where(c, b) == ("mem2", "ready"), "b to move to mem2")
        p.kill9()
        p.restart()
        c = p.srv.client()
        eq(job_where(c, a), ("disk", "ready"), "a (moved into a journaled tube) after restart")
        eq(job_stats(c, a)["pri"], "4", "a's priority after restart")
        eq(present(c, b), False, "b (moved into a journal = false tube) after restart")


# ------------------------------------------------------------ sync_journal

@no_server
def test_sync_journal_survives_kill9(binary):
    """-f 60000 (sync rarely): a sync_journal tube's jobs are back after a
    kill -9 right after INSERTED."""
    conf = "[tube s]\nsync_journal = true\n"
    with Policy(binary, conf, "-f", "60000", bdir=True) as p:
        ids = {}
        for round_ in range(3):
            c = p.srv.client()
            c.use("s")
            for i in range(3):
                body = b"<s-%d-%d>" % (round_, i)
                ids[put_id(c, body)] = body
            p.kill9()
            p.restart()
            c = p.srv.client()
            for j, body in sorted(ids.items()):
                eq(c.peek("peek %d" % j), (j, body), "sync_journal job %d after kill -9" % j)


@no_server
def test_sync_journal_holds_reply_until_synced(binary):
    """sync_journal = true: the reply waits until the record is on disk,
    whatever -f says.  An LD_PRELOAD shim holds fdatasync/fsync while a
    gate file exists: the INSERTED of a put into the sync_journal tube must
    not arrive before the gate opens."""
    shim_dir = tempfile.mkdtemp(prefix="tubed-gate-")
    try:
        so, gdir = build_gate(shim_dir)
        conf = "[tube s]\nsync_journal = true\n"
        with Policy(binary, conf, "-f", "60000", bdir=True, env=gate_env(so, gdir)) as p:
            c = p.srv.client()
            put_id(c, b"warm-up")                 # default tube: not synced
            closed = os.path.join(gdir, "closed")
            open(closed, "w").close()
            try:
                s = p.srv.client()
                s.use("s")
                s.send(b"put 0 0 60 4\r\nsync\r\n")
                # Nothing may arrive while the disk sync is held.
                s.expect_silence(1.5)
            finally:
                os.unlink(closed)
            line = s.read_line(timeout=30)
            check(line.startswith(b"INSERTED "), "put into s: %r" % line)
            check(os.path.exists(os.path.join(gdir, "waited")),
                  "no fdatasync/fsync waited at the gate: the sync_journal put "
                  "was acknowledged without a disk sync")
            # Other commands still work while a sync is held (loop not blocked).
            open(closed, "w").close()
            try:
                s.send(b"put 0 0 60 5\r\nsync2\r\n")
                c.expect("list-tube-used", "USING default")
            finally:
                os.unlink(closed)
            line = s.read_line(timeout=30)
            check(line.startswith(b"INSERTED "), "second put into s: %r" % line)
            jid = int(line.split()[1])
            # Every change, not only put: a delete waits for the sync too.
            open(closed, "w").close()
            try:
                s.send(b"delete %d\r\n" % jid)
                s.expect_silence(1.5)
            finally:
                os.unlink(closed)
            eq(s.read_line(timeout=30), b"DELETED", "delete in s")
            # A job moved out of s into an ordinary tube is a change to s
            # too: its MOVED waited for no sync (the record is the target's).
            mid = put_id(s, b"moving")
            open(closed, "w").close()
            try:
                s.send(b"move-job %d default\r\n" % mid)
                s.expect_silence(1.5)
            finally:
                os.unlink(closed)
            eq(s.read_line(timeout=30), b"MOVED", "move-job out of s")
    finally:
        shutil.rmtree(shim_dir, ignore_errors=True)


# ------------------------------------------------------------ expiry and restarts

@slow
@no_server
def test_expiry_while_down_is_not_served(binary):
    """A job that expired while the server was down (kill -9) is not served
    after the restart, in any state; a job with time left is."""
    conf = "[tube e]\nmax_age = 3s\n[tube long]\nmax_age = 1h\n"
    with Policy(binary, conf, bdir=True) as p:
        c = p.srv.client()
        c.use("e")
        c.watch("e")
        r = put_id(c, b"r")
        d = put_id(c, b"d", delay=3600)
        b = put_id(c, b"b")
        reserve_job(c, b)
        c.expect("bury %d 0" % b, "BURIED")
        t_put = time.monotonic()
        c.use("long")
        keep = put_id(c, b"keep")
        p.kill9()
        sleep_until(t_put + 4.5)
        p.restart()
        c = p.srv.client()
        for j in (r, d, b):
            eq(present(c, j), False, "job %d of e (max_age 3s) after 4.5 s down" % j)
        eq(tube_counts(c, "e")[:5], (0, 0, 0, 0, 0), "stats-tube e after restart")
        c.watch("e")
        c.ignore("default")
        c.expect("reserve-with-timeout 0", "TIMED_OUT")
        eq(job_where(c, keep), ("long", "ready"), "the job with an hour left")


@slow
@no_server
def test_expiry_clock_of_moved_job_survives_restart(binary):
    """The clock restarted by move_expired_to is what the binlog keeps:
    A (max_age 6s) -> B (max_age 8s).  The job is put at t, moves at t+6
    and expires from B at t+14; a restart at t+9 must still serve it from B
    (counted from the put, it would be gone since t+8)."""
    conf = "[tube A]\nmax_age = 6s\nmove_expired_to = B\n[tube B]\nmax_age = 8s\n"
    with Policy(binary, conf, bdir=True) as p:
        c = p.srv.client()
        c.use("A")
        t_put = time.monotonic()
        j = put_id(c, b"j", pri=3)
        wait_for(lambda: job_where(c, j) == ("B", "ready"), "the job to move to B")
        p.kill9()
        sleep_until(t_put + 9.0)
        p.restart()
        c = p.srv.client()
        eq(job_where(c, j), ("B", "ready"), "the moved job right after the restart")
        eq(job_stats(c, j)["pri"], "3", "its priority")
        wait_for(lambda: not present(c, j), "the job to expire from B")


# ------------------------------------------------------------ version-1 binlog

def _v1_header():
    h = b"TUBEDLOG" + struct.pack("<I", 1)
    return h + struct.pack("<I", crc32c(h))


def _rec(payload):
    return struct.pack("<II", len(payload), crc32c(payload)) + payload


def _v1_job(jid, tube, body, pri=0, delay=0, ttr=60, state=0, deadline=0,
            created=0, counters=(0, 0, 0, 0, 0)):
    return _rec(b"J" + struct.pack("<QIIIBqq", jid, pri, delay, ttr, state,
                                   deadline, created)
                + struct.pack("<5I", *counters)
                + bytes([len(tube)]) + tube + struct.pack("<I", len(body)) + body)


def _v1_state(jid, pri, delay, state, deadline, counters):
    return _rec(b"S" + struct.pack("<QIIBq", jid, pri, delay, state, deadline)
                + struct.pack("<5I", *counters))


def _v1_delete(jid):
    return _rec(b"D" + struct.pack("<Q", jid))


@no_server
def test_version1_binlog_replays(binary):
    """A binlog written by the previous release (version 1: J, S and D
    records only) replays under a config file: jobs, states, priorities,
    counters and the next id."""
    now = time.time_ns()
    data = (_v1_header()
            + _v1_job(1, b"default", b"one", pri=5, ttr=10, created=now - 10**10)
            + _v1_job(2, b"old", b"two", pri=1, ttr=20, created=now - 10**10)
            + _v1_state(2, 7, 0, 3, 0, (1, 0, 0, 1, 0))         # buried
            + _v1_job(3, b"old", b"three", created=now)
            + _v1_delete(3)
            + _v1_job(4, b"old", b"four", delay=3600, ttr=30, state=2,
                      deadline=now + 3600 * 10**9, created=now)
            + _v1_job(7, b"old", b"\x00seven\r\n", pri=2**32 - 1, created=now,
                      counters=(3, 1, 2, 0, 1))
            + b"\0" * 64)
    conf = "[tube unrelated]\nmax_items = 1\n"
    with Policy(binary, conf, bdir=True) as p:
        # Replace the fresh server's files with the old release's.
        p.stop()
        for f in os.listdir(p.bdir):
            if f.startswith("binlog."):
                os.unlink(os.path.join(p.bdir, f))
        with open(os.path.join(p.bdir, "binlog.1"), "wb") as f:
            f.write(data)
        for round_ in ("first start", "after SIGTERM", "after kill -9"):
            if round_ == "after SIGTERM":
                problems = p.stop()
                check(not problems, "; ".join(problems))
            elif round_ == "after kill -9":
                p.kill9()
            p.restart()
            c = p.srv.client()
            eq(c.peek("peek 1"), (1, b"one"), "%s: job 1" % round_)
            st = job_stats(c, 1)
            eq((unq(st["tube"]), unq(st["state"]), st["pri"], st["ttr"]),
               ("default", "ready", "5", "10"), "%s: job 1" % round_)
            st = job_stats(c, 2)
            eq((unq(st["tube"]), unq(st["state"]), st["pri"], st["reserves"], st["buries"]),
               ("old", "buried", "7", "1", "1"), "%s: job 2 (J then S)" % round_)
            eq(present(c, 3), False, "%s: job 3 (J then D)" % round_)
            st = job_stats(c, 4)
            eq((unq(st["state"]), st["delay"]), ("delayed", "3600"), "%s: job 4" % round_)
            check(int(st["time-left"]) > 3000, "%s: job 4 time-left %s" % (round_, st["time-left"]))
            eq(c.peek("peek 7"), (7, b"\x00seven\r\n"), "%s: job 7's body" % round_)
            st = job_stats(c, 7)
            eq([st[k] for k in ("pri", "reserves", "timeouts", "releases", "buries", "kicks")],
               ["4294967295", "3", "1", "2", "0", "1"], "%s: job 7" % round_)
            if round_ == "first start":
                eq(put_id(c, b"next"), 8, "first id after replaying ids up to 7")
            else:
                eq(c.peek("peek 8"), (8, b"next"), "%s: the job put after the replay" % round_)


# ------------------------------------------------------------ policy actions journaled

@no_server
def test_policy_actions_are_journaled(binary):
    """What a policy did is in the binlog, so a restart (kill -9) with a
    config file that no longer has the policy shows the same state: an
    expired job stays deleted, a moved one stays moved, a discarded one
    stays discarded, a dead letter stays buried."""
    conf = ("[tube e]\nmax_age = 1s\n"
            "[tube dl]\nmax_age = 1s\nmove_expired_to = dead\n"
            "[tube d]\nmax_items = 1\ndiscard_old_when_full = true\n"
            "[tube mt]\nmax_timeouts = 1\n")
    with Policy(binary, conf, bdir=True) as p:
        c = p.srv.client()
        c.use("e")
        e1 = put_id(c, b"expired")
        c.use("dl")
        x = put_id(c, b"moved", pri=11)
        c.use("d")
        d1 = put_id(c, b"discarded")
        d2 = put_id(c, b"kept")
        c.use("mt")
        c.watch("mt")
        m = put_id(c, b"dead-letter", ttr=1)
        reserve_job(c, m)
        wait_for(lambda: not present(c, e1), "e1 to expire")
        wait_for(lambda: job_where(c, x) == ("dead", "ready"), "x to move to dead")
        wait_for(lambda: job_where(c, m) == ("mt", "buried"), "m to be buried")
        eq(present(c, d1), False, "d1 discarded")
        p.kill9()
        p.rewrite("# no policies any more\n")
        p.restart()
        c = p.srv.client()
        eq(present(c, e1), False, "the expired job after kill -9 and restart")
        eq(job_where(c, x), ("dead", "ready"), "the moved job after restart")
        eq(job_stats(c, x)["pri"], "11", "the moved job's priority")
        eq(present(c, d1), False, "the discarded job after restart")
        eq(c.peek("peek %d" % d2), (d2, b"kept"), "the job that took its place")
        eq(job_where(c, m), ("mt", "buried"), "the dead letter after restart")
        eq(job_stats(c, m)["timeouts"], "1", "the dead letter's timeouts")
