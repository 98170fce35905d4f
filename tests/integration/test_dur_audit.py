"""Durability audit: what still broke in the binlog's promises (doc/binlog.md)
under damage, failing fsyncs and a failing disk.

Each test works on its own temporary directory, stops its servers by pid
and removes what it made.  Tests that need an LD_PRELOAD shim skip when
there is no C compiler (shim_util.build).
"""

import contextlib
import os
import re
import select
import shutil
import struct
import subprocess
import time

import harness
import shim_util
from harness import check, eq, no_server, tubed_only
from server import Tubed
from binlog_util import (REC_HDR, Servers, TempDir, Tmpfs, crc32c,
                         mentions_offset, parse_dir, peek_many, run_refusing)

EXT = "the binlog's damage handling and health are tubed's"


# ------------------------------------------------- a damaged length field

def _put_all(c, bodies):
    ids = []
    for b in bodies:
        ids.append(c.put(b))
    return ids


@contextlib.contextmanager
def _started_with(binary, bodies, *args):
    """A tubed (with args) on a fresh directory, `bodies` put through it:
    yields (the directory, its Servers, the server, the jobs' ids)."""
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, *args)
        yield d, ss, srv, _put_all(srv.client(), bodies)


def _bad_length(binary, delta):
    """20 puts acknowledged under -f 0, kill -9, then the length field of
    the 6th record of the newest file is damaged (+delta).  Records follow
    it: that is damage in the middle, not a torn tail, so the start must
    refuse (naming the file and offset) and --recover must keep the other
    19 jobs.  (It took the record for a torn tail and cut the file there:
    14 acknowledged jobs gone, with a warning about 'a crash mid-write'.)"""
    bodies = [b"len-damage-%03d" % i for i in range(20)]
    with _started_with(binary, bodies, "-f", "0") as (d, ss, srv, ids):
        srv.kill9()
        files = [(n, p) for n, p in parse_dir(d) if p.records]
        check(files, "no binlog file holds records: %s" % os.listdir(d))
        _, p = files[-1]
        js = [r for r in p.records if r.type == b"J"]
        check(len(js) == 20, "%s: %d J records, expected 20" % (p.name, len(js)))
        r = js[5]
        with open(p.path, "r+b") as f:
            f.seek(r.off)
            (length,) = struct.unpack("<I", f.read(4))
            f.seek(r.off)
            f.write(struct.pack("<I", (length + delta) & 0xffffffff))
        rc, err = run_refusing(binary, ["-b", d, "-f", "0"])
        check(p.name in err and mentions_offset(err, [r.off, r.off + REC_HDR]),
              "a damaged length field at offset %d of %s, 14 valid records "
              "after it: the start should refuse naming the file and offset; "
              "stderr: %r" % (r.off, p.name, err[-600:]))
        srv = ss.start(d, "-f", "0", "--recover")
        got = peek_many(srv.client(), ids)
        lost = [j for j, b in zip(ids, bodies) if j != ids[5] and got[j] != b]
        check(not lost, "--recover after a damaged length field: jobs %s lost "
              "(only job %d's record is damaged)" % (lost, ids[5]))


@no_server
@tubed_only(EXT)
def test_damaged_length_past_the_end_is_not_a_torn_tail(binary):
    """The length's top byte damaged: the record claims more than the file."""
    _bad_length(binary, 0x40000000)


@no_server
@tubed_only(EXT)
def test_damaged_length_into_the_zeros_is_not_a_torn_tail(binary):
    """The length 64 KiB too long: the record's claimed end lies in the
    file's preallocated zeros, the valid records inside it."""
    _bad_length(binary, 0x10000)


# ------------------------------------------ a file of a newer format

