"""The kestrel listener's stats and dump_stats (spec kestrel.md §5-§6): key
order, values, and agreement with beanstalk's stats on the same server.
"""

import os

import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

from harness import check, eq, no_server  # noqa: E402
from mcproto import McServer, bs_stats_tube, wait_for  # noqa: E402

GLOBAL_KEYS = ["uptime", "time", "version", "curr_items", "total_items", "bytes",
               "reserved_memory_ratio", "curr_connections", "total_connections",
               "cmd_get", "cmd_set", "cmd_peek", "get_hits", "get_misses",
               "bytes_read", "bytes_written", "queue_creates", "queue_deletes",
               "queue_expires"]
TUBE_KEYS = ["items", "bytes", "total_items", "logsize", "expired_items", "mem_items",
             "mem_bytes", "age", "discarded", "waiters", "open_transactions",
             "transactions", "canceled_transactions", "total_flushes",
             "journal_rewrites", "journal_rotations"]


@no_server
def test_stats_keys_and_order(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.store("b", b"x")
        m.store("a", b"yy")
        st = m.stats()
        keys = list(st)
        eq(keys[:len(GLOBAL_KEYS)], GLOBAL_KEYS, "global keys")
        want = []
        for t in ("a", "b", "default"):
            want += ["queue_%s_%s" % (t, k) for k in TUBE_KEYS]
        eq(keys[len(GLOBAL_KEYS):], want, "per-tube keys, tubes in name order")
        check(abs(int(st["time"]) - time.time()) < 5, "time is the Unix time")
        eq(st["reserved_memory_ratio"], "0.000", "reserved_memory_ratio")
        eq(st["queue_expires"], "0", "queue_expires")
        for k, v in st.items():
            if k not in ("version", "reserved_memory_ratio"):
                check(v.isdigit(), "%s is an integer: %r" % (k, v))
        m.send(b"stats items\r\n")           # arguments are ignored
        check(m.read_line().startswith(b"STAT uptime "), "stats items")
        while m.read_line() != b"END":
            pass


@no_server
def test_stats_values(binary):
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.store("q", b"12345")
        m.store("q", b"678")
        m.store("q", b"9")
        b.expect("use q", "USING q")
        b.put(b"delayed", delay=3600)
        eq(m.get("q/open"), b"12345", "open")
        eq(m.get("q/peek"), b"678", "peek")
        m.expect("get empty", "END")
        st = m.stats()
        eq(st["curr_items"], "3", "curr_items: ready 2 + delayed 1, not the open one")
        eq(st["total_items"], "4", "total_items: both protocols")
        eq(st["bytes"], str(3 + 1 + 7), "bytes of curr_items")
        eq((st["cmd_get"], st["cmd_set"], st["cmd_peek"]), ("2", "3", "1"), "cmd_*")
        eq((st["get_hits"], st["get_misses"]), ("2", "1"), "hits, misses")
        eq(st["queue_q_items"], "3", "items")
        eq(st["queue_q_bytes"], "11", "bytes")
        eq(st["queue_q_mem_items"], "3", "mem_items")
        eq(st["queue_q_mem_bytes"], "11", "mem_bytes")
        eq(st["queue_q_total_items"], "4", "total_items")
        eq(st["queue_q_open_transactions"], "1", "open_transactions")
        eq(st["queue_q_transactions"], "1", "transactions")
        eq(st["queue_q_logsize"], "0", "logsize")
        eq(st["queue_q_waiters"], "0", "waiters")
        eq(st["queue_creates"], "2", "queue_creates: q and empty")
        # bytes_read: every byte this connection sent so far.
        sent = (len(b"set q 0 0 5\r\n12345\r\n") + len(b"set q 0 0 3\r\n678\r\n") +
                len(b"set q 0 0 1\r\n9\r\n") + len(b"get q/open\r\n") +
                len(b"get q/peek\r\n") + len(b"get empty\r\n") + len(b"stats\r\n"))
        eq(st["bytes_read"], str(sent), "bytes_read")
        got = (len(b"STORED\r\n") * 3 + len(b"VALUE q/open 0 5\r\n12345\r\nEND\r\n") +
               len(b"VALUE q/peek 0 3\r\n678\r\nEND\r\n") + len(b"END\r\n"))
        eq(st["bytes_written"], str(got), "bytes_written before this reply")


@no_server
def test_stats_waiters_and_age(binary):
    with McServer(binary) as s:
        m, w, b, anchor = s.mc(), s.mc(), s.bs(), s.mc()
        anchor.store("q", b"anchor")
        eq(anchor.get("q/open"), b"anchor", "keeps q and its counters")
        m.store("q", b"old")
        t_end = time.monotonic() + 0.3
        while time.monotonic() < t_end:
            time.sleep(0.05)
        eq(m.get("q"), b"old", "take")
        w.send(b"get q/t=20000\r\n")
        b.watch("q")
        b.send(b"reserve-with-timeout 20\r\n")
        wait_for(lambda: m.stats().get("queue_q_waiters") == "2", "two waiters")
        check(int(m.stats()["queue_q_age"]) >= 250, "age: the job waited ~300 ms")
        m.store("q", b"x")
        m.store("q", b"y")
        eq(w.read_value("q/t=20000"), b"x", "memcache waiter")
        b.read_reply()


@no_server
def test_connections_count_both_protocols(binary):
    with McServer(binary) as s:
        m1, m2, b1 = s.mc(), s.mc(), s.bs()
        st = m1.stats()
        eq((st["curr_connections"], st["total_connections"]), ("3", "3"), "mc view")
        bst = b1.stats()
        eq((bst["current-connections"], bst["total-connections"]), ("3", "3"), "bs view")
        m2.close()
        wait_for(lambda: m1.stats()["curr_connections"] == "2", "a close counted")
        eq(m1.stats()["total_connections"], "3", "total stays")


@no_server
def test_stats_agree_with_beanstalk(binary):
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        for i in range(5):
            m.store("q", b"x" * i)
        b.expect("use q", "USING q")
        b.put(b"beanstalk", delay=3600)
        jid = b.put(b"bury me")
        b.watch("q")
        line, _ = b.cmd_body("reserve-job %d" % jid)
        b.expect("bury %d 0" % jid, "BURIED")
        eq(m.get("q/open"), b"", "open the first")
        st, bst, tst = m.stats(), b.stats(), bs_stats_tube(b, "q")
        eq(int(st["curr_items"]), int(bst["current-jobs-ready"]) +
           int(bst["current-jobs-delayed"]) + int(bst["current-jobs-buried"]), "curr_items")
        eq(st["total_items"], bst["total-jobs"], "total_items / total-jobs")
        eq(int(st["queue_q_items"]), int(tst["current-jobs-ready"]) +
           int(tst["current-jobs-delayed"]) + int(tst["current-jobs-buried"]), "items")
        eq(st["queue_q_open_transactions"], tst["current-jobs-reserved"], "open / reserved")
        eq(st["queue_q_total_items"], tst["total-jobs"], "total_items")
        eq(st["curr_connections"], bst["current-connections"], "connections")


@no_server
def test_dump_stats(binary):
    with McServer(binary) as s:
        m = s.mc()
        m.store("b", b"x")
        m.store("a", b"yy")
        lines = m.lines_until_end("dump_stats")
        heads = [l for l in lines if l.startswith(b"queue ")]
        eq(heads, [b"queue 'a' {", b"queue 'b' {", b"queue 'default' {"], "all, name order")
        i = lines.index(b"queue 'a' {")
        eq(lines[i + 1:i + 1 + len(TUBE_KEYS) + 1],
           [b"  %s=%s" % (k.encode(), v) for k, v in zip(
               [k for k in TUBE_KEYS],
               [b"1", b"2", b"1", b"0", b"0", b"1", b"2", b"0", b"0", b"0", b"0", b"0",
                b"0", b"0", b"0", b"0"])] + [b"}"], "block of a")
        lines = m.lines_until_end("dump_stats b nope a")
        eq([l for l in lines if l.startswith(b"queue ")],
           [b"queue 'a' {", b"queue 'b' {", b"queue 'nope' {"], "given names, name order")
        i = lines.index(b"queue 'nope' {")
        eq(lines[i + 1:i + 3], [b"  ", b"}"], "an unknown name: an empty block")


@no_server
def test_children_stat(binary):
    with McServer(binary, conf="[tube p]\nfanout = true\n") as s:
        m = s.mc()
        m.expect("get p+z", "END")
        m.expect("get p+a", "END")
        m.store("p", b"x")
        st = m.stats()
        eq(st["queue_p_children"], "p+a,p+z", "children, name order")
        keys = list(st)
        eq(keys.index("queue_p_children"), keys.index("queue_p_journal_rotations") + 1,
           "children after the other keys")
        check("queue_p+a_children" not in st, "only parents have children")
        lines = m.lines_until_end("dump_stats p")
        eq(lines[-2:], [b"  children=p+a,p+z", b"}"], "dump_stats children")


@no_server
def test_connection_limit_counts_both_protocols(binary):
    with McServer(binary, "--max-connections", "2") as s:
        b, m = s.bs(), s.mc()
        m.sync()
        third = s.mc()
        got = b""
        try:
            third.sock.settimeout(5)
            while True:
                data = third.sock.recv(100)
                if not data:
                    break
                got += data
        except OSError:
            pass
        # Refused in memcache's words (not beanstalk's OUT_OF_MEMORY).
        eq(got, b"SERVER_ERROR too many open connections\r\n",
           "what the third connection is told before the close")
        b2 = s.srv.connect(5)  # the beanstalk port
        eq(b2.recv(100), b"OUT_OF_MEMORY\r\n", "a refused beanstalk client hears beanstalkd's line")
        b2.close()
        eq(m.stats()["curr_connections"], "2", "curr_connections")


@no_server
def test_a_tube_made_again_starts_from_zero(binary):
    # The counters only this front-end keeps (transactions, canceled,
    # flushes, age) live in the tube: a queue freed and made again starts
    # at zero. They used to sit in a side table keyed by name that told a
    # new tube from the old one by its address, so a tube made again at
    # the freed one's address (the allocator's first choice) took its
    # counters over.
    with McServer(binary) as s:
        m = s.mc()
        for rnd in range(5):
            m.store("r", b"x")
            eq(m.get("r/open"), b"x", "round %d: open" % rnd)
            m.expect("get r/close", "END")
            # r is empty and unused now: freed. No stats in between (a
            # document made meanwhile used to hide the bug).
            m.store("r", b"y")
            st = m.stats()
            eq(st["queue_r_transactions"], "0",
               "round %d: a new tube r inherited the old one's transactions" % rnd)
            eq(m.get("r"), b"y", "round %d: drain" % rnd)
