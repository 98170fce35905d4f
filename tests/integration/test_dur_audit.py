"""Durability audit: what still broke in the binlog's promises (doc/binlog.md)
under damage, failing fsyncs and a failing disk.

Each test works on its own temporary directory, stops its servers by pid
and removes what it made.  Tests that need an LD_PRELOAD shim skip when
there is no C compiler (shim_util.build).
"""

import os
import re
import struct

from harness import check, no_server, tubed_only
from binlog_util import (REC_HDR, Servers, TempDir, mentions_offset,
                         parse_dir, peek_many, run_refusing)

EXT = "the binlog's damage handling and health are tubed's"


# ------------------------------------------------- a damaged length field

def _put_all(c, bodies):
    ids = []
    for b in bodies:
        ids.append(c.put(b))
    return ids


def _bad_length(binary, delta):
    """20 puts acknowledged under -f 0, kill -9, then the length field of
    the 6th record of the newest file is damaged (+delta).  Records follow
    it: that is damage in the middle, not a torn tail, so the start must
    refuse (naming the file and offset) and --recover must keep the other
    19 jobs.  (It took the record for a torn tail and cut the file there:
    14 acknowledged jobs gone, with a warning about 'a crash mid-write'.)"""
    with TempDir() as d, Servers(binary) as ss:
        srv = ss.start(d, "-f", "0")
        c = srv.client()
        bodies = [b"len-damage-%03d" % i for i in range(20)]
        ids = _put_all(c, bodies)
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
