"""Helpers for the binlog integration tests (test_binlog*.py).

Not a test file itself (the runner only loads test_*.py).  Everything here
follows the binlog specification:

    file DIR/binlog.N, N decimal from 1;
    16-byte header: b"TUBEDLOG", u32 version (2; files of version 1 still
    replay), u32 CRC32C(first 12 bytes);
    records: u32 payload length, u32 CRC32C(payload), payload;
    a payload length of 0 ends the data (files are preallocated with zeros);
    the payload's first byte is its type: J (job), K (job with its tube-entry
    time and a client's expiry), S (state), D (delete), F (flush-tube),
    P (replication position), C (a fanout child registered or let go).
"""

import os
import re
import shutil
import struct
import subprocess
import tempfile

import harness
from harness import TestFailure, check, eq, fail, unq
from server import Tubed, raise_problems, stop_server

MAGIC = b"TUBEDLOG"
VERSION = 2
VERSIONS = (1, 2)
HEADER_SIZE = 16
REC_HDR = 8
RECORD_TYPES = (b"J", b"K", b"S", b"D", b"F", b"P", b"C")
FILE_RE = re.compile(r"binlog\.([1-9][0-9]*)\Z")

# ------------------------------------------------------------------ CRC32C

def _crc_table():
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC32C self-check"


# ------------------------------------------------------------------ files

def binlog_files(d):
    """[(n, path)] of DIR/binlog.N files, sorted by N."""
    out = []
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return out
    for name in names:
        m = FILE_RE.match(name)
        if m:
            out.append((int(m.group(1)), os.path.join(d, name)))
    out.sort()
    return out


def binlog_bytes(d):
    """Total st_size of the binlog files (files vanishing meanwhile skipped)."""
    total = 0
    for _, p in binlog_files(d):
        try:
            total += os.stat(p).st_size
        except FileNotFoundError:
            pass
    return total


class Record:
    def __init__(self, off, length, crc, payload, crc_ok):
        self.off = off            # offset of the 8-byte record header
        self.length = length
        self.crc = crc
        self.payload = payload
        self.crc_ok = crc_ok

    @property
    def type(self):
        return self.payload[:1]

    @property
    def end(self):
        return self.off + REC_HDR + self.length


class Parsed:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        self.size = 0
        self.header_ok = False
        self.records = []
        self.data_end = HEADER_SIZE   # where the terminating zero length is
        self.errors = []              # human-readable problems found
        self.torn = False             # last record runs past the end of file
        self.tail_zero = True         # everything after data_end is zero
        self.unwritten = False        # the whole file is zeros (a spare)


def parse_file(path, check_crc=True):
    """Parse one binlog file strictly; problems go to .errors (never raises)."""
    p = Parsed(path)
    with open(path, "rb") as f:
        data = f.read()
    p.size = len(data)
    if not data.strip(b"\0"):
        # Never written: a preallocated spare (valid only at the end of the
        # sequence; check_dir_clean checks that).
        p.unwritten = True
        p.data_end = 0
        return p
    if len(data) < HEADER_SIZE:
        p.errors.append("%s: only %d bytes, no full header" % (p.name, len(data)))
        return p
    magic, version, hcrc = struct.unpack_from("<8sII", data, 0)
    if magic != MAGIC:
        p.errors.append("%s: bad magic %r" % (p.name, magic))
    if version not in VERSIONS:
        p.errors.append("%s: version %d, expected one of %s" % (p.name, version, VERSIONS))
    if hcrc != crc32c(data[:12]):
        p.errors.append("%s: header CRC %08x, expected %08x"
                        % (p.name, hcrc, crc32c(data[:12])))
    p.header_ok = not p.errors
    off = HEADER_SIZE
    while True:
        if off + 4 > len(data):
            # End of file without a terminating zero length: allowed only
            # exactly at the end (a file filled to the last byte).
            if off != len(data):
                p.torn = True
                p.errors.append("%s: record header cut by end of file at %d"
                                % (p.name, off))
            break
        (length,) = struct.unpack_from("<I", data, off)
        if length == 0:
            break
        if off + REC_HDR + length > len(data):
            p.torn = True
            p.errors.append("%s: record at %d (length %d) runs past end of "
                            "file (%d)" % (p.name, off, length, len(data)))
            break
        (crc,) = struct.unpack_from("<I", data, off + 4)
        payload = data[off + REC_HDR:off + REC_HDR + length]
        ok = (not check_crc) or crc32c(payload) == crc
        if not ok:
            p.errors.append("%s: CRC mismatch in record at %d" % (p.name, off))
        if payload[:1] not in RECORD_TYPES:
            p.errors.append("%s: record at %d has type %r" % (p.name, off,
                                                              payload[:1]))
        p.records.append(Record(off, length, crc, payload, ok))
        off += REC_HDR + length
    p.data_end = off
    if data[off:].strip(b"\0"):
        p.tail_zero = False
        first = off + len(data[off:]) - len(data[off:].lstrip(b"\0"))
        p.errors.append("%s: non-zero bytes after the data end %d (first at %d)"
                        % (p.name, off, first))
    return p


