"""The kestrel listener's queue administration and server commands (spec
kestrel.md §5): delete, flush, flush_all, flush_expired, flush_all_expired,
version, dump_config, reload, shutdown, status, monitor, confirm, quit, and
unknown commands; exact bytes and whether the connection is kept.
"""

import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

from harness import check, eq, no_server  # noqa: E402
from mcproto import McServer, bs_stats_tube, settle, wait_for  # noqa: E402


# ------------------------------------------------------------- administration

@no_server
def test_delete(binary):
    """delete: every job but the reserved ones goes; DELETED always; no
    tube is created; noreply."""
    with McServer(binary) as s:
        m, o, b = s.mc(), s.mc(), s.bs()
        for v in (b"a", b"b", b"c"):
            m.store("q", v)
        eq(o.get("q/open"), b"a", "an open job survives delete")
        b.expect("use q", "USING q")
        b.put(b"delayed", delay=3600)
        m.expect("delete q", "DELETED")
        st = bs_stats_tube(b, "q")
        eq((st["current-jobs-ready"], st["current-jobs-delayed"],
            st["current-jobs-reserved"]), ("0", "0", "1"), "after delete")
        m.expect("delete nothing", "DELETED")
        check("nothing" not in b.list_tubes(), "delete creates no tube")
        m.store("q", b"d")
        m.send(b"delete q noreply\r\n")
        m.sync()
        m.expect("get q/peek", "END")
        m.expect("delete", "CLIENT_ERROR missing arguments")
        m.expect("delete a/b", "CLIENT_ERROR bad queue name")
        m.sync()
        st = m.stats()
        eq(st["queue_deletes"], "2", "queue_deletes (existing tubes)")


@no_server
def test_delete_ends_fanout_subscription(binary):
    with McServer(binary, conf="[tube p]\nfanout = true\n") as s:
        m, b = s.mc(), s.bs()
        m.expect("get p+c", "END")                 # the child comes into being
        check("p+c" in b.list_tubes(), "a child stays, empty")
        m.store("p", b"x")
        eq(m.get("p+c"), b"x", "the copy")
        eq(m.get("p"), b"x", "the original")
        st = m.stats()
        eq(st.get("queue_p_children"), None, "p is gone (empty)")
        m.store("p", b"y")
        eq(m.stats().get("queue_p_children"), "p+c", "queue_p_children")
        m.expect("delete p+c", "DELETED")
        check("p+c" not in b.list_tubes(), "the child is gone")
        m.store("p", b"z")
        eq(bs_stats_tube(b, "p+c"), None, "no copy went to the deleted child")
        m.expect("get p+c/peek", "END")     # a get names it: a child again
        m.store("p", b"w")
        eq(m.get("p+c"), b"w", "copies again")


@no_server
def test_flush(binary):
    with McServer(binary) as s:
        m, o, b = s.mc(), s.mc(), s.bs()
        for v in (b"a", b"b"):
            m.store("q", v)
        m.store("r", b"r")
        eq(o.get("q/open"), b"a", "open")
        m.expect("flush q", "END")
        m.expect("flush nothing", "END")
        m.expect("flush", "CLIENT_ERROR missing arguments")
        st = bs_stats_tube(b, "q")
        eq((st["current-jobs-ready"], st["current-jobs-reserved"]), ("0", "1"),
           "reserved kept")
        eq(m.stats()["queue_q_total_flushes"], "1", "total_flushes")
        eq(m.get("r"), b"r", "other tubes untouched")
        for q in ("x", "y"):
            m.store(q, b"v")
        m.expect("flush_all", "Flushed all queues.")
        m.expect("get x", "END")
        m.expect("get y", "END")
        m.store("x", b"v")
        m.send(b"flush_all noreply\r\n")
        m.sync()
        m.expect("get x", "END")
        m.expect("flush_all 0", "Flushed all queues.")   # arguments ignored


@no_server
def test_flush_expired(binary):
    """flush_expired <q> counts what this command expired: 0 when the timer
    got there first."""
    with McServer(binary) as s:
        m, anchor = s.mc(), s.mc()
        anchor.store("q", b"anchor")
        eq(anchor.get("q/open"), b"anchor", "keeps q alive")
        m.store("q", b"gone", exptime=1)
        m.store("q", b"stays")
        settle(1.3)
        got = int(m.cmd("flush_expired q"))
        check(got in (0, 1), "flush_expired q: %d" % got)
        m.expect("flush_expired q", "0")
        m.expect("flush_expired nothing", "0")
        m.expect("flush_expired", "CLIENT_ERROR missing arguments")
        m.expect("flush_all_expired", "0")
        eq(m.stats()["queue_q_expired_items"], "1", "expired once")
        eq(m.get("q"), b"stays", "the live one stays")


