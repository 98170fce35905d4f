"""Randomized crash consistency of the binlog and read-behind (crashfuzz.py
says what it does and how it judges).

Each run picks a fresh seed (printed on failure) and does a few rounds of
random journaled changes, each ending in a kill -9 (or SIGTERM) and a
restart whose recovered state is compared job by job with what the client
was acknowledged; after each comparison faults are planted in the view
(a job dropped, a deleted one resurrected, a body byte changed, ...) and
the checker must report every one.

Environment:
    TUBED_CRASHFUZZ_SEED=N     repeat one seed
    TUBED_CRASHFUZZ_ROUNDS=N   kill/restart rounds per run (default 6)
    TUBED_CRASHFUZZ_RUNS=N     runs with consecutive seeds (default 1)
"""

import os
import random
import sys

from harness import check, no_server, slow, tubed_only
import crashfuzz


def _log(msg):
    if os.environ.get("TUBED_CRASHFUZZ_VERBOSE"):
        sys.stderr.write(msg + "\n")


@slow
@no_server
@tubed_only("binlog policies, read-behind and memcache are tubed extensions")
def test_binlog_crashfuzz(binary):
    seed = int(os.environ.get("TUBED_CRASHFUZZ_SEED") or random.randrange(1 << 30))
    rounds = int(os.environ.get("TUBED_CRASHFUZZ_ROUNDS") or 6)
    runs = int(os.environ.get("TUBED_CRASHFUZZ_RUNS") or 1)
    caught = {}
    for k in range(runs):
        _, got = crashfuzz.Fuzz(binary, seed + k, _log).run(rounds)
        for kind, (a, b) in got.items():
            x, y = caught.get(kind, (0, 0))
            caught[kind] = (x + a, y + b)
    # The checker proved itself on every kind of fault at least once.
    for kind in ("drop a job", "change a body byte", "a job never put",
                 "resurrect a deleted job"):
        check(caught.get(kind, (0, 0))[1] > 0,
              "seed %d: no %r fault could be planted (%r)" % (seed, kind, caught))
