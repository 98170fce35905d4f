"""stats-binlog (spec/extensions.md section 2), and the journaling of the
operator's commands: after kill -9 with -b DIR -f 0, a flush-tube and a
move-job are exactly as they were acknowledged.

Servers here are started by the tests (binlog_util.Servers), on free ports,
stopped by pid (kill -9 where the test says so); binlog directories are
temporary and removed at the end.
"""

import math
import os
import re
import time

import harness
from binlog_util import Servers, TempDir, binlog_bytes, binlog_files, kill9, stat_int
from harness import (check, check_cases, eq, fail, no_server, parse_yaml_dict,
                     slow, tubed_only, unq)

EXT = "tubed extension (extensions.md section 2)"

BINLOG_KEYS = ["enabled", "healthy", "last-error", "files", "bytes-on-disk",
               "live-bytes", "oldest-file", "oldest-file-pinned-by",
               "records-written", "records-migrated", "compactions",
               "fsync-mode", "last-fsync-ms-ago", "spilled-jobs", "spilled-bytes"]

JOB_KEYS = """id tube state pri age delay ttr time-left file reserves timeouts
releases buries kicks""".split()

UINT = re.compile(r"0|[1-9][0-9]*")


def stats_binlog(c):
    """stats-binlog parsed (framing checked: OK <n>, exactly n bytes, CRLF,
    the keys of the spec in its order, integers where integers belong)."""
    c.send(b"stats-binlog\r\n")
    line = c.read_line()
    m = re.fullmatch(rb"OK (\d+)", line)
    check(m is not None, "stats-binlog: expected OK <n>, got %r" % line)
    data = c.read_exact(int(m.group(1)) + 2)
    check(data.endswith(b"\r\n"), "stats-binlog: data not followed by CRLF")
    d = parse_yaml_dict(data[:-2])
    eq(list(d), BINLOG_KEYS, "stats-binlog keys")
    for k in BINLOG_KEYS:
        if k in ("enabled", "healthy"):
            check(d[k] in ("true", "false"), "stats-binlog %s: %r" % (k, d[k]))
        elif k in ("last-error", "fsync-mode"):
            check(re.fullmatch(r'"[^"\\]*"', d[k]) is not None,
                  "stats-binlog %s: not a quoted string: %r" % (k, d[k]))
        else:
            check(UINT.fullmatch(d[k]) is not None,
                  "stats-binlog %s: not an unsigned integer: %r" % (k, d[k]))
    return d


def put_many(c, n, body=b"x", pri=0, delay=0, ttr=60):
    ids = []
    for i in range(0, n, 500):
        k = min(500, n - i)
        c.send(b"".join(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body)
                        for _ in range(k)))
        for _ in range(k):
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            check(m is not None, "put: expected INSERTED, got %r" % line)
            ids.append(int(m.group(1)))
    return ids


def hold(w, jid):
    line, _ = w.cmd_body("reserve-job %d" % jid)
    check(line.startswith(b"RESERVED %d " % jid), "reserve-job %d: %r" % (jid, line))


def bury(c, jid, pri=0):
    hold(c, jid)
    c.expect("bury %d %d" % (jid, pri), "BURIED")


def gone(c, jid):
    eq(c.cmd_body("peek %d" % jid), (b"NOT_FOUND", None), "peek %d" % jid)


def list_all(c, tube, state="all"):
    line, body = c.cmd_body("list-jobs %s %s 0 1000" % (tube, state))
    if line == b"NOT_FOUND":
        return None
    check(line.startswith(b"OK "), "list-jobs %s: %r" % (tube, line))
    return [int(x) for x in harness.parse_yaml_list(body)]


# ====================================================== stats-binlog

@tubed_only(EXT)
def test_stats_binlog_without_binlog(srv):
    c = srv.client(timeout=30.0)
    c.put(b"x")
    c.expect("flush-tube default", "FLUSHED 1")
    data = (b"---\nenabled: false\nhealthy: true\nlast-error: \"\"\nfiles: 0\n"
            b"bytes-on-disk: 0\nlive-bytes: 0\noldest-file: 0\n"
            b"oldest-file-pinned-by: 0\nrecords-written: 0\nrecords-migrated: 0\n"
            b"compactions: 0\nfsync-mode: \"every-50ms\"\nlast-fsync-ms-ago: 0\n"
            b"spilled-jobs: 0\nspilled-bytes: 0\n")
    eq(c.cmd_body("stats-binlog"), (b"OK %d" % len(data), data), "stats-binlog")
    check_cases(srv, [
        (b"stats-binlog \r\n", ["BAD_FORMAT"]),
        (b"stats-binlog x\r\n", ["BAD_FORMAT"]),
        (b"stats-binlogx\r\n", ["BAD_FORMAT"]),
    ])
    st = c.stats()
    eq(st["cmd-stats"], "1", "stats-binlog is not counted as stats")


