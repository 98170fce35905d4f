"""The Pacemaker resource agent pkg/ocf/tubed (replication.md §7,
doc/failover.md).

- ocf-tester (Debian's resource-agents) against the agent with a real
  tubed on a loopback port and temporary directories: it must pass.
- meta-data: valid XML naming every parameter the operator needs.
- The agent driven as Pacemaker would drive a promotable clone, on nodes
  that are directories on this host (failover_util.OcfSite, fake cluster
  tools keeping the node attributes): a pair (start, promote, a replica
  started later finds the primary, kill -9 of the primary, promote of the
  replica, the former primary started again follows the new one, no
  acknowledged job lost), and a trio where the replica that lags must not
  be promoted (promote refuses and hands the score to the better one),
  the post-promote notification makes the other follow, and the scores
  set by monitor rank the replicas by position.

Skipped, with the reason printed, only where resource-agents is missing.
"""

import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET

import harness
from harness import Skip, check, eq, fail, no_server, tubed_only
from failover_util import AGENT, OcfSite, job_body, ocf_skip_reason
from repl_util import wait_for

SERVER = "none"
EXT = "failover is a tubed extension"


def _need_ocf():
    why = ocf_skip_reason()
    if why:
        print("test_failover_ocf: SKIP: %s" % why, flush=True)
        raise Skip(why)


@no_server
@tubed_only(EXT)
def test_ocf_tester_passes(binary):
    _need_ocf()
    with OcfSite(binary, rsc="tubedtest") as site:
        n = site.node("n1")
        args = ["ocf-tester", "-n", "tubedtest"]
        for k in ("binary", "cli", "binlog_dir", "listen", "port", "pidfile",
                  "logfile", "sync_replicas"):
            args += ["-o", "%s=%s" % (k, n.params[k])]
        args.append(AGENT)
        env = dict(os.environ, HA_RSCTMP=site.tmp, OCF_ROOT="/usr/lib/ocf")
        p = subprocess.run(args, capture_output=True, timeout=180, env=env)
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        check(p.returncode == 0 and "passed all tests" in out,
              "ocf-tester failed (exit %d): %s | tubed log: %s"
              % (p.returncode, out[-1500:], n.log()[-800:]))
        check(not n.alive() and not site.strays(),
              "ocf-tester ended with tubed still running: %s" % site.strays())
        # The run really started, promoted and demoted a tubed.
        log = n.log()
        check("serving as the primary" in log and "no longer a primary" in log,
              "tubed's log shows no promote/demote: %s" % log[-800:])


@no_server
@tubed_only(EXT)
def test_ocf_meta_data(binary):
    _need_ocf()
    p = subprocess.run([AGENT, "meta-data"], capture_output=True, timeout=30,
                       env=dict(os.environ, OCF_ROOT="/usr/lib/ocf"))
    eq(p.returncode, 0, "meta-data exit status")
    root = ET.fromstring(p.stdout)
    eq(root.tag, "resource-agent", "root element")
    params = {e.get("name") for e in root.iter("parameter")}
    for want in ("binary", "config", "binlog_dir", "listen", "port", "pidfile",
                 "user", "sync_replicas", "options", "peers"):
        check(want in params, "meta-data lacks parameter %s (has %s)"
              % (want, sorted(params)))
    actions = {e.get("name") for e in root.iter("action")}
    for want in ("start", "stop", "monitor", "promote", "demote", "notify",
                 "validate-all", "meta-data"):
        check(want in actions, "meta-data lacks action %s" % want)
    roles = {e.get("role") for e in root.iter("action") if e.get("name") == "monitor"}
    check({"Promoted", "Unpromoted"} <= roles,
          "meta-data: a monitor per role expected, got %s" % roles)


@no_server
@tubed_only(EXT)
def test_ocf_validate_rejects_bad_params(binary):
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1")
        for key, bad, why in (("port", "11x", "not a number"),
                              ("sync_replicas", "-1", "not a number"),
                              ("peers", "n1", "NODE=HOST:PORT"),
                              ("user", "no-such-user-tubed", "does not exist")):
            n.expect_misconfigured(key, bad, why)
        n.params["binary"] = "/nonexistent/tubed"
        rc, _ = n.run("validate-all")
        eq(rc, 5, "validate-all with a missing binary (OCF_ERR_INSTALLED)")
        # A probe (monitor, interval 0) on a node without the binary: not running.
        rc, _ = n.run("monitor", extra={"OCF_RESKEY_CRM_meta_interval": "0"})
        eq(rc, 7, "probe with a missing binary (OCF_NOT_RUNNING)")


def _wait_role(n, role, timeout=15):
    wait_for(lambda: n.repl().get("role") == role,
             "%s to be %s" % (n.name, role), timeout=timeout)


def _wait_caught_up(p, r, timeout=30):
    def ok():
        ps, rs = p.repl(), r.repl()
        return (rs["role"] == "replica" and rs["connected"] == "true"
                and rs["lag-records"] == "0" and rs["position"] == ps["position"])
    wait_for(ok, "%s to catch up with %s" % (r.name, p.name), timeout=timeout)


