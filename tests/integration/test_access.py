"""Access control (spec access.md): listeners with roles and tubes.

The role tests are table-driven: ROLE_TABLE below is the spec's table,
written out here independently of the server's own (src/proto/*/
*access.c). The command words come from the parsers' command tables in
the source (parse.h TUBED_COMMANDS, mcparse.h MC_COMMANDS), so a command
added to a parser without a decision for every role makes
test_every_parser_command_has_a_decision fail, and one whose decision
differs from the server's makes the role tests fail.
"""

import os
import re
import shutil
import socket
import subprocess
import time

import harness

from access_util import (Access, decision_rows, listeners, parser_words,
                         stable_stats)
from harness import check, eq, fail, no_server
from policy_util import wait_for

ROLES = ("read", "producer", "worker", "admin")
READ = set(ROLES)          # every role is "read, and ..."
PRODUCE = {"producer", "admin"}
WORK = {"worker", "admin"}
ADMIN = {"admin"}

# spec access.md §2: who may run each beanstalk command.
ROLE_TABLE = {
    "stats": READ, "stats-tube": READ, "stats-tubes": READ, "stats-job": READ,
    "stats-binlog": READ, "stats-replication": READ,
    "peek": READ, "peek-ready": READ, "peek-delayed": READ, "peek-buried": READ,
    "list-tubes": READ, "list-tube-used": READ, "list-tubes-watched": READ,
    "list-jobs": READ, "use": READ, "watch": READ, "ignore": READ, "quit": READ,
    "put": PRODUCE,
    "reserve": WORK, "reserve-with-timeout": WORK, "reserve-job": WORK,
    "delete": WORK, "release": WORK, "bury": WORK, "touch": WORK,
    "kick": ADMIN, "kick-job": ADMIN, "pause-tube": ADMIN, "flush-tube": ADMIN,
    "move-job": ADMIN, "stats-listeners": ADMIN,
    # replication (another branch adds the commands): decided already
    "promote": ADMIN, "follow": ADMIN, "replicate": ADMIN,
}

# spec access.md §4: memcache. "get/peek" is a get whose only option is /peek.
MC_TABLE = {
    "get/peek": READ, "stats": READ, "dump_stats": READ, "version": READ,
    "status": READ, "quit": READ,
    "set": PRODUCE, "get": WORK,
    "delete": ADMIN, "flush": ADMIN, "flush_all": ADMIN, "flush_expired": ADMIN,
    "flush_all_expired": ADMIN, "dump_config": ADMIN, "reload": ADMIN,
    "shutdown": ADMIN, "monitor": ADMIN, "confirm": ADMIN,
}

# One valid request per beanstalk command ({id}: a ready job in default).
BS_SAMPLE = {
    "put": b"put 0 0 60 1\r\nx\r\n", "peek": b"peek {id}\r\n",
    "peek-ready": b"peek-ready\r\n", "peek-delayed": b"peek-delayed\r\n",
    "peek-buried": b"peek-buried\r\n", "reserve-with-timeout": b"reserve-with-timeout 0\r\n",
    "reserve-job": b"reserve-job {id}\r\n", "reserve": b"reserve\r\n",
    "delete": b"delete {id}\r\n", "release": b"release {id} 0 0\r\n",
    "bury": b"bury {id} 0\r\n", "kick": b"kick 1\r\n", "kick-job": b"kick-job {id}\r\n",
    "touch": b"touch {id}\r\n", "stats-job": b"stats-job {id}\r\n",
    "stats-tube": b"stats-tube default\r\n", "stats-tubes": b"stats-tubes\r\n",
    "stats-binlog": b"stats-binlog\r\n", "stats-listeners": b"stats-listeners\r\n",
    "stats": b"stats\r\n", "use": b"use default\r\n", "watch": b"watch default\r\n",
    "ignore": b"ignore default\r\n", "list-tubes-watched": b"list-tubes-watched\r\n",
    "list-tube-used": b"list-tube-used\r\n", "list-tubes": b"list-tubes\r\n",
    "quit": b"quit\r\n", "pause-tube": b"pause-tube default 0\r\n",
    "flush-tube": b"flush-tube default\r\n", "list-jobs": b"list-jobs default all 0 10\r\n",
    "move-job": b"move-job {id} other\r\n",
    "stats-replication": b"stats-replication\r\n", "promote": b"promote\r\n",
    "follow": b"follow 127.0.0.1:1\r\n", "replicate": b"replicate 1 0\r\n",
}