def parse_dir(d):
    return [(n, parse_file(path)) for n, path in binlog_files(d)]


def check_dir_clean(d, what=""):
    """Every binlog file in d parses with valid header, CRCs and zero tail."""
    files = parse_dir(d)
    check(files, "%sno binlog.N file in %s (have %r)" % (what, d, _ls(d)))
    errs = []
    for i, (_, p) in enumerate(files):
        errs.extend(p.errors)
        if p.unwritten and not all(q.unwritten for _, q in files[i:]):
            errs.append("%s is all zeros but a later file has data" % p.name)
    check(not errs, "%sbinlog files damaged: %s" % (what, "; ".join(errs[:10])))
    return files


def find_body(files, body):
    """[(n, Parsed, Record)] for every J record whose payload contains body."""
    out = []
    for n, p in files:
        for r in p.records:
            if r.type in (b"J", b"K") and body in r.payload:
                out.append((n, p, r))
    return out


def _ls(d):
    try:
        return sorted(os.listdir(d))
    except OSError as e:
        return "<%s>" % e


def zero_range(path, start, end=None):
    """Overwrite [start, end) with zeros (end: file size)."""
    size = os.path.getsize(path)
    end = size if end is None else end
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(b"\0" * (end - start))


def flip_byte(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x5A]))


# ------------------------------------------------------------------ servers

class TempDir:
    """mkdtemp that is removed on exit (after unmounting anything in it)."""

    def __init__(self, prefix="tubed-binlog-"):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def __enter__(self):
        return self.path

    def __exit__(self, *a):
        shutil.rmtree(self.path, ignore_errors=True)
        return False


def start(binary, bdir, *args):
    """Start tubed with -b bdir (and args); returns a harness.Server."""
    return Tubed(binary, *args, bdir=bdir, tmp=bdir).start()


class Servers:
    """Tracks servers a test starts; stops every one still running on exit.
    `all` holds harness.Server objects (a test may add its own)."""

    def __init__(self, binary):
        self.binary = binary
        self.all = []

    def __enter__(self):
        return self

    def start(self, bdir, *args):
        """Start tubed -b bdir ARGS (bdir kept as is: a restart on the same
        directory is another start); returns the harness.Server."""
        t = Tubed(self.binary, *args, bdir=bdir, tmp=bdir)
        srv = t.start()
        self.all.append(srv)
        return srv

    def __exit__(self, et, ev, tb):
        problems = []
        for s in self.all:
            problems.extend(stop_server(s))
        raise_problems(problems, et, ev)
        return False


def kill9(srv):
    """SIGKILL the server by pid, wait for it, return its stderr text."""
    return srv.kill9()


def sigterm(srv, timeout=10):
    """SIGTERM the server; assert it exits with status 0; return stderr."""
    return srv.sigterm(timeout)


def run_refusing(binary, args, timeout=8.0):
    """Run tubed expecting it to refuse to start; returns (rc, stderr).

    Fails if it is still running after `timeout` seconds (then it is killed
    by pid) or if it exits with status 0. The free port can be taken by a
    parallel test before tubed binds it; that refusal is not the one we are
    after, so such a run is repeated on another port.
    """
    for _ in range(5):
        rc, text = _run_refusing_once(binary, args, timeout)
        if "Address already in use" not in text:
            break
    return rc, text


