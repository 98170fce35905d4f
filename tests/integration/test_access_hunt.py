"""Access control (spec access.md): the ways around a listener's role and
tubes that test_access*.py did not try, each pinned by the test of the
bug it found (named after what the old server let through).

- A restricted admin listener ran the replication handshake, whose stream
  carries every job and body of every tube, and promote/follow.
- memcache dump_config on a restricted listener named every tube.
- A malformed put or pause-tube that beanstalkd still counts moved cmd-*
  on a listener whose role could not run it.
- A reload that took the worker role away left a parked reserve (and a
  memcache get) waiting: it then reserved a job for a role that may not.
- A reload that let a listener touch default left its connections that
  started with no tube using an uncounted default and watching nothing.
- stats-binlog's oldest-file-pinned-by named a job of a tube the listener
  may not see.
- A memcache reload that refused its own peer went on running the rest of
  its packet; open memcache jobs of queues a reload took away stayed
  reserved for good; a restricted memcache admin could shut the server.
- Two sections on one Unix socket file spelt differently: the second took
  the first's clients; socket files were briefly as open as the umask.
- A replica's link outlived the reload that restricted its listener.
- Under socket activation the admin listener served the inherited socket
  named after a section.
- stats-listeners on a restricted admin showed the other listeners' tubes.
- A command naming a job of a hidden tube was counted as a refusal, one
  naming an id no job has as the command: the counters in stats,
  stats-listeners and the metrics told which hidden ids exist.
- A memcache get (or monitor) of a queue outside the listener's tubes
  answered END at once where an empty queue waits its timeout: a worker
  polling it spun.

Readings taken where access.md is silent are in doc/security.md.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import harness
from access_util import Access, listeners, mc_lines, put, stable_stats
from harness import check, eq, no_server
from policy_util import wait_for


class TmpDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="tubed-acchunt-")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def _replicate(s):
    """Send the replication handshake on raw socket s; its answer's bytes
    (at least one whole line)."""
    s.sendall(b"replicate 1 0\r\n")
    got = b""
    while b"\r\n" not in got:
        chunk = s.recv(4096)
        check(chunk, "closed before the handshake's answer: %r" % got)
        got += chunk
    return got


@no_server
def test_replication_refused_on_restricted_listener(binary):
    """replicate would stream every tube's jobs and bodies; promote and
    follow change every tube. On a listener with tubes they answer
    NOT_ALLOWED, the connection stays, nothing is sent; an admin section
    without tubes still replicates."""
    with TmpDir() as d, Access(binary, {"adm": {"role": "admin", "tubes": "app-*"},
                                        "all": {"role": "admin"}},
                               args=["-b", d]) as a:
        c0 = a.srv.client()
        put(c0, "secret", b"topsecret")
        c = a.client("adm")
        for line in ("replicate 1 0", "promote", "follow 127.0.0.1:1"):
            c.expect(line, "NOT_ALLOWED")
        c.expect("list-tube-used", "NOT_ALLOWED")    # still in step: uses nothing
        c.expect("use app-1", "USING app-1")
        check(not c.has_data(0.2), "bytes after the refusals: %r" % c.buf)
        eq(c0.stats_job(1)["state"], "ready", "the secret job")
        eq(c0.stats()["current-connections"], "2", "connections (the refused one stays)")
        # The control: a section that may touch every tube replicates.
        s = a.sock("all")
        got = _replicate(s)
        check(got.startswith(b"REPLICATING "), "replicate on an unrestricted admin: %r"
              % got[:60])
        s.close()


@no_server
def test_dump_config_names_only_allowed_tubes(binary):
    secs = {"mca": {"protocol": "memcache", "role": "admin", "tubes": "app-*"},
            "mcall": {"protocol": "memcache", "role": "admin"}}
    top = "[tube secretcfg]\nmax_items = 5\n[tube app-cfg]\nmax_items = 7\n"
    with Access(binary, secs, top=top) as a:
        c0 = a.srv.client()
        put(c0, "secret")
        put(c0, "app-1")

        def queues(name):
            c = a.client(name)
            heads = [l for l in mc_lines(c, b"dump_config\r\n") if l.startswith(b"queue ")]
            c.close()
            return heads
        eq(queues("mca"), [b"queue 'app-1' {", b"queue 'app-cfg' {"], "restricted dump_config")
        eq(queues("mcall"), [b"queue 'app-1' {", b"queue 'app-cfg' {",
                             b"queue 'default' {", b"queue 'secret' {",
                             b"queue 'secretcfg' {"], "unrestricted dump_config")


@no_server
def test_dump_config_hides_a_hidden_expiry_target(binary):
    """An allowed tube's move_expired_to may name a tube the listener may
    not see; the old dump_config printed that name (a leak §3 forbids)."""
    secs = {"mca": {"protocol": "memcache", "role": "admin", "tubes": "app-*"},
            "mcall": {"protocol": "memcache", "role": "admin"}}
    top = ("[tube app-cfg]\nmax_age = 60s\nmove_expired_to = vault\n"
           "[tube app-two]\nmax_age = 60s\nmove_expired_to = app-dead\n")
    with Access(binary, secs, top=top) as a:
        def targets(name):
            c = a.client(name)
            got = [l for l in mc_lines(c, b"dump_config\r\n") if b"move_expired_to=" in l]
            c.close()
            return got
        eq(targets("mca"), [b"  move_expired_to=(a tube not served here)",
                            b"  move_expired_to=app-dead"], "restricted dump_config")
        eq(targets("mcall"), [b"  move_expired_to=vault", b"  move_expired_to=app-dead",
                              b"  move_expired_to=(none)"], "unrestricted dump_config")


@no_server
def test_malformed_counted_commands_move_no_counter_when_refused(binary):
    """beanstalkd counts `put` with junk after its numbers, and pause-tube
    of an illegal name, though it answers BAD_FORMAT (or JOB_TOO_BIG after
    reading an oversized body). A listener that may not run them keeps the
    reply and moves no counter."""
    secs = {"ro": {"role": "read"},
            "pw": {"role": "producer", "tubes": "app-*"}}
    with Access(binary, secs, args=["-z", "10"]) as a:
        c0 = a.srv.client()
        before = stable_stats(c0)
        r = a.client("ro")
        r.expect("put 0 0 60 5 junk", "BAD_FORMAT")
        r.expect("pause-tube -x 5", "BAD_FORMAT")
        r.send(b"put 0 0 60 20 junk\r\n" + b"y" * 20 + b"\r\n")   # > -z: body read
        r.expect_lines([b"JOB_TOO_BIG"])
        p = a.client("pw")   # a producer: pause-tube is not its command
        p.expect("pause-tube -x 5", "BAD_FORMAT")
        eq(stable_stats(c0), before, "stats after malformed commands on refused listeners")
        r.expect("list-tube-used", "USING default")                # in step
        # Where the role may run the command, beanstalkd's count stands
        # (whatever tube it uses: the line names none).
        p.expect("put 0 0 60 5 junk", "BAD_FORMAT")
        eq(int(c0.stats()["cmd-put"]), int(before["cmd-put"]) + 1, "cmd-put on a producer")
        c0.expect("pause-tube -x 5", "BAD_FORMAT")
        eq(int(c0.stats()["cmd-pause-tube"]), int(before["cmd-pause-tube"]) + 1,
           "cmd-pause-tube on the admin listener")


@no_server
def test_reload_taking_the_worker_role_ends_parked_waits(binary):
    """A reserve (and a memcache get) parked when a reload takes the
    worker role away ends at once (NOT_ALLOWED; memcache END) and takes
    nothing; one whose role stays keeps waiting and gets the job."""
    secs = {"w": {"role": "worker"}, "keep": {"role": "worker"},
            "m": {"protocol": "memcache", "role": "worker"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        w, keep, m = a.client("w"), a.client("keep"), a.client("m")
        w.send(b"reserve\r\n")
        m.send(b"get q/t=60000\r\n")
        wait_for(lambda: c0.stats()["current-waiting"] == "2", "two parked waits")
        keep.send(b"reserve\r\n")
        wait_for(lambda: c0.stats()["current-waiting"] == "3", "three parked waits")
        a.rewrite({"w": {"role": "read"}, "keep": {"role": "worker"},
                   "m": {"protocol": "memcache", "role": "read"}})
        a.reload()
        eq(w.read_line(), b"NOT_ALLOWED", "the parked reserve of a listener now read-only")
        eq(m.read_line(), b"END", "the parked memcache get of a listener now read-only")
        eq(c0.stats()["current-waiting"], "1", "waits left")
        jid = put(c0, "default", b"job")
        put(c0, "q", b"mc")
        eq(keep.read_reply(), (b"RESERVED %d 3" % jid, b"job"), "the worker kept")
        eq(c0.stats_tube("q")["current-jobs-ready"], "1", "q's job, not taken")
        w.expect("reserve-with-timeout 0", "NOT_ALLOWED")
        w.expect("list-tube-used", "USING default")


@no_server
def test_reload_allowing_default_gives_it_to_open_connections(binary):
    """A connection that started with no tube (default not allowed) uses
    and watches default once a reload allows it, counted as any other
    user of default; one that has chosen its tubes since keeps them."""
    secs = {"pw": {"role": "producer,worker", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        c = a.client("pw")
        c.expect("list-tube-used", "NOT_ALLOWED")
        chose = a.client("pw")
        chose.expect("use app-1", "USING app-1")
        chose.expect("watch app-2", "WATCHING 1")
        eq(c0.stats_tube("default")["current-using"], "1", "default's users (main)")
        a.rewrite({"pw": {"role": "producer,worker"}})     # every tube now
        a.reload()
        c.expect("list-tube-used", "USING default")
        c.send(b"list-tubes-watched\r\n")
        eq(c.read_reply(), (b"OK 14", b"---\n- default\n"), "list-tubes-watched")
        st = c0.stats_tube("default")
        eq((st["current-using"], st["current-watching"]), ("2", "2"),
           "default's users and watchers")
        chose.expect("list-tube-used", "USING app-1")
        chose.send(b"list-tubes-watched\r\n")
        eq(chose.read_reply(), (b"OK 12", b"---\n- app-2\n"), "its own watches")
        jid = put(c0, "default", b"abc")
        c.send(b"reserve-with-timeout 0\r\n")
        eq(c.read_reply(), (b"RESERVED %d 3" % jid, b"abc"), "reserve from default")
        c.expect("delete %d" % jid, "DELETED")
        c.close()
        wait_for(lambda: c0.stats_tube("default")["current-using"] == "1",
                 "the close to let default go")


@no_server
def test_stats_binlog_names_no_hidden_job(binary):
    """oldest-file-pinned-by is 0 on a listener that may not see the
    pinning job; others still see its id."""
    with TmpDir() as d, Access(binary, {"r": {"role": "read", "tubes": "app-*"},
                                        "s": {"role": "read", "tubes": "secret"}},
                               args=["-b", d, "-s", "65536", "-z", "1024"]) as a:
        c0 = a.srv.client()
        sid = put(c0, "secret", b"pin")
        c0.expect("use app-1", "USING app-1")
        # A second file: the first one is kept by the secret job (the live
        # jobs keep compaction away: it waits for mostly dead files).
        for _ in range(80):
            c0.send(b"put 0 0 60 1000\r\n" + b"z" * 1000 + b"\r\n")
            check(c0.read_line().startswith(b"INSERTED"), "put into app-1")
        eq(c0.stats()["binlog-oldest-index"], "1", "the oldest binlog file")

        def pinned(c):
            c.send(b"stats-binlog\r\n")
            _, body = c.read_reply()
            return int(re.search(rb"oldest-file-pinned-by: (\d+)", body).group(1))
        eq(pinned(c0), sid, "pinned-by on the admin listener")
        eq(pinned(a.client("r")), 0, "pinned-by where the secret tube is hidden")
        eq(pinned(a.client("s")), sid, "pinned-by where the secret tube is allowed")


@no_server
def test_memcache_reload_that_refuses_its_own_peer_runs_nothing_more(binary):
    """A memcache reload whose new users no longer name the sender's own
    peer closes that connection at once: the commands after the reload in
    the same packet do not run (they ran: a set stored a job for a peer no
    longer allowed, and replies were queued on the closed descriptor,
    which a connection accepted in the same batch may already reuse)."""
    me = os.getuid()
    secs = {"m": {"protocol": "memcache", "address": "unix", "users": str(me)}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        c = a.client("m")
        check(c.cmd("version").startswith(b"VERSION "), "version before the reload")
        a.rewrite({"m": {"protocol": "memcache", "address": "unix", "users": str(me + 1)}})
        c.send(b"reload\r\nset leak 0 0 4\r\nbody\r\nversion\r\n")
        c.expect_closed()
        wait_for(lambda: c0.stats()["current-connections"] == "1", "the close")
        c0.expect("stats-tube leak", "NOT_FOUND")
        eq(c0.stats()["total-jobs"], "0", "jobs stored")
        check("refused peer uid %d" % me in a.srv.stderr_text(), "the refusal is logged")


@no_server
def test_reload_gives_back_open_memcache_jobs_it_no_longer_allows(binary):
    """kestrel's open jobs have no TTR: one whose queue a reload takes from
    the listener (or every one, when the reload takes the worker role)
    could neither be closed nor aborted any more, and stayed reserved
    while the connection lived. They go back to ready at the reload."""
    secs = {"m": {"protocol": "memcache", "role": "worker", "tubes": "app-*, q"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        put(c0, "q", b"qq")
        put(c0, "app-1", b"aa")
        m = a.client("m")
        for q, body in (("q", b"qq"), ("app-1", b"aa")):
            m.expect("get %s/open" % q, "VALUE %s/open 0 2" % q)
            m.expect_lines([body, b"END"])

        def states(tube):
            st = c0.stats_tube(tube)
            return st["current-jobs-ready"], st["current-jobs-reserved"]
        eq((states("q"), states("app-1")), (("0", "1"), ("0", "1")), "both open")
        a.rewrite({"m": {"protocol": "memcache", "role": "worker", "tubes": "app-*"}})
        a.reload()
        eq((states("q"), states("app-1")), (("1", "0"), ("0", "1")), "after q is taken away")
        a.rewrite({"m": {"protocol": "memcache", "role": "read", "tubes": "app-*"}})
        a.reload()
        eq(states("app-1"), ("1", "0"), "after the worker role is taken away")
        check(m.cmd("version").startswith(b"VERSION "), "the connection stays")


@no_server
def test_memcache_shutdown_refused_on_restricted_listener(binary):
    """shutdown ends every tube's service (and, without a binlog, every
    job): an admin listener with tubes may not run it, even with
    allow_shutdown."""
    secs = {"m": {"protocol": "memcache", "role": "admin", "tubes": "app-*"}}
    with Access(binary, secs, top="allow_shutdown = true\n") as a:
        c0 = a.srv.client()
        put(c0, "secret")
        m = a.client("m")
        m.expect("shutdown", "CLIENT_ERROR not allowed")
        check(m.cmd("version").startswith(b"VERSION "), "the connection stays")
        eq(c0.stats()["current-jobs-ready"], "1", "the server and its job")
        check(a.srv.alive(), "the server runs")


@no_server
def test_one_unix_socket_under_two_spellings(binary):
    """Two sections on one Unix socket file spelt differently: the second
    used to replace the first's socket at start, so that the first's
    clients (a worker socket, here) got the second's role (admin).
    --check-config names the clash for "//", "/./" and "dir/.."; at start
    a socket another listener serves (here through a symbolic link) is
    never replaced, while a stale one still is."""
    with TmpDir() as d:
        os.mkdir(os.path.join(d, "run"))
        os.symlink(os.path.join(d, "run"), os.path.join(d, "link"))
        conf = os.path.join(d, "t.conf")
        first = os.path.join(d, "run", "w.sock")
        for other in ("run//w.sock", "run/./w.sock", "run/x/../w.sock"):
            with open(conf, "w") as f:
                f.write("[listen w]\naddress = unix:%s\nrole = worker\n"
                        "[listen a]\naddress = unix:%s/%s\n" % (first, d, other))
            r = subprocess.run([binary, "--config", conf, "--check-config"],
                                       capture_output=True, timeout=30)
            err = r.stderr.decode()
            eq(r.returncode, 2, "check-config of %r: %s" % (other, err))
            check(err.startswith("%s:5: " % conf) and "both listen on" in err,
                  "check-config of %r: %r" % (other, err))
        # A stale socket file (nobody listens) is replaced, as before.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(first)
        s.close()
        with open(conf, "w") as f:
            f.write("[listen w]\naddress = unix:%s\nrole = worker\n"
                    "[listen a]\naddress = unix:%s\n" % (first, os.path.join(d, "link", "w.sock")))
        # -p's port is held from the pick to the run, and a run refused on
        # it ('Address already in use': another test's server took it) is
        # tried again on another (test_ops.run_refused).
        import test_ops
        r = test_ops.run_refused(binary, ["--config", conf], timeout=30)
        err = r.stderr.decode()
        check(r.returncode != 0 and "a server listens there already" in err,
              "the second spelling at start: status %r, %r" % (r.returncode, err[-400:]))
        check("listening on unix:%s (listener w" % first in err,
              "the stale socket was replaced: %r" % err[-400:])


# An LD_PRELOAD shim: at every listen() on a Unix socket, the socket file's
# permissions then, appended to $ACC_SHIM_OUT ("PATH MODE\n"). listen()
# comes between bind() and the chmod() to socket_mode, so this sees the
# window a peer could connect through.
SHIM_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

int listen(int fd, int backlog)
{
    int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;
    struct stat st;
    const char *out = getenv("ACC_SHIM_OUT");

    if (out && getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
        sa.sun_family == AF_UNIX && sa.sun_path[0] && stat(sa.sun_path, &st) == 0) {
        FILE *f = fopen(out, "a");
        if (f) {
            fprintf(f, "%s %o\n", sa.sun_path, (unsigned)(st.st_mode & 0777));
            fclose(f);
        }
    }
    return real(fd, backlog);
}
"""


