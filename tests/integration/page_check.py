#!/usr/bin/env python3
"""page_check.py -- the status page (GET /) checked in a real headless browser.

    page_check.py BASE_URL [--screenshot FILE] [--budget MS]
        Loads BASE_URL/ in Debian's headless chromium, lets its scripts run
        (virtual time, so about five 2-second refreshes happen at once),
        dumps the DOM and checks that every tube of BASE_URL/tubes.json has
        its row (tr[data-tube]) with its counts (td[data-key], data-value and
        the text shown), that the server's counts are shown, that no markup
        came from the data (tube names are text), and optionally saves a
        screenshot. The server must hold still while it runs (no load):
        the page's last fetch and this script's must see the same counts.
        Exit 0 when all is well, 1 with the problems listed otherwise.

    page_check.py --self-test [--tubes N] [--screenshot FILE]
        The same against a fake server on 127.0.0.1 (N tubes, default 1000,
        hostile names among them) that serves src/proto/http/status.html.

    page_check.py --serve [--port P] [--tubes N]
        Only the fake server, with counts that keep changing: for working
        on the page with a browser.
"""
import argparse
import html.parser
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "src", "proto", "http", "status.html")

# td[data-key] cells whose data-value must equal the tube's stats-tubes value.
TUBE_KEYS = ["current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
             "current-jobs-buried", "oldest-ready-age", "current-waiting"]
SERVER_KEYS = ["current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
               "current-jobs-buried", "current-connections", "total-connections",
               "current-producers", "current-workers", "current-waiting", "current-tubes",
               "pid", "binlog-bytes", "binlog-live-bytes", "job-memory"]
HOSTILE = ["<img src=x onerror=alert(1)>", "$(x)", "a;b", "\"quoted\" & 'apos'",
           "</script><script>alert(2)</script>", "(paren)", "x+y/z.w_v$", "-dash"]


# ---- the fake server ---------------------------------------------------

