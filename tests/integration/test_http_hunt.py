"""The HTTP side where the other tests did not look: `tubed-cli top` in a
real terminal (tmux) at sizes and across a server restart, the status page
in headless chromium under server states (replica, primary, draining, no
tubes, names that look like JavaScript), /metrics under those states
(promtool, one HELP/TYPE per family, one label set per family, counters
that never go down across a reload), and HTTP requests the other tests do
not send (Expect: 100-continue, absolute-form with an upper-case scheme,
a thousand scrapes at once).

These fail on the code before their fix (see the commit that added each):
test_top_window_too_small_for_a_row, test_top_rates_restart_after_a_reconnection,
test_tubes_json_is_utf8_whatever_the_bytes,
test_listeners_sharing_a_name_are_one_series,
test_a_section_named_like_a_builtin_listener, test_unread_replies_have_a_budget,
test_page_rates_restart_on_another_server,
test_cli_never_writes_the_servers_control_bytes.
The others are checks that passed when written and stay to keep it so.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading

import harness
from harness import Server, check, eq, no_server, wait_until
from cli_util import Tmux, cli_path, top_script
from http_util import MetricsServer, get
from repl_util import Cluster, wait_caught_up
from server import Tubed
from test_cli import _cell, _header, _restored, _row
from test_metrics import promtool
from test_status_page import chromium

SERVER = "none"

# ------------------------------------------------------------ top (tmux)


@no_server
def test_top_window_too_small_for_a_row(binary):
    """At 6 rows no tube row fits under the head and the table header: the
    footer said "tubes 1-0 of 3" (a range that ends before it starts)."""
    srv = Server(binary).start()
    try:
        c = srv.client()
        for t in ("a-b", "c+d"):
            c.use(t)
            c.put(b"x")
        with Tmux(top_script(cli_path(binary), srv.port), cols=60, rows=20) as tm:
            tm.wait_screen(lambda s: _row(s, "c+d") is not None, "the table")
            tm.resize(60, 6)
            s = tm.wait_screen(lambda s: _row(s, "c+d") is None and "3 tubes" in s,
                               "the footer at 6 rows", 10)
            check(not re.search(r"tubes \d+-\d+ of", s), "a range with no row shown:\n" + s)
            check("3 tubes: no room to list them" in s, "footer:\n" + s)
            # 20x5 and back to a big window: the table is there again, from the top
            tm.resize(20, 5)
            s = tm.wait_screen(lambda s: len(s.splitlines()) <= 5 and "TUBE" in s,
                               "a redraw at 20x5", 10)
            for ln in s.splitlines():
                check(len(ln.rstrip()) <= 20, "line wider than 20: %r" % ln)
            tm.resize(300, 100)
            tm.wait_screen(lambda s: _row(s, "a-b") is not None and _row(s, "default")
                           is not None and "no room" not in s, "the table at 300x100", 10)
            tm.keys("q")
            _restored(tm, "q after resizes")
    finally:
        problems = srv.stop()
        check(not problems, "; ".join(problems))


class GateProxy:
    """A TCP proxy for top's one connection: `backend` is the port it
    forwards to; while `open` is false a connection is closed at once (top
    shows 'retrying'). With `stall_at` set, the client's stall_at-th `stats`
    command (and all after it) is held back, so the screen keeps the sample
    before it for as long as the test looks."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((harness.HOST, 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.backend = None
        self.open = True
        self.stall_at = None
        self.pairs = []
        self.lock = threading.Lock()
        self.done = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done:
            try:
                cs, _ = self.lsock.accept()
            except OSError:
                return
            if not self.open or self.done:
                cs.close()
                continue
            try:
                bs = socket.create_connection((harness.HOST, self.backend), timeout=5)
            except OSError:
                cs.close()
                continue
            bs.settimeout(None)
            with self.lock:
                self.pairs.append((cs, bs))
            threading.Thread(target=self._up, args=(cs, bs, self.stall_at),
                             daemon=True).start()
            threading.Thread(target=self._down, args=(bs, cs), daemon=True).start()

    def _up(self, cs, bs, stall_at):
        """Client to server, line by line, counting `stats` commands."""
        pending, seen, stalled = b"", 0, False
        while True:
            try:
                d = cs.recv(65536)
            except OSError:
                d = b""
            if not d:
                break
            if stalled:
                continue
            pending += d
            while b"\n" in pending:
                ln, pending = pending.split(b"\n", 1)
                if ln.rstrip(b"\r") == b"stats":
                    seen += 1
                    if stall_at and seen >= stall_at:
                        stalled = True
                        break
                try:
                    bs.sendall(ln + b"\n")
                except OSError:
                    return
        self._close(cs, bs)

    def _down(self, bs, cs):
        while True:
            try:
                d = bs.recv(65536)
                if not d:
                    break
                cs.sendall(d)
            except OSError:
                break
        self._close(cs, bs)

    @staticmethod
    def _close(*socks):
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Close every connection now."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for cs, bs in pairs:
            self._close(cs, bs)
            cs.close()
            bs.close()

    def close(self):
        self.done = True
        self.cut()
        self.lsock.close()


