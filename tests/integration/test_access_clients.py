"""Access control with real client libraries, unchanged (spec access.md
§7.5): each works on a `producer` and on a `worker` listener doing what
the role allows, and a refusal reaches the caller as the library's own
error naming it (beaneater, pymemcache, python-memcache, php-memcached,
libmemcached-tools). Then a real client through stunnel on both sides
(§6): TLS to a stunnel in front of the producer listener, the listener's
role still applies.

A missing client is a failure (make deps installs them), except stunnel,
which skips with the reason if it cannot run here.
"""

import os
import shutil
import subprocess
import time

import harness
from access_util import Access
from harness import Skip, check, eq, fail, no_server
from policy_util import wait_for

SYSTEM_PYTHON = "/usr/bin/python3"
SECTIONS = {
    "prod": {"role": "producer", "tubes": "app-*"},
    "work": {"role": "worker", "tubes": "app-*"},
    "mprod": {"protocol": "memcache", "role": "producer", "tubes": "app-*"},
    "mwork": {"protocol": "memcache", "role": "worker", "tubes": "app-*"},
}

# beaneater raises only for the replies it lists (ERROR_STATES); any other
# comes back as the response's :status, so that is where NOT_ALLOWED shows.
BEANEATER = r"""
require 'beaneater'
prod = Beaneater.new(ARGV[0])
work = Beaneater.new(ARGV[1])
puts "put #{prod.tubes['app-jobs'].put('hello')[:status]}"
puts "watched #{prod.tubes.watched.map(&:name).inspect}"
puts "reserve on producer #{prod.connection.transmit('reserve-with-timeout 0')[:status]}"
puts "use secret #{prod.connection.transmit('use secret')[:status]}"
work.tubes.watch('app-jobs')
j = work.tubes.reserve(5)
puts "reserved #{j.body}"
j.delete
puts "deleted #{j.exists? ? 'no' : 'yes'}"
puts "put on worker #{work.tubes['app-jobs'].put('x')[:status]}"
"""

BEANEATER_WANT = ("put INSERTED\nwatched []\nreserve on producer NOT_ALLOWED\n"
                  "use secret NOT_ALLOWED\nreserved hello\ndeleted yes\n"
                  "put on worker NOT_ALLOWED\n")

PYMEMCACHE = r"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError
host, pp, wp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
prod = Client((host, pp), default_noreply=False, timeout=5)
work = Client((host, wp), default_noreply=False, timeout=5)
print("set", prod.set("app-q", b"one"))
for what, fn in (("get on producer", lambda: prod.get("app-q")),
                 ("set secret", lambda: prod.set("secret", b"x")),
                 ("set on worker", lambda: work.set("app-q", b"x"))):
    try:
        print(what, "allowed", fn())
    except MemcacheClientError as e:
        print(what, "refused" if "not allowed" in str(e) else "other: %s" % e)
print("get", work.get("app-q"))
print("get secret", work.get("secret"))
"""

PYMEMCACHE_WANT = ("set True\nget on producer refused\nset secret refused\n"
                   "set on worker refused\nget b'one'\nget secret None\n")

PYTHON_MEMCACHE = r"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
import memcache
host, pp, wp = sys.argv[1], sys.argv[2], sys.argv[3]
prod = memcache.Client(["%s:%s" % (host, pp)])
work = memcache.Client(["%s:%s" % (host, wp)])
print("set", bool(prod.set("app-q", "one")))
print("set secret", bool(prod.set("secret", "x")))
print("set on worker", bool(work.set("app-q", "x")))
print("get", work.get("app-q"))
print("get secret", work.get("secret"))
"""

PYTHON_MEMCACHE_WANT = ("set True\nset secret False\nset on worker False\n"
                        "get b'one'\nget secret None\n")