@no_server
@tubed_only(EXT)
def test_stats_binlog_fsync_modes(binary):
    # As in beanstalkd, -f turns syncing on and -F off: the last one wins.
    cases = [((), '"every-50ms"'), (("-f", "0"), '"strict"'),
             (("-f", "200"), '"every-200ms"'), (("-F",), '"never"'),
             (("-F", "-f", "0"), '"strict"'), (("-F", "-f5"), '"every-5ms"'),
             (("-f", "0", "-F"), '"never"')]
    with TempDir() as d, Servers(binary) as ss:
        for args, want in cases:
            sub = os.path.join(d, "b%d" % len(ss.all))
            os.mkdir(sub)
            srv = ss.start(sub, *args)
            c = srv.client(timeout=30.0)
            st = stats_binlog(c)
            eq(st["fsync-mode"], want, "fsync-mode with -b DIR %s" % " ".join(args))
            eq((st["enabled"], st["healthy"], st["last-error"]), ("true", "true", '""'),
               "enabled, healthy, last-error with -b")
            srv.stop()
        # without -b the mode still says what -f/-F asked for
        for args, want in cases:
            with harness.start_server(binary, list(args)) as srv:
                eq(stats_binlog(srv.client())["fsync-mode"], want,
                   "fsync-mode without -b, %s" % " ".join(args))


def _agrees_with_disk(c, d, what):
    """stats-binlog against the directory and against stats."""
    sb = stats_binlog(c)
    st = c.stats()
    files = binlog_files(d)
    eq(int(sb["files"]), len(files), "%s: files vs binlog.N in %s (%r)"
       % (what, d, sorted(os.listdir(d))))
    check("lock" in os.listdir(d), "the lock file exists (and is not counted)")
    eq(int(sb["bytes-on-disk"]), binlog_bytes(d), "%s: bytes-on-disk vs st_size sum" % what)
    eq(sb["bytes-on-disk"], st["binlog-bytes"], "%s: bytes-on-disk vs stats" % what)
    eq(sb["live-bytes"], st["binlog-live-bytes"], "%s: live-bytes vs stats" % what)
    eq(sb["records-written"], st["binlog-records-written"], "%s: records-written" % what)
    eq(sb["records-migrated"], st["binlog-records-migrated"], "%s: records-migrated" % what)
    eq(int(sb["oldest-file"]), files[0][0], "%s: oldest-file vs the directory" % what)
    eq(sb["oldest-file"], st["binlog-oldest-index"], "%s: oldest-file vs stats" % what)
    check(int(sb["live-bytes"]) <= int(sb["bytes-on-disk"]),
          "%s: live-bytes %s > bytes-on-disk %s" % (what, sb["live-bytes"], sb["bytes-on-disk"]))
    eq((sb["spilled-jobs"], sb["spilled-bytes"]), ("0", "0"), "%s: nothing spilled" % what)
    return sb


