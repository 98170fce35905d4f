"""What operators run, where the other tests did not look: the Pacemaker
agent pkg/ocf/tubed (pid file checks, validation, paths with spaces, a hung
primary, a replica started beside a primary), tubed-cli's host forms, the
keepalived notify script's peers, the Debian maintainer scripts.

Each test fails on the code before its fix (see the commit that added it).
"""

import errno
import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time

import harness
from harness import Skip, check, eq, fail, no_server, tubed_only
from failover_util import OcfSite, ocf_skip_reason, repl_stats
from repl_util import wait_for

SERVER = "none"
EXT = "failover and tubed-cli are tubed extensions"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _need_ocf():
    why = ocf_skip_reason()
    if why:
        print("test_ops_hunt: SKIP: %s" % why, flush=True)
        raise Skip(why)


def _need_ipv6_loopback():
    import socket
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError as e:
        raise Skip("no IPv6 loopback here: %s" % e)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(") ", 1)[1][0] != "Z"


@no_server
@tubed_only(EXT)
def test_ocf_stale_pid_file_names_another_program(binary):
    """A pid file left by a crash whose pid now belongs to another program
    with "tubed" in its command line (an editor of tubed.conf, a tail of
    the log, a program named like the binary): monitor says not running,
    stop succeeds and leaves that program alone. (The agent matched
    *tubed* anywhere in the command line and SIGTERMed it.)"""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        impostors = [
            # argv[0] named like the binary, but not serving that binlog.
            subprocess.Popen([n.params["binary"], "300"], executable="/bin/sleep"),
            # "tubed" in an argument, as `tail -f /var/log/tubed/tubed.log`.
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)",
                              os.path.join(n.dir, "tubed")]),
        ]
        try:
            for p in impostors:
                with open(n.params["pidfile"], "w") as f:
                    f.write("%d\n" % p.pid)
                rc, out = n.run("monitor")
                eq(rc, 7, "monitor with a pid file naming pid %d, %s (not running)"
                   % (p.pid, p.args))
                rc, out = n.run("stop")
                eq(rc, 0, "stop with a stale pid file: %s" % out)
                check(p.poll() is None and _alive(p.pid),
                      "stop killed pid %d (%s), which is not our tubed" % (p.pid, p.args))
                check(not os.path.exists(n.params["pidfile"]),
                      "stop left the stale pid file")
            # The real one is still recognised: start, monitor, stop.
            n.must("start")
            pid = n.pid()
            n.must("monitor")
            n.must("stop")
            check(not _alive(pid), "stop left tubed (pid %d) running" % pid)
        finally:
            for p in impostors:
                p.kill()
                p.wait()


@no_server
@tubed_only(EXT)
def test_ocf_validate_checks_every_flag(binary):
    """validate-all checks fsync, options and query_timeout even without a
    config file (OCF_ERR_CONFIGURED, so Pacemaker does not try the start
    on every node); it used to check the command line only when `config`
    was set, and never query_timeout (0.5 made every peer query a usage
    error: a promote then did not see a peer that was ahead). Port 0, a
    peer's port that is not one, a relative binlog_dir passed too."""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        n.must("validate-all")
        for key, bad, why in (("fsync", "abc", "-f"),
                              ("options", "--no-such-flag", "--no-such-flag"),
                              ("options", "-z", "-z"),
                              ("query_timeout", "0.5", "query_timeout"),
                              ("query_timeout", "0", "query_timeout"),
                              ("query_timeout", "99999", "query_timeout"),
                              # port 0: a port the kernel picks, which no
                              # peer or admin command finds
                              ("port", "0", "port"),
                              ("peers", "a=10.0.0.1:abc", "port"),
                              ("peers", "a=10.0.0.1:0", "port"),
                              ("peers", "a=10.0.0.1:70000", "port"),
                              ("binlog_dir", "relative/dir", "absolute")):
            n.expect_misconfigured(key, bad, why)
        n.params["options"] = "-z 1000 --max-connections 50"
        n.params["query_timeout"] = "3"
        n.params["peers"] = "a=[::1]:11300 b=10.0.0.2:11300 c=unix:/run/c.sock d=h.example:1"
        n.must("validate-all")
        check(not os.path.exists(n.params["binlog_dir"]),
              "validate-all created the binlog directory")


@no_server
@tubed_only(EXT)
def test_ocf_paths_with_spaces(binary):
    """binlog_dir, pidfile, logfile and config with spaces: the agent
    passed its flags to tubed as one unquoted string, so tubed got
    "-b .../my" and "dir/binlog" and did not start."""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        d = os.path.join(n.dir, "my dir")
        os.mkdir(d)
        conf = os.path.join(d, "tubed conf")
        with open(conf, "w") as f:
            f.write("max_job_size = 1000\n")
        n.params.update({"binlog_dir": os.path.join(d, "bin log"),
                         "pidfile": os.path.join(d, "tubed pid"),
                         "logfile": os.path.join(d, "tubed log"),
                         "config": conf})
        n.must("validate-all")
        n.must("start")
        n.must("monitor")
        n.must("promote")
        n.must("monitor", rc=8)
        c = n.client()
        try:
            c.send(b"put 0 0 60 1001\r\n" + b"x" * 1001 + b"\r\n")
            eq(c.read_line(), b"JOB_TOO_BIG", "the config file with a space was read")
        finally:
            c.close()
        check(os.path.isdir(n.params["binlog_dir"]), "no binlog in %r" % n.params["binlog_dir"])
        n.must("demote")
        pid = n.pid()
        n.must("stop")
        check(not _alive(pid), "stop left tubed running")
        n.must("monitor", rc=7)


@no_server
@tubed_only(EXT)
def test_ocf_hung_primary_is_failed_promoted(binary):
    """A primary that stops answering (SIGSTOP) is OCF_FAILED_PROMOTED (9),
    so Pacemaker demotes it before it recovers it; it was OCF_ERR_GENERIC,
    the code of an unpromoted instance. Stop then gets rid of it (SIGKILL
    once SIGTERM is not obeyed)."""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        n.must("start")
        n.must("promote")
        n.must("monitor", rc=8)
        pid = n.pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            rc, out = n.run("monitor")
            eq(rc, 9, "monitor of a hung primary (OCF_FAILED_PROMOTED): %s" % out)
            # The stop waits (CRM_meta_timeout - 5 s) for SIGTERM, then kills.
            rc, out = n.run("stop", extra={"OCF_RESKEY_CRM_meta_timeout": "6000"})
            eq(rc, 0, "stop of a hung tubed: %s" % out)
            check(not _alive(pid), "stop left the hung tubed running")
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        n.must("monitor", rc=7)
        # Started again, it is a replica: no stale promoted mark.
        n.must("start")
        n.must("monitor", rc=0)
        n.must("stop")


