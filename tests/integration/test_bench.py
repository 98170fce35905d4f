"""tubed-bench against the real server: every workload runs briefly (a few
thousand operations, every reply verified by tubed-bench itself), and the
server's own counters must agree with what the tool says it did. A fake
server that answers wrongly shows the verification is real: the tool must
count the bad replies and fail. No timing is asserted anywhere."""

import os
import socket
import subprocess
import threading

from harness import PortReservation, Skip, check, eq, no_server


def bench_binary(binary):
    path = os.path.join(os.path.dirname(binary), "tubed-bench")
    if not os.path.exists(path):
        raise Skip("no tubed-bench next to %s" % binary)
    return path


def run_bench(binary, port, *args, expect_rc=0):
    cmd = [bench_binary(binary), "-p", str(port), "--csv", "--label", "t",
           "--timeout", "120"] + [str(a) for a in args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    out = r.stdout.decode(errors="replace")
    err = r.stderr.decode(errors="replace")
    eq(r.returncode, expect_rc, "tubed-bench exit status for %s\nstdout: %s\nstderr: %s"
       % (" ".join(cmd[1:]), out, err))
    if expect_rc != 0:
        return None, out + err
    lines = out.strip().splitlines()
    eq(len(lines), 2, "CSV lines from tubed-bench (%r)" % out)
    row = dict(zip(lines[0].split(","), lines[1].split(",")))
    eq(row["failed"], "0", "failed ops")
    eq(row["errors"], "0", "unexpected replies")
    return row, out + err


def counters(srv):
    c = srv.client()
    try:
        st = c.stats()
    finally:
        c.close()
    return {k: int(v) for k, v in st.items() if v.isdigit()}


def test_bench_put_pipelined(srv):
    row, _ = run_bench(srv.binary, srv.port, "-w", "put", "-c", 4, "-P", 8, "-n", 4000)
    eq(row["ops"], "4000", "ops reported")
    st = counters(srv)
    eq(st["cmd-put"], 4000, "cmd-put on the server")
    eq(st["current-jobs-ready"], 4000, "jobs left ready")
    eq(st["total-jobs"], 4000, "total-jobs")


def test_bench_put_spread_over_tubes(srv):
    run_bench(srv.binary, srv.port, "-w", "put", "-c", 2, "-t", 5, "-n", 1000)
    c = srv.client()
    tubes = [t for t in c.list_tubes() if t.startswith("bench.")]
    eq(len(tubes), 5, "bench tubes on the server")
    total = sum(int(c.stats_tube(t)["current-jobs-ready"]) for t in tubes)
    eq(total, 1000, "jobs over the five tubes")


def test_bench_reserve_delete_drains(srv):
    row, _ = run_bench(srv.binary, srv.port, "-w", "reserve-delete", "-c", 4,
                       "--prefill", 3000, "-n", 3000)
    eq(row["ops"], "3000", "jobs drained")
    st = counters(srv)
    eq(st["cmd-put"], 3000, "prefill puts")
    eq(st["cmd-delete"], 3000, "deletes")
    eq(st["current-jobs-ready"], 0, "jobs left ready")
    eq(st["current-jobs-reserved"], 0, "jobs left reserved")


def test_bench_named_tube_put_then_drain(srv):
    # --tube: a put run and a later drain run (--prefill 0) share one tube.
    run_bench(srv.binary, srv.port, "-w", "put", "--tube", "rb.x", "-c", 3, "-P", 4,
              "-s", 300, "-n", 2000)
    c = srv.client()
    try:
        eq(c.stats_tube("rb.x")["current-jobs-ready"], "2000", "jobs put into --tube")
    finally:
        c.close()
    row, _ = run_bench(srv.binary, srv.port, "-w", "reserve-delete", "--tube", "rb.x",
                       "--prefill", 0, "-n", 2000, "-c", 5, "-s", 300)
    eq(row["ops"], "2000", "jobs drained")
    st = counters(srv)
    eq(st["cmd-put"], 2000, "no prefill puts")
    eq(st["cmd-delete"], 2000, "deletes")
    eq(st["current-jobs-ready"], 0, "jobs left ready")
    for args in (["--prefill", 0, "-n", 5],                       # no --tube
                 ["--prefill", 0, "--tube", "rb.x"],              # no -n
                 ["--tube", "rb.x", "-t", 2, "-n", 5],            # one tube only
                 ["--tube", "-bad", "-n", 5]):
        run_bench(srv.binary, srv.port, "-w", "reserve-delete", *args, expect_rc=2)


def test_bench_produce_consume(srv):
    row, _ = run_bench(srv.binary, srv.port, "-w", "produce-consume",
                       "--producers", 3, "--workers", 3, "-P", 4, "-n", 3000)
    eq(row["ops"], "3000", "jobs consumed")
    st = counters(srv)
    check(st["cmd-delete"] >= 3000, "deletes %d < 3000 consumed" % st["cmd-delete"])
    check(st["cmd-put"] >= st["cmd-delete"],
          "more deletes (%d) than puts (%d)" % (st["cmd-delete"], st["cmd-put"]))
    eq(st["current-jobs-reserved"], 0, "jobs left reserved after the run")
    eq(st["current-jobs-ready"], st["cmd-put"] - st["cmd-delete"], "jobs left ready")


def test_bench_mixed(srv):
    row, _ = run_bench(srv.binary, srv.port, "-w", "mixed", "-c", 3, "-n", 3000)
    eq(row["ops"], "3000", "ops")
    st = counters(srv)
    # Each op is a put or a reserve-with-timeout 0 (+ a delete of the job).
    eq(st["cmd-put"] + st["cmd-reserve-with-timeout"], 3000, "puts + reserves")
    eq(st["current-jobs-ready"], st["cmd-put"] - st["cmd-delete"], "jobs left ready")
    eq(st["current-jobs-reserved"], 0, "jobs left reserved")


def test_bench_watch_many_tubes(srv):
    row, _ = run_bench(srv.binary, srv.port, "--watch", 200, "-c", 2, "-n", 1000)
    eq(row["ops"], "1000", "round trips")
    st = counters(srv)
    eq(st["cmd-put"], 1000, "puts")
    eq(st["cmd-delete"], 1000, "deletes")
    eq(st["current-jobs-ready"] + st["current-jobs-reserved"], 0, "jobs left")
    check(st["cmd-watch"] >= 400, "cmd-watch %d: 2 connections x 200 tubes" % st["cmd-watch"])


def test_bench_idle_connections(srv):
    run_bench(srv.binary, srv.port, "-w", "put", "--idle", 200, "-n", 2000)
    st = counters(srv)
    check(st["total-connections"] >= 201,
          "total-connections %d: 200 idle + 1 working" % st["total-connections"])
    eq(st["cmd-put"], 2000, "puts")


def test_bench_duration_bound(srv):
    row, _ = run_bench(srv.binary, srv.port, "-w", "put", "-c", 2, "-P", 4, "-d", 1)
    ops = int(row["ops"])
    check(ops > 0, "no ops in a 1 s run")
    # The requests in flight at the deadline (at most 2 x 4) reach the
    # server but are neither waited for nor counted.
    puts = counters(srv)["cmd-put"]
    check(ops <= puts <= ops + 8,
          "server counted %d puts, tubed-bench reported %d ops" % (puts, ops))


class WrongServer:
    """Accepts one connection and answers every request line with `reply`
    (a put's body is skipped first)."""

    def __init__(self, reply):
        self.reply = reply
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
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
                    line, buf = buf.split(b"\r\n", 1)
                    if line.startswith(b"put "):
                        n = int(line.split()[-1]) + 2
                        while len(buf) < n:
                            more = conn.recv(65536)
                            if not more:
                                return
                            buf += more
                        buf = buf[n:]
                    try:
                        conn.sendall(self.reply)
                    except OSError:
                        return

    def close(self):
        self.sock.close()


@no_server
def test_bench_fails_on_unexpected_replies(binary):
    for reply in (b"OUT_OF_MEMORY\r\n", b"INSERTED\r\n", b"BURIED 7\r\n"):
        fake = WrongServer(reply)
        try:
            _, text = run_bench(binary, fake.port, "-w", "put", "-n", 50,
                                "--stall", 5, expect_rc=1)
        finally:
            fake.close()
        check("unexpected" in text or "failed" in text,
              "tubed-bench output for reply %r does not report it: %s" % (reply, text))


@no_server
def test_bench_fails_when_nothing_listens(binary):
    # Held (bound, never listening) for the run: no other test's server
    # can be what answers there.
    with PortReservation() as res:
        run_bench(binary, res.port, "-w", "put", "-n", 10, expect_rc=1)
