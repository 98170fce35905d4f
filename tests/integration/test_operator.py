"""The operator's commands (spec/extensions.md section 2): flush-tube,
stats-tubes, list-jobs, move-job; compatibility (none of them changes what a
classic client sees); tubed-cli's flush/list/move against a real server.

stats-binlog and the kill -9 durability of flush-tube and move-job are in
test_operator_binlog.py; the timings of big tubes in test_operator_slow.py.

Every reply is checked byte for byte where the spec fixes the bytes, and the
state behind it is read back (peek, stats-job, stats-tube, list-tubes).
Times are only ever used as bounds derived from the clock (a value that
depends on elapsed seconds may move by at most the whole seconds that
passed), never as speed thresholds.
"""

import math
import re
import time

import harness
from harness import (check, check_cases, eq, fail, no_server, parse_yaml_dict,
                     parse_yaml_list, slow, tubed_only, unq)
from policy_util import Policy

EXT = "tubed extension (extensions.md section 2)"

STATS_KEYS = """current-jobs-urgent current-jobs-ready current-jobs-reserved
current-jobs-delayed current-jobs-buried cmd-put cmd-peek cmd-peek-ready
cmd-peek-delayed cmd-peek-buried cmd-reserve cmd-reserve-with-timeout cmd-delete
cmd-release cmd-use cmd-watch cmd-ignore cmd-bury cmd-kick cmd-touch cmd-stats
cmd-stats-job cmd-stats-tube cmd-list-tubes cmd-list-tube-used
cmd-list-tubes-watched cmd-pause-tube job-timeouts total-jobs max-job-size
current-tubes current-connections current-producers current-workers
current-waiting total-connections pid version rusage-utime rusage-stime uptime
binlog-oldest-index binlog-current-index binlog-records-migrated
binlog-records-written binlog-max-size draining id hostname os platform""".split()
TUBED_STATS_KEYS = ["binlog-bytes", "binlog-live-bytes", "binlog-healthy",
                    "job-memory", "job-memory-limit"]

TUBE_KEYS = """name current-jobs-urgent current-jobs-ready current-jobs-reserved
current-jobs-delayed current-jobs-buried total-jobs current-using
current-watching current-waiting cmd-delete cmd-pause-tube pause
pause-time-left""".split()
TUBES_EXTRA_KEYS = ["current-bytes", "total-expired", "total-discarded",
                    "total-timeouts", "oldest-ready-age"]

JOB_KEYS = """id tube state pri age delay ttr time-left file reserves timeouts
releases buries kicks""".split()

# Keys of stats-job whose value follows the clock.
CLOCK_DOWN = ("time-left",)
CLOCK_UP = ("age",)

DEADLINE = 10.0


# ================================================================ helpers

def raw_reply(c, line):
    """Send one command line; return the whole reply as bytes (the line,
    and for OK <n> the n data bytes and their CRLF), checking the count."""
    if isinstance(line, str):
        line = line.encode()
    c.send(line + b"\r\n")
    first = c.read_line()
    m = re.fullmatch(rb"OK (\d+)", first)
    if not m:
        return first + b"\r\n"
    data = c.read_exact(int(m.group(1)) + 2)
    check(data.endswith(b"\r\n"), "%r: the %s data bytes are not followed by "
          "CRLF: %r" % (line, m.group(1), data[-20:]))
    return first + b"\r\n" + data


def ok_data(c, line):
    """The data of an OK <n> reply (asserts OK)."""
    raw = raw_reply(c, line)
    check(raw.startswith(b"OK "), "%r: expected OK <n>, got %r" % (line, raw[:80]))
    return raw[raw.index(b"\r\n") + 2:-2]


def list_jobs(c, tube, state, frm, count):
    """list-jobs: the ids (asserts OK and the exact YAML framing)."""
    data = ok_data(c, "list-jobs %s %s %d %d" % (tube, state, frm, count))
    ids = [int(x) for x in parse_yaml_list(data)]
    eq(data, b"---\n" + b"".join(b"- %d\n" % i for i in ids),
       "list-jobs %s %s %d %d: framing" % (tube, state, frm, count))
    check(ids == sorted(set(ids)), "list-jobs %s %s %d %d: ids not strictly "
          "ascending: %r" % (tube, state, frm, count, ids))
    check(len(ids) <= count, "list-jobs %s %s %d %d: %d ids"
          % (tube, state, frm, count, len(ids)))
    check(all(i >= frm for i in ids), "list-jobs %s %s %d %d: an id below "
          "from-id: %r" % (tube, state, frm, count, ids))
    return ids


def list_all_pages(c, tube, state, count, expected=None):
    """Page through list-jobs from id 0; with `expected` (sorted ids),
    check that every page is exactly the next `count` of them."""
    got = []
    frm = 0
    pages = 0
    while True:
        page = list_jobs(c, tube, state, frm, count)
        pages += 1
        if expected is not None:
            want = expected[len(got):len(got) + count]
            if page != want:
                fail("list-jobs %s %s %d %d (page %d): expected %r, got %r"
                     % (tube, state, frm, count, pages, want[:10], page[:10]))
        if not page:
            return got
        got.extend(page)
        frm = page[-1] + 1
        check(pages < 100000, "list-jobs paging does not end")


def stats_tubes_raw(c):
    """The data of stats-tubes (framing checked: OK <n>, n bytes, CRLF)."""
    return ok_data(c, "stats-tubes")


def parse_stats_tubes(data):
    """{name: [(key, value), ...]} in the order of the reply; checks the
    framing: '---\\n', then per tube '"<name>":\\n' and '  key: value\\n'."""
    check(data.startswith(b"---\n"), "stats-tubes data does not start with "
          "'---\\n': %r" % data[:40])
    check(data.endswith(b"\n"), "stats-tubes data does not end with '\\n': %r"
          % data[-40:])
    out = {}
    order = []
    cur = None
    for raw in data[4:-1].split(b"\n") if len(data) > 4 else []:
        m = re.fullmatch(rb'"([^"\\]+)":', raw)
        if m:
            name = m.group(1).decode()
            check(name not in out, "stats-tubes: tube %r twice" % name)
            cur = out[name] = []
            order.append(name)
            continue
        m = re.fullmatch(rb"  ([a-z-]+): (\S.*)", raw)
        check(m is not None and cur is not None,
              "stats-tubes: bad line %r (expected '\"name\":' or '  key: value')" % raw)
        cur.append((m.group(1).decode(), m.group(2).decode()))
    return order, out


def tube_block_lines(c, tube):
    """stats-tube's data lines (without '---\\n'), as bytes."""
    data = ok_data(c, "stats-tube " + tube)
    check(data.startswith(b"---\n"), "stats-tube framing")
    return data[4:-1].split(b"\n")


def put_many(c, n, body=b"x", pri=0, delay=0, ttr=60):
    """Pipelined puts; returns the ids."""
    ids = []
    chunk = 500
    for i in range(0, n, chunk):
        k = min(chunk, n - i)
        c.send(b"".join(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body)
                        for _ in range(k)))
        for _ in range(k):
            line = c.read_line()
            m = re.fullmatch(rb"INSERTED (\d+)", line)
            check(m is not None, "put: expected INSERTED, got %r" % line)
            ids.append(int(m.group(1)))
    return ids


def pipeline(c, lines, expect):
    """Send many command lines at once; each reply line must match the
    regex `expect` (bytes). Bodies (RESERVED) are read and dropped."""
    for i in range(0, len(lines), 500):
        part = lines[i:i + 500]
        c.send(b"".join(l + b"\r\n" for l in part))
        for l in part:
            line, _ = c.read_reply()
            check(re.fullmatch(expect, line) is not None,
                  "%r: expected %r, got %r" % (l, expect, line))


def bury(c, jid, pri=0):
    line, _ = c.cmd_body("reserve-job %d" % jid)
    check(line.startswith(b"RESERVED %d " % jid), "reserve-job %d: %r" % (jid, line))
    c.expect("bury %d %d" % (jid, pri), "BURIED")


def hold(w, jid):
    """Reserve job jid on connection w (it stays reserved while w is open)."""
    line, _ = w.cmd_body("reserve-job %d" % jid)
    check(line.startswith(b"RESERVED %d " % jid), "reserve-job %d: %r" % (jid, line))


def gone(c, jid):
    eq(c.cmd_body("peek %d" % jid), (b"NOT_FOUND", None), "peek %d" % jid)
    eq(c.cmd_body("stats-job %d" % jid), (b"NOT_FOUND", None), "stats-job %d" % jid)


def job(c, jid):
    return c.stats_job(jid)


