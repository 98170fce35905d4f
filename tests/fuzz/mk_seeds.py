#!/usr/bin/env python3
"""Seeds that gen_seeds.c and the hand-made ones lacked, found by llvm-cov
over the stored corpora:

- fuzz_repl: follow.c never applied a C record, a flush over delayed jobs,
  or a state change of a job with a client's expiry. Replication streams
  as a primary sends them after REPLICATING (flag bit 0 prepends it).
- fuzz_conn, fuzz_mc_conn: no connection ever stalled (OUT_HIGH of
  replies unsent, the peer not reading) past --stall-timeout. A client
  that stops reading asks for ~500 stats (a beanstalk one alone, one
  beside a worker that waits, a memcache one beside a get that waits),
  then the clock passes 30 s.

    python3 mk_seeds.py corpus

Records are encoded as src/engine/store/blcodec.c does (doc/binlog.md):
u32 payload length, u32 crc32c(payload), payload; little-endian.
"""
import struct, sys
def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xffffffff
def rec(payload):
    return struct.pack('<II', len(payload), crc32c(payload)) + payload
T0 = 1700000000 * 10**9
FAR = 4000000000 * 10**9
def J(id, tube, body, state=0, pri=100, delay=0, deadline=0, x=None):
    typ = b'K' if x else b'J'
    p = typ + struct.pack('<QIIIBqq', id, pri, delay, 60, state, deadline, T0)
    if x: p += struct.pack('<qq', *x)
    p += struct.pack('<5I', 0,0,0,0,0) + bytes([len(tube)]) + tube + struct.pack('<I', len(body)) + body
    return rec(p)
def S(id, state, pri=5, delay=0, deadline=0):
    return rec(b'S' + struct.pack('<QIIBq', id, pri, delay, state, deadline) + struct.pack('<5I', 1,0,0,1,0))
def D(id): return rec(b'D' + struct.pack('<Q', id))
def F(upto, tube, keep=()):
    return rec(b'F' + struct.pack('<Q', upto) + bytes([len(tube)]) + tube + struct.pack('<I', len(keep)) + b''.join(struct.pack('<Q', k) for k in keep))
def C(name, on): return rec(b'C' + struct.pack('<Q', 0) + bytes([1 if on else 0, len(name)]) + name)
def E(nextid, pos): return rec(b'E' + struct.pack('<QQ', nextid, pos))
def P(epoch, pos, start=0, flags=0): return rec(b'P' + struct.pack('<QQBQ', epoch, pos, flags, start))
def put(name, flags, chunk, stream):
    open(sys.argv[1] + '/fuzz_repl/' + name, 'wb').write(bytes([flags, chunk]) + stream)
# fanout children in the snapshot and live: registered, let go, a copy's job
s = J(1, b'f', b'parent') + C(b'f+a', 1) + C(b'f+b', 1) + J(2, b'f+a', b'copy') + E(3, 4) \
    + C(b'f+b', 0) + J(3, b'f+a', b'live copy') + C(b'g+c', 1) + C(b'f+a', 0) + D(2) + P(1, 9)
put('children', 1, 0, s)
put('children_sweep', 1 | 4, 23, s)
# a job with a client's expiry (K) whose state changes live; a flush over
# delayed, buried and ready jobs with a kept id
s = J(1, b'e', b'ready') + J(2, b'e', b'delayed', state=2, delay=30, deadline=FAR) \
    + J(3, b'e', b'buried', state=3) + J(4, b'e', b'expiring', x=(T0, FAR)) \
    + J(5, b'e', b'delayed2', state=2, delay=5, deadline=T0) + E(6, 5) \
    + S(4, 3) + S(4, 0) + S(2, 3) + F(5, b"e", (3,)) + P(1, 9) + J(6, b'e', b'after') + S(3, 2, delay=9, deadline=FAR) + F(9, b"e") + P(1, 12)
put('flush_delayed_expiry', 1, 0, s)
put('flush_delayed_expiry_chunks', 1 | 4, 7, s)

# fuzz_conn / fuzz_mc_conn scripts: flags, two unused bytes (the failure
# index), then steps (README.md): op < 48 writes, 48..51 the clock, 54
# reading on/off, 56.. loop iterations.
def write(conn, data):
    out = b''
    while data:
        chunk, data = data[:255], data[255:]
        out += bytes([conn, len(chunk)]) + chunk
    return out
def clock(s): return bytes([51 << 2, s])  # s seconds
READ, LOOP = 54 << 2, 56 << 2
def script(h, name, flags, steps):
    open(sys.argv[1] + '/' + h + '/' + name, 'wb').write(bytes([flags, 0, 0]) + steps)
stats = b'stats\r\n' * 520
script('fuzz_conn', 'stall', 0, bytes([READ]) + write(0, stats) + clock(20) + clock(15) +
       bytes([LOOP, READ]))
script('fuzz_conn', 'stall-beside-a-worker', 1 | 4, bytes([READ]) + write(0, stats) +
       write(1, b'put 0 0 10 3\r\nabc\r\nreserve-with-timeout 100\r\n') + clock(29) +
       bytes([LOOP | 1]) + clock(2) + bytes([LOOP + 4]) + write(1, b'stats-job 1\r\n'))
script('fuzz_mc_conn', 'stall', 1, bytes([READ]) + write(0, b'stats\r\n' * 600) +
       write(1, b'set q 0 0 3\r\nabc\r\nget q/open\r\nget e/t=40000\r\n') + clock(20) +
       bytes([LOOP | 1]) + clock(15) + bytes([LOOP + 4]) + write(1, b'get q/close\r\n'))

# fuzz_mc_conn: the fourth memcache client comes through [listen r]
# (producer, worker on q*, e, f; after a reload worker, read on q*, g,
# dead). It opens a job in e and waits on f; the reload takes both tubes
# from it (the wait ends, the job goes back); refusals under either text.
r_steps = (write(3, b'set e 0 0 1\r\na\r\nset q1 0 0 2\r\nbb\r\nget e/open\r\nget x\r\n') +
           write(3, b'get f/t=5000\r\n') + bytes([LOOP]) +
           write(0, b'reload\r\n') + bytes([LOOP]) +
           write(3, b'set q1 0 0 1\r\nc\r\nget q1/open\r\nget e\r\nstats\r\nget g/t=100\r\n') +
           write(1, b'set g 0 0 1\r\nd\r\n') + bytes([LOOP | 1]) +
           write(0, b'reload\r\n') + clock(1) +
           write(3, b'get q1/close\r\nget e/open\r\ndelete e\r\nflush_all\r\nshutdown\r\n') +
           write(2, b'set dead 0 0 1\r\nz\r\n'))
script('fuzz_mc_conn', 'listener-reload', 3, r_steps)
script('fuzz_mc_conn', 'listener-reload-binlog', 3 | 4, r_steps)
