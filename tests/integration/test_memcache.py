"""The kestrel memcache listener (spec kestrel.md): framing, set, get and
its options, byte for byte, with whether the connection is kept.

Every test starts its own tubed with --memcache-port on free 127.0.0.1
ports (mc_clients/mcproto.py) and stops it by pid. Admin commands are in
test_memcache_admin.py, stats in test_memcache_stats.py, the two
protocols together and durability in test_memcache_cross.py, the real
client libraries in test_memcache_clients.py.
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

from harness import check, eq, no_server, slow  # noqa: E402
from mcproto import McServer, bs_stats_tube  # noqa: E402


# ------------------------------------------------------------------ listener

@no_server
def test_listener_off_by_default(binary):
    """No --memcache-port: one listener only."""
    with McServer(binary, memcache=False) as s:
        b = s.bs()
        b.expect("list-tube-used", "USING default")
        stderr = s.srv.stderr_text()
        eq(stderr.count("listening on"), 1, "listeners logged: %r" % stderr)


@no_server
def test_set_get_fifo(binary):
    with McServer(binary) as s:
        m = s.mc()
        for v in (b"one", b"two", b"three"):
            m.expect(b"set q 0 0 %d\r\n%s" % (len(v), v), "STORED")
        eq([m.get("q") for _ in range(3)], [b"one", b"two", b"three"], "FIFO")
        m.expect("get q", "END")
        m.expect("gets q", "END")


@no_server
def test_value_bytes_exact(binary):
    """VALUE <key> 0 <n>, the data, END: exact bytes; flags are dropped."""
    with McServer(binary) as s:
        m = s.mc()
        m.expect(b"set q 4294967295 0 5\r\nab\r\nc", "STORED")
        m.send(b"get q\r\n")
        eq(m.read_exact(len(b"VALUE q 0 5\r\nab\r\nc\r\nEND\r\n")),
           b"VALUE q 0 5\r\nab\r\nc\r\nEND\r\n", "reply bytes")
        m.expect(b"set q 0 0 0\r\n\r\n", "STORED")
        m.send(b"gets q\r\n")
        eq(m.read_exact(len(b"VALUE q 0 0\r\n\r\nEND\r\n")),
           b"VALUE q 0 0\r\n\r\nEND\r\n", "empty body")
        m.sync()


@no_server
def test_framing(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"SET  q  0  0  1 \nx\r\n")
        eq(m.read_line(), b"STORED", "LF-terminated line, several spaces, upper case")
        m.send(b"Get q\n")
        eq(m.read_value("q"), b"x", "LF-only get, mixed case")
        m.store("Q", b"upper")
        m.expect("get q", "END")          # keys are case-sensitive
        eq(m.get("Q"), b"upper", "key Q")
        m.send(b"  get   Q  \r\n")
        eq(m.read_value("Q"), None, "leading and trailing spaces")


@no_server
def test_pipelined_and_split(binary):
    """Several commands in one write; one command across many writes; a
    body shorter than declared is waited for."""
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"set q 0 0 1\r\na\r\nset q 0 0 1\r\nb\r\nget q\r\nget q\r\nget q\r\n")
        eq(m.read_line(), b"STORED", "first")
        eq(m.read_line(), b"STORED", "second")
        eq(m.read_value("q"), b"a", "first get")
        eq(m.read_value("q"), b"b", "second get")
        eq(m.read_value("q"), None, "third get")
        m.send_slowly(b"set q 0 0 10\r\n0123456789\r\nget q\r\n", chunk=3)
        eq(m.read_line(), b"STORED", "set sent in pieces")
        eq(m.read_value("q"), b"0123456789", "get sent in pieces")
        m.send(b"set q 0 0 4\r\nab")
        m.expect_silence(0.2)
        m.send(b"cd\r\n")
        eq(m.read_line(), b"STORED", "after the rest of the body")


@no_server
def test_line_length_limit(binary):
    """2048 bytes, terminator included, is the longest line; one more byte
    answers CLIENT_ERROR line too long and closes."""
    with McServer(binary) as s:
        m = s.mc()
        key = b"k" * (2048 - len(b"get \r\n"))
        m.expect(b"get " + key + b"\r\n", "CLIENT_ERROR bad queue name")  # kept
        key = b"k" * (2048 - len(b"get \n"))
        m.expect(b"get " + key + b"\n", "CLIENT_ERROR bad queue name")
        m.sync()  # still open
        m.expect_error_closed(b"get " + key + b"x\r\n", "CLIENT_ERROR line too long")
        m2 = s.mc()
        m2.send(b"x" * 5000)
        eq(m2.read_line(), b"CLIENT_ERROR line too long", "no LF at all")
        m2.expect_closed()


@no_server
def test_set_noreply(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"set q 0 0 1 noreply\r\na\r\nset q 0 0 1 noreply\r\nb\r\n")
        m.sync()
        eq(m.get("q"), b"a", "first")
        eq(m.get("q"), b"b", "second")
        # noreply silences only a success: an error is answered.
        m.send(b"set q x 0 1 noreply\r\na\r\n")
        eq(m.read_line(), b"CLIENT_ERROR bad command line format", "error despite noreply")
        # NOT_STORED is an outcome, not an error: silenced too.
        m.send(b"set q 0 0 70000 noreply\r\n" + b"z" * 70000 + b"\r\nversion\r\n")
        check(m.read_line().startswith(b"VERSION "), "no NOT_STORED line with noreply")


@no_server
def test_set_errors(binary):
    with McServer(binary) as s:
        m = s.mc()
        # Bad flags or exptime: the body is read, the connection kept.
        for line in (b"set q -1 0 1", b"set q 4294967296 0 1", b"set q x 0 1",
                     b"set q 0 x 1", b"set q 0 2147483648 1", b"set q 0 -2147483649 1",
                     b"set q 0 1.5 1"):
            m.send(line + b"\r\nx\r\n")
            eq(m.read_line(), b"CLIENT_ERROR bad command line format", line)
            m.sync()
        m2 = s.mc()
        m2.send(b"set q x 0 9\r\nversion\r\n\r\nversion\r\n")
        eq(m2.read_line(), b"CLIENT_ERROR bad command line format", "bad flags")
        check(m2.read_line().startswith(b"VERSION "), "the body was read, not run")
        eq(m2.get("q"), None, "nothing stored")
        # Bad queue name: body read, kept.
        m2.send(b"set a/b 0 0 9\r\nversion\r\n\r\nset -a 0 0 1\r\nx\r\nversion\r\n")
        eq(m2.read_line(), b"CLIENT_ERROR bad queue name", "slash in a set's name")
        eq(m2.read_line(), b"CLIENT_ERROR bad queue name", "leading -")
        check(m2.read_line().startswith(b"VERSION "), "kept")
        m2.expect(b"set " + b"n" * 201 + b" 0 0 1\r\nx", "CLIENT_ERROR bad queue name")
        m2.expect(b"set " + b"n" * 200 + b" 0 0 1\r\nx", "STORED")


@no_server
def test_set_errors_that_close(binary):
    with McServer(binary) as s:
        for line in (b"set q 0 0", b"set q 0", b"set", b"set q 0 0 x", b"set q 0 0 -1",
                     b"set q 0 0 2147483648"):
            m = s.mc()
            m.expect_error_closed(line + b"\r\n", "CLIENT_ERROR bad command line format")
        m = s.mc()
        m.expect_error_closed(b"set q 0 0 3\r\nabcXY", "CLIENT_ERROR bad data chunk")
        m = s.mc()
        m.expect_error_closed(b"set q 0 0 3\r\nabc\n\r", "CLIENT_ERROR bad data chunk")
        eq(s.mc().get("q"), None, "nothing was stored")


@no_server
def test_set_too_big(binary):
    """Larger than max_item_size (default -z): NOT_STORED, body read and
    dropped, connection kept."""
    with McServer(binary, "-z", "10", conf="[tube small]\nmax_item_size = 3\n") as s:
        m = s.mc()
        m.expect(b"set q 0 0 11\r\nversion\r\nab", "NOT_STORED")
        m.expect(b"set q 0 0 10\r\n0123456789", "STORED")
        m.expect(b"set small 0 0 4\r\nabcd", "NOT_STORED")
        m.expect(b"set small 0 0 3\r\nabc", "STORED")
        eq(m.get("q"), b"0123456789", "q")
        eq(m.get("small"), b"abc", "small")


@no_server
def test_set_full(binary):
    conf = ("[tube lim]\nmax_items = 2\n"
            "[tube disc]\nmax_items = 2\ndiscard_old_when_full = true\n")
    with McServer(binary, conf=conf) as s:
        m = s.mc()
        m.store("lim", b"1")
        m.store("lim", b"2")
        m.expect(b"set lim 0 0 1\r\n3", "NOT_STORED")
        eq([m.get("lim"), m.get("lim"), m.get("lim")], [b"1", b"2", None], "lim")
        for v in (b"1", b"2", b"3"):
            m.store("disc", v)
        eq(m.stats()["queue_disc_discarded"], "1", "queue_disc_discarded")
        eq([m.get("disc"), m.get("disc"), m.get("disc")], [b"2", b"3", None],
           "the oldest was discarded")


@no_server
def test_set_priority_and_ttr_from_config(binary):
    conf = "[tube p]\npriority = 7\nttr = 5m\n"
    with McServer(binary, conf=conf) as s:
        m, b = s.mc(), s.bs()
        m.store("p", b"x")
        m.store("d", b"y")
        b.expect("use p", "USING p")
        line, _ = b.cmd_body("peek-ready")
        jid = int(line.split()[1])
        st = b.stats_job(jid)
        eq((st["pri"], st["ttr"], st["delay"], st["state"]), ("7", "300", "0", "ready"),
           "a set job in tube p")
        b.expect("use d", "USING d")
        line, _ = b.cmd_body("peek-ready")
        st = b.stats_job(int(line.split()[1]))
        eq((st["pri"], st["ttr"]), ("1024", "60"), "defaults")


@no_server
def test_exptime(binary):
    """kestrel's rule: 0 never, below 1,000,000 relative seconds (negative:
    expired already), from 1,000,000 on absolute Unix time."""
    with McServer(binary) as s:
        m, anchor = s.mc(), s.mc()
        # An open job keeps the tube (and its counters) alive throughout.
        anchor.store("e", b"anchor")
        eq(anchor.get("e/open"), b"anchor", "open the anchor")
        m.store("e", b"neg", exptime=-1)
        m.store("e", b"old", exptime=1000000)           # 1970: expired
        m.store("e", b"future", exptime=int(time.time()) + 3600)
        m.store("e", b"rel", exptime=3600)
        m.store("e", b"never", exptime=0)
        eq([m.get("e/peek")] + [m.get("e") for _ in range(4)],
           [b"future", b"future", b"rel", b"never", None],
           "expired items are never served or peeked")
        # An item already expired when its set completes is stored (as
        # kestrel does), counted, and expires at once.
        st = m.stats()
        eq(st["queue_e_total_items"], "6", "anchor, neg, old, future, rel, never")
        eq(st["queue_e_expired_items"], "2", "neg and old expired")
        # A short relative expiry passes while the item waits.
        m.store("e", b"soon", exptime=1)
        m.store("e", b"stays")
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:
            time.sleep(0.1)
        eq(m.get("e"), b"stays", "the 1-second item expired")
        eq(m.stats()["queue_e_expired_items"], "3", "expired_items")


@no_server
def test_expired_set_while_a_get_waits(binary):
    """A set with a past exptime while a get waits on the tube: STORED,
    and the waiting get does not get it (fuzz_mc_conn found the engine
    using the job after expiring it inside the put)."""
    with McServer(binary) as s:
        m, w = s.mc(), s.mc()
        w.send(b"get q/t=20000\r\n")
        w.expect_silence(0.2)
        m.store("q", b"dead", exptime=-5)
        m.store("q", b"dead", exptime=1000000)
        m.store("q", b"live")
        eq(w.read_value("q/t=20000"), b"live", "the waiting get")


@no_server
def test_expired_set_goes_to_the_dead_letter_tube(binary):
    """An item whose exptime has passed when its set completes expires
    like any other: into move_expired_to, counted; with a get waiting on
    the tube, and with none."""
    with McServer(binary, conf="[tube q]\nmove_expired_to = dead\n") as s:
        m, w, anchor = s.mc(), s.mc(), s.mc()
        # An open item keeps the tube (and its counters) alive throughout.
        m.store("q", b"anchor")
        eq(anchor.get("q/open"), b"anchor", "open the anchor")
        m.store("q", b"late-1", exptime=-5)
        w.send(b"get q/t=20000\r\n")
        w.expect_silence(0.2)
        m.store("q", b"late-2", exptime=1000000)
        m.store("q", b"live")
        eq(w.read_value("q/t=20000"), b"live", "the waiting get skips both")
        eq([m.get("dead"), m.get("dead"), m.get("dead")], [b"late-1", b"late-2", None],
           "both expired into the dead-letter tube, in order")
        st = m.stats()
        eq((st["queue_q_total_items"], st["queue_q_expired_items"]), ("4", "2"),
           "counted as stored and as expired")


@no_server
def test_expired_item_rests_in_the_dead_letter_tube(binary):
    """An item moved to move_expired_to leaves its client expiry behind
    (as kestrel re-adds it without one): it does not expire again in the
    dead-letter tube, nor bounce between two tubes that name each other,
    and a restart from the binlog keeps it so."""
    conf = "[tube q]\nmove_expired_to = dead\n[tube dead]\nmove_expired_to = q\n"
    with McServer(binary, "-f", "0", conf=conf, bdir=True) as s:
        m = s.mc()
        m.store("q", b"short", exptime=1)
        m.store("q", b"past", exptime=-1)
        t_end = time.monotonic() + 1.6
        while time.monotonic() < t_end:
            time.sleep(0.1)
        b = s.bs()
        st = b.stats_tube("dead")
        eq(st["current-jobs-ready"], "2", "both rest in dead")
        s.kill9()
        s.restart()
        m = s.mc()
        eq(m.get("dead/peek"), b"short", "after a restart: still there, in order")
        eq([m.get("dead"), m.get("dead"), m.get("dead"), m.get("q")],
           [b"short", b"past", None, None], "both served once from dead, q empty")


@no_server
def test_exptime_clamped_by_max_age(binary):
    """The client's expiry is clamped to the tube's max_age."""
    with McServer(binary, conf="[tube a]\nmax_age = 1s\n") as s:
        m = s.mc()
        m.store("a", b"x", exptime=3600)
        m.store("keep", b"k")
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:
            time.sleep(0.1)
        m.send(b"get a/open\r\nget a\r\n")
        eq(m.read_value(), None, "expired by max_age")
        eq(m.read_value(), None, "expired by max_age")


@no_server
def test_exptime_earlier_than_max_age_wins(binary):
    """max_age only shortens an item's life: one whose own exptime comes
    first (here: already past) expires at its exptime, not max_age later."""
    with McServer(binary, conf="[tube a]\nmax_age = 1h\n") as s:
        m, anchor = s.mc(), s.mc()
        # An open item keeps the queue (and its counters) alive throughout.
        anchor.store("a", b"anchor")
        eq(anchor.get("a/open"), b"anchor", "open the anchor")
        m.store("a", b"past", exptime=-1)
        m.store("a", b"old", exptime=1000000)      # 1970
        m.store("a", b"live", exptime=3600)
        eq([m.get("a") for _ in range(2)], [b"live", None],
           "the items whose exptime passed are not served under max_age = 1h")
        eq(m.stats()["queue_a_expired_items"], "2", "expired_items")


# ----------------------------------------------------------------------- get

@no_server
def test_get_errors(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.expect("get", "CLIENT_ERROR missing arguments")
        m.expect("gets", "CLIENT_ERROR missing arguments")
        m.expect("get a.b;c$d_(e)+f", "END")
        m.expect("get -a", "CLIENT_ERROR bad queue name")
        m.expect("get a" + "b" * 200, "CLIENT_ERROR bad queue name")
        m.expect("get q/t=abc", "CLIENT_ERROR bad timeout")
        m.expect("get q/t=2147483648", "CLIENT_ERROR bad timeout")
        m.expect("get q/t=", "CLIENT_ERROR bad timeout")
        m.expect("get q/t=-5", "END")          # no wait
        m.expect("get q/t=0", "END")
        m.expect("get q/bogus/x=1", "END")     # unknown options are ignored
        m.expect("get q a b c", "END")         # extra keys are ignored
        for key in ("/open", "/", "/t=5"):
            c = s.mc()
            c.expect_error_closed("get " + key, "CLIENT_ERROR empty queue name")
        for key in ("q/peek/open", "q/open/peek", "q/peek/close", "q/abort/open",
                    "q/close/abort", "q/peek/abort", "q/abort/peek/t=10"):
            c = s.mc()
            c.expect_error_closed("get " + key, "CLIENT_ERROR conflicting options")


@no_server
def test_open_close_abort(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.store("q", b"a")
        m.store("q", b"b")
        eq(m.get("q/open"), b"a", "open")
        eq(m.get("q/peek"), b"b", "peek shows the next job, not the open one")
        m.expect("get q/close", "END")
        eq(m.get("q/close/open"), b"b", "close (nothing) and open the next")
        eq(m.get("q/open/close"), None, "close b, open: nothing left")
        m.expect("get q/close", "END")   # none held: fine
        m.expect("get q/abort", "END")
        m.store("q", b"c")
        m.store("q", b"d")
        eq(m.get("q/t=10/open"), b"c", "open with a timeout, options in any order")
        m.expect("get q/abort", "END")
        st = m.stats()
        # The tube emptied (and went) after b was closed: its counters
        # started again with c.
        eq((st["queue_q_transactions"], st["queue_q_canceled_transactions"]), ("1", "1"),
           "transactions (opens that got a job), canceled")
        eq(m.get("q"), b"c", "an aborted job comes back at the head")
        eq(m.get("q"), b"d", "then the younger one")


@no_server
def test_open_held_refusals(binary):
    """A plain get, or another open, while a job of the tube is open:
    ERROR and closed; the held job goes back."""
    with McServer(binary) as s:
        m = s.mc()
        m.store("q", b"a")
        m.store("q", b"b")
        eq(m.get("q/open"), b"a", "open")
        m.expect_error_closed("get q/open", "ERROR")
        m = s.mc()
        eq(m.get("q/open"), b"a", "it went back to the head")
        m.expect_error_closed("get q", "ERROR")
        m = s.mc()
        eq(m.get("q/open"), b"a", "back again")
        m.expect_error_closed("get q/t=100", "ERROR")
        m = s.mc()
        eq(m.get("q/open"), b"a", "and again")
        eq(m.get("other/open"), None, "another tube may have its own")
        m.store("other", b"o")
        eq(m.get("other/open"), b"o", "one open job per tube, two tubes")
        b = s.bs()
        eq(bs_stats_tube(b, "q")["current-jobs-reserved"], "1", "q reserved")
        eq(bs_stats_tube(b, "other")["current-jobs-reserved"], "1", "other reserved")


@slow
@no_server
def test_open_job_seen_from_beanstalk(binary):
    """An open job is reserved, by nobody a beanstalk client can act as,
    and has no TTR deadline."""
    with McServer(binary, conf="ttr = 1s\n") as s:
        m, b = s.mc(), s.bs()
        m.store("q", b"a")
        eq(m.get("q/open"), b"a", "open")
        b.expect("use q", "USING q")
        st = bs_stats_tube(b, "q")
        eq(st["current-jobs-reserved"], "1", "reserved")
        jid = 1
        eq(b.stats_job(jid)["state"], "reserved", "stats-job")
        # No deadline: the largest TTR a beanstalk job can have (it was
        # INT64_MAX ns from now, 9223331230 and falling).
        eq(b.stats_job(jid)["time-left"], "4294967295", "time-left of an open job")
        for cmd in ("delete 1", "release 1 0 0", "bury 1 0", "touch 1"):
            b.expect(cmd, "NOT_FOUND")
        # ttr = 1s: a beanstalk reservation would be back after ~1 s.
        t_end = time.monotonic() + 2.5
        while time.monotonic() < t_end:
            time.sleep(0.1)
        eq(b.stats_job(jid)["state"], "reserved", "still reserved: no TTR")
        eq(b.stats_job(jid)["timeouts"], "0", "no timeout counted")
        eq(b.stats_job(jid)["time-left"], "4294967295", "time-left later")
        m.expect("get q/close", "END")
        b.expect("stats-job 1", "NOT_FOUND")


@no_server
def test_disconnect_releases_open_job_to_head(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.store("q", b"a")
        m.store("q", b"b")
        eq(m.get("q/open"), b"a", "open")
        m.close()
        m2 = s.mc()
        b = s.bs()
        b.watch("q")
        jid, body = b.reserve(timeout=5)   # waits until the close is seen
        eq((jid, body), (1, b"a"), "the released job is served first")
        eq(m2.get("q"), b"b", "then b")


@no_server
def test_peek(binary):
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.expect("get q/peek", "END")
        m.store("q", b"a")
        eq(m.get("q/peek"), b"a", "peek")
        eq(m.get("q/peek"), b"a", "peek again: unchanged")
        st = b.stats_job(1)
        eq((st["state"], st["reserves"]), ("ready", "0"), "peek changed nothing")
        # A peek that waits: the job arrives later, is shown, stays.
        eq(m.get("q"), b"a", "take it")
        m.send(b"get q/peek/t=10000\r\n")
        m.expect_silence(0.2)
        m2 = s.mc()
        m2.store("q", b"late")
        eq(m.read_value("q/peek/t=10000"), b"late", "waiting peek")
        st = b.stats_job(2)
        eq((st["state"], st["reserves"], st["releases"]), ("ready", "0", "0"),
           "a waiting peek changed nothing either")
        eq(m.get("q"), b"late", "still there")
        st = m.stats()
        eq((st["cmd_peek"], st["cmd_get"]), ("4", "2"), "cmd_peek, cmd_get")


@no_server
def test_paused_tube_gives_nothing(binary):
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.store("q", b"a")
        b.expect("pause-tube q 60", "PAUSED")
        m.expect("get q", "END")
        m.expect("get q/peek", "END")
        m.expect("get q/open", "END")
        b.expect("pause-tube q 0", "PAUSED")
        eq(m.get("q"), b"a", "after the pause")


# ---------------------------------------------------------------- waiting

@no_server
def test_wait_then_job_arrives(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"get q/t=20000\r\nversion\r\n")
        m.expect_silence(0.3)   # waiting; the pipelined version waits too
        s.mc().store("q", b"x")
        eq(m.read_value("q/t=20000"), b"x", "the waiting get got the job")
        check(m.read_line().startswith(b"VERSION "), "then the pipelined command")
        m.send(b"get q/open/t=20000\r\n")
        m.expect_silence(0.2)
        s.mc().store("q", b"y")
        eq(m.read_value("q/open/t=20000"), b"y", "a waiting open")
        b = s.bs()
        eq(bs_stats_tube(b, "q")["current-jobs-reserved"], "1", "it is open")


@no_server
def test_wait_times_out(binary):
    with McServer(binary) as s:
        m = s.mc()
        t0 = time.monotonic()
        m.expect("get q/t=300", "END")
        check(time.monotonic() - t0 >= 0.25, "waited about 300 ms")
        st = m.stats()
        eq(st["get_misses"], "1", "a miss")


@no_server
def test_disconnect_while_waiting_takes_nothing(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"get q/t=20000\r\n")
        b = s.bs()
        # The wait has started once the tube shows its waiter.
        from mcproto import wait_for
        wait_for(lambda: (bs_stats_tube(b, "q") or {}).get("current-waiting") == "1",
                 "the get to wait")
        m.close()
        wait_for(lambda: bs_stats_tube(b, "q") is None, "the tube to go with its waiter")
        m2 = s.mc()
        m2.store("q", b"x")
        eq(m2.get("q"), b"x", "the job was not taken by the closed connection")


@no_server
def test_half_close_while_waiting_answers_end(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.send(b"get q/t=20000\r\n")
        m.expect_silence(0.2)
        m.shutdown_write()
        eq(m.read_line(), b"END", "END at the half-close")
        m.expect_closed()
        m2 = s.mc()
        m2.store("q", b"x")
        eq(m2.get("q"), b"x", "nothing taken")


@no_server
def test_fair_queue_with_beanstalk(binary):
    """memcache gets and beanstalk reserves waiting on a tube are served in
    the order they started waiting."""
    from mcproto import wait_for
    with McServer(binary) as s:
        b, m, p, obs = s.bs(), s.mc(), s.mc(), s.bs()
        b.watch("q")
        b.send(b"reserve-with-timeout 20\r\n")
        wait_for(lambda: bs_stats_tube(obs, "q")["current-waiting"] == "1", "bs waits")
        m.send(b"get q/t=20000\r\n")
        wait_for(lambda: bs_stats_tube(obs, "q")["current-waiting"] == "2", "mc waits")
        p.store("q", b"first")
        line, body = b.read_reply()
        eq(body, b"first", "the beanstalk reserve waited first")
        p.store("q", b"second")
        eq(m.read_value("q/t=20000"), b"second", "then the memcache get")
        # The other way round.
        m.send(b"get q/t=20000\r\n")
        wait_for(lambda: bs_stats_tube(obs, "q")["current-waiting"] == "1", "mc waits")
        b.send(b"reserve-with-timeout 20\r\n")
        wait_for(lambda: bs_stats_tube(obs, "q")["current-waiting"] == "2", "bs waits")
        p.store("q", b"third")
        eq(m.read_value("q/t=20000"), b"third", "the memcache get waited first")
        p.store("q", b"fourth")
        line, body = b.read_reply()
        eq(body, b"fourth", "then the beanstalk reserve")


@no_server
def test_tube_lifetime(binary):
    """A get creates nothing that stays; a waiting get or an open job keeps
    its tube (beanstalk's rule)."""
    from mcproto import wait_for
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.expect("get ghost", "END")
        m.expect("get ghost/peek", "END")
        m.expect("delete ghost", "DELETED")
        m.expect("flush ghost", "END")
        check("ghost" not in b.list_tubes(), "no tube left by get/peek/delete/flush")
        m.send(b"get w/t=20000\r\n")
        wait_for(lambda: "w" in b.list_tubes(), "the waiting get's tube")
        s.mc().store("w", b"x")
        eq(m.read_value("w/t=20000"), b"x", "got it")
        wait_for(lambda: "w" not in b.list_tubes(), "the tube to go after the get")
        m.store("o", b"x")
        eq(m.get("o/open"), b"x", "open")
        check("o" in b.list_tubes(), "an open job keeps its tube")
        m.expect("get o/close", "END")
        check("o" not in b.list_tubes(), "closed: the tube is gone")
        eq(bs_stats_tube(b, "default")["current-watching"], "1",
           "memcache connections watch nothing between gets")


@no_server
def test_waiting_peek_ahead_of_a_reserve(binary):
    """A waiting peek first in line sees the job; the reserve behind it
    gets it; the job's counters show one reserve, no release."""
    from mcproto import wait_for
    with McServer(binary) as s:
        m, b, obs = s.mc(), s.bs(), s.bs()
        m.send(b"get q/peek/t=20000\r\n")
        wait_for(lambda: (bs_stats_tube(obs, "q") or {}).get("current-waiting") == "1",
                 "the peek waits")
        b.watch("q")
        b.send(b"reserve-with-timeout 20\r\n")
        wait_for(lambda: bs_stats_tube(obs, "q")["current-waiting"] == "2", "both wait")
        s.mc().store("q", b"x")
        eq(m.read_value("q/peek/t=20000"), b"x", "the peek saw it")
        line, body = b.read_reply()
        eq(body, b"x", "the reserve got it")
        jid = int(line.split()[1])
        st = obs.stats_job(jid)
        eq((st["state"], st["reserves"], st["releases"]), ("reserved", "1", "0"),
           "counters of the job")


@no_server
def test_noreply_set_waiting_for_the_disk_corrupts_no_reply(binary):
    """A noreply set under -f 0 leaves a durability hold at the very end of
    the output, with nothing after it. Once the replies before it were
    written, the next reply was cut at the hold's stale offset and the
    bytes up to it sent from what the buffer held before (fuzz_mc_conn:
    "format" after "CLIENT_ERROR unknown command"). Every round must read
    exactly its own replies."""
    with McServer(binary, "-f", "0", bdir=True) as s:
        m = s.mc()
        want = b"CLIENT_ERROR bad command line format\r\nEND\r\n"
        for i in range(100):
            # A long reply, then a change with no reply (its hold at the end)...
            m.sock.sendall(b"set q x 0 1\r\nz\r\nset q 0 0 1 noreply\r\ny\r\n")
            # ...and, in a separate packet while the fsync may still run,
            # a short one.
            time.sleep(0.001)
            m.sock.sendall(b"get empty\r\n")
            got = b""
            while len(got) < len(want):
                d = m.sock.recv(4096)
                check(d, "closed in round %d after %r" % (i, got))
                got += d
            eq(got, want, "round %d: exactly the two replies" % i)
        m.sock.settimeout(0.3)
        try:
            extra = m.sock.recv(4096)
        except socket.timeout:
            extra = b""
        eq(extra, b"", "nothing after the last reply")
        eq(s.bs().stats_tube("q")["current-jobs-ready"], "100", "every noreply set stored")
