#!/usr/bin/env python3
"""Run the beaneater (Ruby beanstalk client) scenario against a server binary.

  python3 tests/integration/client_test.py --bin build/tubed
  python3 tests/integration/client_test.py --bin /usr/bin/beanstalkd

Starts the binary on a free 127.0.0.1 port, runs
tests/integration/client_beaneater.rb against it, and stops the server by its
pid.  The exit status is the Ruby script's (0 only if every check passed), or
1 if the server died.  If ruby or the beaneater library is missing, prints a
line saying the test is skipped and exits 0 (Debian: apt-get install ruby
ruby-beaneater).
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402  (the suite's server start and stop)
SCRIPT = os.path.join(HERE, "client_beaneater.rb")


def skip_reason():
    ruby = shutil.which("ruby")
    if ruby is None:
        return "ruby not found (apt-get install ruby ruby-beaneater)"
    r = subprocess.run([ruby, "-e", "require 'beaneater'"], capture_output=True)
    if r.returncode != 0:
        return "the beaneater gem is not installed (apt-get install ruby-beaneater)"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="server binary (build/tubed, beanstalkd)")
    ap.add_argument("--timeout", type=float, default=90, help="seconds for the Ruby run")
    args = ap.parse_args()

    reason = skip_reason()
    if reason:
        print("client_test: skipped: %s" % reason)
        return 0
    if not (os.path.isfile(args.bin) and os.access(args.bin, os.X_OK)):
        print("client_test: %s is not an executable file" % args.bin)
        print("beaneater: 0 passed, 1 failed")
        return 1

    try:
        srv = harness.Server(args.bin).start()   # a free port; stopped by pid
    except harness.ServerError as e:
        print("client_test: %s did not start: %s" % (args.bin, e))
        print("beaneater: 0 passed, 1 failed")
        return 1
    proc, port = srv.proc, srv.port

    def on_signal(signum, frame):
        harness.kill_all_servers()
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    rc = 1
    try:
        print("client_test: %s on 127.0.0.1:%d (pid %d)" % (args.bin, port, proc.pid))
        sys.stdout.flush()
        try:
            r = subprocess.run(["ruby", SCRIPT, "127.0.0.1:%d" % port],
                               timeout=args.timeout)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            print("client_test: the Ruby scenario took more than %.0f s" % args.timeout)
            print("beaneater: 0 passed, 1 failed")
            rc = 1
    finally:
        # A crash, an error exit or a sanitizer report fails the run.
        for problem in srv.stop():
            print("client_test: %s" % problem)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
