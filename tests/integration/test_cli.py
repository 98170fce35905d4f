"""tubed-cli, driven as a person or a script would drive it: a real tubed
for the classic commands, Debian's beanstalkd for the fallback path and
the "needs tubed" messages, a fake server (cli_fake.py) speaking the
extension formats of extensions.md section 2, and tmux as the terminal for
`top`. Checks the real output (tables, JSON, bodies) and exit statuses:
0 ok, 1 not found, 2 usage, 3 connection, 4 server error, 5 no extension,
6 local error."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time

from cli_fake import FakeServer
from cli_util import (Tmux, check_aligned, cli_path, need_beanstalkd,
                      parse_table, run_cli, run_in_pty, top_script)
from harness import (PortReservation, Server, check, eq, fail, no_server, server_args,
                     start_server, wait_until)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _setup_tube_states(srv, tube):
    """ready 3 (one urgent), delayed 1, buried 2, reserved 1 in `tube`."""
    c = srv.client()
    c.use(tube)
    c.watch(tube)
    c.ignore("default")
    for pri in (5, 2000, 2000):
        c.put(b"r", pri=pri)
    c.put(b"d", delay=300)
    for _ in range(3):
        c.put(b"b")
    for _ in range(2):
        jid, _ = c.reserve(timeout=0)
        c.expect("bury %d 10" % jid, "BURIED")
    jid, _ = c.reserve(timeout=0)       # stays reserved while c is open
    return c


# ------------------------------------------------------------ real tubed

def test_cli_stats(srv):
    c = srv.client()
    c.put(b"one")
    c.put(b"two")
    r = run_cli(srv.binary, srv.port, "stats").ok()
    lines = r.text.splitlines()
    kv = dict(re.split(r"\s+", l, maxsplit=1) for l in lines)
    eq(kv["current-jobs-ready"], "2", "stats: current-jobs-ready")
    eq(kv["version"], c.stats()["version"].strip('"'), "stats: version unquoted")
    # Aligned: every value starts in the same column.
    starts = {len(l) - len(l.split(None, 1)[1]) for l in lines}
    eq(len(starts), 1, "value columns of stats (%r)" % lines[:3])

    j = run_cli(srv.binary, srv.port, "stats", "--json").ok().json()
    eq(j["current-jobs-ready"], 2, "stats --json: a number")
    eq(j["cmd-put"], 2, "stats --json cmd-put")
    check(isinstance(j["version"], str), "version is a string: %r" % j["version"])
    check(isinstance(j["hostname"], str), "hostname is a string")
    check(isinstance(j["id"], str), "id is a string")
    eq(j["draining"], False, "draining is a boolean")
    check(isinstance(j["rusage-utime"], float), "rusage-utime is a number")
    eq(list(j)[:2], ["current-jobs-urgent", "current-jobs-ready"], "key order")
    # Options go before or after the command.
    eq(run_cli(srv.binary, srv.port, "--json", "stats").ok().json()["cmd-put"], 2,
       "--json before the command")


def test_cli_tubes_table(srv):
    keep = _setup_tube_states(srv, "work")
    r = run_cli(srv.binary, srv.port, "tubes", env={"COLUMNS": "200"}).ok()
    titles, rows, lines = parse_table(r.text)
    for t in ("TUBE", "READY", "RESERVED", "DELAYED", "BURIED", "TOTAL",
              "WAITING", "PAUSED"):
        check(t in titles, "column %s in %r" % (t, titles))
    eq(lines[0].split()[0], "TUBE", "first column")
    w = rows["work"]
    eq((w["READY"], w["RESERVED"], w["DELAYED"], w["BURIED"], w["TOTAL"]),
       ("3", "1", "1", "2", "7"), "work's row")
    eq(w["PAUSED"], "-", "not paused")
    # Ready jobs younger than a second have an age (it showed "-", as
    # for a tube without ready jobs).
    check(re.fullmatch(r"[0-9]+s", w["OLDEST"]), "work's OLDEST: %r" % w["OLDEST"])
    eq(rows["default"]["OLDEST"], "-", "no ready job: no age")
    check("default" in rows, "default tube listed: %r" % rows.keys())
    eq(list(rows), sorted(rows), "tubes in name order")
    check_aligned(lines)
    check("\x1b" not in r.text, "no colour when stdout is a pipe")

    keep.expect("pause-tube work 120", "PAUSED")
    r = run_cli(srv.binary, srv.port, "tubes").ok()
    paused = parse_table(r.text)[1]["work"]["PAUSED"]
    check(re.fullmatch(r"(1m[0-9]+s|[0-9]+s|2m0s)", paused),
          "PAUSED shows the time left: %r" % paused)


def test_cli_tubes_json(srv):
    keep = _setup_tube_states(srv, "work")
    j = run_cli(srv.binary, srv.port, "tubes", "--json").ok().json()
    check(set(j) >= {"default", "work"}, "tubes in JSON: %r" % list(j))
    w = j["work"]
    eq(w["name"], "work", "name is a string")
    eq(w["current-jobs-buried"], 2, "buried")
    eq(w["current-jobs-urgent"], 1, "urgent")
    for k, v in keep.stats_tube("work").items():
        if k != "name" and k not in ("pause", "pause-time-left"):
            eq(w[k], int(v), "tubes --json %s against stats-tube" % k)


def test_cli_tubes_fits_width(srv):
    long_name = "a-rather-long-tube-name-for-a-narrow-terminal-" + "x" * 40
    c = srv.client()
    c.use(long_name)
    c.put(b"x")
    for width in (60, 80, 100):
        r = run_cli(srv.binary, srv.port, "tubes", env={"COLUMNS": str(width)}).ok()
        lines = r.text.rstrip("\n").split("\n")
        for l in lines:
            check(len(l) <= width, "line wider than COLUMNS=%d: %r" % (width, l))
        titles, rows, _ = parse_table(r.text)
        for t in ("TUBE", "READY", "RESERVED", "BURIED"):
            check(t in titles, "%s kept at width %d: %r" % (t, width, titles))
        cut = [n for n in rows if n.endswith("~")]
        eq(len(cut), 1, "one cut name at width %d (%r)" % (width, list(rows)))
        check(long_name.startswith(cut[0][:-1]), "cut name is a prefix")
    # To a pipe without COLUMNS: nothing is cut, every column shows.
    r = run_cli(srv.binary, srv.port, "tubes").ok()
    titles, rows, _ = parse_table(r.text)
    check(long_name in rows, "whole name without a width: %r" % list(rows))
    check("WATCHING" in titles and "USING" in titles, "all columns: %r" % titles)


def test_cli_colour_and_terminal_width(srv):
    c = srv.client()
    c.use("t")
    jid = c.put(b"x")
    c.watch("t")
    c.reserve(timeout=0)
    c.expect("bury %d 1" % jid, "BURIED")
    argv = [cli_path(srv.binary), "-p", str(srv.port), "tubes"]
    rc, out, err = run_in_pty(argv, cols=200)
    eq((rc, err), (0, ""), "tubes on a terminal")
    check(b"\x1b[" in out, "colour on a terminal: %r" % out[:300])
    plain = ANSI.sub("", out.decode())
    eq(parse_table(plain)[1]["t"]["BURIED"], "1", "table under the colour")
    for env in ({"NO_COLOR": ""}, {"NO_COLOR": "1"}, {"TERM": "dumb"}):
        rc, out, err = run_in_pty(argv, env=env, cols=200)
        eq(rc, 0, "exit with %r" % env)
        check(b"\x1b" not in out, "no escape with %r: %r" % (env, out[:200]))
    rc, out, _ = run_in_pty(argv + ["--no-color"], cols=200)
    check(b"\x1b" not in out, "no escape with --no-color")
    rc, out, _ = run_in_pty(argv[:-1] + ["stats"], env={"NO_COLOR": "x"})
    check(b"\x1b" not in out and b"current-jobs-ready" in out, "stats, NO_COLOR")
    # The terminal's own width (TIOCGWINSZ) wins over COLUMNS.
    rc, out, _ = run_in_pty(argv, env={"COLUMNS": "200"}, cols=44)
    lines = ANSI.sub("", out.decode()).rstrip("\n").split("\n")
    check(max(len(l) for l in lines) <= 44, "fits a 44-column terminal: %r" % lines)


def test_cli_peek(srv):
    c = srv.client()
    c.use("pk")
    first = c.put(b"hello\n", pri=7)
    c.put(b"later", pri=9)
    delayed = c.put(b"wait", delay=600)
    r = run_cli(srv.binary, srv.port, "peek", "pk").ok()
    check(r.text.endswith("hello\n"), "body last: %r" % r)
    kv = dict(l.split(None, 1) for l in r.text.splitlines()[:-1] if " " in l)
    eq((kv["id"], kv["tube"], kv["state"], kv["pri"]),
       (str(first), "pk", "ready", "7"), "peek's job stats")
    check(re.search(r"^body\s+6 bytes$", r.text, re.M), "body size line: %r" % r)

    j = run_cli(srv.binary, srv.port, "peek", "pk", "delayed", "--json").ok().json()
    eq((j["id"], j["body"], j["stats"]["state"], j["stats"]["tube"]),
       (delayed, "wait", "delayed", "pk"), "peek delayed --json")
    check(isinstance(j["stats"]["ttr"], int), "stats-job numbers are numbers")

    c.watch("pk")
    jid, _ = c.reserve(timeout=0)
    c.expect("bury %d 1" % jid, "BURIED")
    r = run_cli(srv.binary, srv.port, "peek", "pk", "buried", "--raw").ok()
    eq(r.out, b"hello\n", "--raw: the body alone")

    run_cli(srv.binary, srv.port, "peek", "empty-tube").fails(1, "no tube 'empty-tube'")
    check("empty-tube" not in c.list_tubes(), "peek created no tube")
    c.use("empty-tube")
    run_cli(srv.binary, srv.port, "peek", "empty-tube", "buried").fails(
        1, "no buried job in tube 'empty-tube'")
    run_cli(srv.binary, srv.port, "peek", "pk", "reserved").fails(2, "state")


def test_cli_peek_binary_body(srv):
    body = bytes(range(256)) + b"\r\n\x1b[2J"
    c = srv.client()
    c.use("bin")
    c.put(body)
    eq(run_cli(srv.binary, srv.port, "peek", "bin", "--raw").ok().out, body,
       "--raw byte for byte")
    j = run_cli(srv.binary, srv.port, "peek", "bin", "--json").ok().json()
    check("body" not in j, "a non-UTF-8 body is not a JSON string")
    import base64
    eq(base64.b64decode(j["body-base64"]), body, "body-base64")
    c.use("utf")
    c.put("grüße\t\"x\"\n".encode())
    j = run_cli(srv.binary, srv.port, "peek", "utf", "--json").ok().json()
    eq(j["body"], "grüße\t\"x\"\n", "UTF-8 body as a JSON string")
    # On a terminal, control bytes are shown escaped, never sent raw.
    rc, out, _ = run_in_pty([cli_path(srv.binary), "-p", str(srv.port), "peek", "bin"])
    eq(rc, 0, "peek on a terminal")
    check(b"\x1b[2J" not in out and b"\\x1b[2J" in ANSI.sub("", out.decode()).encode(),
          "escape sequence in a body shown escaped: %r" % out[-200:])


def test_cli_kick(srv):
    c = srv.client()
    c.use("k")
    c.watch("k")
    for _ in range(4):
        c.put(b"x")
    for _ in range(4):
        jid, _ = c.reserve(timeout=0)
        c.expect("bury %d 1" % jid, "BURIED")
    r = run_cli(srv.binary, srv.port, "kick", "k").ok()
    eq(r.text, "kicked 1 job in tube 'k'\n", "kick's default bound is 1")
    r = run_cli(srv.binary, srv.port, "kick", "k", "2").ok()
    eq(r.text, "kicked 2 jobs in tube 'k'\n", "kick 2")
    eq(run_cli(srv.binary, srv.port, "kick", "k", "all", "--json").ok().json(),
       {"kicked": 1}, "kick all --json")
    st = c.stats_tube("k")
    eq((st["current-jobs-buried"], st["current-jobs-ready"]), ("0", "4"), "kicked")
    run_cli(srv.binary, srv.port, "kick", "nope").fails(1, "no tube 'nope'")
    run_cli(srv.binary, srv.port, "kick", "k", "-1").fails(2)
    run_cli(srv.binary, srv.port, "kick", "k", "4294967296").fails(2, "kick")


def test_cli_put_file_and_stdin(srv):
    body = b"line one\r\nline two\x00\xff end"
    with tempfile.NamedTemporaryFile(prefix="tubed-cli-body-") as f:
        f.write(body)
        f.flush()
        r = run_cli(srv.binary, srv.port, "put", "--pri", "17", "--delay", "0",
                    "--ttr", "33", "jobs", f.name).ok()
    fid = int(r.text)
    eq(r.text, "%d\n" % fid, "put prints the id alone")
    sid = int(run_cli(srv.binary, srv.port, "put", "jobs", "-", stdin=b"from stdin")
              .ok().text)
    nid = int(run_cli(srv.binary, srv.port, "put", "jobs", stdin=b"").ok().text)
    j = run_cli(srv.binary, srv.port, "put", "jobs", "--json", stdin=b"j").ok().json()
    eq(j["tube"], "jobs", "put --json tube")
    c = srv.client()
    st = c.stats_job(fid)
    eq((st["pri"], st["ttr"], st["tube"].strip('"')), ("17", "33", "jobs"),
       "put options reached the job")
    eq(c.stats_job(sid)["pri"], "1024", "default priority")
    c.watch("jobs")
    got = {}
    for _ in range(4):
        jid, data = c.reserve(timeout=0)
        got[jid] = data
    eq(got[fid], body, "body from a file, byte for byte")
    eq(got[sid], b"from stdin", "body from stdin")
    eq(got[nid], b"", "empty body")
    eq(got[j["id"]], b"j", "--json put's id")
    run_cli(srv.binary, srv.port, "put", "jobs", "/nonexistent/file").fails(
        6, "/nonexistent/file")
    run_cli(srv.binary, srv.port, "put", "jobs", "--delay", "x").fails(2, "--delay")
    run_cli(srv.binary, srv.port, "stats", "--pri", "1").fails(2, "put")


def test_cli_put_delayed_then_peek_delayed(srv):
    jid = int(run_cli(srv.binary, srv.port, "put", "--delay", "500", "later",
                      stdin=b"soon").ok().text)
    j = run_cli(srv.binary, srv.port, "peek", "later", "delayed", "--json").ok().json()
    eq((j["id"], j["stats"]["state"], j["stats"]["delay"]), (jid, "delayed", 500),
       "a delayed put")


@server_args("-z", "10")
def test_cli_put_errors_from_server(srv):
    run_cli(srv.binary, srv.port, "put", "t", stdin=b"x" * 11).fails(
        4, "JOB_TOO_BIG", "max-job-size")
    srv.signal(signal.SIGUSR1)
    wait_until(lambda: srv.client().stats()["draining"] == "true", what="draining")
    run_cli(srv.binary, srv.port, "put", "t", stdin=b"x").fails(4, "DRAINING")
    # Read commands still work while draining.
    run_cli(srv.binary, srv.port, "tubes").ok()


def test_cli_usage_errors(srv):
    cases = [
        ([], "no command"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["peek"], "usage: tubed-cli peek"),
        (["move", "1"], "usage: tubed-cli move"),
        (["stats", "extra"], "usage: tubed-cli stats (no arguments)\n"),
        (["peek", "-bad"], "unknown option"),
        (["peek", "--", "-bad"], "not a legal tube name"),
        (["peek", "bad name!"], "not a legal tube name"),
        (["list", "t", "sleeping"], "state must be"),
        (["move", "x1", "t"], "not a job id"),
        (["--bogus", "stats"], "unknown option '--bogus'"),
        (["--raw", "stats"], "--raw is for peek"),
        (["top", "--json"], "top has no --json"),
        (["top"], "needs a terminal"),
    ]
    for args, needle in cases:
        r = run_cli(srv.binary, srv.port, *args)
        r.fails(2, needle)
        check("--help" in r.err, "usage errors point at --help: %r" % r)
    run_cli(srv.binary, None, "-p", "0", "stats").fails(2, "port")
    run_cli(srv.binary, None, "-p", "99999", "stats").fails(2, "port")
    run_cli(srv.binary, None, "stats", "-h").fails(2, "help is --help")
    r = run_cli(srv.binary, None, "--help").ok()
    for cmd in ("stats", "tubes", "top", "peek", "kick", "flush", "list", "move",
                "put", "binlog", "--json", "exit status"):
        check(cmd in r.text, "--help mentions %s" % cmd)
    check(run_cli(srv.binary, None, "--version").ok().text.startswith("tubed-cli "),
          "--version")


def test_cli_connection_errors(srv):
    # Held (bound, never listening): nothing listens there, and no other
    # test's server can come to.
    with PortReservation() as res:
        run_cli(srv.binary, res.port, "stats").fails(3, "cannot connect", "refused")
    run_cli(srv.binary, None, "stats", host="no-such-host.invalid").fails(
        3, "cannot resolve")
    run_cli(srv.binary, None, "stats", host="unix:/nonexistent/sock").fails(
        3, "unix:/nonexistent/sock")


@no_server
def test_cli_silent_server_times_out(binary):
    """A server that takes the connection and never answers: tubed-cli gives
    up after its --timeout (1 s here, not its default 10 s) with exit 3, and
    says so.  What shows the timeout honoured is its message and that it
    waited at least that long, not a ceiling on the time (a loaded machine
    is slower); one that never gives up is stopped by run_cli's deadline."""
    with FakeServer(silent=True) as fake:
        t0 = time.monotonic()
        try:
            r = run_cli(binary, fake.port, "--timeout", "1", "stats", timeout=60)
        except subprocess.TimeoutExpired:
            fail("tubed-cli --timeout 1 still waited for a silent server after 60 s")
        took = time.monotonic() - t0
        r.fails(3, "no answer from the server within 1000 ms")
        check(took >= 1.0, "tubed-cli --timeout 1 gave up on a silent server after "
              "%.2f s, before its timeout" % took)


