"""The configuration surface as an operator meets it: a file that a
reload accepts must also be one the next start (and --check-config)
accepts; the command line keeps its keys through reloads; bad files are
refused whole, at start, at check and at reload alike.

Every server here listens on 127.0.0.1 and has its own directory; each
reload waits for the server's log line of the outcome.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile

import harness
from harness import check, eq, no_server
from policy_util import Policy, run_tubed
from server import reload as server_reload


def _check_config(binary, p, *args):
    """--check-config with the server's own command line (its -l/-p)."""
    return run_tubed(binary, ["-l", harness.HOST, "-p", str(p.port)]
                     + p.command_args() + list(args) + ["--check-config"])


@no_server
def test_reload_refuses_what_the_next_start_refuses(binary):
    """Keys that wait for a restart (memcache_port, metrics_port, ...) were
    not checked at reload: a file giving two listeners one port reloaded
    'ok' (with a note), --check-config refused it, and the next restart
    failed with the server down. The reload now refuses it with the
    message --check-config prints."""
    with Policy(binary, "max_items = 5\n") as p:
        port = harness._free_port()
        bad = "memcache_port = %d\nmetrics_port = %d\n" % (port, port)
        p.rewrite(bad)
        rc, out, err = _check_config(binary, p)
        eq(rc, 2, "--check-config of two listeners on port %d (%r)" % (port, err))
        msg = err.strip()
        check("are both port %d" % port in msg, "check-config message %r" % msg)
        line = p.reload(expect_ok=False)
        check(msg in line, "reload refused with the check's message %r: %r" % (msg, line))
        # The old configuration stays: max_items = 5 still holds.
        c = p.srv.client()
        for i in range(5):
            c.expect("put 0 0 60 1\r\nx", "INSERTED %d" % (i + 1))
        c.expect("put 0 0 60 1\r\nx", "OUT_OF_MEMORY")


@no_server
def test_reload_refuses_a_file_port_on_the_command_lines_port(binary):
    """metrics_port in the file equal to the -p of the command line: the
    next start would refuse it (-p and metrics_port are both port P);
    the reload now says so instead of noting 'takes effect at the next
    restart'."""
    with Policy(binary, "") as p:
        p.rewrite("metrics_port = %d\n" % p.port)
        line = p.reload(expect_ok=False)
        check("-p and metrics_port" in line and "both port %d" % p.port in line,
              "reload of metrics_port = -p: %r" % line)
        rc, out, err = _check_config(binary, p)
        eq(rc, 2, "--check-config of the same file")
        check(err.strip() in line, "same message: %r vs %r" % (err, line))


class _FileServer:
    """A tubed whose only arguments are --config FILE (and `extra`): its
    listen address comes from the file. `listener`: a socket handed over
    by socket activation. `ports`: harness.PortReservations the file (a
    function of nothing, then) or `extra` (a function too) name, held by
    the caller; a first start that fails on one of them ('Address already
    in use') is tried again with both rendered for new ones."""

    def __init__(self, binary, text, sock_name="bs.sock", listener=None, extra=(), ports=()):
        self.tmp = tempfile.mkdtemp(prefix="tubed-confhunt-")
        self.sock = os.path.join(self.tmp, sock_name)
        self.conf = os.path.join(self.tmp, "tubed.conf")
        self.binary, self.text, self.listener, self.extra = binary, text, listener, extra
        self.ports = list(ports)
        self.write(text() if callable(text) else text)
        self.srv = self._server()

    def _server(self):
        extra = self.extra() if callable(self.extra) else self.extra
        argv = [self.binary, "--config", self.conf] + list(extra)
        return harness.Server(self.binary, argv=lambda port: harness.VALGRIND + argv,
                              unix_path=None if self.listener else self.sock,
                              listener=self.listener)

    def _attempt(self):
        """Start once: None if it runs (and listens on every reserved
        port), else its output."""
        if callable(self.text):
            self.write(self.text())
        self.srv = self._server()
        try:
            self.srv.start()
        except harness.ServerError as e:
            return str(e)
        if not self.ports:
            return None
        # With a handed-over listener start() returns at once: the
        # reserved ports are bound (or refused) after.
        ports = [r.port for r in self.ports]
        harness.wait_for(lambda: self.srv.proc.poll() is not None
                         or harness.listening(self.srv.pid, ports=ports),
                         "tubed listening on %s" % ports, timeout=10)
        if self.srv.proc.poll() is None:
            return None
        out = self.srv.stderr_text()
        self.srv.stop()
        return out or "server exited (%s)" % self.srv.proc.returncode

    def write(self, text):
        tmp = self.conf + ".new"
        with open(tmp, "w") as f:
            f.write(text.replace("SOCK", self.sock).replace("TMPDIR", self.tmp))
        os.rename(tmp, self.conf)

    def reload(self, text, expect_ok):
        self.write(text)
        return server_reload(self.srv, self.conf, expect_ok)

    def __enter__(self):
        try:
            out = harness.start_on(self.ports, self._attempt)
            check(out is None, "tubed --config %s did not start: %s" % (self.conf, out))
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        return self

    def __exit__(self, et, ev, tb):
        problems = self.srv.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if et is None:
            eq(problems, [], "server problems")
        return False


