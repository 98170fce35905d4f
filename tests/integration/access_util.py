"""Helpers for the access-control tests (test_access*.py, spec access.md).

Not a test file.  Access(binary, sections, top="") starts tubed with a
config file holding the given [listen NAME] sections.  Each section is a
dict of keys; an "address" of "tcp" gets a free 127.0.0.1 port at every
start attempt (the harness retries on a port collision), "unix" a socket
path in the temporary directory.  The main -l/-p listener stays the
harness's port (srv.port).  Servers are stopped by pid; the temporary
directory is removed at the end.

    with Access(binary, {"prod": {"role": "producer", "tubes": "app-*"}}) as a:
        c = a.client("prod")       # a raw harness.Client on that listener
        c0 = a.srv.client()        # the admin -l/-p listener
        a.rewrite({...}); a.reload()
"""

import os
import re
import shutil
import socket
import tempfile

import harness
import server
from harness import Skip, check, eq, fail, wait_for  # noqa: F401

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")


def parser_words(path, macro):
    """The command words of an X-macro command table in a source header:
    the first string literal of every X(...) row of `macro`.  Deriving the
    list from the source means a new command is seen without editing the
    tests."""
    text = open(os.path.join(SRC, path)).read()
    start = text.index("#define %s(X)" % macro)
    body = []
    for line in text[start:].splitlines():
        body.append(line)
        if not line.rstrip().endswith("\\"):
            break
    return [w.strip() for w in re.findall(r'X\(\s*\w+\s*,\s*"([^"]*)"', "\n".join(body))]


def decision_rows(path):
    """The {word: set of roles} rows of a C decision table (bsaccess.c,
    mcaccess.c): lines like {"put", P | A},"""
    text = open(os.path.join(SRC, path)).read()
    short = {"R": "read", "P": "producer", "W": "worker", "A": "admin"}
    rows = {}
    for word, roles in re.findall(r'\{"([^"]+)",\s*([A-Z |()]+)\}', text):
        if roles.strip() == "ANY":
            rows[word] = {"read", "producer", "worker", "admin"}
        else:
            rows[word] = {short[r.strip()] for r in roles.split("|")}
    return rows


def stable_stats(c):
    """stats without what moves on its own or by looking (uptime, rusage,
    connections, the stats command's own counter)."""
    s = c.stats()
    for k in ("uptime", "rusage-utime", "rusage-stime", "cmd-stats",
              "current-connections", "total-connections"):
        s.pop(k, None)
    return s


class Access:
    def __init__(self, binary, sections, top="", args=()):
        self.binary = binary
        self.tmp = tempfile.mkdtemp(prefix="tubed-access-")
        os.chmod(self.tmp, 0o755)   # other users' clients reach unix sockets here
        self.path = os.path.join(self.tmp, "tubed.conf")
        self.top = top
        self.sections = sections
        self.args = [str(a) for a in args]
        self.addr = {}              # name -> ("tcp", port) or ("unix", path)
        self.srv = None
        self.reloads = 0

    def render(self, sections, fresh):
        out = [self.top]
        for name, keys in sections.items():
            keys = dict(keys)
            a = keys.pop("address", "tcp")
            if a == "tcp":
                if fresh or name not in self.addr:
                    self.addr[name] = ("tcp", harness._free_port())
                a = "127.0.0.1:%d" % self.addr[name][1]
            elif a == "unix":
                p = os.path.join(self.tmp, name + ".sock")
                self.addr[name] = ("unix", p)
                a = "unix:" + p
            out.append("[listen %s]\naddress = %s" % (name, a))
            out += ["%s = %s" % kv for kv in keys.items()]
        return "\n".join(out) + "\n"

    def write(self, text):
        tmp = self.path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.path)

    def _argv(self, port):
        self.write(self.render(self.sections, fresh=True))
        return harness.VALGRIND + [self.binary, "-l", harness.HOST, "-p", str(port),
                                   "--config", self.path] + self.args

    def __enter__(self):
        try:
            self.srv = harness.Server(self.binary, argv=self._argv)
            self.srv.start()
            # Sections listen after the main port: "started" is logged last.
            wait_for(lambda: "started, pid" in self.srv.stderr_text(), "tubed to start")
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        return self

    def __exit__(self, et, ev, tb):
        problems = server.stop_server(self.srv)
        shutil.rmtree(self.tmp, ignore_errors=True)
        server.raise_problems(problems, et, ev)
        return False

    def sock(self, name, timeout=harness.DEFAULT_TIMEOUT):
        kind, where = self.addr[name]
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(where)
            return s
        return socket.create_connection((harness.HOST, where), timeout=timeout)

    def port(self, name):
        return self.addr[name][1]

    def client(self, name):
        s = self.sock(name)
        c = harness.Client(harness.HOST, None, sock=s)
        self.srv.clients.append(c)
        return c

    # -- reload -------------------------------------------------------------
    def rewrite(self, sections, top=None):
        if top is not None:
            self.top = top
        self.sections = sections
        self.write(self.render(sections, fresh=False))

    def reload_lines(self):
        return server.reload_lines(self.srv)

    def reload(self, expect_ok=True):
        return server.reload(self.srv, self.path, expect_ok)


def listeners(c):
    """stats-listeners as {name: {key: value}} (a YAML list of maps)."""
    c.send(b"stats-listeners\r\n")
    line, body = c.read_reply()
    check(body is not None, "stats-listeners: expected OK <bytes>, got %r" % line)
    out, cur = {}, None
    for line in body.decode().splitlines()[1:]:
        if line.startswith("- "):
            cur = {}
            line = line[2:]
        k, v = line.strip().split(": ", 1)
        cur[k] = harness.unq(v)
        if k == "name":
            out[cur[k]] = cur
    return out


OTHER_UID = 65534
OTHER_GID = 65534


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root to run a client as another user")


def as_peer(path, uid, gid, groups=(), request=b"list-tube-used\r\n"):
    """Connect to the Unix socket path as uid/gid (with the supplementary
    groups given) in a child; send request; return what came back before
    the close or 2 s ("" for a close with nothing, "connect: ERR" if the
    socket would not open)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(r)
            os.setgroups(list(groups))
            os.setgid(gid)
            os.setuid(uid)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect(path)
            except OSError as e:
                os.write(w, ("connect: %s" % e.strerror).encode())
                os._exit(0)
            got = b""
            try:
                s.sendall(request)
                while not got.endswith(b"\r\n"):
                    d = s.recv(4096)
                    if not d:
                        break
                    got += d
            except OSError:
                pass
            os.write(w, got)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(w)
    out = b""
    while True:
        d = os.read(r, 65536)
        if not d:
            break
        out += d
    os.close(r)
    _, status = os.waitpid(pid, 0)
    check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "the client child failed")
    return out.decode(errors="replace")


def put(c, tube, body=b"x"):
    c.expect("use " + tube, "USING " + tube)
    c.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    line = c.read_line()
    check(line.startswith(b"INSERTED "), "put into %s: %r" % (tube, line))
    return int(line.split()[1])


def mc_lines(c, cmd):
    """A memcache document up to END, as a list of lines."""
    c.send(cmd)
    out = []
    while True:
        line = c.read_line()
        if line == b"END":
            return out
        out.append(line)
