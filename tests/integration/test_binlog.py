"""Binlog: what survives a restart, stats, file format, startup errors.

Every test starts its own servers with -b on a temporary directory (removed
afterwards); servers are stopped by pid.  Damage and load tests are in
test_binlog_crash.py, disk-full and bounded-disk tests in test_binlog_disk.py.
"""

import fcntl
import os
import re
import time

from harness import (TestFailure, check, eq, fail, no_server, slow, unq,
                     wait_until)
from binlog_util import (HEADER_SIZE, MAGIC, Servers, TempDir, binlog_bytes,
                         binlog_files, check_dir_clean, crc32c, find_body,
                         job_state, kill9, parse_dir, peek_many, run_refusing,
                         sigterm, stat_int)

SMALL = ["-s", "65536", "-z", "1024"]
BIG_BODY_SIZE = 65535


def _body(tag, n=0):
    return (b"%s|" % tag.encode()) + bytes((i * 7 + 3) % 256 for i in range(n))


class Expected:
    """What the test did to each job, to compare after the restart."""

    def __init__(self):
        self.jobs = {}        # id -> dict
        self.deleted = set()

    def add(self, jid, **kw):
        self.jobs[jid] = kw


def _use(c, tube):
    c.expect("use %s" % tube, "USING %s" % tube)


def _build_jobs(srv):
    """Create jobs in every state across several tubes; returns Expected."""
    exp = Expected()
    c = srv.client()
    tubes = ["default", "emails", "a/b+c;d$e_(f).g-1"]
    bodies = [
        b"",
        b"hello",
        b"line1\r\nline2\r\n",
        b"\x00",
        b"\x00\r\n\x00\xff\xfe\r\n",
        b"\r\n",
        bytes(range(256)) * 4,
        _body("big", BIG_BODY_SIZE - 4),
    ]
    # Ready jobs, various pri/ttr/bodies, spread over the tubes.
    pris = [0, 1, 1023, 1024, 65536, 4294967295, 7, 500]
    ttrs = [1, 60, 3600, 2, 86400, 120, 5, 4294967295]
    for i, body in enumerate(bodies):
        tube = tubes[i % len(tubes)]
        _use(c, tube)
        jid = c.put(body, pri=pris[i], ttr=ttrs[i])
        exp.add(jid, tube=tube, state="ready", pri=pris[i], ttr=ttrs[i],
                body=body)
    _use(c, "emails")
    # Delayed jobs (remaining delay measured from the put).
    for delay, body in ((30, b"delayed-30\r\n\x00"), (3600, b"delayed-3600")):
        t0 = time.monotonic()
        jid = c.put(body, pri=44, delay=delay, ttr=30)
        exp.add(jid, tube="emails", state="delayed", pri=44, ttr=30, body=body,
                delay=delay, due=t0 + delay)
    # Deleted: must never come back.
    jid = c.put(b"deleted-job", pri=3)
    c.expect("delete %d" % jid, "DELETED")
    exp.deleted.add(jid)

    # Jobs that go through reserve live in tube "states", watched alone by
    # worker w; each is put at priority 0 so it is the one reserved (the
    # ready jobs left behind there have priorities 5..7).
    w = srv.client()
    w.watch("states")
    w.ignore("default")
    _use(c, "states")

    def put_reserve(body, ttr=60):
        jid = c.put(body, pri=0, ttr=ttr)
        got, b = w.reserve(timeout=0)
        eq(got, jid, "reserved job id")
        eq(b, body, "reserved body")
        return jid

    # Released with a new priority.
    jid = put_reserve(b"released-pri-7")
    w.expect("release %d 7 0" % jid, "RELEASED")
    exp.add(jid, tube="states", state="ready", pri=7, ttr=60,
            body=b"released-pri-7", reserves=1, releases=1)
    # Released with a delay: delayed, new priority.
    jid = put_reserve(b"released-delay-20")
    t0 = time.monotonic()
    w.expect("release %d 8 20" % jid, "RELEASED")
    exp.add(jid, tube="states", state="delayed", pri=8, ttr=60,
            body=b"released-delay-20", reserves=1, releases=1, delay=20,
            due=t0 + 20)
    # Buried with a new priority.
    jid = put_reserve(b"buried-pri-9")
    w.expect("bury %d 9" % jid, "BURIED")
    exp.add(jid, tube="states", state="buried", pri=9, ttr=60,
            body=b"buried-pri-9", reserves=1, buries=1)
    # Buried then kicked.
    jid = put_reserve(b"kicked")
    w.expect("bury %d 5" % jid, "BURIED")
    w.expect("kick-job %d" % jid, "KICKED")
    exp.add(jid, tube="states", state="ready", pri=5, ttr=60, body=b"kicked",
            reserves=1, buries=1, kicks=1)
    # Delayed then kicked.
    jid = c.put(b"delayed-kicked", pri=6, delay=3600)
    w.expect("kick-job %d" % jid, "KICKED")
    exp.add(jid, tube="states", state="ready", pri=6, ttr=60,
            body=b"delayed-kicked", kicks=1)
    # Timed out once, reserved again and buried: timeouts=1 is carried by
    # the bury record.
    jid = put_reserve(b"timed-out", ttr=1)
    wait_until(lambda: job_state(c, jid) == "ready", timeout=5,
               what="job %d (ttr 1) to time out" % jid)
    got, _ = w.reserve(timeout=0)
    eq(got, jid, "reserved job id (again after its timeout)")
    w.expect("bury %d 11" % jid, "BURIED")
    exp.add(jid, tube="states", state="buried", pri=11, ttr=1,
            body=b"timed-out", reserves=2, buries=1, timeouts=1)
    # Reserved when the server dies: comes back ready.
    jid = put_reserve(b"held-reserved\x00", ttr=600)
    exp.add(jid, tube="states", state="ready", pri=0, ttr=600,
            body=b"held-reserved\x00", reserves=(0, 1), reserved=True)
    # Delay that runs out while the server is down: comes back ready.
    jid = c.put(b"short-delay", pri=12, delay=1)
    exp.add(jid, tube="states", state="ready", pri=12, ttr=60,
            body=b"short-delay", expired=True)
    # The last put is a live job (the id check below relies on it).
    _use(c, "default")
    jid = c.put(b"last", pri=2)
    exp.add(jid, tube="default", state="ready", pri=2, ttr=60, body=b"last")
    return exp