@no_server
def test_reload_refuses_side_port_on_a_unix_listen_from_the_file(binary):
    """listen = unix:PATH with memcache_port, both from the file (the
    command line gives neither): the next start refuses it, so the reload
    does too, with --check-config's message."""
    with _FileServer(binary, "listen = unix:SOCK\n") as s:
        mport = harness._free_port()
        line = s.reload("listen = unix:SOCK\nmemcache_port = %d\n" % mport, False)
        check("memcache_port = %d needs a TCP listen address" % mport in line,
              "reload: %r" % line)
        rc, out, err = run_tubed(binary, ["--config", s.conf, "--check-config"])
        eq(rc, 2, "--check-config of the same file")
        check(err.strip() in line, "same message: %r vs %r" % (err, line))


@no_server
def test_reload_under_socket_activation_judges_as_that_start_did(binary):
    """Under socket activation port is ignored, so a file whose port is
    its memcache_port starts (the memcache listener takes the port on
    listen's host). The server unsets LISTEN_FDS once it has the sockets;
    the reload must still judge the file as the activated start did (it
    reloads) instead of meeting a clash of port and memcache_port."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((harness.HOST, 0))
    lst.listen(16)
    try:
        # The file's port, held until the server has it (PortReservation).
        mres = harness.PortReservation()
        text = lambda: ("listen = %s\nport = %d\nmemcache_port = %d\nmax_items = %%d\n"
                        % (harness.HOST, mres.port, mres.port))
        with mres, _FileServer(binary, lambda: text() % 1, listener=lst, ports=[mres]) as s:
            mport = mres.port
            check(harness.listening(s.srv.pid, port=mport), "memcache on port %d" % mport)
            s.reload(text() % 2, True)
            c = s.srv.client()
            c.expect("put 0 0 60 1\r\nx", "INSERTED 1")
            c.expect("put 0 0 60 1\r\nx", "INSERTED 2")
            c.expect("put 0 0 60 1\r\nx", "OUT_OF_MEMORY")
    finally:
        lst.close()


@no_server
def test_reload_refuses_read_behind_once_the_files_binlog_dir_is_gone(binary):
    """The server took binlog_dir from the file; a file that drops it but
    keeps max_memory_size reloaded 'ok' (checked against the running
    binlog) while the next start refuses it. Now refused at reload."""
    text = "binlog_dir = TMPDIR/binlog\nmax_memory_size = 1M\n"
    with _FileServer(binary, "listen = unix:SOCK\n" + text) as s:
        line = s.reload("listen = unix:SOCK\nmax_memory_size = 1M\n", False)
        check(line.endswith("tubed.conf:2: max_memory_size needs a binlog: give -b DIR or "
                            "binlog_dir; the old configuration stays in force"),
              "reload: %r" % line)
        line = s.reload("listen = unix:SOCK\nsync_replicas = 1\n", False)
        check("tubed.conf:2: sync_replicas needs a binlog" in line, "reload: %r" % line)
        s.reload("listen = unix:SOCK\n" + text.replace("1M", "2M"), True)


@no_server
def test_config_that_is_a_pipe_is_refused_at_start_and_reload(binary):
    """A FIFO at the config path: fopen() waited for a writer, so a start
    (and --check-config) hung and a SIGHUP froze the whole server. A pipe
    is now refused as any unreadable file is ('cannot read: a pipe, not a
    file'); at reload the old configuration stays in force."""
    tmp = tempfile.mkdtemp(prefix="tubed-confhunt-")
    try:
        fifo = os.path.join(tmp, "fifo.conf")
        os.mkfifo(fifo)
        for extra in (["--check-config"], ["-l", harness.HOST, "-p", str(harness._free_port())]):
            rc, out, err = run_tubed(binary, ["--config", fifo] + extra, timeout=10)
            eq(rc, 2, "tubed --config FIFO %s (stderr %r)" % (" ".join(extra), err))
            eq(err.strip(), "%s: cannot read: a pipe, not a file" % fifo, "message")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with Policy(binary, "max_items = 1\n") as p:
        os.unlink(p.path)
        os.mkfifo(p.path)
        line = p.reload(expect_ok=False)
        check(line.endswith("%s: cannot read: a pipe, not a file; the old configuration "
                            "stays in force" % p.path), "reload: %r" % line)
        c = p.srv.client()
        c.expect("put 0 0 60 1\r\nx", "INSERTED 1")
        c.expect("put 0 0 60 1\r\nx", "OUT_OF_MEMORY")
        os.unlink(p.path)
        p.rewrite("max_items = 2\n")
        p.reload()
        r = c.cmd("put 0 0 60 1\r\nx")
        check(r.startswith(b"INSERTED "), "put under max_items = 2: %r" % r)


def _nobody():
    import pwd
    if os.geteuid() != 0:
        raise harness.Skip("needs root to drop privileges with -u")
    try:
        return pwd.getpwnam("nobody").pw_name
    except KeyError:
        raise harness.Skip("no user 'nobody'")


@no_server
def test_start_warns_when_the_user_cannot_read_the_file_again(binary):
    """-u USER and a config file only root can read: the start succeeded
    silently and every later reload failed ('Permission denied'). The
    start now warns that reloads will fail; a readable file gets no such
    warning, and a reload then works."""
    user = _nobody()
    for mode, readable in ((0o600, False), (0o644, True)):
        with Policy(binary, "max_items = 1\n", "-u", user) as p:
            os.chmod(p.tmp, 0o755)
            os.chmod(p.path, mode)
            p.srv.stop()   # started before the chmod: start again
            p.srv = None
            p.start()
            warned = "user %s cannot read %s (Permission denied): every reload will " \
                     "fail until it can" % (user, p.path)
            eq(warned in p.stderr(), not readable,
               "warning with mode %o: %r" % (mode, p.stderr()))
            p.reload(expect_ok=readable)


@no_server
def test_unknown_user_is_refused_by_check_start_and_reload_alike(binary):
    """user = NAME for a user the system does not know: --check-config
    said ok, the start bound its sockets and then failed (status 1), a
    reload took it with 'takes effect at the next restart'. Now all three
    refuse it with one message naming FILE:LINE (start: status 2, nothing
    served). -u NAME on the command line: --check-config refuses it; a
    start still fails at the privilege drop (status 1, as beanstalkd)."""
    user = "tubed-no-such-user-%d" % os.getpid()
    with Policy(binary, "max_items = 1\n") as p:
        p.rewrite("max_items = 1\nuser = %s\n" % user)
        want = "%s:2: unknown user '%s'" % (p.path, user)
        rc, out, err = run_tubed(binary, ["--config", p.path, "--check-config"])
        eq((rc, err.strip()), (2, want), "--check-config")
        rc, out, err = run_tubed(binary, ["-l", harness.HOST, "-p", str(harness._free_port()),
                                          "--config", p.path])
        eq((rc, err.strip()), (2, want), "start")
        line = p.reload(expect_ok=False)
        check(want in line, "reload: %r" % line)
    rc, out, err = run_tubed(binary, ["-u", user, "--config", "/dev/null", "--check-config"])
    eq((rc, err.strip()), (2, "-u %s: no such user" % user), "-u with --check-config")
    # tubed binds -p before it drops privileges: the port is held and a
    # start refused with 'Address already in use' is tried on another, and
    # the refusal must be the privilege drop's (status 1 alone would also
    # be a port taken).
    box = {}
    with harness.PortReservation() as res:
        def attempt():
            box["r"] = run_tubed(binary, ["-l", harness.HOST, "-p", str(res.port), "-u", user])
            return box["r"][2]
        res.start(attempt)
    rc, out, err = box["r"]
    eq((rc, err.strip().splitlines()[-1:]),
       (1, ["tubed: error: cannot drop privileges: user %s: no such user" % user]),
       "start with -u %s (%r)" % (user, err))


@no_server
def test_listen_with_a_port_is_refused_by_check_and_start(binary):
    """listen = 127.0.0.1:11300 (the [listen] sections' form) or [::1]:
    --check-config said ok and the start failed its name lookup (status
    1). Both now refuse it with FILE:LINE (status 2); bare addresses, IPv6
    literals and unix:PATH stay accepted."""
    tmp = tempfile.mkdtemp(prefix="tubed-confhunt-")
    try:
        conf = os.path.join(tmp, "tubed.conf")
        for value in ("127.0.0.1:11300", "[::1]", "127.0.0.1 11300", "localhost:11300"):
            with open(conf, "w") as f:
                f.write("max_items = 1\nlisten = %s\n" % value)
            want = ("%s:2: bad value for listen: '%s' (want a host name or address, without "
                    "a port, or unix:/path; the port is the port key)" % (conf, value))
            rc, out, err = run_tubed(binary, ["--config", conf, "--check-config"])
            eq((rc, err.strip()), (2, want), "--check-config, listen = %s" % value)
            rc, out, err = run_tubed(binary, ["-p", str(harness._free_port()), "--config", conf])
            eq((rc, err.strip()), (2, want), "start, listen = %s" % value)
        for value in ("127.0.0.1", "::1", "localhost", "unix:%s/s.sock" % tmp):
            with open(conf, "w") as f:
                f.write("listen = %s\n" % value)
            rc, out, err = run_tubed(binary, ["--config", conf, "--check-config"])
            eq((rc, out.strip()), (0, "%s: ok" % conf), "--check-config, listen = %s" % value)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
def test_p_f_s_take_a_sign_and_blanks_as_beanstalkd(binary):
    """beanstalkd takes "-p +PORT", "-p ' PORT'", "-f +5", "-s ' N'" (its
    port goes through getaddrinfo, -f and -s through sscanf "%zu"); tubed
    refused them (status 2: "invalid value"). Now taken; what beanstalkd
    wraps (-p 65536, -s -5, -f -1) stays refused, as documented."""
    for form in ("+%d", " %d"):
        # Held (bound, never listening) until tubed listens there; a first
        # start that collides on it is tried again on another.
        res = harness.PortReservation()
        srv, out = harness.start_reserved(res, lambda form=form: harness.Server(
            binary, port=res.port, argv=lambda _p: harness.VALGRIND + [
                binary, "-l", harness.HOST, "-p", form % res.port]))
        val = form % res.port
        check(out is None, "tubed -p %r did not start: %s" % (val, out))
        problems = srv.stop()
        eq(problems, [], "-p %r" % val)
    tmp = tempfile.mkdtemp(prefix="tubed-confhunt-")
    try:
        for fval, sval in (("+5", " 200000"), (" 7", "+200000")):
            srv = harness.Server(binary, ["-b", tmp, "-f", fval, "-s", sval])
            srv.start()
            try:
                got = srv.client().stats()["binlog-max-size"]
            finally:
                problems = srv.stop()
            eq(problems, [], "-f %r -s %r" % (fval, sval))
            eq(got, "200000", "binlog-max-size with -s %r" % sval)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for flag, val in (("-p", "65536"), ("-p", "-1"), ("-p", "+-1"), ("-p", "+ 1"),
                      ("-s", "-5"), ("-f", "-1"), ("-f", "5 "), ("-s", "1K")):
        rc, out, err = run_tubed(binary, ["-l", harness.HOST, flag, val])
        eq(rc, 2, "exit status of %s %r (%r)" % (flag, val, err))
        check("invalid value for %s: '%s'" % (flag, val) in err, "%s %r: %r" % (flag, val, err))


@no_server
def test_reload_storm_while_clients_work_loses_nothing(binary):
    """100 SIGHUPs (every fifth file refused: two listeners on one port)
    while 10 clients put, reserve and delete: every command is answered
    as usual, nothing is lost, and the last good file is the one in
    force. (Measured with the ASan build too: no leak, no error.)"""
    import signal
    import threading
    n_clients, per = 10, 150
    with Policy(binary, "max_items = 100000\n") as p:
        hport = harness._free_port()
        done, errors = [0] * n_clients, []

        def work(i):
            try:
                c = p.srv.client()
                c.expect("use s%d" % i, "USING s%d" % i)
                c.expect("watch s%d" % i, "WATCHING 2")
                for _ in range(per):
                    r = c.cmd("put 0 0 60 2\r\nhi")
                    check(r.startswith(b"INSERTED "), "put: %r" % r)
                    r = c.cmd("reserve-with-timeout 10")
                    check(r.startswith(b"RESERVED "), "reserve: %r" % r)
                    c.read_exact(4)
                    c.expect("delete %s" % r.split()[1].decode(), "DELETED")
                    done[i] += 1
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(n_clients)]
        for t in threads:
            t.start()
        for k in range(100):
            if k % 5 == 0:
                p.rewrite("memcache_port = %d\nmetrics_port = %d\n" % (hport, hport))
            else:
                p.rewrite("max_items = %d\nstall_timeout = %d\n[tube s*]\nmax_age = 1h\n"
                          % (100000 + k, 10 + k))
            p.srv.signal(signal.SIGHUP)
        for t in threads:
            t.join(60)
        eq(errors, [], "client errors during the storm")
        eq(sum(done), n_clients * per, "put/reserve/delete rounds completed")
        p.rewrite("[tube lim]\nmax_items = 1\n")
        p.reload()
        c = p.srv.client()
        st = c.stats()
        eq((st["current-jobs-ready"], st["current-jobs-reserved"], st["total-jobs"]),
           ("0", "0", str(n_clients * per)), "jobs after the storm")
        c.expect("use lim", "USING lim")
        c.expect("put 0 0 60 1\r\nx", "INSERTED %d" % (n_clients * per + 1))
        c.expect("put 0 0 60 1\r\nx", "OUT_OF_MEMORY")
        check(p.srv.alive(), "server alive after the storm")


