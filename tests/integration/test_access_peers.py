"""Access control: Unix-socket peers by uid and gid (SO_PEERCRED), and
reloads on open connections (spec access.md §1, §7.4).

Clients run as another user: the test runs as root, so a forked child
sets its group and user (65534, nobody/nogroup, by default) before it
connects, then reports what it saw through a pipe. Without root these
tests skip with the reason.
"""

import os
import re
import socket

from access_util import OTHER_GID, OTHER_UID, Access, as_peer, listeners, need_root
from harness import check, eq, no_server
from policy_util import wait_for


def as_user(uid, gid, path, request=b"list-tube-used\r\n"):
    """as_peer() with no supplementary group."""
    return as_peer(path, uid, gid, (), request)


@no_server
def test_unix_users_by_uid(binary):
    need_root()
    secs = {"w": {"address": "unix", "role": "worker,read", "users": str(OTHER_UID),
                  "socket_mode": "0666"}}
    with Access(binary, secs) as a:
        path = a.addr["w"][1]
        eq(oct(os.stat(path).st_mode & 0o777), "0o666", "socket_mode")
        eq(as_user(OTHER_UID, OTHER_GID, path), "USING default\r\n", "the allowed user")
        eq(as_user(0, 0, path), "", "root, not in users: closed at once")
        log = wait_for(lambda: re.search(r"listener w: refused peer uid 0 gid 0 pid (\d+)",
                                         a.srv.stderr_text()), "the refusal's log line")
        check(int(log.group(1)) > 0, "the pid in the log line")
        ls = listeners(a.srv.client())
        eq((ls["w"]["refused-peers"], ls["w"]["total-connections"]), ("1", "1"),
           "stats-listeners counters")


@no_server
def test_unix_users_by_name_and_groups(binary):
    need_root()
    import grp
    import pwd
    name = pwd.getpwuid(OTHER_UID).pw_name
    gname = grp.getgrgid(OTHER_GID).gr_name
    secs = {"byname": {"address": "unix", "users": name, "socket_mode": "0666"},
            "bygroup": {"address": "unix", "groups": gname, "socket_mode": "0666"}}
    with Access(binary, secs) as a:
        p1, p2 = a.addr["byname"][1], a.addr["bygroup"][1]
        eq(as_user(OTHER_UID, 0, p1), "USING default\r\n", "user %s, gid 0" % name)
        eq(as_user(12345, OTHER_GID, p1), "", "another uid")
        eq(as_user(12345, OTHER_GID, p2), "USING default\r\n", "group %s" % gname)
        eq(as_user(OTHER_UID, 12345, p2), "", "another gid")
        eq(as_user(0, 0, p2), "", "root is no exception")


@no_server
def test_unix_socket_mode(binary):
    """socket_mode 0600 (root's): another user cannot even open it."""
    need_root()
    with Access(binary, {"s": {"address": "unix", "socket_mode": "0600"}}) as a:
        path = a.addr["s"][1]
        eq(oct(os.stat(path).st_mode & 0o777), "0o600", "socket_mode")
        check(as_user(OTHER_UID, OTHER_GID, path).startswith("connect: "),
              "a non-root peer opened a 0600 socket")
        eq(as_user(0, 0, path), "USING default\r\n", "root")


