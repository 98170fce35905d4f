"""Helpers for the failover tests (test_failover*.py; spec replication.md
§7, doc/failover.md).  Not a test file (the runner loads only test_*.py).

OcfSite runs the resource agent pkg/ocf/tubed the way Pacemaker's
executor does (OCF_ROOT, OCF_RESOURCE_INSTANCE, OCF_RESKEY_* in the
environment, the action as the argument) for a few "nodes" on one host:
each node has its own binlog directory, pid file, log and beanstalk port
on 127.0.0.1.  Pacemaker itself is not installed here, so the cluster
tools the agent calls (crm_node, crm_master, crm_attribute, pacemakerd
for the node name) are small fakes written into the site's directory: they
keep node attributes in files, so a test can read the promotion scores
the agent set and the node the agent handed a score to.

ocf_skip_reason() says why the agent cannot be run here (no
resource-agents), for a clear skip.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import harness
from harness import TestFailure, check, eq, fail

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AGENT = os.path.join(ROOT, "pkg", "ocf", "tubed")
OCF_ROOT = "/usr/lib/ocf"
SHELLFUNCS = os.path.join(OCF_ROOT, "lib", "heartbeat", "ocf-shellfuncs")

# The fakes: one script answers as every cluster tool, by its name.
_FAKE = r"""#!/bin/sh
# A stand-in for Pacemaker's command-line tools (the failover tests only).
cib=${FAKE_CIB:?}
me=$(basename "$0")
case "$me" in
    pacemakerd) echo "Pacemaker 2.1.5"; exit 0 ;;
    crm_node)
        case "$1" in
            -n) echo "${FAKE_NODE:?}" ;;
            *) echo "fake crm_node: $*" >&2; exit 1 ;;
        esac
        exit 0 ;;
esac
node=$FAKE_NODE name='' value='' delete=0 query=0
[ "$me" = crm_master ] && name="master-${OCF_RESOURCE_INSTANCE%%:*}"
while [ $# -gt 0 ]; do
    case "$1" in
        -N|--node) node=$2; shift ;;
        -n|--name) name=$2; shift ;;
        -v|--update) value=$2; shift ;;
        -D|--delete) delete=1 ;;
        -G|--query) query=1 ;;
        -p|--promotion) name="master-${OCF_RESOURCE_INSTANCE%%:*}" ;;
        -l|--lifetime|-t|--type) shift ;;
        -q|--quiet) ;;
        *) echo "fake $me: unknown argument $1" >&2; exit 1 ;;
    esac
    shift
