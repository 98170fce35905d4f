"""The kestrel listener (spec kestrel.md) under the checks a bug hunt ran:
every command split at every byte boundary, waiting gets woken by every
path that makes a job ready, reliable reads that must lose and duplicate
nothing, transactions across kill -9, fanout children after a delete,
the expiry of fanout copies, bodies around -z, the longest names and keys, and two real client
libraries on the same scenarios.

Each test starts its own tubed (mc_clients/mcproto.py) and stops it by pid.
No timing thresholds: waits have generous ceilings and results are checked
by content only.
"""

import os
import random
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

from harness import DEADLINE, check, eq, fail, no_server, wait_for  # noqa: E402
from mcproto import McServer  # noqa: E402


def _run_raw(s, parts):
    """Send parts as separate writes on a fresh memcache connection, half-
    close it, and return everything the server sends until it closes.
    A server that closed after an error resets what is sent after that:
    the writes stop there, and what was sent before the reset is read."""
    c = socket.create_connection(("127.0.0.1", s.mport), timeout=DEADLINE)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = b""
    try:
        try:
            for i, p in enumerate(parts):
                if i:
                    time.sleep(0.002)   # so that the server reads the parts apart
                c.sendall(p)
            c.shutdown(socket.SHUT_WR)
        except OSError:     # EPIPE, ECONNRESET, or ENOTCONN at the shutdown
            pass
        while True:
            d = c.recv(65536)
            if not d:
                return out
            out += d
    except ConnectionResetError:
        return out
    finally:
        c.close()


# A pipeline that leaves no job behind, so that every run starts alike:
# sets (one with a body that holds "\r\n", one empty, one noreply), every
# get option, admin commands, then a close.
_PIPELINE = (b"set q 0 0 5\r\na\r\nbc\r\nget q/open\r\nset q 7 0 0 noreply\r\n\r\n"
             b"get q/close/open/t=10\r\nget q/peek\r\nget q/abort\r\nGETS q/t=0 x y\r\n"
             b"get q/t=0\r\ndelete q noreply\r\nflush_all\r\nflush q\r\n"
             b"flush_expired q\r\nversion\r\nstatus\r\nget q/t=abc\r\nget /open\r\n"
             b"version\r\n")

