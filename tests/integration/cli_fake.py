"""A tiny in-process beanstalk server for the tubed-cli tests.

It speaks the classic commands tubed-cli sends (use, stats, stats-tube,
list-tubes, peek-*, stats-job, kick, put) and the extension commands
exactly in the formats of /work/shared/spec/extensions.md section 2
(stats-tubes, flush-tube, list-jobs, move-job, stats-binlog), over a
plain in-memory model, so the CLI's side of the extensions can be tested
before the real server has them.

    with FakeServer() as fake:
        fake.add_jobs("emails", "ready", 2500)
        ... run tubed-cli -p fake.port ...
        fake.log          # every command line received, in order

Knobs: ``page_cap`` makes list-jobs answer at most that many ids per page
whatever the count asked (short pages are allowed by the spec's "up to");
``replies`` maps a command word to a canned reply (bytes) to test error
handling; ``silent`` accepts connections and never answers. Every socket
has a timeout and stop() closes everything, so the fake can never keep a
test alive.
"""

import socket
import threading

STATES = ("ready", "delayed", "reserved", "buried")


def _q(s):
    return '"%s"' % s


class Job:
    def __init__(self, jid, tube, state, pri=1024, body=b"x"):
        self.id = jid
        self.tube = tube
        self.state = state
        self.pri = pri
        self.body = body


