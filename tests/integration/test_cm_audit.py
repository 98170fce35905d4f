"""A black-box audit of the cluster-manager integrations (spec
replication.md §7, §2 /primary and /replica, §4 promote/follow as the
integrations use them): pkg/ocf/tubed, pkg/keepalived/, pkg/systemd/ and
the commands doc/replication.md and doc/failover.md show.  Each test here
failed on the code it was written against and names what was wrong.

The keepalived tests use failover_netns.Lab (namespaces the test makes
and removes) and test_failover_keepalived's Trio; the OCF tests use
failover_util.OcfSite (nodes on 127.0.0.1, fake cluster tools).
"""

import os
import re
import shutil
import signal
import time

import harness
from harness import Skip, check, eq, no_server, slow, tubed_only
from failover_util import SHELLFUNCS, OcfSite, ocf_skip_reason, repl_stats
from repl_util import wait_for
from test_failover_keepalived import (FAILOVER_CEILING, PORT, VIP,
                                      _check_ledger, _fill, _keepalived_trio,
                                      _put_via_vip, _wait_primary)

SERVER = "none"
EXT = "failover is a tubed extension"


# -- keepalived -------------------------------------------------------------------

@slow
@no_server
@tubed_only(EXT)
def test_keepalived_tubed_restarted_on_the_master_node(binary):
    """`systemctl restart tubed` on the node that holds the floating
    address (doc/failover.md: every node runs tubed as a replica of the
    address; /etc/default/tubed: 'After a change: systemctl restart
    tubed'): the restarted tubed is a replica of the address, that is of
    itself ('it is not a primary (a replica itself)'), and no keepalived
    state changes, so no notify promotes it.  The check passed (a replica
    that is not connected 'retries by itself'), so the node kept the
    address for ever with no primary behind it: every put through the
    address answered DRAINING.  A node holding the address whose tubed is
    a replica must not pass its check: keepalived goes FAULT and the next
    MASTER (this node again, or another) promotes after its peer check."""
    with _keepalived_trio(binary, b"before", prefix="tubed-cma-") as (lab, trio, ledger):
        # systemctl restart: SIGTERM (a clean stop), then a start with
        # the same command line at once.
        trio.tubed[0].kill(signal.SIGTERM)
        trio.start_tubed(0)
        _put_via_vip(trio, ledger, b"after-restart",
                     time.monotonic() + FAILOVER_CEILING)
        wait_for(lambda: sum((trio.status(i) or {}).get("role") == "primary"
                             for i in range(3)) == 1,
                 lambda: "one primary after the restart\n" + trio.logs(),
                 timeout=FAILOVER_CEILING, interval=0.2)
        _fill(trio, ledger, b"after")
        _check_ledger(trio, ledger, "after tubed restarted on the MASTER node")


# -- the OCF resource agent ---------------------------------------------------------

def _need_ocf():
    why = ocf_skip_reason()
    if why:
        print("test_cm_audit: SKIP: %s" % why, flush=True)
        raise Skip(why)


def _old_shellfuncs(site):
    """A copy of resource-agents' shell library as releases before 4.12
    (Debian 11, Ubuntu 22.04, RHEL 8) ship it: no ocf_promotion_score()
    (added by ClusterLabs/resource-agents#1806, 2022); agents of that time
    set promotion scores with crm_master.  Returns the directory, for
    OCF_FUNCTIONS_DIR."""
    lib = os.path.join(site.tmp, "oldlib")
    shutil.copytree(os.path.dirname(SHELLFUNCS), lib)
    path = os.path.join(lib, "ocf-shellfuncs")
    with open(path) as f:
        text = f.read()
    cut = re.sub(r"\nocf_promotion_score\(\) \{.*?\n\}\n", "\n", text, flags=re.S)
    check(cut != text, "ocf-shellfuncs has no ocf_promotion_score() to remove")
    with open(path, "w") as f:
        f.write(cut)
    return lib


@no_server
@tubed_only(EXT)
def test_ocf_scores_with_resource_agents_before_ocf_promotion_score(binary):
    """The agent set every promotion score with ocf_promotion_score, which
    resource-agents has had only since 4.12: with an older library (the
    Pacemaker before 2.1 the agent and doc/failover.md support, OCF_RUNNING_
    MASTER and all) each set failed ('could not set the promotion score'),
    no instance ever had a score, and Pacemaker promotes no instance
    without one: the cluster never had a primary.  Without the function,
    the scores go through crm_master, as agents of that time do."""
    _need_ocf()
    with OcfSite(binary) as site:
        extra = {"OCF_FUNCTIONS_DIR": _old_shellfuncs(site)}
        a, b = site.node("alpha"), site.node("beta")
        site.set_peers()
        a.must("start", extra=extra)
        b.must("start", extra=extra)
        for n in (a, b):
            n.must("monitor", extra=extra)
            check(n.score() is not None and n.score() > 0,
                  "%s: no promotion score after monitor with resource-agents "
                  "without ocf_promotion_score (score %r) | agent log: %s"
                  % (n.name, n.score(), n.agent_log()[-600:]))
        a.must("promote", extra=extra)
        a.must("monitor", rc=8, extra=extra)
        eq(a.score(), 2000, "the primary's score with the older library")


