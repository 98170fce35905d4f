#!/usr/bin/env python3
"""Run tubed (the binary in $TUBED_BIN) with its -l/-p address served by a
[listen] section instead of the main listener, so that differential.py
can hold a section to beanstalkd's behaviour:

    TUBED_BIN=build/tubed ACC_MODE=restricted \\
        python3 tests/integration/differential.py --bin tests/integration/access_section_wrap.py

ACC_MODE: "admin" (role admin, no tubes), "allroles" (every role, tubes
= *) or "restricted" (admin, tubes = one PREFIX* pattern per first
character the differential's tube names use: restricted, yet every name
it sends is allowed, so every reply must be beanstalkd's). Not a test
file.
"""

import os
import string
import sys


def main():
    args = sys.argv[1:]
    host, port, rest = "127.0.0.1", "11300", []
    i = 0
    while i < len(args):
        if args[i] in ("-l", "-p") and i + 1 < len(args):
            if args[i] == "-l":
                host = args[i + 1]
            else:
                port = args[i + 1]
            i += 2
        else:
            rest.append(args[i])
            i += 1
    # At most 64 patterns: every first character the differential uses.
    firsts = string.ascii_lowercase + "ABCDEFGHIJKLMNOXYZ" + string.digits + "+/;.$_()"
    keys = {
        "admin": "role = admin\n",
        "allroles": "role = read, producer, worker, admin\ntubes = *\n",
        "restricted": "role = admin\ntubes = %s\n" % ", ".join(c + "*" for c in firsts),
    }[os.environ.get("ACC_MODE", "admin")]
    # The file lives in memory (a memfd), so nothing is left behind; exec
    # keeps the pid, which the harness looks up in /proc.
    fd = os.memfd_create("tubed-accwrap.conf", 0)
    os.write(fd, ("main_listener = false\n[listen sec]\naddress = %s:%s\n%s"
                  % (host, port, keys)).encode())
    os.set_inheritable(fd, True)
    binary = os.environ["TUBED_BIN"]
    os.execv(binary, [binary, "-l", host, "-p", port, "--config", "/proc/self/fd/%d" % fd]
             + rest)


if __name__ == "__main__":
    main()