@no_server
@tubed_only(EXT)
def test_stats_binlog_with_binlog(binary):
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "0", "-s", "65536", "-z", "1024")
        c, w = srv.client(), srv.client()
        sb = _agrees_with_disk(c, d, "fresh")
        eq((sb["live-bytes"], sb["records-written"], sb["oldest-file-pinned-by"]),
           ("0", "0", "0"), "fresh: live-bytes, records-written, pinned-by")
        c.use("t")
        ids = put_many(c, 10, b"y" * 100)
        sb1 = _agrees_with_disk(c, d, "after 10 puts")
        eq(int(sb1["records-written"]), 10, "one record per put")
        check(int(sb1["live-bytes"]) >= 10 * 100, "live-bytes %s after 10 puts of "
              "100 bytes" % sb1["live-bytes"])
        # Reading changes nothing in the journal.
        c.cmd_body("stats-tubes")
        c.cmd_body("list-jobs t all 0 1000")
        sb2 = _agrees_with_disk(c, d, "after reading")
        eq(sb2["records-written"], sb1["records-written"], "stats-tubes and list-jobs "
           "write no record")
        # move-job: one record; to its own tube: none.
        c.expect("move-job %d u" % ids[0], "MOVED")
        sb3 = _agrees_with_disk(c, d, "after move-job")
        eq(int(sb3["records-written"]) - int(sb2["records-written"]), 1,
           "records written by one move-job")
        c.expect("move-job %d u" % ids[0], "MOVED")
        eq(stats_binlog(c)["records-written"], sb3["records-written"],
           "a move to its own tube writes nothing")
        # flush-tube: one record, however many jobs.
        hold(w, ids[1])
        bury(c, ids[2])
        sb3 = stats_binlog(c)
        c.expect("flush-tube t", "FLUSHED 8")
        sb4 = _agrees_with_disk(c, d, "after flush-tube")
        eq(int(sb4["records-written"]) - int(sb3["records-written"]), 1,
           "records written by a flush of 8 jobs")
        check(int(sb4["live-bytes"]) < int(sb3["live-bytes"]),
              "live-bytes went down with the flush (%s -> %s)"
              % (sb3["live-bytes"], sb4["live-bytes"]))
        c.expect("flush-tube nope", "NOT_FOUND")
        eq(stats_binlog(c)["records-written"], sb4["records-written"],
           "a flush that answered NOT_FOUND writes nothing")
        # Every job gone: nothing live.
        c.expect("delete %d" % ids[0], "DELETED")
        w.expect("delete %d" % ids[1], "DELETED")
        eq(_agrees_with_disk(c, d, "empty")["live-bytes"], "0", "live-bytes, no job")


@no_server
@tubed_only(EXT)
def test_stats_binlog_oldest_file_pinned_by(binary):
    """Small files (-s 65536): one long-lived job keeps binlog.1 while
    put+delete churn fills newer files. stats-binlog names it; stats-job
    says it lives in that file; moving it frees the file."""
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "0", "-s", "65536", "-z", "1024")
        c = srv.client(timeout=30.0)
        c.use("slow")
        pin = c.put(b"P" * 100)
        c.use("churn")
        body = b"x" * 500
        seen = None
        for i in range(300):
            c.send(b"".join(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body) for _ in range(5)))
            ids = [int(c.read_line().split()[1]) for _ in range(5)]
            c.send(b"".join(b"delete %d\r\n" % j for j in ids))
            for _ in ids:
                eq(c.read_line(), b"DELETED", "delete")
            sb = stats_binlog(c)
            if sb["oldest-file-pinned-by"] != "0":
                seen = sb
                break
        check(seen is not None, "stats-binlog never named a job pinning the oldest "
              "file during 1500 put+delete of 500 bytes with -s 65536 (last %r, "
              "files %r)" % (sb, [n for n, _ in binlog_files(d)]))
        eq(int(seen["oldest-file-pinned-by"]), pin, "oldest-file-pinned-by")
        check(int(seen["files"]) >= 2, "more than one file: %r" % seen)
        sj = c.stats_job(pin)
        eq(sj["file"], seen["oldest-file"], "stats-job file of the pinning job")
        eq(int(seen["oldest-file"]), binlog_files(d)[0][0], "oldest-file is the directory's")

        # The recipe: move the job (or delete it); the file goes.
        c.expect("move-job %d slow-2" % pin, "MOVED")
        after = stats_binlog(c)
        check(int(after["oldest-file"]) > int(seen["oldest-file"]),
              "after moving the pinning job, oldest-file is still %s (%r)"
              % (after["oldest-file"], after))
        check(not os.path.exists(os.path.join(d, "binlog.%s" % seen["oldest-file"])),
              "binlog.%s still on disk after the move" % seen["oldest-file"])
        check(after["oldest-file-pinned-by"] in ("0", str(pin)),
              "pinned-by %s after the move" % after["oldest-file-pinned-by"])
        if after["oldest-file-pinned-by"] == str(pin):
            eq(c.stats_job(pin)["file"], after["oldest-file"], "the job's new file")
        eq(unq(c.stats_job(pin)["tube"]), "slow-2", "moved")
        eq(c.peek("peek %d" % pin), (pin, b"P" * 100), "body after the move")


# ====================================================== durability

def _restart(ss, d, srv, args):
    kill9(srv)
    return ss.start(d, *args)


