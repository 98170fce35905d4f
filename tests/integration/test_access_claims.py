"""Access control (spec access.md): claims no other test_access*.py held
the server to, found by a black-box audit of the spec.

- §1 socket_mode's default, 0660.
- §1 a reload that changes a section's socket_mode is refused whole (its
  tube keys do not apply either), and a memcache `reload` says so.
- §1 --memcache-port and --metrics-port stay admin on every tube beside
  restricted sections.
- §1 `--check-config`'s errors stop a start too: status 2, nothing served.
- §1/§7.4 users and groups on memcache and HTTP Unix-socket listeners;
  users and groups together admit either; the group is the peer's
  primary one (SO_PEERCRED), and every refused peer is logged.
- §1 a reload's new tubes apply at once to HTTP and memcache listeners,
  also on a connection already open.
- §2 NOT_ALLOWED comes after reading a put's body also when that body is
  larger than -z or is not followed by CRLF: the connection stays in step.
"""

import http.client
import os
import re
import socket
import subprocess
import tempfile
import shutil

import harness
from access_util import (OTHER_GID, OTHER_UID, Access, as_peer, listeners, mc_lines,
                         need_root, put, stable_stats)
from harness import check, eq, no_server
from policy_util import wait_for

@no_server
def test_socket_mode_defaults_to_0660(binary):
    """Without socket_mode the socket file is 0660: a peer that is neither
    its owner nor in its group cannot open it."""
    with Access(binary, {"u": {"address": "unix"}}) as a:
        path = a.addr["u"][1]
        eq(oct(os.stat(path).st_mode & 0o777), "0o660", "the default socket_mode")
        if os.geteuid() == 0:
            check(as_peer(path, OTHER_UID, OTHER_GID).startswith("connect: "),
                  "a peer of another user and group opened a 0660 socket")
            eq(as_peer(path, 0, 0), "USING default\r\n", "root, the owner")


@no_server
def test_reload_changing_socket_mode_is_refused_whole(binary):
    """socket_mode is not one of the keys a reload may change: the reload
    is refused and the old configuration stays in force, the tube keys
    the same file changed included."""
    secs = {"u": {"address": "unix", "socket_mode": "0666"}}
    with Access(binary, secs) as a:
        path = a.addr["u"][1]
        a.rewrite({"u": {"address": "unix", "socket_mode": "0600"}},
                  top="[tube capped]\nmax_items = 1\n")
        line = a.reload(expect_ok=False)
        check("socket_mode" in line and "old configuration stays" in line,
              "the reload's log line: %r" % line)
        eq(oct(os.stat(path).st_mode & 0o777), "0o666", "the socket file's mode")
        c0 = a.srv.client()
        put(c0, "capped")
        c0.put(b"second")   # max_items = 1 did not apply: INSERTED
        c = a.client("u")
        c.expect("list-tube-used", "USING default")


@no_server
def test_memcache_reload_refusing_a_listener_change(binary):
    """memcache `reload` of a file that adds a [listen] section answers
    SERVER_ERROR with the file's name, keeps the connection and the old
    configuration (the new listener does not listen)."""
    secs = {"m": {"protocol": "memcache", "role": "admin"}}
    with Access(binary, secs) as a:
        c = a.client("m")
        a.rewrite({"m": {"protocol": "memcache", "role": "admin"}, "extra": {"role": "admin"}})
        c.send(b"reload\r\n")
        line = c.read_line().decode()
        check(line.startswith("SERVER_ERROR %s" % a.path) and "extra" in line,
              "memcache reload of a file adding a listener: %r" % line)
        check(c.cmd("version").startswith(b"VERSION "), "the connection after the refusal")
        try:
            socket.create_connection(("127.0.0.1", a.port("extra")), timeout=2).close()
            opened = True
        except OSError:
            opened = False
        check(not opened, "the refused reload opened the new listener")
        a.rewrite(secs)
        c.send(b"reload\r\n")
        eq(c.read_line(), b"Reloaded config.", "the reload of the old file")