@no_server
def test_cli_unix_socket(binary):
    d = tempfile.mkdtemp(prefix="tubed-cli-unix-")
    path = os.path.join(d, "tubed.sock")
    try:
        srv = Server(binary, unix_path=path)
        srv.start()
        try:
            c = srv.client()
            c.use("u")
            c.put(b"over unix")
            rows = parse_table(run_cli(binary, None, "tubes", host="unix:" + path)
                               .ok().text)[1]
            eq(rows["u"]["READY"], "1", "tubes over a unix socket")
            r = run_cli(binary, None, "peek", "u", "--raw", host="unix:" + path).ok()
            eq(r.out, b"over unix", "peek over a unix socket")
        finally:
            problems = srv.stop()
            check(not problems, "; ".join(problems))
    finally:
        for f in os.listdir(d):
            os.unlink(os.path.join(d, f))
        os.rmdir(d)


def test_cli_extensions_on_tubed(srv):
    """The extension commands against the real server: while it lacks
    them the CLI must say so (exit 5); once it has them (extensions.md
    section 2), they must do what the spec says."""
    c = srv.client()
    c.use("fl")
    c.watch("fl")
    for _ in range(3):
        c.put(b"x")
    jid, _ = c.reserve(timeout=0)
    c.expect("bury %d 1" % jid, "BURIED")

    r = run_cli(srv.binary, srv.port, "list", "fl", "all")
    if r.rc == 5:
        r.fails(5, "list needs tubed (the server does not know list-jobs)")
    else:
        r.ok()
        eq(len(r.text.split()), 3, "list fl all: %r" % r)

    r = run_cli(srv.binary, srv.port, "move", str(jid), "fl2")
    if r.rc == 5:
        r.fails(5, "move needs tubed (the server does not know move-job)")
    else:
        r.ok()
        eq(c.stats_job(jid)["tube"].strip('"'), "fl2", "moved")

    r = run_cli(srv.binary, srv.port, "flush", "fl")
    if r.rc == 5:
        r.fails(5, "flush needs tubed (the server does not know flush-tube)")
    else:
        r.ok()
        check(r.text.startswith("flushed "), "flush output: %r" % r)
        eq(c.stats_tube("fl")["current-jobs-ready"], "0", "flushed")

    r = run_cli(srv.binary, srv.port, "binlog", "--json")
    if r.rc == 5:
        r.fails(5, "binlog needs tubed (the server does not know stats-binlog)")
    else:
        j = r.ok().json()
        check(isinstance(j["healthy"], bool), "binlog healthy: %r" % j)

    titles = parse_table(run_cli(srv.binary, srv.port, "tubes").ok().text)[0]
    check("TUBE" in titles, "tubes works either way")