@no_server
def test_main_listener_false_without_a_section_is_refused(binary):
    """main_listener = false and no [listen] section: the server started
    and listened nowhere, with no word of it. Now --check-config, the
    start (status 2) and a reload refuse it; with a memcache or metrics
    port it still starts."""
    tmp = tempfile.mkdtemp(prefix="tubed-confhunt-")
    try:
        conf = os.path.join(tmp, "tubed.conf")
        with open(conf, "w") as f:
            f.write("max_items = 1\nmain_listener = false\n")
        want = ("%s:2: main_listener = false and no [listen] section: the server would "
                "listen nowhere" % conf)
        for extra in (["--check-config"], []):
            rc, out, err = run_tubed(binary, ["--config", conf] + extra)
            eq((rc, err.strip()), (2, want), "tubed --config %s" % " ".join(extra))
        with open(conf, "w") as f:
            f.write("main_listener = false\nmetrics_port = %d\n" % harness._free_port())
        rc, out, err = run_tubed(binary, ["--config", conf, "--check-config"])
        eq((rc, out.strip()), (0, "%s: ok" % conf), "with a metrics port")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with Policy(binary, "max_items = 1\n") as p:
        p.rewrite("main_listener = false\n")
        line = p.reload(expect_ok=False)
        check(line.endswith("tubed.conf:1: main_listener = false and no [listen] section: the "
                            "server would listen nowhere; the old configuration stays in "
                            "force"), "reload: %r" % line)


