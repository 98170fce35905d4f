"""Binlog: a full disk (tmpfs, needs root) and bounded disk use under churn.

Each test works on its own temporary directory (and mount), and stops its
servers by pid before unmounting.
"""

import os
import random
import re
import subprocess
import threading
import time

import harness
from harness import Skip, check, eq, fail, no_server, slow, unq
from binlog_util import (Servers, TempDir, binlog_bytes, binlog_files,
                         Tmpfs, check_dir_clean, kill9, peek_many, put_raw,
                         sigterm, stat_int)


def _write_filler(path, nbytes):
    chunk = b"\xa5" * (1 << 20)
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            n = min(left, len(chunk))
            try:
                f.write(chunk[:n])
                f.flush()
            except OSError:
                break
            left -= n


@slow
@no_server
def test_disk_full(binary):
    with TempDir() as d:
        with Tmpfs(d, "4m") as mnt:
            with Servers(binary) as ss:
                _disk_full(binary, ss, mnt)


def _disk_full(binary, ss, mnt):
    bdir = os.path.join(mnt.path, "bl")
    filler = os.path.join(mnt.path, "filler")
    args = ["-s", "65536", "-z", "1024", "-f", "0"]
    srv = ss.start(bdir, *args)
    c = srv.client()
    present, deleted = {}, set()
    seq = [0]
    rnd = random.Random(7)

    def body():
        seq[0] += 1
        return b"full-%06d|" % seq[0] + rnd.randbytes(rnd.randrange(100, 900))

    def put_until_full(limit):
        """Put until OUT_OF_MEMORY; returns the number of INSERTED."""
        n = 0
        for _ in range(limit):
            b = body()
            line = put_raw(c, b)
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            if m:
                present[int(m.group(1))] = b
                n += 1
                continue
            eq(line, b"OUT_OF_MEMORY", "reply to put on a full disk")
            return n
        fail("no OUT_OF_MEMORY after %d puts with %d bytes free on the "
             "tmpfs" % (limit, mnt.free()))

    # Leave room for a few files' worth of jobs, then fill it.
    _write_filler(filler, max(0, mnt.free() - 320 * 1024))
    n1 = put_until_full(4000)
    check(n1 >= 10, "only %d puts succeeded with ~320 KiB free" % n1)
    # Still full: more puts fail the same way, the server stays up.
    for _ in range(3):
        b = body()
        line = put_raw(c, b)
        m = re.fullmatch(rb"INSERTED (\d+)", line)
        if m:
            present[int(m.group(1))] = b
        else:
            eq(line, b"OUT_OF_MEMORY", "put on a full disk")
    # Said once, not once a refused put: the log and last-error name it,
    # the binlog stays healthy (deletes still work).  (It was silent.)
    _, bst = c.cmd_body("stats-binlog")
    bst = harness.parse_yaml_dict(bst)
    eq(bst["healthy"], "true", "stats-binlog healthy on a full disk")
    check(unq(bst["last-error"]).startswith("no room for a new file: "),
          "stats-binlog last-error on a full disk: %r" % bst["last-error"])
    err = srv.stderr_text()
    eq(err.count("no room for a new file"), 1,
       "warnings of a full disk after 4 refused puts: %r" % err[-600:])
    # Other commands keep working on a full disk.
    st = c.stats()
    check(stat_int(st, "current-jobs-ready") == len(present),
          "stats on a full disk: current-jobs-ready %s, expected %d"
          % (st["current-jobs-ready"], len(present)))
    some = sorted(present)[:12]
    got = peek_many(c, some[:2])
    eq(got[some[0]], present[some[0]], "peek on a full disk")
    for jid in some[:10]:
        c.expect("delete %d" % jid, "DELETED")
        deleted.add(jid)
        del present[jid]
    rid, rbody = c.reserve(timeout=0)
    eq(rbody, present.get(rid), "reserved body on a full disk")
    c.expect("delete %d" % rid, "DELETED")
    deleted.add(rid)
    del present[rid]
    check(srv.alive(), "server died on a full disk")
    # Free the space: puts succeed again by themselves.
    os.unlink(filler)
    deadline = time.monotonic() + 5
    while True:
        b = body()
        line = put_raw(c, b)
        m = re.fullmatch(rb"INSERTED (\d+)", line)
        if m:
            present[int(m.group(1))] = b
            break
        eq(line, b"OUT_OF_MEMORY", "put after freeing space")
        check(time.monotonic() < deadline, "put still answers OUT_OF_MEMORY "
              "5 s after %d bytes were freed on the disk" % mnt.free())
        time.sleep(0.1)
    # Puts that need a new file make one, and that is said once too (300
    # puts of ~500 bytes fill more than one 64 KiB file).
    for _ in range(300):
        b = body()
        present[c.put(b)] = b
        if "room for new files again" in srv.stderr_text():
            break
    err = srv.stderr_text()
    eq(err.count("room for new files again"), 1,
       "log lines once new files could be made: %r" % err[-600:])
    # Full again, then kill -9 while full: nothing acknowledged is lost and
    # no torn record is left behind.
    _write_filler(filler, max(0, mnt.free() - 200 * 1024))
    put_until_full(4000)
    kill9(srv)
    check_dir_clean(bdir, "after kill -9 on a full disk: ")
    mnt.remount("64m")
    srv2 = ss.start(bdir, *args)
    c2 = srv2.client()
    got = peek_many(c2, list(present) + sorted(deleted))
    lost = sorted(j for j in present if got[j] != present[j])
    back = sorted(j for j in deleted if got[j] is not None)
    check(not lost, "after the disk filled up, kill -9 and a restart with "
          "more space: %d of %d acknowledged jobs lost or changed, ids %s"
          % (len(lost), len(present), lost[:10]))
    check(not back, "deleted jobs are back: %s" % back[:10])
    eq(stat_int(c2.stats(), "current-jobs-ready"), len(present),
       "jobs after the restart (no job answered OUT_OF_MEMORY may exist)")
    c2.put(b"room-again")
    sigterm(srv2)


