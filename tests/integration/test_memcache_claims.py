"""kestrel.md claims that had no test of their own (a black-box audit of
the spec against the binary): counters the other stats tests leave out,
admin commands that must create no tube (nor a fanout child), policy
refusals through memcache, expiry of an opened job when it comes back,
and boundary values of exptime and t=.

Every test starts its own tubed with --memcache-port on free 127.0.0.1
ports (mc_clients/mcproto.py) and stops it by pid.
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

from harness import check, eq, no_server  # noqa: E402
from mcproto import McServer, bs_job, bs_stats_tube, settle, wait_for  # noqa: E402


@no_server
def test_claims_get_counters(binary):
    """§6: cmd_get counts gets that fetch, not /peek and not a bare /close
    or /abort; get_misses counts a peek that found nothing;
    canceled_transactions counts an /abort and a disconnect alike."""
    with McServer(binary) as s:
        m, anchor = s.mc(), s.mc()
        anchor.store("q", b"anchor")
        eq(anchor.get("q/open"), b"anchor", "keeps q and its counters")
        m.store("q", b"a")
        m.expect("get q/close", "END")          # bare close: no fetch
        m.expect("get q/abort", "END")          # bare abort: no fetch
        m.expect("get nothing/peek", "END")     # a peek miss
        st = m.stats()
        eq((st["cmd_get"], st["cmd_peek"]), ("1", "1"),
           "cmd_get: only the anchor's open; cmd_peek: the miss")
        eq((st["get_hits"], st["get_misses"]), ("1", "1"), "the peek miss is a miss")
        eq(m.get("q/open"), b"a", "open")
        m.expect("get q/abort", "END")          # given back: canceled
        o = s.mc()
        eq(o.get("q/open"), b"a", "open on another connection")
        o.close()                               # given back by the disconnect
        wait_for(lambda: m.stats()["queue_q_canceled_transactions"] == "2",
                 "an abort and a disconnect: two canceled transactions")
        st = m.stats()
        eq(st["queue_q_transactions"], "3", "three /open gets that got a job")
        eq(st["cmd_get"], "3", "the two opens counted as gets")
        eq(m.get("q/close/open"), b"a", "close (none held) then open: a fetch")
        eq(m.stats()["cmd_get"], "4", "close with open is a fetch")


@no_server
def test_claims_total_flushes_counts_flush_all(binary):
    """§6 total_flushes: flush and flush_all both count, on a tube that
    lives on (a watcher keeps it)."""
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        b.watch("q")
        m.store("q", b"a")
        m.expect("flush q", "END")
        eq(m.stats()["queue_q_total_flushes"], "1", "flush")
        m.store("q", b"b")
        m.expect("flush_all", "Flushed all queues.")
        eq(m.stats()["queue_q_total_flushes"], "2", "flush_all counts for every tube")
        m.expect("get q/peek", "END")


@no_server
def test_claims_admin_commands_create_nothing(binary):
    """§5 "none of them creates a tube": flush, flush_expired, dump_stats
    and confirm on unknown names leave no tube behind, and on a fanout
    parent's child name they start no subscription."""
    with McServer(binary, conf="[tube p]\nfanout = true\n") as s:
        m, b = s.mc(), s.bs()
        for cmd, reply in (("flush p+a", "END"), ("flush_expired p+b", "0"),
                           ("confirm p+c 1", "ERROR"), ("flush plain", "END"),
                           ("flush_expired plain2", "0"), ("confirm plain3 1", "ERROR")):
            m.expect(cmd, reply)
        lines = m.lines_until_end("dump_stats p+d")
        eq(lines, [b"queue 'p+d' {", b"  ", b"}"], "dump_stats of an unknown name")
        tubes = b.list_tubes()
        for t in ("p+a", "p+b", "p+c", "p+d", "plain", "plain2", "plain3"):
            check(t not in tubes, "%s was created: %r" % (t, tubes))
        m.store("p", b"x")
        for t in ("p+a", "p+b", "p+c", "p+d"):
            eq(bs_stats_tube(b, t), None, "no copy went to %s" % t)
        check("queue_p_children" not in m.stats(), "p has no children")


@no_server
def test_claims_policies_refuse_through_memcache(binary):
    """§2/§5: max_size refuses a set with NOT_STORED (connection kept);
    discard_old_when_full never discards a reserved (open) job, so a tube
    full of open jobs answers NOT_STORED; max_item_size above -z acts as -z,
    and dump_config shows that effective value."""
    conf = ("[tube sz]\nmax_size = 5\n"
            "[tube d]\nmax_items = 1\ndiscard_old_when_full = true\n"
            "[tube big]\nmax_item_size = 100\n")
    with McServer(binary, "-z", "10", conf=conf) as s:
        m, o = s.mc(), s.mc()
        m.store("sz", b"abc")
        m.expect(b"set sz 0 0 3\r\nabc", "NOT_STORED")
        m.store("sz", b"ab")                    # 5 bytes: fits exactly
        o.store("d", b"a")
        eq(o.get("d/open"), b"a", "open d's job")
        m.expect(b"set d 0 0 1\r\nb", "NOT_STORED")
        eq(bs_stats_tube(s.bs(), "d")["current-jobs-reserved"], "1", "the open job stays")
        m.expect(b"set big 0 0 11\r\n" + b"x" * 11, "NOT_STORED")
        m.expect(b"set big 0 0 10\r\n" + b"x" * 10, "STORED")
        lines = m.lines_until_end("dump_config")
        i = lines.index(b"queue 'big' {")
        eq(lines[i + 3], b"  max_item_size=10", "effective value: capped at -z")