@no_server
@tubed_only(EXT)
def test_ocf_post_start_follows_the_promoted_instance(binary):
    """Without `peers`, a node's address is its name and the common port.
    An instance started while another is primary found no primary (it asks
    only `peers`) and waited as a replica of nobody: nothing told it the
    primary until the next promotion. The post-start notification names
    the promoted instance; the agent now follows it."""
    _need_ocf()
    with OcfSite(binary) as site:
        # Node names are addresses: 127.0.0.2 and 127.0.0.3, one port.
        common = site.reserve_port("127.0.0.2", "127.0.0.3")
        a = site.node("127.0.0.2", listen="127.0.0.2", reserved=common)
        b = site.node("127.0.0.3", listen="127.0.0.3", reserved=common)
        a.must("start")
        a.must("promote")
        a.must("monitor", rc=8)
        b.must("start")
        b.must("monitor", rc=0)
        notify = {"OCF_RESKEY_CRM_meta_notify_type": "post",
                  "OCF_RESKEY_CRM_meta_notify_operation": "start",
                  "OCF_RESKEY_CRM_meta_notify_start_uname": b.name + " ",
                  "OCF_RESKEY_CRM_meta_notify_promoted_uname": a.name + " ",
                  "OCF_RESKEY_CRM_meta_notify_master_uname": a.name + " "}
        # Every instance gets the notification; only the started one acts.
        a.must("notify", extra=notify)
        a.must("monitor", rc=8)
        b.must("notify", extra=notify)

        def repl(n):
            c = harness.Client(n.params["listen"], n.port)
            try:
                _, body = c.cmd_body("stats-replication")
                return {k: harness.unq(v) for k, v in harness.parse_yaml_dict(body).items()}
            finally:
                c.close()

        want = "%s:%d" % (a.name, a.port)
        wait_for(lambda: repl(b)["primary"] == want and repl(b)["connected"] == "true",
                 "%s to follow %s" % (b.name, want), timeout=20)
        c = harness.Client(a.params["listen"], a.port)
        try:
            c.put(b"abc")
        finally:
            c.close()
        wait_for(lambda: repl(b)["lag-records"] == "0"
                 and repl(b)["position"] == repl(a)["position"],
                 "%s to catch up" % b.name, timeout=20)
        # A second notification changes nothing (no needless reconnect).
        before = repl(b)
        b.must("notify", extra=notify)
        after = repl(b)
        eq(after["full-resyncs"], before["full-resyncs"], "full resyncs after a repeated notify")
        b.must("stop")
        a.must("demote")
        a.must("stop")


@no_server
@tubed_only(EXT)
def test_cli_host_in_brackets(binary):
    """tubed-cli -h [::1]: the form `follow` and --replica-of write, which
    scripts (the keepalived notify script's TUBED_PEERS) split from
    [v6]:PORT. It was "cannot resolve [[::1]]:PORT"."""
    _need_ipv6_loopback()
    # The port is held from its choice on; a start that collides on it is
    # tried again on a new one (harness.spawn_on).
    res = harness.PortReservation("::1")
    p = None
    try:
        p = harness.spawn_on([res], lambda: [binary, "-l", "::1", "-p", str(res.port)],
                             "tubed on [::1]")
        port = res.port
        cli = os.path.join(os.path.dirname(binary), "tubed-cli")
        for host in ("[::1]", "::1"):
            r = subprocess.run([cli, "-h", host, "-p", str(port), "--json", "replication"],
                               capture_output=True, timeout=30)
            eq(r.returncode, 0, "tubed-cli -h %s: %s" % (host, r.stderr))
            check(b'"role":"primary"' in r.stdout, "tubed-cli -h %s: %r" % (host, r.stdout))
        for host in ("[]", "["):
            r = subprocess.run([cli, "-h", host, "-p", str(port), "stats"],
                               capture_output=True, timeout=30)
            eq(r.returncode, 3, "tubed-cli -h %s (cannot resolve)" % host)
            check(r.stderr.strip(), "tubed-cli -h %s: no message" % host)
    finally:
        if p is not None:
            p.terminate()
            p.wait(timeout=10)
        res.close()


