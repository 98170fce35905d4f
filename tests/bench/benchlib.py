"""benchlib.py — what the Python benchmarks under tests/bench/ share.

A free loopback port, waiting for a server to listen, stopping it, a
server started with a config file, and /proc readings (RSS, CPU time).
Only loopback addresses; every process is stopped by its pid. A script
reaches this module because Python puts the script's own directory on
sys.path.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_listening(ports, proc=None, timeout=10.0, what="tubed"):
    """Until every port in ports (or the one port) accepts a connection;
    exits the script if proc ends first or the time runs out."""
    if isinstance(ports, int):
        ports = [ports]
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            if proc is not None and proc.poll() is not None:
                sys.exit("%s exited early (status %s)" % (what, proc.returncode))
            try:
                socket.create_connection((HOST, port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit("%s did not listen on %d" % (what, port))
                time.sleep(0.02)


def stop(proc, timeout=10):
    """SIGTERM, then SIGKILL if it does not end within timeout seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def cpu_seconds(pid):
    """User + system CPU time of a running process (every thread)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Tubed:
    """A tubed on a free loopback port, in memory, with extra args and
    optionally a config file (written to a temporary directory)."""

    def __init__(self, binary, config=None, args=()):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="tubed-bench-")
        cmd = [binary, "-l", HOST, "-p", str(self.port)] + list(args)
        if config is not None:
            path = os.path.join(self.dir, "tubed.conf")
            with open(path, "w") as f:
                f.write(config)
            cmd += ["--config", path]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        wait_listening(self.port, self.proc)

    def stop(self):
        stop(self.proc)
        subprocess.run(["rm", "-rf", self.dir])