def compare_job(before, after, elapsed, what, tube=None):
    """stats-job `after` equals `before` in every key but `tube` (which must
    be `tube` if given) and the clock keys, which may move by at most the
    whole seconds elapsed (and in their direction only)."""
    eq(list(after), JOB_KEYS, "%s: stats-job keys" % what)
    slack = int(math.ceil(elapsed))
    for k in JOB_KEYS:
        b, a = before[k], after[k]
        if k == "tube" and tube is not None:
            eq(a, '"%s"' % tube, "%s: tube" % what)
        elif k in CLOCK_UP:
            check(0 <= int(a) - int(b) <= slack, "%s: %s went from %s to %s in "
                  "%.2fs" % (what, k, b, a, elapsed))
        elif k in CLOCK_DOWN:
            check(0 <= int(b) - int(a) <= slack, "%s: %s went from %s to %s in "
                  "%.2fs" % (what, k, b, a, elapsed))
        else:
            eq(a, b, "%s: %s" % (what, k))


def wait_for(pred, what, timeout=DEADLINE):
    return harness.wait_until(pred, timeout=timeout, what=what)


def setup_states(c, w, tube):
    """Jobs of every state in `tube` (c uses it afterwards), ids interleaved:
    returns {state: [ids]}. The reserved one is held by w."""
    c.use(tube)
    ids = {"ready": [], "delayed": [], "buried": [], "reserved": []}
    r1 = c.put(b"ready-1", pri=5)            # urgent
    d1 = c.put(b"delayed-1", delay=1000)
    b1 = c.put(b"buried-1")
    x = c.put(b"reserved", pri=3000)
    r2 = c.put(b"ready-2", pri=2000)
    b2 = c.put(b"buried-2", pri=1)
    d2 = c.put(b"delayed-2", pri=7, delay=2000)
    bury(c, b1, 10)
    bury(c, b2, 2000)
    hold(w, x)
    ids["ready"] = [r1, r2]
    ids["delayed"] = [d1, d2]
    ids["buried"] = [b1, b2]
    ids["reserved"] = [x]
    return ids


# ============================================================= flush-tube

@tubed_only(EXT)
def test_flush_tube_deletes_ready_delayed_buried(srv):
    c, w, o = srv.client(), srv.client(), srv.client()
    ids = setup_states(c, w, "t")
    o.use("u")
    other = [o.put(b"u-ready"), o.put(b"u-delayed", delay=1000), o.put(b"u-buried")]
    bury(o, other[-1])
    st0 = c.stats()
    t0 = c.stats_tube("t")
    eq((t0["current-jobs-ready"], t0["current-jobs-delayed"],
        t0["current-jobs-buried"], t0["current-jobs-reserved"],
        t0["current-jobs-urgent"]), ("2", "2", "2", "1", "1"), "tube t before")
    u0 = c.stats_tube("u")

    c.expect("flush-tube t", "FLUSHED 6")

    for j in ids["ready"] + ids["delayed"] + ids["buried"]:
        gone(c, j)
    x = ids["reserved"][0]
    sx = c.stats_job(x)
    eq((sx["state"], unq(sx["tube"])), ("reserved", "t"), "the reserved job after the flush")
    for cmd in ("peek-ready", "peek-delayed", "peek-buried"):
        eq(c.cmd_body(cmd), (b"NOT_FOUND", None), "%s in the flushed tube" % cmd)
    t1 = c.stats_tube("t")
    eq((t1["current-jobs-ready"], t1["current-jobs-delayed"],
        t1["current-jobs-buried"], t1["current-jobs-reserved"],
        t1["current-jobs-urgent"]), ("0", "0", "0", "1", "0"), "tube t after")
    # Not a delete command: no cmd-delete moves, total-jobs is the count of puts.
    for k in ("total-jobs", "cmd-delete", "current-using", "current-watching"):
        eq(t1[k], t0[k], "stats-tube t %s after the flush" % k)
    eq(c.stats_tube("u"), u0, "stats-tube of the other tube")
    st1 = c.stats()
    for k, d in (("current-jobs-ready", 2), ("current-jobs-delayed", 2),
                 ("current-jobs-buried", 2), ("current-jobs-urgent", 1),
                 ("current-jobs-reserved", 0), ("cmd-delete", 0), ("total-jobs", 0)):
        eq(int(st1[k]), int(st0[k]) - d, "stats %s after the flush" % k)
    eq(list_jobs(c, "t", "all", 0, 1000), [x], "list-jobs t all after the flush")
    eq(list_jobs(c, "u", "all", 0, 1000), other, "the other tube's jobs")

    # The worker still owns its job: it can release it, and it is then the
    # only job of t; a second flush takes it.
    w.expect("release %d 3000 0" % x, "RELEASED")
    eq(c.stats_job(x)["state"], "ready", "released after the flush")
    c.expect("flush-tube t", "FLUSHED 1")
    gone(c, x)
    c.expect("flush-tube t", "FLUSHED 0")


@tubed_only(EXT)
def test_flush_tube_reserved_job_can_still_be_deleted(srv):
    c, w = srv.client(), srv.client()
    ids = setup_states(c, w, "t")
    x = ids["reserved"][0]
    c.expect("flush-tube t", "FLUSHED 6")
    # Only its worker can delete it; anyone else gets NOT_FOUND.
    c.expect("delete %d" % x, "NOT_FOUND")
    w.expect("touch %d" % x, "TOUCHED")
    w.expect("delete %d" % x, "DELETED")
    gone(c, x)
    eq(c.stats_tube("t")["current-jobs-reserved"], "0", "reserved after delete")
    eq(c.stats()["current-jobs-reserved"], "0", "stats reserved after delete")


@tubed_only(EXT)
def test_flush_tube_empty_and_default(srv):
    c = srv.client()
    c.expect("flush-tube default", "FLUSHED 0")
    c.put(b"a" * 100)
    c.put(b"b", delay=5)
    check(c.stats()["job-memory"] != "0", "job-memory with two jobs")
    c.expect("flush-tube default", "FLUSHED 2")
    c.expect("flush-tube default", "FLUSHED 0")
    check("default" in c.list_tubes(), "default survives a flush")
    eq(c.stats()["job-memory"], "0", "job-memory after flushing every job")


@tubed_only(EXT)
def test_flush_tube_not_found(srv):
    c = srv.client()
    c.expect("flush-tube nope", "NOT_FOUND")
    c.expect("flush-tube " + "a" * 200, "NOT_FOUND")
    # NOT_FOUND creates nothing.
    eq(c.list_tubes(), ["default"], "list-tubes after flush-tube of unknown tubes")
    eq(c.stats()["current-tubes"], "1", "current-tubes")


@tubed_only(EXT)
def test_flush_tube_bad_format(srv):
    check_cases(srv, [
        (b"flush-tube\r\n", ["UNKNOWN_COMMAND"]),     # like bare `delete`
        (b"flush-tube \r\n", ["BAD_FORMAT"]),
        (b"flush-tube  default\r\n", ["BAD_FORMAT"]),
        (b"flush-tube default \r\n", ["BAD_FORMAT"]),
        (b"flush-tube default x\r\n", ["BAD_FORMAT"]),
        (b"flush-tube -x\r\n", ["BAD_FORMAT"]),
        (b"flush-tube a*b\r\n", ["BAD_FORMAT"]),
        (b"flush-tube a\"b\r\n", ["BAD_FORMAT"]),
        (b"flush-tube " + b"a" * 201 + b"\r\n", ["BAD_FORMAT"]),
        (b"flush-tube defa\x00ult\r\n", ["BAD_FORMAT"]),
        (b"flush-tubedefault\r\n", ["UNKNOWN_COMMAND"]),
    ])


@tubed_only(EXT)
def test_flush_tube_lifetime(srv):
    """After a flush a tube lives on exactly while beanstalk's rule keeps
    it: a connection using or watching it, or a job (the reserved ones)."""
    c = srv.client()
    # Held only by its jobs: it goes with them.
    c.use("gone")
    c.put(b"a")
    c.put(b"b", delay=100)
    bury(c, c.put(b"c"))
    c.use("default")
    check("gone" in c.list_tubes(), "jobs keep a tube")
    c.expect("flush-tube gone", "FLUSHED 3")
    check("gone" not in c.list_tubes(), "a flushed tube nobody refers to "
          "is gone (list-tubes %r)" % c.list_tubes())
    eq(c.cmd_body("stats-tube gone"), (b"NOT_FOUND", None), "stats-tube gone")
    c.expect("flush-tube gone", "NOT_FOUND")
    c.expect("list-jobs gone all 0 10", "NOT_FOUND")

    # Watched: it stays. Used: it stays.
    watcher, user = srv.client(), srv.client()
    watcher.watch("watched")
    user.use("used")
    for tube in ("watched", "used"):
        c.use(tube)
        c.put(b"x")
        c.use("default")
        c.expect("flush-tube " + tube, "FLUSHED 1")
        check(tube in c.list_tubes(), "a %s tube stays after a flush" % tube)
        eq(c.stats_tube(tube)["current-jobs-ready"], "0", "%s: ready" % tube)
    c.expect("flush-tube watched", "FLUSHED 0")

    # Held only by a reserved job: it stays until that job is deleted.
    w = srv.client()
    c.use("held")
    h = c.put(b"h")
    c.put(b"i")
    c.use("default")
    hold(w, h)
    c.expect("flush-tube held", "FLUSHED 1")
    check("held" in c.list_tubes(), "a reserved job keeps its tube")
    w.expect("delete %d" % h, "DELETED")
    check("held" not in c.list_tubes(), "the tube goes with its last job "
          "(list-tubes %r)" % c.list_tubes())
    eq(c.stats()["current-tubes"], str(len(c.list_tubes())), "current-tubes")