# ---------------------------------------------------------------- churn

FILE_SIZE = 65536


class Sampler(threading.Thread):
    """Samples the binlog files' total size against binlog-live-bytes.

    The bound is 2 x live + 3 files (2 files plus one of slack).  Compaction
    runs on the server's timer, so a single sample may catch the moment
    between a file filling up and the next compaction step: a sample over
    the bound counts as a violation when the next sample is over it too
    (the excess persisted for a sampling interval), and any sample over
    2 x live + 4 files is a violation at once.
    """

    def __init__(self, srv, bdir, interval=0.15):
        super().__init__(daemon=True)
        self.srv, self.bdir, self.interval = srv, bdir, interval
        self.stop = threading.Event()
        self.samples = 0
        self.over = 0            # samples over the bound (transient or not)
        self.violations = []
        self.max_files = 0
        self.max_ratio = 0.0
        self.error = None

    def run(self):
        try:
            c = harness.Client(harness.HOST, self.srv.port, timeout=10)
        except OSError as e:
            self.error = "sampler connect: %r" % (e,)
            return
        prev_over = None
        try:
            while not self.stop.wait(self.interval):
                st1 = c.stats()
                disk = binlog_bytes(self.bdir)
                nfiles = len(binlog_files(self.bdir))
                st2 = c.stats()
                # Bytes and live bytes are read at slightly different times:
                # take the reading most favourable to the server.
                live = max(stat_int(st1, "binlog-live-bytes"),
                           stat_int(st2, "binlog-live-bytes"))
                reported = min(stat_int(st1, "binlog-bytes"),
                               stat_int(st2, "binlog-bytes"))
                bound = 2 * live + 3 * FILE_SIZE
                self.samples += 1
                self.max_files = max(self.max_files, nfiles)
                self.max_ratio = max(self.max_ratio, disk / float(bound))
                worst = max(disk, reported)
                desc = ("%d bytes in %d files (binlog-bytes %d), bound 2 x "
                        "live %d + 3 x %d = %d" % (disk, nfiles, reported, live,
                                                   FILE_SIZE, bound))
                if worst > bound + FILE_SIZE:
                    self.violations.append("over the bound by more than a "
                                           "file: " + desc)
                if worst > bound:
                    self.over += 1
                    if prev_over:
                        self.violations.append("over the bound in two samples "
                                               "in a row: %s; then %s"
                                               % (prev_over, desc))
                    prev_over = desc
                else:
                    prev_over = None
                if nfiles > 2 * live // FILE_SIZE + 4:
                    self.violations.append("%d files with %d live bytes"
                                           % (nfiles, live))
        except Exception as e:
            self.error = "sampler: %s" % (str(e)[:300],)
        finally:
            c.close()


