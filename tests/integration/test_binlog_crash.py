"""Binlog: kill -9 under load, torn tails, damaged and missing files.

Each test works on its own temporary directory and stops its servers by pid.
"""

import os
import random
import re
import threading
import time

import harness
import shim_util
from harness import TestFailure, check, fail, no_server, slow
from server import Tubed
from binlog_util import (REC_HDR, Servers, TempDir,
                         check_dir_clean, find_body, flip_byte, kill9,
                         mentions_offset, parse_dir, parse_file, peek_many,
                         run_refusing, sigterm, stat_int, zero_range)

SMALL = ["-s", "65536", "-z", "1024"]


# ---------------------------------------------------------------- helpers

def _bodies(n, size, tag, seed):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        pad = rnd.randbytes(size)
        out.append(b"<%s-%05d>" % (tag.encode(), i) + pad)
    return out


def _fill(srv, bodies, tube="default"):
    """Put every body (pipelined in batches); returns {id: body}."""
    c = srv.client()
    if tube != "default":
        c.use(tube)
    jobs = {}
    for i in range(0, len(bodies), 50):
        part = bodies[i:i + 50]
        c.send(b"".join(b"put 1 0 60 %d\r\n%s\r\n" % (len(b), b) for b in part))
        for b in part:
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            check(m is not None, "put: expected INSERTED n, got %r" % line)
            jobs[int(m.group(1))] = b
    c.close()
    return jobs


def _make_binlog(ss, d, nfiles_with_data, size=600, args=(), tag="job"):
    """Write jobs until at least nfiles_with_data files hold records, then
    stop the server with SIGTERM. Returns ({id: body}, parsed files)."""
    srv = ss.start(d, *(list(SMALL) + list(args)))
    jobs = {}
    seed = 0
    for _ in range(40):
        jobs.update(_fill(srv, _bodies(40, size, "%s%d" % (tag, seed), seed)))
        seed += 1
        with_data = [n for n, p in parse_dir(d) if p.records]
        if len(with_data) >= nfiles_with_data:
            break
    sigterm(srv)
    files = parse_dir(d)
    with_data = [(n, p) for n, p in files if p.records]
    check(len(with_data) >= nfiles_with_data,
          "setup: wanted %d binlog files with records, have %s"
          % (nfiles_with_data, [p.name for _, p in with_data]))
    return jobs, files


def _job_files(files, jobs):
    """{id: set of file numbers whose J records hold the job's body}."""
    out = {}
    for jid, body in jobs.items():
        out[jid] = {n for n, _, _ in find_body(files, body)}
    return out


def _check_present(srv, jobs, what, absent=(), maybe=()):
    """Every job in `jobs` is present with its body, except ids in `absent`
    (must be NOT_FOUND) and `maybe` (absent, or present with the exact
    body)."""
    got = peek_many(srv.client(), jobs)
    lost, changed, back = [], [], []
    for jid, body in sorted(jobs.items()):
        g = got[jid]
        if jid in absent:
            if g is not None:
                back.append(jid)
        elif g is None:
            if jid not in maybe:
                lost.append(jid)
        elif g != body:
            changed.append(jid)
    problems = []
    if lost:
        problems.append("%d jobs lost (NOT_FOUND), ids %s" % (len(lost), lost[:10]))
    if changed:
        problems.append("%d jobs came back with a different body, ids %s"
                        % (len(changed), changed[:10]))
    if back:
        problems.append("%d jobs present that should be gone, ids %s"
                        % (len(back), back[:10]))
    if problems:
        fail("%s: %s" % (what, "; ".join(problems)))


# ---------------------------------------------------------------- load