@tubed_only(EXT)
def test_flush_tube_does_not_disturb_a_waiting_worker(srv):
    c, w = srv.client(), srv.client()
    w.watch("t")
    w.ignore("default")
    c.use("t")
    ids = put_many(c, 5, b"j", delay=1000)
    w.send(b"reserve-with-timeout 30\r\n")
    wait_for(lambda: c.stats_tube("t")["current-waiting"] == "1", "the worker to wait")
    c.expect("flush-tube t", "FLUSHED 5")
    eq(c.stats_tube("t")["current-waiting"], "1", "the worker still waits")
    j = c.put(b"new")
    line, body = w.read_reply()
    eq((line, body), (b"RESERVED %d 3" % j, b"new"), "the waiting worker gets the next job")
    check(j > max(ids), "ids are not reused")


# ============================================================ stats-tubes

def _check_tube_block(name, block, lines_before, lines_after):
    """The first 14 entries of a stats-tubes block are stats-tube's lines,
    byte for byte; pause-time-left may lie between two stats-tube reads."""
    keys = [k for k, _ in block]
    eq(keys, TUBE_KEYS + TUBES_EXTRA_KEYS, "stats-tubes keys of %r" % name)
    for i, (k, v) in enumerate(block[:len(TUBE_KEYS)]):
        mine = ("%s: %s" % (k, v)).encode()
        if k == "pause-time-left":
            lo = int(lines_after[i].split(b": ")[1])
            hi = int(lines_before[i].split(b": ")[1])
            check(lo <= int(v) <= hi, "stats-tubes %r pause-time-left %s not "
                  "between stats-tube's %d and %d" % (name, v, hi, lo))
            continue
        check(mine == lines_before[i] == lines_after[i],
              "stats-tubes %r line %d: %r, stats-tube says %r"
              % (name, i, mine, lines_before[i]))
    for k, v in block[len(TUBE_KEYS):]:
        check(re.fullmatch(r"0|[1-9][0-9]*", v) is not None,
              "stats-tubes %r %s: %r is not an unsigned integer" % (name, k, v))


@tubed_only(EXT)
def test_stats_tubes_framing_and_values(srv):
    c, w, v, keeper = srv.client(), srv.client(), srv.client(), srv.client()
    names = ["zeta", "alpha", "Beta", "m-1", "m", "a$(b);c/d+e.f_g", "A"]
    for n in names:
        keeper.watch(n)          # keeps every tube alive
    bodies = {}
    # jobs of every state, with known body sizes, the reserved one included
    setup_states(c, w, "alpha")
    bodies["alpha"] = sum(len(b) for b in (b"ready-1", b"delayed-1", b"buried-1",
                                           b"reserved", b"ready-2", b"buried-2",
                                           b"delayed-2"))
    c.use("zeta")
    c.put(b"z" * 1000)
    c.put(b"")
    bodies["zeta"] = 1000
    c.use("a$(b);c/d+e.f_g")
    c.put(b"12345", delay=50)
    bodies["a$(b);c/d+e.f_g"] = 5
    c.expect("pause-tube m 100", "PAUSED")
    v.watch("m-1")
    v.ignore("default")
    v.send(b"reserve-with-timeout 60\r\n")
    wait_for(lambda: c.stats_tube("m-1")["current-waiting"] == "1", "a waiting worker")
    c.use("Beta")

    tubes = c.list_tubes()
    before = {n: tube_block_lines(c, n) for n in tubes}
    data = stats_tubes_raw(c)
    after = {n: tube_block_lines(c, n) for n in tubes}
    order, blocks = parse_stats_tubes(data)

    eq(sorted(tubes), sorted(names + ["default"]), "list-tubes")
    eq(order, sorted(tubes, key=lambda s: s.encode()),
       "stats-tubes: the tubes in name (byte) order")
    eq(len(order), int(c.stats()["current-tubes"]), "number of tubes vs current-tubes")
    for n in order:
        _check_tube_block(n, blocks[n], before[n], after[n])
        ext = dict(blocks[n][len(TUBE_KEYS):])
        eq(ext["current-bytes"], str(bodies.get(n, 0)), "%r current-bytes" % n)
        for k in ("total-expired", "total-discarded", "total-timeouts"):
            eq(ext[k], "0", "%r %s" % (n, k))
    # name is the quoted tube name, as stats-tube prints it
    eq(blocks["a$(b);c/d+e.f_g"][0], ("name", '"a$(b);c/d+e.f_g"'), "name line")
    eq(dict(blocks["m"])["pause"], "100", "the paused tube")
    eq(dict(blocks["m-1"])["current-waiting"], "1", "the waiting worker")
    # The connection is still in step after the reply.
    c.expect("list-tube-used", "USING Beta")


@tubed_only(EXT)
def test_stats_tubes_exact_bytes(srv):
    """A fresh server with one job: the whole reply, byte for byte."""
    c = srv.client()
    c.use("t")
    c.put(b"hello", pri=5)
    c.use("default")
    block = lambda name, using, watching, ready, urgent, total, cur_bytes: (
        b'"%s":\n  name: "%s"\n  current-jobs-urgent: %d\n  current-jobs-ready: %d\n'
        b"  current-jobs-reserved: 0\n  current-jobs-delayed: 0\n"
        b"  current-jobs-buried: 0\n  total-jobs: %d\n  current-using: %d\n"
        b"  current-watching: %d\n  current-waiting: 0\n  cmd-delete: 0\n"
        b"  cmd-pause-tube: 0\n  pause: 0\n  pause-time-left: 0\n"
        b"  current-bytes: %d\n  total-expired: 0\n  total-discarded: 0\n"
        b"  total-timeouts: 0\n  oldest-ready-age: 0\n"
        % (name, name, urgent, ready, total, using, watching, cur_bytes))
    data = b"---\n" + block(b"default", 1, 1, 0, 0, 0, 0) + block(b"t", 0, 0, 1, 1, 1, 5)
    eq(raw_reply(c, "stats-tubes"), b"OK %d\r\n%s\r\n" % (len(data), data),
       "stats-tubes reply")


@tubed_only(EXT)
def test_stats_tubes_bad_format(srv):
    check_cases(srv, [
        (b"stats-tubes \r\n", ["BAD_FORMAT"]),
        (b"stats-tubes default\r\n", ["BAD_FORMAT"]),
        (b"stats-tubesx\r\n", ["BAD_FORMAT"]),
        (b"stats-tubes\x00\r\n", ["BAD_FORMAT"]),
    ])


@tubed_only(EXT)
def test_stats_tubes_many_long_names(srv):
    """A reply of a few hundred KB: the count still matches the bytes."""
    c = srv.client()
    names = ["%03d" % i + "n" * 197 for i in range(400)]
    c.send(b"".join(b"use %s\r\nput 0 0 60 1\r\nx\r\n" % n.encode() for n in names))
    for n in names:
        eq(c.read_line(), b"USING " + n.encode(), "use")
        check(c.read_line().startswith(b"INSERTED "), "put")
    data = stats_tubes_raw(c)
    order, blocks = parse_stats_tubes(data)
    eq(order, sorted(names + ["default"]), "tubes")
    for n in names:
        eq(dict(blocks[n])["current-jobs-ready"], "1", "%s ready" % n[:5])
        eq(dict(blocks[n])["current-bytes"], "1", "%s bytes" % n[:5])
    c.expect("list-tube-used", "USING " + names[-1])