@slow
@no_server
def test_bounded_disk_under_churn(binary):
    rnd = random.Random(11)
    with TempDir() as d, Servers(binary) as ss:
        args = ["-s", str(FILE_SIZE), "-z", "1024"]
        srv = ss.start(d, *args)
        c = srv.client()
        expected = {}     # id -> body of every live job
        pinned = {}       # id -> (state, due or None)

        def pin(n, tag):
            c.use("pin")
            for i in range(n):
                b = b"pin-%s-%d|" % (tag.encode(), i) + rnd.randbytes(300)
                if i % 2:
                    t0 = time.monotonic()
                    jid = c.put(b, pri=5, delay=3600)
                    pinned[jid] = ("delayed", t0 + 3600)
                else:
                    jid = c.put(b, pri=0)
                    pinned[jid] = ("buried", None)
                expected[jid] = b
            # Bury the ready ones through a worker on tube pin.
            w = srv.client()
            w.watch("pin")
            w.ignore("default")
            while True:
                line, _ = w.cmd_body("reserve-with-timeout 0")
                if line == b"TIMED_OUT":
                    break
                jid = int(line.split()[1])
                w.expect("bury %d 3" % jid, "BURIED")
            w.close()
            c.use("churn")

        pin(10, "start")
        sampler = Sampler(srv, d)
        sampler.start()
        w = srv.client()
        w.watch("churn")
        w.ignore("default")
        c.use("churn")
        releases = {}
        writes = [0]

        def put_churn():
            b = b"churn|" + rnd.randbytes(rnd.randrange(50, 900))
            jid = c.put(b, pri=rnd.randrange(10))
            expected[jid] = b
            releases[jid] = 0
            writes[0] += 1

        def release_churn(until):
            # put / reserve / release (often with a delay) / delete
            while time.monotonic() < until:
                if len(releases) < 120:
                    put_churn()
                line, _ = w.cmd_body("reserve-with-timeout 0")
                if line == b"TIMED_OUT":
                    if len(releases) < 300:
                        put_churn()
                    else:
                        time.sleep(0.01)
                    continue
                jid = int(line.split()[1])
                check(jid in releases, "reserved unknown job %d" % jid)
                if releases[jid] < 3:
                    releases[jid] += 1
                    w.expect("release %d %d %d" % (jid, rnd.randrange(10),
                                                   rnd.choice((0, 1, 1, 2))),
                             "RELEASED")
                else:
                    w.expect("delete %d" % jid, "DELETED")
                    del releases[jid]
                    del expected[jid]
                writes[0] += 1

        def put_delete_churn(until):
            while time.monotonic() < until:
                bodies = [b"pd|" + rnd.randbytes(rnd.randrange(20, 1000))
                          for _ in range(20)]
                c.send(b"".join(b"put 1 0 60 %d\r\n%s\r\n" % (len(b), b)
                                for b in bodies))
                ids = []
                for _ in bodies:
                    line = c.read_line()
                    m = re.fullmatch(rb"INSERTED (\d+)", line)
                    check(m is not None, "put: %r" % line)
                    ids.append(int(m.group(1)))
                c.send(b"".join(b"delete %d\r\n" % j for j in ids))
                for j in ids:
                    c.expect_lines(["DELETED"])
                writes[0] += 40

        try:
            t_end = time.monotonic()
            release_churn(t_end + 7)
            put_delete_churn(time.monotonic() + 6)
            pin(6, "mid")
            end = time.monotonic() + 7
            while time.monotonic() < end:
                release_churn(time.monotonic() + 0.5)
                put_delete_churn(time.monotonic() + 0.5)
        finally:
            sampler.stop.set()
            sampler.join(15)
        check(sampler.error is None, sampler.error or "")
        check(sampler.samples >= 20, "only %d disk samples taken"
              % sampler.samples)
        check(not sampler.violations, "disk use over the bound (%d of %d "
              "samples over 2 x live + 3 files): %s"
              % (sampler.over, sampler.samples,
                 "; ".join(sampler.violations[:3])))
        st = c.stats()
        written = stat_int(st, "binlog-records-written")
        check(written >= writes[0], "binlog-records-written %d < %d records "
              "the test caused" % (written, writes[0]))
        cur = stat_int(st, "binlog-current-index")
        oldest = stat_int(st, "binlog-oldest-index")
        check(cur >= 10, "churn wrote only up to binlog.%d; the test expects "
              "many 64 KiB files to be filled" % cur)
        check(oldest > 1, "binlog-oldest-index is still 1 after churn past "
              "binlog.%d: the pinned (buried, delayed) jobs of binlog.1 were"
              " not moved forward" % cur)
        check(stat_int(st, "binlog-records-migrated") > 0,
              "binlog-records-migrated is 0 after compaction")
        names = [n for n, _ in binlog_files(d)]
        eq(names, list(range(names[0], names[0] + len(names))),
           "binlog file numbers (contiguous)")
        # binlog-live-bytes is plausible for the jobs the test knows live.
        live = stat_int(st, "binlog-live-bytes")
        body_bytes = sum(len(b) for b in expected.values())
        check(body_bytes <= live <= 2 * (body_bytes + 300 * len(expected)) + 4096,
              "binlog-live-bytes %d implausible for %d live jobs with %d body "
              "bytes" % (live, len(expected), body_bytes))
        # Nothing is lost or resurrected by compaction: kill -9, restart.
        time.sleep(0.2)
        kill9(srv)
        srv2 = ss.start(d, *args)
        c2 = srv2.client()
        got = peek_many(c2, expected)
        lost = sorted(j for j in expected if got[j] != expected[j])
        check(not lost, "after churn + kill -9: %d of %d live jobs lost or "
              "changed, ids %s (pinned: %s)" % (len(lost), len(expected),
                                                lost[:10],
                                                [j for j in lost if j in pinned]))
        st = c2.stats()
        total = sum(stat_int(st, "current-jobs-" + s)
                    for s in ("ready", "reserved", "delayed", "buried"))
        eq(total, len(expected), "jobs after restart (deleted jobs must not "
           "come back after compaction)")
        for jid, (state, due) in pinned.items():
            sj = c2.stats_job(jid)
            eq(unq(sj["state"]), state, "state of pinned job %d" % jid)
            if due is not None:
                left = due - time.monotonic()
                tl = int(sj["time-left"])
                check(left - 2 <= tl <= left + 1, "pinned job %d: time-left "
                      "%d, expected about %.0f" % (jid, tl, left))
