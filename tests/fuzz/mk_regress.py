#!/usr/bin/env python3
"""Writes the hand-made inputs of regress/fuzz_binlog/ (one per binlog bug
found by fuzzing; the fuzzer's own minimised inputs sit beside them).
Format of an input: byte 0 = fuzz_binlog flags, the rest = file bytes
(see README.md). Run from tests/fuzz: python3 mk_regress.py
"""
import struct, sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from binlog_util import crc32c
def header():
    h = b"TUBEDLOG" + struct.pack("<I", 1)
    return h + struct.pack("<I", crc32c(h))
def rec(payload):
    return struct.pack("<II", len(payload), crc32c(payload)) + payload
def job(id, tube, body, state=0, deadline=0, pri=0):
    p = b"J" + struct.pack("<QIIIBqq", id, pri, 0, 60, state, deadline, 1700000000 * 10**9)
    p += struct.pack("<5I", 0, 0, 0, 0, 0) + bytes([len(tube)]) + tube + struct.pack("<I", len(body)) + body
    return rec(p)
def delete(id):
    return rec(b"D" + struct.pack("<Q", id))
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "regress", "fuzz_binlog")
os.makedirs(out, exist_ok=True)
def w(name, flags, data):
    open(os.path.join(out, name), "wb").write(bytes([flags]) + data)
w("uaf-replay-tube-after-delete", 0, header() + job(1, b"foo", b"a") + delete(1) + job(2, b"foo", b"b"))
w("uaf-replay-tube-after-replace", 0, header() + job(1, b"x", b"a") + job(1, b"y", b"b"))
w("tube-name-255-bytes", 0, header() + job(1, b"a" * 255, b"body"))
w("tube-name-invalid-chars", 0, header() + job(1, b"bad name\r\n", b"body"))
w("tube-name-empty", 0, header() + job(1, b"", b"body"))
w("zero-filled-newest-file-restart", 4, header() + job(1, b"default", b"keep me") + b"--FILE--" + b"\0" * 64)
w("empty-newest-file-restart", 4, header() + job(1, b"default", b"keep me") + b"--FILE--")
w("delayed-deadline-int64-min", 0, header() + job(1, b"default", b"d", state=2, deadline=-2**63))
w("delayed-deadline-int64-max", 0, header() + job(1, b"default", b"d", state=2, deadline=2**63 - 1))
