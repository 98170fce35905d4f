"""The metrics port's HTTP/1.1 behaviour (doc/monitoring.md, "HTTP
behaviour" and /healthz): paths and methods, 404/405/400, oversized heads
and header floods, keep-alive and pipelining, HEAD, slow clients, and that
nothing on the port changes a job.

Every test starts its own tubed with --metrics-port on a second free port
(http_util.MetricsServer).
"""

import os
import signal
import socket
import threading
import time

from harness import HOST, check, eq, fail, no_server, slow, wait_until
from http_util import MetricsServer, get, scrape

STATUS_HTML = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                           "src", "proto", "http", "status.html")

PATHS = {
    "/metrics": "text/plain; version=0.0.4; charset=utf-8",
    "/healthz": "text/plain; charset=utf-8",
    "/": "text/html; charset=utf-8",
    "/tubes.json": "application/json",
}


def common_headers(r, what):
    eq(r.header("Cache-Control"), "no-store", what + ": Cache-Control")
    check(r.header("Date", ) and r.header("Date").endswith(" GMT"),
          what + ": Date %r" % r.header("Date"))


@no_server
def test_every_path_get_and_head(binary):
    with MetricsServer(binary) as srv:
        with srv.http() as c:
            for path, ctype in PATHS.items():
                c.request("GET", path)
                g = c.read_response()
                eq(g.status, 200, "GET %s status" % path)
                eq(g.header("Content-Type"), ctype, "GET %s Content-Type" % path)
                eq(int(g.header("Content-Length")), len(g.body), "GET %s Content-Length" % path)
                check(g.header("Connection") is None, "GET %s: Connection %r on a keep-alive "
                      "reply" % (path, g.header("Connection")))
                common_headers(g, "GET " + path)
                check(len(g.body) > 0, "GET %s: empty body" % path)
                # HEAD: same status and headers, no body; the next reply on
                # the same connection starts right after the head
                c.request("HEAD", path)
                h = c.read_response(head=True)
                eq(h.status, 200, "HEAD %s status" % path)
                eq(h.header("Content-Type"), ctype, "HEAD %s Content-Type" % path)
                if path in ("/", "/healthz"):   # the others change between two renders
                    eq(h.header("Content-Length"), g.header("Content-Length"),
                       "HEAD %s Content-Length" % path)
            c.request("GET", "/healthz")
            eq(c.read_response().body, b"ok\n", "GET /healthz after the HEADs")
        r = get(srv, "/")
        check(r.body.startswith(b"<!DOCTYPE html>") or r.body.lower().startswith(b"<!doctype html"),
              "GET / is not the status page: %r" % r.body[:60])
        with open(STATUS_HTML, "rb") as f:
            eq(r.body, f.read(), "GET / serves status.html byte for byte")


@no_server
def test_unknown_paths_404_and_query_ignored(binary):
    with MetricsServer(binary) as srv:
        for path in ("/nope", "/metrics/", "/metrics.txt", "/%6detrics", "/METRICS",
                     "//metrics", "/healthz/", "/index.html", "/tubes.json/x"):
            for method in ("GET", "HEAD"):
                r = get(srv, path, method)
                eq(r.status, 404, "%s %s status" % (method, path))
                eq(r.header("Content-Type"), "text/plain; charset=utf-8",
                   "%s %s Content-Type" % (method, path))
                eq(r.body, b"" if method == "HEAD" else b"not found\n", "%s %s body" % (method, path))
        for path in ("/metrics?x=1", "/healthz?", "/?a=b&c", "/tubes.json?t=123"):
            r = get(srv, path)
            eq(r.status, 200, "GET %s status (the query is ignored)" % path)
        # absolute-form targets name the same paths
        r = get(srv, "http://test/healthz")
        eq((r.status, r.body), (200, b"ok\n"), "absolute-form GET")