@no_server
def test_job_memory_flag_takes_a_size_as_the_file_does(binary):
    """job_memory = 4G in the file, --job-memory 4G refused (status 2,
    'want a number') on the command line. The flag now takes the file's
    size form, as --repl-backlog does."""
    for val, want in (("4G", str(4 << 30)), ("64K", "65536"), ("1000", "1000")):
        srv = harness.Server(binary, ["--job-memory", val])
        srv.start()
        try:
            got = srv.client().stats()["job-memory-limit"]
        finally:
            problems = srv.stop()
        eq(problems, [], "--job-memory %s" % val)
        eq(got, want, "job-memory-limit with --job-memory %s" % val)
    for val in ("4g", "1KB", "-1", "", "16777216T"):
        rc, out, err = run_tubed(binary, ["-l", harness.HOST, "-p", str(harness._free_port()),
                                          "--job-memory", val])
        eq(rc, 2, "--job-memory %r (%r)" % (val, err))
        check("invalid value for --job-memory: '%s'" % val in err, "message %r" % err)


@no_server
def test_reload_lowering_stall_timeout_reaches_a_client_already_stalled(binary):
    """stall_timeout changes at reload: a client that stopped reading
    under stall_timeout = 1h is closed once a reload sets 1s (its stall
    started before the reload; under the old value it would wait an
    hour)."""
    with Policy(binary, "stall_timeout = 1h\n") as p:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect((harness.HOST, p.port))
        try:
            s.sendall(b"stats\r\n" * 20000)   # megabytes of replies, never read
            c = p.srv.client()
            harness.wait_for(lambda: c.stats()["current-connections"] == "2",
                             "the stalled client to be counted")
            p.rewrite("stall_timeout = 1s\n")
            p.reload()
            harness.wait_for(lambda: "of replies unread for 1 s; closing" in p.stderr(),
                             "the stalled client to be closed after the reload", timeout=15)
        finally:
            s.close()