def _check_jobs(srv, exp, when):
    c = srv.client()
    errors = []
    bodies = peek_many(c, sorted(exp.jobs) + sorted(exp.deleted))
    for jid in sorted(exp.deleted):
        if bodies[jid] is not None:
            errors.append("deleted job %d is back (peek: FOUND, body %r)"
                          % (jid, bodies[jid][:40]))
    for jid, e in sorted(exp.jobs.items()):
        if bodies[jid] is None:
            errors.append("job %d (%r) lost: peek %d -> NOT_FOUND"
                          % (jid, e["body"][:30], jid))
            continue
        if bodies[jid] != e["body"]:
            errors.append("job %d body: expected %r (%d bytes), got %r (%d bytes)"
                          % (jid, e["body"][:40], len(e["body"]),
                             bodies[jid][:40], len(bodies[jid])))
        sj = c.stats_job(jid)
        state = unq(sj["state"])
        want_state = e["state"]
        if e.get("expired") and state == "delayed":
            # Promotion may take one tick of the event loop.
            try:
                wait_until(lambda: job_state(c, jid) == "ready", timeout=3,
                           what="expired job %d to become ready" % jid)
                sj = c.stats_job(jid)
                state = "ready"
            except TestFailure as ex:
                errors.append(str(ex))
        if state != want_state:
            errors.append("job %d (%r): state expected %r, got %r"
                          % (jid, e["body"][:30], want_state, state))
        for key in ("tube", "pri", "ttr"):
            got = unq(sj[key])
            if got != str(e[key]):
                errors.append("job %d (%r): %s expected %r, got %r"
                              % (jid, e["body"][:30], key, str(e[key]), got))
        for key in ("reserves", "releases", "buries", "kicks", "timeouts"):
            want = e.get(key, 0)
            allowed = want if isinstance(want, tuple) else (want,)
            if int(sj[key]) not in allowed:
                errors.append("job %d (%r): %s expected %s, got %s"
                              % (jid, e["body"][:30], key,
                                 " or ".join(map(str, allowed)), sj[key]))
        if want_state == "delayed":
            if sj["delay"] != str(e["delay"]):
                errors.append("job %d: delay expected %d, got %s"
                              % (jid, e["delay"], sj["delay"]))
            left = e["due"] - time.monotonic()
            got = int(sj["time-left"])
            # time-left counts down during the downtime too; it is whole
            # seconds, so allow for truncation and one-second ticks.
            if not (left - 1.6 <= got <= left + 1.1):
                errors.append("job %d (delay %d): time-left expected about "
                              "%.1f (the delay less the time since the put, "
                              "downtime included), got %d"
                              % (jid, e["delay"], left, got))
        elif want_state in ("ready", "buried") and sj["time-left"] != "0":
            errors.append("job %d (%s): time-left expected 0, got %s"
                          % (jid, want_state, sj["time-left"]))
        f = sj.get("file", "")
        if not re.fullmatch(r"[1-9][0-9]*", f):
            errors.append("job %d: stats-job file expected >= 1 with -b, got %r"
                          % (jid, f))
    st = c.stats()
    counts = {"ready": 0, "delayed": 0, "buried": 0}
    for e in exp.jobs.values():
        counts[e["state"]] += 1
    for state, n in counts.items():
        got = stat_int(st, "current-jobs-" + state)
        if got != n:
            errors.append("stats current-jobs-%s: expected %d, got %d"
                          % (state, n, got))
    if stat_int(st, "current-jobs-reserved") != 0:
        errors.append("stats current-jobs-reserved: expected 0 after restart,"
                      " got %s" % st["current-jobs-reserved"])
    if errors:
        fail("%s: %d problems:\n    %s" % (when, len(errors),
                                          "\n    ".join(errors)))
    # Ids continue above the highest id seen.
    top = max(list(exp.jobs) + list(exp.deleted))
    _use(c, "default")
    jid = c.put(b"after-restart")
    check(jid > top, "%s: first put got id %d, expected above the highest "
          "id before the restart (%d)" % (when, jid, top))
    c.expect("delete %d" % jid, "DELETED")
    return jid


