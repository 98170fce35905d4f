"""extensions.md claims found without a test of their own by a black-box
audit (all pass as written):

- §2 move-job: "Moving a job to its own tube answers MOVED and changes
  nothing": not even the expiry clock, which a move elsewhere restarts.
- §1 "Every command-line option may also be written in the file as a
  top-level key": the binlog keys (binlog_dir, fsync_ms, no_fsync,
  binlog_file_size) take effect, as stats and stats-binlog show, and the
  command line wins over them; every long option's key is accepted at the
  top level and refused inside a [tube] section (FILE:LINE, status 2).
- §3 "a malformed or oversized (> 8 KiB) request: 400 and close": the
  boundary itself, a head of exactly 8192 bytes served, 8193 refused.

Durations are short; every wait is a lower bound or a polling deadline.
"""

import os
import re
import shutil
import tempfile
import time

from harness import check, eq, no_server, wait_for
from http_util import MetricsServer
from policy_util import Policy, present, put_id, run_tubed


# ------------------------------------------- move-job to its own tube: clock

@no_server
def test_move_job_to_its_own_tube_keeps_the_expiry_clock(binary):
    """max_age = 3s. A job moved to its own tube 2 s after its put still
    expires 3 s after the put: its clock did not restart (a restarted
    clock would keep it until 3 s after the move)."""
    with Policy(binary, "[tube e]\nmax_age = 3s\n") as p:
        c = p.srv.client()
        c.use("e")
        j = put_id(c, b"clock")
        t_put = time.monotonic()            # after INSERTED: the clock started before
        while time.monotonic() < t_put + 2.0:
            time.sleep(0.05)
        t_move = time.monotonic()           # before MOVED: a restart would be after
        c.expect("move-job %d e" % j, "MOVED")
        check(present(c, j), "job %d is there right after the move" % j)
        while time.monotonic() < t_put + 3.2:
            time.sleep(0.05)
        gone = not present(c, j)
        t_check = time.monotonic()
        if t_check < t_move + 3.0:
            # Inside the window where a restarted clock would still keep it.
            check(gone, "job %d still there %.2f s after its put, %.2f s after "
                  "a move to its own tube: the move restarted its expiry clock"
                  % (j, t_check - t_put, t_check - t_move))
        # Either way it is gone in the end, and counted once as expired.
        wait_for(lambda: not present(c, j), "job %d to expire" % j)
        eq(c.stats_tube("e")["total-jobs"], "1", "stats-tube e total-jobs")


# ------------------------------------------------ binlog keys from the file

def _binlog_view(c):
    line, body = c.cmd_body("stats-binlog")
    check(line.startswith(b"OK ") and body is not None, "stats-binlog: %r" % line)
    kv = {}
    for ln in body.decode().splitlines()[1:]:
        k, _, v = ln.partition(": ")
        kv[k] = v
    return kv


@no_server
def test_binlog_keys_in_the_file_take_effect(binary):
    """binlog_dir (-b), fsync_ms (-f), no_fsync (-F) and binlog_file_size
    (-s) written in the file: the binlog is on, in that directory, with
    that file size and fsync mode; -f on the command line wins over
    fsync_ms."""
    d = tempfile.mkdtemp(prefix="tubed-audit-binlog-")
    try:
        bdir = os.path.join(d, "bl")
        os.mkdir(bdir)
        conf = ("binlog_dir = %s\nfsync_ms = 7\nbinlog_file_size = 1M\n" % bdir)
        with Policy(binary, conf) as p:
            c = p.srv.client()
            j = put_id(c, b"kept")
            eq(c.stats()["binlog-max-size"], str(1024 * 1024),
               "stats binlog-max-size from binlog_file_size = 1M")
            b = _binlog_view(c)
            eq((b["enabled"], b["fsync-mode"]), ("true", '"every-7ms"'),
               "stats-binlog enabled, fsync-mode from binlog_dir and fsync_ms = 7")
            check(any(n.startswith("binlog.") for n in os.listdir(bdir)),
                  "no binlog file in binlog_dir %s: %r" % (bdir, os.listdir(bdir)))
            p.kill9()
            p.restart()
            c = p.srv.client()
            eq(c.cmd_body("peek %d" % j), (b"FOUND %d 4" % j, b"kept"),
               "the job, replayed from binlog_dir after kill -9")
        for text, args, mode in (
                ("fsync_ms = 0\n", (), '"strict"'),
                ("no_fsync = true\n", (), '"never"'),
                ("fsync_ms = 7\n", ("-f", "3"), '"every-3ms"')):
            shutil.rmtree(bdir)
            os.mkdir(bdir)
            with Policy(binary, "binlog_dir = %s\n%s" % (bdir, text), *args) as p:
                eq(_binlog_view(p.srv.client())["fsync-mode"], mode,
                   "fsync-mode with %r and %r" % (text.strip(), " ".join(args)))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------ every long option has a key