@slow
@tubed_only(EXT)
def test_stats_tubes_timeouts_and_oldest_ready_age(srv):
    c, w = srv.client(), srv.client()
    # total-timeouts: one TTR runs out in tube "to".
    c.use("to")
    j = c.put(b"t", ttr=1)
    hold(w, j)
    # oldest-ready-age
    c.use("age")
    t0 = time.monotonic()          # before A's put: bounds its age above
    a = c.put(b"A", pri=10)
    t0_after = time.monotonic()    # after it: bounds its age below
    c.use("kicked")
    k = c.put(b"K")
    bury(c, k)
    c.use("late")
    c.put(b"L", delay=1)
    c.use("only-delayed")
    c.put(b"D", delay=100)
    wait_for(lambda: c.stats_job(j)["timeouts"] == "1", "the TTR to run out")
    harness.wait_until(lambda: time.monotonic() - t0_after >= 2.2, timeout=DEADLINE,
                       what="2.2 s to pass")

    def ages():
        blocks = parse_stats_tubes(stats_tubes_raw(c))[1]
        return {n: dict(b[len(TUBE_KEYS):]) for n, b in blocks.items()}

    ext = ages()
    t1 = time.monotonic()
    eq(ext["to"]["total-timeouts"], "1", "total-timeouts of the tube")
    eq(ext["age"]["total-timeouts"], "0", "total-timeouts of another tube")
    age_a = int(ext["age"]["oldest-ready-age"])
    check(2 <= age_a <= int(t1 - t0), "oldest-ready-age %d, the job has been "
          "ready %.2f s" % (age_a, t1 - t0))
    # A delayed job counts from when it became ready, not from its put.
    check(int(ext["late"]["oldest-ready-age"]) <= int(t1 - t0 - 1),
          "oldest-ready-age %s of a job ready for at most %.2f s"
          % (ext["late"]["oldest-ready-age"], t1 - t0 - 1))
    eq(ext["only-delayed"]["oldest-ready-age"], "0", "no ready job")
    eq(ext["kicked"]["oldest-ready-age"], "0", "only a buried job")
    eq(ext["default"]["oldest-ready-age"], "0", "empty tube")

    # A kicked job became ready at the kick.
    c.use("kicked")
    t2 = time.monotonic()
    c.expect("kick 1", "KICKED 1")
    ext = ages()
    t3 = time.monotonic()
    check(int(ext["kicked"]["oldest-ready-age"]) <= int(t3 - t2),
          "kicked job: oldest-ready-age %s, kicked %.2f s ago"
          % (ext["kicked"]["oldest-ready-age"], t3 - t2))

    # The head of the ready queue, not the oldest job: a more urgent job.
    c.use("age")
    t2 = time.monotonic()
    b = c.put(b"B", pri=1)
    ext = ages()
    t3 = time.monotonic()
    check(int(ext["age"]["oldest-ready-age"]) <= int(t3 - t2),
          "oldest-ready-age %s: the head (job %d) was put %.2f s ago"
          % (ext["age"]["oldest-ready-age"], b, t3 - t2))
    # B reserved: A is the head again.
    hold(w, b)
    ext = ages()
    t3 = time.monotonic()
    age = int(ext["age"]["oldest-ready-age"])
    check(age_a <= age <= int(t3 - t0), "oldest-ready-age %d after the head was "
          "reserved (A ready for %.2f s)" % (age, t3 - t0))
    # Released: B is the head again, ready since now.
    t2 = time.monotonic()
    w.expect("release %d 1 0" % b, "RELEASED")
    ext = ages()
    t3 = time.monotonic()
    check(int(ext["age"]["oldest-ready-age"]) <= int(t3 - t2),
          "oldest-ready-age %s after the head was released %.2f s ago"
          % (ext["age"]["oldest-ready-age"], t3 - t2))
    eq(c.stats_job(a)["state"], "ready", "A")


# ============================================================== list-jobs

@tubed_only(EXT)
def test_list_jobs_each_state(srv):
    c, w, o = srv.client(), srv.client(), srv.client()
    ids = setup_states(c, w, "t")
    # Another tube's jobs of every state, with ids in between.
    oids = setup_states(o, o, "u")
    c.use("t")
    ids["ready"].append(c.put(b"ready-3", pri=4000))
    allids = sorted(sum(ids.values(), []))
    check(min(sum(oids.values(), [])) < max(allids), "ids interleave")
    for state, want in list(ids.items()) + [("all", allids)]:
        want = sorted(want)
        raw = raw_reply(c, "list-jobs t %s 0 1000" % state)
        data = b"---\n" + b"".join(b"- %d\n" % i for i in want)
        eq(raw, b"OK %d\r\n%s\r\n" % (len(data), data), "list-jobs t %s 0 1000" % state)
    # from-id: at least from-id (an existing id is included)
    eq(list_jobs(c, "t", "all", allids[2], 1000), allids[2:], "from an existing id")
    eq(list_jobs(c, "t", "all", allids[2] + 1, 1000), allids[3:], "from id + 1")
    eq(list_jobs(c, "t", "all", 0, 3), allids[:3], "count 3")
    eq(list_jobs(c, "t", "ready", ids["ready"][0] + 1, 1), sorted(ids["ready"])[1:2],
       "ready, from, count 1")
    # empty pages: exact bytes
    for line in ("list-jobs t all %d 1000" % (allids[-1] + 1),
                 "list-jobs t all 18446744073709551615 1",
                 "list-jobs default all 0 1000",
                 "list-jobs u reserved %d 5" % (oids["reserved"][0] + 1)):
        eq(raw_reply(c, line), b"OK 4\r\n---\n\r\n", line)
    # the other tube's reserved job (held by o itself) is listed there only
    eq(list_jobs(c, "u", "reserved", 0, 1000), oids["reserved"], "u reserved")
    eq(list_jobs(c, "u", "all", 0, 1000), sorted(sum(oids.values(), [])), "u all")
    # 1000 and leading zeros are fine; several spaces between arguments too
    eq(list_jobs(c, "t", "all", 0, 1000), allids, "count 1000")
    eq(ok_data(c, "list-jobs t all 00 01000"), ok_data(c, "list-jobs t all 0 1000"),
       "leading zeros")
    eq(ok_data(c, "list-jobs t all  0   1000"), ok_data(c, "list-jobs t all 0 1000"),
       "several spaces between arguments")


@tubed_only(EXT)
def test_list_jobs_not_found(srv):
    c = srv.client()
    for state in ("ready", "delayed", "reserved", "buried", "all"):
        c.expect("list-jobs nope %s 0 10" % state, "NOT_FOUND")
    eq(c.list_tubes(), ["default"], "list-jobs created no tube")


@tubed_only(EXT)
def test_list_jobs_bad_format(srv):
    long_name = b"a" * 201
    check_cases(srv, [
        (b"list-jobs\r\n", ["UNKNOWN_COMMAND"]),
        (b"list-jobs \r\n", ["BAD_FORMAT"]),
        (b"list-jobs default\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 0\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 1001\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 4294967296\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 -1\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 5x\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 5 \r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 5 6\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready -1 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready x 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 18446744073709551616 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default bogus 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default READY 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default readyx 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default urgent 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs -x ready 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs a*b ready 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs " + long_name + b" ready 0 5\r\n", ["BAD_FORMAT"]),
        (b"list-jobs default ready 0 5\x00\r\n", ["BAD_FORMAT"]),
        # the form is checked before the tube
        (b"list-jobs nope ready 0 0\r\n", ["BAD_FORMAT"]),
        (b"list-jobs nope bogus 0 5\r\n", ["BAD_FORMAT"]),
        # well-formed
        (b"list-jobs nope ready 0 5\r\n", ["NOT_FOUND"]),
        (b"list-jobs " + b"a" * 200 + b" ready 0 5\r\n", ["NOT_FOUND"]),
    ])


@tubed_only(EXT)
def test_list_jobs_paging_covers_every_job_once(srv):
    """A few thousand jobs of every state, ids interleaved with another
    tube's: pages of 1, 7 and 1000 list every job of the state exactly
    once, each page exactly the next `count` ids."""
    c, o, w = srv.client(), srv.client(), srv.client()
    c.use("p")
    o.use("q")
    mine = []
    for i in range(30):
        mine += put_many(c, 70, b"p%d" % i, pri=i)
        mine += put_many(c, 30, b"pd", delay=5000)
        put_many(o, 20, b"q")
    eq(len(mine), 3000, "jobs put")
    delayed = [j for i, j in enumerate(mine) if i % 100 >= 70]
    ready = [j for i, j in enumerate(mine) if i % 100 < 70]
    buried = ready[1::5]
    reserved = ready[2::7]
    reserved = [j for j in reserved if j not in set(buried)]
    # bury on c, hold on w (w keeps them reserved)
    pipeline(c, [b"reserve-job %d" % j for j in buried], rb"RESERVED \d+ \d+")
    pipeline(c, [b"bury %d 0" % j for j in buried], rb"BURIED")
    pipeline(w, [b"reserve-job %d" % j for j in reserved], rb"RESERVED \d+ \d+")
    # The other tube has reserved and buried jobs too.
    qids = list_jobs(o, "q", "ready", 0, 1000)
    pipeline(o, [b"reserve-job %d" % j for j in qids[:50]], rb"RESERVED \d+ \d+")
    pipeline(o, [b"bury %d 0" % j for j in qids[:25]], rb"BURIED")
    gone_ = set(buried) | set(reserved)
    expect = {
        "ready": sorted(j for j in ready if j not in gone_),
        "delayed": sorted(delayed),
        "buried": sorted(buried),
        "reserved": sorted(reserved),
        "all": sorted(mine),
    }
    st = c.stats_tube("p")
    eq((int(st["current-jobs-ready"]), int(st["current-jobs-delayed"]),
        int(st["current-jobs-buried"]), int(st["current-jobs-reserved"])),
       tuple(len(expect[s]) for s in ("ready", "delayed", "buried", "reserved")),
       "stats-tube p counts")
    for state, want in expect.items():
        for count in (1, 7, 1000):
            got = list_all_pages(c, "p", state, count, want)
            eq(len(got), len(want), "list-jobs p %s, pages of %d: number of ids"
               % (state, count))


