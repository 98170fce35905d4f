"""GET /metrics and GET /tubes.json (doc/monitoring.md): every family in
its documented order with its type, values equal to what `stats` and
`stats-tubes` say, `promtool check metrics` clean on a real scrape, a real
Prometheus server scraping tubed, and /tubes.json as the JSON form of
stats + stats-tubes.

promtool and prometheus come from Debian's `prometheus` package (make deps);
a test that cannot find them FAILS: CI installs them.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import harness
from harness import check, eq, fail, no_server, parse_yaml_dict, unq
from http_util import Metrics, MetricsServer, free_port, get, scrape

SERVER_FAMILIES = [
    ("tubed_build_info", "gauge"),
    ("tubed_uptime_seconds", "gauge"),
    ("tubed_draining", "gauge"),
    ("tubed_commands_total", "counter"),
    ("tubed_jobs", "gauge"),
    ("tubed_jobs_urgent", "gauge"),
    ("tubed_jobs_created_total", "counter"),
    ("tubed_job_timeouts_total", "counter"),
    ("tubed_tubes", "gauge"),
    ("tubed_connections", "gauge"),
    ("tubed_connections_accepted_total", "counter"),
    ("tubed_unread_reply_bytes", "gauge"),
    ("tubed_unread_reply_budget_bytes", "gauge"),
    ("tubed_replies_refused_total", "counter"),
    ("tubed_producers", "gauge"),
    ("tubed_workers", "gauge"),
    ("tubed_workers_waiting", "gauge"),
    ("tubed_max_job_size_bytes", "gauge"),
    ("tubed_job_memory_bytes", "gauge"),
    ("tubed_job_memory_limit_bytes", "gauge"),
    ("tubed_cpu_seconds_total", "counter"),
    ("tubed_binlog_enabled", "gauge"),
    ("tubed_binlog_healthy", "gauge"),
    ("tubed_binlog_disk_bytes", "gauge"),
    ("tubed_binlog_live_bytes", "gauge"),
    ("tubed_binlog_records_written_total", "counter"),
    ("tubed_binlog_records_migrated_total", "counter"),
    ("tubed_binlog_spilled_jobs", "gauge"),
    ("tubed_binlog_spilled_bytes", "gauge"),
    ("tubed_binlog_spill_reads_total", "counter"),
    ("tubed_binlog_spill_waits_total", "counter"),
    ("tubed_binlog_spill_errors_total", "counter"),
    ("tubed_listener_connections", "gauge"),
    ("tubed_listener_refused_commands_total", "counter"),
    ("tubed_listener_refused_peers_total", "counter"),
]

# (family, type, stats-tubes key it shows; None: computed)
TUBE_FAMILIES = [
    ("tubed_tube_jobs", "gauge", None),
    ("tubed_tube_jobs_urgent", "gauge", "current-jobs-urgent"),
    ("tubed_tube_body_bytes", "gauge", "current-bytes"),
    # without read-behind every body is in memory
    ("tubed_tube_memory_bytes", "gauge", "current-bytes"),
    ("tubed_tube_jobs_created_total", "counter", "total-jobs"),
    ("tubed_tube_jobs_deleted_total", "counter", "cmd-delete"),
    ("tubed_tube_jobs_expired_total", "counter", "total-expired"),
    ("tubed_tube_jobs_discarded_total", "counter", "total-discarded"),
    ("tubed_tube_job_timeouts_total", "counter", "total-timeouts"),
    ("tubed_tube_oldest_ready_age_seconds", "gauge", "oldest-ready-age"),
    ("tubed_tube_workers_waiting", "gauge", "current-waiting"),
    ("tubed_tube_connections_using", "gauge", "current-using"),
    ("tubed_tube_connections_watching", "gauge", "current-watching"),
    ("tubed_tube_paused", "gauge", None),
    ("tubed_tube_pause_remaining_seconds", "gauge", "pause-time-left"),
    ("tubed_tube_pauses_total", "counter", "cmd-pause-tube"),
]

COMMANDS = ["put", "peek", "peek-ready", "peek-delayed", "peek-buried", "reserve",
            "reserve-with-timeout", "delete", "release", "use", "watch", "ignore", "bury",
            "kick", "touch", "stats", "stats-job", "stats-tube", "list-tubes",
            "list-tube-used", "list-tubes-watched", "pause-tube",
            "reserve-job", "kick-job", "flush-tube", "stats-tubes", "list-jobs", "move-job",
            "stats-binlog", "stats-listeners"]

STATES = ["ready", "reserved", "delayed", "buried"]


def stats_tubes(c):
    """stats-tubes parsed: {name: {key: value as text}} in the server's order."""
    line = c.cmd("stats-tubes")
    check(line.startswith(b"OK "), "stats-tubes: %r" % line)
    body = c.read_exact(int(line.split()[1]) + 2)[:-2].decode()
    tubes, cur = {}, None
    for l in body.split("\n")[1:]:
        if not l:
            continue
        if not l.startswith(" "):
            cur = tubes.setdefault(l[1:-2], {})
        else:
            k, _, v = l.strip().partition(": ")
            cur[k] = unq(v)
    return tubes


