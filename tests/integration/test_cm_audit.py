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
import signal
import tempfile
import time

import harness
from harness import Skip, check, eq, fail, no_server, slow, tubed_only
import failover_netns
from failover_netns import Lab
from repl_util import wait_for
from test_failover_keepalived import (FAILOVER_CEILING, PORT, VIP, Ledger,
                                      Trio, _bring_up, _check_ledger, _cleanup,
                                      _fill, _need, _put_via_vip,
                                      _wait_primary)

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
    _need()
    tmp = tempfile.mkdtemp(prefix="tubed-cma-")
    try:
        with Lab(tmp) as lab:
            trio = Trio(binary, lab, tmp)
            _bring_up(trio)
            ledger = Ledger()
            _fill(trio, ledger, b"before")
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
    finally:
        _cleanup(tmp)