class Fake:
    """A server's stats that move a little at every fetch, for `settle`
    fetches (0: forever), then hold still."""

    def __init__(self, ntubes, settle):
        self.rng = random.Random(1234)
        self.settle = settle
        self.fetches = 0
        self.lock = threading.Lock()
        names = ["default", "emails", "reports-daily", "reports-weekly", "thumbnails",
                 "payments+audit", "webhooks/out", "n" * 200] + HOSTILE
        i = 0
        while len(names) < ntubes:
            names.append("tube-%04d.%s" % (i, self.rng.choice(["a", "b", "c", "io", "cpu"])))
            i += 1
        self.tubes = {}
        for n in sorted(names[:ntubes]):
            self.tubes[n] = {
                "name": n, "current-jobs-urgent": 0, "current-jobs-ready": self.rng.randint(0, 50),
                "current-jobs-reserved": self.rng.randint(0, 5), "current-jobs-delayed": self.rng.randint(0, 3),
                "current-jobs-buried": self.rng.choice([0, 0, 0, 0, 1, 7]), "total-jobs": 0,
                "current-using": self.rng.randint(0, 3), "current-watching": self.rng.randint(0, 4),
                "current-waiting": self.rng.randint(0, 2), "cmd-delete": 0, "cmd-pause-tube": 0,
                "pause": 0, "pause-time-left": 0, "current-bytes": 0, "total-expired": 0,
                "total-discarded": 0, "total-timeouts": 0, "oldest-ready-age": 0,
                "speed": self.rng.choice([0, 0, 1, 2, 5, 20, 100]),
            }
        self.tubes.get("reports-weekly", {}).update({"pause": 60, "pause-time-left": 42})
        self.uptime = 3 * 86400 + 7 * 3600 + 125
        self.step()

    def step(self):
        for t in self.tubes.values():
            puts = t["speed"] * 2 + self.rng.randint(0, t["speed"])
            dels = max(0, puts + self.rng.randint(-t["speed"], t["speed"]))
            dels = min(dels, t["current-jobs-ready"] + puts)
            t["total-jobs"] += puts
            t["cmd-delete"] += dels
            t["current-jobs-ready"] += puts - dels
            t["current-jobs-urgent"] = t["current-jobs-ready"] // 4
            t["current-bytes"] = 180 * sum(t[k] for k in ("current-jobs-ready", "current-jobs-reserved",
                                                          "current-jobs-delayed", "current-jobs-buried"))
            t["oldest-ready-age"] = (t["oldest-ready-age"] + 2 if t["current-jobs-ready"] else 0)
            if t["speed"] == 0 and t["current-jobs-ready"]:
                t["oldest-ready-age"] = max(t["oldest-ready-age"], 400)
        self.uptime += 2

    def snapshot(self):
        with self.lock:
            self.fetches += 1
            if self.settle == 0 or self.fetches <= self.settle:
                self.step()
            tubes = {n: {k: v for k, v in t.items() if k != "speed"} for n, t in self.tubes.items()}
        tot = lambda k: sum(t[k] for t in tubes.values())
        server = {
            "current-jobs-urgent": tot("current-jobs-urgent"), "current-jobs-ready": tot("current-jobs-ready"),
            "current-jobs-reserved": tot("current-jobs-reserved"),
            "current-jobs-delayed": tot("current-jobs-delayed"), "current-jobs-buried": tot("current-jobs-buried"),
            "cmd-put": tot("total-jobs"), "cmd-peek": 0, "cmd-reserve": tot("cmd-delete"),
            "cmd-delete": tot("cmd-delete"), "job-timeouts": 3, "total-jobs": tot("total-jobs"),
            "max-job-size": 65535, "current-tubes": len(tubes), "current-connections": 37,
            "current-producers": 12, "current-workers": 24, "current-waiting": tot("current-waiting"),
            "total-connections": 1204, "pid": 4242, "version": "0.1.0", "rusage-utime": 12.345678,
            "rusage-stime": 3.5, "uptime": self.uptime, "binlog-oldest-index": 3,
            "binlog-current-index": 9, "binlog-records-migrated": 120, "binlog-records-written": 99999,
            "binlog-max-size": 10485760, "draining": False, "id": "5f2c9a0e1b7d4c33",
            "hostname": "queue-1.example", "os": "#1 SMP Debian", "platform": "x86_64",
            "binlog-bytes": 7 * 10485760, "binlog-live-bytes": 23456789, "binlog-healthy": True,
            "job-memory": 123456789, "job-memory-limit": 1 << 30,
        }
        return {"server": server, "tubes": tubes}


def serve_fake(fake, port):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/":
                with open(PAGE, "rb") as f:     # read each time: edits show at a reload
                    body = f.read()
                ctype = "text/html; charset=utf-8"
                if "?realtime" in self.path:
                    # an image that arrives late holds the load event, and so
                    # chromium's DOM dump, while the page runs in real time
                    body = body.replace(b"</body>", b'<img hidden src="/slow"></body>')
            elif path == "/slow":
                time.sleep(9)
                self.send_error(404)
                return
            elif path == "/tubes.json":
                body, ctype = json.dumps(fake.snapshot()).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


# ---- the browser -------------------------------------------------------

def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("page_check: no chromium (apt-get install chromium)")


def run_chromium(url, extra, budget_ms):
    profile = tempfile.mkdtemp(prefix="page-check-")
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--hide-scrollbars", "--user-data-dir=" + profile,
           ] + (["--virtual-time-budget=%d" % budget_ms] if budget_ms else []) + extra + [url]
    try:
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if res.returncode != 0:
        sys.stderr.write(res.stderr.decode(errors="replace")[-2000:])
        sys.exit("page_check: chromium exited %d" % res.returncode)
    return res.stdout.decode("utf-8", errors="replace")