# ------------------------------------------------------------ beanstalkd

@no_server
def test_cli_beanstalkd_fallback(binary):
    with start_server(need_beanstalkd()) as bs:
        keep = _setup_tube_states(bs, "work")
        keep2 = bs.client()
        keep2.use("other")
        keep2.put(b"o")
        r = run_cli(binary, bs.port, "tubes", env={"COLUMNS": "200"}).ok()
        titles, rows, lines = parse_table(r.text)
        eq(sorted(rows), ["default", "other", "work"], "every tube, name order")
        w = rows["work"]
        eq((w["READY"], w["RESERVED"], w["DELAYED"], w["BURIED"]),
           ("3", "1", "1", "2"), "work's row from stats-tube")
        check("BYTES" not in titles, "no extension columns on beanstalkd")
        check_aligned(lines)
        st = keep.stats()
        check(int(st["cmd-stats-tube"]) >= 3, "fallback used stats-tube: %r"
              % st["cmd-stats-tube"])
        j = run_cli(binary, bs.port, "tubes", "--json").ok().json()
        eq(j["work"]["current-jobs-buried"], 2, "tubes --json on beanstalkd")
        eq(j["work"]["name"], "work", "bare name is a string")
        s = run_cli(binary, bs.port, "stats", "--json").ok().json()
        eq(s["version"], "1.12", "beanstalkd's bare version stays a string")
        check(isinstance(s["current-jobs-ready"], int), "numbers")
        # Classic commands work on beanstalkd too.
        jid = int(run_cli(binary, bs.port, "put", "other", stdin=b"b").ok().text)
        eq(run_cli(binary, bs.port, "kick", "work", "all").ok().text,
           "kicked 2 jobs in tube 'work'\n", "kick on beanstalkd")
        eq(run_cli(binary, bs.port, "peek", "other", "--json").ok().json()["id"],
           jid - 1, "peek on beanstalkd")