@slow
@no_server
def test_strict_mode_kill_under_load(binary):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    nthreads = 4
    args = ["-f", "0", "-s", "131072", "-z", "1024"]
    with TempDir() as d, Servers(binary) as ss:
        present = {}          # id -> body: acknowledged and not deleted
        deleted = set()       # acknowledged DELETED
        uncertain = 0         # jobs that may exist beyond `present`
        srv = ss.start(d, *args)
        for rnd_no in range(5):
            lock = threading.Lock()
            killed = threading.Event()
            inserted = {}
            dels = set()
            pending_del = set()
            inflight_puts = [0]
            errors = []

            def worker(tid, wseed):
                r = random.Random(wseed)
                mine = []
                i = 0
                try:
                    c = harness.Client(harness.HOST, srv.port, timeout=10)
                except OSError as e:
                    if not killed.is_set():
                        errors.append("thread %d: connect: %r" % (tid, e))
                    return
                try:
                    while True:
                        body = (b"R%d-T%d-%d|" % (rnd_no, tid, i)
                                + r.randbytes(r.choice((0, 5, 60, 700))))
                        with lock:
                            inflight_puts[0] += 1
                        c.send(b"put %d 0 60 %d\r\n%s\r\n"
                               % (r.randrange(1000), len(body), body))
                        line = c.read_line()
                        m = re.fullmatch(rb"INSERTED (\d+)", line)
                        if not m:
                            errors.append("thread %d: put -> %r" % (tid, line))
                            return
                        with lock:
                            inflight_puts[0] -= 1
                            inserted[int(m.group(1))] = body
                        mine.append(int(m.group(1)))
                        i += 1
                        if mine and r.random() < 0.4:
                            jid = mine.pop(r.randrange(len(mine)))
                            with lock:
                                pending_del.add(jid)
                            c.send(b"delete %d\r\n" % jid)
                            line = c.read_line()
                            if line != b"DELETED":
                                errors.append("thread %d: delete %d -> %r"
                                              % (tid, jid, line))
                                return
                            with lock:
                                pending_del.discard(jid)
                                dels.add(jid)
                except (TestFailure, OSError) as e:
                    if not killed.is_set():
                        errors.append("thread %d: %s" % (tid, str(e)[:200]))
                finally:
                    c.close()

            threads = [threading.Thread(target=worker,
                                        args=(t, rnd.randrange(1 << 30)),
                                        daemon=True)
                       for t in range(nthreads)]
            for t in threads:
                t.start()
            time.sleep(rnd.uniform(0.4, 1.2))
            # A loaded machine may sync slowly: the kill comes once enough
            # puts were acknowledged to check, however long that takes
            # (a ceiling only, never a speed requirement).
            deadline = time.time() + 60
            while time.time() < deadline and not errors:
                with lock:
                    if len(inserted) > 20:
                        break
                time.sleep(0.05)
            killed.set()
            kill9(srv)
            for t in threads:
                t.join(15)
            check(not any(t.is_alive() for t in threads),
                  "client threads did not stop after the kill")
            check(not errors, "round %d (seed %d): errors before the kill: %s"
                  % (rnd_no, seed, errors[:5]))
            check(len(inserted) > 20, "round %d: only %d puts acknowledged in "
                  "the load phase" % (rnd_no, len(inserted)))
            for jid, body in inserted.items():
                if jid not in dels and jid not in pending_del:
                    present[jid] = body
            deleted |= dels
            maybe = set(pending_del)
            uncertain += inflight_puts[0]

            srv = ss.start(d, *args)
            c = srv.client()
            got = peek_many(c, list(present) + sorted(deleted) + sorted(maybe))
            lost = sorted(j for j in present if got[j] is None)
            changed = sorted(j for j in present
                             if got[j] is not None and got[j] != present[j])
            back = sorted(j for j in deleted if got[j] is not None)
            check(not (lost or changed or back),
                  "round %d (seed %d), -f 0, kill -9 under load: %d of %d "
                  "acknowledged jobs lost %s, %d changed %s, %d jobs answered "
                  "DELETED are back %s" % (rnd_no, seed, len(lost),
                                           len(present), lost[:8], len(changed),
                                           changed[:8], len(back), back[:8]))
            for j in maybe:
                if got[j] is None:
                    deleted.add(j)
                else:
                    check(got[j] == inserted[j], "job %d (delete in flight) "
                          "came back with another body" % j)
                    present[j] = inserted[j]
            total = stat_int(c.stats(), "current-jobs-ready")
            check(len(present) <= total <= len(present) + uncertain,
                  "round %d: %d jobs after restart, expected %d acknowledged "
                  "(+ at most %d puts in flight at the kill)"
                  % (rnd_no, total, len(present), uncertain))
            top = max(list(present) + list(deleted))
            jid = c.put(b"probe")
            check(jid > top, "round %d: id after restart %d, highest before %d"
                  % (rnd_no, jid, top))
            c.expect("delete %d" % jid, "DELETED")
            deleted.add(jid)
            c.close()
        sigterm(srv)