def _tubed(binary, tmp, name, listen, port, *args):
    """tubed -l LISTEN -p PORT -b TMP/NAME ARGS, returned once it listens.
    port: a harness.PortReservation on listen (the scripts under test are
    told the port: it must stay this node's); "{port}" in ARGS is its port."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    path = os.path.join(d, "log")
    box = {}

    def attempt():
        with open(path, "wb") as log:
            p = box["p"] = subprocess.Popen(
                [binary, "-l", listen, "-p", str(port.port), "-b", d]
                + [a.replace("{port}", str(port.port)) for a in args],
                stdout=log, stderr=log)
        try:
            wait_for(lambda: p.poll() is not None or harness.listening(p.pid, port.port),
                     "tubed %s listening" % name, timeout=10)
        except BaseException:
            p.kill()
            p.wait()
            raise
        if p.poll() is None:
            return None
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    out = port.start(attempt)
    check(out is None, "tubed %s did not start: %s" % (name, out))
    return box["p"]


@no_server
@tubed_only(EXT)
def test_keepalived_notify_ipv6_peer_vip_prefix_and_spaces(binary):
    """The keepalived notify script, run as keepalived runs it, with an env
    file and a state directory whose paths hold spaces, a peer written
    [::1]:PORT (it was never reached: "cannot resolve [[::1]]", so a pair
    with the default quorum never promoted), and TUBED_VIP copied from
    virtual_ipaddress with its prefix ("127.0.0.9/8": a BACKUP node was
    told to follow "127.0.0.9/8:PORT", which tubed refuses)."""
    _need_ipv6_loopback()
    notify = os.path.join(ROOT, "pkg", "keepalived", "tubed-keepalived-notify")
    check_script = os.path.join(ROOT, "pkg", "keepalived", "tubed-keepalived-check")
    cli = os.path.join(os.path.dirname(binary), "tubed-cli")
    tmp = tempfile.mkdtemp(prefix="tubed-ka-")
    procs = []
    ports = []
    try:
        ports = [harness.PortReservation("127.0.0.1"), harness.PortReservation("::1")]
        # The VIP is a loopback address nothing listens on at that port.
        vip = "127.0.0.9"
        procs.append(_tubed(binary, tmp, "local", "127.0.0.1", ports[0],
                            "--replica-of", "%s:{port}" % vip))
        pl = ports[0].port
        procs.append(_tubed(binary, tmp, "peer", "::1", ports[1],
                            "--replica-of", "%s:%d" % (vip, pl)))
        pr = ports[1].port
        d = os.path.join(tmp, "etc dir")
        os.mkdir(d)
        env = os.path.join(d, "keepalived env")
        log = os.path.join(d, "notify log")
        with open(env, "w") as f:
            f.write('TUBED_VIP=%s/8\nTUBED_PORT=%d\nTUBED_PEERS="[::1]:%d"\n'
                    'TUBED_CLI="%s"\nTUBED_STATE="%s"\nTUBED_LOG="%s"\n'
                    % (vip, pl, pr, cli, os.path.join(d, "state dir"), log))

        def run(script, *args, extra=None):
            e = dict(os.environ)
            e.update(extra or {})
            r = subprocess.run([script, env] + list(args), capture_output=True,
                               timeout=60, env=e)
            try:
                with open(log) as f:
                    text = f.read()
            except OSError:
                text = ""
            return r.returncode, (r.stdout + r.stderr).decode() + text

        # A TUBED_QUORUM that is not a number read as "no quorum" (the
        # test errored, the if fell through to promote): now a step back.
        rc, out = run(notify, "INSTANCE", "tubed", "MASTER", "150",
                      extra={"TUBED_QUORUM": "two"})
        eq(rc, 0, "notify MASTER, TUBED_QUORUM=two: %s" % out)
        eq(repl_stats("127.0.0.1", pl)["role"], "replica",
           "MASTER with TUBED_QUORUM=two promoted: %s" % out)
        mark = os.path.join(d, "state dir", "defer")
        check(os.path.exists(mark), "no step-back mark: %s" % out)
        os.unlink(mark)
        rc, out = run(notify, "INSTANCE", "tubed", "MASTER", "150")
        eq(rc, 0, "notify MASTER: %s" % out)
        eq(repl_stats("127.0.0.1", pl)["role"], "primary",
           "MASTER with its one peer reachable at [::1] (quorum 2 of 2): %s" % out)
        rc, out = run(check_script)
        eq(rc, 0, "check of a healthy primary: %s" % out)
        rc, out = run(notify, "INSTANCE", "tubed", "BACKUP", "150")
        eq(rc, 0, "notify BACKUP: %s" % out)
        st = repl_stats("127.0.0.1", pl)
        eq((st["role"], st["primary"]), ("replica", "%s:%d" % (vip, pl)),
           "BACKUP follows the VIP without its prefix: %s" % out)
        rc, out = run(check_script)
        eq(rc, 0, "check of a replica: %s" % out)
        # A step-back mark an hour old with TUBED_DEFER not a number: the
        # check compared against "ten", failed, and kept failing for ever
        # (the node stuck in FAULT). The default, 10 s, applies.
        os.makedirs(os.path.dirname(mark), exist_ok=True)
        with open(mark, "w"):
            pass
        rc, out = run(check_script, extra={"TUBED_DEFER": "ten"})
        eq(rc, 1, "check just after a step back: %s" % out)
        old = time.time() - 3600
        os.utime(mark, (old, old))
        rc, out = run(check_script, extra={"TUBED_DEFER": "ten"})
        eq(rc, 0, "check an hour after a step back, TUBED_DEFER=ten: %s" % out)
        check(not os.path.exists(mark), "the step-back mark was not removed")
        # The local tubed gone: the check fails, the notify does nothing.
        procs[0].kill()
        procs[0].wait()
        rc, out = run(check_script)
        eq(rc, 1, "check with the local tubed dead: %s" % out)
        rc, out = run(notify, "INSTANCE", "tubed", "MASTER", "150")
        eq(rc, 0, "notify MASTER with the local tubed dead: %s" % out)
        check("does not answer" in out, "notify MASTER logs nothing useful: %s" % out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for r in ports:
            r.close()
        shutil.rmtree(tmp, ignore_errors=True)


_MAINT_RUN = r"""
# Inside `unshare -m`: the maintainer scripts against tmpfs copies of the
# directories they change, with the real deb-systemd-helper and systemctl
# (offline, --root=/) and fakes that record the rest.
set -e
PKG=$1
mount --make-rprivate /
for d in /etc/systemd/system /var/lib /usr/lib/systemd/system /run; do
    mount -t tmpfs tmpfs "$d"