@no_server
def test_unix_socket_never_looser_than_socket_mode(binary):
    """The socket file was made under the process umask and only then
    chmod()ed to socket_mode: in between (listen() included) a umask of
    0 left it 0777, open to every local user. Now it is made with
    socket_mode's bits at most."""
    if not shutil.which("gcc"):
        raise harness.Skip("needs gcc for the LD_PRELOAD shim")
    with TmpDir() as d:
        src, so = os.path.join(d, "shim.c"), os.path.join(d, "shim.so")
        with open(src, "w") as f:
            f.write(SHIM_C)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", so, src, "-ldl"], check=True,
                       capture_output=True, timeout=60)
        out, conf = os.path.join(d, "modes"), os.path.join(d, "t.conf")
        sock = os.path.join(d, "w.sock")
        with open(conf, "w") as f:
            f.write("[listen w]\naddress = unix:%s\nrole = worker\nsocket_mode = 0600\n" % sock)
        # (An ASan build wants its runtime first: let the shim go first.)
        asan = os.environ.get("ASAN_OPTIONS", "")
        env = dict(os.environ, LD_PRELOAD=so, ACC_SHIM_OUT=out,
                   ASAN_OPTIONS=(asan + ":" if asan else "") + "verify_asan_link_order=0")
        # -p's port is held (PortReservation) until tubed binds it, and a
        # first start that collides on it is tried again on another.
        res = harness.PortReservation()
        try:
            p = harness.spawn_on([res], lambda: [binary, "-l", "127.0.0.1", "-p", str(res.port),
                                                 "--config", conf],
                                 "tubed under the shim", env=env,
                                 preexec_fn=lambda: os.umask(0))
        finally:
            res.close()
        try:
            wait_for(lambda: os.path.exists(out) and sock in open(out).read(),
                     "the listen() on the socket")
            wait_for(lambda: (os.stat(sock).st_mode & 0o777) == 0o600, "the final mode")
        finally:
            p.terminate()
            p.wait(30)
        modes = dict(line.split() for line in open(out).read().splitlines())
        eq(modes[sock], "600", "the socket file's mode at listen()")