@no_server
@tubed_only(EXT)
def test_flush_tube_survives_kill9(binary):
    args = ["-f", "0"]
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *args)
        c, w, o = srv.client(), srv.client(), srv.client()
        c.use("t")
        ready = put_many(c, 3, b"ready")
        delayed = put_many(c, 2, b"delayed", delay=1000)
        buried = put_many(c, 2, b"buried")
        for j in buried:
            bury(c, j)
        res = c.put(b"reserved", pri=7, ttr=100)
        hold(w, res)
        moved_out = c.put(b"moved-out")
        o.use("u")
        moved_in = o.put(b"moved-in")
        keep_u = o.put(b"stays-in-u", delay=1000)
        c.expect("move-job %d u" % moved_out, "MOVED")
        c.expect("flush-tube t", "FLUSHED 7")
        after = c.put(b"after-flush")                 # a new job of t
        o.expect("move-job %d t" % moved_in, "MOVED")  # an old id moved in after
        top = max(ready + delayed + buried + [res, moved_out, moved_in, keep_u, after])

        for round_ in (1, 2):   # a second crash replays the same files again
            srv = _restart(ss, d, srv, args)
            c = srv.client(timeout=30.0)
            what = "after kill -9 #%d" % round_
            for j in ready + delayed + buried:
                gone(c, j)
            st = c.stats_job(res)
            eq((unq(st["tube"]), st["state"], st["pri"], st["ttr"]),
               ("t", "ready", "7", "100"),
               "%s: the job that was reserved during the flush" % what)
            eq(c.peek("peek %d" % res), (res, b"reserved"), "%s: its body" % what)
            eq(sorted(list_all(c, "t")), sorted([res, after, moved_in]),
               "%s: the jobs of t" % what)
            eq(sorted(list_all(c, "u")), sorted([moved_out, keep_u]),
               "%s: the jobs of u" % what)
            eq(c.peek("peek %d" % moved_in), (moved_in, b"moved-in"), "%s: body" % what)
            stt = c.stats_tube("t")
            eq((stt["current-jobs-ready"], stt["current-jobs-delayed"],
                stt["current-jobs-buried"]), ("3", "0", "0"), "%s: stats-tube t" % what)
            new = c.put(b"new")
            check(new > top, "%s: id %d given out again (highest before %d)"
                  % (what, new, top))
            c.expect("delete %d" % new, "DELETED")


@no_server
@tubed_only(EXT)
def test_flush_tube_newest_job_stays_gone_after_kill9(binary):
    """The flush record covers every job of the tube made before it, the
    newest one too (its id is the record's): when the last job the server
    made is the flushed tube's, it stays gone after kill -9, in every
    state (the newest of each run is ready, delayed, then buried)."""
    args = ["-f", "0"]
    for state in ("ready", "delayed", "buried"):
        with TempDir() as d, Servers(binary) as ss:
            srv = ss.start(d, *args)
            c, o = srv.client(), srv.client()
            o.use("other")
            other = o.put(b"other")
            c.use("t")
            older = put_many(c, 2, b"older")
            newest = c.put(b"newest", delay=1000 if state == "delayed" else 0)
            if state == "buried":
                bury(c, newest)
            check(newest > other, "the tube's job is the newest")
            c.expect("flush-tube t", "FLUSHED 3")
            srv = _restart(ss, d, srv, args)
            c = srv.client(timeout=30.0)
            for j in older + [newest]:
                gone(c, j)
            eq(list_all(c, "t"), None, "%s newest: tube t after kill -9" % state)
            eq(c.peek("peek %d" % other), (other, b"other"), "the other tube's job")