def job_state(c):
    """What a client can see of every job and tube: ids, states, bodies,
    counts (no connection counters)."""
    st = c.stats()
    keep = {k: v for k, v in st.items() if k.startswith(("current-jobs", "total-jobs",
                                                          "job-timeouts", "current-tubes"))}
    jobs = {}
    for jid in range(1, 6):
        line = c.cmd("stats-job %d" % jid)
        if line.startswith(b"OK"):
            body = c.read_exact(int(line.split()[1]) + 2)
            jobs[jid] = [l for l in body.split(b"\n") if not l.startswith((b"age", b"time-left"))]
        else:
            jobs[jid] = line
    tubes = {}
    for t in ("default", "web"):
        tubes[t] = {k: v for k, v in c.stats_tube(t).items() if k != "pause-time-left"}
    return keep, jobs, tubes


@no_server
def test_other_methods_405_and_change_nothing(binary):
    with MetricsServer(binary) as srv:
        c = srv.client()
        c.expect("use web", "USING web")
        for i in range(3):
            c.put(b"job %d" % i, pri=i * 1000)
        c.expect("use default", "USING default")
        c.put(b"delayed", delay=100)
        before = job_state(c)
        methods = ("POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT2", "get",
                   "Get", "PURGE")
        for path in list(PATHS) + ["/nope"]:
            for m in methods:
                with srv.http() as h:
                    h.request(m, path)
                    r = h.read_response()
                    eq(r.status, 405, "%s %s status" % (m, path))
                    eq(r.header("Allow"), "GET, HEAD", "%s %s Allow" % (m, path))
                    eq(r.body, b"method not allowed\n", "%s %s body" % (m, path))
                    # the connection stays usable
                    h.request("GET", "/healthz")
                    eq(h.read_response().status, 200, "GET after %s %s" % (m, path))
        # a request with a body: answered, and the connection is closed
        # without reading the body as a request
        for m, path in (("POST", "/metrics"), ("DELETE", "/tubes.json"), ("PUT", "/")):
            with srv.http() as h:
                body = "delete 1\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                h.send("%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                       % (m, path, len(body), body))
                r = h.read_response()
                eq(r.status, 405, "%s %s with a body" % (m, path))
                eq(r.header("Connection"), "close", "%s with a body: Connection" % m)
                rest = h.expect_closed()
                eq(rest, b"", "bytes after the reply to a request with a body")
        # every GET path too, many times
        for path in PATHS:
            for _ in range(3):
                get(srv, path)
        after = job_state(c)
        eq(after, before, "jobs and tubes after the HTTP requests")


MALFORMED = [
    b"GET /metrics\r\n\r\n",                                  # no version
    b"GET /metrics HTTP/1.1\r\n\r\n",                         # no Host in 1.1
    b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",   # two Hosts
    b"GET /metrics HTTP/2.0\r\nHost: a\r\n\r\n",
    b"GET  /metrics HTTP/1.1\r\nHost: a\r\n\r\n",             # two spaces
    b"GET metrics HTTP/1.1\r\nHost: a\r\n\r\n",               # not origin-form
    b"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost : a\r\n\r\n",             # space before colon
    b"GET /metrics HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",   # obs-fold
    b"GET /metrics HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
    b"GET /met\x00rics HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /metrics HTTP/1.1\rHost: a\r\n\r\n",                # bare CR
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",          # a TLS hello
    b"put 0 0 60 1\r\nx\r\n",                                 # beanstalk
]