@no_server
def test_reload_restricting_a_listener_ends_its_replication_link(binary):
    """A replica's link streams every tube's jobs: a reload that gives its
    listener tubes (or takes admin away) closes it, as the handshake is
    now refused there; it used to keep streaming every new job."""
    with TmpDir() as d, Access(binary, {"adm": {"role": "admin"}}, args=["-b", d]) as a:
        c0 = a.srv.client()
        s = a.sock("adm")
        got = _replicate(s)
        check(got.startswith(b"REPLICATING "), "replicate: %r" % got[:60])
        a.rewrite({"adm": {"role": "admin", "tubes": "app-*"}})
        a.reload()
        put(c0, "secret", b"after-the-reload")
        deadline = time.monotonic() + harness.DEFAULT_TIMEOUT   # a generous ceiling
        closed = False
        while not closed and time.monotonic() < deadline:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            closed = not chunk
            got += chunk
        s.close()
        check(closed, "the replication link is still open after the reload")
        check(b"after-the-reload" not in got, "the link streamed a job put after the reload")
        check("closing the replication link" in a.srv.stderr_text(), "the close is logged")
        a.client("adm").expect("replicate 1 0", "NOT_ALLOWED")


@no_server
def test_socket_activation_socket_named_after_a_section(binary):
    """Under socket activation the admin listener took every inherited
    socket not named memcache or metrics, so one named after a [listen]
    section (FileDescriptorName=web) served admin on every tube while the
    section bound its own address. The section takes it now, with its role
    and tubes; the admin listener keeps the others."""
    import test_ops
    ls_web, ls_main = test_ops.tcp_listener(), test_ops.tcp_listener()
    web_port, main_port = ls_web.getsockname()[1], ls_main.getsockname()[1]
    # The section's own address: held (bound, never listening) to the end,
    # so no other test's server is there, and tubed listening on it (the
    # old bug) is what harness.listening() would see.
    own_res = harness.PortReservation()
    own = own_res.port
    with own_res, TmpDir() as d:
        conf = os.path.join(d, "t.conf")
        with open(conf, "w") as f:
            f.write("[listen web]\naddress = 127.0.0.1:%d\nrole = producer\n"
                    "tubes = app-*, default\n" % own)
        proc = test_ops.spawn_activated(binary, [ls_web, ls_main], args=["--config", conf],
                                        env={"LISTEN_FDNAMES": "web:main"})
        ls_web.close()
        ls_main.close()
        try:
            admin = test_ops.wait_serving(proc, (harness.HOST, main_port))
            web = test_ops.connect_client((harness.HOST, web_port))
            web.expect("kick 1", "NOT_ALLOWED")
            web.expect("use secret", "NOT_ALLOWED")
            web.send(b"put 0 0 60 2\r\nhi\r\n")
            check(web.read_line().startswith(b"INSERTED "), "put on the producer socket")
            admin.expect("kick 1", "KICKED 0")
            check(not harness.listening(proc.pid, port=own),
                  "the section bound its configured address too")
            line, body = admin.cmd_body("stats-listeners")
            check(body.count(b'name: "web"') == 1 and b'role: "producer"' in body,
                  "stats-listeners: %r" % body)
            web.close()
            admin.close()
            eq(proc.stop(), 0, "exit status")
        finally:
            proc.cleanup()


