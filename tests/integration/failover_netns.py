"""Network namespaces for the keepalived test (test_failover_keepalived.py).
Not a test file.

A Lab makes, with `ip netns`, a hub namespace holding a bridge and the
test's client address, and one namespace per node joined to the bridge by
a veth pair; every address is in 10.213.0.0/24 and exists only inside
these namespaces (the host's own interfaces and routes are never
touched).  Processes started in a node (tubed, keepalived) are started
through `ip netns exec` in their own process group and stopped by that
group's id; on exit every process is killed and every namespace deleted,
also when the test failed.

The client lives in the hub: connect() creates its socket on a helper
thread that has entered the hub's namespace with setns(2), so the socket
belongs there and is used from the test's thread as usual.
"""

import ctypes
import itertools
import os
import signal
import subprocess
import threading
import time

import harness

CLONE_NEWNET = 0x40000000
NET = "10.213.0"
HUB_ADDR = NET + ".10"


_probe_lock = threading.Lock()
_probe = []


def skip_reason():
    """Why namespaces cannot be made here, or None (probed once)."""
    with _probe_lock:
        if not _probe:
            _probe.append(_skip_reason())
        return _probe[0]


def _skip_reason():
    if os.geteuid() != 0:
        return "needs root to make network namespaces (ip netns)"
    if subprocess.run(["which", "ip"], capture_output=True).returncode != 0:
        return "iproute2's ip is not installed"
    name = "tfoprobe%d" % os.getpid()
    p = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    if p.returncode != 0:
        return "ip netns add failed: %s" % p.stderr.decode().strip()
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _sh(*cmd, ns=None, check=True):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(cmd)
    p = subprocess.run(argv, capture_output=True, timeout=30)
    if check and p.returncode != 0:
        raise harness.TestFailure("%s: %s" % (" ".join(argv),
                                              p.stderr.decode().strip()))
    return p.stdout.decode()


_libc = ctypes.CDLL(None, use_errno=True)


class Proc:
    """A process started in a namespace, in its own process group."""

    def __init__(self, ns, argv, log):
        self.argv = argv
        self.log = log
        out = open(log, "ab")
        self.p = subprocess.Popen(["ip", "netns", "exec", ns] + argv,
                                  stdout=out, stderr=out,
                                  stdin=subprocess.DEVNULL,
                                  start_new_session=True)
        out.close()

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def kill(self, sig=signal.SIGKILL):
        """Signal the whole group (keepalived's children too)."""
        if self.p.poll() is None or sig == signal.SIGKILL:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
        if sig in (signal.SIGKILL, signal.SIGTERM):
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(15)

    def output(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


_labs = itertools.count(1)
# At most two labs at once: each is three servers, three keepalived and
# their checks every second; four at once under ASan on a two-core
# machine (the runner starts its slow tests first, together) made checks
# time out and failovers miss their deadlines whatever the code did.
_lab_slots = threading.BoundedSemaphore(2)


class Lab:
    def __init__(self, tmp, nodes=3):
        # Unique per Lab: the runner runs tests of one process in parallel.
        tag = "tfo%d-%d" % (os.getpid(), next(_labs))
        self.hub = tag + "h"
        self.nodes = ["%sn%d" % (tag, i + 1) for i in range(nodes)]
        self.tmp = tmp
        self.procs = []
        self.made = []

    def addr(self, i):
        """Node i's own address (i from 0)."""
        return "%s.%d" % (NET, i + 1)

    def __enter__(self):
        _lab_slots.acquire()
        try:
            self._build()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _build(self):
        _sh("ip", "netns", "add", self.hub)
        self.made.append(self.hub)
        _sh("ip", "link", "set", "lo", "up", ns=self.hub)
        _sh("ip", "link", "add", "br0", "type", "bridge", ns=self.hub)
        _sh("ip", "addr", "add", HUB_ADDR + "/24", "dev", "br0", ns=self.hub)
        _sh("ip", "link", "set", "br0", "up", ns=self.hub)
        for i, ns in enumerate(self.nodes):
            _sh("ip", "netns", "add", ns)
            self.made.append(ns)
            _sh("ip", "link", "set", "lo", "up", ns=ns)
            # Made inside the node, then one end moved to the hub: the
            # root namespace never holds either end.
            _sh("ip", "link", "add", "eth0", "type", "veth", "peer", "name",
                "h%d" % i, ns=ns)
            _sh("ip", "link", "set", "h%d" % i, "netns", self.hub, ns=ns)
            _sh("ip", "link", "set", "h%d" % i, "master", "br0", ns=self.hub)
            _sh("ip", "link", "set", "h%d" % i, "up", ns=self.hub)
            _sh("ip", "addr", "add", self.addr(i) + "/24", "dev", "eth0", ns=ns)
            _sh("ip", "link", "set", "eth0", "up", ns=ns)

    def isolate(self, i):
        """Cut node i off: its veth leaves the bridge (its link stays up,
        so keepalived sees silence, not a dead interface)."""
        _sh("ip", "link", "set", "h%d" % i, "nomaster", ns=self.hub)

    def rejoin(self, i):
        _sh("ip", "link", "set", "h%d" % i, "master", "br0", ns=self.hub)

    def start(self, i, argv, name):
        p = Proc(self.nodes[i], argv, os.path.join(self.tmp, "%s.%d.log" % (name, i)))
        self.procs.append(p)
        return p

    def run(self, i, *cmd, check=True):
        return _sh(*cmd, ns=self.nodes[i], check=check)

    def has_addr(self, i, addr):
        out = self.run(i, "ip", "-o", "-4", "addr", "show", "dev", "eth0")
        return (" %s/" % addr) in out

    def connect(self, host, port, timeout=harness.DEFAULT_TIMEOUT, node=None):
        """A harness.Client whose socket lives in the hub namespace (or in
        node `node`'s, where 127.0.0.1 is that node's loopback)."""
        box = {}
        ns = self.hub if node is None else self.nodes[node]

        def work():
            try:
                fd = os.open("/run/netns/" + ns, os.O_RDONLY)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns")
                finally:
                    os.close(fd)
                import socket
                box["sock"] = socket.create_connection((host, port), timeout=timeout)
            except BaseException as e:  # handed to the caller
                box["err"] = e
        t = threading.Thread(target=work)
        t.start()
        t.join(timeout + 5)
        if "err" in box:
            raise box["err"]
        if "sock" not in box:
            raise OSError("connect to %s:%d did not finish" % (host, port))
        return harness.Client(host, port, timeout=timeout, sock=box["sock"])

    def __exit__(self, et, ev, tb):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            p.kill(signal.SIGKILL)
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        # A namespace is gone once its last process is: nothing may linger.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
                os.path.exists("/run/netns/" + ns) for ns in self.made):
            time.sleep(0.05)
        _lab_slots.release()
        return False