@no_server
def test_malformed_request_400_and_close(binary):
    with MetricsServer(binary) as srv:
        for req in MALFORMED:
            with srv.http() as h:
                h.send(req)
                r = h.read_response()
                eq(r.status, 400, "status for %r" % req)
                eq(r.header("Connection"), "close", "Connection for %r" % req)
                eq(r.body, b"bad request\n", "body for %r" % req)
                eq(h.expect_closed(), b"", "bytes after the 400 for %r" % req)
        # a bad request after a good one on the same connection
        with srv.http() as h:
            h.send(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /x HTTP/9.9\r\n\r\n")
            eq(h.read_response().status, 200, "the good request first")
            eq(h.read_response().status, 400, "then the bad one")
            h.expect_closed()
        eq(get(srv, "/healthz").status, 200, "the server still answers")
        check(srv.alive(), "server died")


@no_server
def test_oversized_head_400(binary):
    with MetricsServer(binary) as srv:
        # just under 8 KiB: served
        pad = "x" * (8192 - 200)
        with srv.http() as h:
            h.send("GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: %s\r\n\r\n" % pad)
            eq(h.read_response().status, 200, "a 8000-byte head")
        # over 8 KiB: 400 and close, in one write or trickled
        for chunk in (1 << 20, 1000):
            with srv.http(timeout=10) as h:
                head = ("GET /healthz HTTP/1.1\r\nHost: a\r\nX-Pad: %s\r\n\r\n"
                        % ("y" * 9000)).encode()
                try:
                    for i in range(0, len(head), chunk):
                        h.send(head[i:i + chunk])
                except (BrokenPipeError, ConnectionResetError):
                    pass   # it closed before taking everything: fine
                r = h.read_response()
                eq(r.status, 400, "status for a 9 KiB head (chunks of %d)" % chunk)
                h.expect_closed()
        # a head that never ends: the server answers 400 long before a MiB
        with srv.http(timeout=10) as h:
            h.send("GET /metrics HTTP/1.1\r\nHost: a\r\n")
            sent = 0
            try:
                while sent < (1 << 20):
                    h.send(b"X-Flood: " + b"z" * 1000 + b"\r\n")
                    sent += 1011
            except (BrokenPipeError, ConnectionResetError):
                pass
            data = h.expect_closed()
            check(data.startswith(b"HTTP/1.1 400 "), "reply to an endless head: %r" % data[:80])
        eq(get(srv, "/healthz").status, 200, "the server still answers")


@no_server
def test_header_flood(binary):
    with MetricsServer(binary) as srv:
        # 100 fields is the limit; 101 is a 400
        for n, want in ((99, 200), (101, 400), (5000, 400)):
            fields = "".join("X-F%d: v\r\n" % i for i in range(n))
            with srv.http(timeout=10) as h:
                try:
                    h.send("GET /healthz HTTP/1.1\r\nHost: a\r\n%s\r\n" % fields)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                r = h.read_response()
                eq(r.status, want, "status with %d header fields" % (n + 1))
                if want == 400:
                    h.expect_closed()
        # many connections flooding at once do not stop the others
        floods = []
        for _ in range(20):
            h = srv.http(timeout=10)
            h.send("GET /healthz HTTP/1.1\r\nHost: a\r\n" + "X: y\r\n" * 50)
            floods.append(h)
        eq(get(srv, "/healthz").status, 200, "GET while 20 heads are half sent")
        for h in floods:
            h.close()


@no_server
def test_keep_alive_and_pipelining(binary):
    with MetricsServer(binary) as srv:
        # two requests, one after the other, on one connection
        with srv.http() as h:
            h.request("GET", "/healthz")
            eq(h.read_response().body, b"ok\n", "first request")
            h.request("GET", "/tubes.json")
            r = h.read_response()
            eq(r.status, 200, "second request on the same connection")
            check(r.body.startswith(b'{"server":'), "second reply %r" % r.body[:40])
            # it stays open
            check(h.is_open(0.2), "closed after two keep-alive requests")
        # pipelined: sent in one write, answered in order
        with srv.http() as h:
            reqs = [("GET", "/healthz"), ("HEAD", "/metrics"), ("GET", "/nope"),
                    ("POST", "/"), ("GET", "/metrics"), ("GET", "/healthz")]
            h.send("".join("%s %s HTTP/1.1\r\nHost: a\r\n\r\n" % r for r in reqs))
            got = [h.read_response(head=(m == "HEAD")).status for m, _ in reqs]
            eq(got, [200, 200, 404, 405, 200, 200], "pipelined statuses")
        # the same split at every byte: a request trickled in one byte at a time
        with srv.http() as h:
            data = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n" * 2
            for i in range(len(data)):
                h.send(data[i:i + 1])
            eq(h.read_response().body, b"ok\n", "trickled request 1")
            eq(h.read_response().body, b"ok\n", "trickled request 2")
        # Connection: close is honoured
        with srv.http() as h:
            h.request("GET", "/healthz", {"Connection": "close"})
            r = h.read_response()
            eq(r.header("Connection"), "close", "reply to Connection: close")
            h.expect_closed()
        # HTTP/1.0 closes unless it asks for keep-alive
        with srv.http() as h:
            h.request("GET", "/healthz", version="HTTP/1.0", host=False)
            eq(h.read_response().header("Connection"), "close", "HTTP/1.0 reply")
            h.expect_closed()
        with srv.http() as h:
            h.request("GET", "/healthz", {"Connection": "keep-alive"}, version="HTTP/1.0")
            eq(h.read_response().header("Connection"), "keep-alive", "HTTP/1.0 keep-alive")
            h.request("GET", "/healthz", {"Connection": "keep-alive"}, version="HTTP/1.0")
            eq(h.read_response().status, 200, "second HTTP/1.0 request")
        # bare LF line ends
        with srv.http() as h:
            h.send(b"GET /healthz HTTP/1.1\nHost: a\n\n")
            eq(h.read_response().status, 200, "bare-LF request")


@no_server
def test_pipelined_flood_bounded(binary):
    """A client that pipelines thousands of scrapes and reads none: the
    server stops reading it once OUT_HIGH bytes of replies wait (memory
    stays bounded, far below what the replies would take), still answers
    others, and the replies it did make come in order."""
    with MetricsServer(binary) as srv:
        c = srv.client()
        for i in range(100):   # ~125 KB per scrape
            c.expect("watch t%03d" % i, "WATCHING %d" % (i + 2))
        size = len(get(srv, "/metrics").body)
        n = 2000               # unbounded, the replies would take n * size
        with srv.http(timeout=30, rcvbuf=4096) as h:
            req = b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"

            def flood():
                try:
                    h.send(req * n)
                except OSError:
                    pass
            t = threading.Thread(target=flood, daemon=True)
            t.start()
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                eq(get(srv, "/healthz").status, 200, "healthz during the flood")
            with open("/proc/%d/status" % srv.pid) as f:
                rss = int([l for l in f if l.startswith("VmRSS:")][0].split()[1]) * 1024
            check(rss < n * size // 4, "server RSS %d MiB with a client owing %d MiB of "
                  "replies" % (rss >> 20, n * size >> 20))
            for i in range(5):
                r = h.read_response(timeout=30)
                eq(r.status, 200, "pipelined scrape %d" % i)
                check(r.body.startswith(b"# HELP tubed_build_info"), "scrape %d body" % i)
        eq(get(srv, "/healthz").status, 200, "healthz after the flood")


@slow
@no_server
def test_slow_clients_closed(binary):
    """A head not complete within 10 s of connecting (or of the previous
    reply) ends the connection, however the bytes trickle in; a client
    reading a reply keeps its connection; the loop is never blocked."""
    with MetricsServer(binary) as srv:
        t0 = time.monotonic()
        silent = srv.http(timeout=25)              # never sends a byte
        loris = srv.http(timeout=25)               # one header byte a second
        idle = srv.http(timeout=25)                # one request, then nothing
        idle.request("GET", "/healthz")
        eq(idle.read_response().status, 200, "idle client's request")
        t_idle = time.monotonic()
        loris.send("GET /healthz HTTP/1.1\r\nHost: a\r\n")
        busy = srv.http(timeout=25)                # a request every second
        closed = {}
        deadline = t0 + 22
        sent = 0
        while len(closed) < 3 and time.monotonic() < deadline:
            if "loris" not in closed:
                try:
                    loris.send(b"X-Slow-%d: y\r\n" % sent)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                sent += 1
            busy.request("GET", "/healthz")
            eq(busy.read_response().status, 200, "a well-behaved client while others stall")
            for name, h in (("silent", silent), ("loris", loris), ("idle", idle)):
                if name not in closed and not h.is_open(0.0):
                    closed[name] = time.monotonic()
            time.sleep(0.5)   # pacing of the slow client, not a speed assertion
        for name in ("silent", "loris", "idle"):
            check(name in closed, "%s client still open after %.0f s" % (name, deadline - t0))
        # never before its 10 s (the server's clock started a little after ours)
        check(closed["silent"] - t0 >= 9.5, "silent client closed after %.1f s"
              % (closed["silent"] - t0))
        check(closed["loris"] - t0 >= 9.5, "slow client closed after %.1f s"
              % (closed["loris"] - t0))
        check(closed["idle"] - t_idle >= 9.5, "idle client closed %.1f s after its reply"
              % (closed["idle"] - t_idle))
        check(loris.buf == b"" or loris.buf.startswith(b"HTTP/1.1 408 "),
              "the slow client heard %r" % loris.buf[:60])
        check(busy.is_open(0.0), "the busy client was closed")
        for h in (silent, loris, idle, busy):
            h.close()


@slow
@no_server
def test_slow_reader_of_a_big_reply_keeps_its_connection(binary):
    """A big scrape read slowly (longer than the 10 s head timeout) arrives
    whole: a client still reading its reply is not idle."""
    with MetricsServer(binary) as srv:
        c = srv.client()
        # far more than the kernel's socket buffers hold (tcp_wmem's 4 MiB),
        # so most of it waits in the server while the client reads
        for i in range(8000):
            c.send(b"watch slow-reader-tube-%04d\r\n" % i)
        for i in range(8000):
            c.read_line()
        size = len(scrape(srv).text)
        check(size > 8 << 20, "scrape of 8000 tubes is only %d bytes" % size)
        with srv.http(timeout=40, rcvbuf=8192) as h:
            h.request("GET", "/metrics")
            got, t0 = b"", time.monotonic()
            # 64 KiB a second for 12 s (past the 10 s a head may take),
            # then the rest at full speed
            while True:
                slow_phase = time.monotonic() - t0 < 12
                h.sock.settimeout(15)
                try:
                    data = h.sock.recv(65536)
                except socket.timeout:
                    fail("no data for 15 s after %d bytes" % len(got))
                if not data:
                    break
                got += data
                if b"\r\n\r\n" in got:
                    head, body = got.split(b"\r\n\r\n", 1)
                    clen = int([l.split(b":")[1] for l in head.split(b"\r\n")
                                if l.lower().startswith(b"content-length:")][0])
                    if len(body) >= clen:
                        break
                if slow_phase:
                    time.sleep(len(data) / 65536.0)   # the slow reader's pace
            elapsed = time.monotonic() - t0
            check(b"\r\n\r\n" in got, "no reply head")
            head, body = got.split(b"\r\n\r\n", 1)
            check(elapsed > 10, "reading took only %.1f s: not a slow reader" % elapsed)
            check(body.endswith(b"\n") and b"tubed_tube_pauses_total" in body,
                  "the reply was cut after %d bytes (%.1f s)" % (len(body), elapsed))


@no_server
def test_healthz_draining(binary):
    with MetricsServer(binary) as srv:
        r = get(srv, "/healthz")
        eq((r.status, r.body), (200, b"ok\n"), "healthz while serving")
        srv.signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while True:
            r = get(srv, "/healthz")
            if r.status == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        eq((r.status, r.body), (503, b"draining\n"), "healthz while draining")
        eq(r.header("Content-Type"), "text/plain; charset=utf-8", "503 Content-Type")
        r = get(srv, "/healthz", "HEAD")
        eq((r.status, r.body), (503, b""), "HEAD /healthz while draining")
        srv.signal(signal.SIGUSR2)
        deadline = time.monotonic() + 5
        while True:
            r = get(srv, "/healthz")
            if r.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        eq((r.status, r.body), (200, b"ok\n"), "healthz after SIGUSR2")


@no_server
def test_many_connections_and_clean_stop(binary):
    """Many HTTP connections open at the stop: the server exits cleanly
    (no leak report under the sanitizers)."""
    with MetricsServer(binary) as srv:
        conns = []
        for i in range(50):
            h = srv.http()
            if i % 2:
                h.send("GET /metrics HTTP/1.1\r\nHo")
            conns.append(h)
        eq(get(srv, "/healthz").status, 200, "healthz with 50 open connections")
        st = srv.client().stats()
        check(int(st["current-connections"]) >= 51, "current-connections %s"
              % st["current-connections"])
    for h in conns:
        h.close()


@no_server
def test_connection_limit_refuses_with_503(binary):
    """At --max-connections a new HTTP client is told so in HTTP (a 503
    and a close), not in beanstalk's words."""
    with MetricsServer(binary, ["--max-connections", "1"]) as srv:
        b = srv.client()
        b.expect("list-tube-used", "USING default")    # it holds the one slot
        s = socket.create_connection((HOST, srv.metrics_port), timeout=5)
        got = b""
        while True:
            d = s.recv(4096)
            if not d:
                break
            got += d
        s.close()
        head, _, body = got.partition(b"\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 503 "), "refusal: %r" % got)
        check(b"Connection: close" in head, "refusal closes: %r" % got)
        eq(body, b"too many connections\n", "refusal body")
        b.close()
        wait_until(lambda: get(srv, "/healthz").status == 200, what="served once the slot is free")


