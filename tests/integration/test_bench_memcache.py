"""tubed-bench --protocol memcache against the real server's kestrel
listener: each memcache workload runs briefly (every reply verified by
tubed-bench itself), and the server's own counters, read over both
protocols, must agree with what the tool says it did. Fake servers that
answer wrongly show the verification is real: the tool must fail. No
timing is asserted anywhere."""

import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "mc_clients"))

from harness import check, eq, no_server  # noqa: E402
from mcproto import McServer  # noqa: E402
from test_bench import run_bench  # noqa: E402


def mc_bench(binary, port, *args, expect_rc=0):
    return run_bench(binary, port, "--protocol", "memcache", *args, expect_rc=expect_rc)


def bench_queues(stats):
    """{queue name: items} of the bench.* queues in a memcache stats dict."""
    out = {}
    for k, v in stats.items():
        if k.startswith("queue_bench.") and k.endswith("_items") \
                and not k.endswith(("_total_items", "_mem_items", "_expired_items")):
            out[k[len("queue_"):-len("_items")]] = int(v)
    return out


def queue_stat(stats, key):
    """The sum of queue_bench.*_<key> over every bench queue."""
    return sum(int(v) for k, v in stats.items()
               if k.startswith("queue_bench.") and k.endswith("_" + key)
               and k[len("queue_"):-len(key) - 1].count("_") == 0)


@no_server
def test_mc_set_stores_every_item(binary):
    with McServer(binary) as s:
        row, _ = mc_bench(binary, s.mport, "-w", "mc-set", "-c", 4, "-P", 8, "-t", 3,
                          "-n", 3000)
        eq(row["workload"], "mc-set", "workload column")
        eq(row["ops"], "3000", "ops reported")
        st = s.mc().stats()
        eq(int(st["cmd_set"]), 3000, "cmd_set")
        eq(int(st["curr_items"]), 3000, "curr_items")
        queues = bench_queues(st)
        eq(len(queues), 3, "bench queues (%r)" % queues)
        eq(sum(queues.values()), 3000, "items over the queues")
        bs = s.bs().stats()
        eq(int(bs["current-jobs-ready"]), 3000, "beanstalk current-jobs-ready")


@no_server
def test_mc_set_body_sizes(binary):
    """1 KiB and empty bodies: the bytes stored are the bytes sent."""
    with McServer(binary) as s:
        mc_bench(binary, s.mport, "-w", "mc-set", "-s", 1024, "-n", 200)
        mc_bench(binary, s.mport, "-w", "mc-set", "-s", 0, "-n", 100)
        st = s.mc().stats()
        eq(int(st["curr_items"]), 300, "curr_items")
        eq(int(st["bytes"]), 200 * 1024, "bytes stored")


@no_server
def test_mc_get_drains_the_prefill(binary):
    with McServer(binary) as s:
        row, _ = mc_bench(binary, s.mport, "-w", "mc-get", "-c", 4, "-P", 8, "-t", 3,
                          "--prefill", 3000, "-n", 3000)
        eq(row["ops"], "3000", "items received")
        st = s.mc().stats()
        eq(int(st["cmd_set"]), 3000, "prefill sets")
        eq(int(st["cmd_get"]), 3000, "gets")
        eq(int(st["get_hits"]), 3000, "get_hits")
        eq(int(st["get_misses"]), 0, "get_misses: a get found a queue empty")
        eq(int(st["curr_items"]), 0, "items left")
        eq(int(s.bs().stats()["current-jobs-reserved"]), 0, "jobs left reserved")


@no_server
def test_mc_get_partial_drain(binary):
    """-n below --prefill: exactly the difference is left, spread as set."""
    with McServer(binary) as s:
        row, _ = mc_bench(binary, s.mport, "-w", "mc-get", "-c", 2, "-t", 4,
                          "--prefill", 2000, "-n", 1200)
        eq(row["ops"], "1200", "items received")
        st = s.mc().stats()
        eq(int(st["get_misses"]), 0, "get_misses")
        eq(sorted(bench_queues(st).values()), [200, 200, 200, 200], "items left per queue")


@no_server
def test_mc_open_close_confirms_every_item(binary):
    with McServer(binary) as s:
        row, _ = mc_bench(binary, s.mport, "-w", "mc-open-close", "-c", 3, "-P", 4, "-t", 2,
                          "--prefill", 2000, "-n", 2000)
        eq(row["ops"], "2000", "items confirmed")
        st = s.mc().stats()
        eq(int(st["cmd_get"]), 2000, "cmd_get (each /open; a bare /close is not one)")
        eq(int(st["get_hits"]), 2000, "get_hits")
        eq(int(st["get_misses"]), 0, "get_misses")
        eq(int(st["curr_items"]), 0, "items left")
        bs = s.bs().stats()
        eq(int(bs["current-jobs-reserved"]) + int(bs["current-jobs-ready"]), 0, "jobs left")


@no_server
def test_mc_open_close_partial(binary):
    """The queues outlive a partial drain, with their transaction counts:
    every item opened was confirmed, none given back or left open."""
    with McServer(binary) as s:
        row, _ = mc_bench(binary, s.mport, "-w", "mc-open-close", "-c", 3, "-P", 4, "-t", 2,
                          "--prefill", 2000, "-n", 1500)
        eq(row["ops"], "1500", "items confirmed")
        st = s.mc().stats()
        eq(sorted(bench_queues(st).values()), [250, 250], "items left per queue")
        eq(queue_stat(st, "transactions"), 1500, "transactions over the queues")
        eq(queue_stat(st, "canceled_transactions"), 0, "canceled transactions")
        eq(queue_stat(st, "open_transactions"), 0, "open transactions left")