@no_server
def test_claims_open_job_expires_when_given_back(binary):
    """extensions.md expiry via kestrel.md §2: an opened job that passes its
    max_age (or its set exptime) is not served again once /abort or a
    disconnect gives it back; with move_expired_to it moves instead."""
    conf = ("[tube e]\nmax_age = 1s\n"
            "[tube m]\nmax_age = 1s\nmove_expired_to = dead\n")
    with McServer(binary, conf=conf) as s:
        m, o, b = s.mc(), s.mc(), s.bs()
        for t in ("e", "m", "x", "dead"):
            b.watch(t)                          # keep the tubes and counters
        m.store("e", b"a")
        m.store("m", b"c")
        m.store("x", b"d", exptime=1)
        o.store("e", b"b")
        for t, v in (("e", b"a"), ("m", b"c"), ("x", b"d")):
            eq(m.get(t + "/open"), v, "open " + t)
        eq(o.get("e/open"), b"b", "open on the other connection")
        settle(1.4)
        for t in ("e", "m", "x"):
            m.expect("get %s/abort" % t, "END")
        o.close()
        wait_for(lambda: m.stats()["queue_e_expired_items"] == "2",
                 "both e jobs expired when given back")
        m.expect("get e/peek", "END")
        m.expect("get x/peek", "END")
        eq(m.stats()["queue_x_expired_items"], "1", "x: the set exptime")
        eq(m.get("dead"), b"c", "m's job moved to the dead-letter tube")


@no_server
def test_claims_number_bounds(binary):
    """§5 boundaries: exptime -2147483648 is accepted (already expired),
    t=2147483647 is accepted (a job present: served at once), a 200-byte
    name with options in a get is fine."""
    with McServer(binary) as s:
        m = s.mc()
        m.expect(b"set q 0 -2147483648 1\r\nx", "STORED")
        m.expect("get q/peek", "END")
        m.store("q", b"y")
        eq(m.get("q/t=2147483647"), b"y", "the largest t=")
        name = "n" * 200
        m.store(name, b"z")
        eq(m.get(name + "/open/t=1"), b"z", "200-byte name with options")
        m.expect("get %s/close" % name, "END")
        st = m.stats()
        check(not any(re.fullmatch(r"queue_n+_items", k) for k in st), "the tube went")


@no_server
def test_claims_queue_name_charset(binary):
    """§4: a name is 1-200 bytes of A-Za-z0-9-+;.$_() not starting with -;
    every other printable byte (and a non-ASCII one) is CLIENT_ERROR bad
    queue name, the connection kept."""
    allowed = "-+;.$_()"
    with McServer(binary) as s:
        m = s.mc()
        for c in map(chr, range(33, 127)):
            if c.isalnum() or c == "/":
                continue
            want = "END" if c in allowed else "CLIENT_ERROR bad queue name"
            m.expect("get a" + c, want)
        m.expect(b"get a\xc3\xa9", "CLIENT_ERROR bad queue name")
        m.expect("get (.$_;+)", "END")
        m.sync()


@no_server
def test_claims_name_order_is_byte_order(binary):
    """§5/§6 "name order": stats, dump_stats and dump_config list tubes in
    byte order (upper case before lower case, '(' and '+' before letters)."""
    names = ["b", "B", "a_", "a-", "a", "a+", "A1", "(x)"]
    with McServer(binary, conf="[tube Z]\npriority = 1\n") as s:
        m = s.mc()
        for n in names:
            m.store(n, b"x")
        want = sorted(names + ["default"], key=lambda n: n.encode())
        got = [k[len("queue_"):-len("_total_items")] for k in m.stats()
               if k.startswith("queue_") and k.endswith("_total_items")]
        eq(got, want, "stats")
        heads = [l for l in m.lines_until_end("dump_stats") if l.startswith(b"queue '")]
        eq(heads, [b"queue '%s' {" % n.encode() for n in want], "dump_stats")
        heads = [l for l in m.lines_until_end("dump_config") if l.startswith(b"queue '")]
        want = sorted(want + ["Z"], key=lambda n: n.encode())
        eq(heads, [b"queue '%s' {" % n.encode() for n in want], "dump_config")


@no_server
def test_claims_given_back_job_is_an_ordinary_ready_one(binary):
    """§2: /abort and a disconnect release the opened job: stats-job shows
    it as beanstalkd shows a ready job (time-left 0), not with the open's
    endless TTR (4294967295, kept while open, doc/kestrel.md)."""
    with McServer(binary) as s:
        m, b = s.mc(), s.bs()
        m.store("q", b"a")
        eq(m.get("q/open"), b"a", "opened")
        j = bs_job(b, 1)
        eq((j["state"], j["time-left"]), ("reserved", "4294967295"), "while open")
        m.expect("get q/abort", "END")
        j = bs_job(b, 1)
        eq((j["state"], j["time-left"]), ("ready", "0"), "given back by /abort")
        o = s.mc()
        eq(o.get("q/open"), b"a", "opened again")
        o.close()
        wait_for(lambda: bs_job(b, 1)["state"] == "ready", "given back by the close")
        eq(bs_job(b, 1)["time-left"], "0", "given back by the close: time-left")
