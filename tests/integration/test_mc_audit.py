"""The kestrel listener through real client libraries, on what an audit of
the memcache front-end checked that the other files did not: many npm
`memcached` connections doing reliable reads on one queue at once,
php-memcached's buffered and noreply writes staying in step with their
replies, and libmemcached's stats readers (php-memcached's getStats(),
memcstat) seeing every queue's keys.

libmemcached reads a stats line into a 350-byte buffer (the "\\r\\n"
included): a longer `STAT` line ends its read there, silently, and every
key after it is lost (getStats() still reports SUCCESS). The only line of
kestrel.md §6 that can be that long is a fanout parent's `children` list
(348 bytes or more from about 20 children of 15-byte names); every other
line is at most ~255 bytes (a 200-byte queue name). The test below holds
the lines that are bounded to what libmemcached reads; the `children`
line follows the spec (and kestrel), see the audit notes.

Each test starts its own tubed (mc_clients/mcproto.py) and stops it by pid.
A missing client is a failure (make deps installs them).
"""

import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "mc_clients")
sys.path.insert(0, CLIENTS)

from harness import check, eq, fail, no_server  # noqa: E402
from mcproto import McServer  # noqa: E402


def _run(argv, what, timeout=120):
    try:
        r = subprocess.run(argv, capture_output=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, cwd=CLIENTS)
    except FileNotFoundError:
        fail("%s is not installed (make deps)" % argv[0])
    except subprocess.TimeoutExpired:
        fail("%s did not finish within %ds" % (what, timeout))
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def _php():
    php = shutil.which("php")
    if not php:
        fail("php-cli is not installed (make deps)")
    mods = subprocess.run([php, "-m"], capture_output=True, timeout=60).stdout.decode()
    if "memcached" not in mods.split():
        fail("php-memcached is not installed (make deps)")
    return php


def _node():
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        fail("nodejs is not installed (make deps)")
    pkg = os.path.join(CLIENTS, "node")
    if not os.path.isdir(os.path.join(pkg, "node_modules", "memcached")):
        npm = shutil.which("npm")
        if not npm:
            fail("npm is not installed (make deps)")
        r = subprocess.run([npm, "ci", "--prefix", pkg, "--no-audit", "--no-fund"],
                           capture_output=True, timeout=300)
        check(r.returncode == 0, "npm ci in %s failed: %s" % (
            pkg, (r.stdout + r.stderr).decode("utf-8", "replace")[-600:]))
    return node


# 20 connections (one per client, poolSize 1: an open read belongs to its
# connection) drain 200 items with get q/close/open/t=200, giving back one
# read in five with /abort. Every item is seen exactly once.
NODE_RELIABLE = r"""
const path = require('path');
const Memcached = require(path.join(process.argv[1], 'node', 'node_modules', 'memcached'));
const loc = process.argv[2];  // node -e: the arguments from argv[1] on
const opts = {poolSize: 1, idle: 60000, keyCompression: false, retries: 0, timeout: 10000};
const p = (fn) => new Promise(res => fn((e, v) => res(e ? 'ERR:' + e.message : v)));
(async () => {
  const N = 20, ITEMS = 200;
  const prod = new Memcached(loc, opts);
  let stored = 0;
  for (let i = 0; i < ITEMS; i++)
    if ((await p(cb => prod.set('audit-nr', 'it' + i, 0, cb))) === true) stored++;
  const seen = [], errs = [];
  let aborts = 0, k = 0;
  await Promise.all([...Array(N)].map(async () => {
    const c = new Memcached(loc, opts);
    for (;;) {
      const v = await p(cb => c.get('audit-nr/close/open/t=200', cb));
      if (typeof v === 'string' && v.startsWith('ERR:')) { errs.push(v); break; }
      if (v === undefined) break;
      if (++k % 5 === 0) {
        const r = await p(cb => c.get('audit-nr/abort', cb));
        if (r !== undefined) errs.push('abort: ' + r);
        aborts++;
        continue;
      }
      seen.push(v);
    }
    c.end();
  }));
  const st = await p(cb => prod.stats(cb));
  prod.end();
  console.log('stored ' + stored);
  console.log('seen ' + seen.length + ' unique ' + new Set(seen).size);
  console.log('aborts>0 ' + (aborts > 0));
  console.log('errors ' + JSON.stringify(errs.slice(0, 3)));
  console.log('curr_items ' + st[0].curr_items);
})();
"""


@no_server
def test_mc_audit_node_many_connections_reliable_reads(binary):
    node = _node()
    with McServer(binary) as s:
        rc, out, err = _run([node, "-e", NODE_RELIABLE, CLIENTS, "127.0.0.1:%d" % s.mport],
                            "npm memcached")
        eq(out, "stored 200\nseen 200 unique 200\naborts>0 true\nerrors []\ncurr_items 0\n",
           "npm memcached output (exit %d, stderr %s)" % (rc, err[-400:]))
        m = s.mc()
        eq(m.get("audit-nr/peek"), None, "nothing left behind")