def _round_trip(binary, fsync_args, wait_before_kill):
    with TempDir() as d, Servers(binary) as ss:
        bdir = os.path.join(d, "bl")          # created by the server
        srv = ss.start(bdir, *fsync_args)
        exp = _build_jobs(srv)
        if wait_before_kill:
            time.sleep(wait_before_kill)
        kill9(srv)
        time.sleep(2.0)                        # downtime counts for delays
        srv2 = ss.start(bdir, *fsync_args)
        jid = _check_jobs(srv2, exp, "after kill -9 (%s) and restart"
                          % " ".join(fsync_args or ["-f 50"]))
        exp.deleted.add(jid)
        # A second crash/restart cycle keeps everything as well (the
        # replayed jobs are durable again in the new files).
        if wait_before_kill:
            time.sleep(wait_before_kill)
        kill9(srv2)
        srv3 = ss.start(bdir, *fsync_args)
        _check_jobs(srv3, exp, "after a second kill -9 and restart")


@slow
@no_server
def test_round_trip_default_fsync(binary):
    _round_trip(binary, [], 0.2)


@slow
@no_server
def test_round_trip_strict_fsync_no_wait(binary):
    _round_trip(binary, ["-f", "0"], 0)


@no_server
def test_round_trip_never_fsync_sigterm(binary):
    # -F never fsyncs, but SIGTERM is a clean shutdown: everything written.
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-F")
        c = srv.client()
        ids = {c.put(b"F-%d\r\n\x00" % i, pri=i): b"F-%d\r\n\x00" % i
               for i in range(50)}
        sigterm(srv)
        srv2 = ss.start(d, "-F")
        got = peek_many(srv2.client(), ids)
        lost = [j for j in ids if got[j] != ids[j]]
        check(not lost, "after SIGTERM with -F and restart, %d of %d jobs lost"
              " or changed, e.g. ids %s" % (len(lost), len(ids), lost[:5]))