@tubed_only(EXT)
def test_list_jobs_changes_nothing(srv):
    """stats, stats-tube and every listed job's stats-job are the same
    before and after many listings, counters and clocks included."""
    c, w, v, x = srv.client(), srv.client(), srv.client(), srv.client()
    c.use("t")
    # a job that timed out once, was released, buried and kicked
    tj = c.put(b"timed-out", pri=3, ttr=1)
    hold(x, tj)
    ids = setup_states(c, w, "t")
    reserved2 = c.put(b"reserved-long", ttr=100)
    hold(w, reserved2)
    # a worker waiting on another, empty, tube
    v.watch("empty")
    v.ignore("default")
    v.send(b"reserve\r\n")
    wait_for(lambda: c.stats_job(tj)["timeouts"] == "1", "the TTR to run out")
    hold(x, tj)
    x.expect("release %d 3 0" % tj, "RELEASED")
    hold(x, tj)
    x.expect("bury %d 3" % tj, "BURIED")
    c.expect("kick-job %d" % tj, "KICKED")
    # the long reservation has lost at least a second of its TTR
    wait_for(lambda: int(c.stats_job(reserved2)["time-left"]) <= 98,
             "the reserved job's time-left to go down")
    jobs = sorted(sum(ids.values(), []) + [tj, reserved2])
    eq(list_jobs(c, "t", "all", 0, 1000), jobs, "all jobs of t")

    def snapshot():
        return (c.stats(), {n: c.stats_tube(n) for n in ("t", "empty", "default")},
                {j: c.stats_job(j) for j in jobs})

    t0 = time.monotonic()
    s0, tubes0, jobs0 = snapshot()
    for state in ("ready", "delayed", "reserved", "buried", "all"):
        for frm, count in ((0, 1), (0, 2), (0, 1000), (jobs[3], 3), (jobs[-1], 1),
                           (jobs[-1] + 1, 1000)):
            list_jobs(c, "t", state, frm, count)
            list_jobs(c, "empty", state, frm, count)
            list_jobs(c, "default", state, frm, count)
    s1, tubes1, jobs1 = snapshot()
    elapsed = time.monotonic() - t0
    slack = int(math.ceil(elapsed))

    # stats: the snapshot's own commands are the only difference
    eq(list(s1), list(s0), "stats keys")
    own = {"cmd-stats": 1, "cmd-stats-tube": len(tubes0), "cmd-stats-job": len(jobs0)}
    for k in s0:
        if k in own:
            eq(int(s1[k]) - int(s0[k]), own[k], "stats %s moved by the snapshot only" % k)
        elif k in ("rusage-utime", "rusage-stime"):
            continue
        elif k == "uptime":
            check(0 <= int(s1[k]) - int(s0[k]) <= slack, "uptime")
        else:
            eq(s1[k], s0[k], "stats %s before and after listing" % k)
    for n in tubes0:
        eq(tubes1[n], tubes0[n], "stats-tube %s before and after listing" % n)
    for j in jobs:
        compare_job(jobs0[j], jobs1[j], elapsed, "job %d" % j)
    eq(jobs1[reserved2]["state"], "reserved", "still reserved")
    # The waiting worker was handed nothing, and still waits.
    eq(tubes1["empty"]["current-waiting"], "1", "waiting worker")
    c.use("empty")
    e = c.put(b"e")
    eq(v.read_reply(), (b"RESERVED %d 1" % e, b"e"), "the waiting worker's job")


# =============================================================== move-job

@slow
@tubed_only(EXT)
def test_move_job_keeps_every_field(srv):
    c, w = srv.client(), srv.client()
    c.use("src")
    early = c.put(b"early-delayed", pri=11, delay=1000, ttr=20)
    r, d, b = (c.put(b"ready-job", pri=77, ttr=3), c.put(b"delayed-job", pri=77, ttr=3),
               c.put(b"buried-job", pri=77, ttr=3))
    for j in (r, d, b):
        hold(w, j)
    wait_for(lambda: all(c.stats_job(j)["timeouts"] == "1" for j in (r, d, b)),
             "three TTRs to run out")
    for j in (r, d, b):
        hold(w, j)
        w.expect("release %d 77 0" % j, "RELEASED")
        hold(w, j)
        w.expect("bury %d 77" % j, "BURIED")
        c.expect("kick-job %d" % j, "KICKED")
    hold(w, d)
    w.expect("release %d 77 1000" % d, "RELEASED")
    hold(w, b)
    w.expect("bury %d 77" % b, "BURIED")
    eq([c.stats_job(j)["state"] for j in (r, d, b, early)],
       ["ready", "delayed", "buried", "delayed"], "states before the move")
    wait_for(lambda: int(c.stats_job(early)["time-left"]) <= 998,
             "the early delayed job's time-left to go down")
    check("dst" not in c.list_tubes(), "dst does not exist yet")
    src0 = parse_stats_tubes(stats_tubes_raw(c))[1]["src"]

    t0 = time.monotonic()
    before = {j: c.stats_job(j) for j in (r, d, b, early)}
    for j in (r, d, b, early):
        c.expect("move-job %d dst" % j, "MOVED")
    after = {j: c.stats_job(j) for j in (r, d, b, early)}
    elapsed = time.monotonic() - t0
    for j in (r, d, b, early):
        compare_job(before[j], after[j], elapsed, "moved job %d" % j, tube="dst")
    eq([after[j][k] for j in (r, d, b) for k in ("reserves", "timeouts", "releases",
                                                   "buries", "kicks")],
       ["3", "1", "1", "1", "1", "4", "1", "2", "1", "1", "4", "1", "1", "2", "1"],
       "counters (sanity of the set-up)")

    # The tubes' counts follow the jobs.
    blocks = parse_stats_tubes(stats_tubes_raw(c))[1]
    s, t = dict(blocks["src"]), dict(blocks["dst"])
    eq((s["current-jobs-ready"], s["current-jobs-delayed"], s["current-jobs-buried"],
        s["current-jobs-urgent"], s["current-bytes"]), ("0", "0", "0", "0", "0"),
       "src after the moves")
    eq((t["current-jobs-ready"], t["current-jobs-delayed"], t["current-jobs-buried"],
        t["current-jobs-urgent"], t["current-bytes"]),
       ("1", "2", "1", "1", dict(src0)["current-bytes"]), "dst after the moves")
    eq(list_jobs(c, "dst", "all", 0, 1000), sorted([r, d, b, early]), "list-jobs dst")
    eq(list_jobs(c, "src", "all", 0, 1000), [], "list-jobs src")

    # They work in their new tube: reserve, peek-delayed, kick.
    w.watch("dst")
    w.ignore("default")
    eq(w.reserve(0), (r, b"ready-job"), "reserve from dst")
    c.use("dst")
    eq(c.peek("peek-delayed"), (early, b"early-delayed"), "peek-delayed in dst")
    eq(c.peek("peek-buried"), (b, b"buried-job"), "peek-buried in dst")
    c.expect("kick 1", "KICKED 1")
    eq(c.stats_job(b)["state"], "ready", "kicked in dst")
    eq(c.stats_job(b)["kicks"], "2", "kicks")


@tubed_only(EXT)
def test_move_job_wakes_a_waiting_worker(srv):
    c, w = srv.client(), srv.client()
    w.watch("work")
    w.ignore("default")
    w.send(b"reserve\r\n")
    c.use("parking")
    j = c.put(b"payload", pri=9)
    wait_for(lambda: c.stats_tube("work")["current-waiting"] == "1", "the worker to wait")
    c.expect("move-job %d work" % j, "MOVED")
    eq(w.read_reply(), (b"RESERVED %d 7" % j, b"payload"), "the waiting worker")
    eq(c.stats_job(j)["reserves"], "1", "reserves")


