"""Hostile clients on the memcache (kestrel) port: slowloris lines and set
bodies that never complete, clients that pipeline big replies and never
read them, thousands of `get q/t=<huge>` waiters, huge and malformed
arguments, over-long keys and lines, garbage bytes, connections dropped
mid-set and mid-reply, half-closed sockets; and a regression test for a
held job that outlives every other user of its tube.

The memcache twin of test_hostile.py (whose helpers it uses). Every test
checks real replies over real sockets against the real binary, that a
fresh client of either protocol still gets an answer, and that the
server's memory stays bounded (VmRSS, loosened under AddressSanitizer);
the harness checks the server's exit and its output for sanitizer
reports. Timeouts are liveness ceilings only, never speed assertions.
"""

import os
import random
import select
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "mc_clients"))

import harness  # noqa: E402
from harness import Skip, TestFailure, check, eq, fail, no_server, slow  # noqa: E402
from mcproto import Mc, McServer, bs_stats_tube, wait_for  # noqa: E402
from test_hostile import (close_rst, mem_factor, raise_nofile,  # noqa: E402
                          responsive, restore_nofile, rss_kib, sanitized,
                          send_nonblocking)

# Ceiling for anything polled; generous: ASan, two cores, other tests.
LIVE = 60.0


# ------------------------------------------------------------------ helpers

def mc_connect(s, timeout=10.0):
    """A raw socket to the memcache port."""
    return socket.create_connection((harness.HOST, s.mport), timeout=timeout)


def mc_responsive(s, within=LIVE, what="server"):
    """A fresh memcache client and a fresh beanstalk client both get
    answers; returns the memcache stats."""
    sock = mc_connect(s, within)
    m = Mc(None, None, timeout=within, sock=sock)
    try:
        line = m.cmd("version", timeout=within)
        check(line.startswith(b"VERSION "), "%s: version answered %r" % (what, line))
        st = m.stats()
    except TestFailure as e:
        raise TestFailure("%s: a fresh memcache client got no answer: %s" % (what, e))
    finally:
        m.close()
    responsive(s.srv, within=within, what=what)
    return st


def mc_stats(s):
    m = Mc(None, None, timeout=10.0, sock=mc_connect(s))
    try:
        return m.stats()
    finally:
        m.close()


def mc_stat(s, key, default=None):
    v = mc_stats(s).get(key, default)
    return None if v is None else int(v)


def read_until_closed(sock, timeout=10.0, limit=1 << 20):
    """Everything the server sends until it closes (fails on a timeout)."""
    sock.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        if time.monotonic() > deadline:
            fail("the server did not close; received %r" % data[:300])
        try:
            d = sock.recv(65536)
        except ConnectionResetError:
            return data
        except socket.timeout:
            fail("the server neither replied nor closed; received %r" % data[:300])
        if not d:
            return data
        data += d
        check(len(data) < limit, "more than %d bytes before the close" % limit)


def read_lines(sock, n, timeout=10.0):
    """Exactly n CRLF-terminated lines (without their CRLF)."""
    sock.settimeout(timeout)
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\r\n") < n:
        if time.monotonic() > deadline:
            fail("timed out waiting for %d lines; got %r" % (n, buf[:300]))
        d = sock.recv(65536)
        check(d, "closed by the server after %r" % buf[:300])
        buf += d
    lines = buf.split(b"\r\n")
    check(len(lines) == n + 1 and lines[-1] == b"", "more than %d lines: %r" % (n, buf[:300]))
    return lines[:n]


def grown_check(s, base, per_kib, n, what):
    grown = rss_kib(s.srv) - base
    check(grown < per_kib * n * mem_factor(s.srv),
          "server grew %d KiB for %d %s (%.1f KiB each)" % (grown, n, what, grown / max(n, 1)))
    return grown


def mc_case(s, data, expected, closed):
    """One fresh connection: send data, expect the reply lines, then
    either the close or, when kept, an answer to `version`."""
    m = s.mc(timeout=15)
    try:
        try:
            m.send(data)
        except (ConnectionResetError, BrokenPipeError):
            # A connection the server closes after an error may be reset
            # while the rest of a long input is still being sent (what it
            # had not read is dropped); its reply lines were sent before
            # the close and are still read, and checked, below.
            if not closed:
                raise
        for exp in expected:
            got = m.read_line()
            if got != exp:
                fail("sent %r: expected %r, got %r" % (harness._short(data), exp, got))
        if closed:
            m.expect_closed()
        else:
            line = m.cmd("version")
            check(line.startswith(b"VERSION "), "sent %r: the connection should be kept "
                  "and in step, version answered %r" % (harness._short(data), line))
    finally:
        m.close()
        s.srv.clients.remove(m)


# ---------------------------------------------------------------- slowloris