_ACTIVATE2 = """
import os, sys
a, b = int(sys.argv[1]), int(sys.argv[2])
os.dup2(a, 3)
os.dup2(b, 4)
os.set_inheritable(3, True)
os.set_inheritable(4, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.execv(sys.argv[3], sys.argv[3:])
"""


@no_server
def test_socket_activation_metrics_socket(binary):
    """systemd hands over two sockets, one named "metrics": the HTTP
    front-end serves it without --metrics-port."""
    import subprocess
    import sys
    bs = socket.socket()
    hs = socket.socket()
    for s in (bs, hs):
        s.bind(("127.0.0.1", 0))
        s.listen(16)
    env = dict(os.environ, LISTEN_FDS="2", LISTEN_FDNAMES="beanstalk:metrics")
    proc = subprocess.Popen([sys.executable, "-c", _ACTIVATE2, str(bs.fileno()), str(hs.fileno()),
                             binary], pass_fds=(bs.fileno(), hs.fileno()), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        class Srv:
            # The socket listens before tubed runs: the first answer waits
            # for its start too (a loaded machine once took over 5 s).
            def http(self, timeout=30.0):
                from http_util import HttpConn
                return HttpConn(hs.getsockname()[1], timeout)
        r = get(Srv(), "/healthz")
        eq((r.status, r.body), (200, b"ok\n"), "healthz on the inherited metrics socket")
        with socket.create_connection(bs.getsockname(), timeout=5) as c:
            c.sendall(b"list-tubes\r\n")
            check(c.recv(100).startswith(b"OK "), "beanstalk on the other socket")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        bs.close()
        hs.close()
    eq(proc.returncode in (0, -signal.SIGTERM), True, "exit status %r: %s"
       % (proc.returncode, proc.stderr.read().decode(errors="replace")[-500:]))
