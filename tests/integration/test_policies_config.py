"""--config FILE as an operator meets it (spec/extensions.md §1,
doc/configuration.md): a good file is checked and applied, every kind of
bad file is refused with FILE:LINE on stderr, exit 2 and nothing served,
the command line wins over the file, -c keeps its beanstalkd meaning.

Every test starts its own servers (or none) and stops them by pid.
"""

import os
import re
import shutil
import tempfile

import harness
from harness import check, eq, fail, no_server
from policy_util import (Policy, port_listening, put_id, put_line, run_tubed,
                         wait_for)

GOOD = """\
# a good file: top-level keys, a section per tube, a prefix section,
# comments everywhere

max_job_size = 100          # -z, in the file
stall_timeout = 30s
max_items = 0               # a tube key at the top level: the default
max_item_size = 90

[tube small]                # one tube
max_item_size = 10          # why: tiny jobs
max_items = 2

[tube r*]
max_item_size = 50
ttr = 2m

[tube reports-*]            # every tube starting with reports-
max_item_size = 20
max_age = 1h
move_expired_to = reports-expired

[tube reports-daily]
max_items = 1
\t
[tube reports-expired]\r
max_age = 0\r
"""


def _tmpdir():
    return tempfile.mkdtemp(prefix="tubed-conf-")


def _write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return p


def _size_ok(c, tube, n):
    """put of n bytes into tube: True if INSERTED, False if JOB_TOO_BIG."""
    c.use(tube)
    line = put_line(c, b"x" * n)
    if line.startswith(b"INSERTED "):
        return True
    eq(line, b"JOB_TOO_BIG", "put of %d bytes into %s" % (n, tube))
    return False


def _biggest(c, tube, limit):
    """The largest body tube takes, checked at limit and limit+1."""
    check(_size_ok(c, tube, limit),
          "tube %s: a %d-byte put should be INSERTED" % (tube, limit))
    check(not _size_ok(c, tube, limit + 1),
          "tube %s: a %d-byte put should be JOB_TOO_BIG" % (tube, limit + 1))


# ------------------------------------------------------------ good files

@no_server
def test_check_config_good_file(binary):
    d = _tmpdir()
    try:
        path = _write(d, "good.conf", GOOD)
        # Held (bound, never listening) so no other test's server listens
        # there: the check below sees only what tubed left.
        with harness.PortReservation() as res:
            port = res.port
            rc, out, err = run_tubed(binary, ["-l", harness.HOST, "-p", port,
                                              "--config", path, "--check-config"])
            eq((rc, out, err), (0, "%s: ok\n" % path, ""),
               "--check-config of a good file (status, stdout, stderr)")
            check(not port_listening(port), "--check-config left a listener")
        # Without a file it checks the flags alone (the unit's ExecReload
        # runs it whether or not TUBED_OPTS names a file).
        rc, out, err = run_tubed(binary, ["--check-config"])
        eq((rc, out, err), (0, "command line: ok\n", ""),
           "--check-config without --config (status, stdout, stderr)")
        rc, out, err = run_tubed(binary, ["-p", "abc", "--check-config"])
        eq(rc, 2, "--check-config of a bad flag without --config: exit status")
        check("-p" in err, "--check-config -p abc: stderr %r" % err[:200])
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_good_file_applies_with_precedence(binary):
    """The file's keys are in force, resolved key by key: exact section,
    longest prefix that sets the key, top level, default."""
    with Policy(binary, GOOD) as p:
        c = p.srv.client()
        eq(c.stats()["max-job-size"], "100", "max-job-size from the file's max_job_size")
        _biggest(c, "default", 90)            # top level max_item_size
        _biggest(c, "small", 10)              # exact section
        _biggest(c, "rss", 50)                # [tube r*]
        _biggest(c, "reports-weekly", 20)     # [tube reports-*] beats r*
        # reports-daily's section does not set max_item_size: the longest
        # prefix that does (reports-*) gives it, r* does not.
        c.use("reports-daily")
        put_id(c, b"x" * 20)
        eq(put_line(c, b"x" * 21), b"JOB_TOO_BIG",
           "reports-daily: max_item_size from [tube reports-*]")
        # ... and its own max_items = 1 holds: the tube is full.
        eq(put_line(c, b"y"), b"OUT_OF_MEMORY",
           "reports-daily: max_items = 1 from its own section")
        # 'small' holds the 10-byte job; max_items = 2 (the line has a
        # comment after the value): one more fits, then it is full.
        c.use("small")
        put_id(c, b"z")
        eq(put_line(c, b"w"), b"OUT_OF_MEMORY", "small: max_items = 2")
        # A tube no section names: top-level defaults only.
        _biggest(c, "emails", 90)