@tubed_only(EXT)
def test_move_job_to_its_own_tube_changes_nothing(srv):
    c = srv.client()
    c.use("s")
    a1 = c.put(b"a1", pri=5)
    a2 = c.put(b"a2", pri=5)
    b1 = c.put(b"b1")
    b2 = c.put(b"b2")
    bury(c, b1)
    bury(c, b2)
    d = c.put(b"d", delay=1000)
    wait_for(lambda: int(c.stats_job(d)["time-left"]) <= 998
             and dict(parse_stats_tubes(stats_tubes_raw(c))[1]["s"])
             ["oldest-ready-age"] != "0", "a second or two to pass")
    t0 = time.monotonic()
    blocks0 = parse_stats_tubes(stats_tubes_raw(c))[1]
    jobs0 = {j: c.stats_job(j) for j in (a1, a2, b1, b2, d)}
    st0 = c.stats()
    for j in (a1, a2, b1, b2, d):
        c.expect("move-job %d s" % j, "MOVED")
    blocks1 = parse_stats_tubes(stats_tubes_raw(c))[1]
    jobs1 = {j: c.stats_job(j) for j in (a1, a2, b1, b2, d)}
    st1 = c.stats()
    elapsed = time.monotonic() - t0
    for j in jobs0:
        compare_job(jobs0[j], jobs1[j], elapsed, "job %d moved to its own tube" % j)
    s0, s1 = dict(blocks0["s"]), dict(blocks1["s"])
    age0, age1 = int(s0.pop("oldest-ready-age")), int(s1.pop("oldest-ready-age"))
    check(age0 <= age1 <= age0 + int(math.ceil(elapsed)),
          "oldest-ready-age went from %d to %d: the head's ready clock restarted"
          % (age0, age1))
    eq(s1, s0, "the tube's stats-tubes entry")
    for k in st0:
        if k not in ("cmd-stats", "rusage-utime", "rusage-stime", "uptime",
                     "cmd-stats-job"):
            eq(st1[k], st0[k], "stats %s" % k)
    # The order of the buried list and of the ready queue is unchanged.
    eq(c.peek("peek-buried"), (b1, b"b1"), "the first buried job")
    eq(c.peek("peek-ready"), (a1, b"a1"), "the next ready job")


@tubed_only(EXT)
def test_move_job_not_found(srv):
    c, w = srv.client(), srv.client()
    c.use("s")
    r = c.put(b"r")
    mine = c.put(b"mine")
    deleted = c.put(b"del")
    c.expect("delete %d" % deleted, "DELETED")
    hold(w, r)
    hold(c, mine)
    for jid in (r, mine, deleted, 0, 999999, 18446744073709551615):
        c.expect("move-job %d ghost" % jid, "NOT_FOUND")
        w.expect("move-job %d ghost" % jid, "NOT_FOUND")
        c.expect("move-job %d default" % jid, "NOT_FOUND")
    check("ghost" not in c.list_tubes(), "a move that answers NOT_FOUND creates "
          "no tube (list-tubes %r)" % c.list_tubes())
    for j, owner in ((r, w), (mine, c)):
        st = c.stats_job(j)
        eq((st["state"], unq(st["tube"])), ("reserved", "s"), "reserved job %d" % j)
        owner.expect("delete %d" % j, "DELETED")


@tubed_only(EXT)
def test_move_job_bad_format(srv):
    check_cases(srv, [
        (b"move-job\r\n", ["UNKNOWN_COMMAND"]),
        (b"move-job \r\n", ["BAD_FORMAT"]),
        (b"move-job 1\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 \r\n", ["BAD_FORMAT"]),
        (b"move-job 1  t\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 t \r\n", ["BAD_FORMAT"]),
        (b"move-job 1 t u\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 -t\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 a*b\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 " + b"a" * 201 + b"\r\n", ["BAD_FORMAT"]),
        (b"move-job -1 t\r\n", ["BAD_FORMAT"]),
        (b"move-job x t\r\n", ["BAD_FORMAT"]),
        (b"move-job 1x t\r\n", ["BAD_FORMAT"]),
        (b"move-job 18446744073709551616 t\r\n", ["BAD_FORMAT"]),
        (b"move-job t 1\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 t\x00\r\n", ["BAD_FORMAT"]),
        (b"move-job 1 " + b"a" * 200 + b"\r\n", ["NOT_FOUND"]),
        (b"move-job 00001 t\r\n", ["NOT_FOUND"]),
    ])


@tubed_only(EXT)
def test_move_job_creates_the_target_and_tubes_live_by_the_rule(srv):
    c = srv.client()
    c.use("src")
    j = c.put(b"j", pri=3)
    c.use("default")
    eq(c.list_tubes(), ["default", "src"], "tubes before")
    c.expect("move-job %d fresh" % j, "MOVED")
    tubes = c.list_tubes()
    check("fresh" in tubes, "the target is created (list-tubes %r)" % tubes)
    check("src" not in tubes, "the source, held by nothing any more, is gone "
          "(list-tubes %r)" % tubes)
    st = c.stats_tube("fresh")
    eq((st["current-jobs-ready"], st["current-jobs-urgent"]), ("1", "1"), "fresh")
    c.expect("delete %d" % j, "DELETED")
    check("fresh" not in c.list_tubes(), "the target goes with its last job")
    eq(c.stats()["current-tubes"], "1", "current-tubes")


CONF_FULL = """\
[tube full]
max_items = 1

[tube roomy]
max_items = 1
discard_old_when_full = true

[tube small-*]
max_size = 3
"""


@no_server
@tubed_only(EXT)
def test_move_job_into_a_full_tube(binary):
    with Policy(binary, CONF_FULL) as p:
        c, w = p.srv.client(), p.srv.client()
        c.use("full")
        f = c.put(b"f")
        eq(c.cmd(b"put 0 0 60 1\r\ny"), b"OUT_OF_MEMORY",
           "the tube is full (sanity)")
        c.use("src")
        r = c.put(b"ready", pri=9, ttr=30)
        hold(w, r)
        w.expect("release %d 9 0" % r, "RELEASED")
        d = c.put(b"delayed", delay=500)
        b = c.put(b"buried")
        bury(c, b, 4)
        before = {j: c.stats_job(j) for j in (r, d, b)}
        full0 = c.stats_tube("full")
        t0 = time.monotonic()
        for j in (r, d, b):
            c.expect("move-job %d full" % j, "OUT_OF_MEMORY")
        after = {j: c.stats_job(j) for j in (r, d, b)}
        elapsed = time.monotonic() - t0
        for j in (r, d, b):
            compare_job(before[j], after[j], elapsed, "job %d after a refused move" % j)
        eq(c.stats_tube("full"), full0, "the full tube is unchanged")
        eq(list_jobs(c, "full", "all", 0, 10), [f], "the full tube's jobs")
        # its own job "moves" to its own tube
        c.expect("move-job %d full" % f, "MOVED")
        # room made: the move works
        c.expect("delete %d" % f, "DELETED")
        c.expect("move-job %d full" % b, "MOVED")
        eq((c.stats_job(b)["state"], unq(c.stats_job(b)["tube"])), ("buried", "full"),
           "the buried job in full")
        c.expect("move-job %d full" % r, "OUT_OF_MEMORY")

        # discard_old_when_full: the old job makes room
        c.use("roomy")
        old = c.put(b"old")
        c.expect("move-job %d roomy" % r, "MOVED")
        gone(c, old)
        eq(list_jobs(c, "roomy", "all", 0, 10), [r], "roomy's jobs")
        ext = dict(parse_stats_tubes(stats_tubes_raw(c))[1]["roomy"])
        eq(ext["total-discarded"], "1", "roomy total-discarded")
        # ... but never a reserved job: no room, nothing discarded
        hold(w, r)
        c.expect("move-job %d roomy" % d, "OUT_OF_MEMORY")
        eq(c.stats_job(r)["state"], "reserved", "the reserved job in roomy")
        eq(unq(c.stats_job(d)["tube"]), "src", "the refused job stays in src")

        # max_size, and a target that the failed move would have created
        c.use("src")
        big = c.put(b"0123456789")
        tiny = c.put(b"abc")
        c.use("default")
        c.expect("move-job %d small-x" % big, "OUT_OF_MEMORY")
        check("small-x" not in c.list_tubes(), "a refused move leaves no new tube "
              "(list-tubes %r)" % c.list_tubes())
        c.expect("move-job %d small-y" % tiny, "MOVED")
        eq(list_jobs(c, "small-y", "all", 0, 10), [tiny], "small-y")


# ========================================================== compatibility