@no_server
@tubed_only(EXT)
def test_flush_tube_of_a_big_tube_survives_kill9(binary):
    """Many jobs in small files, thousands of reserved ones kept by the
    flush (its record lists them): after kill -9 exactly those come back."""
    args = ["-f", "0", "-s", "65536", "-z", "1024"]
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *args)
        c, w = srv.client(), srv.client()
        c.use("big")
        ids = put_many(c, 30000, b"j" * 20)
        kept = ids[::3]
        for i in range(0, len(kept), 500):
            part = kept[i:i + 500]
            w.send(b"".join(b"reserve-job %d\r\n" % j for j in part))
            for j in part:
                line, _ = w.read_reply()
                check(line.startswith(b"RESERVED %d " % j), "reserve-job %d: %r" % (j, line))
        c.use("other")
        other = put_many(c, 5, b"o")
        c.expect("flush-tube big", "FLUSHED %d" % (len(ids) - len(kept)))
        srv = _restart(ss, d, srv, args)
        # (The replay of 30,000 jobs in small files under ASan on a busy
        # machine took over 30 s once: a slow machine is no failure.)
        c = srv.client(timeout=120.0)
        st = c.stats_tube("big")
        eq((st["current-jobs-ready"], st["current-jobs-reserved"]),
           (str(len(kept)), "0"), "big after kill -9")
        got = []
        frm = 0
        while True:
            line, body = c.cmd_body("list-jobs big all %d 1000" % frm)
            page = [int(x) for x in harness.parse_yaml_list(body)]
            if not page:
                break
            got += page
            frm = page[-1] + 1
        eq(got, kept, "the jobs of big after kill -9: exactly the reserved ones")
        eq(sorted(list_all(c, "other")), other, "the other tube")


@no_server
@tubed_only(EXT)
def test_move_job_survives_kill9(binary):
    args = ["-f", "0"]
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *args)
        c, w = srv.client(), srv.client()
        c.use("src")
        r = c.put(b"ready-job", pri=77, ttr=33)
        dl = c.put(b"delayed-job", pri=78, ttr=34)
        b = c.put(b"buried-job", pri=79, ttr=35)
        twice = c.put(b"moved-twice", pri=80, ttr=36, delay=500)
        for j in (r, dl, b):
            hold(w, j)
            w.expect("release %d %s 0" % (j, c.stats_job(j)["pri"]), "RELEASED")
            bury(w, j, int(c.stats_job(j)["pri"]))
            c.expect("kick-job %d" % j, "KICKED")
        hold(w, dl)
        w.expect("release %d 78 1000" % dl, "RELEASED")
        bury(w, b, 79)
        for j in (r, dl, b):
            c.expect("move-job %d dest" % j, "MOVED")
        c.expect("move-job %d hop" % twice, "MOVED")
        c.expect("move-job %d dest2" % twice, "MOVED")
        c.use("default")
        t0 = time.monotonic()
        before = {j: c.stats_job(j) for j in (r, dl, b, twice)}

        srv = _restart(ss, d, srv, args)
        c = srv.client(timeout=30.0)
        after = {j: c.stats_job(j) for j in (r, dl, b, twice)}
        elapsed = time.monotonic() - t0
        slack = int(math.ceil(elapsed)) + 1
        for j in (r, dl, b, twice):
            bj, aj = before[j], after[j]
            for k in JOB_KEYS:
                if k == "file":
                    continue                      # a new process may rewrite
                if k == "age":
                    check(0 <= int(aj[k]) - int(bj[k]) <= slack,
                          "job %d age %s -> %s" % (j, bj[k], aj[k]))
                elif k == "time-left":
                    check(0 <= int(bj[k]) - int(aj[k]) <= slack,
                          "job %d time-left %s -> %s over %.1fs" % (j, bj[k], aj[k], elapsed))
                else:
                    eq(aj[k], bj[k], "job %d %s after kill -9" % (j, k))
        eq([unq(after[j]["tube"]) for j in (r, dl, b, twice)],
           ["dest", "dest", "dest", "dest2"], "tubes after kill -9")
        eq([after[j]["state"] for j in (r, dl, b, twice)],
           ["ready", "delayed", "buried", "delayed"], "states after kill -9")
        eq([c.peek("peek %d" % j) for j in (r, dl, b, twice)],
           [(r, b"ready-job"), (dl, b"delayed-job"), (b, b"buried-job"),
            (twice, b"moved-twice")], "bodies after kill -9")
        eq(sorted(list_all(c, "dest")), sorted([r, dl, b]), "list-jobs dest")
        for tube in ("src", "hop"):
            eq(c.cmd_body("stats-tube %s" % tube), (b"NOT_FOUND", None),
               "the emptied tube %s after kill -9" % tube)


