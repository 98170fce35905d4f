"""The server-wide budget of unsent replies (doc/security.md, "Replies
nobody reads"): clients that ask for a large reply and never read it.

Each connection stops being read once 256 KiB of its replies wait, but the
one reply it asked for is queued whole: before the budget, 120 clients
that each sent `peek` of a 4 MB job (or memcache `get big/peek`) and read
nothing held a copy apiece (RSS 463 MB, 5 MB at rest; now 67 MB, 104 of
them refused), and 200 that sent `list-tubes` over 20,000 long-named
tubes held 800 MB (now 94 MB, 184 refused). Now, while the other
connections' buffers of unsent replies hold 64 MiB, a reply larger than
4 KiB that copies what the server holds anyway (a listing, a stats
document, a peek) is refused with the protocol's out-of-memory answer;
small replies, reserves and memcache gets that take a job never are.

These fail on the code before the budget: every test that expects
OUT_OF_MEMORY or SERVER_ERROR from a hoarded server, and the RSS ceilings.
The counts of answered and refused hoarders depend on how much of each
reply the kernel took, so the tests check refusals happened, the RSS
ceiling (generous: about three times what the budget lets through) and
the server's own count of refusals, never an exact split.
"""

import os
import re
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

import harness  # noqa: E402
from harness import check, eq, wait_until  # noqa: E402
from http_util import Metrics, get  # noqa: E402
from server import Tubed  # noqa: E402

SERVER = "none"