LONG_KEYS = [
    ("max_connections", "100"),
    ("job_memory", "64M"),
    ("stall_timeout", "45s"),
    ("recover", "true"),
    ("memcache_port", "0"),
    ("metrics_port", "0"),
    ("replica_of", "127.0.0.1:1"),
    ("sync_replicas", "1"),
    ("repl_backlog", "1M"),
    ("import_beanstalkd", "/nonexistent/beanstalkd"),
]
NO_KEY = {"config", "check_config", "help", "version"}


@no_server
def test_every_long_option_has_a_top_level_key(binary):
    """Each long option, dashes turned into underscores, is a top-level key
    that --check-config accepts; inside a [tube] section it is refused
    with FILE:LINE and status 2."""
    rc, out, err = run_tubed(binary, ["--help"])
    opts = {o[2:].replace("-", "_") for o in re.findall(r"--[a-z][a-z-]+", out + err)} - NO_KEY
    eq(sorted(opts), sorted(k for k, _ in LONG_KEYS), "the long options in --help (a new one "
       "needs a key and a sample value here)")
    d = tempfile.mkdtemp(prefix="tubed-audit-keys-")
    try:
        bdir = os.path.join(d, "bl")
        os.mkdir(bdir)
        path = os.path.join(d, "t.conf")
        for key, value in LONG_KEYS:
            with open(path, "w") as f:
                f.write("binlog_dir = %s\n%s = %s\n" % (bdir, key, value))
            rc, out, err = run_tubed(binary, ["--config", path, "--check-config"])
            eq((rc, out, err), (0, "%s: ok\n" % path, ""),
               "--check-config with top-level %s = %s" % (key, value))
            with open(path, "w") as f:
                f.write("binlog_dir = %s\n[tube t]\n%s = %s\n" % (bdir, key, value))
            rc, out, err = run_tubed(binary, ["--config", path, "--check-config"])
            eq((rc, out), (2, ""), "--check-config with %s in a [tube] section" % key)
            check(err.startswith("%s:3: " % path) and key in err,
                  "%s in a [tube] section: stderr %r (want %s:3: ...)"
                  % (key, err[:300], path))
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------ HTTP: the 8 KiB boundary

@no_server
def test_http_head_of_8_kib_served_one_byte_more_refused(binary):
    """A request head (request line to the blank line) of exactly 8192
    bytes is served; 8193 bytes is 400 and the connection closed."""
    base = b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: "
    with MetricsServer(binary) as srv:
        for total, status in ((8192, 200), (8193, 400)):
            head = base + b"p" * (total - len(base) - 4) + b"\r\n\r\n"
            eq(len(head), total, "setup: head length")
            with srv.http(timeout=10) as h:
                h.send(head)
                r = h.read_response()
                eq(r.status, status, "status for a head of %d bytes" % total)
                if status == 400:
                    h.expect_closed()
                else:
                    eq(r.body, b"ok\n", "body of /healthz")