class _AccessWithPorts(Access):
    """Access, with --memcache-port and --metrics-port on fresh ports at
    every start attempt."""

    def _argv(self, port):
        self.mc_port, self.metrics_port = harness._free_port(), harness._free_port()
        return Access._argv(self, port) + ["--memcache-port", str(self.mc_port),
                                           "--metrics-port", str(self.metrics_port)]


@no_server
def test_memcache_and_metrics_ports_stay_admin_on_every_tube(binary):
    secs = {"r": {"role": "read", "tubes": "app-*"},
            "mr": {"protocol": "memcache", "role": "read", "tubes": "app-*"},
            "hr": {"protocol": "http", "tubes": "app-*"}}
    with _AccessWithPorts(binary, secs) as a:
        c0 = a.srv.client()
        put(c0, "secret", b"body")
        mc = harness.Client("127.0.0.1", a.mc_port)
        eq(mc_lines(mc, b"get secret/peek\r\n"), [b"VALUE secret/peek 0 4", b"body"],
           "--memcache-port peeks any queue")
        check(any(b"queue 'secret'" in l for l in mc_lines(mc, b"dump_config\r\n")),
              "--memcache-port's dump_config names every tube")
        eq(mc_lines(mc, b"get secret\r\n"), [b"VALUE secret 0 4", b"body"],
           "--memcache-port gets from any queue")
        mc.send(b"set secret 0 0 2\r\nhi\r\n")
        eq(mc.read_line(), b"STORED", "--memcache-port sets into any queue")
        h = http.client.HTTPConnection("127.0.0.1", a.metrics_port, timeout=5)
        h.request("GET", "/tubes.json")
        body = h.getresponse().read()
        check(b'"secret"' in body, "--metrics-port's /tubes.json lacks secret")
        h.request("GET", "/metrics")
        body = h.getresponse().read()
        check(b'tube="secret"' in body, "--metrics-port's /metrics lacks secret")
        h.close()
        # while the sections stay restricted
        r = a.client("r")
        r.expect("stats-tube secret", "NOT_ALLOWED")


@no_server
def test_start_with_a_bad_listen_section_exits_2(binary):
    """An error --check-config reports in a [listen] section stops a
    start too: FILE:LINE on stderr, status 2, the -l/-p port never
    listening."""
    d = tempfile.mkdtemp(prefix="tubed-access-audit-")
    res = harness.PortReservation()
    try:
        for text, line, what in (
                ("[listen a]\naddress = 127.0.0.1:1\nrole = boss\n", 3, "unknown role"),
                ("[listen a]\naddress = 127.0.0.1:1\nusers = root\n", 3,
                 "users needs a Unix socket"),
                ("[listen a]\naddress = 127.0.0.1:1\ntubes = a*b\n", 3, "bad tube pattern")):
            path = os.path.join(d, "t.conf")
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([binary, "-l", "127.0.0.1", "-p", str(res.port),
                                "--config", path], capture_output=True, timeout=30)
            err = r.stderr.decode()
            eq(r.returncode, 2, "exit status at start for %r (%s)" % (text, err))
            check(("%s:%d: " % (path, line)) in err and what in err,
                  "expected '%s:%d: ...%s...', got %r" % (path, line, what, err))
    finally:
        res.close()
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_unix_peers_on_memcache_and_http_listeners(binary):
    """users and groups hold on memcache and HTTP listeners as on
    beanstalk ones; every refused peer is logged and counted."""
    need_root()
    secs = {"mc": {"address": "unix", "protocol": "memcache", "role": "read",
                   "users": str(OTHER_UID), "socket_mode": "0666"},
            "web": {"address": "unix", "protocol": "http",
                    "groups": str(OTHER_GID), "socket_mode": "0666"}}
    with Access(binary, secs) as a:
        mc, web = a.addr["mc"][1], a.addr["web"][1]
        check(as_peer(mc, OTHER_UID, 12345, request=b"version\r\n").startswith("VERSION "),
              "the memcache listener's user")
        check(as_peer(web, 12345, OTHER_GID,
                      request=b"GET /healthz HTTP/1.0\r\n\r\n").startswith("HTTP/1.1 200"),
              "the HTTP listener's group")
        for _ in range(3):
            eq(as_peer(mc, 12345, OTHER_GID, request=b"version\r\n"), "", "another user")
            eq(as_peer(web, OTHER_UID, 12345, request=b"GET /healthz HTTP/1.0\r\n\r\n"),
               "", "another group")
        text = wait_for(lambda: (lambda t: t if len(re.findall(
            r"listener (mc|web): refused peer uid \d+ gid \d+ pid \d+", t)) >= 6 else None)(
                a.srv.stderr_text()), "six refusal log lines")
        eq(len(re.findall(r"listener mc: refused peer uid 12345 gid %d pid \d+" % OTHER_GID,
                          text)), 3, "mc's refusals logged, each")
        ls = listeners(a.srv.client())
        eq((ls["mc"]["refused-peers"], ls["web"]["refused-peers"]), ("3", "3"),
           "refused-peers")