def populate(srv):
    """A few tubes with jobs in every state, a paused tube, a waiting
    worker. Returns the connections that hold them (keep them open)."""
    p, w, waiter = srv.client(), srv.client(), srv.client()
    p.expect("use emails", "USING emails")
    for i in range(4):
        p.put(b"mail %d" % i, pri=10 if i < 2 else 2000)
    p.put(b"later", delay=3600)
    p.put(b"to bury")
    w.expect("watch emails", "WATCHING 2")
    w.expect("ignore default", "WATCHING 1")
    jid, _ = w.reserve()
    w.expect("bury %d 5" % jid, "BURIED")
    jid, _ = w.reserve()                    # stays reserved
    p.expect("use a;b", "USING a;b")
    p.put(b"x" * 100)
    p.expect("pause-tube a;b 600", "PAUSED")
    waiter.expect("watch web", "WATCHING 2")
    waiter.expect("ignore default", "WATCHING 1")
    waiter.send(b"reserve-with-timeout 600\r\n")
    harness.wait_until(lambda: p.stats()["current-waiting"] == "1", what="a waiting worker")
    p.expect("use default", "USING default")
    p.put(b"d")
    p.expect("delete %d" % p.put(b"y"), "DELETED")
    return p, w, waiter


@no_server
def test_metrics_families_and_values(binary):
    with MetricsServer(binary, ["-z", "4096"]) as srv:
        p, w, waiter = populate(srv)
        st = p.stats()
        tubes = stats_tubes(p)
        m = scrape(srv)
        # the families, in order, with their types; only counters end in _total
        want = [f for f, _ in SERVER_FAMILIES] + [f for f, _, _ in TUBE_FAMILIES]
        eq(m.families, want, "families in order")
        for f, t in SERVER_FAMILIES + [(f, t) for f, t, _ in TUBE_FAMILIES]:
            eq(m.type[f], t, "TYPE of %s" % f)
            eq(f.endswith("_total"), t == "counter", "%s: _total iff counter" % f)
            check(m.help[f], "%s has no HELP" % f)
        # samples come right after their family, grouped
        seen, last = [], None
        for name, _, _ in m.samples:
            if name != last:
                check(name not in seen, "%s samples not in one group" % name)
                seen.append(name)
                last = name
        eq(seen, want, "sample groups in family order")

        # server values against stats (nothing changed in between but the
        # scrape's own connection and the clock)
        eq(m.value("tubed_build_info", version=unq(st["version"])), 1, "build_info")
        for s in STATES:
            eq(m.value("tubed_jobs", state=s), int(st["current-jobs-" + s]), "jobs %s" % s)
        eq([l["command"] for l, _ in m.series("tubed_commands_total")], COMMANDS,
           "command label values in order")
        for k, v in st.items():
            if k.startswith("cmd-"):
                eq(m.value("tubed_commands_total", command=k[4:]), int(v), "command " + k)
        simple = {
            "tubed_jobs_urgent": "current-jobs-urgent",
            "tubed_jobs_created_total": "total-jobs",
            "tubed_job_timeouts_total": "job-timeouts",
            "tubed_tubes": "current-tubes",
            "tubed_producers": "current-producers",
            "tubed_workers": "current-workers",
            "tubed_workers_waiting": "current-waiting",
            "tubed_max_job_size_bytes": "max-job-size",
            "tubed_job_memory_bytes": "job-memory",
            "tubed_job_memory_limit_bytes": "job-memory-limit",
            "tubed_binlog_disk_bytes": "binlog-bytes",
            "tubed_binlog_live_bytes": "binlog-live-bytes",
            "tubed_binlog_records_written_total": "binlog-records-written",
            "tubed_binlog_records_migrated_total": "binlog-records-migrated",
        }
        for f, k in simple.items():
            eq(m.value(f), int(st[k]), "%s vs stats %s" % (f, k))
        eq(m.value("tubed_draining"), 0, "draining")
        eq(m.value("tubed_binlog_enabled"), 0, "binlog_enabled without -b")
        eq(m.value("tubed_binlog_healthy"), 1, "binlog_healthy without -b")
        for f in ("tubed_binlog_spilled_jobs", "tubed_binlog_spilled_bytes",
                  "tubed_binlog_spill_reads_total", "tubed_binlog_spill_waits_total",
                  "tubed_binlog_spill_errors_total"):
            eq(m.value(f), 0, "%s without -b" % f)
        eq(m.value("tubed_max_job_size_bytes"), 4096, "-z")
        # the scrape's own connection is a client connection too
        eq(m.value("tubed_connections"), int(st["current-connections"]) + 1, "connections")
        eq(m.value("tubed_connections_accepted_total"), int(st["total-connections"]) + 1,
           "connections accepted")
        check(m.value("tubed_uptime_seconds") >= int(st["uptime"]), "uptime")
        # every client read its replies; nothing was refused (test_outbudget)
        eq(m.value("tubed_unread_reply_bytes"), 0, "unread replies")
        eq(m.value("tubed_unread_reply_budget_bytes"), 64 << 20, "the budget")
        eq(m.value("tubed_replies_refused_total"), 0, "replies refused")
        for mode in ("user", "system"):
            check(m.value("tubed_cpu_seconds_total", mode=mode) >= 0, "cpu %s" % mode)

        # per tube: every tube in name order, in every family
        names = sorted(tubes, key=lambda n: n.encode())
        eq(list(tubes), names, "stats-tubes in name order")
        eq(names, ["a;b", "default", "emails", "web"], "the tubes")
        eq([(l["tube"], l["state"]) for l, _ in m.series("tubed_tube_jobs")],
           [(n, s) for n in names for s in STATES], "tubed_tube_jobs labels in order")
        for f, _, key in TUBE_FAMILIES[1:]:
            eq([l for l, _ in m.series(f)], [{"tube": n} for n in names], "%s tubes" % f)
        for n, t in tubes.items():
            for s in STATES:
                eq(m.value("tubed_tube_jobs", tube=n, state=s), int(t["current-jobs-" + s]),
                   "tube %s %s" % (n, s))
            for f, _, key in TUBE_FAMILIES:
                if key:
                    eq(m.value(f, tube=n), int(t[key]), "%s{tube=%r} vs %s" % (f, n, key))
            eq(m.value("tubed_tube_paused", tube=n), 1 if n == "a;b" else 0, "paused %s" % n)
        # what the set-up made, to be sure the comparison saw something
        e = "emails"
        eq([m.value("tubed_tube_jobs", tube=e, state=s) for s in STATES], [3, 1, 1, 1],
           "emails by state")
        eq(m.value("tubed_tube_jobs_urgent", tube=e), 1, "emails urgent")
        eq(m.value("tubed_tube_workers_waiting", tube="web"), 1, "web waiting")
        check(590 <= m.value("tubed_tube_pause_remaining_seconds", tube="a;b") <= 600,
              "a;b pause left")
        eq(m.value("tubed_tube_body_bytes", tube="a;b"), 100, "a;b body bytes")
        eq(m.value("tubed_tube_jobs_deleted_total", tube="default"), 1, "default deletes")
        eq(m.value("tubed_commands_total", command="stats-tubes"), 1, "stats-tubes counted")


