/*
 * fuzz_repl.c — a replica's stream decoder (src/net/replica.c) on what a
 * primary, or anything claiming to be one, may send.
 *
 * Each input builds a real Server with a binlog in a tmpfs directory, as a
 * replica (replica_of set; nothing connects: the loop never runs), puts
 * its link where the handshake's answer comes next, and feeds it the bytes
 * through replica_feed(), in one piece or in chunks. Whatever comes, the
 * server must not crash, leak or break an invariant: its counters stay
 * consistent (fz_check_server()); a link that failed says why in
 * last-error; a link still streaming after E has a position the stream
 * stated; the jobs survive a restart (the same directory opened again
 * gives the same number of jobs), and a replica never holds a reserved
 * job.
 *
 * Input: byte 0 is flags, byte 1 a chunk size (0: all at once), the rest
 * the stream.
 *   bit 0   prepend "REPLICATING 1 0 0\r\n" (the handshake's answer)
 *   bit 1   repair the records' checksums (walking their length fields),
 *           so the fuzzer reaches the payload checks and the engine
 *   bit 2   the replica starts with jobs of its own (a few puts applied
 *           first), so the snapshot's sweep has something to delete
 *   bit 3   a partial resync: the replica is at position 5 of history
 *           0x1111 (the handshake asked from there), and bit 0 prepends
 *           "CONTINUING 1 9 0\r\n" instead; an I record naming that
 *           history lets the stream on
 * Seeds: corpus/fuzz_repl/ (written by gen_seeds.c's repl part).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binlog.h"
#include "blcodec.h"
#include "crc32c.h"
#include "engine.h"
#include "fuzz_util.h"
#include "log.h"
#include "repl.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* Fix every record's CRC after the handshake line (if any). */
static void repair(uint8_t *p, size_t n)
{
    size_t off = 0;
    uint8_t *eol = memchr(p, '\n', n < 128 ? n : 128);

    if (eol && ((n > 11 && !memcmp(p, "REPLICATING", 11)) ||
                (n > 10 && !memcmp(p, "CONTINUING", 10))))
        off = (size_t)(eol - p) + 1;
    while (off + BL_REC_HEAD <= n) {
        uint32_t len = rd32(p + off);
        if (len == 0 || len > n - off - BL_REC_HEAD)
            break;
        wr32(p + off + 4, crc32c(0, p + off + BL_REC_HEAD, len));
        off += BL_REC_HEAD + len;
    }
}

static void seed_jobs(Server *s)
{
    for (uint64_t id = 1; id <= 4; id++) {
        BlRecord r;
        memset(&r, 0, sizeof r);
        r.type = BL_JOB;
        r.id = id * 3;
        r.ttr = 60;
        r.tube = id & 1 ? "default" : "other";
        r.tube_len = (uint8_t)strlen(r.tube);
        r.body = "seed";
        r.body_size = 4;
        if (engine_apply(&s->eng, &r) < 0)
            fz_fail("seeding job %llu failed", (unsigned long long)r.id);
    }
    engine_commit(&s->eng);
}

static int open_replica(Server *s, const Config *cfg, char *err, size_t errlen)
{
    fz_save_signals();
    if (server_init(s, cfg) < 0)
        fz_fail("server_init failed");
    fz_restore_signals();
    if (engine_open_binlog(&s->eng, err, errlen) < 0)
        return -1;
    repl_start(s);
    return 0;
}

static void check_reserved(const Server *s)
{
    FZ_CHECK(s->eng.jobs_ct.reserved == 0, "a replica holds %llu reserved jobs",
             (unsigned long long)s->eng.jobs_ct.reserved);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Server srv;
    static const char answer[] = "REPLICATING 1 0 0\r\n";
    static const char cont[] = "CONTINUING 1 9 0\r\n";
    Server *s = &srv;
    const char *dir = fz_tmpdir();
    uint8_t flags, chunk, *buf;
    size_t n, off = 0, head = 0, jobs;
    Config cfg;
    char err[512];
    Repl *r;

    if (size < 2)
        return 0;
    flags = data[0];
    chunk = data[1];
    head = !(flags & 1) ? 0 : (flags & 8) ? sizeof cont - 1 : sizeof answer - 1;
    n = head + size - 2;
    buf = malloc(n ? n : 1);
    memcpy(buf, (flags & 8) ? cont : answer, head);
    memcpy(buf + head, data + 2, size - 2);
    if (flags & 2)
        repair(buf, n);

    fz_clear_dir(dir);
    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.port = 0;
    cfg.binlog_dir = dir;
    cfg.binlog_size = 0;
    cfg.fsync_never = 1;
    cfg.replica_of = "127.0.0.1:1";
    log_verbosity = 0;
    if (open_replica(s, &cfg, err, sizeof err) < 0)
        fz_fail("a fresh replica did not open: %s", err);
    if (flags & 4)
        seed_jobs(s);
    r = s->repl;
    if (flags & 8) {
        if (engine_set_position(&s->eng, 1, 5, 0, 1) < 0)
            fz_fail("cannot set the replica's position");
        engine_commit(&s->eng);
        r->sid = 0x1111;
        r->claimed = 5;
    }
    replica_expect_answer(s);
    while (off < n) {
        size_t k = chunk ? chunk : n - off;
        if (k > n - off)
            k = n - off;
        if (replica_feed(s, (const char *)buf + off, k) < 0)
            break;
        off += k;
        engine_commit(&s->eng);
    }
    engine_commit(&s->eng);
    if (r->rstate == RS_IDLE)
        FZ_CHECK(r->last_error[0], "the link failed without a last-error");
    if (r->rstate == RS_STREAM && !r->snapshot)
        FZ_CHECK(s->eng.binlog.pos == r->pending_pos || r->pending_pos == 0,
                 "position %llu after the stream said %llu",
                 (unsigned long long)s->eng.binlog.pos,
                 (unsigned long long)r->pending_pos);
    check_reserved(s);
    fz_check_server(s);
    jobs = s->eng.jobs.len;
    server_free(s);

    /* What it wrote comes back. */
    if (open_replica(s, &cfg, err, sizeof err) < 0)
        fz_fail("the replica's own binlog did not reopen: %s", err);
    FZ_CHECK(s->eng.jobs.len == jobs, "%zu jobs before the restart, %zu after", jobs,
             s->eng.jobs.len);
    check_reserved(s);
    fz_check_server(s);
    server_free(s);
    free(buf);
    return 0;
}
