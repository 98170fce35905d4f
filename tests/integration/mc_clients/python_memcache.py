#!/usr/bin/python3
"""tubed's kestrel listener through python-memcache (Debian python3-memcache,
the client pykestrel wraps).

Usage: python_memcache.py HOST PORT [--memcached]

Uses the client's normal API on a fresh queue: three sets read back in FIFO
order, a reliable read (get q/open, then get q/close), an open that is
aborted and comes back, a wait with t= on an empty queue, and a get on an
empty queue. Prints one line per check and then "N passed, N failed"; exits
non-zero on any failure.

--memcached: the same calls against a real memcached, where a key is a key,
not a queue (a smoke test of the API use, not of queue semantics).

Client quirks handled here:
- On any error the client marks the server dead for dead_retry seconds
  (30) and answers None from then on, which would pass as "empty queue":
  dead_retry=0 and debug=1, so an error is printed and retried at once.
- Values are stored as given when they are bytes (flags 0); a str is
  stored with the client's text flag, which tubed drops (get returns flags
  0), so bytes are used throughout.
- Keys are checked by the client (no spaces or control bytes, <= 250
  bytes): '/' and '=' are fine.
- socket_timeout (3 s by default) must outlast a t= wait.
- Run with Debian's /usr/bin/python3 (the package is not in a pyenv or
  virtualenv python).
"""
import os
import sys
import time

import memcache

RESULTS = [0, 0]


class Failed:
    """What a client call that raised returns, so the check shows why."""

    def __init__(self, exc):
        self.exc = exc

    def __repr__(self):
        return "%s: %s" % (type(self.exc).__name__, self.exc)


def call(fn):
    try:
        return fn()
    except Exception as e:  # the client's own errors differ by version
        return Failed(e)


def expect(what, got, want, ok=None):
    ok = (got == want and type(got) is type(want)) if ok is None else ok
    RESULTS[0 if ok else 1] += 1
    print("%s %s%s" % ("PASS" if ok else "FAIL", what,
                       "" if ok else ": got %r, want %r" % (got, want)))


def queue_checks(c, q):
    for v in (b"one", b"two", b"three"):
        expect("set " + v.decode(), call(lambda: c.set(q, v)), True)
    got = [call(lambda: c.get(q)) for _ in range(3)]
    expect("three gets in FIFO order", got, [b"one", b"two", b"three"])
    expect("empty queue gives None", call(lambda: c.get(q)), None)

    expect("set for a reliable read", call(lambda: c.set(q, b"reliable")), True)
    expect("get q/open returns the item", call(lambda: c.get(q + "/open")), b"reliable")
    expect("get q/close answers nothing", call(lambda: c.get(q + "/close")), None)
    expect("the closed item is gone", call(lambda: c.get(q)), None)

    expect("set for an aborted read", call(lambda: c.set(q, b"retry")), True)
    expect("get q/open again", call(lambda: c.get(q + "/open")), b"retry")
    expect("get q/abort answers nothing", call(lambda: c.get(q + "/abort")), None)
    expect("the aborted item comes back", call(lambda: c.get(q)), b"retry")

    t0 = time.monotonic()
    got = call(lambda: c.get(q + "/t=300"))
    waited = time.monotonic() - t0
    expect("get q/t=300 waits %.3fs, then None" % waited, got, None,
           ok=got is None and waited >= 0.25)
    expect("get on an empty queue gives None", call(lambda: c.get(q)), None)


def memcached_checks(c, q):
    """The same calls where a key is a key: set/get/delete round trips."""
    expect("set", call(lambda: c.set(q, b"one")), True)
    expect("get", call(lambda: c.get(q)), b"one")
    expect("set a key with options", call(lambda: c.set(q + "/open", b"x")), True)
    expect("get a key with options", call(lambda: c.get(q + "/t=300/open")), None)
    expect("get it back", call(lambda: c.get(q + "/open")), b"x")
    expect("delete (answers 1)", call(lambda: c.delete(q)), 1)
    expect("get a missing key gives None", call(lambda: c.get(q)), None)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: %s HOST PORT [--memcached]" % sys.argv[0])
    host, port = sys.argv[1], int(sys.argv[2])
    q = "python_memcache_%d_%d" % (os.getpid(), int(time.time()))
    c = memcache.Client(["%s:%d" % (host, port)], dead_retry=0, debug=1,
                        socket_timeout=10)
    if "--memcached" in sys.argv[3:]:
        memcached_checks(c, q)
    else:
        queue_checks(c, q)
    c.disconnect_all()
    print("%d passed, %d failed" % tuple(RESULTS))
    sys.exit(1 if RESULTS[1] or not RESULTS[0] else 0)


if __name__ == "__main__":
    main()
