"""/tubes.json's "replication" member and stats-replication render the
same figures (repl_info) in two places: they must agree key for key, in
order, value for value, on a primary and on a replica."""

import json

from harness import check, eq, no_server, tubed_only, unq
from repl_util import EXT, Cluster, stats_replication, wait_caught_up

SERVER = "none"


def _as_json_value(v):
    """A stats-replication YAML scalar as /tubes.json writes it."""
    if v in ("true", "false"):
        return v == "true"
    if v.isdigit():
        return int(v)
    return unq(v)


def _agree(node):
    """(yaml as JSON values, the JSON member); read until two reads in a
    row agree on both sides, a bounded number of times (a heartbeat may
    move a figure between the two reads)."""
    last = None
    for _ in range(20):
        y = stats_replication(node.admin())
        d = json.loads(node.get("/tubes.json").text())
        check("replication" in d, "node %s: no replication member in tubes.json: %s"
              % (node.name, sorted(d)))
        want = [(k, _as_json_value(v)) for k, v in y.items()]
        got = list(d["replication"].items())
        if want == got:
            return want, got
        last = (want, got)
    return last


@no_server
@tubed_only(EXT)
def test_tubes_json_replication_equals_stats_replication(binary):
    with Cluster(binary) as cl:
        p = cl.node("p", "-f", "0")
        r = cl.node("r", "-f", "0", replica_of=p)
        p.bs().put(b"x")
        wait_caught_up(p, r)
        for n in (p, r):
            want, got = _agree(n)
            eq(got, want, "node %s: tubes.json replication vs stats-replication" % n.name)