@no_server
def test_top_rates_restart_after_a_reconnection(binary):
    """top compared the first sample from a restarted server with the last
    one from the old: a tube the new server had 30 puts in and the old 1
    showed PUT/S (30-1)/(seconds between, outage included), and puts/s the
    same for the server. After a reconnection the rates start afresh ("-")."""
    a = Server(binary).start()
    b = None
    proxy = GateProxy()
    try:
        ca = a.client()
        ca.use("t")
        ca.put(b"old")
        proxy.backend = a.port
        cli = cli_path(binary)
        with Tmux(top_script(cli, proxy.port, "--timeout", "1"), cols=120, rows=20) as tm:
            head = _header(tm.wait_screen(lambda s: _header(s) is not None, "the table"))
            ready, puts = head.index("READY"), head.index("PUT/S")
            # two samples of A: a rate is shown (0.0: nothing moves)
            tm.wait_screen(lambda s: _cell(s, "t", puts) == "0.0",
                           "a PUT/S from two samples of the old server")
            proxy.open = False
            proxy.cut()
            tm.wait_screen(lambda s: "retrying" in s, "the lost connection shown", 10)
            # the new server: the same tube, more puts than the old one had
            b = Server(binary).start()
            cb = b.client()
            cb.use("t")
            for _ in range(30):
                cb.put(b"new")
            proxy.backend = b.port
            proxy.stall_at = 2          # one sample of B, then nothing more
            proxy.open = True
            s = tm.wait_screen(lambda s: _cell(s, "t", ready) == "30",
                               "the new server's first sample", 15)
            eq(_row(s, "t")[puts], "-", "t's PUT/S from the first sample after a "
               "reconnection:\n" + s)
            check(re.search(r"puts/s -", s), "server puts/s after a reconnection:\n" + s)
            tm.keys("q")
            _restored(tm, "q")
    finally:
        proxy.close()
        problems = a.stop() + (b.stop() if b else [])
        check(not problems, "; ".join(problems))


# ------------------------------------------------------------ /metrics


