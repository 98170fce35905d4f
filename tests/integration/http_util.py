"""Helpers for the metrics-port tests (test_http, test_metrics,
test_status_page): a tubed with --metrics-port on a second free port, a raw
HTTP/1.1 client with a deadline on every read (for the next bytes, so a big
reply on a slow machine is never cut off), and a Prometheus text parser.

    with MetricsServer(binary, ["-z", "100"]) as srv:
        srv.port            the beanstalk port (srv.client() as usual)
        srv.metrics_port    the HTTP port
        r = get(srv, "/metrics")          one request on its own connection
        h = srv.http()                    a raw connection: h.request(...),
                                          h.read_response(), h.expect_closed()

The server is stopped by pid on exit; a crash or sanitizer report fails the
test (harness.Server.stop).
"""

import socket
import time

import harness
from harness import HOST, TestFailure, check, eq, fail
from server import Tubed


def free_port():
    return harness._free_port()


# Does process pid listen on a port (read from /proc)?  The harness's.
listening = harness.listening


class MetricsServer(Tubed):
    """A tubed listening for beanstalk and, on a second free port, HTTP.

    Each start attempt picks both ports afresh (server.Tubed tries again
    when the server does not come up, e.g. because another process took
    one)."""

    def __init__(self, binary, args=(), env=None):
        super().__init__(binary, *args, metrics=True, env=env,
                         prefix="tubed-http-")

    @property
    def metrics_port(self):
        return self.hport

    def base_url(self):
        return "http://%s:%d" % (HOST, self.metrics_port)


class Response:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status = status
        self.reason = reason
        self.headers = headers          # [(name, value)] as sent
        self.body = body
        self.raw_head = raw_head

    def header(self, name):
        """The value of the one field called name (case-insensitive), or None;
        fails if it appears more than once."""
        vals = [v for n, v in self.headers if n.lower() == name.lower()]
        check(len(vals) <= 1, "%s appears %d times: %r" % (name, len(vals), self.raw_head))
        return vals[0] if vals else None

    def text(self):
        return self.body.decode("utf-8")

    def __repr__(self):
        return "<%d %s, %d body bytes>" % (self.status, self.reason, len(self.body))


