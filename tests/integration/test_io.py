"""I/O: pipelining, tiny writes, binary and large bodies, bursts, slow readers."""

import random
import time

from harness import TestFailure, check, eq, fail, no_server, server_args, tubed_only


def test_pipelined_commands_one_write(srv):
    c = srv.client()
    data = b"".join([
        b"use pipe\r\n",
        b"put 1 0 10 3\r\none\r\n",
        b"put 2 0 10 3\r\ntwo\r\n",
        b"watch pipe\r\n",
        b"ignore default\r\n",
        b"list-tube-used\r\n",
        b"reserve\r\n",
        b"delete 1\r\n",
        b"reserve-with-timeout 0\r\n",
        b"release 2 5 0\r\n",
        b"peek-ready\r\n",
        b"bogus\r\n",
        b"stats-job 99\r\n",
        b"kick 1\r\n",
    ])
    c.send(data)
    eq(c.read_reply(), (b"USING pipe", None), "use")
    eq(c.read_reply(), (b"INSERTED 1", None), "put 1")
    eq(c.read_reply(), (b"INSERTED 2", None), "put 2")
    eq(c.read_reply(), (b"WATCHING 2", None), "watch")
    eq(c.read_reply(), (b"WATCHING 1", None), "ignore")
    eq(c.read_reply(), (b"USING pipe", None), "list-tube-used")
    eq(c.read_reply(), (b"RESERVED 1 3", b"one"), "reserve")
    eq(c.read_reply(), (b"DELETED", None), "delete")
    eq(c.read_reply(), (b"RESERVED 2 3", b"two"), "reserve-with-timeout")
    eq(c.read_reply(), (b"RELEASED", None), "release")
    eq(c.read_reply(), (b"FOUND 2 3", b"two"), "peek-ready")
    eq(c.read_reply(), (b"UNKNOWN_COMMAND", None), "bogus")
    eq(c.read_reply(), (b"NOT_FOUND", None), "stats-job")
    eq(c.read_reply(), (b"KICKED 0", None), "kick")
    c.expect_silence(0.1)


def test_pipelined_many_small_commands(srv):
    c = srv.client()
    n = 2000
    c.send(b"list-tube-used\r\n" * n)
    got = c.read_exact(len(b"USING default\r\n") * n, timeout=20)
    eq(got, b"USING default\r\n" * n, "2000 pipelined replies")


def test_one_byte_writes(srv):
    c = srv.client()
    c.send_slowly(b"use slow\r\n")
    eq(c.read_line(), b"USING slow", "use sent byte by byte")
    body = b"a\r\nb\x00c\r\n"
    c.send_slowly(b"put 7 0 10 %d\r\n%s\r\n" % (len(body), body))
    eq(c.read_line(), b"INSERTED 1", "put sent byte by byte")
    c.send_slowly(b"peek 1\r\n")
    eq(c.read_reply(), (b"FOUND 1 %d" % len(body), body), "peek")
    c.send_slowly(b"stats-job 1\r\n")
    line, data = c.read_reply()
    check(line.startswith(b"OK ") and b"\npri: 7\n" in data, "stats-job %r %r" % (line, data))


def test_writes_split_at_every_position(srv):
    c = srv.client()
    msg = b"put 3 0 10 5\r\nab\r\nc\r\n"
    for i in range(1, len(msg)):
        c.send(msg[:i])
        time.sleep(0.01)
        c.send(msg[i:])
        eq(c.read_line(), b"INSERTED %d" % i, "put split at byte %d" % i)
    for i in range(1, len(msg)):
        eq(c.cmd_body("peek %d" % i), (b"FOUND %d 5" % i, b"ab\r\nc"), "body %d" % i)


def test_binary_bodies(srv):
    c = srv.client()
    bodies = [bytes(range(256)), b"\r\n", b"\r\n\r\n", b"\x00", b"\x00" * 100,
              b"put 0 0 1 1\r\nx\r\n", b"\r", b"\n", b"\n\r", b"\xff" * 3,
              b"quit\r\n", b"a\r\nquit\r\nb"]
    ids = [c.put(b) for b in bodies]
    for j, b in zip(ids, bodies):
        eq(c.cmd_body("peek %d" % j), (b"FOUND %d %d" % (j, len(b)), b), "peek %d" % j)
    for j, b in zip(ids, bodies):
        eq(c.reserve(0), (j, b), "reserve %d" % j)
    c.expect("list-tube-used", "USING default")


