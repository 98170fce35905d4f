"""Command-line flags that operators' scripts rely on (compat-notes).
These tests start their own servers."""

import os
import shutil
import socket
import subprocess
import tempfile

from harness import (PortReservation, Server, check, eq, fail, no_server,
                     server_args, start_reserved, start_server)


def _run(binary, args, timeout=5):
    try:
        p = subprocess.run([binary] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s %s did not exit within %ds" % (binary, " ".join(args), timeout))
    return p


@no_server
def test_version_flag(binary):
    p = _run(binary, ["-v"])
    eq(p.returncode, 0, "exit status of -v")
    out = p.stdout.decode("utf-8", "replace")
    lines = out.splitlines()
    eq(len(lines), 1, "-v prints one line on stdout (got %r)" % out)
    check(any(ch.isdigit() for ch in lines[0]), "-v line has no version: %r" % out)


@no_server
def test_help_flag(binary):
    p = _run(binary, ["-h"])
    eq(p.returncode, 0, "exit status of -h")
    text = (p.stdout + p.stderr).decode("utf-8", "replace")
    for flag in ("-b", "-f", "-F", "-l", "-p", "-u", "-z", "-s", "-v", "-V", "-h"):
        check(flag + " " in text or flag + "\n" in text, "-h does not mention %s" % flag)


@no_server
def test_unknown_flag_fails(binary):
    p = _run(binary, ["-x"])
    check(p.returncode != 0, "-x should fail, got status 0")
    check(p.returncode > 0, "-x: killed by signal %d" % -p.returncode)
    check(p.stderr, "-x: nothing on stderr")


@no_server
def test_bad_size_fails(binary):
    p = _run(binary, ["-z", "abc"])
    check(p.returncode > 0, "-z abc should fail, got status %d" % p.returncode)


@server_args("-z100")
def test_attached_flag_argument(srv):
    c = srv.client()
    eq(c.stats()["max-job-size"], "100", "max-job-size with -z100")


@server_args("-VV", "-F", "-f", "0", "-f0")
def test_verbose_and_fsync_flags_accepted(srv):
    c = srv.client()
    j = c.put(b"x")
    eq(c.reserve(0)[0], j, "server works with -VV -F -f 0 -f0")


@server_args("-z", "1073741824")
def test_max_job_size_limit(srv):
    c = srv.client()
    eq(c.stats()["max-job-size"], "1073741824", "max-job-size with -z 1073741824")


@server_args("-z", "2000000000")
def test_max_job_size_capped(srv):
    # 1.12 caps a larger -z at 1073741824 (with a warning) and runs.
    c = srv.client()
    eq(c.stats()["max-job-size"], "1073741824", "max-job-size with -z 2000000000")


@no_server
def test_max_job_size_read_as_beanstalkd_reads_it(binary):
    """beanstalkd reads -z with sscanf("%zu") and nothing after it: a sign
    and leading blanks are taken, a negative number wraps (so "-z -1" runs
    with the largest size, with its warning), trailing bytes are an error.
    The old tubed refused "-1", "+100" and " 100" (status 2)."""
    for val, want in (("-1", "1073741824"), ("+100", "100"), (" 100", "100"), ("-0", "0"),
                      ("99999999999999999999", "1073741824")):
        srv = Server(binary, ["-z", val])
        srv.start()
        try:
            got = srv.client().stats()["max-job-size"]
        finally:
            problems = srv.stop()
        check(not problems, "; ".join(problems))
        eq(got, want, "max-job-size with -z %r" % val)
    for val in ("100 ", "1k", "", "--1"):
        p = _run(binary, ["-l", "127.0.0.1", "-p", "1", "-z", val])
        eq(p.returncode, 2, "exit status of -z %r" % val)
        check(b"invalid value for -z" in p.stderr, "-z %r: stderr %r" % (val, p.stderr))


@no_server
def test_attached_port(binary):
    # -p11300 form: the harness normally passes "-p PORT"; start by hand.
    # The port is held (bound, never listening) until tubed listens there,
    # and a first start that collides on it is tried again on another.
    res = PortReservation()
    srv, out = start_reserved(res, lambda: Server(
        binary, port=res.port, argv=lambda p: [binary, "-l127.0.0.1", "-p%d" % p]))
    check(out is None, "tubed -p%d did not start: %s" % (res.port, out))
    try:
        c = srv.client()
        c.expect("list-tube-used", "USING default")
    finally:
        problems = srv.stop()
    if problems:
        fail("; ".join(problems))


@no_server
def test_unix_socket(binary):
    d = tempfile.mkdtemp(prefix="tubed-it-")
    path = os.path.join(d, "s.sock")
    try:
        with start_server(binary, [], unix_path=path) as srv:
            c = srv.client()
            j = c.put(b"over unix")
            d2 = srv.client()
            eq(d2.reserve(0), (j, b"over unix"), "job over the UNIX socket")
            eq(c.stats()["current-connections"], "2", "connections")
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_socket_activation(binary):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    try:
        # -l/-p point somewhere useless: they must be ignored with a warning.
        srv = Server(binary, [], listener=ls,
                     argv=lambda _p: [binary, "-l", "127.0.0.1", "-p", "1"])
        srv.start()
        ls.close()
        try:
            c = srv.client()
            j = c.put(b"activated")
            eq(c.reserve(0), (j, b"activated"), "job over the inherited socket")
            err = srv.stderr_text()
            check(err.strip(), "no warning about ignored -l/-p on stderr")
        finally:
            problems = srv.stop()
        if problems:
            fail("; ".join(problems))
    finally:
        ls.close()