@no_server
@tubed_only(EXT)
def test_newer_format_file_refuses_even_with_recover(binary):
    """A binlog file whose header is intact but of a later format version
    (a downgrade): the start refuses saying so.  It said 'is damaged: bad
    header ... Start with --recover to drop it', and --recover then removed
    the file with every job in it."""
    bodies = [b"newer-%d" % i for i in range(5)]
    with _started_with(binary, bodies) as (d, ss, srv, _):
        srv.sigterm()
        files = [(n, p) for n, p in parse_dir(d) if p.records]
        _, p = files[-1]
        with open(p.path, "r+b") as f:
            head = bytearray(f.read(16))
            head[8:12] = struct.pack("<I", 3)
            head[12:16] = struct.pack("<I", crc32c(bytes(head[:12])))
            f.seek(0)
            f.write(head)
        with open(p.path, "rb") as f:
            before = f.read()
        for extra in ([], ["--recover"]):
            rc, err = run_refusing(binary, ["-b", d] + extra)
            check(p.name in err and "newer" in err and "version 3" in err,
                  "a version-3 file %s%s: the refusal should name the file and "
                  "say it is of a newer format; stderr: %r"
                  % (p.name, " with --recover" if extra else "", err[-600:]))
        check(os.path.exists(p.path), "%s was removed" % p.name)
        with open(p.path, "rb") as f:
            eq(f.read() == before, True, "%s unchanged by the refused starts" % p.name)


# ------------------------------------------- a stray copy named binlog.01

@no_server
@tubed_only(EXT)
def test_stray_zero_padded_copy_is_not_a_binlog_file(binary):
    """A copy named binlog.01 next to binlog.1 (tubed never writes leading
    zeros) was taken for file 1: the start refused with 'binlog.2 is missing
    (found binlog.1 and binlog.1)', --recover replayed binlog.1 twice
    ('binlog.2..0 missing'), removed the real binlog.1 and left the copy,
    and every later start failed 'cannot open binlog.1'.  Such a name is not
    a binlog file: it is passed over like any other stray file."""
    bodies = [b"stray-%d" % i for i in range(4)]
    with _started_with(binary, bodies, "-f", "0") as (d, ss, srv, ids):
        srv.sigterm()
        shutil.copy(os.path.join(d, "binlog.1"), os.path.join(d, "binlog.01"))
        for _ in range(2):
            srv = ss.start(d, "-f", "0")
            got = peek_many(srv.client(), ids)
            eq([got[j] for j in ids], bodies, "jobs with a stray binlog.01 there")
            srv.kill9()
        check(os.path.exists(os.path.join(d, "binlog.01")),
              "the stray copy binlog.01 was removed")


# ------------------------------------------------------ a failing fsync

FSYNC_EIO_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* fdatasync fails with EIO while $FSYNC_EIO_FLAG exists. */
int fdatasync(int fd)
{
    static int (*real)(int);
    const char *flag = getenv("FSYNC_EIO_FLAG");

    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (flag && access(flag, F_OK) == 0) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}
"""


class EioTubed(Tubed):
    """A tubed whose fdatasync fails while eio(True)."""

    def __init__(self, binary, *args, **kw):
        super().__init__(binary, *args, bdir=True, **kw)
        try:
            pre = shim_util.build(binary, self.tmp, FSYNC_EIO_C, "fsynceio")
        except harness.Skip:
            self.remove_dir()
            raise
        self.flag = os.path.join(self.tmp, "eio")
        self.env = dict(os.environ, LD_PRELOAD=pre, FSYNC_EIO_FLAG=self.flag)

    def eio(self, on):
        if on:
            open(self.flag, "w").close()
        elif os.path.exists(self.flag):
            os.unlink(self.flag)


def _cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def _no_reply(c, data, seconds):
    """Send data; True if the connection said nothing (or closed) within
    `seconds`, else the line it answered."""
    c.send(data)
    r, _, _ = select.select([c.sock], [], [], seconds)
    if not r:
        return True
    try:
        line = c.read_line(timeout=1)
    except Exception:
        return True
    return line


def _wait_binlog_healthy(t, c, what, within=5):
    """Polls c's stats until binlog-healthy is true; after `within` seconds
    fails with `what` and the tail of t's log."""
    deadline = time.monotonic() + within
    while harness.unq(c.stats()["binlog-healthy"]) != "true":
        check(time.monotonic() < deadline, "%s: %r" % (what, t.stderr()[-400:]))
        time.sleep(0.1)


def _put_after_kill9_restart(t, c, kept, what):
    """Puts b"after" on c (recorded in kept, {id: body}), kills t with -9,
    restarts it and checks every job in kept is still there, else fails
    with `what` and the ids lost."""
    jid = c.put(b"after")
    kept[jid] = b"after"
    t.kill9()
    t.restart()
    got = peek_many(t.bs(), list(kept))
    lost = [j for j in kept if got[j] != kept[j]]
    check(not lost, "%s: %s" % (what, lost))