def test_zero_length_bodies(srv):
    c = srv.client()
    c.send(b"put 0 0 10 0\r\n\r\n" * 3)
    c.expect_lines([b"INSERTED 1", b"INSERTED 2", b"INSERTED 3"])
    c.send(b"peek-ready\r\nreserve\r\npeek 3\r\n")
    eq(c.read_exact(len(b"FOUND 1 0\r\n\r\nRESERVED 1 0\r\n\r\nFOUND 3 0\r\n\r\n")),
       b"FOUND 1 0\r\n\r\nRESERVED 1 0\r\n\r\nFOUND 3 0\r\n\r\n", "empty bodies")


@server_args("-z", "65536")
def test_64k_body(srv):
    c = srv.client()
    rnd = random.Random(1)
    body = bytes(rnd.getrandbits(8) for _ in range(65536))
    body = body[:65534] + b"\r\n"   # ends with CRLF too
    eq(len(body), 65536, "length")
    j = c.put(body)
    eq(c.reserve(0), (j, body), "64 KiB body back intact")
    c.expect_raw(b"put 0 0 10 65537\r\n" + b"z" * 65537 + b"\r\n", [b"JOB_TOO_BIG"])
    eq(c.stats()["max-job-size"], "65536", "max-job-size")


def test_64k_body_sent_slowly_in_chunks(srv):
    c = srv.client()
    body = bytes(i % 251 for i in range(65535))
    data = b"put 0 0 10 65535\r\n" + body + b"\r\n"
    c.send_slowly(data, chunk=4093)
    eq(c.read_line(), b"INSERTED 1", "put")
    eq(c.cmd_body("peek 1"), (b"FOUND 1 65535", body), "peek")


def test_burst_of_pipelined_puts(srv):
    c = srv.client()
    n = 5000
    data = b"".join(b"put %d 0 60 6\r\nj%05d\r\n" % (i % 7, i) for i in range(n))
    c.send(data)
    expected = b"".join(b"INSERTED %d\r\n" % (i + 1) for i in range(n))
    got = c.read_exact(len(expected), timeout=30)
    eq(got == expected, True, "5000 INSERTED replies in order (first diff at %r)"
       % (next((i for i in range(len(got)) if got[i] != expected[i]), None),))
    st = c.stats()
    eq((st["total-jobs"], st["current-jobs-ready"], st["cmd-put"]),
       (str(n), str(n), str(n)), "total, ready, cmd-put")
    # Drain them with pipelined reserves and deletes.
    c.send(b"reserve-with-timeout 0\r\n" * n)
    seen = []
    for _ in range(n):
        line, body = c.read_reply(timeout=30)
        check(line.startswith(b"RESERVED "), "reserve reply %r" % line)
        seen.append((int(line.split()[1]), body))
    pris = [(int(b[1:]) % 7, jid) for jid, b in seen]
    eq(pris == sorted(pris), True, "jobs reserved in priority, then id order")
    c.send(b"".join(b"delete %d\r\n" % jid for jid, _ in seen))
    got = c.read_exact(len(b"DELETED\r\n") * n, timeout=30)
    eq(got, b"DELETED\r\n" * n, "deletes")
    eq(c.stats()["current-jobs-reserved"], "0", "reserved")


def test_slow_reader_gets_everything(srv):
    c = srv.client()
    body = bytes(i % 256 for i in range(60000))
    j = c.put(body)
    n = 300   # ~18 MB of replies
    c.send(b"peek %d\r\n" % j * n)
    time.sleep(0.5)   # let the server's output back up
    for i in range(n):
        try:
            line, got = c.read_reply(timeout=10)
        except TestFailure as e:
            fail("stalled after %d of %d pipelined 'peek %d' replies (the rest "
                 "of the commands are already sent): %s" % (i, n, j, str(e)[-120:]))
        if (line, got) != (b"FOUND %d 60000" % j, body):
            fail("reply %d of %d: %r, body ok: %r" % (i, n, line, got == body))
    c.expect("list-tube-used", "USING default")