@no_server
@tubed_only(EXT)
def test_flush_then_compaction_then_kill9(binary):
    """The flush record and the records it covers in small files, with
    compaction moving the kept job forward afterwards: after kill -9 the
    flushed jobs stay gone and the kept one is back."""
    args = ["-f", "0", "-s", "65536", "-z", "1024"]
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *args)
        c, w = srv.client(), srv.client()
        c.use("t")
        ids = put_many(c, 300, b"t" * 300)     # a few files' worth
        kept = ids[5]
        hold(w, kept)
        c.expect("flush-tube t", "FLUSHED 299")
        w.expect("release %d 5 0" % kept, "RELEASED")
        c.use("churn")
        m0 = int(stats_binlog(c)["records-migrated"])
        body = b"c" * 500
        for i in range(400):
            j = c.put(body)
            c.expect("delete %d" % j, "DELETED")
        sb = stats_binlog(c)
        check(int(sb["records-migrated"]) > m0 and int(sb["compactions"]) > 0,
              "compaction moved the kept job forward (%r)" % sb)
        srv = _restart(ss, d, srv, args)
        c = srv.client(timeout=30.0)
        eq(list_all(c, "t"), [kept], "t after compaction and kill -9")
        st = c.stats_job(kept)
        eq((st["state"], st["pri"], st["releases"]), ("ready", "5", "1"), "the kept job")
        for j in ids[:5] + ids[6:]:
            gone(c, j)


CONF_JOURNAL = """\
[tube mem]
journal = false
"""


@no_server
@tubed_only(EXT)
def test_move_job_between_journaled_and_unjournaled_tubes_kill9(binary):
    """A job moved into a journal=false tube is gone after kill -9 (and is
    not resurrected in its old tube); one moved out of it into a journaled
    tube is back, with its id."""
    from policy_util import Policy
    with Policy(binary, CONF_JOURNAL, "-f", "0", bdir=True) as p:
        c = p.srv.client(timeout=30.0)
        c.use("mem")
        out = c.put(b"was-in-memory", pri=12)
        c.use("disk")
        into = c.put(b"was-on-disk", pri=13)
        c.expect("move-job %d disk" % out, "MOVED")
        c.expect("move-job %d mem" % into, "MOVED")
        c.use("mem")
        c.expect("flush-tube mem", "FLUSHED 1")   # no record: mem is not journaled
        c.use("disk")
        last = c.put(b"last")
        p.kill9()
        p.restart()
        c = p.srv.client(timeout=30.0)
        eq(c.peek("peek %d" % out), (out, b"was-in-memory"), "moved out of mem")
        st = c.stats_job(out)
        eq((unq(st["tube"]), st["pri"]), ("disk", "12"), "its tube and pri")
        gone(c, into)
        eq(sorted(list_all(c, "disk")), [out, last], "the jobs of disk")
        eq(c.cmd_body("stats-tube mem"), (b"NOT_FOUND", None), "mem after the restart")


@slow
@no_server
@tubed_only(EXT)
def test_move_and_flush_on_a_full_disk(binary):
    """Disk full (a 4 MiB tmpfs, needs root): move-job, which writes the
    job again, answers OUT_OF_MEMORY and leaves the job as it was;
    flush-tube still works (it frees room); after kill -9 the state is the
    acknowledged one."""
    from test_binlog_disk import Tmpfs, _write_filler
    from binlog_util import put_raw
    args = ["-s", "65536", "-z", "1024", "-f", "0"]
    with TempDir() as d, Tmpfs(d, "4m") as mnt, Servers(binary) as ss:
        bdir = os.path.join(mnt.path, "bl")
        srv = ss.start(bdir, *args)
        c, w = srv.client(), srv.client()
        c.use("t")
        ids = put_many(c, 50, b"x" * 500)
        hold(w, ids[0])
        bury(c, ids[1])
        c.use("src")
        m = c.put(b"m" * 500, pri=3)
        c.use("fill")
        _write_filler(os.path.join(mnt.path, "filler"), max(0, mnt.free() - 200 * 1024))
        fill = []
        for _ in range(5000):
            line = put_raw(c, b"f" * 900)
            if line == b"OUT_OF_MEMORY":
                break
            fill.append(int(re.fullmatch(rb"INSERTED (\d+)", line).group(1)))
        else:
            fail("the disk never filled up")
        before = c.stats_job(m)
        c.expect("move-job %d dst" % m, "OUT_OF_MEMORY")
        after = c.stats_job(m)
        for k in JOB_KEYS:
            if k not in ("age",):
                eq(after[k], before[k], "the job after a move refused on a full disk: %s" % k)
        check("dst" not in c.list_tubes(), "no target tube left by the refused move")
        sb = stats_binlog(c)
        eq(sb["enabled"], "true", "enabled")
        c.expect("flush-tube t", "FLUSHED 49")
        c.expect("flush-tube fill", "FLUSHED %d" % len(fill))
        c.expect("move-job %d dst" % m, "MOVED")     # room again
        kill9(srv)
        mnt.remount("64m")
        srv = ss.start(bdir, *args)
        c = srv.client(timeout=30.0)
        eq(list_all(c, "t"), [ids[0]], "t after kill -9")
        eq(c.cmd_body("list-jobs fill all 0 10"), (b"NOT_FOUND", None), "fill after kill -9")
        eq(unq(c.stats_job(m)["tube"]), "dst", "the moved job after kill -9")