@no_server
def test_mc_duration_bound_drain(binary):
    """-d with --prefill: the drain stops at the prefill, never at END."""
    with McServer(binary) as s:
        row, _ = mc_bench(binary, s.mport, "-w", "mc-get", "-c", 2, "-P", 4,
                          "--prefill", 500, "-d", 1)
        eq(row["ops"], "500", "items received")
        eq(int(s.mc().stats()["get_misses"]), 0, "get_misses")


@no_server
def test_mc_get_on_a_dry_queue_fails(binary):
    """--memcached says a get leaves its key: on tubed, which dequeues, the
    prefill's single item is gone after one get, and the END that follows
    must count as unexpected."""
    with McServer(binary) as s:
        _, text = mc_bench(binary, s.mport, "-w", "mc-get", "--memcached", "-n", 20,
                           expect_rc=1)
        check('unexpected reply to get: "END"' in text,
              "tubed-bench does not report the empty get: %s" % text)
        st = s.mc().stats()
        eq(int(st["get_hits"]), 1, "get_hits")
        eq(int(st["get_misses"]), 19, "get_misses")


@no_server
def test_mc_usage_errors(binary):
    for args in (["--memcached", "-w", "mc-open-close"],
                 ["--protocol", "beanstalk", "-w", "mc-set"],
                 ["--protocol", "memcache", "-w", "put"],
                 ["--protocol", "memcache", "--watch", "3"],
                 ["--memcached", "-w", "put"],
                 ["-w", "mc-set", "--prefill", "10"],
                 ["-w", "mc-get", "--prefill", "10", "-n", "11"],
                 ["-w", "mc-get", "-d", "1"],
                 ["--protocol", "kestrel"]):
        _, text = run_bench(binary, 1, *args, expect_rc=2)
        check("Usage:" in text, "no usage for %r: %s" % (args, text))


class FakeMc:
    """Accepts connections and answers each memcache request line with
    answer(line) (a set's body is read first)."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        buf = b""
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while b"\r\n" in buf:
                    line, rest = buf.split(b"\r\n", 1)
                    if line.startswith(b"set "):
                        n = int(line.split()[4]) + 2
                        if len(rest) < n:
                            break
                        rest = rest[n:]
                    buf = rest
                    try:
                        conn.sendall(self.answer(line))
                    except OSError:
                        return

    def close(self):
        self.sock.close()


def value_of(line, body, key_suffix=b""):
    key = line.split()[1] + key_suffix
    return b"VALUE %s 0 %d\r\n%s\r\nEND\r\n" % (key, len(body), body)


def body100():
    return bytes(ord("a") + i % 26 for i in range(100))


def answers_get(fn):
    """STORED to sets, fn(line) to gets."""
    return lambda line: b"STORED\r\n" if line.startswith(b"set ") else fn(line)


@no_server
def test_mc_bench_accepts_a_correct_fake(binary):
    """The fake itself is right: a correct answer passes (so the failures
    below are the wrong answers' doing)."""
    fake = FakeMc(answers_get(lambda line: value_of(line, body100())))
    try:
        mc_bench(binary, fake.port, "-w", "mc-get", "--memcached", "-n", 50, "-t", 2)
    finally:
        fake.close()


@no_server
def test_mc_bench_fails_on_wrong_replies(binary):
    cases = [
        (["-w", "mc-set"], lambda line: b"NOT_STORED\r\n"),
        (["-w", "mc-set"], lambda line: b"STORED \r\n"),
        (["-w", "mc-set"], lambda line: b"SERVER_ERROR out of memory\r\n"),
        (["-w", "mc-get", "--memcached"], answers_get(lambda line: b"END\r\n")),
        (["-w", "mc-get", "--memcached"],
         answers_get(lambda line: value_of(line, body100()[::-1]))),
        (["-w", "mc-get", "--memcached"],
         answers_get(lambda line: value_of(line, body100(), b"x"))),
        (["-w", "mc-get", "--memcached"],
         answers_get(lambda line: b"VALUE %s 1 100\r\n%s\r\nEND\r\n"
                     % (line.split()[1], body100()))),
        (["-w", "mc-get", "--memcached"],  # malformed: data longer than announced
         answers_get(lambda line: b"VALUE %s 0 99\r\n%s\r\nEND\r\n"
                     % (line.split()[1], body100()))),
        (["-w", "mc-open-close", "--prefill", "50"],
         answers_get(lambda line: b"END\r\n")),
        (["-w", "mc-open-close", "--prefill", "50"],
         answers_get(lambda line: value_of(line, body100()))),
    ]
    for args, answer in cases:
        fake = FakeMc(answer)
        try:
            _, text = mc_bench(binary, fake.port, "-n", 50, "--stall", 5, *args,
                               expect_rc=1)
        finally:
            fake.close()
        check("unexpected" in text or "malformed" in text,
              "tubed-bench %r does not report the wrong reply: %s" % (args, text))
