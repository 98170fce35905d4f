"""Run inside a fresh network namespace (`unshare -n python3 repl_netns.py
BINARY DIR`) by test_replication_roles.py: promote and follow from a
non-loopback source address (replication.md §4).

The namespace has only its loopback device, given two more addresses,
10.9.0.1 and 10.9.0.2: a client bound to 10.9.0.2 that connects to
10.9.0.1 is, to the server, a client at a non-loopback address (the
traffic never leaves the namespace, which vanishes with this process).
Prints one JSON object: the reply lines seen and the server's log.
"""

import json
import os
import socket
import subprocess
import sys
import time

SERVER_ADDR = "10.9.0.1"
CLIENT_ADDR = "10.9.0.2"
PORT = 11300


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


def ask(src, dst, line):
    """One command on a fresh connection from src to dst; the reply line."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.bind((src, 0))
        s.connect((dst, PORT))
        s.sendall(line.encode() + b"\r\n")
        buf = b""
        while b"\r\n" not in buf:
            data = s.recv(4096)
            if not data:
                return "<closed: %r>" % buf
            buf += data
        return buf.split(b"\r\n", 1)[0].decode("latin-1")
    except OSError as e:
        return "<%s>" % e
    finally:
        s.close()


def _die_with_parent():
    # The server goes when this script goes, even if it is killed (the
    # test's timeout): nothing outlives the namespace's only user.
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def start(binary, d, conf):
    path = os.path.join(d, "tubed.conf")
    with open(path, "w") as f:
        f.write(conf)
    log = open(os.path.join(d, "log"), "ab")
    p = subprocess.Popen([binary, "-l", "0.0.0.0", "-p", str(PORT), "-b",
                          os.path.join(d, "b"), "--config", path],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                         preexec_fn=_die_with_parent)
    for _ in range(500):
        if p.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.02)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def main():
    binary, d = sys.argv[1], sys.argv[2]
    sh("ip", "link", "set", "lo", "up")
    sh("ip", "addr", "add", SERVER_ADDR + "/32", "dev", "lo")
    sh("ip", "addr", "add", CLIENT_ADDR + "/32", "dev", "lo")
    os.makedirs(os.path.join(d, "b"), exist_ok=True)
    out = {}
    p = start(binary, d, "")
    try:
        out["remote_plain"] = ask(CLIENT_ADDR, SERVER_ADDR, "list-tube-used")
        out["remote_promote"] = ask(CLIENT_ADDR, SERVER_ADDR, "promote")
        out["remote_follow"] = ask(CLIENT_ADDR, SERVER_ADDR, "follow 127.0.0.1:1")
        out["role_after"] = ask("127.0.0.1", "127.0.0.1", "put 0 0 60 0\r\n")
        out["local_promote"] = ask("127.0.0.1", "127.0.0.1", "promote")
    finally:
        stop(p)
    p = start(binary, d, "allow_remote_admin = true\n")
    try:
        out["open_promote"] = ask(CLIENT_ADDR, SERVER_ADDR, "promote")
    finally:
        stop(p)
    with open(os.path.join(d, "log"), "rb") as f:
        out["log"] = f.read().decode("utf-8", "replace")[-4000:]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