@no_server
def test_cli_beanstalkd_needs_tubed(binary):
    with start_server(need_beanstalkd()) as bs:
        c = bs.client()
        c.use("t")
        jid = c.put(b"x")
        cases = [
            (["flush", "t"], "flush needs tubed (the server does not know flush-tube)"),
            (["list", "t", "ready"], "list needs tubed (the server does not know list-jobs)"),
            (["move", str(jid), "u"], "move needs tubed (the server does not know move-job)"),
            (["binlog"], "binlog needs tubed (the server does not know stats-binlog)"),
            (["binlog", "--json"], "binlog needs tubed"),
        ]
        for args, msg in cases:
            r = run_cli(binary, bs.port, *args).fails(5, msg)
            eq(r.err.count("\n"), 1, "one line on stderr: %r" % r)
        eq(c.stats_tube("t")["current-jobs-ready"], "1", "nothing changed")


# ------------------------------------------------------------ fake server

@no_server
def test_cli_fake_flush(binary):
    with FakeServer() as fake:
        fake.add_jobs("f", "ready", 5)
        fake.add_jobs("f", "buried", 2)
        fake.add_jobs("f", "reserved", 1)
        eq(run_cli(binary, fake.port, "flush", "f").ok().text,
           "flushed 7 jobs from tube 'f'\n", "flush")
        eq(fake.count("f"), 1, "the reserved job stays")
        eq(run_cli(binary, fake.port, "flush", "f", "--json").ok().json(),
           {"flushed": 0}, "flush --json")
        run_cli(binary, fake.port, "flush", "ghost").fails(1, "no tube 'ghost'")
        eq([l for l in fake.log if l.startswith("flush-tube")],
           ["flush-tube f", "flush-tube f", "flush-tube ghost"], "requests sent")