@no_server
def test_side_port_on_a_unix_listen_is_refused_under_socket_activation(binary):
    """Under socket activation the beanstalk listener ignores listen, but
    the memcache and metrics listeners still listen on its host: with
    listen = unix:PATH, memcache_port bound the memcache listener on PATH
    (a Unix socket, whatever the port said) and metrics_port then failed
    at start (status 1), the check being skipped under activation. Now
    refused as without activation (status 2, FILE:LINE), unless systemd
    hands that listener a socket of its own name (LISTEN_FDNAMES)."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((harness.HOST, 0))
    lst.listen(16)
    tmp = tempfile.mkdtemp(prefix="tubed-confhunt-")
    try:
        conf = os.path.join(tmp, "tubed.conf")
        mport = harness._free_port()
        with open(conf, "w") as f:
            f.write("listen = unix:%s/side.sock\nmemcache_port = %d\n" % (tmp, mport))
        want = ("%s:2: memcache_port = %d needs a TCP listen address, not unix:%s/side.sock"
                % (conf, mport, tmp))
        env = dict(os.environ, LISTEN_FDS="1", LISTEN_FDNAMES="")
        p = subprocess.run([sys.executable, "-c", harness._ACTIVATE, str(lst.fileno()),
                            binary, "--config", conf], pass_fds=(lst.fileno(),), env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=15)
        err = p.stderr.decode("utf-8", "replace")
        eq(p.returncode, 2, "exit status under activation (%r)" % err)
        check(err.startswith(want), "message %r" % err)
        check(not os.path.exists(os.path.join(tmp, "side.sock")), "no socket file made")
        # A socket named memcache from systemd: the port is not used.
        env["LISTEN_FDNAMES"] = "memcache"
        p = subprocess.run([sys.executable, "-c", harness._ACTIVATE, str(lst.fileno()),
                            binary, "--config", conf, "--check-config"],
                           pass_fds=(lst.fileno(),), env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=15)
        eq((p.returncode, p.stdout.decode().strip()), (0, "%s: ok" % conf),
           "--check-config with an inherited memcache socket (%r)" % p.stderr)
    finally:
        lst.close()
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
def test_section_on_the_ignored_p_port_starts_under_socket_activation(binary):
    """Under socket activation -l/-p are ignored (the beanstalk listener
    takes systemd's socket), yet a [listen] section on -p's port was
    refused as a clash with the -l/-p listener: with tubed.socket on
    127.0.0.1:11300, a section on 10.0.0.5:11300 (the default -p) could
    not start. Now the section starts and listens; systemd's socket
    serves the admin listener."""
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((harness.HOST, 0))
    lst.listen(16)
    try:
        # The section's port (and the ignored -p), held until the server
        # has it (PortReservation).
        sres = harness.PortReservation()
        text = lambda: ("[listen pub]\naddress = %s:%d\nrole = producer\n"
                        % (harness.HOST, sres.port))
        with sres, _FileServer(binary, text, listener=lst, extra=lambda: ["-p", str(sres.port)],
                               ports=[sres]) as s:
            sport = sres.port
            check(harness.listening(s.srv.pid, port=sport), "[listen pub] on %d" % sport)
            pub = harness.Client(harness.HOST, sport)
            try:
                pub.expect("put 0 0 60 1\r\nx", "INSERTED 1")
                pub.expect("reserve-with-timeout 0", "NOT_ALLOWED")
            finally:
                pub.close()
            c = s.srv.client()
            c.expect("reserve-with-timeout 0", "RESERVED 1 1")
    finally:
        lst.close()


@no_server
def test_check_config_and_reload_give_one_verdict(binary):
    """For each file, --check-config with the server's command line and a
    reload of the running server agree: both accept it, or both refuse it
    with the same message (files that change no [listen] section, which
    only a reload can compare)."""
    port = harness._free_port()
    files = [
        "max_items = 5\n",
        "port = 1\n",                        # the command line's -p wins
        "memcache_port = %d\n" % port,       # takes effect at the restart
        "listen = ::1\n",
        "user = root\n",
        "stall_timeout = 2m\nverbose = 1\n[tube a*]\nmax_age = 1h\n",
        "max_item = 5\n",
        "max_items = 5\nmax_items = 6\n",
        "max_age = 1S\n",
        "[tube a]\nport = 5\n",
        "replica_of = nonsense\n",
        "max_memory_size = 1M\n",
        "memcache_port = %d\nmetrics_port = %d\n" % (port, port),
        "main_listener = false\n",
        "listen = 127.0.0.1:11300\n",
        "user = tubed-no-such-user-%d\n" % os.getpid(),
        "sync_replicas = 1\n",
    ]
    with Policy(binary, "") as p:
        for text in files:
            p.rewrite(text)
            rc, out, err = _check_config(binary, p)
            check(rc in (0, 2), "--check-config of %r: status %d" % (text, rc))
            line = p.reload(expect_ok=rc == 0)
            if rc:
                check(err.strip() in line, "file %r: --check-config said %r, the reload %r"
                      % (text, err.strip(), line))
        # What only the running server can refuse (documented): a binlog
        # the next start would have is not one this server has.
        for text in ("binlog_dir = /nonexistent-tubed-dir\nsync_replicas = 1\n",
                     "binlog_dir = /nonexistent-tubed-dir\nmax_memory_size = 1M\n"):
            p.rewrite(text)
            rc, out, err = _check_config(binary, p)
            eq(rc, 0, "--check-config of %r (%r)" % (text, err))
            line = p.reload(expect_ok=False)
            check("tubed.conf:2: " in line and "needs a binlog" in line, "reload: %r" % line)