def _check_jobs(n, acked, deleted=()):
    c = n.client()
    try:
        for jid, body in acked.items():
            got = job_body(c, jid)
            check(got == body, "%s: acknowledged job %d: expected %r, got %r"
                  % (n.name, jid, body, got))
        for jid in deleted:
            check(job_body(c, jid) is None,
                  "%s: job %d, acknowledged as deleted, is back" % (n.name, jid))
    finally:
        c.close()


@no_server
@tubed_only(EXT)
def test_ocf_pair_failover(binary):
    _need_ocf()
    with OcfSite(binary) as site:
        a, b = site.node("alpha"), site.node("beta")
        site.set_peers()
        a.must("start")
        eq(a.repl()["role"], "replica", "alpha after start, no primary known")
        check(a.repl()["primary"].endswith(".no-primary"),
              "alpha follows the placeholder: %r" % a.repl()["primary"])
        a.must("monitor", rc=0)
        a.must("promote")
        a.must("monitor", rc=8)
        eq(a.score(), 2000, "the primary's promotion score (above any replica's)")
        b.must("start")
        eq(b.repl()["primary"], a.addr, "beta started while alpha is primary follows it")
        b.must("monitor", rc=0)
        # Jobs acknowledged under sync_replicas = 1: beta has each one.
        c = a.client()
        acked = {}
        for i in range(20):
            body = b"job-%d" % i
            acked[c.put(body, pri=10)] = body
        gone = list(acked)[:5]
        for jid in gone:
            c.expect("delete %d" % jid, "DELETED")
            del acked[jid]
        c.close()
        _wait_caught_up(a, b)
        b.must("monitor", rc=0)
        eq(b.score(), 1000, "beta's promotion score once caught up")
        # kill -9 of the primary: Pacemaker sees it gone, promotes beta.
        a.kill()
        a.must("monitor", rc=7)
        b.must("promote")
        b.must("monitor", rc=8)
        _check_jobs(b, acked, gone)
        # beta alone holds its replies (sync_replicas = 1) until a replica
        # follows it: nothing is acknowledged that only one copy has.
        c = b.client(timeout=20)
        c.send(b"put 10 0 60 14\r\nafter-failover\r\n")
        check(not c.has_data(0.5), "the lone new primary acknowledged a put")
        # alpha comes back: start finds beta primary and follows it.
        a.must("stop")
        a.must("start")
        eq(a.repl()["primary"], b.addr, "alpha restarted follows beta")
        line = c.read_line()
        check(line.startswith(b"INSERTED "), "the held put: %r" % line)
        acked[int(line.split()[1])] = b"after-failover"
        c.close()
        _wait_caught_up(b, a)
        _check_jobs(a, acked, gone)
        a.must("monitor", rc=0)
        # A switchover: demote beta, promote alpha, notify beta.
        b.must("demote")
        b.must("monitor", rc=0)
        c = b.client()
        eq(c.cmd(b"put 1 0 60 1\r\nx"), b"DRAINING", "put on the demoted beta")
        c.close()
        a.must("promote")
        notify = {"OCF_RESKEY_CRM_meta_notify_type": "post",
                  "OCF_RESKEY_CRM_meta_notify_operation": "promote",
                  "OCF_RESKEY_CRM_meta_notify_promote_uname": "alpha "}
        b.must("notify", extra=notify)
        a.must("notify", extra=notify)
        eq(b.repl()["primary"], a.addr, "beta after the post-promote notification")
        eq(a.repl()["role"], "primary", "alpha, the promoted, after its own notification")
        c = a.client()
        acked[c.put(b"after-switchover", pri=10)] = b"after-switchover"
        c.close()
        _wait_caught_up(a, b)
        _check_jobs(b, acked, gone)
        for n in (a, b):
            n.must("stop")
            n.must("monitor", rc=7)
            check(not n.alive(), "%s still runs after stop" % n.name)
        check(not site.strays(), "tubed processes left after stop: %s" % site.strays())