# ------------------------------------------------------------ bad files

# (file content, line of the error, text the message must contain)
BAD = [
    ("max_item = 5\n", 1, "unknown key 'max_item'"),
    ("# c\n\nMax_items = 5\n", 3, "unknown key 'Max_items'"),
    ("max_items = -1\n", 1, "bad value for max_items: '-1'"),
    ("max_items = 5x\n", 1, "bad value for max_items: '5x'"),
    ("max_age = 5w\n", 1, "bad value for max_age: '5w'"),
    ("max_size = 10k\n", 1, "bad value for max_size: '10k'"),
    ("fanout = True\n", 1, "bad value for fanout: 'True'"),
    ("port = 65536\n", 1, "bad value for port: '65536'"),
    ("max_job_size = 2G\n", 1, "bad value for max_job_size: '2G'"),
    ("[tube a]\nttr = 1500ms\n", 2, "bad value for ttr: '1500ms'"),
    ("stall_timeout = 1500ms\n", 1, "bad value for stall_timeout: '1500ms'"),
    ("max_timeouts = 4294967296\n", 1, "bad value for max_timeouts: '4294967296'"),
    ("max_items =\n", 1, "missing value for max_items"),
    ("max_items =   # nothing\n", 1, "missing value for max_items"),
    ("= 5\n", 1, "missing key before '='"),
    ("max_items 5\n", 1, "malformed line 'max_items 5'"),
    ("max_items = 1\nmax_items = 2\n", 2, "duplicate key max_items (first set at line 1)"),
    ("[tube a]\nfanout = true\n\nfanout = false\n", 4,
     "duplicate key fanout (first set at line 2)"),
    ("[tube a]\nport = 11300\n", 2, "port is a server setting"),
    ("[tube a*]\nbinlog_dir = /tmp\n", 2, "binlog_dir is a server setting"),
    ("[tube a]\nmax_items = 1\n[tube b]\n[tube a]\n", 4,
     "duplicate section [tube a] (first at line 1)"),
    ("[tube p*]\n[tube p*]\n", 2, "duplicate section [tube p*] (first at line 1)"),
    ("[tube -bad]\n", 1, "illegal tube name '-bad' in section header"),
    ("[tube a b]\n", 1, "illegal tube name"),
    ("[tube " + "n" * 201 + "]\n", 1, "illegal tube name"),
    ("[tube a*b*]\n", 1, "illegal tube name prefix"),
    ("[tube a]\nmove_expired_to = bad name\n", 2,
     "illegal tube name 'bad name' for move_expired_to"),
    ("move_expired_to = -x\n", 1, "illegal tube name '-x' for move_expired_to"),
    ("[tube *]\n", 1, "empty prefix in [tube *]"),
    ("[tube]\n", 1, "missing tube name in section header"),
    ("[queue a]\n", 1, "unknown section '[queue a]'"),
    ("[tube a\n", 1, "malformed section header"),
    ("[tube a] x\n", 1, "malformed section header"),
    ("max_items = 1\x01\n", 1, "control character (byte 0x01) in line"),
    ("max_items = 1\n\x00\n", 2, "control character (byte 0x00) in line"),
    ("listen = " + "a" * 5000 + "\n", 1, "value of listen too long"),
    ("[tube a]\nmax_memory_size = 1M\n", 2, "max_memory_size needs a binlog"),
]


def _expect_refused(binary, path, line, what, extra=()):
    """Start with the bad file: exit 2, 'PATH:LINE: what' on stderr, never
    listening.  Then --check-config: the same."""
    want = "%s:%d: " % (path, line)
    for check_only in (False, True):
        # Held (bound, never listening) until the listening check below, so
        # no other test's server listens there (see test_check_config_good_file).
        res = harness.PortReservation()
        port = res.port
        args = ["-l", harness.HOST, "-p", port, "--config", path] + list(extra)
        if check_only:
            args.append("--check-config")
        rc, out, err = run_tubed(binary, args)
        label = "%s%s (line %d: %s)" % ("--check-config " if check_only else "",
                                        os.path.basename(path), line, what)
        eq(rc, 2, "%s: exit status (stderr %r)" % (label, err[:300]))
        lines = [l for l in err.splitlines() if l.strip()]
        check(len(lines) == 1, "%s: expected the error on one line, stderr %r"
              % (label, err[:500]))
        msg = lines[0]
        check(want in msg and what in msg[msg.find(want):],
              "%s: expected %r on stderr, got %r" % (label, want + what + "...", msg))
        check(all(32 <= ord(ch) < 127 for ch in msg),
              "%s: the message is not printable ASCII: %r" % (label, msg))
        check("ok" not in out, "%s: stdout %r" % (label, out))
        try:
            check(not port_listening(port), "%s: port %d is listening" % (label, port))
        finally:
            res.close()