@no_server
def test_sigterm_exit_zero_and_sync(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "10000")   # the timer would not fire in time
        c = srv.client()
        ids = {}
        for i in range(20):
            body = b"term-%d" % i
            ids[c.put(body)] = body
        sigterm(srv)
        srv2 = ss.start(d)
        got = peek_many(srv2.client(), ids)
        lost = sorted(j for j in ids if got[j] != ids[j])
        check(not lost, "after SIGTERM (-f 10000) and restart, jobs %s lost"
              % lost)


@no_server
def test_fsync_timer_writes_within_interval(binary):
    # -f 50: the last write is on disk within 50 ms even with no further
    # commands; checked through the file (kill -9 keeps the page cache, so
    # what is read back is what the server handed to the kernel).
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "50")
        c = srv.client()
        body = b"timer-flush-\x01\x02"
        jid = c.put(body)
        time.sleep(0.3)
        kill9(srv)
        files = parse_dir(d)
        check(find_body(files, body), "0.3 s after INSERTED %d with -f 50 the"
              " job's record is not in any binlog file (%s)"
              % (jid, [p.name for _, p in files]))


@no_server
def test_delete_never_comes_back(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "0")
        c = srv.client()
        keep, gone = {}, []
        for i in range(40):
            jid = c.put(b"d-%d" % i, pri=100)
            if i % 2:
                gone.append(jid)
            else:
                keep[jid] = b"d-%d" % i
        for jid in gone:
            c.expect("delete %d" % jid, "DELETED")
        # Reserved-then-deleted and buried-then-deleted too.
        for how in ("reserve", "bury"):
            jid = c.put(b"x-" + how.encode(), pri=0)
            got, _ = c.reserve(timeout=0)
            eq(got, jid, "reserved id")
            if how == "bury":
                c.expect("bury %d 1" % jid, "BURIED")
            c.expect("delete %d" % jid, "DELETED")
            gone.append(jid)
        kill9(srv)
        srv2 = ss.start(d, "-f", "0")
        got = peek_many(srv2.client(), list(keep) + gone)
        back = [j for j in gone if got[j] is not None]
        lost = [j for j in keep if got[j] != keep[j]]
        check(not back, "deleted jobs came back after kill -9: %s" % back)
        check(not lost, "jobs lost after kill -9: %s" % lost)
        # The highest id before the crash was a deleted job's: ids still
        # continue above it.
        top = max(list(keep) + gone)
        eq(top, gone[-1], "setup: the last job put was deleted")
        jid = srv2.client().put(b"next")
        check(jid > top, "after restart the next id is %d; the highest id "
              "seen before (a deleted job) was %d" % (jid, top))