# Run only where they must be refused: allowed, they would change what the
# server is (a replica, a primary, a replication stream) for the commands
# after them. Their admin-only decision is still checked against the
# server's table (test_every_parser_command_has_a_decision).
ONLY_REFUSED = {"promote", "follow", "replicate"}

MC_SAMPLE = {
    "set": b"set q 0 0 1\r\nx\r\n", "get": b"get q\r\n", "get/peek": b"get q/peek\r\n",
    "delete": b"delete q\r\n", "flush": b"flush q\r\n", "flush_all": b"flush_all\r\n",
    "flush_expired": b"flush_expired q\r\n", "flush_all_expired": b"flush_all_expired\r\n",
    "version": b"version\r\n", "stats": b"stats\r\n", "dump_stats": b"dump_stats\r\n",
    "dump_config": b"dump_config\r\n", "reload": b"reload\r\n", "shutdown": b"shutdown\r\n",
    "status": b"status\r\n", "monitor": b"monitor q 0\r\n", "confirm": b"confirm q 1\r\n",
    "quit": b"quit\r\n",
}

ROLE_SECTIONS = {r: {"role": r} for r in ROLES}
MC_SECTIONS = {"mc" + r: {"role": r, "protocol": "memcache"} for r in ROLES}


def bs_words():
    return parser_words("proto/beanstalk/parse.h", "TUBED_COMMANDS")


def mc_words():
    return parser_words("proto/memcache/mcparse.h", "MC_COMMANDS")


def put_main(c, body=b"job", tube="default"):
    c.expect("use " + tube, "USING " + tube)
    c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    line = c.read_line()
    check(line.startswith(b"INSERTED "), "put via main: %r" % line)
    return int(line.split()[1])


def test_every_parser_command_has_a_decision(srv):
    """Every command of both parsers has a decision for every role, in
    this test's table and in the server's (bsaccess.c, mcaccess.c), and
    the two agree."""
    bs = decision_rows("proto/beanstalk/bsaccess.c")
    mc = decision_rows("proto/memcache/mcaccess.c")
    words = bs_words()
    check(len(words) >= 30, "found only %d words in TUBED_COMMANDS" % len(words))
    for w in words:
        check(w in ROLE_TABLE, "beanstalk command %r has no decision in the test's table" % w)
        check(w in bs, "beanstalk command %r has no row in bsaccess.c" % w)
        check(w in BS_SAMPLE, "beanstalk command %r has no sample request" % w)
    for w, roles in ROLE_TABLE.items():
        eq(bs.get(w), roles, "bsaccess.c's roles of %r" % w)
        check("admin" in roles, "admin may not run %r" % w)
    for w in mc_words() + ["get/peek"]:
        check(w in MC_TABLE, "memcache command %r has no decision in the test's table" % w)
        eq(mc.get(w), MC_TABLE[w], "mcaccess.c's roles of %r" % w)
        check(w in MC_SAMPLE, "memcache command %r has no sample request" % w)
    for w in ("stats-replication", "promote", "follow", "replicate"):
        check(w in bs, "the replication command %r needs a decision in bsaccess.c" % w)


def _bs_try(a, role, word, c0):
    """Run word's sample on a fresh connection of the role's listener; a
    refusal must be NOT_ALLOWED and change nothing. Returns the reply."""
    jid = put_main(c0, b"j")   # ready in default: reserve does not wait
    tube_before = c0.stats_tube("default")
    before = stable_stats(c0)   # last: looking moves its own counters
    c = a.client(role)
    c.send(BS_SAMPLE[word].replace(b"{id}", str(jid).encode()))
    reply = c.read_line() if word != "quit" else b""
    if word == "quit":
        c.expect_closed()
    if reply == b"NOT_ALLOWED":
        eq(stable_stats(c0), before, "stats after %s refused on %s" % (word, role))
        if word == "put":   # the body was read and dropped: in step
            c.expect("list-tube-used", "USING default")
        after = c0.stats_tube("default")
        for k in ("current-using", "current-watching"):
            after.pop(k), tube_before.pop(k)
        eq(after, tube_before, "stats-tube default after %s refused on %s" % (word, role))
        eq(c0.stats_job(jid)["state"], "ready", "job after %s refused on %s" % (word, role))
    closed(c, c0)
    c0.cmd("delete %d" % jid)
    return reply


