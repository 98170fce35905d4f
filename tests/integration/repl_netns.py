"""Run inside a fresh network namespace (`unshare -n python3 repl_netns.py
BINARY DIR`) by test_replication_roles.py: promote and follow from a
non-loopback source address (replication.md §4). With a third argument,
`names`, under `unshare -m -n`: a replica of a name that resolves to two
addresses while its primary listens on one (the namespace's own
/etc/hosts, bind-mounted from DIR, gives the name both).

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


def ask(src, dst, line, port=PORT):
    """One command on a fresh connection from src to dst; the reply line."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.bind((src, 0))
        s.connect((dst, port))
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


def start(binary, d, conf, listen="0.0.0.0", port=PORT, name="b", *flags):
    path = os.path.join(d, "tubed.conf")
    with open(path, "w") as f:
        f.write(conf)
    log = open(os.path.join(d, "log"), "ab")
    p = subprocess.Popen([binary, "-l", listen, "-p", str(port), "-b",
                          os.path.join(d, name), "--config", path] + list(flags),
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                         preexec_fn=_die_with_parent)
    for _ in range(500):
        if p.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1" if listen == "0.0.0.0" else listen, port),
                                     timeout=1).close()
            return p
        except OSError:
            time.sleep(0.02)
    return p


def _reloads(d):
    with open(os.path.join(d, "log"), "rb") as f:
        return f.read().count(b": reloaded ")


def reload(p, d, conf):
    """Rewrite the config, SIGHUP, wait until the server logged it."""
    before = _reloads(d)
    with open(os.path.join(d, "tubed.conf"), "w") as f:
        f.write(conf)
    p.send_signal(1)  # SIGHUP
    for _ in range(1000):
        if _reloads(d) > before:
            return
        time.sleep(0.02)


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
        # Any loopback address is this host, not only 127.0.0.1.
        out["loopback2_promote"] = ask("127.0.0.2", SERVER_ADDR, "promote")
        # allow_remote_admin changes at a reload, both ways.
        for value in ("true", "false"):
            reload(p, d, "allow_remote_admin = %s\n" % value)
            out["reload_%s_promote" % value] = ask(CLIENT_ADDR, SERVER_ADDR, "promote")
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


def main_names():
    """A replica of "twohomed", which /etc/hosts here gives 127.0.0.1 and
    127.0.0.2, whose primary listens only on the one the resolver puts
    second: the replica must go on to it after the first refuses."""
    binary, d = sys.argv[1], sys.argv[2]
    sh("ip", "link", "set", "lo", "up")
    hosts = os.path.join(d, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 twohomed\n127.0.0.2 twohomed\n")
    sh("mount", "--bind", hosts, "/etc/hosts")
    order = [ai[4][0] for ai in socket.getaddrinfo("twohomed", PORT, socket.AF_INET,
                                                   socket.SOCK_STREAM)]
    out = {"order": order}
    if len(order) < 2:
        print(json.dumps(out))
        return
    second = order[1]
    p = start(binary, d, "", second, PORT, "p", "-f", "0")
    r = start(binary, d, "", "127.0.0.1", PORT + 1, "r", "--replica-of",
              "twohomed:%d" % PORT)
    try:
        out["put"] = ask(second, second, "put 0 0 60 5\r\nhello", PORT)
        t0 = time.monotonic()
        out["peek"] = ""
        while time.monotonic() - t0 < 20 and not out["peek"].startswith("FOUND"):
            out["peek"] = ask("127.0.0.1", "127.0.0.1", "peek 1", PORT + 1)
            time.sleep(0.05)
        out["seconds"] = time.monotonic() - t0
    finally:
        stop(r)
        stop(p)
    with open(os.path.join(d, "log"), "rb") as f:
        out["log"] = f.read().decode("utf-8", "replace")[-4000:]
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[3:] == ["names"]:
        main_names()
    else:
        main()