@no_server
def test_cli_fake_list_every_page(binary):
    with FakeServer() as fake:
        ready = fake.add_jobs("l", "ready", 2500)
        fake.add_jobs("l", "buried", 10)
        ready += fake.add_jobs("l", "ready", 3)
        r = run_cli(binary, fake.port, "list", "l", "ready").ok()
        eq([int(x) for x in r.text.split()], ready, "every ready id, in order")
        pages = [l for l in fake.log if l.startswith("list-jobs")]
        eq(pages[0], "list-jobs l ready 0 1000", "first page")
        eq(pages[1], "list-jobs l ready %d 1000" % (ready[999] + 1), "second page")
        eq(len(pages), 4, "3 full-or-partial pages and the empty one: %r" % pages)
        j = run_cli(binary, fake.port, "list", "l", "all", "--json").ok().json()
        eq(len(j), 2513, "all states")
        check(all(isinstance(x, int) for x in j), "ids are numbers")
        eq(run_cli(binary, fake.port, "list", "l", "delayed", "--json").ok().json(),
           [], "an empty list is []")
        eq(run_cli(binary, fake.port, "list", "l", "delayed").ok().out, b"",
           "an empty list prints nothing")
        run_cli(binary, fake.port, "list", "ghost", "ready").fails(1, "no tube 'ghost'")