def closed(c, c0):
    """Close c and wait until the server has (a job it held goes back
    first: the next command's "before" must not move under it)."""
    c.close()
    wait_for(lambda: c0.stats()["current-connections"] == "1", "the close")


@no_server
def test_every_role_every_beanstalk_command(binary):
    words = bs_words()
    with Access(binary, ROLE_SECTIONS) as a:
        c0 = a.srv.client()
        for word in words:
            for role in ROLES:
                if word in ONLY_REFUSED and role in ROLE_TABLE[word]:
                    continue
                reply = _bs_try(a, role, word, c0)
                if role in ROLE_TABLE[word]:
                    check(reply != b"NOT_ALLOWED", "%s on a %s listener: refused" % (word, role))
                else:
                    eq(reply, b"NOT_ALLOWED", "%s on a %s listener" % (word, role))
        ls = listeners(c0)
        for role in ROLES:
            want = sum(1 for w in words if role not in ROLE_TABLE[w])
            eq(int(ls[role]["refused-commands"]), want, "refused-commands of %s" % role)


def _mc_try(a, name, word, c0):
    c0.expect("use q", "USING q")
    c0.send(b"put 0 0 60 1\r\nx\r\n")
    c0.read_line()
    tube_before = c0.stats_tube("q")
    before = stable_stats(c0)
    c = a.client(name)
    c.send(MC_SAMPLE[word])
    reply = c.read_line() if word != "quit" else b""
    if word == "quit":
        c.expect_closed()
    if reply == b"CLIENT_ERROR not allowed":
        eq(stable_stats(c0), before, "stats after memcache %s refused on %s" % (word, name))
        if word == "set":   # the body was read and dropped: in step
            check(c.cmd("version").startswith(b"VERSION "), "after a refused set")
        eq(c0.stats_tube("q"), tube_before, "stats-tube q after %s refused" % word)
    closed(c, c0)
    c0.cmd("flush-tube q")
    return reply


@no_server
def test_every_role_every_memcache_command(binary):
    with Access(binary, MC_SECTIONS) as a:
        c0 = a.srv.client()
        for word in mc_words() + ["get/peek"]:
            for role in ROLES:
                reply = _mc_try(a, "mc" + role, word, c0)
                if role in MC_TABLE[word]:
                    check(reply != b"CLIENT_ERROR not allowed",
                          "memcache %s on a %s listener: refused" % (word, role))
                else:
                    eq(reply, b"CLIENT_ERROR not allowed", "memcache %s on %s" % (word, role))


TUBES = {"r": {"role": "admin", "tubes": "app-*, shared"}}


@no_server
def test_tube_rules_by_name(binary):
    """use, watch, ignore, pause-tube, flush-tube, stats-tube, list-jobs and
    move-job's target outside the patterns: NOT_ALLOWED, nothing changes."""
    with Access(binary, TUBES) as a:
        c0 = a.srv.client()
        jid = put_main(c0, b"secret body", "secret")
        put_main(c0, b"app", "app-1")
        tb = c0.stats_tube("secret")
        before = stable_stats(c0)
        c = a.client("r")
        for line in ("use secret", "watch secret", "ignore secret", "pause-tube secret 10",
                     "flush-tube secret", "stats-tube secret", "list-jobs secret all 0 10",
                     "use app", "stats-tube default"):
            c.expect(line, "NOT_ALLOWED")
        aid = put_main(c0, b"a2", "app-1")
        c.expect("move-job %d secret" % aid, "NOT_ALLOWED")
        before["cmd-put"] = str(int(before["cmd-put"]) + 1)     # put_main a2
        before["cmd-use"] = str(int(before["cmd-use"]) + 1)
        before["total-jobs"] = str(int(before["total-jobs"]) + 1)
        for k in ("current-jobs-urgent", "current-jobs-ready"):
            before[k] = str(int(before[k]) + 1)
        after = stable_stats(c0)
        after.pop("job-memory"), before.pop("job-memory")
        eq(after, before, "stats after refusals")
        eq(harness.unq(c0.stats_job(aid)["tube"]), "app-1", "job after a refused move-job")
        c0.expect("delete %d" % aid, "DELETED")
        eq(c0.stats_tube("secret"), tb, "stats-tube secret after refusals")
        eq(c0.stats_job(jid)["state"], "ready", "the secret job")
        # inside the patterns everything works
        c.expect("use app-9", "USING app-9")
        c.expect("watch shared", "WATCHING 1")
        c.expect("use shared", "USING shared")
        line, body = c.cmd_body("stats-tube app-1")
        check(body is not None and b'name: "app-1"' in body, "stats-tube app-1: %r" % line)