def _run_refusing_once(binary, args, timeout):
    port = harness._free_port()
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    cmd = [binary, "-l", harness.HOST, "-p", str(port)] + [str(a) for a in args]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env, close_fds=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate(timeout=10)
        fail("%s started and was still running after %.0fs; it should have "
             "refused to start (output: %r)" % (" ".join(cmd[3:]), timeout,
                                                out[-500:]))
    text = out.decode("utf-8", "replace")
    check(p.returncode != 0, "%s: expected a non-zero exit status, got %d "
          "(output: %r)" % (" ".join(cmd[3:]), p.returncode, text[-500:]))
    check(p.returncode > 0, "%s: died of %s instead of exiting with an error "
          "(output: %r)" % (" ".join(cmd[3:]),
                            harness._describe_rc(p.returncode), text[-800:]))
    for pat in harness.SANITIZER_PATTERNS:
        m = pat.search(out)
        if m:
            fail("sanitizer report while refusing to start: %s"
                 % out[max(0, m.start() - 100):m.start() + 1200].decode(
                     "utf-8", "replace"))
    return p.returncode, text


def mentions_offset(text, offsets):
    """True if text contains one of the offsets as a number (dec or hex)."""
    for off in offsets:
        if re.search(r"(?<![0-9A-Za-z])%d(?![0-9])" % off, text):
            return True
        if re.search(r"0x0*%x(?![0-9a-fA-F])" % off, text, re.I):
            return True
    return False


# ------------------------------------------------------------------ client

def peek_many(c, ids, chunk=200):
    """Pipelined `peek id`: returns {id: body or None}."""
    ids = list(ids)
    out = {}
    for i in range(0, len(ids), chunk):
        part = ids[i:i + chunk]
        c.send(b"".join(b"peek %d\r\n" % j for j in part))
        for j in part:
            line, body = c.read_reply()
            if line == b"NOT_FOUND":
                out[j] = None
                continue
            m = re.fullmatch(rb"FOUND (\d+) \d+", line)
            check(m is not None, "peek %d: expected FOUND/NOT_FOUND, got %r"
                  % (j, line))
            eq(int(m.group(1)), j, "id in FOUND reply to peek %d" % j)
            out[j] = body
    return out


def put_raw(c, body, pri=0, delay=0, ttr=60):
    """put; returns the reply line (INSERTED n, OUT_OF_MEMORY, ...)."""
    c.send(b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body))
    return c.read_line()


def stat_int(st, key):
    check(key in st, "stats has no key %r (keys: %s)" % (key, list(st)[-12:]))
    v = st[key]
    check(re.fullmatch(r"0|[1-9][0-9]*", v) is not None,
          "stats %s: expected an unsigned integer, got %r" % (key, v))
    return int(v)


def job_state(c, jid):
    return unq(c.stats_job(jid)["state"])


class Tmpfs:
    """A tmpfs of `size` mounted on a fresh directory; unmounted on exit."""

    def __init__(self, parent, size):
        self.path = os.path.join(parent, "mnt")
        self.size = size
        self.mounted = False

    def __enter__(self):
        if os.geteuid() != 0:
            raise harness.Skip("needs root to mount a tmpfs")
        os.mkdir(self.path)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s" % self.size,
                            "tubed-test", self.path], capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 0:
            raise harness.Skip("cannot mount a tmpfs: %s" % r.stderr.strip()[:200])
        self.mounted = True
        return self

    def remount(self, size):
        r = subprocess.run(["mount", "-o", "remount,size=%s" % size, self.path],
                           capture_output=True, text=True, timeout=20)
        check(r.returncode == 0, "remount %s size=%s failed: %s"
              % (self.path, size, r.stderr.strip()))

    def free(self):
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def __exit__(self, *a):
        if self.mounted:
            r = subprocess.run(["umount", self.path], capture_output=True,
                               timeout=20)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", self.path], capture_output=True,
                               timeout=20)
        return False