def _fsync_fails_for_a_while(binary, args, conf, tube):
    with EioTubed(binary, *args, conf=conf) as t:
        c = t.bs()
        if tube != "default":
            c.use(tube)
        kept = {c.put(b"before-%d" % i): b"before-%d" % i for i in range(5)}
        t.eio(True)
        # The put's reply waits for an fsync that fails: withdrawn.
        line = _no_reply(c, b"put 0 0 60 4\r\nlost\r\n", 2.0)
        check(line is True or line == b"", "a put whose fsync failed was "
              "answered %r" % (line,))
        pid = t.srv.pid
        cpu0, log0 = _cpu_seconds(pid), t.stderr().count("\n")
        time.sleep(3)
        cpu, lines = _cpu_seconds(pid) - cpu0, t.stderr().count("\n") - log0
        check(cpu < 1.0 and lines < 60,
              "while fdatasync keeps failing (3 s, %s): tubed used %.2f s of "
              "CPU and logged %d lines (a sync a commit, each waking the loop "
              "for the next): %r" % (" ".join(args), cpu, lines,
                                     t.stderr()[-300:]))
        t.eio(False)
        c2 = t.bs()
        _wait_binlog_healthy(t, c2, "no recovery 5 s after the disk synced again")
        if tube != "default":
            c2.use(tube)
        _put_after_kill9_restart(t, c2, kept, "acknowledged jobs lost after "
                                 "the fsync failure and kill -9")


@no_server
@tubed_only(EXT)
def test_failing_fsync_strict_does_not_spin(binary):
    """-f 0: fdatasync answers EIO for 3 s.  tubed tries to recover once a
    second, not once an iteration: it used a whole core and logged ~35,000
    'fsync binlog.N: Input/output error' lines a second (each commit started
    a sync of the failed file, whose failure woke the loop for the next).
    Once the disk syncs again it is healthy and nothing acknowledged is
    lost over a kill -9."""
    _fsync_fails_for_a_while(binary, ["-f", "0"], None, "default")


@no_server
@tubed_only(EXT)
def test_failing_fsync_sync_journal_does_not_spin(binary):
    """The same with the default -f and a sync_journal tube: its record's
    pending sync was started again at every commit while unhealthy."""
    _fsync_fails_for_a_while(binary, [], "[tube sj]\nsync_journal = true\n", "sj")


@no_server
@tubed_only(EXT)
def test_unhealthy_binlog_recovers_while_idle(binary):
    """doc/binlog.md: 'Once a second, tubed tries to recover'.  A failed
    fsync with nothing else going on: the recovery must come by itself (it
    waited for the next client command, so /healthz and stats showed
    unhealthy on an idle server long after the disk was fine)."""
    with EioTubed(binary, "-f", "20") as t:
        c = t.bs()
        t.eio(True)
        c.put(b"x")
        deadline = time.monotonic() + 5
        while "unhealthy" not in t.stderr():
            check(time.monotonic() < deadline, "the failed fsync was not "
                  "noticed: %r" % t.stderr()[-300:])
            time.sleep(0.05)
        time.sleep(0.3)
        t.eio(False)
        # No command now: only the server's own timer may bring it back.
        deadline = time.monotonic() + 4
        while "healthy again" not in t.stderr():
            check(time.monotonic() < deadline, "an idle server did not recover "
                  "within 4 s of the disk syncing again: %r" % t.stderr()[-300:])
            time.sleep(0.1)
        eq(harness.unq(c.stats()["binlog-healthy"]), "true", "binlog-healthy")


# ----------------------------------------- a restart on a nearly full disk

@no_server
@tubed_only(EXT)
def test_restart_after_a_crash_on_a_nearly_full_disk(binary):
    """-s 256K, ten jobs, then another program fills the disk to 16 KiB
    free and tubed is killed (-9).  Its file keeps its preallocated 256 KiB,
    almost all zeros, and is never written again; the restart needs room
    for a new file.  It refused to start ('cannot create binlog.2: No space
    left on device'), so the workers could not drain the queue either; the
    crashed files' zero tails now go back to the disk first, the server
    starts with its jobs, and deletes and puts work."""
    with TempDir() as d, Tmpfs(d, "2m") as mnt, Servers(binary) as ss:
        bdir = os.path.join(mnt.path, "bl")
        args = ["-f", "0", "-s", "262144", "-z", "2048"]
        srv = ss.start(bdir, *args)
        c = srv.client()
        bodies = [b"nearly-full-%d" % i for i in range(10)]
        ids = _put_all(c, bodies)
        filler = os.path.join(mnt.path, "filler")
        with open(filler, "wb") as f:
            f.write(b"\xa5" * max(0, mnt.free() - 16384))
        srv.kill9()
        srv = ss.start(bdir, *args)
        c = srv.client()
        got = peek_many(c, ids)
        eq([got[j] for j in ids], bodies, "jobs after the restart on a nearly full disk")
        eq(c.cmd("delete %d" % ids[0]), b"DELETED", "delete")
        c.put(b"after")
        srv.kill9()
        os.unlink(filler)