@no_server
def test_cli_fake_list_short_pages(binary):
    """A page shorter than asked is not the end: only an empty page is."""
    with FakeServer(page_cap=7) as fake:
        ids = fake.add_jobs("s", "buried", 50)
        r = run_cli(binary, fake.port, "list", "s", "buried").ok()
        eq([int(x) for x in r.text.split()], ids, "every id over short pages")


@no_server
def test_cli_fake_move(binary):
    with FakeServer() as fake:
        (jid,) = fake.add_jobs("a", "ready", 1)
        (rid,) = fake.add_jobs("a", "reserved", 1)
        eq(run_cli(binary, fake.port, "move", jid, "b").ok().text,
           "moved job %d to tube 'b'\n" % jid, "move")
        eq(fake.jobs[jid].tube, "b", "the job moved")
        eq(run_cli(binary, fake.port, "move", jid, "c", "--json").ok().json(),
           {"moved": jid}, "move --json")
        run_cli(binary, fake.port, "move", rid, "b").fails(1, "reserved")
        run_cli(binary, fake.port, "move", 999, "b").fails(1, "no job 999")
        fake.full_tubes.add("full")
        run_cli(binary, fake.port, "move", jid, "full").fails(4, "'full' is full")
        run_cli(binary, fake.port, "move", jid, "bad name").fails(2)