class HttpConn:
    """One raw HTTP connection; every read has a deadline."""

    def __init__(self, port, timeout=5.0, rcvbuf=None):
        self.timeout = timeout
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        s.connect((HOST, port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = s
        self.buf = b""
        self.eof = False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
        return False

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def request(self, method, path, headers=None, version="HTTP/1.1", host=True):
        lines = ["%s %s %s" % (method, path, version)]
        if host:
            lines.append("Host: test")
        for k, v in (headers or {}).items():
            lines.append("%s: %s" % (k, v))
        self.send("\r\n".join(lines) + "\r\n\r\n")

    def _recv(self, span, what, have):
        """The next bytes, waiting at most span seconds without any (a reply
        still coming in, however slowly, is never cut off: a slow machine
        makes it longer, a server that stops sending fails it)."""
        deadline = time.monotonic() + span
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                fail("no %s: nothing came for %.1f s; have %d bytes %r"
                     % (what, span, have, self.buf[:300]))
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
                fail("connection closed while waiting for %s; have %d bytes %r"
                     % (what, have, self.buf[:300]))
            return data

    def _fill(self, span, what):
        self.buf += self._recv(span, what, len(self.buf))

    def read_response(self, head=False, timeout=None):
        """The next response; head=True: it answers a HEAD (no body)."""
        span = timeout or self.timeout
        while b"\r\n\r\n" not in self.buf:
            self._fill(span, "response head")
        raw, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        check(len(parts) == 3 and parts[0] == "HTTP/1.1" and parts[1].isdigit(),
              "bad status line %r" % lines[0])
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            check(sep and name and name == name.strip(), "bad header line %r" % line)
            headers.append((name, value.strip()))
        resp = Response(int(parts[1]), parts[2], headers, b"", raw)
        clen = resp.header("Content-Length")
        check(clen is not None and clen.isdigit(), "no Content-Length in %r" % raw)
        check(resp.header("Transfer-Encoding") is None, "Transfer-Encoding in %r" % raw)
        n = 0 if head else int(clen)
        # in pieces joined once: a body of megabytes appended to a bytes
        # object chunk by chunk costs the client seconds of copying
        parts, have = [self.buf], len(self.buf)
        while have < n:
            data = self._recv(span, "%d body bytes" % n, have)
            parts.append(data)
            have += len(data)
        self.buf = b"".join(parts)
        resp.body, self.buf = self.buf[:n], self.buf[n:]
        return resp

    def expect_closed(self, timeout=None):
        """Wait for the server to close; returns the bytes that came first."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                fail("connection still open after %.1f s; received %r"
                     % (timeout or self.timeout, self.buf[:300]))
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
            self.buf += data
        return self.buf

    def is_open(self, wait=0.0):
        """True if the connection is open and nothing arrived within wait s."""
        self.sock.settimeout(wait if wait > 0 else 0.000001)
        try:
            data = self.sock.recv(65536)
        except (socket.timeout, BlockingIOError):
            return True
        except ConnectionResetError:
            return False
        finally:
            self.sock.settimeout(self.timeout)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True


def get(srv, path, method="GET", headers=None, version="HTTP/1.1", timeout=5.0):
    """One request on a fresh connection (Connection: close); timeout: the
    longest wait for the next bytes (a big render comes before any)."""
    h = dict(headers or {})
    h.setdefault("Connection", "close")
    with srv.http(timeout=timeout) as c:
        c.request(method, path, h, version)
        return c.read_response(head=(method == "HEAD"))


# ---- Prometheus text ---------------------------------------------------------

def parse_labels(s):
    """'a="x",b="y\\"z"' -> {"a": "x", "b": 'y"z'} (the format's escapes)."""
    labels, i = {}, 0
    while i < len(s):
        eqpos = s.index("=", i)
        name = s[i:eqpos]
        check(s[eqpos + 1] == '"', "label value not quoted in %r" % s)
        j, val = eqpos + 2, []
        while s[j] != '"':
            if s[j] == "\\":
                val.append({"n": "\n", "\\": "\\", '"': '"'}[s[j + 1]])
                j += 2
            else:
                val.append(s[j])
                j += 1
        labels[name] = "".join(val)
        i = j + 1
        if i < len(s):
            eq(s[i], ",", "label separator in %r" % s)
            i += 1
    return labels


class Metrics:
    """A scrape: families in order with their HELP and TYPE, and samples."""

    def __init__(self, text):
        self.text = text
        self.families = []           # names, in order
        self.help, self.type = {}, {}
        self.samples = []            # (name, labels, value as text)
        for line in text.split("\n"):
            if not line:
                continue
            if line.startswith("# HELP "):
                name, _, h = line[7:].partition(" ")
                self.families.append(name)
                self.help[name] = h
            elif line.startswith("# TYPE "):
                name, _, t = line[7:].partition(" ")
                self.type[name] = t
            else:
                check(not line.startswith("#"), "stray comment %r" % line)
                if "{" in line:
                    name, rest = line.split("{", 1)
                    lab, value = rest.rsplit("} ", 1)
                    labels = parse_labels(lab)
                else:
                    name, value = line.split(" ")
                    labels = {}
                self.samples.append((name, labels, value))

    def value(self, name, **labels):
        """The value of the one sample of name with exactly these labels."""
        got = [float(v) for n, l, v in self.samples if n == name and l == labels]
        check(len(got) == 1, "%d samples of %s%r" % (len(got), name, labels))
        return got[0]

    def series(self, name):
        return [(l, float(v)) for n, l, v in self.samples if n == name]


def scrape(srv):
    r = get(srv, "/metrics")
    eq(r.status, 200, "GET /metrics status")
    return Metrics(r.text())