@no_server
def test_tube_series_vanish_with_the_tube(binary):
    with MetricsServer(binary) as srv:
        c = srv.client()
        c.expect("use short-lived", "USING short-lived")
        m = scrape(srv)
        eq(m.value("tubed_tube_jobs", tube="short-lived", state="ready"), 0, "a new tube")
        c.expect("use default", "USING default")
        m = scrape(srv)
        check(all(l["tube"] == "default" for f, l, _ in m.samples if "tube" in l),
              "series of a gone tube remain")
        eq(m.value("tubed_tubes"), 1, "tubes")


@no_server
def test_expired_jobs_are_never_counted(binary):
    """A job past its max_age is not counted even if the scrape comes
    before the server's expiry sweep reached it. The sweep expires at most
    1000 jobs per loop iteration, so with 5000 due jobs and the request
    queued while the server was stopped (SIGSTOP while max_age passes),
    the request is read while most of them still wait for the sweep."""
    d = tempfile.mkdtemp(prefix="tubed-metrics-")
    try:
        conf = os.path.join(d, "tubed.conf")
        with open(conf, "w") as f:
            f.write("[tube e]\nmax_age = 1s\n")
        with MetricsServer(binary, ["--config", conf]) as srv:
            c = srv.client()
            c.expect("use e", "USING e")
            n = 5000
            c.send(b"put 0 0 60 3\r\nold\r\n" * n)
            for i in range(n):
                check(c.read_line().startswith(b"INSERTED"), "put %d" % i)
            eq(scrape(srv).value("tubed_tube_jobs", tube="e", state="ready"), n, "before")
            h = srv.http(timeout=10)
            srv.signal(signal.SIGSTOP)
            try:
                time.sleep(1.6)     # let max_age pass while the server is stopped
                h.request("GET", "/metrics")
            finally:
                srv.signal(signal.SIGCONT)
            r = h.read_response()
            h.close()
            m = Metrics(r.text())
            eq(m.value("tubed_tube_jobs", tube="e", state="ready"), 0, "expired jobs counted")
            eq(m.value("tubed_tube_jobs_expired_total", tube="e"), n, "expired total")
            eq(m.value("tubed_jobs", state="ready"), 0, "server-wide ready")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def promtool():
    path = shutil.which("promtool") or ("/usr/bin/promtool" if os.path.exists("/usr/bin/promtool")
                                        else None)
    if not path:
        fail("promtool not found: apt-get install prometheus (make deps)")
    return path