@no_server
def test_flush_expired_counts(binary):
    """With expiry due between sweeps, the command does the expiring."""
    with McServer(binary, conf="[tube slow]\nmax_age = 1s\n") as s:
        m, anchor = s.mc(), s.mc()
        anchor.store("slow", b"a")
        eq(anchor.get("slow/open"), b"a", "anchor")
        for i in range(3):
            m.store("slow", b"%d" % i)
        m.store("other", b"o", exptime=1)
        settle(1.3)
        total = int(m.cmd("flush_all_expired")) + int(m.cmd("flush_expired slow"))
        st = m.stats()
        eq(st["queue_slow_expired_items"], "3", "three expired in slow")
        check(total <= 4, "no more than the due jobs counted: %d" % total)


# -------------------------------------------------------------------- server

@no_server
def test_version_status_quit(binary):
    out = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10).stdout
    version = out.split()[1]
    with McServer(binary) as s:
        m = s.mc()
        m.expect("version", "VERSION " + version)
        m.expect("VERSION extra args", "VERSION " + version)
        m.expect("status", "UP")
        m.expect_error_closed("status readonly", "CLIENT_ERROR status is changed by signal only")
        m = s.mc()
        m.send(b"quit\r\n")
        m.expect_closed()
        m = s.mc()
        m.send(b"QUIT extra\r\nversion\r\n")
        m.expect_closed()


@no_server
def test_drain(binary):
    """SIGUSR1: status READONLY, set SERVER_ERROR and closed (after its
    body); gets go on. SIGUSR2: UP again."""
    with McServer(binary) as s:
        m = s.mc()
        m.store("q", b"a")
        s.signal(signal.SIGUSR1)
        wait_for(lambda: m.cmd("status") == b"READONLY", "READONLY")
        m.send(b"set q 0 0 9\r\nversion\r\n\r\n")
        eq(m.read_line(), b"SERVER_ERROR", "set while draining")
        m.expect_closed()
        m = s.mc()
        m.send(b"set q 0 0 1 noreply\r\nx\r\n")
        eq(m.read_line(), b"SERVER_ERROR", "errors are sent despite noreply")
        m.expect_closed()
        m = s.mc()
        eq(m.get("q"), b"a", "get while draining")
        s.signal(signal.SIGUSR2)
        wait_for(lambda: m.cmd("status") == b"UP", "UP")
        m.store("q", b"b")


@no_server
def test_unknown_commands(binary):
    with McServer(binary) as s:
        for line in (b"bogus", b"", b"   ", b"incr q 1", b"touch q 0", b"add",
                     b"add q 0 0", b"cas q 0 0 x", b"verbosity 1", b"stats\x00"):
            m = s.mc()
            m.expect_error_closed(line + b"\r\n", "CLIENT_ERROR unknown command")
        # Storage commands read their body first (it is not run).
        for word in (b"add", b"replace", b"append", b"prepend"):
            m = s.mc()
            m.send(word + b" q 0 0 9\r\nversion\r\n\r\nversion\r\n")
            eq(m.read_line(), b"CLIENT_ERROR unknown command", word)
            m.expect_closed()
        m = s.mc()
        m.send(b"cas q 0 0 9 1\r\nversion\r\n\r\n")
        eq(m.read_line(), b"CLIENT_ERROR unknown command", "cas")
        m.expect_closed()
        eq(s.mc().get("q"), None, "nothing stored")