@no_server
def test_smaller_max_job_size_keeps_big_job(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-z", "5000", "-f", "0")
        c = srv.client()
        big = _body("big", 4990)
        jid = c.put(big, pri=3)
        c.use("other")
        jid2 = c.put(_body("bur", 3000), pri=0)
        got, _ = c.reserve(timeout=0)
        eq(got, jid, "reserved id (pri 3 in default; other tube not watched)")
        c.expect("bury %d 4" % jid, "BURIED")
        kill9(srv)
        srv2 = ss.start(d, "-z", "100", "-f", "0")
        c2 = srv2.client()
        got = peek_many(c2, [jid, jid2])
        check(got[jid] == big, "restart with -z 100: 4994-byte job %d %s"
              % (jid, "lost" if got[jid] is None else "changed"))
        check(got[jid2] == _body("bur", 3000), "restart with -z 100: job %d "
              "in tube other lost or changed" % jid2)
        eq(job_state(c2, jid), "buried", "state of the big job")
        # The new limit applies to new puts.
        c2.send(b"put 0 0 10 101\r\n" + b"x" * 101 + b"\r\n")
        eq(c2.read_line(), b"JOB_TOO_BIG", "put of 101 bytes with -z 100")
        # The big job can be kicked, reserved and deleted as usual.
        c2.expect("kick-job %d" % jid, "KICKED")
        got_id, body = c2.reserve(timeout=0)
        eq((got_id, body), (jid, big), "reserve after kick")
        c2.expect("delete %d" % jid, "DELETED")
        # And survives another restart with -z 100 in its new state.
        kill9(srv2)
        srv3 = ss.start(d, "-z", "100")
        got = peek_many(srv3.client(), [jid, jid2])
        check(got[jid] is None, "deleted big job %d came back" % jid)
        check(got[jid2] == _body("bur", 3000), "job %d lost after the second "
              "restart with -z 100" % jid2)


# ---------------------------------------------------------------- stats

@no_server
def test_stats_binlog_values(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *SMALL)
        c = srv.client()
        st = c.stats()
        keys = list(st)
        check(len(keys) >= 54, "stats has %d keys; expected the 51 standard ones"
              " then binlog-bytes, binlog-live-bytes, binlog-healthy" % len(keys))
        for k in ("binlog-bytes", "binlog-live-bytes", "binlog-healthy"):
            check(k in keys[51:], "stats: key %r missing after the 51 standard "
                  "keys (extra keys: %s)" % (k, keys[51:]))
        eq(st["binlog-healthy"], "true", "binlog-healthy on a fresh binlog")
        oldest = stat_int(st, "binlog-oldest-index")
        cur = stat_int(st, "binlog-current-index")
        check(oldest >= 1, "binlog-oldest-index with -b: expected >= 1, got %d"
              % oldest)
        check(cur >= oldest, "binlog-current-index %d < binlog-oldest-index %d"
              % (cur, oldest))
        eq(stat_int(st, "binlog-max-size"), 65536, "binlog-max-size with -s 65536")
        names = [n for n, _ in binlog_files(d)]
        check(cur in names, "binlog-current-index %d but files are %s"
              % (cur, os.listdir(d)))
        check(min(names) == oldest, "binlog-oldest-index %d but oldest file "
              "is binlog.%d" % (oldest, min(names)))
        w0 = stat_int(st, "binlog-records-written")
        ids = [c.put(b"s" * 500) for _ in range(40)]
        st = c.stats()
        w1 = stat_int(st, "binlog-records-written")
        check(w1 >= w0 + 40, "binlog-records-written went from %d to %d over "
              "40 puts" % (w0, w1))
        for jid in ids[:3]:
            c.expect("delete %d" % jid, "DELETED")
        w2 = stat_int(c.stats(), "binlog-records-written")
        check(w2 >= w1 + 3, "binlog-records-written went from %d to %d over "
              "3 deletes" % (w1, w2))
        # 40 x 500-byte bodies: more than one 64 KiB file? no: 20 KB. Fill
        # into a second file to check the indexes move.
        for i in range(120):
            ids.append(c.put(b"t-%04d-" % i + b"t" * 993))
        st = c.stats()
        cur2 = stat_int(st, "binlog-current-index")
        check(cur2 > cur, "binlog-current-index stayed %d after writing about "
              "140 KB into 64 KiB files" % cur)
        live = stat_int(st, "binlog-live-bytes")
        nlive = len(ids) - 3
        check(live >= 500 * 37 + 1000 * 120,
              "binlog-live-bytes %d is below the live bodies' size (%d)"
              % (live, 500 * 37 + 1000 * 120))
        check(live <= 2 * (500 * 37 + 1000 * 120 + 300 * nlive),
              "binlog-live-bytes %d is implausibly large for %d live jobs of "
              "%d body bytes" % (live, nlive, 500 * 37 + 1000 * 120))
        on_disk = binlog_bytes(d)
        eq(stat_int(st, "binlog-bytes"), on_disk,
           "binlog-bytes vs the sizes of the binlog.N files in the directory")
        # stats-job file: >= 1, an existing file, within the index range.
        st = c.stats()
        lo = stat_int(st, "binlog-oldest-index")
        hi = stat_int(st, "binlog-current-index")
        have = {n for n, _ in binlog_files(d)}
        for jid in (ids[5], ids[-1]):
            f = int(c.stats_job(jid)["file"])
            check(lo <= f <= hi, "stats-job %d file %d outside oldest..current"
                  " %d..%d" % (jid, f, lo, hi))
            check(f in have, "stats-job %d file %d: no binlog.%d in %s"
                  % (jid, f, f, sorted(have)))
        # The job's record is in that file.
        f = int(c.stats_job(ids[-1])["file"])
        files = dict(parse_dir(d))
        check(f in files and find_body([(f, files[f])], b"t-0119-"),
              "stats-job %d file %d: the job's J record is not in binlog.%d"
              % (ids[-1], f, f))
        # Each start begins a new file.
        kill9(srv)
        srv2 = ss.start(d, *SMALL)
        st2 = srv2.client().stats()
        check(stat_int(st2, "binlog-current-index") > hi,
              "after a restart binlog-current-index is %s, expected above %d "
              "(each start begins a new file)" % (st2["binlog-current-index"],
                                                  hi))
        w = stat_int(st2, "binlog-records-written")
        check(w >= 0, "records-written")


@no_server
def test_stats_without_binlog(binary):
    with Servers(binary) as ss:
        import harness
        srv = harness.Server(binary, [])
        ss.all.append(srv)
        srv.start()
        c = srv.client()
        jid = c.put(b"x")
        st = c.stats()
        eq(st["binlog-oldest-index"], "0", "binlog-oldest-index without -b")
        eq(st["binlog-current-index"], "0", "binlog-current-index without -b")
        eq(st["binlog-records-written"], "0", "binlog-records-written without -b")
        eq(st["binlog-max-size"], "10485760", "binlog-max-size default")
        if "binlog-bytes" in st:
            eq(st["binlog-bytes"], "0", "binlog-bytes without -b")
        eq(c.stats_job(jid)["file"], "0", "stats-job file without -b")


@no_server
def test_binlog_size_raised_to_job_size(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-s", "1000", "-z", "20000")
        st = srv.client().stats()
        got = stat_int(st, "binlog-max-size")
        check(got >= 20000 + 4096, "-s 1000 -z 20000: binlog-max-size %d, "
              "expected raised to at least 24096" % got)
        err = srv.stderr_text()
        check(any("warn" in line.lower() for line in err.splitlines()),
              "-s 1000 -z 20000: no warning on stderr about raising the "
              "binlog size; stderr: %r" % err[-500:])
        # A max-size job fits in a file.
        c = srv.client()
        body = _body("max", 20000 - 4)
        jid = c.put(body)
        kill9(srv)
        srv2 = ss.start(d, "-s", "1000", "-z", "20000")
        eq(peek_many(srv2.client(), [jid])[jid], body,
           "20000-byte job after restart with -s raised")


@no_server
def test_default_binlog_size(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d)
        st = srv.client().stats()
        eq(st["binlog-max-size"], "10485760", "binlog-max-size default with -b")
        cur = stat_int(st, "binlog-current-index")
        path = os.path.join(d, "binlog.%d" % cur)
        check(os.path.exists(path), "no %s" % path)
        eq(os.path.getsize(path), 10485760,
           "size of the current file (preallocated to -s)")


# ---------------------------------------------------------------- format

@no_server
def test_file_format(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *SMALL)
        c = srv.client()
        bodies = {}
        for i in range(30):
            b = b"fmt-%03d\r\n" % i + bytes([i]) * (i * 30)
            bodies[c.put(b, pri=i)] = b
        c.use("fmt")
        for i in range(3):
            jid = c.put(b"fmt-del-%d" % i)
            c.expect("delete %d" % jid, "DELETED")
        c.watch("fmt")
        c.expect("use default", "USING default")
        # A state change: reserve + release with a new priority.
        jid0 = min(bodies)
        got, _ = c.reserve(timeout=0)
        eq(got, jid0, "reserved id")
        c.expect("release %d 99 0" % jid0, "RELEASED")
        sigterm(srv)
        names = sorted(os.listdir(d))
        for name in names:
            check(name == "lock" or re.fullmatch(r"binlog\.[1-9][0-9]*", name),
                  "unexpected file %r in the binlog directory (%s)" % (name, names))
        files = check_dir_clean(d)
        eq(files[0][0], 1, "first binlog file number on a fresh directory")
        for n, p in files:
            with open(p.path, "rb") as f:
                head = f.read(HEADER_SIZE)
            eq(head[:8], MAGIC, "%s magic" % p.name)
            eq(head[8:12], b"\x02\0\0\0", "%s version (u32 LE 2)" % p.name)
            eq(int.from_bytes(head[12:16], "little"), crc32c(head[:12]),
               "%s header CRC32C" % p.name)
        types = [r.type for _, p in files for r in p.records]
        check(types.count(b"J") >= 33, "expected at least 33 J records (one "
              "per put), found %d" % types.count(b"J"))
        check(types.count(b"D") >= 3, "expected at least 3 D records (one per "
              "delete), found %d" % types.count(b"D"))
        check(types.count(b"S") + types.count(b"J") >= 34,
              "no S (or J) record for the release")
        for jid, b in bodies.items():
            check(find_body(files, b), "no J record contains the body of job %d"
                  % jid)


# ---------------------------------------------------------------- errors

@no_server
def test_lock_second_instance_refuses(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d)
        c = srv.client()
        jid = c.put(b"locked")
        check(os.path.exists(os.path.join(d, "lock")), "no lock file %s/lock"
              % d)
        rc, err = run_refusing(binary, ["-b", d])
        check("lock" in err.lower(), "second tubed on the same -b directory: "
              "stderr should mention the lock, got %r" % err[-400:])
        # The lock is an flock held by the running server.
        fd = os.open(os.path.join(d, "lock"), os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                held = True
        finally:
            os.close(fd)
        check(held, "flock(LOCK_EX|LOCK_NB) on %s/lock succeeded while tubed "
              "runs: the lock is not held with flock" % d)
        # The first server is unaffected.
        eq(peek_many(c, [jid])[jid], b"locked", "job on the first server")
        c.put(b"still-works")
        # After kill -9 the lock goes with the process: a new server starts.
        kill9(srv)
        srv2 = ss.start(d)
        eq(peek_many(srv2.client(), [jid])[jid], b"locked",
           "job after restart following the lock test")


@no_server
def test_lock_held_by_other_process(binary):
    with TempDir() as d:
        fd = os.open(os.path.join(d, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            rc, err = run_refusing(binary, ["-b", d])
            check("lock" in err.lower(), "directory locked (flock) by another "
                  "process: stderr should mention the lock, got %r" % err[-400:])
        finally:
            os.close(fd)


@no_server
def test_binlog_dir_is_regular_file(binary):
    with TempDir() as d:
        path = os.path.join(d, "notadir")
        with open(path, "wb") as f:
            f.write(b"x")
        rc, err = run_refusing(binary, ["-b", path])
        check(path in err or "notadir" in err, "-b on a regular file: the error"
              " should name the path, got %r" % err[-400:])
        sub = os.path.join(path, "sub")
        rc, err = run_refusing(binary, ["-b", sub])
        check("notadir" in err, "-b under a regular file: the error should name "
              "the path, got %r" % err[-400:])
        with open(path, "rb") as f:
            eq(f.read(), b"x", "the regular file given to -b is left alone")


@no_server
def test_binlog_dir_created(binary):
    with TempDir() as d, Servers(binary) as ss:
        bdir = os.path.join(d, "new")
        check(not os.path.exists(bdir), "precondition")
        srv = ss.start(bdir)
        check(os.path.isdir(bdir), "-b %s: directory not created" % bdir)
        check(binlog_files(bdir), "no binlog.N file in the new directory: %s"
              % os.listdir(bdir))
        srv.client().put(b"x")


@no_server
def test_replay_tube_emptied_then_reused(binary):
    # Replay: the only job of tube "solo" is deleted (the tube goes away),
    # then a later job uses "solo" again; and the same across tubes in
    # turn. Every job lands in the right tube (run under ASan this also
    # checks replay never touches a tube it has freed).
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "0")
        c = srv.client()
        want = {}
        for round_ in range(3):
            for tube in ("solo", "other", "solo"):
                c.use(tube)
                a = c.put(b"gone-%s-%d" % (tube.encode(), round_))
                c.expect("delete %d" % a, "DELETED")
                b = c.put(b"kept-%s-%d" % (tube.encode(), round_))
                want[b] = tube
        kill9(srv)
        srv2 = ss.start(d, "-f", "0")
        c2 = srv2.client()
        for jid, tube in sorted(want.items()):
            eq(unq(c2.stats_job(jid)["tube"]), tube, "tube of job %d" % jid)
        for tube in ("solo", "other"):
            n = sum(1 for t in want.values() if t == tube)
            eq(c2.stats_tube(tube)["current-jobs-ready"], str(n),
               "stats-tube %s current-jobs-ready" % tube)
