"""Real memcache client libraries against tubed's kestrel listener, each
through its normal API (tests/integration/mc_clients/, README.md there):
pymemcache, python-memcache, php-memcached, npm memcached, and
libmemcached-tools.

A missing client is a failure, not a skip: CI installs them (Makefile DEPS;
the npm client is installed here with `npm ci` when node_modules is
missing). Each script prints PASS/FAIL per check and "N passed, N failed".
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

SYSTEM_PYTHON = "/usr/bin/python3"   # Debian's packages live there only


def _need(ok, what):
    if not ok:
        fail("%s is not installed (see tests/integration/mc_clients/README.md; "
             "`make deps` installs the Debian packages)" % what)


def _run_script(binary, argv, timeout=120):
    """Run one client script against a fresh tubed; check every check
    passed. Returns the script's output."""
    with McServer(binary) as s:
        try:
            r = subprocess.run(argv + ["127.0.0.1", str(s.mport)], capture_output=True,
                               timeout=timeout, stdin=subprocess.DEVNULL, cwd=CLIENTS)
        except subprocess.TimeoutExpired:
            fail("%s did not finish within %ds" % (" ".join(argv), timeout))
        out = r.stdout.decode("utf-8", "replace")
        err = r.stderr.decode("utf-8", "replace")
        lines = out.strip().splitlines()
        fails = [l for l in lines if l.startswith("FAIL")]
        check(not fails and r.returncode == 0,
              "%s: exit %d; %s; stderr: %s" % (os.path.basename(argv[-1]), r.returncode,
                                               "; ".join(fails) or out[-400:], err[-400:]))
        check(lines and re.fullmatch(r"\d+ passed, 0 failed", lines[-1]) is not None,
              "last line: %r" % (lines[-1:] or ""))
        check(int(lines[-1].split()[0]) >= 5, "ran its checks: %r" % lines[-1])
        return out


def _python_has(module):
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    return subprocess.run([SYSTEM_PYTHON, "-c", "import " + module],
                          capture_output=True, timeout=60).returncode == 0


@no_server
def test_client_pymemcache(binary):
    _need(_python_has("pymemcache"), "python3-pymemcache")
    out = _run_script(binary, [SYSTEM_PYTHON, os.path.join(CLIENTS, "pymemcache.py")])
    eq(out.count("PASS"), 15, "pymemcache checks passed")


@no_server
def test_client_python_memcache(binary):
    _need(_python_has("memcache"), "python3-memcache")
    out = _run_script(binary, [SYSTEM_PYTHON, os.path.join(CLIENTS, "python_memcache.py")])
    eq(out.count("PASS"), 15, "python-memcache checks passed")


@no_server
def test_client_php_memcached(binary):
    php = shutil.which("php")
    _need(php, "php-cli")
    mods = subprocess.run([php, "-m"], capture_output=True, timeout=60).stdout.decode()
    _need("memcached" in mods.split(), "php-memcached")
    out = _run_script(binary, [php, os.path.join(CLIENTS, "php_memcached.php")])
    eq(out.count("PASS"), 17, "php-memcached checks passed")


@no_server
def test_client_node_memcached(binary):
    node = shutil.which("node") or shutil.which("nodejs")
    _need(node, "nodejs")
    pkg = os.path.join(CLIENTS, "node")
    if not os.path.isdir(os.path.join(pkg, "node_modules", "memcached")):
        npm = shutil.which("npm")
        _need(npm, "npm")
        r = subprocess.run([npm, "ci", "--prefix", pkg, "--no-audit", "--no-fund"],
                           capture_output=True, timeout=300)
        check(r.returncode == 0, "npm ci in %s failed: %s" % (
            pkg, (r.stdout + r.stderr).decode("utf-8", "replace")[-600:]))
    out = _run_script(binary, [node, os.path.join(CLIENTS, "node_memcached.js")])
    eq(out.count("PASS"), 15, "npm memcached checks passed")


@no_server
def test_client_libmemcached_tools(binary):
    for tool in ("memccp", "memccat", "memcstat"):
        _need(shutil.which(tool), "libmemcached-tools (%s)" % tool)
    out = _run_script(binary, ["sh", os.path.join(CLIENTS, "libmemcached_tools.sh")])
    version = subprocess.run([binary, "-v"], capture_output=True, text=True,
                             timeout=10).stdout.split()[1]
    if version.startswith("0."):
        # memcstat refuses a server whose major version number is 0.
        check("SKIP memcstat" in out, "memcstat against %s: %s" % (version, out[-300:]))
        eq(out.count("PASS"), 9, "libmemcached-tools checks passed")
    else:
        eq(out.count("PASS"), 10, "libmemcached-tools checks passed, memcstat included")