@no_server
@tubed_only(EXT)
def test_ocf_trio_promotes_most_advanced(binary):
    _need_ocf()
    with OcfSite(binary) as site:
        a, b, r = site.node("a"), site.node("b"), site.node("c")
        site.set_peers()
        a.must("start")
        a.must("promote")
        b.must("start")
        r.must("start")
        c = a.client()
        acked = {}
        for i in range(5):
            acked[c.put(b"early-%d" % i)] = b"early-%d" % i
        _wait_caught_up(a, b)
        _wait_caught_up(a, r)
        # c dies: under sync_replicas = 1, b alone acknowledges the rest.
        r.kill()
        for i in range(10):
            acked[c.put(b"late-%d" % i)] = b"late-%d" % i
        c.close()
        _wait_caught_up(a, b)
        b.must("monitor", rc=0)
        eq(b.score(), 1000, "b, the most advanced replica: its score")
        a.kill()
        # c comes back with the primary gone: a replica of nobody, behind b.
        r.must("start")
        check(r.repl()["primary"].endswith(".no-primary"),
              "c started with no primary up: %r" % r.repl()["primary"])
        r.must("monitor", rc=0)
        bpos, cpos = int(b.repl()["position"]), int(r.repl()["position"])
        check(bpos > cpos > 0, "b (%d) should be ahead of c (%d)" % (bpos, cpos))
        eq(r.score(), 1000 - min(990, bpos - cpos), "c's score: lower by what it lacks")
        # Pacemaker picks c anyway (say, b's score had not arrived): refused.
        rc, out = r.run("promote")
        eq(rc, 1, "promote of the lagging replica c (OCF_ERR_GENERIC)")
        check("b has position" in out + r.agent_log(),
              "the refusal names the better replica: %s" % out)
        eq(r.repl()["role"], "replica", "c after the refused promote")
        eq(r.score(), 1, "c's score after refusing")
        eq(r.score("b"), 1000, "b's score, handed over by c")
        b.must("promote")
        b.must("monitor", rc=8)
        notify = {"OCF_RESKEY_CRM_meta_notify_type": "post",
                  "OCF_RESKEY_CRM_meta_notify_operation": "promote",
                  "OCF_RESKEY_CRM_meta_notify_promote_uname": "b"}
        r.must("notify", extra=notify)
        eq(r.repl()["primary"], b.addr, "c follows b after the notification")
        _wait_caught_up(b, r)
        _check_jobs(b, acked)
        _check_jobs(r, acked)
        # The trio takes writes again (sync_replicas = 1 met by c).
        c = b.client(timeout=15)
        jid = c.put(b"trio-again")
        c.close()
        _check_jobs(r, {jid: b"trio-again"})
        check(re.search(r"crm_attribute b master-tubed 1000", site.calls()),
              "the fake CIB did not record b's score: %s" % site.calls())


@no_server
@tubed_only(EXT)
def test_ocf_newer_epoch_beats_more_records(binary):
    """Positions of different epochs do not compare: a replica whose
    history is of a newer epoch is ahead of one with more records of an
    older epoch (the older one's tail was never acknowledged under
    sync_replicas, or was given up by a promotion)."""
    _need_ocf()
    with OcfSite(binary) as site:
        a = site.node("a", sync_replicas="0")
        b = site.node("b", sync_replicas="0")
        site.set_peers()
        a.params["peers"] = b.params["peers"] = site.peers()
        a.must("start")
        a.must("promote")
        c = a.client()
        for i in range(10):
            c.put(b"old-%d" % i)
        c.close()
        a.must("demote")
        # b, empty, would be refused while a is there (a is ahead): a is
        # down when b is promoted, and comes back from its binlog after.
        b.must("start")
        rc, _ = b.run("promote")
        eq(rc, 1, "promote of the empty b while a (10 records) answers")
        a.must("stop")
        b.must("promote")          # epoch 2, as a had
        b.must("promote")          # a repeat changes nothing
        b.must("demote")
        b.must("promote")          # epoch 3
        c = b.client()
        c.put(b"new")
        c.close()
        b.must("demote")
        a.must("start")
        sa, sb = a.repl(), b.repl()
        check(int(sa["position"]) > int(sb["position"]) and
              int(sb["epoch"]) > int(sa["epoch"]),
              "setup: a has more records, b the newer epoch: %s %s" % (sa, sb))
        rc, out = a.run("promote")
        eq(rc, 1, "promote of a, the older history (OCF_ERR_GENERIC)")
        check("b has position" in out + a.agent_log(), "the refusal: %s" % out)
        a.must("monitor", rc=0)
        eq(a.score(), 10, "a's score beside a newer epoch")
        b.must("promote")


@no_server
@tubed_only(EXT)
def test_ocf_user_param(binary):
    """user=nobody: tubed binds, then runs as nobody; the binlog directory
    is given to it; stop still stops it."""
    _need_ocf()
    if os.geteuid() != 0:
        raise Skip("needs root to run tubed as another user")
    import pwd
    nobody = pwd.getpwnam("nobody")
    with OcfSite(binary) as site:
        n = site.node("solo", user="nobody", sync_replicas="0")
        # nobody must reach the binaries' and the binlog's directories.
        os.chmod(site.tmp, 0o755)
        os.chmod(n.dir, 0o755)
        n.must("start")
        with open("/proc/%d/status" % n.pid()) as f:
            uid = [l.split()[1] for l in f if l.startswith("Uid:")][0]
        eq(int(uid), nobody.pw_uid, "tubed's uid with user=nobody")
        eq(os.stat(n.params["binlog_dir"]).st_uid, nobody.pw_uid,
           "the binlog directory's owner")
        n.must("promote")
        c = n.client()
        c.put(b"as nobody")
        c.close()
        n.must("stop")
        check(not n.alive() and not site.strays(), "tubed left after stop")