@no_server
def test_cli_fake_binlog(binary):
    with FakeServer() as fake:
        r = run_cli(binary, fake.port, "binlog").ok()
        kv = {}
        for l in r.text.splitlines():
            parts = l.split(None, 1)
            kv[parts[0]] = parts[1] if len(parts) > 1 else ""
        eq(kv["fsync-mode"], "every-50ms", "binlog human: unquoted")
        eq(kv["oldest-file-pinned-by"], "42", "binlog human")
        j = run_cli(binary, fake.port, "binlog", "--json").ok().json()
        eq((j["enabled"], j["healthy"], j["last-error"], j["fsync-mode"],
            j["bytes-on-disk"], j["oldest-file"]),
           (True, True, "", "every-50ms", 20971520, 7), "binlog --json types")


@no_server
def test_cli_fake_stats_tubes(binary):
    with FakeServer() as fake:
        fake.add_jobs("big", "ready", 4, body=b"x" * 1000)
        fake.add_jobs("big", "buried", 1)
        fake.add_jobs("quiet", "delayed", 2)
        r = run_cli(binary, fake.port, "tubes", env={"COLUMNS": "250"}).ok()
        titles, rows, lines = parse_table(r.text)
        for t in ("BYTES", "OLDEST", "EXPIRED", "DISCARDED", "TIMEOUTS"):
            check(t in titles, "extension column %s: %r" % (t, titles))
        b = rows["big"]
        eq((b["READY"], b["BURIED"], b["BYTES"], b["OLDEST"], b["EXPIRED"],
            b["TIMEOUTS"]), ("4", "1", "3.9K", "2m5s", "3", "7"), "big's row")
        eq(rows["quiet"]["OLDEST"], "-", "no ready job: no age")
        check_aligned(lines)
        eq([l for l in fake.log], ["stats-tubes"], "one request, no stats-tube")
        j = run_cli(binary, fake.port, "tubes", "--json").ok().json()
        eq(j["big"]["current-bytes"], 4001, "extension keys in JSON")
        eq(j["big"]["name"], "big", "quoted name")
        eq(list(j), ["big", "default", "quiet"], "name order")


@no_server
def test_cli_fake_broken_replies(binary):
    """A server that breaks the framing is an error (exit 4), never a hang
    or an endless loop."""
    cases = [
        ({"stats": b"OK 100\r\n---\nshort\r\n"}, ["stats"], 3),   # body never ends
        ({"stats": b"OK 5\r\n---\nx\r\n"}, ["stats"], 4),         # no "key: value"
        ({"stats": b"OK 5\r\nabcdeXY"}, ["stats"], 4),            # no CRLF after data
        ({"stats": b"WHAT\r\n"}, ["stats"], 4),
        ({"list-jobs": b"OK 12\r\n---\n- 5\n- 3\n\r\n"}, ["list", "t", "ready"], 4),
        ({"stats-tubes": b"OK 10\r\n---\n  x: 1\r\n"}, ["tubes"], 4),
        ({"flush-tube": b"INTERNAL_ERROR\r\n"}, ["flush", "t"], 4),
    ]
    for replies, args, rc in cases:
        with FakeServer(replies=replies) as fake:
            fake.add_jobs("t", "ready", 1)
            r = run_cli(binary, fake.port, "--timeout", "1", *args, timeout=20)
            r.fails(rc)


# ------------------------------------------------------------ top (tmux)

def _row(screen, tube):
    for line in screen.splitlines():
        cells = line.split()
        if cells and cells[0] == tube:
            return cells
    return None


def _cell(screen, tube, col):
    row = _row(screen, tube)
    return row[col] if row and col < len(row) else None


def _header(screen):
    for line in screen.splitlines():
        if line.split()[:2] == ["TUBE", "READY"]:
            return line.split()
    return None


def _restored(tm, what):
    # TERMIOS= is echoed after EXIT=: waiting for EXIT= alone could read
    # the screen between the two lines (CI saw it once).
    s = tm.wait_screen(lambda s: "EXIT=" in s and "TERMIOS=" in s,
                       "top to exit after " + what, 10)
    check("EXIT=0" in s, "top's exit status after %s:\n%s" % (what, s))
    check("TERMIOS=same" in s, "terminal mode restored after %s:\n%s" % (what, s))
    eq(tm.fmt("#{alternate_on}"), "0", "alternate screen left after " + what)
    eq(tm.fmt("#{cursor_flag}"), "1", "cursor shown again after " + what)
    check("Sanitizer" not in s, "sanitizer report:\n%s" % s)