@no_server
def test_differential_through_a_restricted_section(binary):
    """A listener with tubes whose patterns allow every name the
    differential test sends answers its scripted scenarios exactly as
    beanstalkd does (access_section_wrap.py serves the -l/-p address from
    such a [listen] section)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if not os.path.exists("/usr/bin/beanstalkd"):
        raise harness.Skip("needs the reference beanstalkd")
    env = dict(os.environ, TUBED_BIN=os.path.abspath(binary), ACC_MODE="restricted")
    r = subprocess.run([sys.executable, os.path.join(here, "differential.py"), "--bin",
                        os.path.join(here, "access_section_wrap.py"), "--no-random"],
                       env=env, capture_output=True, timeout=600)
    out = r.stdout.decode(errors="replace")
    eq(r.returncode, 0, "differential through the section:\n%s%s"
       % (out[-3000:], r.stderr.decode(errors="replace")[-1000:]))
    check(re.search(r"^differential: \d+ passed, 0 failed$", out, re.M), out[-500:])


@no_server
def test_stats_listeners_on_a_restricted_admin_shows_only_itself(binary):
    """Other listeners' tubes name tubes a restricted listener may not
    see (payroll here): on an admin listener with tubes, stats-listeners
    shows its own entry only; an admin listener without tubes sees all."""
    secs = {"team": {"role": "admin", "tubes": "team-a-*"},
            "pay": {"role": "worker", "tubes": "payroll"},
            "all": {"role": "admin"}}
    with Access(binary, secs) as a:
        eq(sorted(listeners(a.client("team"))), ["team"], "entries on the restricted admin")
        ls = listeners(a.client("all"))
        eq(sorted(ls), ["all", "main", "pay", "team"], "entries on an unrestricted admin")
        eq(ls["pay"]["tubes"], "payroll", "pay's tubes")


@no_server
def test_hidden_job_ids_look_like_ids_no_job_has(binary):
    """access.md §3: a job outside the listener's tubes does not exist for
    it, "no leak of its existence". Every by-id command on such a job has
    exactly the effects of the same command on an id no job has: the reply,
    every stats counter, the listener's refusals; and the job is untouched."""
    secs = {"adm": {"role": "admin", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        put(c0, "app-a")                      # so that app-x's move target exists
        jid = put(c0, "secret", b"hidden")
        missing = jid + 1000
        c = a.client("adm")

        def seen():
            return stable_stats(c0), listeners(c0)["adm"]["refused-commands"]

        for cmd in ("peek %d", "stats-job %d", "delete %d", "kick-job %d",
                    "reserve-job %d", "touch %d", "release %d 0 0", "bury %d 0",
                    "move-job %d app-a"):
            s0 = seen()
            c.expect(cmd % jid, "NOT_FOUND")
            s1 = seen()
            c.expect(cmd % missing, "NOT_FOUND")
            s2 = seen()
            for k in s0[0]:
                eq(int(s1[0][k]) - int(s0[0][k]) if s0[0][k].isdigit() else s1[0][k],
                   int(s2[0][k]) - int(s1[0][k]) if s1[0][k].isdigit() else s2[0][k],
                   "%s: %s after the hidden id against after an id no job has"
                   % (cmd.split()[0], k))
            eq(int(s1[1]) - int(s0[1]), int(s2[1]) - int(s1[1]),
               "%s: refused-commands after the hidden id against a missing one"
               % cmd.split()[0])
        c0.expect("peek %d" % jid, "FOUND %d 6" % jid)
        eq(c0.read_line(), b"hidden", "the hidden job's body, untouched")


@no_server
def test_memcache_get_of_a_hidden_queue_waits_as_an_empty_one(binary):
    """access.md §4: a get of another queue answers END "as an empty queue
    would": after the timeout an empty queue waits (get /t=, monitor),
    at once where an empty queue answers at once (/abort, /close alone).
    Only the refusal is counted; the hidden queue is untouched; a client
    that leaves while parked ends the wait."""
    secs = {"mp": {"protocol": "memcache", "role": "admin", "tubes": "app-*"}}
    with Access(binary, secs) as a:
        c0 = a.srv.client()
        put(c0, "secret", b"hidden")
        tb = c0.stats_tube("secret")
        before = stable_stats(c0)
        refused = int(listeners(c0)["mp"]["refused-commands"])
        g, mon, q = a.client("mp"), a.client("mp"), a.client("mp")
        g.send(b"get secret/t=3000\r\n")
        mon.send(b"monitor secret 3\r\n")
        # (a lower bound only: no answer before the timeout, whatever the
        # machine's speed; the answer at its end is read below)
        g.expect_silence(1.0)
        mon.expect_silence(0.2)
        q.expect("get secret/abort", "END")          # these answer at once,
        q.expect("get secret/close", "END")          # as on an empty queue
        eq(g.read_line(), b"END", "the get, after its timeout")
        eq(mon.read_line(), b"END", "the monitor, after its timeout")
        gone = a.client("mp")
        gone.send(b"get secret/t=60000\r\n")
        gone.expect_silence(0.2)
        gone.close()
        q.expect("get app-none/t=10", "END")         # the server goes on
        eq(stable_stats(c0), before, "stats after gets of a hidden queue")
        eq(c0.stats_tube("secret"), tb, "stats-tube secret")
        eq(int(listeners(c0)["mp"]["refused-commands"]), refused + 5, "refusals counted")