# ---------------------------------------------------------------- torn tail

def _torn(binary, how):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "0", *SMALL)
        jobs = _fill(srv, _bodies(60, 300, "torn", 1))
        kill9(srv)
        files = parse_dir(d)
        newest = [(n, p) for n, p in files if p.records]
        check(newest, "no binlog file with records after 60 puts: %s"
              % os.listdir(d))
        n, p = newest[-1]
        r = p.records[-1]
        torn_ids = [j for j, b in jobs.items() if b in r.payload]
        check(r.type == b"J" and len(torn_ids) == 1,
              "the last record of %s should be the J record of the last put "
              "(type %r, holds %d known bodies)" % (p.name, r.type,
                                                   len(torn_ids)))
        if how == "zero-payload":
            cut = r.off + REC_HDR + r.length // 2
            zero_range(p.path, cut)
        elif how == "truncate-payload":
            cut = r.off + REC_HDR + r.length // 2
            os.truncate(p.path, cut)
        elif how == "truncate-header":
            cut = r.off + 3
            os.truncate(p.path, cut)
        else:
            raise ValueError(how)
        srv2 = ss.start(d, "-f", "0", *SMALL)
        err = srv2.stderr_text()
        check(p.name in err and mentions_offset(err, [r.off, cut, r.off + REC_HDR]),
              "torn last record (%s) of %s at offset %d cut at %d: the server "
              "should warn naming the file and the offset; stderr: %r"
              % (how, p.name, r.off, cut, err[-600:]))
        _check_present(srv2, jobs, "after a torn tail (%s) in %s" % (how, p.name),
                       maybe=set(torn_ids))
        # The torn record is really cut off: the file parses cleanly now
        # (or is gone), and the next start does not trip over it.
        if os.path.exists(p.path):
            q = parse_file(p.path)
            check(not q.errors, "%s after the restart still holds the torn "
                  "record: %s" % (p.name, q.errors[:3]))
        c = srv2.client()
        extra = c.put(b"after-torn")
        jobs[extra] = b"after-torn"
        kill9(srv2)
        srv3 = ss.start(d, "-f", "0", *SMALL)
        _check_present(srv3, jobs, "second restart after the torn tail (%s)"
                       % how, maybe=set(torn_ids))


@no_server
def test_torn_tail_zero_filled_payload(binary):
    _torn(binary, "zero-payload")


@no_server
def test_torn_tail_truncated_payload(binary):
    _torn(binary, "truncate-payload")


@no_server
def test_torn_tail_truncated_header(binary):
    _torn(binary, "truncate-header")


# ---------------------------------------------------------------- damage

def _flip_in(p, jobs, pick):
    """Flip one byte inside a job body in the record chosen by pick(list).
    Returns (record, flipped offset, damaged job id)."""
    cands = []
    for r in p.records:
        if r.type != b"J":
            continue
        ids = [j for j, b in jobs.items() if b in r.payload]
        if len(ids) == 1:
            cands.append((r, ids[0]))
    check(len(cands) >= 5, "%s: only %d J records with a known body"
          % (p.name, len(cands)))
    r, jid = pick(cands)
    body = jobs[jid]
    off = r.off + REC_HDR + r.payload.index(body) + len(body) // 2
    flip_byte(p.path, off)
    return r, off, jid