class Dom(html.parser.HTMLParser):
    """Rows, cells and server values of the dumped page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.rows = {}          # tube -> {key: (data-value, text)}
        self.server = {}        # key -> [(data-value, text)]
        self.tags = {}          # tag -> count
        self.ids = {}           # id -> text
        self.stack = []         # open elements we collect text for: [kind, key, attrs, text]
        self.tube = None

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
            "source", "track", "wbr"}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag in self.VOID:
            return              # no end tag follows
        if tag == "tr" and "data-tube" in a:
            self.tube = a["data-tube"]
            self.rows.setdefault(self.tube, {})
        if tag == "td" and self.tube is not None and "data-key" in a:
            self.stack.append(["cell", a["data-key"], a, []])
        elif "data-server-key" in a:
            self.stack.append(["server", a["data-server-key"], a, []])
        elif a.get("id") in ("status", "tube-count"):
            self.stack.append(["id", a["id"], a, []])
        else:
            self.stack.append(None)

    def handle_startendtag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1

    def _collecting(self):
        for s in reversed(self.stack):
            if s is not None:
                return s
        return None

    def handle_endtag(self, tag):
        if tag == "tr":
            self.tube = None
        if tag in self.VOID or not self.stack:
            return
        top = self.stack.pop()
        if top is None:
            return
        kind, key, a, text = top
        text = "".join(text).strip()
        if kind == "cell":
            self.rows[self.tube][key] = (a.get("data-value"), text)
        elif kind == "server":
            self.server.setdefault(key, []).append((a.get("data-value"), text))
        else:
            self.ids[key] = text
            self.ids[key + "@"] = a
        outer = self._collecting()
        if outer is not None:
            outer[3].append(text)

    def handle_data(self, data):
        s = self._collecting()
        if s is not None:
            s[3].append(data)


def fetch_json(base):
    with urllib.request.urlopen(base.rstrip("/") + "/tubes.json", timeout=10) as r:
        return json.loads(r.read().decode())


# Values that move on their own between the page's last fetch and ours,
# against a real server: ages and pause time tick with the clock, and the
# connection counters count the browser's and this script's own HTTP
# connections. How far they may differ; every other value must be equal.
DRIFT = {"oldest-ready-age": 2, "pause-time-left": 2, "paused": 2,
         "current-connections": 4, "total-connections": 16, "uptime": 3}
# The clock's values move by the seconds between the page's last fetch and
# ours, both inside the time check() measures: a slow machine (chromium
# taking seconds to dump and exit) widens them by that much ('oldest-ready-
# age is '12', tubes.json says 15' failed a fixed 2 s under load).
TICKING = ("oldest-ready-age", "pause-time-left", "paused", "uptime")


def same_number(attr, value, key=None, elapsed=0.0):
    drift = DRIFT.get(key, 0)
    if key in TICKING:
        drift = max(drift, int(elapsed) + 2)   # whole seconds, each side rounded
    try:
        return attr is not None and abs(float(attr) - float(value)) <= drift
    except ValueError:
        return False


def check(base, budget_ms):
    t0 = time.monotonic()
    html_text = run_chromium(base.rstrip("/") + "/", ["--dump-dom"], budget_ms)
    data = fetch_json(base)
    elapsed = time.monotonic() - t0
    dom = Dom()
    dom.feed(html_text)
    problems = []
    tubes = data["tubes"]
    if set(dom.rows) != set(tubes):
        missing, extra = set(tubes) - set(dom.rows), set(dom.rows) - set(tubes)
        problems.append("rows differ: %d missing %s, %d extra %s" % (
            len(missing), sorted(missing)[:5], len(extra), sorted(extra)[:5]))
    for name, t in tubes.items():
        cells = dom.rows.get(name)
        if cells is None:
            continue
        if cells.get("name", (None, None))[1] != name:
            problems.append("tube %r: name cell shows %r" % (name, cells.get("name")))
        for k in TUBE_KEYS:
            attr, text = cells.get(k, (None, None))
            if not same_number(attr, t[k], k, elapsed):
                problems.append("tube %r: %s is %r, tubes.json says %r" % (name, k, attr, t[k]))
            elif k.startswith("current-") and text.replace(",", "") not in (str(t[k]), "–"):
                problems.append("tube %r: %s shows %r for %r" % (name, k, text, t[k]))
        paused = cells.get("paused", (None, None))[0]
        if not same_number(paused, t.get("pause-time-left", 0), "paused", elapsed):
            problems.append("tube %r: paused %r, pause-time-left %r" % (name, paused, t.get("pause-time-left")))
        for k in ("puts-per-sec", "deletes-per-sec"):
            if k not in cells:
                problems.append("tube %r: no %s cell" % (name, k))
    for k in SERVER_KEYS:
        for attr, text in dom.server.get(k, [(None, None)]):
            if k in data["server"] and not same_number(attr, data["server"][k], k, elapsed):
                problems.append("server %s shows %r, tubes.json says %r" % (k, attr, data["server"][k]))
    if dom.server.get("version", [(None, None)])[0][1] != str(data["server"].get("version")):
        problems.append("version not shown")
    # markup from the data would have made elements: the page has none of these
    for tag in ("img", "iframe", "object", "embed"):
        if dom.tags.get(tag):
            problems.append("%d <%s> element(s) in the page: markup from the data?" % (dom.tags[tag], tag))
    if dom.tags.get("script", 0) != 1:
        problems.append("%d <script> elements, want 1" % dom.tags.get("script", 0))
    if not dom.ids.get("status", "").startswith("live"):
        problems.append("status says %r" % dom.ids.get("status"))
    return len(tubes), problems


def measure(base):
    """Time the refreshes in real time (fake server only): the slowest
    refresh of all rows, as the page measured it."""
    html_text = run_chromium(base.rstrip("/") + "/?realtime", ["--dump-dom"], 0)
    dom = Dom()
    dom.feed(html_text)
    a = dom.ids.get("status@", {})
    print("page_check: %d rows; refresh took %s ms, slowest %s ms, first (building the rows) %s ms" % (
        len(dom.rows), a.get("data-render-ms"), a.get("data-render-max-ms"), a.get("data-render-first-ms")))


def screenshot(base, path, budget_ms, size="1440,1000", extra=()):
    run_chromium(base.rstrip("/") + "/", ["--screenshot=" + os.path.abspath(path),
                                          "--window-size=" + size] + list(extra), budget_ms)
    if not os.path.exists(path):
        sys.exit("page_check: no screenshot written")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", nargs="?", help="base URL, e.g. http://127.0.0.1:9100")
    ap.add_argument("--screenshot", help="also save a screenshot (PNG) here")
    ap.add_argument("--dark", action="store_true", help="screenshot with a dark colour scheme")
    ap.add_argument("--budget", type=int, default=9000, help="virtual time to run the page, ms")
    ap.add_argument("--self-test", action="store_true", help="check against a fake server")
    ap.add_argument("--serve", action="store_true", help="only run the fake server")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tubes", type=int, default=1000)
    ap.add_argument("--measure", action="store_true", help="with --self-test: time the refreshes")
    args = ap.parse_args()

    if args.serve:
        srv = serve_fake(Fake(args.tubes, 0), args.port)
        print("fake server on http://127.0.0.1:%d/" % srv.server_address[1], flush=True)
        threading.Event().wait()
    base = args.base
    if args.self_test:
        # counts move for the first fetches (rates show), then hold still
        srv = serve_fake(Fake(args.tubes, 3), args.port)
        base = "http://127.0.0.1:%d" % srv.server_address[1]
    if not base:
        ap.error("give a base URL, --self-test or --serve")
    n, problems = check(base, args.budget)
    if args.self_test and args.measure:
        measure(base)
    if args.screenshot:
        screenshot(base, args.screenshot, args.budget,
                   extra=["--force-dark-mode", "--blink-settings=preferredColorScheme=0"] if args.dark else [])
        print("page_check: screenshot in %s" % args.screenshot)
    for p in problems[:50]:
        print("page_check: " + p)
    if len(problems) > 50:
        print("page_check: ... %d more" % (len(problems) - 50))
    print("page_check: %d tubes, %d problems" % (n, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