class FakeServer:
    def __init__(self, page_cap=None, silent=False, replies=None):
        self.page_cap = page_cap
        self.silent = silent
        self.replies = dict(replies or {})
        self.jobs = {}            # id -> Job
        self.tubes = {"default"}
        self.next_id = 1
        self.full_tubes = set()   # move-job into these answers OUT_OF_MEMORY
        self.log = []
        self.lock = threading.Lock()
        self.conns = []
        self.threads = []
        self.stopping = False
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.lsock.settimeout(0.2)
        self.port = self.lsock.getsockname()[1]

    # ------------------------------------------------------------ model
    def add_jobs(self, tube, state, n, pri=1024, body=b"x"):
        with self.lock:
            self.tubes.add(tube)
            ids = []
            for _ in range(n):
                j = Job(self.next_id, tube, state, pri, body)
                self.jobs[j.id] = j
                ids.append(j.id)
                self.next_id += 1
            return ids

    def count(self, tube, state=None):
        return sum(1 for j in self.jobs.values()
                   if j.tube == tube and (state is None or j.state == state))

    # ------------------------------------------------------------ life
    def __enter__(self):
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def stop(self):
        self.stopping = True
        for c in list(self.conns):
            try:
                c.close()
            except OSError:
                pass
        for t in self.threads:
            t.join(5)
        self.lsock.close()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            c.settimeout(0.2)
            self.conns.append(c)
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, c):
        buf = b""
        used = ["default"]
        while not self.stopping:
            try:
                data = c.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                c.close()
                return
            if self.silent:
                continue
            buf += data
            while b"\r\n" in buf:
                line, rest = buf.split(b"\r\n", 1)
                body = None
                if line.startswith(b"put "):
                    n = int(line.split()[4])
                    if len(rest) < n + 2:
                        break
                    body, rest = rest[:n], rest[n + 2:]
                buf = rest
                with self.lock:
                    self.log.append(line.decode("latin1"))
                    out = self._reply(line.decode("latin1"), body, used)
                try:
                    c.sendall(out)
                except OSError:
                    return

    # ------------------------------------------------------------ replies
    @staticmethod
    def _ok(text):
        data = text.encode()
        return b"OK %d\r\n%s\r\n" % (len(data), data)

    def _tube_keys(self, name):
        n = {s: self.count(name, s) for s in STATES}
        urgent = sum(1 for j in self.jobs.values()
                     if j.tube == name and j.state == "ready" and j.pri < 1024)
        return [("name", _q(name)), ("current-jobs-urgent", urgent),
                ("current-jobs-ready", n["ready"]),
                ("current-jobs-reserved", n["reserved"]),
                ("current-jobs-delayed", n["delayed"]),
                ("current-jobs-buried", n["buried"]),
                ("total-jobs", self.count(name)), ("current-using", 0),
                ("current-watching", 0), ("current-waiting", 0),
                ("cmd-delete", 0), ("cmd-pause-tube", 0), ("pause", 0),
                ("pause-time-left", 0)]

    def _ext_keys(self, name):
        size = sum(len(j.body) for j in self.jobs.values() if j.tube == name)
        return [("current-bytes", size), ("total-expired", 3),
                ("total-discarded", 0), ("total-timeouts", 7),
                ("oldest-ready-age", 125 if self.count(name, "ready") else 0)]

    def _stats_tubes(self):
        out = "---\n"
        for name in sorted(self.tubes):
            out += '"%s":\n' % name
            for k, v in self._tube_keys(name) + self._ext_keys(name):
                out += "  %s: %s\n" % (k, v)
        return self._ok(out)

    def _list_jobs(self, args):
        if len(args) != 4 or args[1] not in STATES + ("all",):
            return b"BAD_FORMAT\r\n"
        tube, state, frm, count = args[0], args[1], int(args[2]), int(args[3])
        if not 1 <= count <= 1000:
            return b"BAD_FORMAT\r\n"
        if tube not in self.tubes:
            return b"NOT_FOUND\r\n"
        if self.page_cap:
            count = min(count, self.page_cap)
        ids = sorted(j.id for j in self.jobs.values()
                     if j.tube == tube and j.id >= frm
                     and (state == "all" or j.state == state))[:count]
        return self._ok("---\n" + "".join("- %d\n" % i for i in ids))

    def _move(self, args):
        jid, tube = int(args[0]), args[1]
        j = self.jobs.get(jid)
        if j is None or j.state == "reserved":
            return b"NOT_FOUND\r\n"
        if tube in self.full_tubes:
            return b"OUT_OF_MEMORY\r\n"
        j.tube = tube
        self.tubes.add(tube)
        return b"MOVED\r\n"

    def _flush(self, tube):
        if tube not in self.tubes:
            return b"NOT_FOUND\r\n"
        gone = [i for i, j in self.jobs.items()
                if j.tube == tube and j.state != "reserved"]
        for i in gone:
            del self.jobs[i]
        return b"FLUSHED %d\r\n" % len(gone)

    def _binlog(self):
        return self._ok(
            "---\nenabled: true\nhealthy: true\nlast-error: \"\"\nfiles: 2\n"
            "bytes-on-disk: 20971520\nlive-bytes: 1234\noldest-file: 7\n"
            "oldest-file-pinned-by: 42\nrecords-written: 1000\n"
            "records-migrated: 10\ncompactions: 1\nfsync-mode: \"every-50ms\"\n"
            "last-fsync-ms-ago: 12\nspilled-jobs: 0\nspilled-bytes: 0\n")

    def _stats(self):
        n = {s: sum(1 for j in self.jobs.values() if j.state == s) for s in STATES}
        return self._ok(
            "---\ncurrent-jobs-urgent: 0\ncurrent-jobs-ready: %d\n"
            "current-jobs-reserved: %d\ncurrent-jobs-delayed: %d\n"
            "current-jobs-buried: %d\ncmd-put: 0\ncmd-delete: 0\n"
            "current-connections: 1\ncurrent-waiting: 0\nuptime: 5\n"
            "version: \"fake\"\ndraining: false\nid: 0123456789abcdef\n"
            "hostname: \"fake\"\n" % (n["ready"], n["reserved"], n["delayed"],
                                      n["buried"]))

    def _peek(self, tube, state):
        cands = [j for j in self.jobs.values() if j.tube == tube and j.state == state]
        if not cands:
            return b"NOT_FOUND\r\n"
        j = min(cands, key=lambda j: (j.pri, j.id))
        return b"FOUND %d %d\r\n%s\r\n" % (j.id, len(j.body), j.body)

    def _reply(self, line, body, used):
        words = line.split(" ")
        cmd, args = words[0], words[1:]
        if cmd in self.replies:
            return self.replies[cmd]
        if cmd == "stats-tubes" and not args:
            return self._stats_tubes()
        if cmd == "stats" and not args:
            return self._stats()
        if cmd == "list-tubes":
            return self._ok("---\n" + "".join("- %s\n" % t for t in sorted(self.tubes)))
        if cmd == "stats-tube":
            if args[0] not in self.tubes:
                return b"NOT_FOUND\r\n"
            return self._ok("---\n" + "".join("%s: %s\n" % kv for kv in
                                              self._tube_keys(args[0])))
        if cmd == "use":
            self.tubes.add(args[0])
            used[0] = args[0]
            return b"USING %s\r\n" % args[0].encode()
        if cmd in ("peek-ready", "peek-delayed", "peek-buried"):
            return self._peek(used[0], cmd[5:])
        if cmd == "stats-job":
            j = self.jobs.get(int(args[0]))
            if j is None:
                return b"NOT_FOUND\r\n"
            return self._ok("---\nid: %d\ntube: \"%s\"\nstate: %s\npri: %d\n"
                            % (j.id, j.tube, j.state, j.pri))
        if cmd == "put":
            j = Job(self.next_id, used[0], "ready", int(args[0]), body)
            self.jobs[j.id] = j
            self.next_id += 1
            return b"INSERTED %d\r\n" % j.id
        if cmd == "flush-tube" and len(args) == 1:
            return self._flush(args[0])
        if cmd == "list-jobs":
            return self._list_jobs(args)
        if cmd == "move-job" and len(args) == 2:
            return self._move(args)
        if cmd == "stats-binlog" and not args:
            return self._binlog()
        return b"UNKNOWN_COMMAND\r\n"