# ------------------------------------------- the binlog directory removed

@no_server
@tubed_only(EXT)
def test_removed_binlog_directory_is_a_failed_sync(binary):
    """-f 0 (INSERTED means on disk): the binlog directory is removed while
    tubed runs.  fdatasync of the open, now unlinked, file still succeeds,
    so every put was answered INSERTED (116 of 300 with -s 64K, until no
    spare file could be made) and all of them were gone at the next start,
    binlog-healthy true throughout.  A synced file that no directory holds
    is a failed sync: no put is acknowledged, the binlog is unhealthy, and
    once the directory is there again the recovery writes every job into
    it, so a kill -9 and a restart lose nothing acknowledged."""
    with Tubed(binary, "-f", "0", "-s", "65536", bdir=True) as t:
        c = t.bs()
        acked = {c.put(b"before-%d" % i): b"before-%d" % i for i in range(5)}
        shutil.rmtree(t.bdir)
        after = []
        for i in range(40):
            line = _no_reply(c, b"put 0 0 60 300\r\n%s\r\n" % (b"r" * 300), 2.0)
            if line is True or line == b"":
                c = t.bs()
                continue
            after.append(line)
        inserted = [x for x in after if x.startswith(b"INSERTED")]
        check(not inserted, "-f 0, binlog directory removed: %d puts answered "
              "INSERTED into files no restart can see (%r)"
              % (len(inserted), inserted[:3]))
        eq(harness.unq(c.stats()["binlog-healthy"]), "false",
           "binlog-healthy with the directory gone")
        os.mkdir(t.bdir)
        _wait_binlog_healthy(t, c, "no recovery into the new directory")
        _put_after_kill9_restart(t, c, acked, "jobs lost after the directory "
                                 "came back, kill -9 and a restart")


# ------------------------------- a memcache take whose record is lost (open)

KNOWN = os.environ.get("TUBED_AUDIT_KNOWN") == "1"


@no_server
@tubed_only(EXT)
def test_take_whose_delete_is_lost_keeps_the_item(binary):
    """KNOWN DEFECT, not fixed (skipped unless TUBED_AUDIT_KNOWN=1).  A
    memcache plain `get` takes the item: the job is deleted at once and the
    VALUE waits for the delete record.  When that record's fsync fails (-f
    0) the reply is withdrawn and the connection closed, as doc/binlog.md
    says, but the item is not given back: the client never got it and the
    recovery's snapshot no longer has it, so an acknowledged set is gone
    without ever being delivered (the same with a failed write under any
    -f).  A withdrawn take should leave the item in its queue, as a closed
    /open does."""
    if not KNOWN:
        raise harness.Skip("known defect: a memcache take whose delete record "
                           "is lost loses the item (TUBED_AUDIT_KNOWN=1 runs it)")
    with EioTubed(binary, "-f", "0", memcache=True) as t:
        m = t.mc()
        for i in range(3):
            m.store("q", b"item-%d" % i)
        t.eio(True)
        m.send(b"get q\r\n")
        r, _, _ = select.select([m.sock], [], [], 2.0)
        line = b""
        if r:
            try:
                line = m.read_line(timeout=1)
            except Exception:
                line = b""
        check(line == b"", "a take whose fsync failed was answered %r" % line)
        t.eio(False)
        c = t.bs()
        _wait_binlog_healthy(t, c, "no recovery")
        m2 = t.mc()
        got = []
        for _ in range(4):
            v = m2.get("q")
            if v is not None:
                got.append(v)
        eq(sorted(got), [b"item-0", b"item-1", b"item-2"],
           "items left after a take whose reply was withdrawn")