def check_exposition(text, what):
    """promtool clean; each family's HELP and TYPE once, before its samples;
    one label-name set per family; no series twice. Returns
    {family: type}, {series: value}."""
    r = subprocess.run([promtool(), "check", "metrics"], input=text.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    eq((r.returncode, r.stdout.decode(errors="replace")), (0, ""),
       "promtool check metrics on %s" % what)
    helps, types, labelsets, series = {}, {}, {}, {}
    for ln in text.splitlines():
        if ln.startswith("# HELP ") or ln.startswith("# TYPE "):
            kind, name = ln.split(" ", 3)[1:3]
            seen = helps if kind == "HELP" else types
            check(name not in seen, "%s: second %s for %s" % (what, kind, name))
            check(not any(k.split("{")[0] == name for k in series),
                  "%s: %s %s after its samples" % (what, kind, name))
            seen[name] = ln.split(" ", 3)[3] if kind == "TYPE" else True
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$', ln)
        check(m, "%s: sample line %r" % (what, ln))
        name, labels, value = m.groups()
        check(name in types and name in helps, "%s: %s has no HELP/TYPE" % (what, name))
        names = tuple(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', labels or ""))
        if name in labelsets:
            eq(names, labelsets[name], "%s: label names of %s" % (what, name))
        labelsets[name] = names
        key = name + (labels or "")
        check(key not in series, "%s: series %s twice" % (what, key))
        series[key] = float(value)
    return types, series


def counters(text):
    types, series = check_exposition(text, "a scrape")
    return {k: v for k, v in series.items() if types[k.split("{")[0]] == "counter"}


def busy(srv, tubes=("a-b", "a+b", "a;b", "a$b", "a(b)", "x.y/z_w")):
    """Jobs in tubes whose names need care, one paused, a waiting worker,
    commands of many kinds. Returns the connections (keep them open)."""
    p, w = srv.client(), srv.client()
    for t in tubes:
        p.expect("use %s" % t, "USING %s" % t)
        for _ in range(3):
            p.put(b"j")
        w.watch(t)
    p.expect("pause-tube a;b 600", "PAUSED")
    jid, _ = w.reserve(timeout=0)
    w.expect("bury %d 1" % jid, "BURIED")
    jid, _ = w.reserve(timeout=0)
    w.expect("delete %d" % jid, "DELETED")
    return p, w


@no_server
def test_metrics_clean_plain_paused_draining(binary):
    with MetricsServer(binary) as srv:
        conns = busy(srv)
        types, series = check_exposition(get(srv, "/metrics").text(), "a busy server")
        eq(series['tubed_tube_paused{tube="a;b"}'], 1.0, "a;b paused")
        for t in ("a-b", "a+b", "a$b", "a(b)", "x.y/z_w"):
            eq(series['tubed_tube_jobs{tube="%s",state="ready"}' % t] +
               series['tubed_tube_jobs{tube="%s",state="buried"}' % t], 3.0 if t != "a-b"
               else 2.0, "jobs of %s" % t)
        srv.signal(signal.SIGUSR1)            # drain
        wait_until(lambda: get(srv, "/healthz").status == 503, what="draining")
        types, series = check_exposition(get(srv, "/metrics").text(), "a draining server")
        eq(series["tubed_draining"], 1.0, "tubed_draining")
        del conns


@no_server
def test_metrics_ten_thousand_tubes(binary):
    with MetricsServer(binary) as srv:
        c = srv.client()
        names = ["t%05d-$(x)+y;z" % i for i in range(10000)]
        c.send(b"".join(b"watch %s\r\n" % n.encode() for n in names))
        for i in range(10000):
            eq(c.read_line(), b"WATCHING %d" % (i + 2), "watch %d" % i)
        # Each request on its own connection: the server closes a
        # keep-alive connection 10 s after the last bytes of its replies
        # went out, and a client slowed down by a loaded machine (or by
        # the other tests' threads in this process) could still be reading
        # the scrape's tail from its socket then ('connection closed' for
        # the second request).
        with srv.http() as h:
            h.request("GET", "/metrics", {"Connection": "close"})
            r = h.read_response(timeout=30)
            eq(r.status, 200, "status")
            types, series = check_exposition(r.text(), "10,000 tubes")
            eq(series["tubed_tubes"], 10001.0, "tubed_tubes")
            eq(sum(1 for k in series if k.startswith("tubed_tube_jobs{")), 4 * 10001,
               "tubed_tube_jobs series")
        with srv.http() as h:
            h.request("GET", "/tubes.json", {"Connection": "close"})
            r = h.read_response(timeout=30)
            tubes = json.loads(r.body.decode())["tubes"]
            eq(len(tubes), 10001, "tubes in /tubes.json")
            check(names[1234] in tubes, "a name in /tubes.json")


RELOAD_CONF = """\
[listen prod]
address = 127.0.0.1:{port}
role = producer
tubes = app-*

[tube app-*]
max_items = {max}
"""


@no_server
def test_counters_never_go_down_across_reloads(binary):
    """SIGHUP with a config that changes tube policies and a listener's
    role: every counter of the scrape before is in the scrape after, not
    lower (a counter that resets breaks rate())."""
    # The [listen] port is in the file: held, and moved with the file
    # rewritten if the first start collides on it (server.Tubed ports=).
    res = harness.PortReservation()
    with Tubed(binary, conf=lambda: RELOAD_CONF.format(port=res.port, max=100),
               ports=[res], metrics=True) as srv:
        port = res.port
        conns = busy(srv)
        p = socket.create_connection((harness.HOST, port), timeout=5)
        f = p.makefile("rwb")
        for cmd, want in ((b"use app-x\r\n", b"USING app-x"), (b"put 0 0 0 1\r\nx\r\n",
                          b"INSERTED"), (b"use other\r\n", b"NOT_ALLOWED")):
            f.write(cmd)
            f.flush()
            check(f.readline().startswith(want), "prod listener: %r" % cmd)
        before = counters(get(srv, "/metrics").text())
        check(before['tubed_listener_refused_commands_total{listener="prod"}'] >= 1,
              "a refused command counted")
        for i, mx in enumerate((5, 100, 7)):
            srv.reload(RELOAD_CONF.format(port=port, max=mx))
            after = counters(get(srv, "/metrics").text())
            for k, v in before.items():
                check(k in after, "reload %d: counter %s gone" % (i, k))
                check(after[k] >= v, "reload %d: %s went down, %s -> %s"
                      % (i, k, v, after[k]))
            before = after
        p.close()
        del conns


@no_server
def test_metrics_and_page_replica_and_primary(binary):
    """A primary with a replica (sync_replicas 1) and its replica: /metrics
    clean and the replication families there, /tubes.json valid, the status
    page in chromium with no console error and the role shown."""
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--sync-replicas", "1")
        r = cl.node("r", replica_of=p)
        c = p.bs()
        for t in ("a-b", "__proto__", "constructor"):
            c.use(t)
            c.put(b"x")
        wait_caught_up(p, r)
        for node, role in ((p, "primary"), (r, "replica")):
            text = node.get("/metrics").text()
            types, series = check_exposition(text, "the " + role)
            eq(series["tubed_replication_primary"], 1.0 if role == "primary" else 0.0,
               role + ": tubed_replication_primary")
            if role == "primary":
                eq(len([k for k in series
                        if k.startswith("tubed_replication_replica_lag_records{")]), 1,
                   "one replica's lag series")
            data = json.loads(node.get("/tubes.json").body.decode())
            eq(data["replication"]["role"], role, "role in /tubes.json")
            dom = page_dom(node.hport, role)
            check(re.search(r'id="repl-role"[^>]*data-value="%s"' % role, dom),
                  "%s: role badge in the page" % role)
            for t in ("a-b", "__proto__", "constructor"):
                check('data-tube="%s"' % t in dom, "%s: row of %s" % (role, t))


# ------------------------------------------------------------ status page


def page_dom(port, what):
    """Load the status page in headless chromium (its scripts run for a few
    refreshes of virtual time); fail on any console message from the page
    (an exception, a console.error) and return the DOM."""
    prof = tempfile.mkdtemp(prefix="tubed-chromium-")
    try:
        r = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
             "--user-data-dir=" + prof, "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=7000", "--dump-dom",
             "http://127.0.0.1:%d/" % port],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    finally:
        shutil.rmtree(prof, ignore_errors=True)
    dom = r.stdout.decode("utf-8", "replace")
    console = [ln for ln in r.stderr.decode("utf-8", "replace").splitlines()
               if ":CONSOLE(" in ln or ":CONSOLE:" in ln or "Uncaught" in ln]
    eq(console, [], "%s: console messages of the page" % what)
    check('id="status"' in dom and re.search(r'id="status"[^>]*class="ok"', dom),
          "%s: the page got its data:\n%s" % (what, dom[:2000]))
    return dom


@no_server
def test_page_console_clean_empty_hostile_draining(binary):
    with MetricsServer(binary) as srv:
        dom = page_dom(srv.metrics_port, "a server with only default")
        eq(re.findall(r'data-tube="([^"]*)"', dom), ["default"], "rows")
        c = srv.client()
        names = ["__proto__", "constructor", "hasOwnProperty", "toString", "a;b",
                 "$(x)", "x+y/z.w_v$", "dash-", "(paren)"]
        for n in names:
            c.use(n)
            c.put(b"x")
        c.expect("pause-tube (paren) 600", "PAUSED")
        srv.signal(signal.SIGUSR1)
        wait_until(lambda: get(srv, "/healthz").status == 503, what="draining")
        dom = page_dom(srv.metrics_port, "hostile names, draining")
        check(re.search(r'id="draining"[^>]*data-value="true"', dom), "draining badge")
        for n in names:
            check('data-tube="%s"' % n.replace("&", "&amp;") in dom, "row of %s" % n)
        data = json.loads(get(srv, "/tubes.json").body.decode())
        eq(sorted(data["tubes"]), sorted(names + ["default"]), "tubes in /tubes.json")
        eq(data["server"]["draining"], True, "draining in /tubes.json")


# ------------------------------------------------------------ HTTP


@no_server
def test_http_requests_others_do_not_send(binary):
    with MetricsServer(binary) as srv:
        with srv.http() as h:
            # Expect: 100-continue with no body: the answer, no interim 100
            h.request("GET", "/healthz", {"Expect": "100-continue"})
            r = h.read_response()
            eq((r.status, r.body), (200, b"ok\n"), "GET with Expect")
            # the same with a body announced: answered, closed, body never read
            h.request("POST", "/metrics", {"Expect": "100-continue", "Content-Length": "5"})
            r = h.read_response()
            eq((r.status, r.header("Allow"), r.header("Connection")),
               (405, "GET, HEAD", "close"), "POST with Expect")
            h.expect_closed()
        with srv.http() as h:
            h.request("GET", "HTTP://Example.ORG/healthz?x=%20", {"Connection": "close"})
            r = h.read_response()
            eq((r.status, r.body), (200, b"ok\n"), "absolute-form, upper-case scheme")
        with srv.http() as h:
            h.send(b"GET /tubes.json HTTP/1.0\r\n\r\n")
            r = h.read_response()
            eq((r.status, r.header("Content-Type"), r.header("Connection")),
               (200, "application/json", "close"), "HTTP/1.0")
            json.loads(r.body.decode())
            h.expect_closed()


@no_server
def test_thousand_scrapes_at_once(binary):
    """1,000 connections each send GET /metrics before any reads: every one
    gets the whole reply (its Content-Length of bytes), then the close."""
    with MetricsServer(binary) as srv:
        conns = busy(srv)
        socks = []
        try:
            for _ in range(1000):
                s = socket.create_connection((harness.HOST, srv.metrics_port), timeout=30)
                socks.append(s)
            for s in socks:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            lengths = set()
            for i, s in enumerate(socks):
                data = b""
                while True:
                    d = s.recv(1 << 16)
                    if not d:
                        break
                    data += d
                head, _, body = data.partition(b"\r\n\r\n")
                check(head.startswith(b"HTTP/1.1 200 "), "scrape %d: %r" % (i, head[:80]))
                m = re.search(rb"\r\nContent-Length: (\d+)", head)
                eq(len(body), int(m.group(1)), "scrape %d: body length" % i)
                lengths.add(len(body))
            check(len(lengths) >= 1, "bodies")
        finally:
            for s in socks:
                s.close()
        eq(get(srv, "/healthz").status, 200, "healthz after")
        del conns


@no_server
def test_tubes_json_is_utf8_whatever_the_bytes(binary):
    """A replica of a primary on a Unix socket whose path is Latin-1
    (caf\\xe9.sock): /tubes.json carried the byte raw in "primary", which is
    not UTF-8, and a strict reader (json.loads on the bytes, jq) refused the
    whole document. Now each stray byte is \\ufffd; the page still shows."""
    tmp = tempfile.mkdtemp(prefix="tubed-latin1-")
    path = os.path.join(tmp, "caf\udce9.sock")     # the byte 0xe9 (surrogateescape)
    for d in ("p", "r"):
        os.mkdir(os.path.join(tmp, d))
    p = Server(binary, ["-b", os.path.join(tmp, "p")], unix_path=path).start()
    try:
        with MetricsServer(binary, ["-b", os.path.join(tmp, "r"), "--replica-of", "unix:" + path]) as r:
            pc = socket.socket(socket.AF_UNIX)
            pc.connect(os.fsencode(path))
            pc.sendall(b"use latin\r\nput 0 0 0 1\r\nx\r\n")
            got = b""
            while got.count(b"\r\n") < 2:
                got += pc.recv(100)
            pc.close()

            def caught_up():
                d = json.loads(get(r, "/tubes.json").body)   # bytes: strict UTF-8
                return d if "latin" in d["tubes"] and d["replication"]["connected"] else None
            d = harness.wait_for(caught_up, "the replica to have the job")
            eq(d["replication"]["primary"], "unix:" + os.path.join(tmp, "caf\ufffd.sock"),
               "primary in /tubes.json")
            check_exposition(get(r, "/metrics").text(), "the replica")
            dom = page_dom(r.metrics_port, "a replica of a Latin-1 path")
            check("caf\ufffd.sock" in dom, "the primary shown in the page")
    finally:
        problems = p.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        check(not problems, "; ".join(problems))


@no_server
def test_binlog_unhealthy_metrics_json_page(binary):
    """While a binlog write fails (pwrite EIO through an LD_PRELOAD shim):
    /healthz 503 with the reason, /metrics clean with tubed_binlog_healthy
    0, /tubes.json valid, the page without console errors and its badge
    'unhealthy'; and all back once the disk works again."""
    import shim_util
    tmp = tempfile.mkdtemp(prefix="tubed-unhealthy-")
    try:
        flag = os.path.join(tmp, "fail-pwrite")
        pre = shim_util.build(binary, tmp, shim_util.DISK_FAULTS_C)
        env = {"LD_PRELOAD": pre, "FAIL_PWRITE_FLAG": flag}
        os.mkdir(os.path.join(tmp, "b"))
        with MetricsServer(binary, ["-b", os.path.join(tmp, "b"), "-f", "0"], env=env) as srv:
            c = srv.client()
            c.use("a;b")
            c.put(b"before")
            open(flag, "w").close()
            w = srv.client()
            w.send(b"put 0 0 60 4\r\nlost\r\n")
            w.expect_closed(timeout=10)
            r = get(srv, "/healthz")
            eq(r.status, 503, "/healthz status")
            check(r.body.startswith(b"binlog unhealthy: ") and r.body.endswith(b"\n")
                  and r.body.count(b"\n") == 1, "/healthz body %r" % r.body)
            types, series = check_exposition(get(srv, "/metrics").text(), "binlog unhealthy")
            eq(series["tubed_binlog_healthy"], 0.0, "tubed_binlog_healthy")
            data = json.loads(get(srv, "/tubes.json").body)
            eq(data["server"]["binlog-healthy"], False, "binlog-healthy in /tubes.json")
            dom = page_dom(srv.metrics_port, "binlog unhealthy")
            check(re.search(r'id="binlog-badge"[^>]*>unhealthy<', dom), "badge:\n" + dom[:3000])
            os.unlink(flag)
            wait_until(lambda: get(srv, "/healthz").status == 200, what="recovery")
            types, series = check_exposition(get(srv, "/metrics").text(), "recovered")
            eq(series["tubed_binlog_healthy"], 1.0, "tubed_binlog_healthy after")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
def test_http_listener_that_shows_no_tube(binary):
    """An http [listen] section whose tubes match none: /metrics clean with
    no tube series, /tubes.json with an empty "tubes", the page says 0
    tubes with no console error."""
    res = harness.PortReservation()     # held; moved by a first start's collision
    conf = "[listen h]\naddress = 127.0.0.1:%d\nprotocol = http\ntubes = nothing-*\n"
    with Tubed(binary, conf=lambda: conf % res.port, ports=[res], metrics=True) as srv:
        port = res.port
        c = srv.client()
        c.use("other")
        c.put(b"x")
        with _Port(port) as h:
            types, series = check_exposition(get(h, "/metrics").text(), "no tube")
            eq([k for k in series if "tube=" in k], [], "tube series")
            eq(series["tubed_tubes"], 2.0, "tubed_tubes counts the server's tubes")
            eq(json.loads(get(h, "/tubes.json").body)["tubes"], {}, "tubes")
        dom = page_dom(port, "a listener with no tube")
        check(re.search(r'id="tube-count">0 tubes<', dom), "0 tubes shown")


class _Port:
    """What http_util.get needs of a server: http() on a given port."""

    def __init__(self, port):
        self.port = port

    def http(self, timeout=5.0, rcvbuf=None):
        from http_util import HttpConn
        return HttpConn(self.port, timeout, rcvbuf)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@no_server
def test_real_prometheus_scrapes_primary_and_replica(binary):
    """Prometheus scraping a primary (with its replica attached) and the
    replica: both targets up with no scrape error, every sample kept."""
    from test_metrics import Prometheus, prom_query
    import urllib.request
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0", "--sync-replicas", "1")
        r = cl.node("r", replica_of=p)
        c = p.bs()
        c.use("a(b)")
        c.put(b"x")
        wait_caught_up(p, r)
        targets = '127.0.0.1:%d", "127.0.0.1:%d' % (p.hport, r.hport)
        with Prometheus(targets) as prom:
            prom.wait_value('count(up{job="tubed"} == 1)', 2)
            prom.wait_value('tubed_tube_jobs{tube="a(b)",state="ready",instance="127.0.0.1:%d"}'
                            % r.hport, 1)
            prom.wait_value('sum(tubed_replication_primary)', 1)
            prom.wait_value('count(scrape_samples_scraped{job="tubed"} - '
                            'scrape_samples_post_metric_relabeling{job="tubed"} == 0)', 2)
            url = "http://127.0.0.1:%d/api/v1/targets" % prom.port
            with urllib.request.urlopen(url, timeout=5) as f:
                active = json.loads(f.read().decode())["data"]["activeTargets"]
            eq(sorted((t["health"], t["lastError"]) for t in active),
               [("up", ""), ("up", "")], "targets' health and last error")
            check(prom_query(prom.port, "up"), "up has samples")


# ------------------------------------------------------------ listeners

_ACTIVATE2 = """
import os, sys
a, b = int(sys.argv[1]), int(sys.argv[2])
os.dup2(a, 3)
os.dup2(b, 4)
for fd in (3, 4):
    os.set_inheritable(fd, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = "2"
os.environ["LISTEN_FDNAMES"] = "tubed.socket:tubed.socket"
os.execv(sys.argv[3], sys.argv[3:])
"""


def _listener_series(text):
    types, series = check_exposition(text, "listeners")
    return {k: v for k, v in series.items() if k.startswith("tubed_listener_")}


@no_server
def test_listeners_sharing_a_name_are_one_series(binary):
    """Two sockets from systemd without FileDescriptorName= (a unit's IPv4
    and IPv6 sockets: both named after the unit) gave two samples
    tubed_listener_connections{listener="tubed.socket"}: an exposition
    with a series twice, of which Prometheus keeps one. Listeners of one
    name are now one series, their sum."""
    import sys
    socks = []
    for _ in range(2):
        s = socket.socket()
        s.bind((harness.HOST, 0))
        s.listen(16)
        socks.append(s)
    # The metrics port is held (PortReservation) until tubed binds it; a
    # first start that collides on it is tried again on another.
    hres = harness.PortReservation()
    errf = tempfile.NamedTemporaryFile(prefix="tubed-http-hunt-")
    try:
        proc = harness.spawn_on(
            [hres], lambda: [sys.executable, "-c", _ACTIVATE2, str(socks[0].fileno()),
                             str(socks[1].fileno()), binary, "-l", harness.HOST,
                             "--metrics-port", str(hres.port)],
            "tubed on the metrics port", log_path=errf.name,
            pass_fds=[s.fileno() for s in socks])
    except BaseException:
        hres.close()
        errf.close()
        for s in socks:
            s.close()
        raise
    hres.close()
    hport = hres.port
    try:
        ports = [s.getsockname()[1] for s in socks]
        # 30 s: a guard against a hang, not a measure (a loaded machine, or
        # ASan, may take seconds to answer the first connection)
        held = [socket.create_connection((harness.HOST, p), timeout=30) for p in ports * 2]
        for c in held:
            c.sendall(b"list-tubes\r\n")
            check(c.recv(100).startswith(b"OK "), "a reply on the inherited socket")
        series = _listener_series(get(_Port(hport), "/metrics").text())
        eq(series.get('tubed_listener_connections{listener="tubed.socket"}'), 4.0,
           "the connections of both sockets under one name: %r" % series)
        for c in held:
            c.close()
    finally:
        proc.terminate()
        proc.wait(15)
        for s in socks:
            s.close()
        errf.seek(0)
        out = errf.read().decode(errors="replace")
        errf.close()
        check("Sanitizer" not in out and proc.returncode == 0,
              "tubed exit %s: %s" % (proc.returncode, out[-800:]))


@no_server
def test_a_section_named_like_a_builtin_listener(binary):
    """[listen main] and [listen metrics] beside the -l/-p and
    --metrics-port listeners: one series per name (summed), not two."""
    # Held; moved, the file rewritten, by a first start that collides.
    res = [harness.PortReservation(), harness.PortReservation()]
    conf = ("[listen main]\naddress = 127.0.0.1:%d\nrole = producer\n\n"
            "[listen metrics]\naddress = 127.0.0.1:%d\nprotocol = http\n")
    with Tubed(binary, conf=lambda: conf % tuple(r.port for r in res), ports=res,
               metrics=True) as srv:
        ports = [r.port for r in res]
        a = srv.client()
        b = socket.create_connection((harness.HOST, ports[0]), timeout=5)
        b.sendall(b"reserve-with-timeout 0\r\n")
        eq(b.recv(100), b"NOT_ALLOWED\r\n", "a producer's reserve")
        for port in (srv.hport, ports[1]):
            series = _listener_series(get(_Port(port), "/metrics").text())
            eq(series['tubed_listener_connections{listener="main"}'], 2.0,
               "main: the admin client and the section's")
            eq(series['tubed_listener_refused_commands_total{listener="main"}'], 1.0,
               "main: the section's refusal")
            eq(series['tubed_listener_connections{listener="metrics"}'], 1.0,
               "metrics: this scrape")
        b.close()
        del a


@no_server
def test_unread_replies_have_a_budget(binary):
    """Clients that ask for /metrics and never read: each one's reply
    waited whole in its output (a scrape of 10,000 tubes is megabytes), so
    200 such clients held 700 MB of the server. Once 64 MiB wait unread,
    a scrape now answers 503 and closes; once they are gone, 200 again."""
    with MetricsServer(binary) as srv:
        c = srv.client()
        pad = "x" * 30
        c.send(b"".join(b"watch t%05d-%s\r\n" % (i, pad.encode()) for i in range(10000)))
        for i in range(10000):
            eq(c.read_line(), b"WATCHING %d" % (i + 2), "watch %d" % i)
        held, statuses = [], []
        try:
            while len(held) < 60 and b"503" not in statuses:
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(10)
                s.connect((harness.HOST, srv.metrics_port))
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
                head = b""
                while len(head) < 12:
                    d = s.recv(12 - len(head))
                    check(d, "closed before the status line")
                    head += d
                statuses.append(head[9:12])
                held.append(s)
            check(b"503" in statuses, "60 clients that do not read: no 503 (%r)" % statuses)
            eq(statuses[0], b"200", "the first scrape")
            # the 503 is whole, with Connection: close, and then the close
            s = held[-1]
            rest = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                rest += d
            head, _, body = rest.partition(b"\r\n\r\n")
            check(b"\r\nConnection: close" in head, "503 head: %r" % head)
            m = re.search(rb"\r\nContent-Length: (\d+)", head)
            eq(len(body), int(m.group(1)), "503 body length")
        finally:
            for s in held:
                s.close()
        # The server renders 10,000 tubes before it sends a byte: seconds
        # under ASan on a loaded machine ('no response head: nothing came
        # for 5.0 s'); 60 s is a hang's ceiling.
        wait_until(lambda: get(srv, "/metrics", timeout=60).status == 200,
                   what="a scrape once they left")


@no_server
def test_replica_without_its_primary(binary):
    """A replica whose primary does not answer: /replica 503 with the
    reason, /metrics clean (connected 0), /tubes.json valid, the page shows
    'not connected' with the error and logs nothing to the console."""
    tmp = tempfile.mkdtemp(prefix="tubed-lonely-")
    try:
        # Held (bound, never listening) while the replica runs: its
        # connects are refused, and no other test's server can answer.
        with harness.PortReservation() as dead, \
                MetricsServer(binary, ["-b", tmp, "--replica-of",
                                       "127.0.0.1:%d" % dead.port]) as r:
            wait_until(lambda: json.loads(get(r, "/tubes.json").body)["replication"]
                       ["last-error"] != "", what="the replica's first failed connect")
            got = get(r, "/replica")
            eq(got.status, 503, "/replica")
            check(got.body.startswith(b"replica, not connected to its primary: "),
                  "/replica body %r" % got.body)
            types, series = check_exposition(get(r, "/metrics").text(), "a lonely replica")
            eq((series["tubed_replication_primary"], series["tubed_replication_connected"]),
               (0.0, 0.0), "primary, connected")
            dom = page_dom(r.metrics_port, "a lonely replica")
            check(re.search(r'id="repl-line"[^>]*>[^<]*not connected: ', dom),
                  "the page says not connected")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class SwitchingFront:
    """An HTTP front for the status page, as a virtual IP or a load
    balancer is on a failover: '/' and the first `switch_after` fetches of
    /tubes.json come from server a, every later one from server b."""

    def __init__(self, a_port, b_port, switch_after):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        front = self
        self.fetches = 0

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                port = a_port
                if self.path.startswith("/tubes.json"):
                    front.fetches += 1
                    if front.fetches > switch_after:
                        port = b_port
                r = get(_Port(port), self.path.split("?")[0])
                self.send_response(r.status)
                self.send_header("Content-Type", r.header("Content-Type"))
                self.send_header("Content-Length", str(len(r.body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(r.body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer((harness.HOST, 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@no_server
def test_page_rates_restart_on_another_server(binary):
    """The page took a new server for the old one when its uptime was not
    lower (a failover behind a virtual IP to a server up for longer): a
    tube's puts/s compared the new server's counters with the old one's.
    Another instance id now starts the history afresh, as a restart does."""
    with MetricsServer(binary) as b:
        cb = b.client()
        cb.use("t")
        for _ in range(30):
            cb.put(b"x")
        wait_until(lambda: json.loads(get(b, "/tubes.json").body)["server"]["uptime"] >= 2,
                   what="b up for 2 s")
        with MetricsServer(binary) as a:
            ca = a.client()
            ca.use("t")
            ca.put(b"x")
            front = SwitchingFront(a.metrics_port, b.metrics_port, 2)
            try:
                dom = page_dom(front.port, "a failover to a server up for longer")
            finally:
                front.close()
            check(front.fetches > 3, "the page fetched %d times" % front.fetches)
            m = re.search(r'<tr data-tube="t">.*?data-key="current-jobs-ready" '
                          r'data-value="(\d+)".*?data-key="puts-per-sec" data-value="([^"]*)"',
                          dom)
            check(m, "the row of t:\n" + dom[:3000])
            eq(m.group(1), "30", "t's ready jobs: the new server's")
            check(m.group(2) in ("", "0"), "t's puts/s after the switch: %r (30 puts "
                  "of the new server counted against 1 of the old)" % m.group(2))


# ------------------------------------------------------------ the CLI's terminal

EVIL_VERSION = "1.0\x1b]2;PWNED\x07\x9b31m"          # sets the window title
EVIL_TUBE = "evil\x1b]52;c;cHduZWQ=\x07\x1b[2J"       # writes the clipboard, clears


def _evil_fake():
    from cli_fake import FakeServer
    stats = ("---\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: 1\n"
             "current-jobs-reserved: 0\ncurrent-jobs-delayed: 0\n"
             "current-jobs-buried: 0\ncmd-put: 0\ncmd-delete: 0\n"
             "current-connections: 1\ncurrent-waiting: 0\nuptime: 5\n"
             "version: \"%s\"\ndraining: false\nid: 0123456789abcdef\n"
             "hostname: \"fake\"\n" % EVIL_VERSION).encode("latin-1")
    fake = FakeServer(replies={"stats": b"OK %d\r\n%s\r\n" % (len(stats), stats)})
    fake.tubes.add(EVIL_TUBE)
    fake.add_jobs(EVIL_TUBE, "ready", 1)
    return fake


@no_server
def test_cli_never_writes_the_servers_control_bytes(binary):
    """A server's strings (the version in `stats`, a tube name in
    `stats-tubes`) went to the terminal raw: a server could set top's
    window title, write the clipboard (OSC 52), clear the screen. Control
    bytes, C1 controls and bytes that are not UTF-8 are now '?'."""
    from cli_util import run_cli
    with _evil_fake() as fake:
        with Tmux(top_script(cli_path(binary), fake.port), cols=120, rows=20) as tm:
            title = tm.fmt("#{pane_title}")
            s = tm.wait_screen(lambda s: "evil?]52;c;" in s, "the tube row, made harmless")
            check("1.0?]2;PWNED??31m" in s, "the version, made harmless:\n" + s)
            eq(tm.fmt("#{pane_title}"), title, "the window title")
            tm.keys("q")
            _restored(tm, "q")
        for args in (["stats"], ["tubes"]):
            r = run_cli(binary, fake.port, *args, env={"NO_COLOR": "1"})
            r.ok()
            bad = [b for b in r.out if (b < 0x20 and b != 0x0a) or b in (0x7f, 0x9b)]
            eq(bad, [], "control bytes in `tubed-cli %s`: %r" % (args[0], r.out[:400]))
            check(b"evil?]52;c;" in r.out or b"PWNED" in r.out, "the text is there: %r"
                  % r.out[:400])
        r = run_cli(binary, fake.port, "--json", "tubes")
        r.ok()
        eq(json.loads(r.out)[EVIL_TUBE]["name"], EVIL_TUBE, "--json keeps the name exactly")