def test_cli_top_live(srv):
    cli = cli_path(srv.binary)
    c = srv.client()
    c.use("live")
    c.put(b"first")
    with Tmux(top_script(cli, srv.port), cols=120, rows=20) as tm:
        s = tm.wait_screen(lambda s: _row(s, "live") is not None, "the table")
        head = _header(s)
        check(head and "PUT/S" in head and "DEL/S" in head, "rate columns: %r" % head)
        eq(tm.fmt("#{alternate_on}"), "1", "top on the alternate screen")
        eq(tm.fmt("#{cursor_flag}"), "0", "cursor hidden")
        check(re.search(r"\b127\.0\.0\.1:%d\b" % srv.port, s), "server shown:\n" + s)
        ready_col = head.index("READY")
        eq(_row(s, "live")[ready_col], "1", "live's READY")

        # Puts keep coming until a redraw shows them counted, with a rate.
        puts = head.index("PUT/S")

        def rate_seen(scr):
            row = _row(scr, "live")
            return (row and int(row[ready_col]) > 1 and row[puts] not in ("-", "0.0")
                    and scr.count("TUBE") == 1)
        s = tm.wait_screen(rate_seen, "READY to grow and PUT/S > 0",
                           each=lambda: c.put(b"more"))
        check(re.search(r"puts/s [1-9]", s), "server-wide puts/s:\n" + s)

        # Deletes show as DEL/S.
        c.watch("live")
        dels = head.index("DEL/S")

        def delete_some():
            jid, _ = c.reserve(timeout=0)
            c.expect("delete %d" % jid, "DELETED")
            c.put(b"refill")
        tm.wait_screen(lambda scr: _cell(scr, "live", dels) not in (None, "-", "0.0"),
                       "DEL/S > 0", each=delete_some)

        # A narrower terminal: SIGWINCH, redrawn to fit at once.
        tm.resize(60, 15)
        s = tm.wait_screen(lambda scr: _header(scr) and "PAUSED" not in _header(scr)
                           and _row(scr, "live"), "a redraw at 60 columns", 5)
        for line in s.splitlines():
            check(len(line.rstrip()) <= 60, "line wider than 60: %r" % line)
        check("READY" in _header(s) and "BURIED" in _header(s), "key columns kept")

        tm.keys("q")
        _restored(tm, "q")


def test_cli_top_ctrl_c_and_scroll(srv):
    cli = cli_path(srv.binary)
    c = srv.client()
    for i in range(30):
        c.use("t%02d" % i)
        c.put(b"x")
    with Tmux(top_script(cli, srv.port), cols=100, rows=15) as tm:
        s = tm.wait_screen(lambda s: _row(s, "t00") is not None, "the table")
        check(_row(s, "t29") is None, "30 tubes do not fit 15 rows")
        check(re.search(r"tubes 1-\d+ of 31", s), "scroll hint:\n" + s)
        tm.keys("G")
        s = tm.wait_screen(lambda s: _row(s, "t29") is not None, "scrolled to the end", 5)
        check(_row(s, "default") is None, "top rows scrolled off")
        tm.keys("g")
        tm.wait_screen(lambda s: _row(s, "default") is not None, "back at the top", 5)
        tm.keys("C-c")
        _restored(tm, "Ctrl-C")


@no_server
def test_cli_top_server_goes_away(binary):
    cli = cli_path(binary)
    srv = Server(binary)
    srv.start()
    try:
        with Tmux(top_script(cli, srv.port), cols=100, rows=20) as tm:
            tm.wait_screen(lambda s: _row(s, "default") is not None, "the table")
            problems = srv.stop()
            check(not problems, "; ".join(problems))
            tm.wait_screen(lambda s: "retrying" in s, "the lost connection shown", 10)
            tm.keys("q")
            _restored(tm, "q with the server gone")
    finally:
        srv.stop()


@no_server
def test_cli_top_on_beanstalkd(binary):
    cli = cli_path(binary)
    with start_server(need_beanstalkd()) as bs:
        c = bs.client()
        c.use("plain")
        c.put(b"x")
        with Tmux(top_script(cli, bs.port), cols=120, rows=20) as tm:
            s = tm.wait_screen(lambda s: _row(s, "plain") is not None,
                               "the table from list-tubes + stats-tube")
            check("version 1.12" in s, "beanstalkd's version in the head:\n" + s)
            tm.keys("q")
            _restored(tm, "q")
