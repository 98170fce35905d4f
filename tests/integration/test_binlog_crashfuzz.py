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
    TUBED_CRASHFUZZ_ROUNDS=N   kill/restart rounds per run (default 12)
    TUBED_CRASHFUZZ_RUNS=N     runs with consecutive seeds (default 1)

test_binlog_crashfuzz_disk_full does the same with the binlog on a 4 MiB
tmpfs (root only, skipped otherwise) that a filler file fills to a few KiB
of free space and empties again at random: a durable command then either
succeeds or answers OUT_OF_MEMORY (memcache: NOT_STORED) having changed
nothing, and puts work again once the room is back (rounds: default 8).
"""

import os
import random
import sys

from harness import check, no_server, slow, tubed_only
import crashfuzz


def _log(msg):
    if os.environ.get("TUBED_CRASHFUZZ_VERBOSE"):
        sys.stderr.write(msg + "\n")


def _fuzz(binary, rounds, disk=False):
    seed = int(os.environ.get("TUBED_CRASHFUZZ_SEED") or random.randrange(1 << 30))
    rounds = int(os.environ.get("TUBED_CRASHFUZZ_ROUNDS") or rounds)
    runs = int(os.environ.get("TUBED_CRASHFUZZ_RUNS") or 1)
    caught = {}
    for k in range(runs):
        _, got = crashfuzz.Fuzz(binary, seed + k, _log, disk=disk).run(rounds)
        for kind, (a, b) in got.items():
            x, y = caught.get(kind, (0, 0))
            caught[kind] = (x + a, y + b)
    # The checker proved itself on every kind of fault at least once.
    for kind in ("drop a job", "change a body byte", "a job never put",
                 "resurrect a deleted job"):
        check(caught.get(kind, (0, 0))[1] > 0,
              "seed %d: no %r fault could be planted (%r)" % (seed, kind, caught))


@slow
@no_server
@tubed_only("binlog policies, read-behind and memcache are tubed extensions")
def test_binlog_crashfuzz(binary):
    _fuzz(binary, 12)


@slow
@no_server
@tubed_only("binlog policies, read-behind and memcache are tubed extensions")
def test_binlog_crashfuzz_disk_full(binary):
    _fuzz(binary, 8, disk=True)