# libmemcached's buffered writes and noreply sets, then reads on the same
# connection: every reply lands on the call it belongs to.
PHP_IN_STEP = r"""
$m = new Memcached(); $m->addServer($argv[1], (int)$argv[2]);
$m->setOption(Memcached::OPT_COMPRESSION, false);
$o = [];
$o[] = "setMulti " . var_export($m->setMulti(['pa' => 'A', 'pb' => 'B']), true);
$o[] = "getMulti " . json_encode($m->getMulti(['pa', 'pb']));   // the first key only
$o[] = "pb " . var_export($m->get('pb'), true);
$m->setOption(Memcached::OPT_BUFFER_WRITES, true);
$m->set('pd', 'D1'); $m->set('pd', 'D2');
$o[] = "buffered " . var_export($m->get('pd'), true) . " " . var_export($m->get('pd'), true);
$m->setOption(Memcached::OPT_BUFFER_WRITES, false);
$m->setOption(Memcached::OPT_NOREPLY, true);
$m->set('pe', 'E1'); $m->set('pe', str_repeat('x', 2000)); $m->set('pe', 'E2');
$m->setOption(Memcached::OPT_NOREPLY, false);
$o[] = "noreply " . var_export($m->get('pe'), true) . " " . var_export($m->get('pe'), true)
     . " " . var_export($m->get('pe'), true);
$o[] = "open " . var_export($m->set('pf', 'F'), true) . " " . var_export($m->get('pf/open'), true)
     . " " . var_export($m->get('pf/close'), true) . " " . var_export($m->get('pf/peek'), true);
$o[] = "version " . json_encode(array_values($m->getVersion()));
echo implode("\n", $o), "\n";
"""

PHP_IN_STEP_WANT = ("setMulti true\ngetMulti {\"pa\":\"A\"}\npb 'B'\nbuffered 'D1' 'D2'\n"
                    "noreply 'E1' 'E2' false\nopen true 'F' false false\nversion [\"%s\"]\n")


@no_server
def test_mc_audit_php_buffered_and_noreply_writes_stay_in_step(binary):
    php = _php()
    with McServer(binary, "-z", "1000") as s:
        version = s.mc().sync().split()[1].decode()
        rc, out, err = _run([php, "-r", PHP_IN_STEP, "--", "127.0.0.1", str(s.mport)],
                            "php-memcached")
        eq(out, PHP_IN_STEP_WANT % version,
           "php-memcached output (exit %d, stderr %s)" % (rc, err[-400:]))


PHP_STATS = r"""
$m = new Memcached(); $m->addServer($argv[1], (int)$argv[2]);
$all = $m->getStats();
echo $m->getResultMessage(), "\n";
foreach ($all as $server => $st) foreach ($st as $k => $v) echo $k, "=", $v, "\n";
"""


def _raw_stats(m):
    out = {}
    for line in m.lines_until_end("stats"):
        k, v = line.decode().split(" ", 2)[1:]
        out[k] = v
    return out


@no_server
def test_mc_audit_libmemcached_stats_read_every_queue(binary):
    php = _php()
    memcstat = shutil.which("memcstat")
    if not memcstat:
        fail("libmemcached-tools (memcstat) is not installed (make deps)")
    longest = "L" * 200
    with McServer(binary, conf="[tube fan]\nfanout = true\n") as s:
        m = s.mc()
        for child in ("fan+a", "fan+" + "c" * 150):
            m.expect("get %s/t=1" % child, "END")
        for q in (longest, "fan", "zz"):
            m.store(q, b"x")
        raw = _raw_stats(m)
        check(len("STAT queue_fan_children " + raw["queue_fan_children"]) < 348,
              "the children line fits libmemcached's buffer here")
        longest_line = max(len("STAT %s %s" % kv) for kv in raw.items())
        check(longest_line <= 260, "longest stats line %d bytes" % longest_line)

        rc, out, err = _run([php, "-r", PHP_STATS, "--", "127.0.0.1", str(s.mport)],
                            "php-memcached getStats")
        lines = out.splitlines()
        eq(lines[:1], ["SUCCESS"], "getStats result (stderr %s)" % err[-300:])
        got = dict(l.split("=", 1) for l in lines[1:])
        for k in ("queue_%s_items" % longest, "queue_fan_children", "queue_zz_items",
                  "queue_zz_journal_rotations", "curr_items", "version"):
            check(k in got, "php getStats has %s (it read %d of %d keys)" % (
                k[:40], len(got), len(raw)))
        eq(len(got), len(raw), "php getStats read every key")

        rc, out, err = _run([memcstat, "--servers=127.0.0.1:%d" % s.mport], "memcstat")
        keys = re.findall(r"^\t(\S+): ", out, re.M)
        eq(len(keys), len(raw), "memcstat read every key (stderr %s)" % err[-300:])
        check("queue_zz_journal_rotations" in keys, "memcstat reached the last queue")
