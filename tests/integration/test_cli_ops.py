"""tubed-cli's commands on single jobs and the pause of a tube: delete,
job (peek by id), stats-job, stats-tube, kick-job, pause, and move of
many ids or of every job of a tube in a state. Against a real tubed,
Debian's beanstalkd 1.12 (the plain commands must work there too), and
tubed listeners whose role refuses the command (access.md). Exit
statuses: 0 ok, 1 not found, 2 usage, 3 connection, 4 server error or
refusal, 5 no extension, 6 local error."""

import base64
import re
import socket
import threading

from cli_util import cli_path, need_beanstalkd, run_cli, run_in_pty
from access_util import Access
from harness import check, eq, no_server, start_server
from policy_util import Policy
from repl_util import Cluster, wait_caught_up


def _gone(c, jid):
    return c.cmd_body("stats-job %d" % jid)[0] == b"NOT_FOUND"


def _reserve(c, jid):
    """c reserves job jid (reserve-job: beanstalkd 1.12 has it too)."""
    line, _ = c.cmd_body("reserve-job %d" % jid)
    check(line.startswith(b"RESERVED %d " % jid), "reserve-job %d: %r" % (jid, line))


def _bury(c, tube, n, body=b"b"):
    """n buried jobs in tube (c then uses it); their ids."""
    c.use(tube)
    ids = []
    for _ in range(n):
        jid = c.put(body)
        _reserve(c, jid)
        c.expect("bury %d 10" % jid, "BURIED")
        ids.append(jid)
    return ids


def _state(c, jid):
    s = c.stats_job(jid)
    return s["tube"].strip('"'), s["state"]


# ------------------------------------------------------------------ delete

