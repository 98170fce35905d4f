"""Extension bugs found by a hunt against spec/extensions.md: each test
failed before its fix.  The old behaviour is named in each docstring."""

import harness
from harness import check, eq, no_server
from policy_util import (Policy, job_where, put_id, tube_counts, wait_for)


def _list(c, tube, state, frm=0, count=1000):
    """list-jobs as a list of ids (asserts an OK reply)."""
    line, body = c.cmd_body("list-jobs %s %s %d %d" % (tube, state, frm, count))
    check(body is not None and line.startswith(b"OK "),
          "list-jobs %s %s: expected OK n, got %r" % (tube, state, line))
    return [int(x) for x in harness.parse_yaml_list(body)]


# ------------------------------------------------ list-jobs and failed moves

@no_server
def test_list_jobs_shows_job_whose_expiry_move_failed(binary):
    """An expired job that cannot move to its full move_expired_to tube
    stays where it was (extensions.md §1): peek, reserve and stats-tube
    see it, so list-jobs must list it too.  The old list-jobs hid every
    job past its max_age, even one left in its tube waiting for a retry,
    so 'list-jobs b all' answered an empty page for a tube whose
    stats-tube said current-jobs-ready: 2."""
    conf = ("[tube b]\nmax_age = 1s\nmove_expired_to = bx\n"
            "[tube bx]\nmax_items = 1\n")
    with Policy(binary, conf) as p:
        c = p.srv.client()
        c.use("b")
        ids = [put_id(c, b"j%d" % i) for i in range(3)]
        # The first goes to bx and fills it; the others cannot follow.
        wait_for(lambda: job_where(c, ids[0]) == ("bx", "ready"),
                 "job %d to move to bx" % ids[0])
        wait_for(lambda: "cannot move expired job %d" % ids[1]
                 in p.srv.stderr_text(), "the failed move of job %d" % ids[1])
        eq(tube_counts(c, "b")[1], 2, "stats-tube b current-jobs-ready")
        for jid in ids[1:]:
            eq(job_where(c, jid), ("b", "ready"), "stats-job %d" % jid)
        eq(_list(c, "b", "all"), ids[1:], "list-jobs b all")
        eq(_list(c, "b", "ready"), ids[1:], "list-jobs b ready")
        eq(_list(c, "b", "ready", ids[2]), ids[2:], "list-jobs b ready from the last")
        eq(_list(c, "bx", "all"), ids[:1], "list-jobs bx all")