def _wmem_max():
    """The most a socket's send buffer grows to (tcp_wmem's third field)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 4 << 20


# A reply must be larger than what the kernel takes into a socket, or the
# kernel holds the hoarded copies and the server never sees them unsent.
WMEM_MAX = _wmem_max()
BIG = 4 * 1000 * 1000 if WMEM_MAX <= 4 << 20 else WMEM_MAX + (1 << 20)
BUDGET = 64 << 20
HOARDERS = 120                  # 480 MB of replies without a budget
# 5-25 MB at rest + 64 MiB + one reply + slack; 463 MB before the budget
RSS_CEILING_MB = 200 + 3 * BIG // (1 << 20)
# list-tubes of this many tubes of 198-byte names: a reply larger than BIG
LISTED_TUBES = max(20000, BIG // 200 + 1)


def sanitized(binary):
    """An AddressSanitizer build (test_hostile.py's test)."""
    with open(binary, "rb") as f:
        return b"__asan_" in f.read()


def server(binary, *args, **kw):
    """A tubed; under ASan with a small quarantine, or freed replies would
    sit in its 256 MiB and show as resident memory.  Its hoarders are never
    closed as stalled (--stall-timeout 1d): the default 30 s counts from a
    hoarder's first unread reply, and 150 of them asked one after another
    can take longer than that on a loaded machine under ASan; the first
    ones closed then gave their share of the budget back
    (test_listing_hoarders: 'stats-tubes: expected b'OUT_OF_MEMORY', got
    b'OK 15701196'').  test_hostile and test_conf_hunt test the stall."""
    env = None
    if sanitized(binary):
        opts = os.environ.get("ASAN_OPTIONS", "")
        env = dict(os.environ, ASAN_OPTIONS=(opts + ":" if opts else "") +
                   "quarantine_size_mb=4")
    return Tubed(binary, "--stall-timeout", "1d", *args, env=env, **kw)


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no VmRSS for %d" % pid)


def hoarder(port, request):
    """A connection that sends request and reads only the first line of
    the reply (a small receive buffer: the kernel takes little of it)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((harness.HOST, port))
    s.sendall(request)
    line = b""
    while not line.endswith(b"\r\n"):
        d = s.recv(1)
        check(d, "hoarder: closed before the first line (%r)" % line)
        line += d
    return s, line[:-2]


def hoard(port, request, n=HOARDERS):
    """n hoarders of request: (sockets, first lines)."""
    socks, lines = [], []
    try:
        for _ in range(n):
            s, line = hoarder(port, request)
            socks.append(s)
            lines.append(line)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return socks, lines


def drain(s, first, size_of):
    """Read the rest of the reply whose first line was first."""
    left = size_of(first)
    while left:
        d = s.recv(min(left, 1 << 20))
        check(d, "closed with %d bytes of the reply left" % left)
        left -= len(d)


def scrape(srv):
    r = get(srv, "/metrics")
    eq(r.status, 200, "GET /metrics")
    return Metrics(r.text())


def put_big(c, tube=b"big", n=BIG, fill=b"b"):
    c.send(b"use %s\r\n" % tube)
    eq(c.read_line(), b"USING " + tube, "use")
    c.send(b"put 0 0 600 %d\r\n%s\r\n" % (n, fill * n))
    m = re.fullmatch(rb"INSERTED (\d+)", c.read_line(timeout=30))
    check(m, "put of a big job")
    return int(m.group(1))


def small_work_goes_on(c):
    """A producer's and a worker's whole round on tube 'work': put,
    reserve, delete, and small documents."""
    c.send(b"use work\r\nwatch work\r\nignore default\r\n")
    eq(c.read_line(), b"USING work", "use")
    eq(c.read_line(), b"WATCHING 2", "watch")
    eq(c.read_line(), b"WATCHING 1", "ignore")
    for i in range(20):
        c.send(b"put 0 0 60 5\r\nhello\r\n")
        m = re.fullmatch(rb"INSERTED (\d+)", c.read_line())
        check(m, "put %d" % i)
        c.send(b"reserve-with-timeout 0\r\n")
        eq(c.read_line(), b"RESERVED %s 5" % m.group(1), "reserve %d" % i)
        eq(c.read_exact(7), b"hello\r\n", "body")
        c.send(b"delete %s\r\n" % m.group(1))
        eq(c.read_line(), b"DELETED", "delete %d" % i)
    st = c.stats()
    check("current-jobs-ready" in st, "stats answered")
    c.send(b"list-tube-used\r\n")
    eq(c.read_line(), b"USING work", "list-tube-used")
    c.send(b"list-tubes-watched\r\n")
    head, body = c.read_reply()
    eq(body, b"---\n- work\n", "list-tubes-watched")


def test_peek_hoarders_are_refused_and_the_rest_works(binary):
    """120 clients peek a 4 MB job and read nothing: past the budget they
    hear OUT_OF_MEMORY, RSS stays far below what they asked for, and
    producers, workers, stats, small peeks and small listings go on; the
    other protocols share the budget (memcache's get/peek, /metrics)."""
    with server(binary, "-z", str(BIG), memcache=True, metrics=True) as srv:
        c = srv.client(timeout=30)
        big = put_big(c)
        small = put_big(c, tube=b"small", n=100, fill=b"s")
        job = put_big(c, tube=b"bigwork", fill=b"w")
        rest = rss_mb(srv.pid)
        socks, lines = hoard(srv.port, b"peek %d\r\n" % big)
        try:
            eq(lines[0], b"FOUND %d %d" % (big, BIG), "the first peek")
            answered = lines.count(b"FOUND %d %d" % (big, BIG))
            refused = lines.count(b"OUT_OF_MEMORY")
            eq(answered + refused, HOARDERS, "every hoarder heard FOUND or OUT_OF_MEMORY")
            check(refused > 0, "no hoarder refused (%d answered)" % answered)
            rss = rss_mb(srv.pid)
            check(rss < RSS_CEILING_MB, "RSS %d MB with %d hoarders (at rest %d MB)"
                  % (rss, HOARDERS, rest))

            # everything small goes on, on a fresh connection
            w = srv.client()
            small_work_goes_on(w)
            w.send(b"peek %d\r\n" % small)
            head, body = w.read_reply()
            eq((head, body), (b"FOUND %d 100" % small, b"s" * 100), "a small peek")
            w.send(b"peek %d\r\n" % big)
            eq(w.read_line(), b"OUT_OF_MEMORY", "a big peek from one more client")
            w.send(b"list-tubes\r\n")
            head, body = w.read_reply()
            eq(body, b"---\n- default\n- big\n- small\n- bigwork\n- work\n",
               "a small listing")
            # a worker's reserve of a big body is never refused
            w.send(b"watch bigwork\r\nreserve-with-timeout 0\r\n")
            eq(w.read_line(), b"WATCHING 2", "watch bigwork")
            head, body = w.read_reply(timeout=30)
            eq((head, body == b"w" * BIG), (b"RESERVED %d %d" % (job, BIG), True),
               "a big reserve while hoarded")
            w.send(b"delete %d\r\n" % job)
            eq(w.read_line(), b"DELETED", "its delete")
            w.send(b"peek %d\r\n" % small)
            eq(w.read_reply()[0], b"FOUND %d 100" % small, "the connection stays in step")

            # memcache: the same budget
            m = srv.mc()
            m.store("mq", "tiny")
            m.send(b"get big/peek\r\n")
            eq(m.read_line(), b"SERVER_ERROR out of memory writing get response",
               "a big memcache peek")
            eq(m.get("mq"), b"tiny", "a small get after it, same connection")
            m.sync()

            # HTTP: the same budget; /healthz is small
            eq(get(srv, "/metrics").status, 503, "/metrics while hoarded")
            eq(get(srv, "/healthz").status, 200, "/healthz while hoarded")
        finally:
            for s in socks:
                s.close()
        # they left: the budget comes back
        wait_until(lambda: get(srv, "/metrics").status == 200, timeout=30,
                   what="a scrape once the hoarders left")
        # (The scrape answers once the rest is under the budget; a loaded
        # machine may still be closing the last hoarders then.)
        wait_until(lambda: scrape(srv).value("tubed_unread_reply_bytes") == 0, timeout=30,
                   what="no unread reply bytes once they left")
        met = scrape(srv)
        eq(met.value("tubed_unread_reply_budget_bytes"), BUDGET, "the budget")
        # the refused hoarders, the big peek, the memcache peek, the 503
        eq(met.value("tubed_replies_refused_total"), refused + 3, "refusals counted")
        w.send(b"peek %d\r\n" % big)
        head, body = w.read_reply(timeout=30)
        eq((head, len(body)), (b"FOUND %d %d" % (big, BIG), BIG), "a big peek once they left")


def test_the_budget_comes_back_when_hoarders_read(binary):
    """The hoarders that got their reply read it all: the ones refused
    ask again and get theirs, and the count goes back to zero."""
    with server(binary, "-z", str(BIG), metrics=True) as srv:
        c = srv.client(timeout=30)
        big = put_big(c)
        found = b"FOUND %d %d" % (big, BIG)
        # (A large body leaves straight for the socket, which takes about
        # 3 MB of each 4 MB reply on loopback: 40 hoarders held the rest,
        # 1 MB apiece, under the budget; as many as the other tests now.)
        socks, lines = hoard(srv.port, b"peek %d\r\n" % big)
        try:
            check(b"OUT_OF_MEMORY" in lines, "no refusal among %d hoarders" % len(lines))
            for s, line in zip(socks, lines):
                if line == found:
                    drain(s, line, lambda _: BIG + 2)
            # read: their buffers are given back (the server notices as it
            # writes the last bytes, so ask until it has)
            def again():
                s = socks[lines.index(b"OUT_OF_MEMORY")]
                s.sendall(b"peek %d\r\n" % big)
                line = b""
                while not line.endswith(b"\r\n"):
                    line += s.recv(1)
                return line[:-2]
            got = wait_until(lambda: again() == found or None, timeout=30,
                             what="a refused hoarder's peek once the others read")
            check(got, "answered")
            drain(socks[lines.index(b"OUT_OF_MEMORY")], found, lambda _: BIG + 2)
        finally:
            for s in socks:
                s.close()
        wait_until(lambda: get(srv, "/metrics").status == 200, timeout=30,
                   what="a scrape")
        wait_until(lambda: scrape(srv).value("tubed_unread_reply_bytes") == 0, timeout=30,
                   what="nothing unsent")


def test_listing_hoarders(binary):
    """list-tubes over 20,000 tubes of 198-byte names (a 4 MB reply) from
    150 clients that read nothing: 800 MB of RSS before the budget. Now
    OUT_OF_MEMORY past it, RSS bounded, stats-tubes and list-jobs refused
    too, and a worker's put/reserve/delete goes on."""
    with server(binary) as srv:
        c = srv.client(timeout=60)
        pad = b"x" * 190
        n = LISTED_TUBES
        c.send(b"".join(b"watch t%06d-%s\r\n" % (i, pad) for i in range(n)))
        for i in range(n):
            c.read_line()
        socks, lines = hoard(srv.port, b"list-tubes\r\n", n=150)
        try:
            check(lines[0].startswith(b"OK "), "the first listing: %r" % lines[0])
            refused = lines.count(b"OUT_OF_MEMORY")
            eq(refused + sum(1 for x in lines if x.startswith(b"OK ")), 150, "replies")
            check(refused > 0, "no listing refused")
            rss = rss_mb(srv.pid)
            check(rss < RSS_CEILING_MB, "RSS %d MB with 150 listing hoarders" % rss)
            w = srv.client()
            for cmd in (b"stats-tubes", b"list-tubes"):
                w.send(cmd + b"\r\n")
                eq(w.read_line(), b"OUT_OF_MEMORY", cmd.decode())
            small_work_goes_on(w)
            # a page of list-jobs over 4 KiB is a listing too
            w.send(b"".join(b"put 0 0 60 1\r\nj\r\n" for _ in range(1000)))
            for _ in range(1000):
                check(w.read_line().startswith(b"INSERTED"), "put")
            w.send(b"list-jobs work ready 0 1000\r\n")
            eq(w.read_line(), b"OUT_OF_MEMORY", "a page of 1000 ids")
            w.send(b"list-jobs work ready 0 10\r\n")
            head, body = w.read_reply()
            eq(body.count(b"\n- "), 10, "a page of 10 ids")
        finally:
            for s in socks:
                s.close()
        w2 = srv.client(timeout=30)

        def listed():
            w2.send(b"list-tubes\r\n")
            line = w2.read_line(timeout=30)
            if line == b"OUT_OF_MEMORY":
                return None
            n_ = int(line.split()[1])
            w2.read_exact(n_ + 2, timeout=30)
            return True
        wait_until(listed, timeout=30, what="list-tubes once the hoarders left")


def test_memcache_hoarders(binary):
    """The memcache side: clients that peek a 4 MB item and read nothing
    hear SERVER_ERROR out of memory writing get response past the budget,
    a large stats document 'SERVER_ERROR out of memory writing stats', and
    the connection stays; a get that takes the item is never refused, nor
    a set, nor a small get."""
    with server(binary, "-z", str(BIG), memcache=True) as srv:
        m = srv.mc(timeout=30)
        m.send(b"set big 0 0 %d\r\n%s\r\n" % (BIG, b"m" * BIG))
        eq(m.read_line(), b"STORED", "set big")
        # tubes enough for a dump_stats over 4 KiB
        for i in range(100):
            m.store("q%03d" % i, "x")
        socks, lines = hoard(srv.mport, b"get big/peek\r\n")
        try:
            eq(lines[0], b"VALUE big/peek 0 %d" % BIG, "the first peek")
            refused = lines.count(b"SERVER_ERROR out of memory writing get response")
            check(refused > 0, "no memcache peek refused: %r" % sorted(set(lines)))
            eq(refused + lines.count(lines[0]), HOARDERS, "replies")
            rss = rss_mb(srv.pid)
            check(rss < RSS_CEILING_MB, "RSS %d MB with %d memcache hoarders" % (rss, HOARDERS))
            w = srv.mc(timeout=30)
            w.send(b"dump_stats\r\n")
            eq(w.read_line(), b"SERVER_ERROR out of memory writing stats", "dump_stats")
            w.store("small", "hello")
            eq(w.get("small"), b"hello", "a small get")
            # a beanstalk listing shares the budget; a small one is answered
            b = srv.client()
            b.send(b"stats-tubes\r\n")
            eq(b.read_line(), b"OUT_OF_MEMORY", "stats-tubes of 100 tubes")
            # the get that takes the big item is never refused
            eq(w.get("big", timeout=30), b"m" * BIG, "a get that takes the big item")
            w.sync()
        finally:
            for s in socks:
                s.close()
