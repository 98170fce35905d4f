"""Helpers for test_cli.py: run tubed-cli as a user would (a pipe, a
pseudo-terminal, or a real terminal emulator: tmux), read its tables, and
start Debian's beanstalkd. Every wait has a deadline and every process
started here is stopped by its pid."""

import fcntl
import json
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time

from harness import SANITIZER_PATTERNS, Skip, TestFailure, check, wait_for

BEANSTALKD = "/usr/bin/beanstalkd"


def cli_path(binary):
    """build/tubed-cli beside the tubed under test (or $TUBED_CLI)."""
    path = os.environ.get("TUBED_CLI") or os.path.join(
        os.path.dirname(os.path.abspath(binary)), "tubed-cli")
    if not os.access(path, os.X_OK):
        raise Skip("no tubed-cli beside %s (make build/tubed-cli)" % binary)
    return path


def need_beanstalkd():
    if not os.access(BEANSTALKD, os.X_OK):
        raise Skip("%s not installed (apt-get install beanstalkd)" % BEANSTALKD)
    return BEANSTALKD


def cli_env(extra=None):
    """The environment of a run: no NO_COLOR or COLUMNS from the caller."""
    env = dict(os.environ)
    for k in ("NO_COLOR", "COLUMNS", "TUBED_CLI"):
        env.pop(k, None)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.update(extra or {})
    return env


def _no_sanitizer_report(text, what):
    for pat in SANITIZER_PATTERNS:
        if pat.search(text.encode("utf-8", "replace")):
            raise TestFailure("sanitizer report from %s:\n%s" % (what, text[:1500]))


class Run:
    """One finished run: rc, out (bytes), text (str), err (str)."""

    def __init__(self, argv, rc, out, err):
        self.argv, self.rc, self.out, self.err = argv, rc, out, err
        self.text = out.decode("utf-8", "replace")

    def __repr__(self):
        return "<%s: exit %d, stdout %r, stderr %r>" % (
            " ".join(self.argv[1:]), self.rc, self.out[:600], self.err[:600])

    def ok(self):
        check(self.rc == 0, "expected exit 0: %r" % self)
        check(self.err == "", "expected nothing on stderr: %r" % self)
        return self

    def fails(self, rc, *needles):
        """Exit status rc, every needle in stderr, nothing on stdout."""
        check(self.rc == rc, "expected exit %d: %r" % (rc, self))
        check(self.out == b"", "expected nothing on stdout: %r" % self)
        for n in needles:
            check(n in self.err, "expected %r in stderr: %r" % (n, self))
        check(self.err.startswith("tubed-cli: "), "stderr message not "
              "prefixed with 'tubed-cli: ': %r" % self)
        return self

    def json(self):
        try:
            return json.loads(self.text)
        except ValueError as e:
            raise TestFailure("not valid JSON (%s): %r" % (e, self))


def run_cli(binary, port, *args, stdin=None, env=None, timeout=30, host=None):
    argv = [cli_path(binary)]
    if host is not None:
        argv += ["-h", host]
    if port is not None:
        argv += ["-p", str(port)]
    argv += [str(a) for a in args]
    # subprocess.run kills (by pid) and reaps the child if the timeout hits.
    p = subprocess.run(argv, input=stdin if stdin is not None else b"",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=cli_env(env), timeout=timeout)
    err = p.stderr.decode("utf-8", "replace")
    _no_sanitizer_report(err, "tubed-cli")
    return Run(argv, p.returncode, p.stdout, err)