@no_server
def test_tube_rules_by_id(binary):
    """A job outside the patterns does not exist for the listener: every
    command by its id answers NOT_FOUND, and the job stays as it was."""
    with Access(binary, {"w": {"role": "worker", "tubes": "app-*"},
                         "adm": {"role": "admin", "tubes": "app-*"}}) as a:
        c0 = a.srv.client()
        jid = put_main(c0, b"secret body", "secret")
        js = c0.stats_job(jid)
        for name in ("w", "adm"):
            c = a.client(name)
            for cmd in ("peek %d", "stats-job %d", "delete %d", "reserve-job %d",
                        "touch %d", "release %d 0 0", "bury %d 0"):
                c.expect(cmd % jid, "NOT_FOUND")
            if name == "adm":
                c.expect("kick-job %d" % jid, "NOT_FOUND")
                c.expect("move-job %d app-x" % jid, "NOT_FOUND")
            js2 = c0.stats_job(jid)
            for k in ("age", "time-left"):
                js2.pop(k), js.pop(k, None)
            eq(js2, {k: v for k, v in js.items() if k not in ("age", "time-left")},
               "stats-job of the hidden job after commands on %s" % name)
        # a job inside is found
        aid = put_main(c0, b"mine", "app-1")
        c = a.client("adm")
        eq(c.cmd_body("peek %d" % aid), (b"FOUND %d 4" % aid, b"mine"), "peek inside")
        c.expect("move-job %d app-2" % aid, "MOVED")


@no_server
def test_new_connection_without_default(binary):
    """default outside the patterns: a new connection uses and watches
    nothing; put and reserve answer NOT_ALLOWED until use and watch."""
    with Access(binary, {"pw": {"role": "producer,worker", "tubes": "app-*"}}) as a:
        c0 = a.srv.client()
        put_main(c0, b"default job")
        c = a.client("pw")
        c.send(b"list-tubes-watched\r\n")
        # "--- []": a bare "---" loads as null in YAML libraries
        eq(c.read_reply(), (b"OK 7", b"--- []\n"), "list-tubes-watched")
        before = stable_stats(c0)
        c.send(b"put 0 0 60 3\r\nabc\r\n")
        c.expect_lines([b"NOT_ALLOWED"])
        c.expect("reserve", "NOT_ALLOWED")
        c.expect("reserve-with-timeout 0", "NOT_ALLOWED")
        c.expect("peek-ready", "NOT_FOUND")
        c.expect("ignore default", "NOT_ALLOWED")
        eq(stable_stats(c0), before, "stats after the refusals")
        eq(c0.stats_tube("default")["current-using"], "1", "default's users (main only)")
        c.expect("use app-a", "USING app-a")
        c.send(b"put 0 0 60 3\r\nabc\r\n")
        jid = int(c.read_line().split()[1])
        c.expect("watch app-a", "WATCHING 1")
        c.send(b"reserve-with-timeout 0\r\n")
        eq(c.read_reply(), (b"RESERVED %d 3" % jid, b"abc"), "reserve")
        c.expect("ignore app-a", "NOT_IGNORED")
        c.expect("delete %d" % jid, "DELETED")


@no_server
def test_lists_show_only_allowed_tubes(binary):
    with Access(binary, {"ro": {"role": "read", "tubes": "app-*"}}) as a:
        c0 = a.srv.client()
        for t in ("secret", "app-1", "app-2"):
            put_main(c0, b"x", t)
        c = a.client("ro")
        names = c.list_tubes()
        eq(sorted(names), ["app-1", "app-2"], "list-tubes")
        c.send(b"stats-tubes\r\n")
        _, body = c.read_reply()
        check(b"secret" not in body and b"default" not in body and b'"app-1":' in body,
              "stats-tubes: %r" % body[:300])
        s = c.stats()
        eq(s["current-jobs-ready"], "3", "stats stays server-wide")


