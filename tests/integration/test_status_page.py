"""The status page (GET /) in a real headless browser (Debian's chromium)
against a real tubed: page_check.py checks that every tube of /tubes.json
has its row with its counts and saves build/status_page.png (a CI
artifact); a live session over the DevTools protocol watches the rows
change after more puts, with no reload.

chromium must be installed (make deps): without it these tests FAIL.
"""

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

from harness import check, eq, fail, no_server
from http_util import MetricsServer, get

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SCREENSHOT = os.path.join(ROOT, "build", "status_page.png")


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    fail("chromium not found: apt-get install chromium (make deps)")


def some_tubes(srv):
    c = srv.client()
    c.expect("use emails", "USING emails")
    for i in range(3):
        c.put(b"mail %d" % i)
    c.expect("use reports-daily", "USING reports-daily")
    c.put(b"later", delay=3600)
    w = srv.client()
    w.expect("watch reports-daily", "WATCHING 2")
    w.expect("ignore default", "WATCHING 1")
    c.put(b"r")
    jid, _ = w.reserve()
    w.expect("bury %d 0" % jid, "BURIED")
    c.expect("use a;b", "USING a;b")
    c.put(b"x", pri=5)
    c.expect("pause-tube a;b 3600", "PAUSED")
    c.expect("use default", "USING default")
    return c, w


@no_server
def test_status_page_in_chromium(binary):
    chromium()
    with MetricsServer(binary) as srv:
        conns = some_tubes(srv)
        os.makedirs(os.path.dirname(SCREENSHOT), exist_ok=True)
        if os.path.exists(SCREENSHOT):
            os.unlink(SCREENSHOT)
        r = subprocess.run([sys.executable, os.path.join(HERE, "page_check.py"),
                            srv.base_url(), "--screenshot", SCREENSHOT],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=400)
        out = r.stdout.decode(errors="replace")
        eq(r.returncode, 0, "page_check.py exit status; its output:\n" + out[-3000:])
        check("4 tubes, 0 problems" in out, "page_check output: " + out[-1000:])
        check(os.path.getsize(SCREENSHOT) > 10000, "screenshot %s is tiny" % SCREENSHOT)
        with open(SCREENSHOT, "rb") as f:
            eq(f.read(8), b"\x89PNG\r\n\x1a\n", "screenshot is a PNG")
        del conns


# ---- a live page over the DevTools protocol (--remote-debugging-pipe) --------

_EXEC = """
import os, sys
os.dup2(int(sys.argv[1]), 3)
os.dup2(int(sys.argv[2]), 4)
os.execv(sys.argv[3], sys.argv[3:])
"""

ROWS_JS = """JSON.stringify({
  status: (document.getElementById('status') || {}).textContent || '',
  rows: Object.fromEntries([...document.querySelectorAll('tr[data-tube]')].map(tr =>
    [tr.dataset.tube, Object.fromEntries([...tr.querySelectorAll('td[data-key]')].map(td =>
      [td.dataset.key, td.dataset.value]))]))})"""


class Browser:
    """Headless chromium driven over its DevTools pipe (fd 3 in, fd 4 out):
    NUL-terminated JSON messages, no extra library. Stopped by pid."""

    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="tubed-chromium-")
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _EXEC, str(to_r), str(from_w), chromium(),
             "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--remote-debugging-pipe",
             "--user-data-dir=" + self.profile, "about:blank"],
            pass_fds=(to_r, from_w), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def call(self, method, params=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        fail("chromium: %s: %s" % (method, reply["error"]))
                    return reply.get("result", {})
            left = deadline - time.monotonic()
            if left <= 0:
                fail("chromium: no answer to %s within %d s" % (method, timeout))
            ready, _, _ = select.select([self.from_r], [], [], left)
            if ready:
                data = os.read(self.from_r, 1 << 20)
                if not data:
                    fail("chromium exited (status %r) during %s" % (self.proc.poll(), method))
                self.buf += data

    def open(self, url):
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, expr):
        res = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        return res.get("result", {}).get("value")

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    self.session = None
                    self.call("Browser.close", timeout=5)
                except Exception:
                    pass
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            for fd in (self.to_w, self.from_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
        return False


def wait_rows(browser, pred, what, timeout=30):
    """Poll the page's rows until pred(rows, status) holds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        v = browser.evaluate(ROWS_JS)
        if v:
            last = json.loads(v)
            if pred(last["rows"], last["status"]):
                return last
        time.sleep(0.2)
    fail("the page did not show %s within %d s; it shows %r" % (what, timeout, last))


def counts(rows, tube):
    r = rows.get(tube, {})
    return tuple(r.get("current-jobs-" + s) for s in ("ready", "reserved", "delayed", "buried"))


@no_server
def test_status_page_refreshes(binary):
    chromium()
    with MetricsServer(binary) as srv:
        c, w = some_tubes(srv)
        with Browser() as b:
            b.open(srv.base_url() + "/")
            first = wait_rows(b, lambda rows, st: counts(rows, "emails") == ("3", "0", "0", "0")
                              and st.startswith("live"), "the first data")
            eq(sorted(first["rows"]), ["a;b", "default", "emails", "reports-daily"],
               "rows of the first fetch")
            eq(counts(first["rows"], "reports-daily"), ("0", "0", "1", "1"), "reports-daily")
            eq(first["rows"]["a;b"].get("paused") not in (None, "0"), True, "a;b shown paused")
            # more jobs and a new tube: a later refresh shows them, no reload
            c.expect("use emails", "USING emails")
            for i in range(4):
                c.put(b"more %d" % i)
            c.expect("use fresh", "USING fresh")
            c.put(b"new")
            c.put(b"new")
            later = wait_rows(b, lambda rows, st: counts(rows, "emails") == ("7", "0", "0", "0")
                              and counts(rows, "fresh") == ("2", "0", "0", "0"),
                              "the counts after more puts")
            check(later["status"].startswith("live"), "status %r" % later["status"])
            # a tube that goes away leaves the table
            c.expect("use default", "USING default")
            c.expect("flush-tube fresh", "FLUSHED 2")
            wait_rows(b, lambda rows, st: "fresh" not in rows, "the gone tube removed")
        eq(get(srv, "/healthz").status, 200, "the server after the browser")