def test_cli_ops_delete(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    c.use("d")
    ready = c.put(b"r")
    delayed = c.put(b"d", delay=600)
    (buried,) = _bury(c, "d", 1)
    holder = srv.client()
    held = c.put(b"h")
    _reserve(holder, held)

    r = run_cli(b, p, "delete", ready, delayed).ok()
    eq(r.text, "deleted job %d\ndeleted job %d\n" % (ready, delayed), "delete's lines")
    check(_gone(c, ready) and _gone(c, delayed), "both deleted")

    # One job: one message, nothing on stdout, exit 1.
    r = run_cli(b, p, "delete", held).fails(1, "no job %d" % held, "reserved")
    eq(r.err.count("\n"), 1, "one line: %r" % r)
    check(not _gone(c, held), "another client's reservation is not deleted")

    # Several: the others are still deleted; each missing one is named.
    r = run_cli(b, p, "delete", 999999, buried, held)
    eq(r.rc, 1, "exit 1 when a job is missing: %r" % r)
    eq(r.text, "deleted job %d\n" % buried, "stdout holds what was done")
    for jid in (999999, held):
        check("tubed-cli: no job %d (" % jid in r.err, "names %d: %r" % (jid, r))
    check("2 of 3 jobs not found" in r.err, "summary: %r" % r)
    check(_gone(c, buried), "the buried job was deleted")

    j = run_cli(b, p, "--json", "delete", held, 424242)
    eq(j.rc, 1, "--json exit status: %r" % j)
    eq(j.json(), {"deleted": [], "not_found": [held, 424242]}, "--json document")
    jid = c.put(b"x")
    eq(run_cli(b, p, "delete", jid, "--json").ok().json(),
       {"deleted": [jid], "not_found": []}, "delete --json")

    # A bad id anywhere: usage, and nothing is sent.
    keep = c.put(b"k")
    run_cli(b, p, "delete", keep, "12x").fails(2, "'12x' is not a job id")
    run_cli(b, p, "delete", keep, "-1").fails(2)
    run_cli(b, p, "delete").fails(2, "usage: tubed-cli delete ID...")
    check(not _gone(c, keep), "a usage error deleted nothing")


def test_cli_ops_delete_many(srv):
    """More ids than one pipelined batch (100): each answered in order, a
    missing one in the middle stops nothing."""
    c = srv.client()
    c.use("many")
    ids = [c.put(b"%d" % i) for i in range(250)]
    missing = ids[130]
    c.expect("delete %d" % missing, "DELETED")
    r = run_cli(srv.binary, srv.port, "delete", *ids)
    eq(r.rc, 1, "one missing: %r" % r.err)
    eq(r.text.splitlines(), ["deleted job %d" % i for i in ids if i != missing],
       "a line per deleted job, in order")
    eq(r.err.splitlines(), ["tubed-cli: no job %d (it does not exist, or another "
                            "client has it reserved)" % missing,
                            "tubed-cli: 1 of 250 jobs not found"], "stderr")
    eq(c.stats_tube("many")["current-jobs-ready"], "0", "every job deleted")


# ------------------------------------------------------------- job, stats

def test_cli_ops_job_by_id(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    # A tube may be named like an id: peek's argument is always a tube.
    c.use("123")
    in_tube = c.put(b"in tube 123", pri=3)
    c.use("other")
    jid = c.put(b"job body\n", pri=7)
    for _ in range(123 - jid - 1):
        c.put(b"pad")
    job123 = c.put(b"job 123")
    eq(job123, 123, "a job with id 123")

    r = run_cli(b, p, "job", jid).ok()
    check(r.text.endswith("job body\n"), "body last: %r" % r)
    kv = dict(l.split(None, 1) for l in r.text.splitlines()[:-1] if " " in l)
    eq((kv["id"], kv["tube"], kv["state"], kv["pri"]), (str(jid), "other", "ready", "7"),
       "job's stats")
    check(re.search(r"^body\s+9 bytes$", r.text, re.M), "size line: %r" % r)

    eq(run_cli(b, p, "peek", "123", "--raw").ok().out, b"in tube 123",
       "peek 123 is the tube '123'")
    eq(run_cli(b, p, "job", "123", "--raw").ok().out, b"job 123", "job 123 is the job")
    j = run_cli(b, p, "job", in_tube, "--json").ok().json()
    eq((j["id"], j["body"], j["stats"]["tube"], j["stats"]["pri"]),
       (in_tube, "in tube 123", "123", 3), "job --json (tube name a string)")

    # A reserved job can be looked at by id (not by peek-ready).
    w = srv.client()
    got = jid
    _reserve(w, got)
    eq(run_cli(b, p, "job", got, "--json").ok().json()["stats"]["state"], "reserved",
       "a reserved job by id")

    run_cli(b, p, "job", 999999).fails(1, "no job 999999")
    run_cli(b, p, "job", "other").fails(2, "'other' is not a job id")
    run_cli(b, p, "job").fails(2, "usage: tubed-cli job ID")
    # No tube named 77: peek says how to see job 77 instead.
    run_cli(b, p, "peek", "77").fails(1, "no tube '77'", "tubed-cli job 77")

    c.use("bin")
    body = b"\x1b[2Jhi\x9b"
    bj = c.put(body)
    eq(base64.b64decode(run_cli(b, p, "job", bj, "--json").ok().json()["body-base64"]),
       body, "a binary body as base64")
    rc, out, _ = run_in_pty([cli_path(b), "-p", str(p), "--no-color", "job", str(bj)])
    eq(rc, 0, "job on a terminal")
    check(b"\x1b[2J" not in out and b"\\x1b[2J" in out, "escapes shown escaped: %r"
          % out[-120:])


def test_cli_ops_stats_job_and_tube(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    c.use("st")
    jid = c.put(b"xyz", pri=9, delay=500, ttr=77)
    r = run_cli(b, p, "stats-job", jid).ok()
    kv = dict(l.split(None, 1) for l in r.text.splitlines())
    eq((kv["tube"], kv["state"], kv["pri"], kv["ttr"]), ("st", "delayed", "9", "77"),
       "stats-job")
    check("xyz" not in r.text and "body" not in kv, "no body: %r" % r)
    j = run_cli(b, p, "stats-job", jid, "--json").ok().json()
    eq((j["id"], j["tube"], j["delay"]), (jid, "st", 500), "stats-job --json")

    r = run_cli(b, p, "stats-tube", "st").ok()
    kv = dict(l.split(None, 1) for l in r.text.splitlines())
    eq((kv["name"], kv["current-jobs-delayed"]), ("st", "1"), "stats-tube")
    j = run_cli(b, p, "stats-tube", "st", "--json").ok().json()
    for k, v in c.stats_tube("st").items():
        if k == "name":
            eq(j[k], "st", "name is a string")
        elif k not in ("pause-time-left",):
            eq(j[k], int(v), "stats-tube --json %s" % k)

    run_cli(b, p, "stats-job", 999999).fails(1, "no job 999999")
    run_cli(b, p, "stats-tube", "nope").fails(1, "no tube 'nope'")
    check("nope" not in c.list_tubes(), "stats-tube created no tube")
    run_cli(b, p, "stats-tube", "-bad").fails(2)
    run_cli(b, p, "stats-tube", "--", "-bad").fails(2, "not a legal tube name")


# ------------------------------------------------------------ kick-job

def test_cli_ops_kick_job(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    buried = _bury(c, "kj", 2)
    delayed = c.put(b"d", delay=600)
    ready = c.put(b"r")
    r = run_cli(b, p, "kick-job", buried[0], delayed).ok()
    eq(r.text, "kicked job %d\nkicked job %d\n" % (buried[0], delayed), "kick-job")
    eq(_state(c, buried[0]), ("kj", "ready"), "buried job kicked")
    eq(_state(c, delayed), ("kj", "ready"), "delayed job kicked")
    eq(_state(c, buried[1]), ("kj", "buried"), "the other buried job stays")

    run_cli(b, p, "kick-job", ready).fails(1, "no job %d that can be kicked" % ready)
    j = run_cli(b, p, "--json", "kick-job", ready, buried[1])
    eq(j.rc, 1, "a ready job cannot be kicked: %r" % j)
    eq(j.json(), {"kicked": [buried[1]], "not_found": [ready]}, "kick-job --json")
    eq(_state(c, buried[1]), ("kj", "ready"), "kicked")
    run_cli(b, p, "kick-job", "x").fails(2)


# --------------------------------------------------------------- pause

def test_cli_ops_pause(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    c.use("pz")
    jid = c.put(b"x")
    eq(run_cli(b, p, "pause", "pz", 600).ok().text,
       "paused tube 'pz' for 600 seconds\n", "pause")
    s = c.stats_tube("pz")
    eq((s["pause"], s["cmd-pause-tube"]), ("600", "1"), "paused")
    w = srv.client()
    w.watch("pz")
    w.ignore("default")
    w.expect("reserve-with-timeout 0", "TIMED_OUT")      # held from workers

    eq(run_cli(b, p, "pause", "pz", 0, "--json").ok().json(),
       {"tube": "pz", "paused": 0}, "pause 0 --json")
    eq(c.stats_tube("pz")["pause"], "0", "resumed")
    # Generous: beanstalkd resumes at its next tick, tubed at once.
    eq(w.reserve(timeout=10)[0], jid, "workers get the job again")
    eq(run_cli(b, p, "pause", "pz", 1).ok().text, "paused tube 'pz' for 1 second\n",
       "one second")

    run_cli(b, p, "pause", "nope", 5).fails(1, "no tube 'nope'")
    for bad in ("-1", "4294967296", "5s", ""):
        run_cli(b, p, "pause", "--", "pz", bad).fails(2, "SECONDS")
    run_cli(b, p, "pause", "pz").fails(2, "usage: tubed-cli pause TUBE SECONDS")


# ---------------------------------------------------------------- move

def test_cli_ops_move_ids(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    c.use("src")
    a = c.put(b"a", pri=4)
    d = c.put(b"d", delay=600)
    (bu,) = _bury(c, "src", 1)
    w = srv.client()
    rv = c.put(b"r")
    _reserve(w, rv)

    r = run_cli(b, p, "move", a, d, bu, "dst").ok()
    eq(r.text, "".join("moved job %d to tube 'dst'\n" % i for i in (a, d, bu)),
       "a line per job")
    eq([_state(c, i) for i in (a, d, bu)],
       [("dst", "ready"), ("dst", "delayed"), ("dst", "buried")], "moved, states kept")
    eq(c.stats_job(a)["pri"], "4", "priority kept")

    r = run_cli(b, p, "--json", "move", a, rv, 999999, "src")
    eq(r.rc, 1, "a reserved and a missing job: %r" % r)
    eq(r.json(), {"tube": "src", "moved": [a], "not_found": [rv, 999999]},
       "move --json of several")
    check("no job %d that can move" % rv in r.err and "reserved" in r.err, r.err)
    eq(_state(c, rv), ("src", "reserved"), "the reserved job stayed")
    # One id keeps its old output.
    eq(run_cli(b, p, "move", a, "dst", "--json").ok().json(), {"moved": a}, "one id")
    run_cli(b, p, "move", rv, "dst", "--json").fails(1, "reserved")
    run_cli(b, p, "move", a, "x", "dst").fails(2, "'x' is not a job id")
    run_cli(b, p, "move", a).fails(2, "usage: tubed-cli move ID... TUBE | "
                                      "move FROM STATE TUBE")


def test_cli_ops_move_state(srv):
    b, p = srv.binary, srv.port
    c = srv.client()
    c.use("from")
    ready = [c.put(b"r") for _ in range(3)]
    delayed = c.put(b"d", delay=600)
    buried = _bury(c, "from", 2)
    w = srv.client()
    rv = c.put(b"v")
    _reserve(w, rv)

    eq(run_cli(b, p, "move", "from", "buried", "park").ok().text,
       "moved 2 buried jobs from tube 'from' to tube 'park'\n", "buried only")
    eq([_state(c, i) for i in buried], [("park", "buried")] * 2, "buried moved")
    eq(_state(c, ready[0]), ("from", "ready"), "ready stayed")

    j = run_cli(b, p, "move", "from", "all", "park", "--json").ok().json()
    eq(j, {"from": "from", "state": "all", "tube": "park", "moved": 4, "skipped": 0},
       "all: every job that can move")
    eq([_state(c, i) for i in ready + [delayed]],
       [("park", "ready")] * 3 + [("park", "delayed")], "states kept")
    eq(_state(c, rv), ("from", "reserved"), "the reserved job stays")

    run_cli(b, p, "move", "from", "reserved", "park").fails(2, "reserved jobs cannot move")
    run_cli(b, p, "move", "park", "ready", "park").fails(2, "already")
    run_cli(b, p, "move", "ghost", "ready", "park").fails(1, "no tube 'ghost'")
    eq(run_cli(b, p, "move", "from", "ready", "park").ok().text,
       "moved 0 ready jobs from tube 'from' to tube 'park'\n", "nothing to move")

    # Past a page of list-jobs (1000), and the tube emptied on the way:
    # nobody uses or watches it, so it goes once its last job left.
    c.use("big")
    big = [c.put(b"") for _ in range(2300)]
    c.use("default")
    eq(run_cli(b, p, "move", "big", "all", "bigger").ok().text,
       "moved 2300 jobs from tube 'big' to tube 'bigger'\n", "2300 jobs")
    eq(c.stats_tube("bigger")["current-jobs-ready"], "2300", "all arrived")
    eq(_state(c, big[-1]), ("bigger", "ready"), "the last one too")


@no_server
def test_cli_ops_move_into_full_tube(binary):
    """A target that fills up stops the run: the jobs moved before it are
    said, the others stay where they were."""
    with Policy(binary, "[tube lim]\nmax_items = 3\n") as pol:
        c = pol.srv.client()
        c.use("lots")
        ids = [c.put(b"x") for _ in range(5)]
        r = run_cli(binary, pol.srv.port, "move", *ids, "lim")
        eq(r.rc, 4, "full: a server error: %r" % r)
        eq(r.text, "".join("moved job %d to tube 'lim'\n" % i for i in ids[:3]),
           "the moved ones")
        check("cannot move job %d: tube 'lim' is full (stopped after 3 jobs moved)"
              % ids[3] in r.err, r.err)
        eq(c.stats_tube("lots")["current-jobs-ready"], "2", "the others stayed")
        r = run_cli(binary, pol.srv.port, "move", "lots", "ready", "lim", "--json")
        eq((r.rc, r.out), (4, b""), "--json: nothing on stdout when stopped: %r" % r)
        check("is full" in r.err, r.err)


# ----------------------------------------------------------- beanstalkd

@no_server
def test_cli_ops_beanstalkd(binary):
    """The plain commands against beanstalkd 1.12; the moves need tubed."""
    with start_server(need_beanstalkd()) as bs:
        p = bs.port
        c = bs.client()
        c.use("t")
        a = c.put(b"alpha", pri=5)
        x = c.put(b"x")
        buried = _bury(c, "t", 1)[0]
        eq(run_cli(binary, p, "job", a, "--raw").ok().out, b"alpha", "job on beanstalkd")
        eq(run_cli(binary, p, "job", a, "--json").ok().json()["stats"]["pri"], 5,
           "job --json")
        eq(run_cli(binary, p, "stats-job", a, "--json").ok().json()["tube"], "t",
           "stats-job")
        eq(run_cli(binary, p, "stats-tube", "t", "--json").ok().json()["name"], "t",
           "stats-tube")
        eq(run_cli(binary, p, "kick-job", buried).ok().text,
           "kicked job %d\n" % buried, "kick-job")
        eq(_state(c, buried), ("t", "ready"), "kicked")
        r = run_cli(binary, p, "delete", a, 999)
        eq((r.rc, r.text), (1, "deleted job %d\n" % a), "delete: %r" % r)
        check("no job 999" in r.err, r.err)
        eq(run_cli(binary, p, "pause", "t", 600).ok().text,
           "paused tube 't' for 600 seconds\n", "pause")
        eq(c.stats_tube("t")["pause"], "600", "paused on beanstalkd")
        w = bs.client()
        w.watch("t")
        w.expect("reserve-with-timeout 0", "TIMED_OUT")
        run_cli(binary, p, "pause", "t", 0).ok()
        got = w.reserve(timeout=10)[0]       # at beanstalkd's next tick
        check(got in (x, buried), "resumed: reserved %d" % got)
        run_cli(binary, p, "pause", "nope", 1).fails(1, "no tube 'nope'")
        run_cli(binary, p, "job", 999).fails(1, "no job 999")
        for args, word in ((["move", x, "u"], "move-job"),
                           (["move", x, buried, "u"], "move-job"),
                           (["move", "t", "all", "u"], "list-jobs")):
            r = run_cli(binary, p, *args).fails(
                5, "move needs tubed (the server does not know %s)" % word)
            eq(r.err.count("\n"), 1, "one line: %r" % r)
        eq(c.cmd("stats-tube u"), b"NOT_FOUND", "no move happened")


# --------------------------------------------------------------- access

@no_server
def test_cli_ops_refused_by_role(binary):
    """A listener whose role refuses the command: a clear message, exit 4,
    nothing changed; what the role allows works."""
    with Access(binary, {"ro": {"role": "read"},
                         "wk": {"role": "worker", "tubes": "app-*"}}) as acc:
        admin = acc.srv.client()
        admin.use("app-1")
        a = admin.put(b"a")
        d = admin.put(b"d", delay=600)
        admin.use("other")
        o = admin.put(b"o")
        ro, wk = acc.port("ro"), acc.port("wk")
        refused = "refused: this listener's role or tubes do not allow it (NOT_ALLOWED)"
        for args in (["delete", a], ["delete", a, d], ["kick-job", d],
                     ["pause", "app-1", 60], ["move", a, "app-2"],
                     ["move", a, d, "app-2"], ["move", "app-1", "all", "app-2"],
                     ["kick", "app-1"]):
            r = run_cli(binary, ro, *args).fails(4, refused)
            eq(r.err.count("\n"), 1, "one line: %r" % r)
            check("stopped after" not in r.err, "nothing was done: %r" % r)
        run_cli(binary, ro, "--json", "delete", a).fails(4, "NOT_ALLOWED")
        eq(_state(admin, a), ("app-1", "ready"), "nothing deleted or moved")
        eq(_state(admin, d), ("app-1", "delayed"), "nothing kicked")
        eq(admin.stats_tube("app-1")["pause"], "0", "not paused")
        # Reading is the read role's.
        eq(run_cli(binary, ro, "job", a, "--raw").ok().out, b"a", "job on read")
        eq(run_cli(binary, ro, "stats-job", a, "--json").ok().json()["state"], "ready",
           "stats-job on read")

        # A worker may delete in its tubes; a job elsewhere does not exist for it.
        run_cli(binary, wk, "pause", "app-1", 60).fails(4, refused)
        run_cli(binary, wk, "delete", o).fails(1, "no job %d" % o)
        check(not _gone(admin, o), "the other tube's job stays")
        run_cli(binary, wk, "job", o).fails(1, "no job %d" % o)
        run_cli(binary, wk, "stats-tube", "other").fails(4, "NOT_ALLOWED")
        eq(run_cli(binary, wk, "delete", a, d).ok().text,
           "deleted job %d\ndeleted job %d\n" % (a, d), "worker deletes in app-*")
        check(_gone(admin, a) and _gone(admin, d), "deleted")


@no_server
def test_cli_ops_on_a_replica(binary):
    """A replica answers every change DRAINING (replication.md section 2):
    the message says it may be a replica; reading by id works there."""
    with Cluster(binary) as cl:
        p = cl.node("p")
        r = cl.node("r", replica_of=p)
        c = p.bs()
        c.use("rt")
        jid = c.put(b"on both")
        wait_caught_up(p, r)
        eq(run_cli(binary, r.port, "job", jid, "--raw").ok().out, b"on both",
           "job on the replica")
        for args in (["delete", jid], ["kick-job", jid], ["pause", "rt", 5],
                     ["move", jid, "else"], ["move", "rt", "all", "else"]):
            run_cli(binary, r.port, *args).fails(4, "DRAINING", "or a replica")
        eq(_state(c, jid), ("rt", "ready"), "nothing changed on the primary")


class _Scripted:
    """A one-connection server that answers each request line with the next
    of `replies` (bytes, CRLF added) and closes once they run out."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.got = []
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(1)
        self.ls.settimeout(20)
        self.port = self.ls.getsockname()[1]
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def _serve(self):
        try:
            c, _ = self.ls.accept()
        except OSError:
            return
        c.settimeout(20)
        buf = b""
        try:
            while self.replies:
                while b"\r\n" not in buf:
                    data = c.recv(4096)
                    if not data:
                        return
                    buf += data
                line, buf = buf.split(b"\r\n", 1)
                self.got.append(line)
                c.sendall(self.replies.pop(0) + b"\r\n")
        except OSError:
            pass
        finally:
            c.close()

    def close(self):
        self.ls.close()
        self.t.join(20)


@no_server
def test_cli_ops_stopped_part_way(binary):
    """A server that goes away, or answers what the protocol does not, in
    the middle of a run: what was done is on stdout, the message says how
    far it got, the exit status is the failure's."""
    s = _Scripted([b"DELETED", b"NOT_FOUND", b"DELETED"])
    try:
        r = run_cli(binary, s.port, "delete", 1, 2, 3, 4, 5)
    finally:
        s.close()
    eq(r.rc, 3, "connection lost: %r" % r)
    eq(r.text, "deleted job 1\ndeleted job 3\n", "the jobs deleted")
    check("no job 2 (" in r.err, "the missing one named: %r" % r)
    check("closed the connection (stopped after 2 jobs deleted)" in r.err, r.err)
    eq(s.got[:3], [b"delete 1", b"delete 2", b"delete 3"], "requests in order")

    s = _Scripted([b"KICKED", b"KICKED 9", b"KICKED"])
    try:
        r = run_cli(binary, s.port, "--json", "kick-job", 7, 8, 9)
    finally:
        s.close()
    eq((r.rc, r.out), (4, b""), "a bad reply: a server error, no document: %r" % r)
    check("kick-job: unexpected reply (KICKED 9) (stopped after 2 jobs kicked)"
          in r.err, r.err)


# ---------------------------------------------------------------- usage

def test_cli_ops_usage(srv):
    b, p = srv.binary, srv.port
    run_cli(b, p, "delete", 1, "--raw").fails(2, "--raw is for peek and job")
    run_cli(b, p, "kick-job", 1, "--pri", "3").fails(2, "--pri")
    run_cli(b, p, "stats-job", 1, 2).fails(2, "usage: tubed-cli stats-job ID")
    run_cli(b, p, "move", "a", "b", "c", "d").fails(2, "'a' is not a job id")
    h = run_cli(b, None, "--help").ok().text
    for form in ("delete ID...", "job ID", "kick-job ID...", "pause TUBE SECONDS",
                 "stats-job ID", "stats-tube TUBE", "move ID... TUBE",
                 "move FROM STATE TUBE"):
        check(re.search(r"^  %s\s{2,}\S" % re.escape(form), h, re.M),
              "--help lists %r:\n%s" % (form, h))