@slow
@no_server
@tubed_only(EXT)
def test_flush_tube_frees_a_full_disk(binary):
    """Disk full (a 4 MiB tmpfs, needs root), so full that a put of a
    10-byte job is refused: every job can still be deleted (each has room
    for its delete record set aside since its put), and so flush-tube of a
    tube of 1,000 deletable jobs and 10 reserved ones must work too: its
    one record (about 23 + 8 x 10 bytes) is far smaller than the room set
    aside for the 1,000 deletes it replaces. An operator flushes a tube to
    free the disk; OUT_OF_MEMORY would leave only 1,000 deletes."""
    from test_binlog_disk import Tmpfs, _write_filler
    from binlog_util import put_raw
    args = ["-s", "65536", "-z", "1024", "-f", "0"]
    with TempDir() as d, Tmpfs(d, "4m") as mnt, Servers(binary) as ss:
        bdir = os.path.join(mnt.path, "bl")
        srv = ss.start(bdir, *args)
        c, w = srv.client(), srv.client()
        c.use("t")
        ids = put_many(c, 1010, b"x" * 10)
        for j in ids[:10]:
            hold(w, j)
        c.use("fill")
        _write_filler(os.path.join(mnt.path, "filler"), max(0, mnt.free() - 200 * 1024))
        for _ in range(20000):
            line = put_raw(c, b"f" * 10)
            if line == b"OUT_OF_MEMORY":
                break
            check(line.startswith(b"INSERTED "), "put: %r" % line)
        else:
            fail("the disk never filled up")
        c.expect("delete %d" % ids[10], "DELETED")     # deletes work
        c.expect("flush-tube t", "FLUSHED 999")
        kill9(srv)
        mnt.remount("64m")
        srv = ss.start(bdir, *args)
        c = srv.client(timeout=30.0)
        eq(list_all(c, "t"), ids[:10], "t after kill -9: the reserved jobs")


@slow
@no_server
@tubed_only(EXT)
def test_flush_tube_gives_the_disk_back(binary):
    """doc/operations.md bounds the binlog at about 2 x live bytes + 3 x the
    file size. Every job holds room for its delete record (spare files are
    preallocated for it); deleting 60,000 jobs one by one uses that room and
    leaves one file. A flush of the same jobs must not leave the room behind
    either: within a deadline the files come back under the bound."""
    size = 65536
    args = ["-s", str(size), "-z", "1024"]
    for mode in ("delete", "flush"):
        with TempDir() as d, Servers(binary) as ss:
            srv = ss.start(d, *args)
            c = srv.client(timeout=30.0)
            c.use("t")
            ids = put_many(c, 60000, b"x" * 50)
            if mode == "flush":
                c.expect("flush-tube t", "FLUSHED 60000")
            else:
                for i in range(0, len(ids), 1000):
                    part = ids[i:i + 1000]
                    c.send(b"".join(b"delete %d\r\n" % j for j in part))
                    for _ in part:
                        eq(c.read_line(), b"DELETED", "delete")

            def within():
                sb = stats_binlog(c)
                bound = 2 * int(sb["live-bytes"]) + 3 * size
                return sb["live-bytes"] == "0" and int(sb["bytes-on-disk"]) <= bound and sb

            try:
                sb = harness.wait_until(within, timeout=10.0, what="the binlog to shrink")
            except harness.TestFailure:
                sb = stats_binlog(c)
                fail("after %s of 60,000 jobs, 10 s later: %s files, bytes-on-disk %s "
                     "with live-bytes %s (bound 2 x live + 3 x %d = %d); on disk: %s"
                     % (mode, sb["files"], sb["bytes-on-disk"], sb["live-bytes"], size,
                        2 * int(sb["live-bytes"]) + 3 * size,
                        " ".join("binlog.%d" % n for n, _ in binlog_files(d))))