def _version():
    """The version the build gives the server (the Makefile's VERSION)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "Makefile")) as f:
        for line in f:
            if line.startswith("VERSION"):
                return line.split(":=", 1)[1].strip().encode()
    fail("no VERSION in the Makefile")


_PIPELINE_REPLY = (b"STORED\r\nVALUE q/open 0 5\r\na\r\nbc\r\nEND\r\n"
                   b"VALUE q/close/open/t=10 0 0\r\n\r\nEND\r\nEND\r\nEND\r\n"
                   b"VALUE q/t=0 0 0\r\n\r\nEND\r\nEND\r\nFlushed all queues.\r\nEND\r\n"
                   b"0\r\nVERSION " + _version() + b"\r\nUP\r\nCLIENT_ERROR bad timeout\r\n"
                   b"CLIENT_ERROR empty queue name\r\n")

# Commands whose error closes the connection, each followed by one the
# server must never run.
_CLOSING = ((b"set q 0 0 3\r\nabcXYversion\r\n", b"CLIENT_ERROR bad data chunk\r\n"),
            (b"set q 0 0 x\r\nversion\r\n", b"CLIENT_ERROR bad command line format\r\n"),
            (b"get q/peek/open\r\nversion\r\n", b"CLIENT_ERROR conflicting options\r\n"),
            (b"add q 0 0 2\r\nab\r\nversion\r\n", b"CLIENT_ERROR unknown command\r\n"),
            (b"status now\r\nversion\r\n",
             b"CLIENT_ERROR status is changed by signal only\r\n"),
            (b"quit\r\nversion\r\n", b""))


@no_server
def test_hunt_pipeline_split_at_every_byte(binary):
    """One pipeline in one write, then split in two at every byte, then
    one byte per write: the same replies, byte for byte, every time; the
    commands that close the connection close it at every split too."""
    with McServer(binary) as s:
        eq(_run_raw(s, [_PIPELINE]), _PIPELINE_REPLY, "the pipeline in one write")
        for i in range(1, len(_PIPELINE)):
            got = _run_raw(s, [_PIPELINE[:i], _PIPELINE[i:]])
            if got != _PIPELINE_REPLY:
                fail("split after byte %d (%r|%r): got %r" % (
                    i, _PIPELINE[max(0, i - 8):i], _PIPELINE[i:i + 8], got))
        eq(_run_raw(s, [bytes([x]) for x in _PIPELINE]), _PIPELINE_REPLY, "byte by byte")
        for data, reply in _CLOSING:
            eq(_run_raw(s, [data]), reply, "%r: this reply, then closed" % data)
            for i in range(1, len(data)):
                eq(_run_raw(s, [data[:i], data[i:]]), reply, "%r split after byte %d" % (data, i))
        m = s.mc()
        eq(m.stats()["curr_items"], "0", "nothing left behind by the pipelines")


@no_server
def test_hunt_waiting_get_woken_by_every_path(binary):
    """A get waiting with t= is served whatever makes a job ready: a TTR
    running out, a beanstalk connection closing with a reservation, a
    memcache connection closing with an open job, /abort, kick, kick-job,
    release with a delay, an expired job moved to its tube, a fanout copy."""
    conf = "[tube f]\nfanout = true\n[tube age]\nmax_age = 300ms\nmove_expired_to = dead\n"
    with McServer(binary, conf=conf) as s:
        m = s.mc()

        def woken(tube, make_ready, want):
            w = s.mc()
            w.send(b"get %s/t=20000\r\n" % tube.encode())
            w.expect_silence(0.1)
            make_ready()
            eq(w.read_value(tube + "/t=20000", timeout=25), want, "waiting get on %s" % tube)
            w.close()

        b = s.bs()
        b.use("ttr")
        b.put(b"ttr", ttr=1)
        b.watch("ttr")
        b.reserve(timeout=5)
        woken("ttr", lambda: None, b"ttr")          # its TTR of 1 s runs out

        b = s.bs()
        b.use("bsclose")
        b.put(b"bsclose")
        b.watch("bsclose")
        b.reserve(timeout=5)
        woken("bsclose", b.close, b"bsclose")

        h = s.mc()
        h.store("mcclose", b"mcclose")
        eq(h.get("mcclose/open"), b"mcclose", "open")
        woken("mcclose", h.close, b"mcclose")

        h = s.mc()
        h.store("abort", b"abort")
        eq(h.get("abort/open"), b"abort", "open")
        woken("abort", lambda: h.expect("get abort/abort", "END"), b"abort")

        b = s.bs()
        b.use("kick")
        b.put(b"kick")
        b.watch("kick")
        jid, _ = b.reserve(timeout=5)
        b.expect("bury %d 0" % jid, "BURIED")
        woken("kick", lambda: b.expect("kick 1", "KICKED 1"), b"kick")

        b.expect("use kj", "USING kj")
        jid = b.put(b"kickjob", delay=3600)
        woken("kj", lambda: b.expect("kick-job %d" % jid, "KICKED"), b"kickjob")

        b.use("rel")
        b.put(b"rel")
        b.watch("rel")
        jid, _ = b.reserve(timeout=5)
        woken("rel", lambda: b.expect("release %d 0 1" % jid, "RELEASED"), b"rel")

        woken("dead", lambda: m.store("age", b"aged"), b"aged")

        parent = s.mc()
        parent.send(b"get f/t=20000\r\n")
        parent.expect_silence(0.1)
        woken("f+child", lambda: m.store("f", b"fan"), b"fan")
        eq(parent.read_value("f/t=20000", timeout=25), b"fan", "the parent's own waiter")


@no_server
def test_hunt_several_ready_at_once_go_in_line(binary):
    """Jobs that become ready together (a kick, pipelined sets, a closing
    connection's reservations) go one each to the waiters, first come first
    served, in the order the jobs became ready."""
    with McServer(binary) as s:
        b = s.bs()
        b.use("q")
        for i in range(3):
            b.put(b"k%d" % i)
        b.watch("q")
        b.ignore("default")
        for i in range(3):
            jid, _ = b.reserve(timeout=5)
            b.expect("bury %d 0" % jid, "BURIED")
        w1 = s.mc()
        w1.send(b"get q/t=20000/open\r\n")
        w1.expect_silence(0.1)
        bw = s.bs()
        bw.watch("q")
        bw.ignore("default")
        bw.send(b"reserve-with-timeout 20\r\n")
        bw.expect_silence(0.1)
        w2 = s.mc()
        w2.send(b"get q/t=20000\r\n")
        w2.expect_silence(0.1)
        b.expect("kick 3", "KICKED 3")
        eq(w1.read_value("q/t=20000/open"), b"k0", "first waiter")
        line, body = bw.read_reply()
        eq(body, b"k1", "second waiter (beanstalk): %r" % line)
        eq(w2.read_value("q/t=20000"), b"k2", "third waiter")

        ws = []
        for _ in range(3):
            w = s.mc()
            w.send(b"get r/t=20000\r\n")
            w.expect_silence(0.1)
            ws.append(w)
        s.mc().send(b"set r 0 0 2\r\nr0\r\nset r 0 0 2\r\nr1\r\nset r 0 0 2 noreply\r\nr2\r\n")
        eq([w.read_value("r/t=20000") for w in ws], [b"r0", b"r1", b"r2"], "pipelined sets")

        bb = s.bs()
        bb.use("z")
        for i in range(3):
            bb.put(b"z%d" % i)
        bb.watch("z")
        for i in range(3):
            bb.reserve(timeout=5)
        ws = []
        for _ in range(3):
            w = s.mc()
            w.send(b"get z/t=20000\r\n")
            w.expect_silence(0.1)
            ws.append(w)
        bb.close()
        eq([w.read_value("z/t=20000") for w in ws], [b"z0", b"z1", b"z2"],
           "a closing connection's reservations")


def _mixed_waiters(s, order, tube):
    """Waiters of kinds order ('m': memcache get, 'b': beanstalk reserve)
    start in that order; as many jobs are set one by one; each waiter must
    get the job of its rank."""
    ws = []
    for kind in order:
        if kind == "b":
            c = s.bs()
            c.watch(tube)
            c.ignore("default")
            c.send(b"reserve-with-timeout 20\r\n")
        else:
            c = s.mc()
            c.send(b"get %s/t=20000\r\n" % tube.encode())
        c.expect_silence(0.05)
        ws.append((kind, c))
    p = s.mc()
    for i in range(len(ws)):
        p.store(tube, b"j%d" % i)
    got = []
    for kind, c in ws:
        if kind == "b":
            got.append(c.read_reply()[1])
        else:
            got.append(c.read_value())
        c.close()
    eq(got, [b"j%d" % i for i in range(len(ws))], "jobs per waiter, order %s" % "".join(order))


@no_server
def test_hunt_mixed_waiters_first_come_first_served(binary):
    with McServer(binary) as s:
        _mixed_waiters(s, "bbbbmbmb", "q1")
        _mixed_waiters(s, "mbbmbb", "q2")
        _mixed_waiters(s, "bmbbbmmb", "q3")
        # A beanstalk reserve watching two tubes keeps its place in q's line.
        bx = s.bs()
        bx.watch("q")
        bx.watch("other")
        bx.send(b"reserve-with-timeout 20\r\n")
        bx.expect_silence(0.05)
        m = s.mc()
        m.send(b"get q/t=20000\r\n")
        m.expect_silence(0.05)
        p = s.mc()
        p.store("q", b"first")
        eq(bx.read_reply()[1], b"first", "the two-tube reserve came first")
        p.store("q", b"second")
        eq(m.read_value("q/t=20000"), b"second", "then the get")


def _consumer(s, seed, consumed, lock, errors):
    """Random reliable and unreliable reads on q until it stays empty:
    every job it finishes (plain get, /close, beanstalk delete) is counted
    in consumed; every other path must give the job back."""
    rnd = random.Random(seed)
    m = s.mc()
    idle = 0
    try:
        while idle < 3:
            op = rnd.random()
            if op < 0.3:
                v = m.get("q/t=%d" % rnd.choice([0, 50]))
                if v is None:
                    idle += 1
                    continue
                idle = 0
                with lock:
                    consumed.append(v)
            elif op < 0.6:
                v = m.get("q/open/t=50")
                if v is None:
                    idle += 1
                    continue
                idle = 0
                r = rnd.random()
                if r < 0.4:
                    m.expect("get q/close", "END")
                    with lock:
                        consumed.append(v)
                elif r < 0.6:
                    m.expect("get q/abort", "END")
                elif r < 0.8:
                    m.close()         # the open job goes back
                    m = s.mc()
                else:
                    m.send(b"get q/close/open\r\n")
                    with lock:
                        consumed.append(v)
                    if m.read_value() is not None:
                        m.expect("get q/abort", "END")
            elif op < 0.7:
                m.get("q/peek")
            elif op < 0.8:
                # gone while waiting: an open get gives back what it got
                c = s.mc()
                c.send(b"get q/open/t=5000\r\n" if rnd.random() < 0.5 else b"get none/t=5000\r\n")
                c.close()
            else:
                b = s.bs()
                b.watch("q")
                b.ignore("default")
                b.send(b"reserve-with-timeout 0\r\n")
                line, body = b.read_reply()
                if line.startswith(b"RESERVED"):
                    jid = int(line.split()[1])
                    x = rnd.random()
                    if x < 0.5:
                        b.expect("delete %d" % jid, "DELETED")
                        with lock:
                            consumed.append(body)
                    elif x < 0.75:
                        b.expect("release %d %d 0" % (jid, rnd.choice([0, 1024, 2000])),
                                 "RELEASED")
                b.close()
    except Exception as e:  # reported by the test, not lost in the thread
        errors.append("consumer %d: %r" % (seed, e))


@no_server
def test_hunt_reliable_reads_lose_and_duplicate_nothing(binary):
    """Producers (some noreply, bodies with "\\r\\n") and consumers that
    get, open and close, abort, disconnect with a job open or while
    waiting, peek, or take jobs over beanstalk: every job is finished
    exactly once, and nothing is left after a kill -9 and restart."""
    n_per = 150
    with McServer(binary, "-f", "0", bdir=True) as s:
        consumed, errors, lock = [], [], threading.Lock()
        expected = set()

        def producer(k):
            rnd = random.Random(1000 + k)
            m = s.mc()
            try:
                for i in range(n_per):
                    body = b"p%d-%d-" % (k, i) + (b"\r\n" if i % 3 == 0 else b"") + \
                        b"z" * rnd.randint(0, 200)
                    if rnd.random() < 0.3:
                        m.send(b"set q 0 0 %d noreply\r\n%s\r\n" % (len(body), body))
                    else:
                        eq(m.set("q", body), b"STORED", "set")
                m.sync()
            except Exception as e:
                errors.append("producer %d: %r" % (k, e))

        for k in range(3):
            rnd = random.Random(1000 + k)
            for i in range(n_per):
                body = b"p%d-%d-" % (k, i) + (b"\r\n" if i % 3 == 0 else b"") + \
                    b"z" * rnd.randint(0, 200)
                rnd.random()
                expected.add(body)
        threads = [threading.Thread(target=producer, args=(k,)) for k in range(3)]
        threads += [threading.Thread(target=_consumer, args=(s, 7 + k, consumed, lock, errors))
                    for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            check(not t.is_alive(), "a client thread did not finish")
        eq(errors, [], "client errors")
        m = s.mc()
        while True:
            # A client's close is seen a moment later: wait for its job.
            v = m.get("q/t=300")
            if v is None:
                break
            consumed.append(v)
        eq(len(consumed), len(set(consumed)), "no job finished twice")
        eq(set(consumed), expected, "every job finished")
        eq(m.stats()["curr_items"], "0", "curr_items")
        s.kill9()
        s.restart()
        m = s.mc()
        eq(m.get("q"), None, "nothing comes back after kill -9")


@no_server
def test_hunt_transactions_survive_kill9(binary):
    """-f 0, kill -9: /close and /close/open deleted, /abort and a client
    that held a job at the kill have it back at its place, monitor plus
    confirm deleted, fanout copies kept, a deleted child's subscription
    ended."""
    conf = "[tube f]\nfanout = true\n"
    with McServer(binary, "-f", "0", bdir=True, conf=conf) as s:
        m = s.mc()
        for v in (b"a1", b"a2", b"a3", b"a4", b"a5"):
            m.store("q", v)
        eq(m.get("q/open"), b"a1", "open")
        eq(m.get("q/close/open"), b"a2", "close a1, open a2")
        eq(m.get("q/close"), None, "close a2")
        eq(m.get("q/open"), b"a3", "open a3")
        eq(m.get("q/abort"), None, "abort a3")
        m.store("r", b"r1")
        m.store("r", b"r2")
        m.send(b"monitor r 1\r\n")
        eq(m.read_value("r"), b"r1", "monitor opens r1")
        eq(m.read_line(), b"END", "the stream ends: r1 is open")
        m.expect("confirm r 1", "END")
        m.expect("get f+c1", "END")
        m.expect("get f+c2", "END")
        m.store("f", b"fan1")
        eq(m.get("f+c1"), b"fan1", "f+c1's copy")
        m.expect("delete f+c2", "DELETED")
        m.store("f", b"fan2")
        m2 = s.mc()
        eq(m2.get("q/open"), b"a3", "held at the kill")
        s.kill9()
        s.restart()
        m = s.mc()
        eq([m.get("q") for _ in range(4)], [b"a3", b"a4", b"a5", None], "q")
        eq([m.get("r") for _ in range(2)], [b"r2", None], "r")
        eq([m.get("f") for _ in range(3)], [b"fan1", b"fan2", None], "the parent keeps its own")
        eq([m.get("f+c1") for _ in range(2)], [b"fan2", None], "f+c1")
        eq(m.get("f+c2"), None, "f+c2 got nothing after its delete")


@no_server
def test_hunt_fanout_child_deleted_then_used_again(binary):
    """delete ends a child's subscription; using the name again (here: a
    get) subscribes it again, as a new kestrel queue; a job of the child
    held open across the delete stays open and is closed normally."""
    with McServer(binary, conf="[tube f]\nfanout = true\n") as s:
        m, h = s.mc(), s.mc()
        m.expect("get f+c", "END")
        m.store("f", b"1")
        eq(m.get("f+c"), b"1", "subscribed by its first get")
        m.expect("delete f+c", "DELETED")
        m.store("f", b"2")
        eq(m.get("f+c"), None, "no copy after the delete (this get subscribes again)")
        m.store("f", b"3")
        eq(m.get("f+c"), b"3", "subscribed again")
        m.store("f", b"4")
        eq(h.get("f+c/open"), b"4", "held open")
        m.expect("delete f+c", "DELETED")
        m.store("f", b"5")
        eq(m.get("f+c"), None, "no copy after the second delete")
        m.store("f", b"6")
        eq(m.get("f+c"), b"6", "subscribed again while a job is held")
        h.expect("get f+c/close", "END")
        eq(m.get("f+c"), None, "the held job was closed")
        st = m.stats()
        eq(st.get("queue_f_children"), "f+c", "children")


@no_server
def test_hunt_expired_at_set_never_served(binary):
    """An item whose expiry has passed when its set completes is STORED but
    neither peeked, got nor opened, even by commands in the same write."""
    with McServer(binary) as s:
        for exp in (b"-1", b"1000000", b"-2147483648"):
            got = _run_raw(s, [b"set a 0 %s 1\r\nx\r\nget a/peek\r\nget a/open\r\nget a\r\n"
                               b"flush_expired a\r\n" % exp])
            eq(got, b"STORED\r\nEND\r\nEND\r\nEND\r\n0\r\n", "exptime %s" % exp.decode())
        b = s.bs()
        _run_raw(s, [b"set d 0 -1 1\r\nx\r\n"])
        b.use("d")
        b.expect("peek-ready", "NOT_FOUND")


@no_server
def test_hunt_bodies_around_the_size_limit(binary):
    """-z 3000000: a body of exactly -z bytes is stored and comes back
    byte for byte ("\\r\\n" and every byte value inside); one byte more,
    or a 20 MB body, is read to its end and answered NOT_STORED, and the
    connection goes on."""
    z = 3000000
    with McServer(binary, "-z", str(z)) as s:
        m = s.mc()
        unit = bytes(range(256)) + b"\r\nEND\r\n"
        for n in (z - 1, z):
            body = (unit * (n // len(unit) + 1))[:n]
            m.send(b"set big 0 0 %d\r\n" % n + body + b"\r\n")
            eq(m.read_line(timeout=60), b"STORED", "%d bytes" % n)
            eq(m.get("big", timeout=60), body, "%d bytes back" % n)
        m.send(b"set big 0 0 %d\r\n" % (z + 1) + b"y" * (z + 1) + b"\r\n")
        eq(m.read_line(timeout=60), b"NOT_STORED", "-z + 1")
        m.send(b"set big 0 0 20000000\r\n")
        chunk = b"w" * 1000000
        for _ in range(20):
            m.send(chunk)
        m.send(b"\r\n")
        eq(m.read_line(timeout=60), b"NOT_STORED", "20 MB")
        m.sync()
        m.expect("get big", "END")


@no_server
def test_hunt_longest_names_and_keys(binary):
    """A 200-byte queue name works; 201 bytes is a bad name (connection
    kept, the set's body read); a 250-byte key (memcache clients' limit)
    of a 200-byte name and options is echoed whole."""
    with McServer(binary) as s:
        m = s.mc()
        name = "n" * 200
        m.store(name, b"x")
        m.expect(b"set %s 0 0 1\r\nx" % (name + "n").encode(), "CLIENT_ERROR bad queue name")
        m.expect(b"get %s" % (name + "n").encode(), "CLIENT_ERROR bad queue name")
        key = name + "/t=1/open/" + "z" * (250 - len(name) - 10)
        eq(len(key), 250, "key length")
        eq(m.get(key), b"x", "opened through a 250-byte key")
        m.expect(b"get %s/close" % name.encode(), "END")
        m.expect(b"get %s" % name.encode(), "END")


_CLIENT_SCRIPT = r'''
import sys, threading, time
from pymemcache.client.base import Client
import memcache
port = int(sys.argv[1])
out = []
def expect(what, got, want):
    out.append("%s %s: got %r, want %r" % ("PASS" if got == want else "FAIL", what, got, want))

body = bytes(range(256)) + b"\r\nEND\r\n\r\n"
c = Client(("127.0.0.1", port), timeout=30)          # default noreply: True
expect("pymemcache noreply set", c.set("pq", body), True)
expect("pymemcache binary body back", c.get("pq"), body)
c2 = Client(("127.0.0.1", port), default_noreply=False, timeout=30)
expect("pymemcache set over -z", c2.set("pq", b"x" * 70000), False)
expect("pymemcache connection goes on", c2.set("pq", b"a"), True)
c2.set("pq", b"b")
expect("get_many: keys after the first ignored", c2.get_many(["pq", "other"]), {"pq": b"a"})
expect("get_many with options", c2.get_many(["pq/open", "pq/peek"]), {"pq/open": b"b"})
expect("close", c2.get("pq/close"), None)
expect("delete", c2.delete("pq", noreply=False), True)
c2.set("pq", b"held")
expect("open", c2.get("pq/open"), b"held")
c2.close()                                            # the open item goes back
expect("back after the client closed", c2.get("pq"), b"held")
res = {}
def waiter():
    w = Client(("127.0.0.1", port), default_noreply=False, timeout=30)
    res["v"] = w.get("wq/t=20000")
t = threading.Thread(target=waiter)
t.start()
deadline = time.monotonic() + 20
while time.monotonic() < deadline and c2.stats().get(b"queue_wq_waiters") != 1:
    time.sleep(0.02)
c2.set("wq", b"woken")
t.join(30)
expect("a waiting get woken by another client's set", res.get("v"), b"woken")

m = memcache.Client(["127.0.0.1:%d" % port], dead_retry=1, socket_timeout=30)
expect("python-memcache sets", [m.set("mq", b"x1"), m.set("mq", b"x2")], [True, True])
expect("open", m.get("mq/open"), b"x1")
expect("close/open", m.get("mq/close/open"), b"x2")
expect("abort", m.get("mq/abort"), None)
expect("peek", m.get("mq/peek"), b"x2")
expect("get_multi: keys after the first ignored", m.get_multi(["mq", "mq2"]), {"mq": b"x2"})
expect("empty", m.get("mq/t=50"), None)
expect("binary", [m.set("mq", body), m.get("mq")], [True, body])
expect("over -z", m.set("mq", b"y" * 70000), False)
expect("python-memcache goes on", [m.set("mq", b"z"), m.get("mq")], [True, b"z"])
print("\n".join(out))
'''


@no_server
def test_hunt_clients_pymemcache_and_python_memcache(binary):
    """Both Python client libraries through their normal API: noreply sets,
    binary bodies, sets over -z, multi-gets (extra keys ignored), a
    reliable read given back when the client closes, a waiting get woken
    by another client, the close/open chain, abort, peek."""
    py = "/usr/bin/python3"
    ok = os.access(py, os.X_OK) and subprocess.run(
        [py, "-c", "import pymemcache, memcache"], capture_output=True, timeout=60).returncode == 0
    check(ok, "/usr/bin/python3 with python3-pymemcache and python3-memcache is needed")
    with McServer(binary) as s:
        r = subprocess.run([py, "-c", _CLIENT_SCRIPT, str(s.mport)], capture_output=True,
                           timeout=120, stdin=subprocess.DEVNULL)
        out = r.stdout.decode("utf-8", "replace")
        lines = out.strip().splitlines()
        fails = [l for l in lines if not l.startswith("PASS")]
        check(r.returncode == 0 and lines and not fails,
              "client script: exit %d; %s; stderr: %s" % (
                  r.returncode, "; ".join(fails) or out[-300:],
                  r.stderr.decode("utf-8", "replace")[-600:]))
        check(len(lines) >= 20, "ran its checks: %d" % len(lines))


@no_server
def test_hunt_fanout_copies_keep_the_expiry(binary):
    """A fanout child's copy of an item keeps the exptime of its set, as in
    kestrel (the parent's add passes its expiry to every child): an item
    already expired at its set is served by neither the parent nor a child;
    one that expires later is gone from both once it expired, and after a
    kill -9 and restart too."""
    with McServer(binary, "-f", "0", bdir=True, conf="[tube f]\nfanout = true\n") as s:
        m = s.mc()
        m.expect("get f+c", "END")
        for exp in (-1, 1000000):
            m.store("f", b"gone%d" % exp, exptime=exp)
        m.store("f", b"soon", exptime=1)
        m.store("f", b"keep", exptime=3600)
        # The parent's first two expired at once (and, empty and unused, the
        # tube went with them: its counters start again); "soon" follows.
        wait_for(lambda: m.stats()["queue_f_items"] == "1", "the parent's expiry of soon")
        st = m.stats()
        eq((st["queue_f+c_expired_items"], st["queue_f+c_items"]), ("3", "1"),
           "the child's copies expired with them")
        eq([m.get("f+c"), m.get("f+c")], [b"keep", None], "the child serves only the live copy")
        eq([m.get("f"), m.get("f")], [b"keep", None], "the parent")
        m.store("f", b"later", exptime=2)
        m.store("f", b"kept")
        s.kill9()
        time.sleep(2.5)     # past the expiry of "later" while it is down
        s.restart()
        m = s.mc()
        eq([m.get("f+c"), m.get("f+c")], [b"kept", None], "after a restart past the expiry")