done
[ -n "$name" ] || { echo "fake $me: no attribute name" >&2; exit 1; }
mkdir -p "$cib/$node"
echo "$me $node $name ${value:--}" >>"$cib/calls"
if [ $delete = 1 ]; then rm -f "$cib/$node/$name"
elif [ -n "$value" ]; then echo "$value" >"$cib/$node/$name"
elif [ $query = 1 ]; then cat "$cib/$node/$name" 2>/dev/null || exit 6
fi
"""


def ocf_skip_reason():
    if not os.path.isfile(SHELLFUNCS):
        return ("resource-agents is not installed (%s missing): "
                "apt-get install resource-agents" % SHELLFUNCS)
    if shutil.which("ocf-tester") is None:
        return "ocf-tester not found (apt-get install resource-agents)"
    return None


def repl_stats(host, port):
    """stats-replication of the tubed at host:port, as {key: unquoted value}."""
    c = harness.Client(host, port)
    try:
        _, body = c.cmd_body("stats-replication")
        return {k: harness.unq(v) for k, v in
                harness.parse_yaml_dict(body).items()}
    finally:
        c.close()


class OcfNode:
    """One instance of the clone: a node name and its tubed's files."""

    def __init__(self, site, name, params, reserved=None):
        self.site = site
        self.name = name
        self.dir = os.path.join(site.tmp, name)
        os.mkdir(self.dir)
        self.params = {
            "binary": site.binary,
            "cli": site.cli,
            "binlog_dir": os.path.join(self.dir, "binlog"),
            "listen": "127.0.0.1",
            "pidfile": os.path.join(self.dir, "tubed.pid"),
            "logfile": os.path.join(self.dir, "tubed.log"),
            "sync_replicas": "1",
            "fsync": "0",
        }
        self.params.update(params)
        # The port is held for the node from now to the site's end (a
        # harness.PortReservation; shared by nodes given the same one), so
        # nothing else takes it between its starts.  A node on a Unix
        # socket has no port to hold.
        listen = self.params["listen"]
        if reserved is None and not listen.startswith("unix:"):
            reserved = site.reserve_port(listen)
        self.reserved = reserved
        self.port = reserved.port if reserved else harness._free_port()
        self.params.setdefault("port", str(self.port))

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def env(self, extra=None):
        e = dict(os.environ)
        e.update({
            "OCF_ROOT": OCF_ROOT,
            "OCF_RESOURCE_INSTANCE": self.site.rsc,
            "OCF_RESKEY_CRM_meta_timeout": "30000",
            "OCF_RESKEY_CRM_meta_interval": "10000",
            "PATH": self.site.fakes + ":" + e.get("PATH", "/usr/bin:/bin"),
            "HA_SBIN_DIR": self.site.fakes,
            "HA_RSCTMP": self.site.tmp,
            "HA_LOGFILE": os.path.join(self.dir, "agent.log"),
            "HA_debug": "1",
            "FAKE_CIB": self.site.cib,
            "FAKE_NODE": self.name,
        })
        for k, v in self.params.items():
            e["OCF_RESKEY_" + k] = v
        if extra:
            e.update(extra)
        return e

    def run(self, action, extra=None, timeout=60):
        """(exit status, output) of the agent's action."""
        env = self.env(extra)
        env["__OCF_ACTION"] = action
        p = subprocess.run([AGENT, action], env=env, capture_output=True,
                           timeout=timeout)
        return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")

    def start(self, extra=None):
        """(exit status, output) of the agent's start, through the node's
        port reservation: the one path every start of a node takes (see
        harness.PortReservation.start: a start that failed on the port
        before any node ran on it is tried again on a new one, every node
        sharing it and every peer list moved along)."""
        res = {}

        def attempt():
            if self.reserved is not None and self.port != self.reserved.port:
                self.site.moved(self.reserved)
            res["got"], res["out"] = self.run("start", extra)
            return None if res["got"] == 0 else res["out"]
        if self.reserved is None:
            attempt()
        else:
            self.reserved.start(attempt)
        return res["got"], res["out"]

    def must(self, action, rc=0, extra=None):
        if action == "start":
            got, out = self.start(extra)
        else:
            got, out = self.run(action, extra)
        if got != rc:
            fail("agent %s on %s: expected exit %d, got %d: %s | agent log: %s"
                 " | tubed log: %s" % (action, self.name, rc, got, out.strip()[-600:],
                                       self.agent_log()[-800:], self.log()[-800:]))
        return out

    def pid(self):
        try:
            with open(self.params["pidfile"]) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def alive(self):
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        # a zombie of ours does not count: the agent's setsid child is not
        # our child, so there is none; still read the state to be sure.
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().split(") ", 1)[1][0] != "Z"
        except OSError:
            return False

    def kill(self, sig=signal.SIGKILL):
        pid = self.pid()
        if pid is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            if sig == signal.SIGKILL:
                deadline = time.monotonic() + 10
                while self.alive() and time.monotonic() < deadline:
                    time.sleep(0.02)

    def client(self, timeout=harness.DEFAULT_TIMEOUT):
        return harness.Client("127.0.0.1", self.port, timeout=timeout)

    def repl(self):
        return repl_stats("127.0.0.1", self.port)

    def score(self, node=None):
        """The promotion score set for a node (default this one), or None."""
        path = os.path.join(self.site.cib, node or self.name,
                            "master-" + self.site.rsc.split(":")[0])
        try:
            with open(path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def log(self):
        return _read(self.params["logfile"])

    def agent_log(self):
        return _read(os.path.join(self.dir, "agent.log"))

    def expect_misconfigured(self, key, bad, why):
        """validate-all with params[key] = bad is OCF_ERR_CONFIGURED (6)
        and names why (on stdout or in the agent's log); the parameter is
        then put back as it was."""
        good = self.params.get(key)
        self.params[key] = bad
        try:
            rc, out = self.run("validate-all")
            eq(rc, 6, "validate-all with %s=%r (OCF_ERR_CONFIGURED): %s" % (key, bad, out))
            check(why in out + self.agent_log(), "validate-all %s=%r: the reason "
                  "does not name %r: %s" % (key, bad, why, out))
        finally:
            if good is None:
                del self.params[key]
            else:
                self.params[key] = good


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class OcfSite:
    """A temporary directory, fake cluster tools, and the nodes in it.  On
    exit every tubed the agent started is killed by its pid."""

    def __init__(self, binary, rsc="tubed"):
        self.binary = binary
        self.cli = os.path.join(os.path.dirname(binary), "tubed-cli")
        if not os.access(self.cli, os.X_OK):
            fail("tubed-cli not found next to %s" % binary)
        self.rsc = rsc
        self.tmp = tempfile.mkdtemp(prefix="tubed-ocf-")
        self.cib = os.path.join(self.tmp, "cib")
        os.mkdir(self.cib)
        self.fakes = os.path.join(self.tmp, "bin")
        os.mkdir(self.fakes)
        fake = os.path.join(self.fakes, "fake-cluster-tool")
        with open(fake, "w") as f:
            f.write(_FAKE)
        os.chmod(fake, 0o755)
        for name in ("pacemakerd", "crm_node", "crm_master", "crm_attribute"):
            os.symlink(fake, os.path.join(self.fakes, name))
        self.nodes = []
        self.reservations = []

    def node(self, name, reserved=None, **params):
        """A node; params are its OCF_RESKEY_ parameters.  reserved: a
        port reservation (reserve_port()) it shares with other nodes, for
        nodes on different addresses with one port."""
        n = OcfNode(self, name, params, reserved)
        self.nodes.append(n)
        return n

    def reserve_port(self, *hosts):
        """A harness.PortReservation on hosts, held until the site's end."""
        r = harness.PortReservation(*hosts)
        self.reservations.append(r)
        return r

    def moved(self, reserved):
        """reserved has a new port (a collision at a first start): every
        node on it takes it, and peer lists name it."""
        for n in self.nodes:
            if n.reserved is reserved:
                n.port = reserved.port
                n.params["port"] = str(reserved.port)
        if any("peers" in n.params for n in self.nodes):
            self.set_peers()

    def peers(self):
        return " ".join("%s=%s" % (n.name, n.addr) for n in self.nodes)

    def set_peers(self):
        for n in self.nodes:
            n.params["peers"] = self.peers()

    def calls(self):
        return _read(os.path.join(self.cib, "calls"))

    def __enter__(self):
        return self

    def strays(self):
        """pids of every process whose command line names this site's
        directory (the agent's tubeds), pid file or not."""
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if self.tmp.encode() in f.read():
                        out.append(int(d))
            except OSError:
                pass
        return out

    def __exit__(self, et, ev, tb):
        pids = {n.pid() for n in self.nodes} | set(self.strays())
        pids.discard(None)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for n in self.nodes:
            deadline = time.monotonic() + 10
            while n.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
        for r in self.reservations:
            r.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        return False


def job_body(c, jid):
    """The body of job jid, or None when the server does not have it."""
    line, body = c.cmd_body("peek %d" % jid)
    if line == b"NOT_FOUND":
        return None
    if not line.startswith(b"FOUND "):
        raise TestFailure("peek %d: %r" % (jid, line))
    return body