def _classic_session():
    """(connection, bytes, number of replies) steps of classic commands."""
    return [
        ("a", b"put 5 0 120 3\r\nabc\r\n", 1),
        ("a", b"put 1 0 120 0\r\n\r\n", 1),
        ("a", b"put 9 3600 120 4\r\nlate\r\n", 1),
        ("a", b"use t1\r\nput 0 0 120 5\r\nhello\r\n", 2),
        ("b", b"watch t1\r\nlist-tubes-watched\r\n", 2),
        ("b", b"reserve-with-timeout 0\r\n", 1),
        ("b", b"reserve-with-timeout 0\r\n", 1),
        ("b", b"release 4 10 0\r\nbury 2 3\r\n", 2),
        ("a", b"use default\r\npeek-ready\r\npeek-delayed\r\npeek-buried\r\n", 4),
        ("a", b"kick 10\r\nkick-job 3\r\nkick-job 99\r\n", 3),
        ("a", b"stats-job 1\r\nstats-job 3\r\nstats-job 99\r\n", 3),
        ("a", b"stats-tube default\r\nstats-tube t1\r\nstats-tube nope\r\n", 3),
        ("a", b"list-tubes\r\nlist-tube-used\r\n", 2),
        ("a", b"pause-tube t1 0\r\n", 1),
        ("b", b"delete 4\r\ndelete 2\r\ndelete 4\r\n", 3),
        ("b", b"ignore t1\r\nignore default\r\n", 2),
        ("a", b"stats\r\n", 1),
        ("a", b"bogus\r\nput x\r\nlist-tubes\r\n", 3),
    ]


VOLATILE = {
    "uptime": r"\d+", "rusage-utime": r"\d+\.\d+", "rusage-stime": r"\d+\.\d+",
    "pid": r"\d+", "id": r"\S+", "hostname": r".*", "os": r".*", "platform": r".*",
    "age": r"\d+", "time-left": r"\d+", "job-memory": r"\d+",
}


def _mask(line, body):
    if body is None or not line.startswith(b"OK "):
        return line + b"\r\n" + (b"" if body is None else body + b"\r\n")
    lines = body.split(b"\n")
    for i, l in enumerate(lines):
        k, sep, v = l.partition(b": ")
        key = k.decode("latin-1")
        if sep and key in VOLATILE:
            check(re.fullmatch(VOLATILE[key], v.decode("latin-1").strip('"')),
                  "value %s: %r" % (key, v))
            lines[i] = k + b": <" + k + b">"
    return b"OK <n>\r\n" + b"\n".join(lines) + b"\r\n"


def _transcript(srv, operator=None):
    """The classic session's replies; `operator(step)` runs before each
    step (an operator using the extensions on its own connection)."""
    conns = {}
    out = []
    for i, (name, data, n) in enumerate(_classic_session()):
        if operator:
            operator(i)
        if name not in conns:
            conns[name] = srv.client()
        c = conns[name]
        c.send(data)
        for _ in range(n):
            line, body = c.read_reply()
            out.append((name, data[:40], _mask(line, body)))
    return out


@no_server
@tubed_only(EXT)
def test_classic_client_sees_the_same_bytes(binary):
    """A classic session's replies are byte for byte the same (time- and
    process-dependent values masked) whether or not an operator uses the
    extensions meanwhile on its own connection (present, using its own
    tube, in both runs)."""
    with harness.start_server(binary) as plain:
        idle = plain.client()
        idle.use("ops")
        want = _transcript(plain)
    with harness.start_server(binary) as srv:
        op = srv.client()
        op.use("ops")

        def operator(step):
            raw_reply(op, "stats-tubes")
            raw_reply(op, "stats-binlog")
            for tube in ("default", "t1", "ops"):
                raw_reply(op, "list-jobs %s all 0 1000" % tube)
                raw_reply(op, "list-jobs %s reserved 0 1" % tube)
            op.expect("flush-tube ops", "FLUSHED 0")
            op.expect("flush-tube nope", "NOT_FOUND")
            op.expect("move-job 999999 ops", "NOT_FOUND")
            op.expect("list-jobs nope all 0 1", "NOT_FOUND")
            op.expect("list-jobs ops all 0 0", "BAD_FORMAT")
            op.expect("move-job x ops", "BAD_FORMAT")
            op.expect("stats-tubes x", "BAD_FORMAT")

        got = _transcript(srv, operator)
    eq(len(got), len(want), "number of replies")
    diffs = ["%s %r:\n      alone   %r\n      with op %r"
             % (w[0], w[1], w[2][:400], g[2][:400])
             for w, g in zip(want, got) if w != g]
    check(not diffs, "%d replies differ:\n    %s" % (len(diffs), "\n    ".join(diffs[:8])))


@tubed_only(EXT)
def test_stats_keys_unchanged_by_the_extensions(srv):
    c, w = srv.client(), srv.client()
    want = STATS_KEYS + TUBED_STATS_KEYS
    eq(list(c.stats()), want, "stats keys")
    ids = setup_states(c, w, "t")
    raw_reply(c, "stats-tubes")
    raw_reply(c, "stats-binlog")
    list_jobs(c, "t", "all", 0, 1000)
    c.expect("move-job %d t2" % ids["ready"][0], "MOVED")
    c.expect("move-job %d t2" % ids["reserved"][0], "NOT_FOUND")
    c.expect("flush-tube t", "FLUSHED 5")
    c.expect("flush-tube nope", "NOT_FOUND")
    c.expect("list-jobs t all 0 0", "BAD_FORMAT")
    st = c.stats()
    eq(list(st), want, "stats keys after every extension command")
    eq(list(c.stats_tube("t2")), TUBE_KEYS, "stats-tube keys of a move's target")
    eq(list(c.stats_tube("t")), TUBE_KEYS, "stats-tube keys of a flushed tube")
    eq(list(c.stats_job(ids["ready"][0])), JOB_KEYS, "stats-job keys of a moved job")
    # The commands that failed to parse are not counted anywhere, nor are
    # the extension commands: every cmd-* is what the classic commands made.
    eq(st["cmd-delete"], "0", "cmd-delete")
    eq(st["cmd-stats"], "2", "cmd-stats")


# =============================================================== tubed-cli

@no_server
@tubed_only(EXT)
def test_cli_flush_list_move_against_tubed(binary):
    from cli_util import run_cli
    with harness.start_server(binary) as srv:
        c, w = srv.client(), srv.client()
        c.use("big")
        ids = put_many(c, 2500, b"b")
        hold(w, ids[10])
        bury(c, ids[20])
        r = run_cli(binary, srv.port, "list", "big", "ready").ok()
        want = [j for j in ids if j not in (ids[10], ids[20])]
        eq(r.text, "".join("%d\n" % j for j in want), "tubed-cli list big ready "
           "(all %d ids, across pages)" % len(want))
        r = run_cli(binary, srv.port, "list", "big", "all").ok()
        eq(r.text, "".join("%d\n" % j for j in ids), "tubed-cli list big all")
        r = run_cli(binary, srv.port, "list", "big", "reserved").ok()
        eq(r.text, "%d\n" % ids[10], "tubed-cli list big reserved")
        run_cli(binary, srv.port, "list", "nope", "ready").fails(1)
        run_cli(binary, srv.port, "move", str(ids[20]), "elsewhere").ok()
        st = c.stats_job(ids[20])
        eq((unq(st["tube"]), st["state"]), ("elsewhere", "buried"), "moved by tubed-cli")
        run_cli(binary, srv.port, "move", str(ids[10]), "elsewhere").fails(1)
        r = run_cli(binary, srv.port, "flush", "big").ok()
        check("2498" in r.text, "tubed-cli flush big: the count (%r)" % r.text)
        eq(list_jobs(c, "big", "all", 0, 1000), [ids[10]], "after tubed-cli flush")
        j = run_cli(binary, srv.port, "binlog", "--json").ok().json()
        eq((j["enabled"], j["fsync-mode"]), (False, "every-50ms"), "tubed-cli binlog --json")


# ================================================== expiry (max_age)

CONF_EXPIRY = """\
[tube dl]
max_age = 1s
move_expired_to = dead

[tube ex]
max_age = 1s

[tube ls]
max_age = 1s

[tube mv]
max_age = 1s

[tube agey]
max_age = 10s

[tube short]
max_age = 2s
"""