@no_server
def test_bad_files_refused(binary):
    d = _tmpdir()
    try:
        errors = []
        for i, (text, line, what) in enumerate(BAD):
            path = _write(d, "bad%02d.conf" % i, text)
            try:
                _expect_refused(binary, path, line, what)
            except harness.TestFailure as e:
                errors.append(str(e))
        check(not errors, "%d of %d bad files:\n    %s"
              % (len(errors), len(BAD), "\n    ".join(errors)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_unreadable_file_refused(binary):
    d = _tmpdir()
    try:
        for path in (os.path.join(d, "missing.conf"), d):
            # Held (bound, never listening): see test_check_config_good_file.
            with harness.PortReservation() as res:
                port = res.port
                rc, out, err = run_tubed(binary, ["-l", harness.HOST, "-p", port,
                                                  "--config", path])
                eq(rc, 2, "--config %s: exit status (stderr %r)" % (path, err[:200]))
                check(err.startswith("%s: cannot read: " % path),
                      "--config %s: stderr %r" % (path, err[:200]))
                check(not port_listening(port), "--config %s: listening" % path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_max_memory_size_ok_with_binlog(binary):
    """A check that needs the merged command line: max_memory_size is fine
    with -b DIR (and --check-config touches no binlog)."""
    d = _tmpdir()
    try:
        path = _write(d, "rb.conf", "[tube big]\nmax_memory_size = 1M\n")
        bdir = os.path.join(d, "binlog")
        os.mkdir(bdir)
        rc, out, err = run_tubed(binary, ["--config", path, "-b", bdir,
                                          "--check-config"])
        eq((rc, out), (0, "%s: ok\n" % path), "--check-config with -b (stderr %r)" % err)
        eq(sorted(os.listdir(bdir)), [], "--check-config wrote into the binlog dir")
        # binlog_dir in the file does as well as -b.
        path2 = _write(d, "rb2.conf", "binlog_dir = %s\n[tube big]\n"
                       "max_memory_size = 1M\n" % bdir)
        rc, out, err = run_tubed(binary, ["--config", path2, "--check-config"])
        eq((rc, out), (0, "%s: ok\n" % path2), "binlog_dir in the file (stderr %r)" % err)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------ command line

@no_server
def test_command_line_wins_over_file(binary):
    """port in the file vs -p: -p wins; -z beats max_job_size; what the
    command line does not give still comes from the file."""
    # The file's port is held (bound, never listening), so no other test's
    # server listens there while the test checks that tubed does not.
    res = harness.PortReservation()
    file_port = res.port
    with res, Policy(binary, "port = %d\nmax_job_size = 10\nmax_items = 1\n" % file_port,
                     "-z", "20") as p:
        # harness.Server passes -l 127.0.0.1 -p FREE_PORT.
        check(p.srv.port != file_port, "setup: two different ports")
        c = p.srv.client()
        check(not port_listening(file_port),
              "the file's port %d is listening though -p %d was given"
              % (file_port, p.srv.port))
        eq(c.stats()["max-job-size"], "20", "max-job-size: -z 20 beats the file's 10")
        put_id(c, b"x" * 20)
        # max_items = 1 (not on the command line) still comes from the file.
        eq(put_line(c, b"y"), b"OUT_OF_MEMORY", "max_items = 1 from the file")


@no_server
def test_port_and_listen_from_file(binary):
    """Without -l/-p the file's listen and port are used."""
    d = _tmpdir()
    try:
        # The file's port is held (PortReservation) until tubed binds it; a
        # first start that collides on it is tried again on another, the
        # file rewritten.
        res = harness.PortReservation()

        def make():
            path = _write(d, "p.conf", "listen = 127.0.0.1\nport = %d\n"
                          "max_job_size = 10\n" % res.port)
            return harness.Server(binary, port=res.port,
                                  argv=lambda _p: [binary, "--config", path])
        srv, out = harness.start_reserved(res, make)
        check(out is None, "tubed --config did not start: %s" % out)
        try:
            c = srv.client()
            eq(c.stats()["max-job-size"], "10", "max-job-size from the file")
            eq(put_line(c, b"x" * 11), b"JOB_TOO_BIG", "put above the file's max_job_size")
        finally:
            problems = srv.stop()
        check(not problems, "; ".join(problems))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_dash_c_is_beanstalkd_obsolete_flag(binary):
    """-c takes no argument (beanstalkd's obsolete flag), also next to
    --config; it is not a short form of --config."""
    with Policy(binary, "[tube t]\nmax_item_size = 5\n", "-c") as p:
        c = p.srv.client()
        c.use("t")
        eq(put_line(c, b"123456"), b"JOB_TOO_BIG", "--config in force next to -c")
        eq(put_line(c, b"12345")[:9], b"INSERTED ", "5-byte put into t")
    d = _tmpdir()
    try:
        path = _write(d, "c.conf", "max_items = 1\n")
        # -c FILE: FILE is a stray argument, not a config file.  Whatever
        # tubed does with it, the file must not be read as --config.
        rc, out, err = run_tubed(binary, ["-c", path, "--check-config"])
        check(rc != 0 and "%s: ok" % path not in out,
              "-c FILE --check-config was taken as --config FILE (rc %d, out %r)"
              % (rc, out))
    finally:
        shutil.rmtree(d, ignore_errors=True)


VALUES = """\
max_items = 1                 # top level: every tube holds one job
[tube reports-*]
max_item_size = 20
[tube r*]
max_item_size = 50
[tube free]
max_items = 0                 # explicitly unlimited beats the top level
[tube kib]
max_item_size = 1K
[tube fast]
max_age = 1500ms
"""


@no_server
def test_precedence_details_and_value_forms(binary):
    """Sections in any order (the longest prefix wins, not the later one),
    a prefix section covers the tube named exactly PREFIX, an explicit 0 in
    a section beats a top-level value, K is 1024."""
    with Policy(binary, VALUES, "-z", "4096") as p:
        c = p.srv.client()
        c.use("reports-")
        eq(put_line(c, b"x" * 21), b"JOB_TOO_BIG", "tube 'reports-' under [tube reports-*]")
        c.use("reports-x")
        eq(put_line(c, b"x" * 21), b"JOB_TOO_BIG", "reports-x: reports-* (longer) beats r*")
        put_id(c, b"x" * 20)
        c.use("rx")
        put_id(c, b"x" * 50)
        eq(put_line(c, b"y"), b"OUT_OF_MEMORY", "rx: top-level max_items = 1")
        c.use("free")
        for i in range(5):
            put_id(c, b"f%d" % i)
        c.use("kib")
        eq(put_line(c, b"k" * 1025), b"JOB_TOO_BIG", "kib: max_item_size = 1K is 1024")
        put_id(c, b"k" * 1024)
        eq(put_line(c, b"k"), b"OUT_OF_MEMORY", "kib: top-level max_items = 1 holds")
        c.use("fast")
        j = put_id(c, b"fast")
        wait_for(lambda: c.peek("peek %d" % j) is None, "a job of 'fast' (max_age 1500ms) to expire")


def _conn_refused(srv):
    """Open one more connection: True if the server refused it
    (OUT_OF_MEMORY, then close), False if it answers a command."""
    import socket
    s = socket.create_connection((harness.HOST, srv.port), timeout=10)
    try:
        s.sendall(b"list-tube-used\r\n")
        data = b""
        while b"\r\n" not in data:
            d = s.recv(100)
            if not d:
                break
            data += d
    finally:
        s.close()
    if data == b"OUT_OF_MEMORY\r\n":
        return True
    eq(data, b"USING default\r\n", "reply on a new connection")
    return False


def _settle(c, n):
    """Wait until the server counts n open connections (closed probes gone)."""
    wait_for(lambda: int(c.stats()["current-connections"]) == n,
             "the server to count %d connections" % n)


def _held(srv, n):
    cs = [srv.client() for _ in range(n)]
    for c in cs:
        eq(c.cmd("list-tube-used"), b"USING default", "a held connection")
    return cs


@no_server
def test_command_line_wins_through_reload(binary):
    """max_connections: --max-connections beats the file at start and at
    every reload; without the flag a reload changes it."""
    with Policy(binary, "max_connections = 1\n", "--max-connections", "3") as p:
        held = _held(p.srv, 2)
        eq(_conn_refused(p.srv), False, "third connection (--max-connections 3 beats 1)")
        p.rewrite("max_connections = 2\n")
        p.reload()
        _settle(held[0], 2)
        eq(_conn_refused(p.srv), False, "third connection after a reload to 2")
        _settle(held[0], 2)
        held += _held(p.srv, 1)
        eq(_conn_refused(p.srv), True, "fourth connection past --max-connections 3")
    with Policy(binary, "max_connections = 2\n") as p:
        held = _held(p.srv, 2)
        eq(_conn_refused(p.srv), True, "third connection past the file's 2")
        p.rewrite("max_connections = 3\n")
        p.reload()
        _settle(held[0], 2)
        eq(_conn_refused(p.srv), False, "third connection after the reload to 3")