done
mkdir -p /var/lib/systemd /run/systemd/system /var/lib/tubed
: >/var/lib/tubed/binlog.1   # a binlog a tubed run as root wrote
cp "$PKG"/systemd/*.service "$PKG"/systemd/*.socket /usr/lib/systemd/system/
links() { echo "$1: $(cd /etc/systemd/system && find . -type l | sort | tr '\n' ' ')"; }
sh "$PKG/debian/postinst" configure
links install
# The operator turns the memcache socket on (systemctl enable).
mkdir -p /etc/systemd/system/sockets.target.wants
ln -s /lib/systemd/system/tubed-memcache.socket /etc/systemd/system/sockets.target.wants/
sh "$PKG/debian/postinst" configure 0.1.0
links upgrade
sh "$PKG/debian/prerm" remove
rm /usr/lib/systemd/system/tubed*
sh "$PKG/debian/postrm" remove
sh "$PKG/debian/postrm" purge
links purge
sh "$PKG/debian/postrm" purge
[ -e /var/lib/tubed ] && echo "binlog dir: left" || echo "binlog dir: gone"
"""

_MAINT_FAKE = r"""#!/bin/sh
me=$(basename "$0")
echo "$me $*" >>"$FAKE_LOG"
case "$me" in
    getent) [ -e "$FAKE_LOG.user" ] || exit 2
            echo "tubed:x:999:999::/var/lib/tubed:/usr/sbin/nologin" ;;
    adduser) touch "$FAKE_LOG.user" ;;
    dpkg-statoverride) exit 1 ;;
esac
exit 0
"""


@no_server
@tubed_only(EXT)
def test_deb_maintainer_scripts_memcache_socket(binary):
    """postinst, prerm and postrm run as dpkg runs them (install, upgrade,
    remove, purge twice) in a private mount namespace: the memcache socket
    the operator enabled stays enabled across an upgrade, is stopped on
    removal and leaves no link after a purge. The scripts named only
    tubed.socket and tubed.service: removal left the memcache socket
    listening and a purge left a dangling sockets.target.wants link."""
    if os.geteuid() != 0 or not shutil.which("unshare") or \
            not os.access("/usr/bin/deb-systemd-helper", os.X_OK):
        raise Skip("needs root, unshare and init-system-helpers")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("unshare -m is not allowed here: %s" % probe.stderr)
    tmp = tempfile.mkdtemp(prefix="tubed-deb-")
    try:
        fakes = os.path.join(tmp, "bin")
        os.mkdir(fakes)
        with open(os.path.join(fakes, "fake"), "w") as f:
            f.write(_MAINT_FAKE)
        os.chmod(os.path.join(fakes, "fake"), 0o755)
        for n in ("getent", "adduser", "dpkg-statoverride", "chown", "deb-systemd-invoke"):
            os.symlink("fake", os.path.join(fakes, n))
        script = os.path.join(tmp, "run.sh")
        with open(script, "w") as f:
            f.write(_MAINT_RUN)
        log = os.path.join(tmp, "calls")
        env = dict(os.environ, PATH=fakes + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
                   FAKE_LOG=log, DPKG_MAINTSCRIPT_PACKAGE="tubed",
                   DPKG_MAINTSCRIPT_NAME="postinst")
        r = subprocess.run(["unshare", "-m", "sh", script, os.path.join(ROOT, "pkg")],
                           capture_output=True, timeout=60, env=env)
        out = r.stdout.decode()
        eq(r.returncode, 0, "maintainer scripts: %s %s" % (out, r.stderr.decode()[-600:]))
        lines = dict(l.split(": ", 1) for l in out.splitlines() if ": " in l)
        with open(log) as f:
            calls = f.read()
        inst = lines.get("install", "")
        check("sockets.target.wants/tubed.socket" in inst
              and "multi-user.target.wants/tubed.service" in inst
              and "memcache" not in inst, "links after install: %r" % inst)
        up = lines.get("upgrade", "")
        check("sockets.target.wants/tubed-memcache.socket" in up
              and "sockets.target.wants/tubed.socket" in up,
              "links after an upgrade: %r" % up)
        eq(calls.count("adduser "), 1, "adduser calls over two configures")
        # A binlog directory made by hand: its files too, or systemd
        # (StateDirectory=, which looks at the directory's owner) and
        # tubed never fix them.
        chowns = [l for l in calls.splitlines() if l.startswith("chown ")]
        check(any("/var/lib/tubed/binlog.1" in l and "tubed:tubed" in l for l in chowns),
              "postinst does not give tubed the files in /var/lib/tubed: %r" % chowns)
        stops = [l for l in calls.splitlines() if l.startswith("deb-systemd-invoke stop")]
        check(stops and "tubed-memcache.socket" in stops[0],
              "prerm remove does not stop the memcache socket: %r" % stops)
        eq(lines.get("purge", "").strip(), "", "links left after a purge")
        eq(lines.get("binlog dir"), "gone", "/var/lib/tubed after a purge")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _man_option_heads(page):
    """The flags that head the OPTIONS entries of a rendered man page."""
    r = subprocess.run(["man", "-l", os.path.join(ROOT, "man", page)],
                       capture_output=True, timeout=30, env=dict(os.environ, MANWIDTH="80"))
    if r.returncode != 0:
        raise Skip("man cannot render %s: %s" % (page, r.stderr[-200:]))
    text = re.sub(r".\x08", "", r.stdout.decode("utf-8", "replace"))
    flags, inside = set(), False
    for line in text.splitlines():
        if re.match(r"^[A-Z]", line):
            inside = line.strip() == "OPTIONS"
            continue
        if inside and re.match(r"^ {7}-", line):
            # The head ends at the first double space (a short head runs
            # into its description on the same line).
            head = line.strip().split("  ")[0]
            flags |= set(re.findall(r"(?<![\w-])(--?[A-Za-z][-A-Za-z]*)", head))
    return flags


def _help_flags(argv):
    r = subprocess.run(argv, capture_output=True, timeout=30)
    text = (r.stdout + r.stderr).decode()
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][-A-Za-z]*)", text))


@no_server
@tubed_only(EXT)
def test_man_options_and_help_agree(binary):
    """Every flag a man page's OPTIONS lists is in the program's help, and
    the other way round (test_ops checks one direction for tubed only):
    tubed -h did not mention --help and --version, tubed-cli --help not -j."""
    if not shutil.which("man"):
        raise Skip("man is not installed")
    cli = os.path.join(os.path.dirname(binary), "tubed-cli")
    for prog, page in ((binary, "tubed.1"), (cli, "tubed-cli.1")):
        man = _man_option_heads(page)
        check(len(man) > 5, "could not read the OPTIONS of %s: %s" % (page, sorted(man)))
        helps = _help_flags([prog, "--help"])
        missing = sorted(man - helps)
        check(not missing, "%s --help lacks %s, which %s documents" % (prog, missing, page))
        # Flags the help names that the man page's OPTIONS do not.
        undocumented = sorted(helps - man - {"-VV", "-f0"})
        check(not undocumented, "%s does not document %s (in --help)" % (page, undocumented))


@no_server
@tubed_only(EXT)
def test_cli_not_allowed_says_why(binary):
    """On a listener whose role refuses it (role = read), from this very
    host: tubed-cli said promote was taken "only from the server's host",
    which it was, and flush "unexpected reply (NOT_ALLOWED)". Both now
    name the listener's role; the exit status stays 4."""
    tmp = tempfile.mkdtemp(prefix="tubed-na-")
    # Both ports (-p and [listen ro]'s) held from their choice on; a start
    # that collides on one is tried again on new ones (harness.spawn_on).
    res = [harness.PortReservation(), harness.PortReservation()]
    conf = os.path.join(tmp, "tubed.conf")

    def argv():
        with open(conf, "w") as f:
            f.write("[listen ro]\naddress = 127.0.0.1:%d\nrole = read\n" % res[1].port)
        return [binary, "-l", "127.0.0.1", "-p", str(res[0].port), "-b", tmp,
                "--config", conf]
    p = None
    try:
        p = harness.spawn_on(res, argv, "tubed")
        port, ro = res[0].port, res[1].port
        cli = os.path.join(os.path.dirname(binary), "tubed-cli")
        for args, words in ((["promote"], ("NOT_ALLOWED", "admin")),
                            (["follow", "127.0.0.1:1"], ("NOT_ALLOWED", "admin")),
                            (["flush", "t"], ("NOT_ALLOWED", "role"))):
            r = subprocess.run([cli, "-p", str(ro)] + args, capture_output=True, timeout=30)
            err = r.stderr.decode()
            eq(r.returncode, 4, "tubed-cli %s on a read listener: %s" % (args, err))
            for w in words:
                check(w in err, "tubed-cli %s: %r does not say %r" % (args, err, w))
        # The admin listener still takes them.
        r = subprocess.run([cli, "-p", str(port), "promote"], capture_output=True, timeout=30)
        eq(r.returncode, 0, "promote on the main listener: %s" % r.stderr)
    finally:
        if p is not None:
            p.terminate()
            p.wait(timeout=10)
        for r in res:
            r.close()
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_ocf_user_param_takes_over_an_existing_binlog(binary):
    """user=nobody on a binlog an earlier run wrote as root: the agent gave
    nobody the directory but not its files, so tubed could not open its
    lock ("Permission denied") and start failed on every node."""
    _need_ocf()
    if os.geteuid() != 0:
        raise Skip("needs root to run tubed as another user")
    import pwd
    nobody = pwd.getpwnam("nobody")
    with OcfSite(binary) as site:
        n = site.node("solo", sync_replicas="0")
        os.chmod(site.tmp, 0o755)
        os.chmod(n.dir, 0o755)
        n.must("start")
        n.must("promote")
        c = n.client()
        jid = c.put(b"written as root")
        c.close()
        n.must("demote")
        n.must("stop")
        n.params["user"] = "nobody"
        n.must("start")
        with open("/proc/%d/status" % n.pid()) as f:
            uid = [l.split()[1] for l in f if l.startswith("Uid:")][0]
        eq(int(uid), nobody.pw_uid, "tubed's uid with user=nobody")
        for name in os.listdir(n.params["binlog_dir"]):
            eq(os.stat(os.path.join(n.params["binlog_dir"], name)).st_uid, nobody.pw_uid,
               "owner of %s" % name)
        n.must("promote")
        c = n.client()
        try:
            line, body = c.cmd_body("peek %d" % jid)
            eq(body, b"written as root", "the job written as root, after the restart")
        finally:
            c.close()
        n.must("stop")


@no_server
@tubed_only(EXT)
def test_ocf_pid_file_removed_while_running(binary):
    """The pid file removed under a running tubed (by hand, by a cleaner of
    its directory): monitor said "not running", a start then failed on the
    port and the binlog lock, and stop "succeeded" leaving tubed running.
    The agent now finds its tubed by its command line."""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        n.must("start")
        pid = n.pid()
        os.unlink(n.params["pidfile"])
        n.must("monitor", rc=0)
        eq(n.pid(), pid, "the pid file written again")
        os.unlink(n.params["pidfile"])
        n.must("start")
        eq(n.pid(), pid, "start beside the running tubed")
        os.unlink(n.params["pidfile"])
        n.must("stop")
        check(not _alive(pid), "stop left tubed (pid %d) running" % pid)
        n.must("monitor", rc=7)


def _syscall_set(name, cache):
    """The system calls of a systemd set (@name, nested sets expanded)."""
    if name in cache:
        return cache[name]
    out = subprocess.run(["systemd-analyze", "syscall-filter", name],
                         capture_output=True, text=True, timeout=30).stdout
    res = set()
    for line in out.splitlines()[1:]:
        w = line.strip()
        if w and not w.startswith("#"):
            res |= _syscall_set(w, cache) if w.startswith("@") else {w}
    cache[name] = res
    return res


def _unit_syscalls(unit):
    """What tubed.service's SystemCallFilter= lines let through: the first
    (an allow list) sets the default, then ~ lines take away, others add."""
    cache, allowed = {}, None
    with open(unit) as f:
        for line in f:
            m = re.match(r"SystemCallFilter=(.*)", line.strip())
            if not m:
                continue
            v = m.group(1)
            names = set()
            for w in v.lstrip("~").split():
                names |= _syscall_set(w, cache) if w.startswith("@") else {w}
            if allowed is None:
                check(not v.startswith("~"), "the first SystemCallFilter= is not an allow list")
                allowed = names
            elif v.startswith("~"):
                allowed -= names
            else:
                allowed |= names
    return allowed or set()


@no_server
@tubed_only(EXT)
def test_systemd_syscall_filter_allows_what_tubed_calls(binary):
    """Every system call tubed makes (traced with strace over a session of
    puts, reserves, memcache, metrics, drain, reload, stop) and every one
    its source names outright passes tubed.service's SystemCallFilter=
    (refused ones fail with EPERM). setpriority, which the arenas'
    prefault thread calls to lower its own priority, was taken away with
    @resources."""
    if not shutil.which("strace") or not shutil.which("systemd-analyze"):
        raise Skip("needs strace and systemd-analyze")
    allowed = _unit_syscalls(os.path.join(ROOT, "pkg", "systemd", "tubed.service"))
    check(len(allowed) > 100, "could not read the filter: %d calls" % len(allowed))
    named = set()
    for d, _, files in os.walk(os.path.join(ROOT, "src")):
        if os.path.basename(d) in ("bench", "cli"):
            continue
        for fn in files:
            if fn.endswith(".c"):
                with open(os.path.join(d, fn)) as f:
                    src = f.read()
                for call in ("setpriority", "setrlimit", "sched_setaffinity", "mlock",
                             "mlockall", "prctl", "ioprio_set", "nice"):
                    if re.search(r"\b%s\s*\(" % call, src):
                        named.add(call)
    missing = sorted(named - allowed)
    check(not missing, "tubed.service refuses %s, which src/ calls" % missing)

    tmp = tempfile.mkdtemp(prefix="tubed-sc-")
    # The three ports are held from their choice on; a start that collides
    # on one is tried again on new ones (harness.start_on: tubed binds
    # before it opens the binlog, so the attempt left nothing behind).
    res = [harness.PortReservation() for _ in range(3)]
    conf = os.path.join(tmp, "tubed.conf")
    with open(conf, "w") as f:
        f.write("[tube t*]\nmax_items = 10\n")
    trace = os.path.join(tmp, "trace")
    log = os.path.join(tmp, "log")
    tpid = None
    p = None

    def pid():
        """tubed's pid: strace's child that runs the binary (not a helper
        strace may have forked, seen once under load)."""
        exe = os.path.realpath(binary)
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/stat" % d) as f:
                        if int(f.read().split(") ", 1)[1].split()[1]) != p.pid:
                            continue
                    if os.path.realpath("/proc/%s/exe" % d) == exe:
                        return int(d)
                except (OSError, ValueError, IndexError):
                    pass
        return None

    try:
        def up():
            """tubed (not strace, not another test's server that collided
            on a port) listens on the three ports."""
            nonlocal tpid
            if tpid is None or not harness.listening(tpid, ports=[r.port for r in res]):
                tpid = pid()   # again until it listens: the first look may be early
            return tpid is not None and harness.listening(tpid, ports=[r.port for r in res])

        def attempt():
            nonlocal p, tpid
            port, mport, kport = (r.port for r in res)
            tpid = None
            with open(log, "wb") as f:
                p = subprocess.Popen(["strace", "-f", "-qq", "-o", trace, binary, "-b",
                                      os.path.join(tmp, "binlog"), "-l", "127.0.0.1",
                                      "-p", str(port), "--metrics-port", str(mport),
                                      "--memcache-port", str(kport), "--config", conf],
                                     stderr=f)
            # A hang guard, not a speed check: an ASan tubed under strace -f
            # beside CI's other test once took over 20 s to listen.
            def what():
                with open(log, "rb") as f:
                    return "tubed under strace (pid %s) listening on %s; its output: %r" % (
                        tpid, [r.port for r in res], f.read()[-2000:])
            wait_for(lambda: p.poll() is not None or up(), what, timeout=90)
            if p.poll() is None:
                return None
            with open(log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        out = harness.start_on(res, attempt)
        check(out is None, "tubed under strace did not start: %s" % out)
        port, mport, kport = (r.port for r in res)
        check(tpid is not None, "no tubed under strace")
        c = harness.Client("127.0.0.1", port)
        c.use("t1")
        c.watch("t1")
        jid = c.put(b"traced")
        c.expect("reserve-with-timeout 0", "RESERVED %d 6" % jid)
        c.read_line()
        c.expect("delete %d" % jid, "DELETED")
        c.close()
        k = harness.Client("127.0.0.1", kport)
        k.send(b"set q 0 0 2\r\nhi\r\n")
        eq(k.read_line(), b"STORED", "memcache set")
        k.close()
        h = harness.Client("127.0.0.1", mport)
        h.send(b"GET /metrics HTTP/1.0\r\n\r\n")
        check(h.read_line().startswith(b"HTTP/1."), "metrics answered")
        h.close()
        for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
            os.kill(tpid, sig)
        c = harness.Client("127.0.0.1", port)
        c.expect("list-tube-used", "USING default")
        c.close()
        os.kill(tpid, signal.SIGTERM)
        p.wait(timeout=30)
        used = set()
        with open(trace) as f:
            for line in f:
                m = re.match(r"\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]", line)
                if m and not line.split(None, 1)[1].startswith(("+++", "---")):
                    used.add(m.group(1))
        check(len(used) > 20, "strace saw only %s" % sorted(used))
        refused = sorted(used - allowed - {"execve"})
        check(not refused, "tubed.service refuses %s, which tubed called" % refused)
    finally:
        # tubed first: strace killed would leave it running, detached.
        # Looked up again when the wait never found it (a hang guard that
        # expired, say), so that no tubed outlives the test.
        if p is not None and p.poll() is None:
            t = tpid if tpid is not None else pid()
            if t is not None:
                try:
                    os.kill(t, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if p is not None and p.poll() is None:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for r in res:
            r.close()
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_ocf_unix_socket_peers(binary):
    """Instances that listen on Unix sockets and name each other so in
    `peers` (NODE=unix:PATH): the agent asked tubed-cli for port 0 beside
    the path, a usage error, so no peer ever answered: a second instance
    did not find the primary at start, and promote did not see a peer
    ahead."""
    _need_ocf()
    with OcfSite(binary) as site:
        nodes = []
        for name in ("ua", "ub"):
            sock = os.path.join(site.tmp, name + ".sock")
            nodes.append(site.node(name, listen="unix:" + sock))
        a, b = nodes
        peers = " ".join("%s=%s" % (n.name, n.params["listen"]) for n in nodes)
        for n in nodes:
            n.params["peers"] = peers
        a.must("validate-all")
        a.must("start")
        a.must("promote")
        a.must("monitor", rc=8)
        b.must("start")
        want = a.params["listen"]

        def repl(n):
            r = subprocess.run([site.cli, "-h", n.params["listen"], "--json", "replication"],
                               capture_output=True, timeout=30)
            return r.stdout.decode()

        check('"primary":"%s"' % want in repl(b),
              "the second instance does not follow the primary it found: %s" % repl(b))
        wait_for(lambda: '"connected":true' in repl(b), "ub to connect to ua", timeout=20)
        b.must("stop")
        a.must("demote")
        a.must("stop")


@no_server
@tubed_only(EXT)
def test_cli_unix_socket_full_backlog_times_out(binary):
    """A server on a Unix socket that stopped accepting (SIGSTOP) with its
    backlog full: tubed-cli's connect blocked for ever, --timeout or not
    (so did the OCF agent's monitor, until Pacemaker killed it). It now
    gives up after --timeout with exit status 3."""
    import socket
    tmp = tempfile.mkdtemp(prefix="tubed-ub-")
    path = os.path.join(tmp, "sock")
    p = subprocess.Popen([binary, "-l", "unix:" + path], stderr=subprocess.DEVNULL)
    socks, limit = [], None
    try:
        wait_for(lambda: harness.listening(p.pid, unix_path=path), "tubed on " + path,
                 timeout=10)
        os.kill(p.pid, signal.SIGSTOP)
        # One descriptor per queued connection: raise our soft limit.
        import resource
        soft, hard = limit = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 70000 if hard == resource.RLIM_INFINITY else min(hard, 70000)
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        try:
            for _ in range(70000):
                s = socket.socket(socket.AF_UNIX)
                s.setblocking(False)
                try:
                    s.connect(path)
                except BlockingIOError:
                    s.close()
                    break
                socks.append(s)
            else:
                raise Skip("the backlog never filled")
        except OSError as e:
            if e.errno != errno.EMFILE:
                raise
            raise Skip("too few file descriptors to fill the backlog")
        cli = os.path.join(os.path.dirname(binary), "tubed-cli")
        try:
            r = subprocess.run([cli, "-h", "unix:" + path, "--timeout", "1", "stats"],
                               capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            fail("tubed-cli --timeout 1 still waits after 30 s on a full backlog")
        eq(r.returncode, 3, "tubed-cli on a full backlog: %s" % r.stderr)
        check(b"backlog" in r.stderr, "no reason given: %r" % r.stderr)
    finally:
        for s in socks:
            s.close()
        if limit is not None:
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, limit)
        p.kill()
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_ocf_meta_data_valid_and_complete(binary):
    """meta-data validates against resource-agents' ra-api-1.dtd (xmllint)
    and lists exactly the parameters the agent reads (OCF_RESKEY_*, but
    Pacemaker's CRM_meta_*), each with a default the agent uses."""
    _need_ocf()
    dtd = "/usr/share/resource-agents/ra-api-1.dtd"
    agent = os.path.join(ROOT, "pkg", "ocf", "tubed")
    p = subprocess.run([agent, "meta-data"], capture_output=True, timeout=30,
                       env=dict(os.environ, OCF_ROOT="/usr/lib/ocf"))
    eq(p.returncode, 0, "meta-data exit status")
    if shutil.which("xmllint") and os.path.exists(dtd):
        with tempfile.NamedTemporaryFile(suffix=".xml") as f:
            f.write(p.stdout)
            f.flush()
            r = subprocess.run(["xmllint", "--noout", "--dtdvalid", dtd, f.name],
                               capture_output=True, timeout=30)
        eq(r.returncode, 0, "xmllint --dtdvalid ra-api-1.dtd: %s" % r.stderr.decode())
    listed = set(re.findall(r'<parameter name="([a-z_]+)"', p.stdout.decode()))
    with open(agent) as f:
        read = set(re.findall(r"OCF_RESKEY_([a-z_]+)", f.read()))
    eq(sorted(listed), sorted(read), "parameters in meta-data vs parameters the agent reads")


@no_server
@tubed_only(EXT)
def test_every_man_page_lints_clean(binary):
    """groff -ww and mandoc -Tlint on every page in man/ (test_ops lints
    tubed.1 and tubed-bench.1 only; tubed-cli.1 and tubed-ocf.7 ship too)."""
    pages = sorted(os.path.join(ROOT, "man", p) for p in os.listdir(os.path.join(ROOT, "man"))
                   if re.search(r"\.[1-8]$", p))
    check(len(pages) >= 4, "man pages: %s" % pages)
    ran = 0
    for tool, args in (("groff", ["-man", "-ww", "-z"]), ("mandoc", ["-Tlint"])):
        if not shutil.which(tool):
            continue
        for page in pages:
            r = subprocess.run([tool] + args + [page], capture_output=True, timeout=30)
            out = (r.stdout + r.stderr).decode("utf-8", "replace").strip()
            check(r.returncode == 0 and not out, "%s %s:\n%s" % (tool, page, out))
            ran += 1
    if not ran:
        raise Skip("neither groff nor mandoc is installed")


@no_server
@tubed_only(EXT)
def test_shipped_scripts_are_posix_sh_and_shellcheck_clean(binary):
    """The agent, the keepalived scripts and the maintainer scripts run
    under /bin/sh (dash on Debian): dash -n parses them and shellcheck
    (warnings and errors) finds nothing."""
    scripts = [os.path.join(ROOT, "pkg", *p) for p in (
        ("ocf", "tubed"), ("keepalived", "tubed-keepalived-notify"),
        ("keepalived", "tubed-keepalived-check"), ("debian", "postinst"),
        ("debian", "prerm"), ("debian", "postrm"))]
    for s in scripts:
        with open(s) as f:
            eq(f.readline().strip(), "#!/bin/sh", "%s: interpreter" % s)
        # (deb.sh installs the maintainer scripts 0755 itself.)
        check("debian" in s or os.access(s, os.X_OK), "%s is not executable" % s)
        if shutil.which("dash"):
            r = subprocess.run(["dash", "-n", s], capture_output=True, timeout=30)
            eq(r.returncode, 0, "dash -n %s: %s" % (s, r.stderr.decode()))
    if not shutil.which("shellcheck"):
        raise Skip("shellcheck is not installed")
    r = subprocess.run(["shellcheck", "-s", "sh", "-S", "warning"] + scripts,
                       capture_output=True, timeout=60)
    eq(r.returncode, 0, "shellcheck: %s" % r.stdout.decode()[-2000:])


@no_server
@tubed_only(EXT)
def test_keepalived_stop_hands_off_before_following(binary):
    """keepalived stopped on the primary's node (STOP): the notify script
    made the primary follow the address at once, keeping a tail its
    replica had not received yet. The next MASTER's peer check then saw
    that former primary "ahead" and stepped back, again and again, while
    the former primary's node (keepalived stopped) never took the address:
    no primary at all. The primary now lets a replica catch up first
    (TUBED_HANDOFF seconds at most). Here the replica is paused while
    jobs are put, and resumed a moment after STOP: the former primary must
    not end ahead of it."""
    import threading
    notify = os.path.join(ROOT, "pkg", "keepalived", "tubed-keepalived-notify")
    cli = os.path.join(os.path.dirname(binary), "tubed-cli")
    tmp = tempfile.mkdtemp(prefix="tubed-ho-")
    procs = []
    ports = []
    try:
        ports = [harness.PortReservation(), harness.PortReservation()]
        vip = "127.0.0.9"
        procs.append(_tubed(binary, tmp, "primary", "127.0.0.1", ports[0]))
        pp = ports[0].port
        procs.append(_tubed(binary, tmp, "replica", "127.0.0.1", ports[1],
                            "--replica-of", "127.0.0.1:%d" % pp))
        pr = ports[1].port
        wait_for(lambda: repl_stats("127.0.0.1", pr)["connected"] == "true"
                 and (repl_stats("127.0.0.1", pr)["position"]
                      == repl_stats("127.0.0.1", pp)["position"]),
                 "the replica to catch up", timeout=20)
        os.kill(procs[1].pid, signal.SIGSTOP)
        # More than the loopback socket buffers hold (the part the kernel
        # already took would reach the replica anyway): the rest is still
        # in the primary when STOP comes.
        c = harness.Client("127.0.0.1", pp)
        for i in range(400):
            c.put(b"%05d" % i + b"t" * 60000)
        c.close()
        env = os.path.join(tmp, "env")
        with open(env, "w") as f:
            f.write('TUBED_VIP=%s\nTUBED_PORT=%d\nTUBED_CLI="%s"\nTUBED_STATE="%s"\n'
                    'TUBED_LOG="%s"\nTUBED_HANDOFF=20\n'
                    % (vip, pp, cli, os.path.join(tmp, "state"), os.path.join(tmp, "log")))
        resume = threading.Timer(1.0, os.kill, (procs[1].pid, signal.SIGCONT))
        resume.start()
        try:
            r = subprocess.run([notify, env, "INSTANCE", "tubed", "STOP", "150"],
                               capture_output=True, timeout=60)
        finally:
            resume.join()
            os.kill(procs[1].pid, signal.SIGCONT)
        eq(r.returncode, 0, "notify STOP: %s" % r.stderr)
        p, rep = repl_stats("127.0.0.1", pp), repl_stats("127.0.0.1", pr)
        eq((p["role"], p["primary"]), ("replica", "%s:%d" % (vip, pp)),
           "the former primary follows the address")
        eq(rep["position"], p["position"],
           "the replica's position against the former primary's (a tail kept)")
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            p.wait()
        for r in ports:
            r.close()
        shutil.rmtree(tmp, ignore_errors=True)


@no_server
@tubed_only(EXT)
def test_ocf_config_typo_while_running(binary):
    """A typo saved in tubed.conf while tubed runs (tubed read the file at
    start; a SIGHUP would keep the old one): monitor, promote and demote
    went through validate-all's --check-config and answered
    OCF_ERR_CONFIGURED, which makes Pacemaker stop the resource on every
    node. They now check the file only before a start and in
    validate-all; the running instance stays monitored."""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        conf = os.path.join(n.dir, "tubed.conf")
        with open(conf, "w") as f:
            f.write("max_job_size = 1000\n")
        n.params["config"] = conf
        n.must("start")
        n.must("monitor")
        with open(conf, "w") as f:
            f.write("max_job_size = = 1000\n")
        n.must("monitor", rc=0)
        n.must("promote")
        n.must("monitor", rc=8)
        n.must("demote")
        rc, out = n.run("validate-all")
        eq(rc, 6, "validate-all with the typo: %s" % out)
        n.must("stop")
        rc, out = n.start()
        eq(rc, 6, "start with the typo (OCF_ERR_CONFIGURED): %s" % out)
        check(not n.alive(), "a start refused left tubed running")


def test_keepalived_check_fits_in_its_timeout(binary):
    """keepalived counts a track_script it kills at `timeout` as failed
    (fall 2: the primary gives the floating address up).  The shipped
    check's tubed-cli calls may wait 2 + 1 + 5 s, and the shipped conf
    said `timeout 3`: a primary slow to answer while its replica followed
    again could fail over for nothing.  The conf's timeout must cover the
    sum of the script's --timeout values."""
    check_script = os.path.join(ROOT, "pkg", "keepalived", "tubed-keepalived-check")
    with open(check_script) as f:
        waits = [int(x) for x in re.findall(r"--timeout (\d+)", f.read())]
    check(len(waits) >= 3, "the check's tubed-cli calls changed shape: %r" % waits)
    with open(os.path.join(ROOT, "pkg", "keepalived", "keepalived.conf")) as f:
        conf = f.read()
    block = re.search(r"vrrp_script chk_tubed \{(.*?)\n\}", conf, re.S)
    check(block is not None, "no vrrp_script chk_tubed in keepalived.conf")
    m = re.search(r"^\s*timeout (\d+)\s*$", block.group(1), re.M)
    check(m is not None, "vrrp_script chk_tubed has no timeout")
    check(int(m.group(1)) > sum(waits),
          "keepalived.conf: timeout %s, but the check may wait %d s (%r)"
          % (m.group(1), sum(waits), waits))


_FAKE_CLI = """#!/bin/sh
# tubed-cli as the keepalived check calls it: each call logged; the local
# node answers from the files local.1, local.2, ... in turn (the last one
# again once they run out), the floating address from vip.
d=$(dirname "$0")
echo "$*" >>"$d/calls"
case "$*" in
*" follow "*) echo "following"; exit 0 ;;
*"-h 127.0.0.1 "*)
    n=$(grep -c -- "-h 127.0.0.1 .*replication" "$d/calls")
    while [ "$n" -gt 1 ] && [ ! -f "$d/local.$n" ]; do n=$((n - 1)); done
    cat "$d/local.$n" ;;
*) cat "$d/vip" ;;
esac
"""


def _check_with_fake_cli(locals_, vip):
    """Run the shipped keepalived check against a fake tubed-cli whose
    local answers are locals_ in turn; returns the fake's call log."""
    check_script = os.path.join(ROOT, "pkg", "keepalived", "tubed-keepalived-check")
    tmp = tempfile.mkdtemp(prefix="tubed-kacheck-")
    try:
        cli = os.path.join(tmp, "tubed-cli")
        with open(cli, "w") as f:
            f.write(_FAKE_CLI)
        os.chmod(cli, 0o755)
        for i, text in enumerate(locals_, 1):
            with open(os.path.join(tmp, "local.%d" % i), "w") as f:
                f.write(text + "\n")
        with open(os.path.join(tmp, "vip"), "w") as f:
            f.write(vip + "\n")
        env = os.path.join(tmp, "env")
        with open(env, "w") as f:
            f.write("TUBED_VIP=10.9.9.9\nTUBED_PORT=11300\nTUBED_CLI=%s\nTUBED_STATE=%s\n"
                    % (cli, os.path.join(tmp, "state")))
        r = subprocess.run([check_script, env], capture_output=True, timeout=60)
        eq(r.returncode, 0, "the check's status: %s" % (r.stdout + r.stderr).decode())
        with open(os.path.join(tmp, "calls")) as f:
            return f.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


REPLICA3 = '{"role":"replica","connected":true,"epoch":3}'
PRIMARY4 = '{"role":"primary","epoch":4}'


@no_server
@tubed_only(EXT)
def test_keepalived_check_never_follows_itself(binary):
    """The check read its node's state (a replica of the old primary,
    epoch 3), then the floating address's (a primary, epoch 4), and told
    its node to follow the address.  When keepalived had made this node
    MASTER between the two reads, its notify script had promoted it and
    the address answering epoch 4 was this node itself: it followed itself
    and the cluster had no primary (test_keepalived_failover under load:
    'no put acknowledged ... DRAINING'; node 2's notify log: 'MASTER:
    tubed-cli promote: primary, epoch 4', then 'check: following
    10.213.0.100:11300 again: it answers with epoch 4, our primary had
    3').  The check now reads its node again under the notify script's
    lock before it follows."""
    calls = _check_with_fake_cli([REPLICA3, PRIMARY4], PRIMARY4)
    check(" follow " not in calls, "a node promoted during the check was told to "
          "follow the floating address (itself):\n" + calls)
    # Still a replica of the old primary: it follows the new one.
    calls = _check_with_fake_cli([REPLICA3], PRIMARY4)
    check(" follow 10.9.9.9:11300" in calls, "a replica of a stale primary was not told "
          "to follow the floating address:\n" + calls)