PHP = r"""<?php
$p = new Memcached(); $p->addServer($argv[1], (int)$argv[2]);
$w = new Memcached(); $w->addServer($argv[1], (int)$argv[3]);
foreach ([$p, $w] as $m) { $m->setOption(Memcached::OPT_COMPRESSION, false); }
echo "set ", var_export($p->set("app-q", "one"), true), "\n";
echo "set secret ", var_export($p->set("secret", "x"), true), "\n";
echo "get ", var_export($w->get("app-q"), true), "\n";
echo "set on worker ", var_export($w->set("app-q", "x"), true), "\n";
"""

PHP_WANT = "set true\nset secret false\nget 'one'\nset on worker false\n"


def run(argv, what, timeout=60, **kw):
    try:
        r = subprocess.run(argv, capture_output=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, **kw)
    except FileNotFoundError:
        fail("%s is not installed (make deps)" % argv[0])
    except subprocess.TimeoutExpired:
        fail("%s timed out" % what)
    return r


def check_out(r, want, what):
    out = r.stdout.decode(errors="replace")
    eq(out, want, "%s's output (stderr: %s)" % (what, r.stderr.decode(errors="replace")[-600:]))


@no_server
def test_beaneater_on_producer_and_worker(binary):
    with Access(binary, SECTIONS) as a:
        r = run(["ruby", "-e", BEANEATER, "127.0.0.1:%d" % a.port("prod"),
                 "127.0.0.1:%d" % a.port("work")], "beaneater")
        check_out(r, BEANEATER_WANT, "beaneater")


@no_server
def test_pymemcache_on_producer_and_worker(binary):
    with Access(binary, SECTIONS) as a:
        r = run([SYSTEM_PYTHON, "-c", PYMEMCACHE, "127.0.0.1", str(a.port("mprod")),
                 str(a.port("mwork"))], "pymemcache")
        check_out(r, PYMEMCACHE_WANT, "pymemcache")


@no_server
def test_python_memcache_on_producer_and_worker(binary):
    with Access(binary, SECTIONS) as a:
        r = run([SYSTEM_PYTHON, "-c", PYTHON_MEMCACHE, "127.0.0.1", str(a.port("mprod")),
                 str(a.port("mwork"))], "python-memcache")
        check_out(r, PYTHON_MEMCACHE_WANT, "python-memcache")


@no_server
def test_php_memcached_on_producer_and_worker(binary):
    with Access(binary, SECTIONS) as a:
        r = run(["php", "-r", PHP.replace("<?php", ""), "--", "127.0.0.1",
                 str(a.port("mprod")), str(a.port("mwork"))], "php-memcached")
        # php -r passes the arguments after "--" from argv[1] on
        check_out(r, PHP_WANT, "php-memcached")


@no_server
def test_libmemcached_tools_on_producer_and_worker(binary):
    with Access(binary, SECTIONS) as a:
        tmp = a.tmp
        path = os.path.join(tmp, "app-q")
        with open(path, "w") as f:
            f.write("one")
        ps = "--servers=127.0.0.1:%d" % a.port("mprod")
        ws = "--servers=127.0.0.1:%d" % a.port("mwork")
        r = run(["memccp", ps, path], "memccp on producer", cwd=tmp)
        eq(r.returncode, 0, "memccp on the producer listener: %r" % r.stderr[-300:])
        r = run(["memccp", ws, path], "memccp on worker", cwd=tmp)
        check(r.returncode != 0, "memccp on the worker listener succeeded")
        r = run(["memccat", ps, "app-q"], "memccat on producer")
        check(r.returncode != 0 and b"one" not in r.stdout, "memccat on the producer got it")
        r = run(["memccat", ws, "app-q"], "memccat on worker")
        eq((r.returncode, r.stdout.rstrip(b"\n")), (0, b"one"), "memccat on the worker listener")


# ---- stunnel ---------------------------------------------------------------

def stunnel_binary():
    for b in ("stunnel4", "stunnel"):
        p = shutil.which(b)
        if p:
            return p
    return None