# The meta attributes Pacemaker passes to every action of a promotable
# clone configured as doc/failover.md shows it.
CLONE_META = {
    "OCF_RESKEY_CRM_meta_clone_max": "2",
    "OCF_RESKEY_CRM_meta_clone_node_max": "1",
    "OCF_RESKEY_CRM_meta_promotable": "true",
    "OCF_RESKEY_CRM_meta_promoted_max": "1",
    "OCF_RESKEY_CRM_meta_master_max": "1",
    "OCF_RESKEY_CRM_meta_promoted_node_max": "1",
    "OCF_RESKEY_CRM_meta_notify": "true",
    "OCF_RESKEY_crm_feature_set": "3.16.2",
}


@no_server
@tubed_only(EXT)
def test_ocf_refuses_a_clone_it_cannot_work_in(binary):
    """The agent works only as a promotable clone with notify=true (the
    post-promote notification is what makes the other instances follow a
    new primary), promoted-max=1 and clone-node-max=1 (meta-data: 'Configure
    the clone with notify=true and promoted-max=1').  It checked none of
    these: a clone with notify=false started and monitored fine, and after
    the first failover the replicas kept waiting for the dead primary (a
    trio under sync_replicas = 1 acknowledged nothing more); with
    promoted-max=2 Pacemaker made two primaries.  start and validate-all
    now answer OCF_ERR_CONFIGURED for such a clone (as resource-agents'
    Route, SAPInstance, docker do for clone options), and still start the
    clone doc/failover.md configures."""
    _need_ocf()
    with OcfSite(binary) as site:
        n = site.node("n1", sync_replicas="0")
        for key, bad in (("OCF_RESKEY_CRM_meta_notify", "false"),
                         ("OCF_RESKEY_CRM_meta_promotable", "false"),
                         ("OCF_RESKEY_CRM_meta_promoted_max", "2"),
                         ("OCF_RESKEY_CRM_meta_clone_node_max", "2")):
            meta = dict(CLONE_META)
            meta[key] = bad
            if key == "OCF_RESKEY_CRM_meta_promotable":
                del meta["OCF_RESKEY_CRM_meta_master_max"]
            if key == "OCF_RESKEY_CRM_meta_promoted_max":
                meta["OCF_RESKEY_CRM_meta_master_max"] = bad
            for action in ("validate-all", "start"):
                rc, out = n.run(action, extra=meta)
                eq(rc, 6, "%s of a clone with %s=%s (OCF_ERR_CONFIGURED): %s"
                   % (action, key[len("OCF_RESKEY_CRM_meta_"):], bad, out.strip()[-300:]))
                check(not n.alive(), "%s with %s=%s started tubed" % (action, key, bad))
        meta = dict(CLONE_META)
        del meta["OCF_RESKEY_CRM_meta_notify"]
        rc, out = n.run("validate-all", extra=meta)
        eq(rc, 6, "validate-all of a clone without notify (Pacemaker's default false)")
        # The clone the doc configures starts, and so does a run with no
        # clone attributes at all (ocf-tester's).
        n.must("validate-all", extra=CLONE_META)
        n.must("start", extra=CLONE_META)
        n.must("monitor", extra=CLONE_META)
        n.must("stop", extra=CLONE_META)
        n.must("validate-all")


# -- doc/failover.md ------------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@no_server
@tubed_only(EXT)
def test_doc_lowering_sync_replicas_on_a_survivor(binary):
    """doc/failover.md told the operator of a pair whose replica is gone to
    'lower sync_replicas to 0 on the survivor with a reload (SIGHUP) to
    take writes alone' (and its failure table: 'or lower sync_replicas by
    reload').  Both setups the page ships put --sync-replicas on the
    command line (the OCF agent's sync_replicas parameter; TUBED_OPTS for
    keepalived), and the command line wins over the file: the reload
    keeps 1 ('sync_replicas in FILE differs from the command line, whose
    value stays') and the survivor goes on acknowledging nothing.  Done
    here as the page said, through the agent; the page must then say
    what works in those setups."""
    _need_ocf()
    with OcfSite(binary) as site:
        conf = os.path.join(site.tmp, "tubed.conf")
        with open(conf, "w") as f:
            f.write("sync_replicas = 1\n")
        n = site.node("survivor", sync_replicas="1", config=conf)
        n.must("start")
        n.must("promote")
        c = n.client(timeout=10)
        try:
            c.send(b"put 1 0 60 5\r\nalone\r\n")
            check(not c.has_data(0.5), "the lone primary acknowledged a put")
            with open(conf, "w") as f:
                f.write("sync_replicas = 0\n")
            os.kill(n.pid(), signal.SIGHUP)
            wait_for(lambda: "reload" in n.log(), "the reload in tubed's log", timeout=10)
            released = c.has_data(2.0)
        finally:
            c.close()
    if released:
        return   # the advice works as written
    with open(os.path.join(ROOT, "doc", "failover.md")) as f:
        doc = f.read()
    para = re.search(r"A pair with `sync_replicas = 1` trades.*?\n\n", doc, re.S)
    check(para is not None, "doc/failover.md: the pair's availability paragraph is gone")
    text = " ".join(para.group(0).split())
    check("command line" in text,
          "doc/failover.md advises lowering sync_replicas on a survivor by reload, "
          "which the command line's --sync-replicas (the agent's parameter, "
          "TUBED_OPTS) overrides: %r" % text)
    row = [l for l in doc.splitlines() if l.startswith("| a replica crashes")]
    check(row and "by reload)" not in row[0],
          "doc/failover.md's failure table still says 'lower sync_replicas by reload': %s" % row)