@no_server
@tubed_only(EXT)
def test_operator_commands_never_see_expired_jobs(binary):
    """Jobs whose max_age has passed are expired, even between two sweeps
    (extensions.md section 1): flush-tube neither deletes nor counts them
    (with move_expired_to they belong in the dead-letter tube), list-jobs
    does not list them, move-job does not find them.

    To have expired jobs the sweep has not reached yet, the server is
    stopped (SIGSTOP, by pid) past their max_age, the commands are sent,
    and it is continued: it then finds 5,000 due jobs per tube, more than
    one sweep step (1,000) takes."""
    import signal
    with Policy(binary, CONF_EXPIRY) as p:
        c, keeper = p.srv.client(timeout=30.0), p.srv.client()
        for t in ("dl", "ex", "ls", "mv", "dead"):
            keeper.watch(t)          # the tubes stay, to be looked at
        c.use("dl")
        put_many(c, 5000, b"d")
        c.use("ex")
        put_many(c, 5000, b"e")
        c.use("ls")
        put_many(c, 5000, b"l")
        c.use("mv")
        mv = c.put(b"m")
        c.use("default")
        p.srv.signal(signal.SIGSTOP)
        try:
            time.sleep(1.5)     # past max_age (a lower bound, not a speed)
            c.send(b"list-jobs ls all 0 1000\r\nmove-job %d elsewhere\r\n"
                   b"flush-tube dl\r\nflush-tube ex\r\n" % mv)
        finally:
            p.srv.signal(signal.SIGCONT)
        replies = [raw_reply_read(c) for _ in range(4)]
        eq(replies, [b"OK 4\r\n---\n\r\n", b"NOT_FOUND\r\n", b"FLUSHED 0\r\n",
                     b"FLUSHED 0\r\n"],
           "list-jobs, move-job and flush-tube on tubes whose jobs all expired")
        blocks = {n: dict(b) for n, b in parse_stats_tubes(stats_tubes_raw(c))[1].items()}
        eq(blocks["dead"]["current-jobs-ready"], "5000",
           "the dead-letter tube holds every expired job of dl")
        for t in ("dl", "ex", "ls", "mv"):
            eq(blocks[t]["total-expired"], {"mv": "1"}.get(t, "5000"),
               "total-expired of %s" % t)
        check("elsewhere" not in c.list_tubes(), "move-job of an expired job "
              "created its target")


def raw_reply_read(c):
    """Read one reply (already sent) as raw bytes."""
    first = c.read_line()
    m = re.fullmatch(rb"OK (\d+)", first)
    if not m:
        return first + b"\r\n"
    return first + b"\r\n" + c.read_exact(int(m.group(1)) + 2)


@no_server
@tubed_only(EXT)
def test_move_job_restarts_the_expiry_clock(binary):
    with Policy(binary, CONF_EXPIRY) as p:
        c, keeper = p.srv.client(), p.srv.client()
        keeper.watch("short")
        c.use("agey")
        j = c.put(b"j")
        t0 = time.monotonic()
        # 2.2 s in agey (max_age 10 s): older than short's max_age of 2 s.
        harness.wait_until(lambda: time.monotonic() - t0 >= 2.2, timeout=DEADLINE,
                           what="2.2 s to pass")
        c.send(b"move-job %d short\r\npeek %d\r\n" % (j, j))
        eq(c.read_line(), b"MOVED", "move-job into short")
        eq(c.read_reply(), (b"FOUND %d 1" % j, b"j"),
           "the moved job's clock restarted: not expired in short")
        # ... and it does expire there, by short's max_age.
        wait_for(lambda: c.cmd_body("peek %d" % j)[0] == b"NOT_FOUND",
                 "the job to expire in short")
        eq(dict(parse_stats_tubes(stats_tubes_raw(c))[1]["short"])["total-expired"],
           "1", "total-expired of short")


@slow
@tubed_only(EXT)
def test_flushed_and_moved_delayed_jobs_keep_their_timers_straight(srv):
    """Delayed jobs with short delays flushed or moved: nothing of them
    fires in the old tube when their time comes; the moved one becomes
    ready in its new tube."""
    c, w = srv.client(), srv.client()
    c.use("t")
    put_many(c, 3, b"f", delay=1)
    c.use("s")
    m = c.put(b"moved", delay=1)
    stay = c.put(b"stays", delay=1)
    c.expect("flush-tube t", "FLUSHED 3")
    c.expect("move-job %d dst" % m, "MOVED")
    w.watch("dst")
    w.ignore("default")
    eq(w.reserve(10, read_timeout=15), (m, b"moved"), "the moved job, ready in dst")
    wait_for(lambda: c.stats_job(stay)["state"] == "ready", "the job left in s")
    st = c.stats()
    eq((st["current-jobs-ready"], st["current-jobs-delayed"],
        st["current-jobs-reserved"]), ("1", "0", "1"), "stats")
    eq(list_jobs(c, "s", "all", 0, 10), [stay], "s")
    check("t" not in c.list_tubes(), "the flushed tube is gone")


# ================================ flush-tube of a big tube: at once

BIG = 100000


def _pipeline_replies(c, cmds):
    """Send every command in one write; return [(cmd, raw reply)]."""
    c.send(b"".join(x + b"\r\n" for x in cmds))
    return [(x, raw_reply_read(c)) for x in cmds]


@tubed_only(EXT)
def test_flushed_jobs_are_gone_at_once(srv):
    """Right after FLUSHED, in the same pipelined batch (the server frees a
    big flush's jobs over the following loop iterations), no command finds
    a flushed job, and the tube's counts and new jobs are right."""
    c, keeper = srv.client(timeout=30.0), srv.client()
    keeper.watch("big")                      # the tube stays
    c.use("big")
    one = c.put(b"j" * 16)
    cost = int(c.stats()["job-memory"])
    c.expect("delete %d" % one, "DELETED")
    ids = put_many(c, BIG, b"j" * 16)
    dl = [c.put(b"j" * 16, delay=100) for _ in range(3)]
    bu = c.put(b"j" * 16)
    bury(c, bu)
    probe = [ids[0], ids[1], ids[BIG // 2], ids[-1], dl[0], dl[-1], bu]
    cmds = [b"flush-tube big"]
    for j in probe:
        cmds += [b"peek %d" % j, b"stats-job %d" % j, b"delete %d" % j,
                 b"reserve-job %d" % j, b"kick-job %d" % j, b"move-job %d x" % j,
                 b"touch %d" % j, b"release %d 0 0" % j, b"bury %d 0" % j]
    cmds += [b"list-jobs big all 0 1000", b"peek-ready", b"peek-delayed",
             b"peek-buried", b"kick 10", b"put 0 0 60 16\r\n" + b"n" * 16,
             b"list-jobs big all 0 1000"]
    got = _pipeline_replies(c, cmds)
    eq(got[0][1], b"FLUSHED %d\r\n" % (BIG + 4), "flush-tube big")
    bad = [(x, r) for x, r in got[1:1 + 9 * len(probe)] if r != b"NOT_FOUND\r\n"]
    check(not bad, "commands that found a flushed job: %r" % bad[:6])
    tail = [r for _, r in got[1 + 9 * len(probe):]]
    new = bu + 1
    eq(tail[:5], [b"OK 4\r\n---\n\r\n", b"NOT_FOUND\r\n", b"NOT_FOUND\r\n",
                  b"NOT_FOUND\r\n", b"KICKED 0\r\n"], "the tube right after the flush")
    eq(tail[5], b"INSERTED %d\r\n" % new, "a put right after the flush")
    data = b"---\n- %d\n" % new
    eq(tail[6], b"OK %d\r\n%s\r\n" % (len(data), data), "list-jobs: the new job only")
    st = c.stats()
    eq((st["current-jobs-ready"], st["current-jobs-delayed"], st["current-jobs-buried"]),
       ("1", "0", "0"), "stats right after the flush")
    # Once the server has freed them, the memory is back.
    wait_for(lambda: c.stats()["job-memory"] == str(cost),
             "job-memory to come back to one job's (%d) once the flushed jobs "
             "are freed" % cost)
    eq(list_jobs(c, "big", "all", 0, 1000), [new], "big: the new job")
    eq(dict(parse_stats_tubes(stats_tubes_raw(c))[1]["big"])["current-bytes"], "16",
       "current-bytes of big")


@tubed_only(EXT)
def test_flushed_tube_nobody_refers_to_is_gone_at_once(srv):
    """The lifetime rule holds at once: a tube held only by its jobs is
    gone as soon as FLUSHED is sent, for the next command in the same
    batch, even when the server frees the jobs themselves later."""
    c = srv.client(timeout=30.0)
    c.use("gone")
    put_many(c, BIG, b"g")
    c.use("default")
    got = _pipeline_replies(c, [b"flush-tube gone", b"list-tubes",
                                b"stats-tube gone", b"flush-tube gone",
                                b"list-jobs gone all 0 1"])
    eq([r for _, r in got],
       [b"FLUSHED %d\r\n" % BIG, b"OK 14\r\n---\n- default\n\r\n", b"NOT_FOUND\r\n",
        b"NOT_FOUND\r\n", b"NOT_FOUND\r\n"],
       "flush-tube of a tube held by nothing else, then list-tubes, stats-tube, "
       "flush-tube, list-jobs of it in the same batch")