def start_stunnel(exe, conf_path, text, log_path):
    with open(conf_path, "w") as f:
        # debug = 5 (notice): the log shows the connections accepted.
        f.write("foreground = yes\npid =\ndebug = 5\noutput = %s\n" % log_path + text)
    # What it says before it opens the log (a bind that fails) goes to
    # LOG_PATH.out.
    with open(log_path + ".out", "wb") as out:
        return subprocess.Popen([exe, conf_path], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out)


def listening(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@no_server
def test_beaneater_through_stunnel(binary):
    """beaneater -> client stunnel (plain in, TLS out) -> server stunnel
    (TLS in, plain out) -> the producer listener: puts work, and the
    listener's role still refuses reserve."""
    exe = stunnel_binary()
    if not exe or not shutil.which("openssl"):
        raise Skip("stunnel4 or openssl is not installed (apt-get install stunnel4)")
    with Access(binary, SECTIONS) as a:
        d = a.tmp
        key, cert = os.path.join(d, "key.pem"), os.path.join(d, "cert.pem")
        r = run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", cert], "openssl")
        eq(r.returncode, 0, "openssl req: %r" % r.stderr[-300:])
        # The ports the stunnels listen on are held (PortReservation) until
        # they bind them, and a stunnel whose start collides on its port is
        # started again on another (before anything ran there).
        tls_res, plain_res = harness.PortReservation(), harness.PortReservation()
        procs = []

        def start_on(res, name, text):
            log = os.path.join(d, name + ".log")

            def attempt():
                for f in (log, log + ".out"):
                    if os.path.exists(f):
                        os.unlink(f)
                p = start_stunnel(exe, os.path.join(d, name + ".conf"), text(), log)
                procs.append(p)
                wait_for(lambda: p.poll() is not None or harness.listening(p.pid, port=res.port),
                         "the %s stunnel to listen" % name, timeout=20)
                if p.poll() is None:
                    return None
                said = "".join(open(f, errors="replace").read()[-400:]
                               for f in (log + ".out", log) if os.path.exists(f))
                return said or "stunnel exited (%s)" % p.returncode
            out = res.start(attempt)
            if out is not None:
                check("Address already in use" not in out,
                      "the %s stunnel found no free port: %s" % (name, out))
                raise Skip("stunnel cannot run here: %s" % out)
        try:
            start_on(tls_res, "server",
                     lambda: "[tubed]\naccept = 127.0.0.1:%d\nconnect = 127.0.0.1:%d\n"
                             "cert = %s\nkey = %s\n" % (tls_res.port, a.port("prod"), cert, key))
            start_on(plain_res, "client",
                     lambda: "[tubed]\nclient = yes\naccept = 127.0.0.1:%d\n"
                             "connect = 127.0.0.1:%d\nverifyPeer = yes\n"
                             "CAfile = %s\n" % (plain_res.port, tls_res.port, cert))
            plain_port = plain_res.port
            script = r"""
require 'beaneater'
b = Beaneater.new(ARGV[0])
puts "put #{b.tubes['app-tls'].put('over tls')[:status]}"
puts "reserve #{b.connection.transmit('reserve-with-timeout 0')[:status]}"
"""
            r = run(["ruby", "-e", script, "127.0.0.1:%d" % plain_port], "beaneater via stunnel")
            check_out(r, "put INSERTED\nreserve NOT_ALLOWED\n", "beaneater through stunnel")
            c0 = a.srv.client()
            c0.expect("watch app-tls", "WATCHING 2")
            eq(c0.reserve(timeout=0)[1], b"over tls", "the job that came through TLS")
            log = open(os.path.join(d, "server.log")).read()
            check("TLS" in log or "SSL" in log or "accepted" in log.lower(),
                  "the server stunnel's log shows no TLS connection: %r" % log[-400:])
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
            tls_res.close()
            plain_res.close()