def run_in_pty(argv, env=None, cols=100, rows=30, timeout=20):
    """Run with stdout on a pseudo-terminal of the given size: returns
    (exit status, output with the pty's CRLF made LF, stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=subprocess.PIPE, env=cli_env(env), close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise TestFailure("%s did not finish within %ds" % (argv, timeout))
            r, _, _ = select.select([master], [], [], 0.1)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:   # EIO: the child closed the terminal
                    data = b""
                if not data:
                    break
                out += data
    finally:
        if p.poll() is None:
            p.kill()
        err = p.communicate(timeout=10)[1].decode("utf-8", "replace")
        os.close(master)
    _no_sanitizer_report(err, "tubed-cli")
    return p.returncode, out.replace(b"\r\n", b"\n"), err


def parse_table(text):
    """A tubes table: (titles, {tube: {title: cell}}, lines)."""
    lines = text.rstrip("\n").split("\n")
    titles = lines[0].split()
    rows = {}
    for line in lines[1:]:
        cells = line.split()
        check(len(cells) == len(titles), "row %r has %d cells for %d columns %r"
              % (line, len(cells), len(titles), titles))
        rows[cells[0]] = dict(zip(titles, cells))
    return titles, rows, lines


def check_aligned(lines):
    """Every numeric column's cells end where its title ends."""
    head = lines[0]
    pos, ends = 0, []
    for title in head.split()[1:]:
        pos = head.index(title, pos) + len(title)
        ends.append((title, pos))
    for line in lines[1:]:
        for title, end in ends:
            check(line[end - 1] != " " and (end == len(line) or line[end] == " "),
                  "column %s not right-aligned at %d in %r (header %r)"
                  % (title, end, line, head))


# ------------------------------------------------------------------ tmux

class Tmux:
    """A detached tmux server of our own (its own socket in a temporary
    directory), one session of a fixed size running `command`."""

    def __init__(self, command, cols=120, rows=30, env=None):
        if not shutil.which("tmux"):
            raise Skip("tmux not installed (apt-get install tmux)")
        self.dir = tempfile.mkdtemp(prefix="tubed-cli-tmux-")
        self.sock = os.path.join(self.dir, "sock")
        self.env = cli_env(env)
        self.env.pop("TMUX", None)
        self.pid = None
        self.tmux("new-session", "-d", "-s", "t", "-x", str(cols), "-y", str(rows),
                  command)
        self.pid = int(self.tmux("display", "-p", "-t", "t", "#{pid}").strip())

    def tmux(self, *args):
        p = subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null"] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=self.env, timeout=15)
        if p.returncode != 0:
            raise TestFailure("tmux %s: %s" % (" ".join(args), p.stderr.decode()))
        return p.stdout.decode("utf-8", "replace")

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t")

    def fmt(self, f):
        return self.tmux("display", "-p", "-t", "t", f).strip()

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "t", *keys)

    def resize(self, cols, rows):
        self.tmux("resize-window", "-t", "t", "-x", str(cols), "-y", str(rows))

    def wait_screen(self, pred, what, timeout=15.0, each=None):
        """Poll the screen until pred(screen) is true; `each` runs before
        every look (to keep load going). Fails showing the last screen."""
        last = [None]

        def look():
            if each:
                each()
            s = last[0] = self.screen()
            return (s,) if pred(s) else None

        return wait_for(look, lambda: "%s; the screen:\n%s" % (what, last[0]),
                        timeout, 0.1)[0]

    def close(self):
        """Stop our tmux server by its pid (SIGTERM, then SIGKILL)."""
        if self.pid:
            for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and _alive(self.pid):
                    time.sleep(0.05)
                if not _alive(self.pid):
                    break
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _alive(pid):
    """True while pid exists and is not a zombie (tmux daemonizes, so it is
    not our child and we cannot reap it)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def top_script(cli, port, *extra):
    """The shell line a tmux session runs: top, then its exit status and
    whether the terminal's mode came back exactly (stty -g before/after)."""
    args = " ".join([cli, "-p", str(port)] + list(extra) + ["top"])
    return ("before=$(stty -g); %s; rc=$?; after=$(stty -g); echo EXIT=$rc; "
            "if [ \"$before\" = \"$after\" ]; then echo TERMIOS=same; "
            "else echo TERMIOS=changed; fi; sleep 600" % args)