@no_server
def test_users_and_groups_together_and_the_primary_group(binary):
    """users and groups together: a peer whose uid is in users or whose
    gid is in groups is served. The gid is the primary one SO_PEERCRED
    gives: a supplementary group does not count."""
    need_root()
    secs = {"u": {"address": "unix", "users": str(OTHER_UID), "groups": "4242",
                  "socket_mode": "0666"}}
    with Access(binary, secs) as a:
        p = a.addr["u"][1]
        eq(as_peer(p, OTHER_UID, 12345), "USING default\r\n", "the user, another group")
        eq(as_peer(p, 12345, 4242), "USING default\r\n", "the group, another user")
        eq(as_peer(p, 12345, 12345), "", "neither")
        eq(as_peer(p, 12345, 12345, groups=(4242,)), "",
           "the group only as a supplementary one")


@no_server
def test_reload_changes_tubes_of_http_and_memcache_listeners(binary):
    """A reload's new tubes apply at once to HTTP and memcache listeners,
    on a connection already open too."""
    secs = {"web": {"protocol": "http", "tubes": "app-*"},
            "mc": {"protocol": "memcache", "role": "read", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        put(c0, "app-1")
        put(c0, "jobs")
        h = http.client.HTTPConnection("127.0.0.1", a.port("web"), timeout=5)
        mc = a.client("mc")

        def seen():
            h.request("GET", "/tubes.json")
            body = h.getresponse().read()
            st = b"\n".join(mc_lines(mc, b"stats\r\n"))
            return (b'"app-1"' in body, b'"jobs"' in body,
                    b"queue_app-1_items" in st, b"queue_jobs_items" in st)
        eq(seen(), (True, False, True, False), "before the reload")
        a.rewrite({"web": {"protocol": "http", "tubes": "jobs"},
                   "mc": {"protocol": "memcache", "role": "read", "tubes": "jobs"}})
        a.reload()
        eq(seen(), (False, True, False, True), "after the reload, same connections")
        h.close()


@no_server
def test_refused_put_bodies_keep_the_connection_in_step(binary):
    """NOT_ALLOWED comes after the put's body is read, also a body larger
    than -z (a put the role may not run is refused, not measured) and
    one not followed by CRLF; nothing is stored, the next command is
    answered as usual."""
    with Access(binary, {"ro": {"role": "read"}}, args=["-z", "10"]) as a:
        c0 = a.srv.client()
        before = stable_stats(c0)
        r = a.client("ro")
        r.send(b"put 0 0 60 20\r\n" + b"y" * 20 + b"\r\n")
        eq(r.read_line(), b"NOT_ALLOWED", "an oversized put on a read listener")
        r.expect("list-tube-used", "USING default")
        r.send(b"put 0 0 60 3\r\nabcXY")
        check(r.read_line() in (b"NOT_ALLOWED", b"EXPECTED_CRLF"),
              "a put without CRLF after its body")
        r.expect("list-tube-used", "USING default")
        before["cmd-list-tube-used"] = str(int(before["cmd-list-tube-used"]) + 2)
        eq(stable_stats(c0), before, "stats after the refused puts")