def test_pipelined_replies_larger_than_socket_buffers(srv):
    # Many small replies, read only after all commands were sent.
    c = srv.client()
    j = c.put(b"x" * 1000)
    n = 5000
    c.send(b"peek %d\r\n" % j * n)
    time.sleep(0.3)
    for i in range(n):
        try:
            line, got = c.read_reply(timeout=10)
        except TestFailure as e:
            fail("stalled after %d of %d pipelined 'peek %d' replies: %s"
                 % (i, n, j, str(e)[-80:]))
        eq(line, b"FOUND %d 1000" % j, "reply %d" % i)


def test_pipelined_puts_with_reserve_in_between(srv):
    c = srv.client()
    w = srv.client()
    w.send(b"reserve\r\n")
    time.sleep(0.1)
    c.send(b"put 0 0 10 1\r\na\r\nput 0 0 10 1\r\nb\r\nreserve\r\nput 0 0 10 1\r\nc\r\n")
    eq(c.read_reply(), (b"INSERTED 1", None), "put a")
    eq(c.read_reply(), (b"INSERTED 2", None), "put b")
    eq(c.read_reply(), (b"RESERVED 2 1", b"b"), "c's reserve gets b (a went to the waiter)")
    eq(c.read_reply(), (b"INSERTED 3", None), "put c")
    eq(w.read_reply(), (b"RESERVED 1 1", b"a"), "waiter gets a")


def large_bodies_pipelined(c, label):
    """One write of puts, reserves and peeks of 1-2 MB bodies with small
    commands between them, read only after the server's output has backed
    up: every reply whole and in order (a large body leaves straight from
    the job when nothing is queued before it, the rest of it after)."""
    rnd = random.Random(11)
    big1, big2 = rnd.randbytes(1_000_000), rnd.randbytes(2_000_000) + b"\r\n"
    small = b"small"
    c.send(b"".join([
        b"put 0 0 60 %d\r\n%s\r\n" % (len(big1), big1),
        b"put 5 0 60 %d\r\n%s\r\n" % (len(small), small),
        b"reserve-with-timeout 0\r\n",
        b"peek 1\r\n",
        b"list-tube-used\r\n",
        b"put 1 0 60 %d\r\n%s\r\n" % (len(big2), big2),
        b"peek 3\r\n",
        b"reserve-with-timeout 0\r\n",
        b"peek 1\r\n",
        b"reserve-with-timeout 0\r\n",
        b"stats-job 2\r\n",
    ]))
    time.sleep(0.3)
    want = [(b"INSERTED 1", None), (b"INSERTED 2", None),
            (b"RESERVED 1 1000000", big1), (b"FOUND 1 1000000", big1),
            (b"USING default", None), (b"INSERTED 3", None),
            (b"FOUND 3 2000002", big2), (b"RESERVED 3 2000002", big2),
            (b"FOUND 1 1000000", big1), (b"RESERVED 2 5", small)]
    for i, (line, body) in enumerate(want):
        got_line, got_body = c.read_reply(timeout=20)
        eq(got_line, line, "%s: reply %d" % (label, i))
        check(got_body == body, "%s: reply %d (%r): body of %d bytes differs from the %d put"
              % (label, i, line, len(got_body or b""), len(body or b"")))
    line, doc = c.read_reply(timeout=20)
    eq(line.split()[0], b"OK", "%s: stats-job" % label)
    check(b"state: reserved" in doc, "%s: job 2 reserved: %r" % (label, doc))


@server_args("-z", "3000000")
def test_large_bodies_pipelined_in_order(srv):
    large_bodies_pipelined(srv.client(), "no binlog")


@no_server
@tubed_only("-b and -f 0 with replies held for the fsync")
def test_large_bodies_pipelined_behind_held_replies(binary):
    # -f 0: each INSERTED waits for its record's fsync; the large bodies
    # queued behind it must wait too, and leave in order.
    from server import Tubed
    with Tubed(binary, "-f", "0", "-z", "3000000", bdir=True) as t:
        large_bodies_pipelined(t.bs(), "-f 0")