@no_server
def test_reload_applies_to_open_connections(binary):
    secs = {"p": {"role": "producer", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c = a.client("p")
        c.expect("use app-1", "USING app-1")
        c.put(b"one")
        c.expect("reserve-with-timeout 0", "NOT_ALLOWED")
        c.expect("watch jobs", "NOT_ALLOWED")
        a.rewrite({"p": {"role": "worker", "tubes": "jobs"}})
        a.reload()
        # the same connection: the new role and tubes at once
        c.send(b"put 0 0 60 1\r\nx\r\n")
        c.expect_lines([b"NOT_ALLOWED"])
        # default, watched since the connection opened, is outside now
        c.expect("watch jobs", "WATCHING 1")
        c.expect("use app-2", "NOT_ALLOWED")
        c0 = a.srv.client()
        c0.expect("use jobs", "USING jobs")
        jid = c0.put(b"work")
        c.send(b"reserve-with-timeout 0\r\n")
        eq(c.read_reply(), (b"RESERVED %d 4" % jid, b"work"), "reserve after the reload")
        c.send(b"list-tubes-watched\r\n")
        eq(c.read_reply()[1], b"---\n- jobs\n", "watches after the reload")
        ls = listeners(c0)
        eq((ls["p"]["role"], ls["p"]["tubes"]), ("worker", "jobs"), "stats-listeners")


@no_server
def test_reload_users_closes_open_connections(binary):
    need_root()
    secs = {"u": {"address": "unix", "users": "0", "socket_mode": "0666"}}
    with Access(binary, secs) as a:
        c = a.client("u")
        c.expect("list-tube-used", "USING default")
        a.rewrite({"u": {"address": "unix", "users": str(OTHER_UID), "socket_mode": "0666"}})
        a.reload()
        c.expect_closed()
        eq(as_user(OTHER_UID, OTHER_GID, a.addr["u"][1]), "USING default\r\n", "new user")


@no_server
def test_reload_adding_or_changing_a_listener_is_refused(binary):
    secs = {"p": {"role": "producer", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c = a.client("p")
        old_port = a.port("p")
        for new, why in (
                ({"p": {"role": "admin"}, "q": {"role": "admin"}}, "added"),
                ({}, "removed"),
                ({"p": {"role": "admin", "protocol": "memcache"}}, "protocol changed"),
                ({"p": {"role": "admin", "address": "127.0.0.1:1"}}, "address changed")):
            keys = new.get("p", {})
            a.rewrite(new)
            if "address" in keys:   # render() keeps the port; write it by hand
                a.write(open(a.path).read().replace(":%d" % old_port, ":1"))
            line = a.reload(expect_ok=False)
            check(why in line and "old configuration stays" in line,
                  "reload log line for %s: %r" % (why, line))
            # the old config stays in force: still a producer on app-*
            c.expect("use other", "NOT_ALLOWED")
            c.expect("kick 1", "NOT_ALLOWED")
            c.expect("use app-x", "USING app-x")
        check(len(a.addr) >= 1 and a.addr.get("q") is not None, "q got a port")
        try:
            socket.create_connection(("127.0.0.1", a.port("q")), timeout=2).close()
            opened = True
        except OSError:
            opened = False
        check(not opened, "a refused reload opened the new listener")


@no_server
def test_reload_ends_waits_on_tubes_no_longer_allowed(binary):
    """A reserve (and a memcache get) already waiting when a reload takes
    its tube away gets nothing from that tube: with other tubes left it
    waits on those, with none it answers NOT_ALLOWED (memcache: END)."""
    secs = {"w": {"role": "worker", "tubes": "old-*, keep"},
            "m": {"protocol": "memcache", "role": "worker", "tubes": "old-*"}}
    with Access(binary, secs) as a:
        only_old, both = a.client("w"), a.client("w")
        only_old.expect("watch old-1", "WATCHING 1")
        both.expect("watch old-1", "WATCHING 1")
        both.expect("watch keep", "WATCHING 2")
        only_old.send(b"reserve\r\n")
        both.send(b"reserve-with-timeout 60\r\n")
        mc = a.client("m")
        mc.send(b"get old-1/t=60000\r\n")
        c0 = a.srv.client()
        wait_for(lambda: c0.stats()["current-waiting"] == "3", "three waiting")
        secs = {"w": {"role": "worker", "tubes": "keep"},
                "m": {"protocol": "memcache", "role": "worker", "tubes": "keep"}}
        a.rewrite(secs)
        a.reload()
        eq(only_old.read_line(), b"NOT_ALLOWED", "the reserve whose only tube went")
        eq(mc.read_line(), b"END", "the memcache get whose queue went")
        c0.expect("use old-1", "USING old-1")
        c0.put(b"old")
        check(not both.has_data(0.3), "the reserve got a job of a tube no longer allowed")
        c0.expect("use keep", "USING keep")
        jid = c0.put(b"kept")
        eq(both.read_reply(), (b"RESERVED %d 4" % jid, b"kept"), "the reserve on what is left")
        eq(c0.stats_tube("old-1")["current-jobs-ready"], "1", "the old tube's job stays")