@no_server
def test_mc_slowloris_lines(binary):
    """Hundreds of clients each trickle a command a byte or a few dozen
    bytes at a time: the complete ones are answered, the ones that pass
    2048 bytes without a line end are refused and closed, and in between
    each costs its partial line, not more."""
    n = 300
    half = n // 2
    word = b"version\r\n"
    with McServer(binary) as s:
        base = rss_kib(s.srv)
        socks = [mc_connect(s) for _ in range(n)]
        try:
            # Round r: the first half sends byte r of "version\r\n", the
            # second half 90 more bytes of a key that never ends; after
            # round 22 those lines are 2074 bytes long (the limit is 2048).
            for r in range(23):
                for i, k in enumerate(socks):
                    if i < half:
                        if r < len(word):
                            k.sendall(word[r:r + 1])
                    else:
                        k.sendall((b"get " if r == 0 else b"") + b"k" * 90)
                if r == 4:
                    mc_responsive(s, what="during a byte-by-byte slowloris")
                if r == 21:   # 1984 bytes of an unfinished line on each
                    grown_check(s, base, 24, n, "slowloris connections")
                    mc_responsive(s, what="with %d partial lines" % half)
                time.sleep(0.05)
            for k in socks[:half]:
                line = read_lines(k, 1)[0]
                check(line.startswith(b"VERSION "), "a command sent byte by byte: %r" % line)
            for k in socks[half:]:
                eq(read_until_closed(k), b"CLIENT_ERROR line too long\r\n",
                   "a line that passed 2048 bytes")
        finally:
            for k in socks:
                close_rst(k)
        wait_for(lambda: mc_stat(s, "curr_connections") == 1, "slowloris connections gone",
                 timeout=LIVE)
        mc_responsive(s, what="after the slowloris")