@no_server
def test_flipped_byte_newest_file_refuses_then_recover(binary):
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 1)
        n, p = [(n, p) for n, p in files if p.records][-1]
        r, off, bad = _flip_in(p, jobs, lambda cs: cs[len(cs) // 2])
        rc, err = run_refusing(binary, ["-b", d] + SMALL)
        check(p.name in err and mentions_offset(err, [r.off, r.off + REC_HDR, off]),
              "flipped byte at %d (record at %d) in %s: stderr should name the"
              " file and offset, got %r" % (off, r.off, p.name, err[-600:]))
        srv = ss.start(d, "--recover", *SMALL)
        err = srv.stderr_text()
        check(p.name in err, "--recover: stderr should report what was dropped"
              " from %s, got %r" % (p.name, err[-600:]))
        _check_present(srv, jobs, "--recover after a flipped byte in %s "
                       "(job %d damaged)" % (p.name, bad), maybe={bad})


@no_server
def test_flipped_byte_older_file_refuses(binary):
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 2)
        with_data = [(n, p) for n, p in files if p.records]
        n, p = with_data[0]
        r, off, bad = _flip_in(p, jobs, lambda cs: cs[len(cs) // 2])
        rc, err = run_refusing(binary, ["-b", d] + SMALL)
        check(p.name in err and mentions_offset(err, [r.off, r.off + REC_HDR, off]),
              "flipped byte at %d (record at %d) in older file %s: stderr "
              "should name the file and offset, got %r"
              % (off, r.off, p.name, err[-600:]))
        # Also the last record of an older file: not a torn tail (only the
        # newest file may have one).
        r2, off2, bad2 = _flip_in(p, jobs, lambda cs: cs[-1])
        flip_byte(p.path, off)     # undo the first flip
        rc, err = run_refusing(binary, ["-b", d] + SMALL)
        check(p.name in err, "flipped byte in the last record of older file "
              "%s: must refuse naming the file, got %r" % (p.name, err[-600:]))
        srv = ss.start(d, "--recover", *SMALL)
        _check_present(srv, jobs, "--recover after a flipped byte in the last "
                       "record of %s" % p.name, maybe={bad2})


# clock_gettime(CLOCK_REALTIME) sleeps 3 s first while SLOW_WALL_FLAG
# exists: the loop is held between waking and logging, as a loaded
# machine's scheduler may hold it.
SLOW_WALL_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    const char *flag = getenv("SLOW_WALL_FLAG");

    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    if (id == CLOCK_REALTIME && flag && access(flag, F_OK) == 0) {
        struct timespec d = {3, 0};
        nanosleep(&d, NULL);
    }
    return real(id, ts);
}
"""


def _time_left_and_age(c, jid):
    st = c.stats_job(jid)
    check(st.get("state") == "delayed", "job %d: expected delayed, got %r" % (jid, st))
    return stat_int(st, "time-left"), stat_int(st, "age")


@no_server
def test_restart_keeps_deadlines_logged_late_in_an_iteration(binary):
    # A put logged 3 s after its loop iteration began (the loop held in
    # between): its record must carry the deadline and creation time the
    # server holds, so a restart shows the same job no later and no younger.
    # (tubed paired a realtime read at the record with the iteration's
    # start, logging both 3 s late; crashfuzz once saw such a job still
    # delayed after its time.) Whatever the machine's speed, time-left can
    # only fall and age only grow across the restart.
    with TempDir() as d, Servers(binary) as ss:
        flag = os.path.join(d, "slow-wall")
        env = {"LD_PRELOAD": shim_util.build(binary, d, SLOW_WALL_C), "SLOW_WALL_FLAG": flag}
        srv = Tubed(binary, bdir=d, tmp=d, env=env).start()
        ss.all.append(srv)
        c = srv.client()
        open(flag, "w").close()
        line = c.cmd(b"put 5 60 10 4\r\nlate")
        os.unlink(flag)
        m = re.fullmatch(rb"INSERTED (\d+)", line)
        check(m is not None, "put: expected INSERTED n, got %r" % line)
        jid = int(m.group(1))
        left0, age0 = _time_left_and_age(c, jid)
        kill9(srv)
        srv = ss.start(d)
        left1, age1 = _time_left_and_age(srv.client(), jid)
        check(left1 <= left0, "a restart moved job %d's deadline later: time-left %d s "
              "before, %d s after" % (jid, left0, left1))
        check(age1 >= age0, "a restart made job %d younger: age %d s before, %d s after"
              % (jid, age0, age1))


@no_server
def test_recover_is_lasting(binary):
    # After --recover has dropped the damaged record, a normal start works
    # and keeps the same jobs.
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 1)
        n, p = [(n, p) for n, p in files if p.records][-1]
        r, off, bad = _flip_in(p, jobs, lambda cs: cs[len(cs) // 3])
        srv = ss.start(d, "--recover", *SMALL)
        got = peek_many(srv.client(), [bad])
        kept = dict(jobs)
        if got[bad] is None:
            del kept[bad]
        kill9(srv)
        srv = ss.start(d, *SMALL)
        _check_present(srv, kept, "normal start after a --recover start",
                       absent={bad} if bad not in kept else ())


@no_server
def test_zero_filled_older_file_refuses(binary):
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 2)
        with_data = [(n, p) for n, p in files if p.records]
        n, p = with_data[0]
        in_file = {j for j, fs in _job_files(files, jobs).items() if fs == {n}}
        check(in_file, "setup: no job only in %s" % p.name)
        zero_range(p.path, 0)
        rc, err = run_refusing(binary, ["-b", d] + SMALL)
        check(p.name in err, "zero-filled older file %s: stderr should name it,"
              " got %r" % (p.name, err[-600:]))
        srv = ss.start(d, "--recover", *SMALL)
        check(p.name in srv.stderr_text(), "--recover with zero-filled %s: "
              "stderr should report it, got %r" % (p.name,
                                                   srv.stderr_text()[-600:]))
        _check_present(srv, jobs, "--recover with %s zero-filled" % p.name,
                       absent=in_file)


@no_server
def test_never_written_newest_file_does_not_outlive_the_next_start(binary):
    # A crash right after the server made a new file, before its header: the
    # newest file is all zeros. The next start ignores it, and must remove
    # it, or after one more crash it sits behind a newer file and reads as
    # damage (seen in test_strict_mode_kill_under_load: "binlog.19 is
    # damaged: zero-filled at offset 0; refusing to start").
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 1)
        newest = max(n for n, _ in files)
        blank = os.path.join(d, "binlog.%d" % (newest + 1))
        with open(blank, "wb") as f:
            f.write(b"\0" * 65536)
        srv = ss.start(d, *SMALL)
        check("never written" in srv.stderr_text(),
              "the blank newest file should be reported, got %r"
              % srv.stderr_text()[-600:])
        check(not os.path.exists(blank) or os.path.getsize(blank) == 0
              or any(open(blank, "rb").read(8)),
              "%s (all zeros, never written) is still there after the start"
              % blank)
        _check_present(srv, jobs, "a start past a never-written newest file")
        kill9(srv)
        srv = ss.start(d, *SMALL)
        _check_present(srv, jobs, "the start after that")


@no_server
def test_missing_file_in_sequence_refuses(binary):
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 3)
        with_data = [(n, p) for n, p in files if p.records]
        n, p = with_data[len(with_data) // 2]
        check(with_data[0][0] < n < with_data[-1][0], "setup: no middle file")
        in_file = {j for j, fs in _job_files(files, jobs).items() if fs == {n}}
        check(in_file, "setup: no job only in %s" % p.name)
        os.unlink(p.path)
        rc, err = run_refusing(binary, ["-b", d] + SMALL)
        check(p.name in err, "%s removed between %s and %s: stderr should name "
              "the missing file, got %r" % (p.name, with_data[0][1].name,
                                            with_data[-1][1].name, err[-600:]))
        srv = ss.start(d, "--recover", *SMALL)
        check(p.name in srv.stderr_text(), "--recover with %s missing: stderr "
              "should report it, got %r" % (p.name, srv.stderr_text()[-600:]))
        _check_present(srv, jobs, "--recover with %s missing" % p.name,
                       absent=in_file)


@no_server
def test_clean_restart_files_parse(binary):
    # Sanity for the damage tests above: undamaged files written across
    # several starts replay with no warning about damage and parse cleanly.
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 2)
        check_dir_clean(d)
        srv = ss.start(d, *SMALL)
        err = srv.stderr_text().lower()
        for word in ("torn", "corrupt", "checksum", "crc", "damage"):
            check(word not in err, "clean restart: stderr mentions %r: %r"
                  % (word, err[-600:]))
        _check_present(srv, jobs, "clean restart")


def _hand_made_job(jid, tube, body):
    """A J record as doc/binlog.md lays it out (state ready)."""
    import struct
    from binlog_util import crc32c
    p = b"J" + struct.pack("<QIIIBqq", jid, 0, 0, 60, 0, 0, int(time.time()) * 10**9)
    p += struct.pack("<5I", 0, 0, 0, 0, 0) + bytes([len(tube)]) + tube
    p += struct.pack("<I", len(body)) + body
    return struct.pack("<II", len(p), crc32c(p)) + p


@no_server
def test_recover_past_missing_file_keeps_live_jobs(binary):
    # Regression (found by fuzzing): --recover past a gap in the numbering
    # counted jobs against the wrong file, so a file still holding a live
    # job could be removed later and the job lost at the next restart.
    import struct
    from binlog_util import crc32c
    hdr = b"TUBEDLOG" + struct.pack("<I", 1)
    hdr += struct.pack("<I", crc32c(hdr))
    with TempDir() as d, Servers(binary) as servers:
        with open(os.path.join(d, "binlog.1"), "wb") as f:
            f.write(hdr + _hand_made_job(1, b"default", b"job A"))
        with open(os.path.join(d, "binlog.3"), "wb") as f:
            f.write(hdr + _hand_made_job(2, b"default", b"job B"))
        srv = servers.start(d, "-z", "100", "-s", "4096", "-f", "0", "--recover")
        c = srv.client()
        ids = [c.put(b"x" * 90) for _ in range(26)]
        for i in ids:
            check(c.cmd("delete %d" % i) == b"DELETED", "delete")
        check(c.cmd("delete 1") == b"DELETED", "delete job A")
        check(c.cmd_body("peek 2") == (b"FOUND 2 5", b"job B"), "job B there before the crash")
        kill9(srv)
        srv = servers.start(d, "-z", "100", "-s", "4096", "-f", "0")
        c = srv.client()
        got = c.cmd_body("peek 2")
        check(got == (b"FOUND 2 5", b"job B"), "job B lost after the restart: %r" % (got,))
        check(c.cmd("peek 1") == b"NOT_FOUND", "deleted job A came back")


@no_server
def test_file_number_past_job_field_refuses(binary):
    # A job names its binlog file in 28 bits (Job.file): a file numbered
    # past that would be counted against another file, and compaction could
    # drop a live record. Replay refuses such a directory by name.
    with TempDir() as d, Servers(binary) as ss:
        jobs, files = _make_binlog(ss, d, 1)
        for n, p in sorted(files)[:-1]:
            os.unlink(p.path)
        n, p = max(files)
        high = os.path.join(d, "binlog.%d" % (1 << 28))
        os.rename(p.path, high)
        rc, err = run_refusing(binary, ["-b", d] + SMALL)
        check("binlog.%d" % (1 << 28) in err and "file numbers end" in err,
              "a binlog.%d should be refused by name, got %r"
              % (1 << 28, err[-600:]))