@slow
@no_server
@tubed_only(EXT)
def test_keepalived_lone_survivor_restarted_with_sync_replicas_0(binary):
    """doc/failover.md's way for a keepalived survivor to take writes
    alone: TUBED_OPTS without --sync-replicas and `systemctl restart
    tubed` on it, the primary, which holds the floating address.  The
    other nodes are gone (tubed and keepalived killed), the survivor's
    env file says TUBED_QUORUM=1 (a pair's setting).  Its tubed comes back
    a replica of the address (of itself); the check gives the address up,
    keepalived makes the node MASTER again, and it promotes: puts through
    the address are acknowledged by the survivor alone."""
    with _keepalived_trio(binary, b"three", prefix="tubed-cma-") as (lab, trio, ledger):
        for i in (1, 2):
            trio.stop_keepalived(i)
            trio.tubed[i].kill()
        trio.write_env(0, "TUBED_QUORUM=1\n")
        # Alone, with sync_replicas = 1: nothing is acknowledged.
        c = lab.connect(VIP, PORT, timeout=5)
        try:
            c.send(b"put 5 0 60 4\r\nheld\r\n")
            check(not c.has_data(1.0), "the survivor acknowledged a put alone")
        finally:
            c.close()
        trio.tubed[0].kill(signal.SIGTERM)
        trio.tubed[0] = lab.start(0, [
            trio.binary, "-l", "0.0.0.0", "-p", str(PORT),
            "-b", os.path.join(trio.dir(0), "binlog"), "-f", "0",
            "--replica-of", "%s:%d" % (VIP, PORT)], "tubed")
        _put_via_vip(trio, ledger, b"alone", time.monotonic() + 2 * FAILOVER_CEILING)
        _wait_primary(trio, 0)
        _check_ledger(trio, ledger, "on the lone survivor")


def _repl_v6(n):
    """stats-replication of an OCF node listening on ::1."""
    return repl_stats("::1", n.port)


@no_server
@tubed_only(EXT)
def test_ocf_peers_ipv6_without_brackets(binary):
    """peers="a=::1:PORT ..." (an IPv6 address without brackets) passed
    validate-all (the check was 'NODE=HOST:PORT' by glob), and tubed-cli
    reached the peers with it (-h ::1 -p PORT), so the first node started
    and was promoted; but the address is handed to tubed as it is
    written, and --replica-of and follow take an IPv6 address only in
    brackets (replication.md §1, §4): the second node's start, finding
    the primary, ran tubed --replica-of ::1:PORT, which exits 2 ('tubed
    exited at start'), and a post-promote follow answered BAD_FORMAT.
    validate-all now refuses it (OCF_ERR_CONFIGURED, naming the bracket
    form); [::1]:PORT works end to end."""
    _need_ocf()
    with OcfSite(binary) as site:
        a = site.node("a", listen="::1", sync_replicas="0")
        b = site.node("b", listen="::1", sync_replicas="0")
        bare = "a=::1:%d b=::1:%d" % (a.port, b.port)
        a.expect_misconfigured("peers", bare, "brackets")
        for n in (a, b):
            n.params["peers"] = "a=[::1]:%d b=[::1]:%d" % (a.port, b.port)
        a.must("start")
        a.must("promote")
        b.must("start")
        eq(_repl_v6(b)["primary"], "[::1]:%d" % a.port, "b follows a, found among peers")
        notify = {"OCF_RESKEY_CRM_meta_notify_type": "post",
                  "OCF_RESKEY_CRM_meta_notify_operation": "promote",
                  "OCF_RESKEY_CRM_meta_notify_promote_uname": "b"}
        wait_for(lambda: _repl_v6(b)["position"] == _repl_v6(a)["position"],
                 "b to catch up with a", timeout=20)
        a.must("demote")
        b.must("promote")
        a.must("notify", extra=notify)
        eq(_repl_v6(a)["primary"], "[::1]:%d" % b.port, "a follows b after the notification")