@no_server
def test_mc_slowloris_set_bodies(binary):
    """`set`s whose data block never completes: each costs its declared
    body (allocated up front, at most -z) and nothing is stored; a body
    larger than -z is read and thrown away, never allocated; a set sent a
    byte at a time is stored."""
    n = 200
    size = 8000
    with McServer(binary) as s:
        base = rss_kib(s.srv)
        socks = [mc_connect(s) for _ in range(n)]
        try:
            for k in socks:
                k.sendall(b"set slow 0 0 %d\r\n" % size)
            for r in range(10):
                for k in socks:
                    k.sendall(b"x" * 100)
                time.sleep(0.03)
            st = mc_responsive(s, what="during slow sets")
            grown_check(s, base, size // 1024 + 12, n, "unfinished sets of %d bytes" % size)
            eq(st["curr_items"], "0", "no item before its body is in")
            # A body over -z (65535 here) that streams in: dropped as it
            # comes, no reply until it ends, no memory for it.
            big = mc_connect(s)
            big.sendall(b"set slow 0 0 2147483647\r\n")
            before = rss_kib(s.srv)
            sent = send_nonblocking(big, b"\0" * (4 << 20), 5.0)
            check(sent >= 65536, "the server stopped taking the body (sent %d)" % sent)
            big.setblocking(True)
            big.settimeout(0.3)
            try:
                early = big.recv(100)
                fail("while a 2 GiB body streams in, got %r%s"
                     % (early, "" if early else " (closed)"))
            except socket.timeout:
                pass
            grown = rss_kib(s.srv) - before
            check(grown < 4096 * mem_factor(s.srv),
                  "server grew %d KiB while discarding a body" % grown)
            close_rst(big)
        finally:
            for k in socks:
                close_rst(k)
        wait_for(lambda: mc_stat(s, "curr_connections") == 1, "slow sets closed", timeout=LIVE)
        st = mc_stats(s)
        eq((st["curr_items"], st["total_items"]), ("0", "0"), "half-sent sets left no item")
        # Byte by byte, it works.
        m = s.mc(timeout=15)
        m.send_slowly(b"set slow 0 0 10\r\n0123456789\r\n", chunk=1, pause=0.01)
        eq(m.read_line(), b"STORED", "a set sent one byte at a time")
        eq(m.get("slow"), b"0123456789", "its item")


@no_server
def test_mc_slow_sets_hold_job_memory(binary):
    """A set's body is reserved when its command line arrives and counts in
    --job-memory until it is complete or its client leaves: slow clients
    can hold the budget (others' sets answer NOT_STORED, puts
    OUT_OF_MEMORY), never more than it, and leaving gives it back."""
    with McServer(binary, "--job-memory", "300000") as s:
        socks = []
        try:
            for _ in range(6):    # room for four of them
                k = mc_connect(s)
                k.sendall(b"set slow 0 0 60000\r\n" + b"x" * 100)
                socks.append(k)
            b = s.bs()
            wait_for(lambda: int(b.stats()["job-memory"]) >= 4 * 60000,
                     "the slow sets' bodies reserved", timeout=LIVE)
            used = int(b.stats()["job-memory"])
            check(used <= 300000, "job-memory %d over the limit" % used)
            m = s.mc()
            m.expect(b"set q 0 0 60000\r\n" + b"y" * 60000, "NOT_STORED")
            b.use("q")
            b.send(b"put 0 0 60 60000\r\n" + b"y" * 60000 + b"\r\n")
            eq(b.read_line(), b"OUT_OF_MEMORY", "a put while slow sets hold the budget")
            mc_responsive(s, what="with the job memory held by slow sets")
        finally:
            for k in socks:
                close_rst(k)
        wait_for(lambda: int(b.stats()["job-memory"]) < 60000, "the budget given back",
                 timeout=LIVE)
        m.expect(b"set q 0 0 60000\r\n" + b"y" * 60000, "STORED")
        eq(mc_stat(s, "curr_items"), 1, "only the complete set is stored")


@no_server
def test_mc_huge_declared_sets_at_max_size(binary):
    """With -z 1 GiB, sets that declare 1 GiB and send a little must not
    cost their size in resident memory; closing gives it back."""
    with McServer(binary, "-z", "1073741824") as s:
        if sanitized(s.srv):
            raise Skip("declared-size memory cannot be measured under ASan")
        base = rss_kib(s.srv)
        socks = []
        for _ in range(6):
            k = mc_connect(s)
            k.sendall(b"set huge 0 0 1073741824\r\n" + b"h" * 1000)
            socks.append(k)
        time.sleep(0.2)
        mc_responsive(s, what="with 6 GiB of set bodies declared")
        grown = rss_kib(s.srv) - base
        check(grown < 64 * 1024, "server grew %d KiB for 6 declared 1 GiB bodies" % grown)
        for k in socks:
            close_rst(k)
        wait_for(lambda: mc_stat(s, "curr_connections") == 1, "closed", timeout=LIVE)
        eq(mc_stat(s, "curr_items"), 0, "nothing stored")


# ------------------------------------------------- clients that never read

def tcp_wmem_max():
    """The most a TCP send buffer grows to (the third of tcp_wmem)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 4 << 20


def nonreader(s):
    k = mc_connect(s)
    k.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return k


@no_server
def test_mc_client_that_never_reads(binary):
    """Pipelined `get q/peek` of a 60 KB item (120 GB of replies asked
    for) and pipelined `stats`, never read: the server stops reading them
    (back-pressure), serves everyone else, and stays bounded."""
    with McServer(binary) as s:
        p = s.mc()
        big = b"z" * 60000
        p.store("big", big)
        base = rss_kib(s.srv)
        peeker, statter = nonreader(s), nonreader(s)
        cmds = b"get big/peek\r\n" * 2000000
        sent = send_nonblocking(peeker, cmds, 1.5)
        check(0 < sent < len(cmds), "the server read %d of %d bytes of gets from a client "
              "that reads no replies" % (sent, len(cmds)))
        scmds = b"stats\r\n" * 3000000
        sent = send_nonblocking(statter, scmds, 1.5)
        check(0 < sent < len(scmds), "the server read %d of %d bytes of stats from a "
              "client that reads no replies" % (sent, len(scmds)))
        other = s.mc(timeout=15)
        for _ in range(20):
            eq(other.get("big/peek"), big, "another client's peek")
        mc_responsive(s, what="with two clients that never read")
        grown = rss_kib(s.srv) - base
        # Per client: 256 KiB of replies, one reply over the mark, the
        # unparsed input (64 KiB).
        check(grown < 2 * 8 * 1024 * mem_factor(s.srv),
              "server grew %d KiB for two clients that do not read" % grown)
        # p, the two non-readers, other (the fresh clients have gone).
        wait_for(lambda: other.stats()["curr_connections"] == "4", "four connections",
                 timeout=LIVE)
        eq(other.stats()["curr_items"], "1", "items")
        close_rst(peeker)
        close_rst(statter)
        wait_for(lambda: other.stats()["curr_connections"] == "2", "the non-readers closed",
                 timeout=LIVE)
        eq(other.get("big"), big, "the item is still there")


@no_server
def test_mc_plain_gets_never_read_take_a_bounded_number(binary):
    """A client pipelining plain `get`s (each takes and deletes an item)
    and never reading: the server stops reading it once its replies back
    up, so it takes a bounded number of items, and every other item is
    still served, in order, exactly once."""
    size = 30000
    # What it can take: the server's 256 KiB of queued replies, one reply
    # over that mark, and what the kernel's socket buffers hold on the way.
    bound = (256 * 1024 + size + tcp_wmem_max() + 2 * 4096) // size + 2
    n = bound + 150
    with McServer(binary) as s:
        p = s.mc(timeout=15)
        pad = b"." * (size - 10)
        p.send(b"".join(b"set t 0 0 %d noreply\r\nitem-%05d%s\r\n" % (size, i, pad)
                        for i in range(n)))
        p.sync()
        eq(p.stats()["queue_t_items"], str(n), "items set")
        k = nonreader(s)
        sent = send_nonblocking(k, b"get t\r\n" * n, 3.0)
        check(sent > 0, "nothing could be sent")
        # The server read what it could; the back-pressure holds.
        time.sleep(0.5)
        left = int(p.stats()["queue_t_items"])
        taken = n - left
        check(0 < taken <= bound, "a client that reads nothing took %d of %d items of %d "
              "bytes (at most %d expected)" % (taken, n, size, bound))
        mc_responsive(s, what="with a client that pipelines gets and never reads")
        if os.environ.get("HOSTILE_VERBOSE"):
            print("a non-reader took %d of %d items of %d bytes" % (taken, n, size))
        close_rst(k)
        wait_for(lambda: p.stats()["curr_connections"] == "1", "the non-reader closed",
                 timeout=LIVE)
        # What it took is gone (a plain get deletes); the rest come in
        # order, each once.
        left2 = int(p.stats()["queue_t_items"])
        check(left2 <= left, "items came back: %d then %d" % (left, left2))
        first = n - left2
        p.send(b"get t\r\n" * left2)
        for i in range(first, n):
            eq(p.read_value("t"), b"item-%05d%s" % (i, pad), "item %d" % i)
        p.expect("get t", "END")


@slow
@no_server
def test_mc_client_that_never_reads_is_disconnected(binary):
    """Nothing read for --stall-timeout seconds: closed, logged, and the
    job it held open goes back."""
    with McServer(binary, "--stall-timeout", "12") as s:
        p = s.mc(timeout=15)
        p.store("held", b"the open job")
        p.store("big", b"q" * 60000)
        k = nonreader(s)
        k.sendall(b"get held/open\r\n")
        send_nonblocking(k, b"get big/peek\r\n" * 200000, 1.0)
        # On a loaded machine the server may not have read it yet.
        wait_for(lambda: p.stats()["queue_held_open_transactions"] == "1",
                 "the non-reader's open job", timeout=LIVE)
        eq(p.stats()["curr_connections"], "2", "the non-reader is still there at first")
        # The stall clock starts at its first blocked reply; 12 s leaves
        # room for round trips on a loaded machine (see test_hostile.py).
        wait_for(lambda: p.stats()["curr_connections"] == "1", "the non-reader disconnected",
                 timeout=LIVE)
        check("unread" in s.srv.stderr_text(), "the disconnect was not logged")
        eq(p.get("held"), b"the open job", "its open job went back")
        eq(p.get("big/peek"), b"q" * 60000, "the peeked item is untouched")
        close_rst(k)


# --------------------------------------------------- thousands of waiters

N_WAITERS = int(os.environ.get("HOSTILE_MC_WAITERS", "4000"))
BIG_T = b"2147483647"   # the largest t= (ms) tubed takes: about 24.8 days


def readable(socks, seconds):
    """The sockets of socks with something to read (or closed) within
    `seconds`."""
    poller = select.poll()
    fds = {}
    for k in socks:
        poller.register(k, select.POLLIN | select.POLLHUP | select.POLLERR)
        fds[k.fileno()] = k
    out = []
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        ev = poller.poll(max(0, int(left * 1000)))
        if ev or left <= 0:
            return [fds[fd] for fd, _ in ev]


def bs_waiting(b, tube):
    st = bs_stats_tube(b, tube)
    return int(st["current-waiting"]) if st else 0


@slow
@no_server
def test_mc_thousands_of_waiters(binary):
    limit = raise_nofile(N_WAITERS * 2 + 400)
    try:
        n = min(N_WAITERS, limit - 400)
        if n < 1000:
            raise Skip("descriptor limit too low for 1000 waiting connections")
        _waiters(binary, n)
    finally:
        restore_nofile()


def _waiters(binary, n):
    """n connections wait on one queue with the longest timeouts there
    are (plain get, get/open, monitor with 2^32-1 seconds); out-of-range
    timeouts are refused; a set wakes exactly one, the first in line; the
    rest cost little each; closing them all leaves the counts right."""
    kinds = [b"get w/t=%s\r\n" % BIG_T, b"get w/open/t=%s\r\n" % BIG_T,
             b"monitor w 4294967295 4294967295\r\n"]
    with McServer(binary) as s:
        obs = s.bs(timeout=20)
        base = rss_kib(s.srv)
        socks, kind_of = [], {}
        try:
            first = mc_connect(s, 20)
            first.sendall(kinds[0])
            socks.append(first)
            kind_of[first] = 0
            wait_for(lambda: bs_waiting(obs, "w") == 1, "the first waiter", timeout=LIVE)
            for i in range(1, n):
                k = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                k.settimeout(20)
                k.connect((harness.HOST, s.mport))
                k.sendall(kinds[i % 3])
                socks.append(k)
                kind_of[k] = i % 3
            wait_for(lambda: bs_waiting(obs, "w") == n, "%d waiters" % n, timeout=LIVE)
            st = mc_responsive(s, what="with %d memcache waiters" % n)
            eq(st["queue_w_waiters"], str(n), "queue_w_waiters")
            eq(st["curr_connections"], str(n + 2), "curr_connections (waiters, obs, itself)")
            grown = rss_kib(s.srv) - base
            check(grown < n * 4 * mem_factor(s.srv), "server grew %d KiB for %d waiters "
                  "(%.1f KiB each)" % (grown, n, grown / n))
            # Timeouts beyond t='s range: refused, connection kept, no wait.
            m = s.mc(timeout=20)
            for t in (b"4294967295", b"2147483648", b"18446744073709551616",
                      b"99999999999999999999999999999999", b"-2147483649",
                      b"-99999999999999999999", b"+5", b"5ms", b"0x10"):
                m.expect(b"get w/t=" + t, "CLIENT_ERROR bad timeout")
            m.expect(b"get w/t=-2147483648", "END")      # negative: no wait
            m.expect(b"get w/t=" + b"0" * 1500 + b"1", "END")   # 1 ms
            for args in (b"4294967296", b"1 4294967296", b"99999999999999999999", b"-1",
                         b"1 -1"):
                m.expect(b"monitor w " + args, "CLIENT_ERROR bad command line format")
            m.sync()
            eq(bs_waiting(obs, "w"), n, "waiters after the refused timeouts")
            # One set wakes exactly one waiter: the first in line.
            m.store("w", b"first")
            eq(readable(socks, 5.0)[:1], [first], "the first waiter answered")
            eq(read_lines(first, 3), [b"VALUE w/t=%s 0 5" % BIG_T, b"first", b"END"],
               "the first waiter's reply")
            got = readable(socks[1:], 1.0)
            eq(got, [], "other waiters woken by one set")
            wait_for(lambda: bs_waiting(obs, "w") == n - 1, "n-1 waiters", timeout=LIVE)
            # And a second set, exactly one more (whoever is next).
            m.store("w", b"second")
            got = readable(socks[1:], 10.0)
            eq(len(got), 1, "waiters woken by the second set")
            k = got[0]
            time.sleep(0.3)
            eq(readable([x for x in socks[1:] if x is not k], 0.5), [],
               "other waiters after the second set")
            kind = kind_of[k]
            if kind == 0:
                want = [b"VALUE w/t=%s 0 6" % BIG_T, b"second", b"END"]
            elif kind == 1:
                want = [b"VALUE w/open/t=%s 0 6" % BIG_T, b"second", b"END"]
            else:
                want = [b"VALUE w 0 6", b"second", b"END", b"END"]
            eq(read_lines(k, len(want)), want, "the second waiter's reply (kind %d)" % kind)
            wait_for(lambda: bs_waiting(obs, "w") == n - 2, "n-2 waiters", timeout=LIVE)
            # The others go first: a job given back while waiters remain
            # would be handed to one of them (and a plain get whose client
            # is going takes it: at most once, as in kestrel).
            for x in socks:
                if x is not k:
                    close_rst(x)
            wait_for(lambda: mc_stat(s, "curr_connections") == 4, "waiters closed "
                     "(k, obs, m and the stats client left)", timeout=LIVE)
            eq(bs_waiting(obs, "w"), 0, "waiters left")
        finally:
            for k in socks:
                close_rst(k)
        # Gone, all of them: no waiter, no connection left behind, and a
        # job opened by the second waiter went back.
        wait_for(lambda: mc_stat(s, "curr_connections") == 3, "the last waiter closed "
                 "(obs, m and the stats client left)", timeout=LIVE)
        wait_for(lambda: obs.stats()["current-connections"] == "2",
                 "beanstalk current-connections: obs and m", timeout=LIVE)
        bst = obs.stats()
        eq(bst["current-waiting"], "0", "beanstalk current-waiting")
        kept = 0 if kind == 0 else 1
        eq(int(bst["current-jobs-ready"]), kept, "jobs ready after the waiters left "
           "(the second waiter's kind: %d)" % kind)
        eq(mc_stat(s, "queue_w_waiters", 0), 0, "queue_w_waiters")
        m.store("w", b"third")
        eq(m.get("w/peek"), b"second" if kept else b"third", "the next job of w")
        mc_responsive(s, what="after %d waiters left" % n)
        if os.environ.get("HOSTILE_VERBOSE"):
            print("%d waiters, %d KiB" % (n, grown))


# ----------------------------------------- huge arguments, long keys, lines

BAD_FORMAT = b"CLIENT_ERROR bad command line format"
BAD_NAME = b"CLIENT_ERROR bad queue name"
TOO_LONG = b"CLIENT_ERROR line too long"
UNKNOWN = b"CLIENT_ERROR unknown command"


@no_server
def test_mc_huge_arguments_and_long_keys(binary):
    """Every malformed or enormous argument gets its error, with the
    connection kept or closed as doc/kestrel.md says, and the stream in
    step; nothing is stored by a refused set."""
    with McServer(binary) as s:
        cases = [
            # over-long keys and names (lines still under 2048 bytes)
            (b"get " + b"k" * 201 + b"\r\n", [BAD_NAME], False),
            (b"get " + b"k" * 2042 + b"\r\n", [BAD_NAME], False),       # 2048 in all
            (b"set " + b"k" * 2000 + b" 0 0 1\r\nx\r\n", [BAD_NAME], False),
            (b"delete " + b"d" * 201 + b"\r\n", [BAD_NAME], False),
            (b"flush " + b"f" * 1900 + b"\r\n", [BAD_NAME], False),
            (b"monitor " + b"m" * 1900 + b" 1\r\n", [BAD_NAME], False),
            (b"confirm " + b"c" * 1900 + b" 1\r\n", [BAD_NAME], False),
            (b"get q/" + b"open/" * 400 + b"\r\n", [b"END"], False),     # repeated options
            (b"get q/" + b"x" * 2030 + b"\r\n", [b"END"], False),        # unknown option
            (b"get q/t=" + b"9" * 2030 + b"\r\n", [b"CLIENT_ERROR bad timeout"], False),
            (b"get q" + b" extra" * 330 + b"\r\n", [b"END"], False),     # extra keys
            (b"get /" + b"o" * 2000 + b"\r\n", [b"CLIENT_ERROR empty queue name"], True),
            # over-long lines
            (b"get " + b"k" * 2043 + b"\r\n", [TOO_LONG], True),         # 2049 bytes
            (b"a" * (1 << 20), [TOO_LONG], True),                        # 1 MiB, no LF
            (b" " * 2047 + b"\n", [UNKNOWN], True),                      # empty line
            (b"\0" * 2047 + b"\n", [UNKNOWN], True),
            (b"version" + b"\0" * 2000 + b"\r\n", [UNKNOWN], True),
            # huge numbers in set: flags and exptime (body read, kept)
            (b"set q 4294967296 0 1\r\nx\r\n", [BAD_FORMAT], False),
            (b"set q 99999999999999999999999 0 1\r\nx\r\n", [BAD_FORMAT], False),
            (b"set q 0 99999999999999999999999 1\r\nx\r\n", [BAD_FORMAT], False),
            (b"set q 0 -99999999999999999999 1\r\nx\r\n", [BAD_FORMAT], False),
            (b"set q 0 2147483648 1\r\nx\r\n", [BAD_FORMAT], False),
            (b"set q " + b"9" * 1900 + b" 0 1\r\nx\r\n", [BAD_FORMAT], False),
            # bad, negative and overflowing <bytes>: closed
            (b"set q 0 0 2147483648\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 4294967295\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 4294967296\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 18446744073709551616\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 " + b"9" * 1900 + b"\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 -1\r\nx\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 -2147483648\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 -0\r\n\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 +1\r\nx\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 1e3\r\n", [BAD_FORMAT], True),
            (b"set q 0 0 0x10\r\n", [BAD_FORMAT], True),
            (b"add q 0 0 -1\r\n", [UNKNOWN], True),
            (b"cas q 0 0 99999999999999999999 1\r\n", [UNKNOWN], True),
            # storage commands kestrel lacks: body read, then refused
            (b"append q 0 0 5\r\nget q\r\n", [UNKNOWN], True),
            # monitor and confirm with huge counts
            (b"monitor q 4294967296\r\n", [BAD_FORMAT], False),
            (b"monitor q 1 4294967296\r\n", [BAD_FORMAT], False),
            (b"monitor q 99999999999999999999\r\n", [BAD_FORMAT], False),
            (b"confirm q 4294967296\r\n", [BAD_FORMAT], False),
            (b"confirm q 4294967295\r\n", [b"ERROR"], False),          # nothing open
            (b"monitor q 0\r\n", [b"END"], False),
            (b"monitor q 4294967295 0\r\n", [b"END"], False),
        ]
        for data, expected, closed in cases:
            mc_case(s, data, expected, closed)
        m = s.mc(timeout=15)
        eq(m.stats()["curr_items"], "0", "no refused set stored anything")
        # A leading-zero run is a number like any other (as in memcached).
        m.expect(b"set q 0 0 " + b"0" * 1900 + b"3\r\nabc", "STORED")
        eq(m.get("q"), b"abc", "the item")
        # monitor with the largest counts: one job opened, the stream ends.
        m.store("q", b"mon")
        m.send(b"monitor q 4294967295 4294967295\r\n")
        eq(m.read_value("q"), b"mon", "monitor")
        eq(m.read_line(), b"END", "monitor's final END")
        m.expect(b"monitor q 4294967295", "END")       # already holds one
        m.expect(b"confirm q 4294967295", "END")       # deletes it
        m.expect(b"get q", "END")
        # A monitor that would wait 136 years on an empty queue: the server
        # goes on serving everyone, and a close ends it.
        w = s.mc(timeout=15)
        w.send(b"monitor q 4294967295\r\n")
        w.expect_silence(0.3)
        mc_responsive(s, what="with a 136-year monitor")
        close_rst(w.sock)
        # dump_stats with hundreds of names: one (empty) block each.
        names = [b"n%03d" % i for i in range(400)]
        lines = m.lines_until_end(b"dump_stats " + b" ".join(names))
        eq(len(lines), 3 * len(names), "dump_stats lines for %d unknown names" % len(names))
        eq(lines[:3], [b"queue 'n000' {", b"  ", b"}"], "an unknown name's block")
        wait_for(lambda: mc_stat(s, "curr_connections") == 2, "the monitor closed",
                 timeout=LIVE)
        mc_responsive(s, what="after the huge arguments")


# ------------------------------------------------------------------ garbage

@no_server
def test_mc_garbage_and_random_bytes(binary):
    rnd = random.Random(4321)
    words = [b"set", b"get", b"gets", b"delete", b"flush", b"flush_all", b"monitor",
             b"confirm", b"dump_stats", b"stats", b"version", b"add", b"cas", b"status",
             b"flush_expired", b"quit"]
    with McServer(binary) as s:
        base = rss_kib(s.srv)
        socks = []
        try:
            for i in range(60):
                k = mc_connect(s)
                n = rnd.choice([1, 7, 100, 2047, 2048, 2049, 5000, 20000, 100000])
                kind = i % 5
                if kind == 0:      # random bytes
                    data = bytes(rnd.getrandbits(8) for _ in range(min(n, 5000))) * (n // 5000 + 1)
                elif kind == 1:    # line ends, spaces and NULs everywhere
                    data = bytes(rnd.choice(b"\r\n\x00 /a") for _ in range(n))
                elif kind == 2:    # commands with garbage arguments
                    data = b"".join(rnd.choice(words) + b" " +
                                    bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 16)))
                                    + b"\r\n" for _ in range(n // 10 + 1))
                elif kind == 3:    # commands with random numbers of all sizes
                    data = b"".join(b"%s g%d %d %d %d\r\n" % (
                        rnd.choice([b"set", b"monitor", b"confirm", b"get"]), rnd.randint(0, 3),
                        rnd.choice([0, -1, 2 ** 31, 2 ** 32, 2 ** 64, 10 ** 30]),
                        rnd.choice([0, -1, 2 ** 31, 2 ** 32, 10 ** 30]),
                        rnd.choice([0, 1, 5, -5, 2 ** 31 - 1, 2 ** 31, 2 ** 63]))
                                    for _ in range(n // 20 + 1))
                else:              # a line far longer than any command
                    data = b"g" * n
                send_nonblocking(k, data[:n], 0.5)
                socks.append(k)
            mc_responsive(s, what="after memcache garbage")
            grown = rss_kib(s.srv) - base
            check(grown < 60 * 600 * mem_factor(s.srv),
                  "server grew %d KiB for 60 garbage connections" % grown)
        finally:
            for k in socks:
                close_rst(k)
        wait_for(lambda: mc_stat(s, "curr_connections") == 1, "garbage connections gone",
                 timeout=LIVE)
        check(s.srv.alive(), "server died")
        m = s.mc()
        m.expect("flush_all", "Flushed all queues.")
        m.store("after", b"fine")
        eq(m.get("after"), b"fine", "set and get after the garbage")


# ------------------------------------------------ dropped and half-closed

@no_server
def test_mc_connections_dropped_mid_set_and_mid_reply(binary):
    with McServer(binary) as s:
        p = s.mc(timeout=15)
        for i in range(100):
            k = mc_connect(s)
            k.sendall(b"set cut 0 0 5000\r\n" + b"q" * (i * 51))
            (close_rst if i % 2 else socket.socket.close)(k)
        wait_for(lambda: p.stats()["curr_connections"] == "1", "dropped setters closed",
                 timeout=LIVE)
        st = p.stats()
        eq((st["curr_items"], st["total_items"]), ("0", "0"), "no item from a set cut short")
        big = b"r" * 65000
        p.store("big", big)
        for i in range(60):
            k = nonreader(s)
            k.sendall(b"get big/peek\r\n" * 30)
            if i % 3 == 0:
                k.recv(1000)
            (close_rst if i % 2 else socket.socket.close)(k)
        # Dropped while holding an open job, and while waiting: the job
        # comes back, nothing is taken.
        w = s.mc()
        eq(w.get("big/open"), big, "opened")
        close_rst(w.sock)
        waiter = mc_connect(s)
        waiter.sendall(b"get empty/t=60000\r\n")
        wait_for(lambda: p.stats().get("queue_empty_waiters") == "1", "the waiter", timeout=LIVE)
        close_rst(waiter)
        wait_for(lambda: p.stats()["curr_connections"] == "1", "all dropped", timeout=LIVE)
        st = p.stats()
        eq((st["curr_items"], st["queue_big_open_transactions"]), ("1", "0"),
           "the open job went back")
        check("queue_empty_waiters" not in st, "the waiter's tube is gone")
        p.store("empty", b"e")
        eq(p.get("empty"), b"e", "the dropped waiter took nothing")
        eq(p.get("big"), big, "the job intact")
        mc_responsive(s)


@no_server
def test_mc_half_closed_sockets(binary):
    with McServer(binary) as s:
        # Every reply to commands sent before the half-close, then EOF.
        m = s.mc()
        m.send(b"set h 0 0 3\r\nabc\r\nget h/peek\r\nversion\r\nget h/open\r\n")
        m.shutdown_write()
        eq(m.read_line(), b"STORED", "set before the half-close")
        eq(m.read_value("h/peek"), b"abc", "peek")
        check(m.read_line().startswith(b"VERSION "), "version")
        eq(m.read_value("h/open"), b"abc", "open")
        m.expect_closed()
        # Half-closed mid-line, mid-body: no reply, nothing stored.
        for data in (b"get h", b"set h 0 0 10\r\nabc", b"set h 0 0 3\r\nabc\r"):
            m = s.mc()
            m.send(data)
            m.shutdown_write()
            m.expect_closed()
        # Half-closed while a get waits: END, then the close.
        m = s.mc()
        m.send(b"get nothing/t=60000\r\n")
        m.expect_silence(0.2)
        m.shutdown_write()
        eq(m.read_line(), b"END", "a waiting get after the half-close")
        m.expect_closed()
        # Many at once.
        socks = []
        for _ in range(200):
            k = mc_connect(s)
            k.sendall(b"version\r\nget none\r\n")
            k.shutdown(socket.SHUT_WR)
            socks.append(k)
        for k in socks:
            data = read_until_closed(k)
            check(data.startswith(b"VERSION ") and data.endswith(b"\r\nEND\r\n")
                  and data.count(b"\r\n") == 2, "replies before the close: %r" % data)
            k.close()
        p = s.mc()
        wait_for(lambda: p.stats()["curr_connections"] == "1", "half-closed gone", timeout=LIVE)
        st = p.stats()
        eq((st["curr_items"], st["queue_h_items"]), ("1", "1"),
           "only the complete set made an item (its open job went back)")
        eq(p.get("h"), b"abc", "the item")


# ------------------------------------ a held job outliving its tube's users

@no_server
def test_held_last_job_expires_when_it_comes_back(binary):
    """Regression: a client holds the only job of a tube with max_age and
    move_expired_to past its expiry, while nothing else uses the tube, and
    gives it back (memcache: a disconnect; beanstalk: release, bury, or a
    disconnect after it stopped watching the tube). The job expires as it
    comes back and moves to the dead-letter tube, which leaves the tube
    without jobs or users; the server freed it and then counted the expiry
    in it (heap-use-after-free in expire_now, a crash under ASan; found by
    a random multi-connection stress of the memcache port)."""
    conf = "[tube ex*]\nmax_age = 300ms\nmove_expired_to = dead\n"
    ways = ["mc-close", "mc-rst", "release", "bury", "quit"]
    with McServer(binary, conf=conf) as s:
        obs = s.bs()
        held = []
        for i, how in enumerate(ways):     # one tube each: its only job
            tube, body = "ex%d" % i, b"held-%d" % i
            p = s.bs()
            p.use(tube)
            jid = p.put(body)
            p.close()
            s.srv.clients.remove(p)
            if how.startswith("mc"):
                w = s.mc()
                eq(w.get(tube + "/open"), body, "opened")
            else:
                w = s.bs()
                w.watch(tube)
                w.ignore("default")
                eq(w.reserve(0), (jid, body), "reserved")
                w.watch("default")
                w.ignore(tube)      # nothing keeps the tube but the job
            held.append((how, tube, jid, body, w))
        t_end = time.monotonic() + 0.6     # past max_age while held
        while time.monotonic() < t_end:
            time.sleep(0.05)
        for n, (how, tube, jid, body, w) in enumerate(held, 1):
            if how == "release":
                w.expect("release %d 0 0" % jid, "RELEASED")
            elif how == "bury":
                w.expect("bury %d 0" % jid, "BURIED")
            elif how == "mc-rst":
                close_rst(w.sock)
            else:
                w.close()
            wait_for(lambda: (bs_stats_tube(obs, "dead") or {}).get("current-jobs-ready")
                     == str(n), "job %d (%s) in the dead-letter tube" % (jid, how),
                     timeout=LIVE)
            eq(bs_stats_tube(obs, tube), None, "the emptied tube is gone (%s)" % how)
            check(s.srv.alive(), "server died (%s)" % how)
        m = s.mc()
        eq(sorted(m.get("dead") for _ in ways), sorted(h[3] for h in held),
           "the dead-lettered jobs")
        mc_responsive(s, what="after held jobs expired as they came back")