@no_server
def test_promtool_check_metrics(binary):
    with MetricsServer(binary) as srv:
        conns = populate(srv)
        for i in range(50):
            conns[0].expect("use t-%02d.x_y+z/w$(v)" % i, "USING t-%02d.x_y+z/w$(v)" % i)
            conns[0].put(b"j")
        text = get(srv, "/metrics").body
        r = subprocess.run([promtool(), "check", "metrics"], input=text,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        eq((r.returncode, r.stdout.decode(errors="replace")), (0, ""),
           "promtool check metrics (exit status, output)")


def prometheus_binary():
    for p in ("/usr/bin/prometheus", shutil.which("prometheus")):
        if p and os.path.exists(p):
            return p
    fail("prometheus not found: apt-get install prometheus (make deps)")


def prom_query(port, q):
    url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(url, timeout=5) as r:
        data = json.loads(r.read().decode())
    eq(data.get("status"), "success", "query %r" % q)
    return data["data"]["result"]


class Prometheus:
    """A real Prometheus scraping one target every second; stopped by pid."""

    def __init__(self, target):
        self.dir = tempfile.mkdtemp(prefix="tubed-prometheus-")
        self.conf = os.path.join(self.dir, "prometheus.yml")
        with open(self.conf, "w") as f:
            f.write("global:\n"
                    "  scrape_interval: 1s\n"
                    "  scrape_timeout: 1s\n"
                    "  evaluation_interval: 1s\n"
                    "scrape_configs:\n"
                    "  - job_name: tubed\n"
                    "    static_configs:\n"
                    "      - targets: [\"%s\"]\n" % target)
        self.proc = None
        self.log = os.path.join(self.dir, "prometheus.log")

    def __enter__(self):
        binary = prometheus_binary()
        for _ in range(5):
            self.port = free_port()
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(
                    [binary, "--config.file=" + self.conf,
                     "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                     "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % self.port,
                                                timeout=2) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                time.sleep(0.1)
            self.stop()
        fail("prometheus did not become ready; its log: %s" % self.log_text()[-1500:])

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def __exit__(self, *a):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def wait_value(self, q, want, timeout=45):
        """Poll the query until it has one sample equal to want."""
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            res = prom_query(self.port, q)
            got = [float(r["value"][1]) for r in res]
            if got == [want]:
                return res[0]
            time.sleep(0.2)
        fail("prometheus: %s is %r after %d s, want [%r]; log: %s"
             % (q, got, timeout, want, self.log_text()[-800:]))


@no_server
def test_real_prometheus_scrapes_tubed(binary):
    with MetricsServer(binary) as srv:
        c = srv.client()
        c.expect("use emails", "USING emails")
        for i in range(7):
            c.put(b"mail %d" % i)
        with Prometheus("127.0.0.1:%d" % srv.metrics_port) as prom:
            prom.wait_value('up{job="tubed"}', 1)
            res = prom.wait_value('tubed_tube_jobs{tube="emails",state="ready"}', 7)
            eq(res["metric"].get("job"), "tubed", "job label")
            # live: more puts show in a later scrape
            for i in range(5):
                c.put(b"more %d" % i)
            prom.wait_value('tubed_tube_jobs{tube="emails",state="ready"}', 12)
            prom.wait_value('sum by (tube) (tubed_tube_jobs{tube="emails"})', 12)
            prom.wait_value('tubed_tube_jobs_created_total{tube="emails"}', 12)
            # the scrape was clean: no samples dropped or out of order
            prom.wait_value('scrape_samples_scraped{job="tubed"} - '
                            'scrape_samples_post_metric_relabeling{job="tubed"}', 0)


@no_server
def test_tubes_json(binary):
    with MetricsServer(binary) as srv:
        p, w, waiter = populate(srv)
        st = p.stats()
        tubes = stats_tubes(p)
        r = get(srv, "/tubes.json")
        eq(r.header("Content-Type"), "application/json", "Content-Type")
        data = json.loads(r.body.decode("utf-8"),
                          object_pairs_hook=lambda kv: dict(kv))
        eq(list(data), ["server", "tubes"], "top-level keys")
        # every stats key, in order, names unchanged
        eq(list(data["server"]), list(st), "server keys")
        strings = {"version", "id", "hostname", "os", "platform"}
        for k, v in st.items():
            j = data["server"][k]
            if k in strings:
                eq(j, unq(v), "server %s" % k)
            elif v in ("true", "false"):
                eq(j, v == "true", "server %s (boolean)" % k)
            else:
                check(isinstance(j, (int, float)) and not isinstance(j, bool),
                      "server %s: %r is not a number" % (k, j))
                if k.startswith(("current-jobs", "cmd-", "total-jobs", "max-job-size",
                                 "current-tubes", "binlog-", "job-", "pid")):
                    eq(j, int(v) if "." not in v else float(v), "server %s" % k)
        check(isinstance(data["server"]["rusage-utime"], float), "rusage-utime is a float")
        eq(data["server"]["current-waiting"], 1, "current-waiting")
        # every tube in name order with every stats-tubes key in its order
        eq(list(data["tubes"]), list(tubes), "tubes in order")
        for n, t in tubes.items():
            eq(list(data["tubes"][n]), list(t), "keys of tube %s" % n)
            for k, v in t.items():
                if k == "name":
                    eq(data["tubes"][n][k], n, "name of %s" % n)
                elif k not in ("pause-time-left", "oldest-ready-age"):
                    eq(data["tubes"][n][k], int(v), "tube %s %s" % (n, k))
        eq(data["tubes"]["emails"]["current-jobs-buried"], 1, "emails buried")
        eq(data["tubes"]["a;b"]["pause"], 600, "a;b pause")


RULE_TEST = """rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'tubed_tube_oldest_ready_age_seconds{instance="q1:9100",job="tubed",tube="emails"}'
        values: '0+60x20'
      - series: 'tubed_tube_paused{instance="q1:9100",job="tubed",tube="emails"}'
        values: '0x20'
      - series: 'tubed_tube_oldest_ready_age_seconds{instance="q1:9100",job="tubed",tube="held"}'
        values: '0+60x20'
      - series: 'tubed_tube_paused{instance="q1:9100",job="tubed",tube="held"}'
        values: '1x20'
      - series: 'tubed_binlog_healthy{instance="q1:9100",job="tubed"}'
        values: '1x20'
      - series: 'up{instance="q1:9100",job="tubed"}'
        values: '1x20'
    alert_rule_test:
      - eval_time: 8m
        alertname: TubedReadyJobWaitingTooLong
        exp_alerts: []
      - eval_time: 12m
        alertname: TubedReadyJobWaitingTooLong
        exp_alerts:
          - exp_labels:
              severity: warning
              instance: q1:9100
              job: tubed
              tube: emails
            exp_annotations:
              summary: "tubed q1:9100: tube emails has a ready job waiting 12m 0s"
              description: "The oldest ready job of tube emails has waited over 5 minutes. Check its workers (tubed_tube_workers_waiting, tubed_tube_connections_watching)."
      - eval_time: 12m
        alertname: TubedBinlogUnhealthy
        exp_alerts: []
      - eval_time: 12m
        alertname: TubedDown
        exp_alerts: []
"""


@no_server
def test_doc_scrape_config_and_alert_rules(binary):
    """The scrape config and alert rules of doc/monitoring.md pass
    promtool's checks, and the ready-job alert fires for a tube whose
    oldest ready job waits, not for a paused one."""
    import re
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "doc",
                       "monitoring.md")
    with open(doc) as f:
        blocks = re.findall(r"```yaml\n(.*?)```", f.read(), re.S)
    eq(len(blocks), 2, "yaml blocks in doc/monitoring.md (scrape config, rules)")
    d = tempfile.mkdtemp(prefix="tubed-rules-")
    try:
        with open(os.path.join(d, "rules.yml"), "w") as f:
            f.write(blocks[1])
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("rule_files: [rules.yml]\n" + blocks[0])
        with open(os.path.join(d, "test.yml"), "w") as f:
            f.write(RULE_TEST)
        for args in (["check", "rules", "rules.yml"], ["check", "config", "prometheus.yml"],
                     ["test", "rules", "test.yml"]):
            r = subprocess.run([promtool()] + args, cwd=d, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            eq(r.returncode, 0, "promtool %s: %s" % (" ".join(args),
                                                     r.stdout.decode(errors="replace")))
    finally:
        shutil.rmtree(d, ignore_errors=True)