@no_server
def test_shutdown_disabled(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.expect("shutdown", "CLIENT_ERROR shutdown disabled")
        m.sync()
    with McServer(binary, conf="allow_shutdown = false\n") as s:
        m = s.mc()
        m.expect("shutdown", "CLIENT_ERROR shutdown disabled")


@no_server
def test_shutdown_allowed(binary):
    with McServer(binary, conf="allow_shutdown = true\n", bdir=True) as s:
        m = s.mc()
        m.store("q", b"kept")
        m.send(b"shutdown\r\n")
        m.expect_closed()
        rc = s.srv.proc.wait(15)
        eq(rc, 0, "exit status after shutdown")
        check("shutting down" in s.srv.stderr_text(), "logged")
        s.srv.stopped = True
        s.srv.returncode = rc
        s.old.append(s.srv)
        s.srv = None
        s.restart()
        eq(s.mc().get("q"), b"kept", "the binlog was synced at the stop")


@no_server
def test_reload(binary):
    with McServer(binary, conf="[tube q]\nmax_items = 1\n") as s:
        m = s.mc()
        m.store("q", b"1")
        m.expect("set q 0 0 1\r\n2", "NOT_STORED")
        s.write_conf("[tube q]\nmax_items = 2\n")
        m.expect("reload", "Reloaded config.")
        m.store("q", b"2")
        s.write_conf("[tube q]\nmax_items = lots\n")
        line = m.cmd("reload")
        check(line.startswith(b"SERVER_ERROR " + s.conf_path.encode() + b":2: "),
              "bad file: %r" % line)
        m.expect("set q 0 0 1\r\n3", "NOT_STORED")   # the old config stays
        m.sync()
    with McServer(binary) as s:
        s.mc().expect("reload", "Reloaded config.")   # no --config


@no_server
def test_dump_config(binary):
    conf = ("max_age = 1h\n"
            "[tube a]\nmax_items = 10\nmax_size = 1M\nmax_item_size = 1K\n"
            "discard_old_when_full = true\nmove_expired_to = dead\nmax_timeouts = 3\n"
            "sync_journal = true\npriority = 5\nttr = 2m\n"
            "[tube z]\nfanout = true\njournal = false\n"
            "[tube pre*]\npriority = 9\n")
    with McServer(binary, "-z", "5000", conf=conf) as s:
        m = s.mc()
        m.store("m", b"x")
        lines = m.lines_until_end("dump_config")
        blocks, cur = {}, None
        order = []
        for line in lines:
            line = line.decode()
            if line.startswith("queue '"):
                cur = line[len("queue '"):line.index("' {")]
                order.append(cur)
                blocks[cur] = []
                check(line.endswith("' {"), line)
            elif line == "}":
                cur = None
            else:
                check(cur is not None and line.startswith("  "), "bad line %r" % line)
                blocks[cur].append(line[2:])
        eq(order, ["a", "default", "m", "z"], "every tube and exact section, name order")
        eq(blocks["a"], ["max_items=10", "max_size=1048576", "max_item_size=1024",
                         "discard_old_when_full=true", "max_age=3600000ms",
                         "move_expired_to=dead", "max_timeouts=3", "fanout=false",
                         "journal=true", "sync_journal=true", "priority=5",
                         "ttr=120000ms", "max_memory_size=0"], "a")
        eq(blocks["m"], ["max_items=0", "max_size=0", "max_item_size=5000",
                         "discard_old_when_full=false", "max_age=3600000ms",
                         "move_expired_to=(none)", "max_timeouts=0", "fanout=false",
                         "journal=true", "sync_journal=false", "priority=1024",
                         "ttr=60000ms", "max_memory_size=0"], "m")
        eq(blocks["z"][7:9], ["fanout=true", "journal=false"], "z")
        m.store("prefixed", b"x")
        lines = m.lines_until_end("dump_config")
        check(b"queue 'prefixed' {" in lines, "a new tube is listed")
        i = lines.index(b"queue 'prefixed' {")
        eq(lines[i + 11], b"  priority=9", "prefix section applies")


# ---------------------------------------------------------- monitor, confirm

@no_server
def test_monitor_and_confirm(binary):
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.store("q", b"a")
        m.store("q", b"b")
        m.send(b"monitor q 5\r\n")
        eq(m.read_value("q"), b"a", "first job, opened")
        eq(m.read_line(), b"END", "the stream ends: one open job per tube")
        eq(bs_stats_tube(b, "q")["current-jobs-reserved"], "1", "a is open")
        m.expect("monitor q 5", "END")          # already holds one
        m.expect("confirm q 1", "END")
        eq(bs_stats_tube(b, "q")["current-jobs-reserved"], "0", "confirmed")
        m.expect("confirm q 1", "ERROR")         # nothing open: kept
        m.expect("confirm nothing 1", "ERROR")
        m.expect("monitor q 5 0", "END")         # max 0
        m.send(b"monitor q 5 1\r\n")
        eq(m.read_value("q"), b"b", "b")
        eq(m.read_line(), b"END", "end")
        m.expect("confirm q 0", "END")           # nothing deleted
        m.expect("get q/abort", "END")
        eq(m.get("q"), b"b", "b went back")
        t0 = time.monotonic()
        m.expect("monitor q 1", "END")            # empty: waits, then END
        check(time.monotonic() - t0 >= 0.9, "monitor waited its second")
        m.expect("monitor q", "CLIENT_ERROR missing arguments")
        m.expect("monitor q x", "CLIENT_ERROR bad command line format")
        m.expect("confirm q", "CLIENT_ERROR missing arguments")
        m.expect("confirm q -1", "CLIENT_ERROR bad command line format")
        m.expect("confirm a/b 1", "CLIENT_ERROR bad queue name")


@no_server
def test_monitor_waits_for_a_job(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"monitor q 20\r\n")
        m.expect_silence(0.2)
        s.mc().store("q", b"late")
        eq(m.read_value("q"), b"late", "arrived")
        eq(m.read_line(), b"END", "final END")
