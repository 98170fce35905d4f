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
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "client_beaneater.rb")


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def skip_reason():
    ruby = shutil.which("ruby")
    if ruby is None:
        return "ruby not found (apt-get install ruby ruby-beaneater)"
    r = subprocess.run([ruby, "-e", "require 'beaneater'"], capture_output=True)
    if r.returncode != 0:
        return "the beaneater gem is not installed (apt-get install ruby-beaneater)"
    return None


def wait_ready(proc, port, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
        except OSError:
            time.sleep(0.02)
            continue
        try:
            s.sendall(b"quit\r\n")
            s.settimeout(2)
            while s.recv(4096):
                pass
        except OSError:
            pass
        s.close()
        return True
    return False


def stop(proc):
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=3)
    except ProcessLookupError:
        pass


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

    errf = tempfile.TemporaryFile()
    proc = None
    for _ in range(3):                      # a free port can be taken meanwhile
        port = free_port()
        proc = subprocess.Popen([args.bin, "-l", "127.0.0.1", "-p", str(port)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=errf)
        if wait_ready(proc, port):
            break
        stop(proc)
        proc = None
    if proc is None:
        errf.seek(0)
        print("client_test: %s did not start\n%s" % (
            args.bin, errf.read()[-2000:].decode("latin-1")))
        print("beaneater: 0 passed, 1 failed")
        return 1

    def on_signal(signum, frame):
        stop(proc)
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
        if proc.poll() is not None:
            errf.seek(0)
            print("client_test: the server died (status %s)\n%s" % (
                proc.returncode, errf.read()[-2000:].decode("latin-1")))
            rc = 1
    finally:
        stop(proc)
        errf.close()
    return rc


if __name__ == "__main__":
    sys.exit(main())