@no_server
def test_fanout_children_get_copies(binary):
    """A put through a listener that may touch only the parent still
    copies the job into every child."""
    a = Access(binary, {"p": {"role": "producer", "tubes": "orders"}},
               top="[tube orders]\nfanout = true\n")
    with a:
        c0 = a.srv.client()
        c0.expect("watch orders+billing", "WATCHING 2")
        c = a.client("p")
        c.expect("use orders", "USING orders")
        c.send(b"put 0 0 60 2\r\nhi\r\n")
        check(c.read_line().startswith(b"INSERTED"), "put on the parent")
        eq(c0.stats_tube("orders+billing")["current-jobs-ready"], "1", "the child's copy")
        c.expect("stats-tube orders+billing", "NOT_ALLOWED")


@no_server
def test_memcache_tubes(binary):
    secs = {"mp": {"protocol": "memcache", "role": "producer,worker", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        put_main(c0, b"secret", "secret")
        tb = c0.stats_tube("secret")
        before = stable_stats(c0)
        c = a.client("mp")
        c.send(b"set secret 0 0 2\r\nhi\r\n")
        c.expect_lines([b"CLIENT_ERROR not allowed"])
        c.expect("get secret", "END")
        c.expect("get secret/open", "END")
        c.expect("get secret/peek", "END")
        eq(stable_stats(c0), before, "stats after refused memcache commands")
        eq(c0.stats_tube("secret"), tb, "stats-tube secret")
        c.send(b"set app-1 0 0 2\r\nok\r\n")
        c.expect_lines([b"STORED"])
        c.send(b"stats\r\n")
        text = b""
        while not text.endswith(b"END\r\n"):
            text += c.read_line() + b"\r\n"
        check(b"queue_app-1_items" in text and b"queue_secret" not in text
              and b"queue_default" not in text, "memcache stats: %r" % text[-400:])
        c.expect("get app-1", "VALUE app-1 0 2")
        c.expect_lines([b"ok", b"END"])


@no_server
def test_http_listener_tubes(binary):
    import http.client
    with Access(binary, {"web": {"protocol": "http", "tubes": "app-*"}}) as a:
        c0 = a.srv.client()
        put_main(c0, b"x", "secret")
        put_main(c0, b"y", "app-1")
        for path, need in (("/tubes.json", b'"app-1"'), ("/metrics", b'tube="app-1"')):
            h = http.client.HTTPConnection("127.0.0.1", a.port("web"), timeout=5)
            h.request("GET", path)
            body = h.getresponse().read()
            h.close()
            check(need in body, "%s lacks %r" % (path, need))
            check(b"secret" not in body, "%s shows the secret tube" % path)
            check(b'"default"' not in body and b'tube="default"' not in body,
                  "%s shows default" % path)
        h = http.client.HTTPConnection("127.0.0.1", a.port("web"), timeout=5)
        h.request("GET", "/metrics")
        body = h.getresponse().read().decode()
        for fam in ("tubed_listener_connections", "tubed_listener_refused_commands_total",
                    "tubed_listener_refused_peers_total"):
            check(re.search(r'^%s\{listener="web"\} \d+$' % fam, body, re.M),
                  "/metrics lacks %s for web" % fam)
        check(re.search(r'^tubed_listener_connections\{listener="main"\} 1$', body, re.M),
              "main's connections in /metrics")


@no_server
def test_stats_listeners(binary):
    with Access(binary, {"prod": {"role": "producer,read", "tubes": "app-*,jobs"}}) as a:
        c0 = a.srv.client()
        c = a.client("prod")
        c.expect("kick 1", "NOT_ALLOWED")
        c.expect("stats-listeners", "NOT_ALLOWED")
        ls = listeners(c0)
        eq(sorted(ls), ["main", "prod"], "listeners")
        p = ls["prod"]
        eq((p["address"], p["protocol"], p["role"], p["tubes"]),
           ("127.0.0.1:%d" % a.port("prod"), "beanstalk", "producer,read", "app-*,jobs"),
           "prod's entry")
        eq((p["current-connections"], p["total-connections"], p["refused-commands"],
            p["refused-peers"]), ("1", "1", "2", "0"), "prod's counters")
        eq((ls["main"]["role"], ls["main"]["tubes"]), ("admin", "*"), "main's entry")


@no_server
def test_refusals_logged_at_most_once_a_second(binary):
    with Access(binary, {"ro": {"role": "read"}}) as a:
        c = a.client("ro")
        t0 = time.monotonic()
        for _ in range(300):
            c.expect("kick 1", "NOT_ALLOWED")
        elapsed = time.monotonic() - t0
        lines = re.findall(r"listener ro: refused", a.srv.stderr_text())
        check(1 <= len(lines) <= int(elapsed) + 2,
              "%d log lines for 300 refusals in %.1f s" % (len(lines), elapsed))
        eq(int(listeners(a.srv.client())["ro"]["refused-commands"]), 300, "counted")


@no_server
def test_main_listener_false(binary):
    """main_listener = false: only the sections listen (the -l/-p port
    given to the harness stays closed)."""
    a = Access(binary, {"only": {"role": "admin"}}, top="main_listener = false\n")
    # The section's port is held (PortReservation) from the pick to the
    # bind, moved if the first start collides; the -l/-p port is held too
    # (bound, never listening), so no other server listens there.
    sres, mres = harness.PortReservation(), harness.PortReservation()

    def argv():
        a.addr["only"] = ("tcp", sres.port)
        a.write(a.render(a.sections, fresh=False))
        return [binary, "-l", "127.0.0.1", "-p", str(mres.port), "--config", a.path]
    try:
        p = harness.spawn_on([sres], argv, "tubed with main_listener = false")
    except BaseException:
        sres.close()
        mres.close()
        shutil.rmtree(a.tmp, ignore_errors=True)
        raise
    port = mres.port
    try:
        c = wait_for(lambda: _try_client(a.port("only")), "the section's listener")
        c.expect("list-tube-used", "USING default")
        line, body = c.cmd_body("stats-listeners")
        check(b'name: "main"' not in body and b'name: "only"' in body,
              "stats-listeners: %r" % body)
        check(_try_client(port) is None, "the -l/-p port accepts a connection")
        c.close()
    finally:
        p.terminate()
        p.wait(10)
        sres.close()
        mres.close()
        shutil.rmtree(a.tmp, ignore_errors=True)


def _try_client(port):
    try:
        return harness.Client("127.0.0.1", port)
    except OSError:
        return None


@no_server
def test_check_config_errors(binary):
    import tempfile
    cases = [
        ("[listen a]\naddress = 127.0.0.1:1\nrole = boss\n", 3, "unknown role"),
        ("[listen a]\naddress = 127.0.0.1:1\nprotocol = smtp\n", 3, "unknown protocol"),
        ("[listen a]\naddress = 127.0.0.1:1\nusers = root\n", 3, "users needs a Unix socket"),
        ("[listen a]\naddress = 127.0.0.1:1\ngroups = 0\n", 3, "groups needs a Unix socket"),
        ("[listen a]\naddress = 127.0.0.1:1\n\n[listen b]\naddress = 127.0.0.1:1\n", 5,
         "both listen on"),
        ("[listen a]\naddress = 0.0.0.0:7\n[listen b]\naddress = 127.0.0.1:7\n", 4,
         "both listen on"),
        ("[listen a]\naddress = 127.0.0.1:1\ntubes = a**\n", 3, "bad tube pattern"),
        ("[listen a]\naddress = 127.0.0.1:1\ntubes = -x\n", 3, "bad tube pattern"),
        ("[listen a]\naddress = 127.0.0.1:1\ntubes = a,,b\n", 3, "bad tube pattern"),
        ("[listen a]\nrole = read\n", 1, "no address"),
        ("[listen a b]\naddress = 127.0.0.1:1\n", 1, "illegal listener name"),
        ("[listen a]\naddress = 127.0.0.1:1\nfanout = true\n", 3, "unknown key"),
        ("[listen a]\naddress = nowhere\n", 2, "bad address"),
        ("[listen a]\naddress = unix:/tmp/x.sock\nsocket_mode = 999\n", 3, "bad socket_mode"),
        ("[listen a]\naddress = unix:/tmp/x.sock\nusers = no-such-user-xyz\n", 3,
         "unknown user"),
        ("[listen a]\naddress = 127.0.0.1:1\n[listen a]\naddress = 127.0.0.1:2\n", 3,
         "duplicate section"),
        ("[listen a]\naddress = 127.0.0.1:11300\n", 2, "as the -l/-p listener does"),
        ("memcache_port = 22133\n[listen a]\naddress = 127.0.0.1:22133\n", 3,
         "as the --memcache-port listener does"),
    ]
    d = tempfile.mkdtemp(prefix="tubed-access-cc-")
    try:
        for text, line, what in cases:
            path = os.path.join(d, "t.conf")
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([binary, "--config", path, "--check-config"],
                               capture_output=True, timeout=30)
            err = r.stderr.decode()
            eq(r.returncode, 2, "exit status for %r (%s)" % (text, err))
            check(err.startswith("%s:%d: " % (path, line)) and what in err,
                  "for %r expected '%s:%d: ...%s...', got %r" % (text, path, line, what, err))
        with open(path, "w") as f:
            f.write("main_listener = false\n[listen a]\naddress = 127.0.0.1:11300\n"
                    "role = worker, read\ntubes = app-*, default\n"
                    "[listen b]\naddress = unix:/tmp/b.sock\nusers = root, 65534\n"
                    "groups = 0\nsocket_mode = 0600\nprotocol = memcache\n"
                    "[listen c]\naddress = [::1]:8080\nprotocol = http\n")
        r = subprocess.run([binary, "--config", path, "--check-config"],
                           capture_output=True, timeout=30)
        eq((r.returncode, r.stdout.decode()), (0, "%s: ok\n" % path), "a good file")
        # A host name is the address it looks up to (the one a bind takes
        # first), so it clashes with that address written as a number,
        # between two sections and with -l; another address does not.
        fam, _, _, _, sa = socket.getaddrinfo("localhost", None, socket.AF_UNSPEC,
                                              socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0]
        num = sa[0] if fam == socket.AF_INET else "[%s]" % sa[0]
        other = "127.0.0.2" if fam == socket.AF_INET else "[::2]"
        for text, args, want in [
                ("[listen a]\naddress = localhost:24301\n[listen b]\naddress = %s:24301\n"
                 % num, [], "4: [listen b] and [listen a] (line 1) both listen on"),
                ("[listen a]\naddress = %s:24300\n" % num, ["-l", "localhost", "-p", "24300"],
                 "2: [listen a] listens on %s:24300, as the -l/-p listener does" % num),
                ("[listen a]\naddress = localhost:24301\n[listen b]\naddress = %s:24301\n"
                 % other, [], None)]:
            with open(path, "w") as f:
                f.write(text)
            r = subprocess.run([binary, "--config", path, "--check-config"] + args,
                               capture_output=True, timeout=30)
            if want is None:
                eq(r.returncode, 0, "localhost and %s: %s" % (other, r.stderr.decode()))
            else:
                eq(r.returncode, 2, "exit status for %r %s" % (text, args))
                check(want in r.stderr.decode(), "for %r %s expected '%s', got %r"
                      % (text, args, want, r.stderr.decode()))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@no_server
def test_memcache_stats_hide_children_outside(binary):
    """memcache stats name a fanout parent's children only where the
    listener may see them."""
    a = Access(binary, {"m": {"protocol": "memcache", "role": "read", "tubes": "orders"},
                        "all": {"protocol": "memcache", "role": "read"}},
               top="[tube orders]\nfanout = true\n")
    with a:
        c0 = a.srv.client()
        c0.expect("watch orders+billing", "WATCHING 2")
        put_main(c0, b"o", "orders")

        def stats(name):
            c = a.client(name)
            c.send(b"stats\r\n")
            text = b""
            while not text.endswith(b"END\r\n"):
                text += c.read_line() + b"\r\n"
            c.close()
            return text
        full, mine = stats("all"), stats("m")
        check(b"STAT queue_orders_children orders+billing" in full, "children on 'all'")
        check(b"queue_orders_items" in mine and b"billing" not in mine,
              "the restricted listener's stats: %r" % mine[-300:])
