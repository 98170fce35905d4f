/*
 * gen_seeds.c — writes the seed corpora: corpus/fuzz_parse (every command
 * line), corpus/fuzz_conn (command sessions in fuzz_conn's step format,
 * split at pseudo-random positions), corpus/fuzz_binlog (binlog files made
 * with bl_encode(), valid and damaged), corpus/fuzz_bsimport (beanstalkd's
 * binlog files, versions 7 and 5, valid and damaged). Deterministic: the same files on
 * every run. Usage: gen_seeds DIR (DIR holds corpus/).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "blcodec.h"
#include "crc32c.h"

static const char *root;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? (uint32_t)(rng % n) : 0;
}

static void put_file(const char *h, const char *name, const void *p, size_t n)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof path, "%s/corpus/%s", root, h);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/corpus/%s/%s", root, h, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "gen_seeds: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* ---- fuzz_parse ------------------------------------------------------- */

static const char *const lines[] = {
    "put 0 0 60 5", "put 4294967295 4294967295 4294967295 4294967295", "put 1 2 3 4 x",
    "put  1  2  3  4", "peek 1", "peek 18446744073709551615", "peek-ready", "peek-delayed",
    "peek-buried", "reserve", "reserve-with-timeout 0", "reserve-with-timeout 5",
    "reserve-job 1", "delete 1", "release 1 0 0", "release 1 100 5", "bury 1 0",
    "kick 10", "kick-job 3", "touch 1", "stats-job 1", "stats-tube default", "stats",
    "use default", "use foo", "watch foo", "ignore default", "list-tubes-watched",
    "list-tube-used", "list-tubes", "quit", "pause-tube default 10", "pause-tube -x 1",
    "pause-tubex 5", "statsx", "use -foo", "use a+b/c;d.e$f_g(h)",
    "use aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "delete -1", "delete 01", "kick 4294967296", "bogus", "", "use ", "watch  x",
};

static void gen_parse(void)
{
    char name[32];

    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        snprintf(name, sizeof name, "line-%02zu", i);
        put_file("fuzz_parse", name, lines[i], strlen(lines[i]));
    }
    put_file("fuzz_parse", "nul", "use a\0b", 7);
}

/* ---- fuzz_conn -------------------------------------------------------- */

typedef struct {
    unsigned char b[8192];
    size_t n;
} Seed;

static void sb(Seed *s, const void *p, size_t n)
{
    if (s->n + n > sizeof s->b) {
        fprintf(stderr, "gen_seeds: seed too long\n");
        exit(1);
    }
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

static void seed_start(Seed *s, unsigned flags)
{
    unsigned char h[3] = {(unsigned char)flags, 0, 0};

    s->n = 0;
    sb(s, h, 3);
}

/* Text for connection c, in chunks of 1..maxchunk bytes. */
static void say(Seed *s, int c, const char *text, size_t n, unsigned maxchunk)
{
    while (n) {
        size_t k = 1 + rnd(maxchunk);
        unsigned char h[2];
        if (k > n)
            k = n;
        if (k > 255)
            k = 255;
        h[0] = (unsigned char)((rnd(48) << 2) | (unsigned)c);
        h[1] = (unsigned char)k;
        sb(s, h, 2);
        sb(s, text, k);
        text += k;
        n -= k;
    }
}

static void says(Seed *s, int c, const char *text, unsigned maxchunk)
{
    say(s, c, text, strlen(text), maxchunk);
}

static void op(Seed *s, int c, unsigned code, int arg)
{
    unsigned char h = (unsigned char)((code << 2) | (unsigned)c);

    sb(s, &h, 1);
    if (arg >= 0) {
        unsigned char a = (unsigned char)arg;
        sb(s, &a, 1);
    }
}

static void seed_put(Seed *s, const char *name)
{
    put_file("fuzz_conn", name, s->b, s->n);
}

static const char *const sessions[] = {
    /* producer basics */
    "put 0 0 60 5\r\nhello\r\nput 100 0 1 0\r\n\r\npeek 1\r\npeek-ready\r\nstats-job 1\r\n"
    "delete 1\r\ndelete 1\r\nstats\r\n",
    /* worker cycle */
    "put 5 0 2 3\r\nabc\r\nreserve\r\ntouch 1\r\nrelease 1 7 0\r\nreserve-with-timeout 0\r\n"
    "bury 1 9\r\npeek-buried\r\nkick 5\r\nreserve-job 1\r\ndelete 1\r\n",
    /* delays and kicks */
    "put 1 3 10 1\r\nx\r\npeek-delayed\r\nkick-job 1\r\nput 1 100 10 1\r\ny\r\nkick 10\r\n"
    "stats-tube default\r\n",
    /* tubes */
    "use foo\r\nput 0 0 10 2\r\nhi\r\nwatch foo\r\nwatch bar\r\nignore default\r\n"
    "list-tubes\r\nlist-tubes-watched\r\nlist-tube-used\r\nstats-tube foo\r\n"
    "pause-tube foo 1\r\nreserve-with-timeout 2\r\nignore foo\r\nignore bar\r\n",
    /* errors */
    "put 0 0 10 3\r\nabcd\r\nput 0 0 10 70000\r\nbogus\r\nput x\r\nuse -a\r\n"
    "reserve-with-timeout 99999999999\r\nput 1 2 3 4 5\r\nstatsx\r\npause-tube nope 1\r\n",
    /* overlong line, then a command */
    "use aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nlist-tube-used\r\n",
    /* a huge declared put, then quit */
    "put 0 0 1 4294967295\r\nsome bytes of a body that will never be complete\r\nquit\r\n",
    "stats\r\nstats\r\nstats\r\nlist-tubes\r\nquit\r\nstats\r\n",
};

static void gen_conn(void)
{
    static const unsigned flag_sets[] = {0x00, 0x04, 0x10, 0x44, 0x20, 0x80, 0x14};
    char name[64];
    Seed s;
    int k = 0;

    for (size_t i = 0; i < sizeof sessions / sizeof sessions[0]; i++) {
        for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
            seed_start(&s, flag_sets[f]);
            says(&s, 0, sessions[i], f == 0 ? 255 : 1 + (unsigned)f * 7);
            op(&s, 0, 50, 20); /* 2 s */
            says(&s, 0, "stats\r\n", 3);
            snprintf(name, sizeof name, "session-%02zu-flags-%02x", i, flag_sets[f]);
            seed_put(&s, name);
            k++;
        }
    }

    /* Two connections: a waiting worker served by a producer. */
    seed_start(&s, 0x01);
    says(&s, 0, "watch jobs\r\nreserve\r\n", 4);
    says(&s, 1, "use jobs\r\nput 0 0 5 4\r\nwork\r\n", 5);
    says(&s, 0, "delete 1\r\nreserve-with-timeout 1\r\n", 9);
    op(&s, 0, 51, 20); /* 2 s */
    says(&s, 1, "stats\r\n", 255);
    seed_put(&s, "two-wait-served");

    /* TTR running out while the worker waits: DEADLINE_SOON. */
    seed_start(&s, 0x01);
    says(&s, 1, "put 0 0 2 1\r\nz\r\n", 255);
    says(&s, 0, "reserve\r\nreserve\r\n", 255);
    op(&s, 0, 50, 15);
    op(&s, 0, 50, 30);
    says(&s, 0, "reserve-with-timeout 0\r\n", 255);
    seed_put(&s, "ttr-deadline-soon");

    /* A worker that disconnects holding a job; one that half-closes
     * while waiting; one that stops reading. */
    seed_start(&s, 0x02);
    says(&s, 0, "put 0 0 100 3\r\nabc\r\nreserve\r\n", 255);
    op(&s, 0, 53, -1);
    says(&s, 1, "reserve\r\n", 255);
    op(&s, 1, 52, -1);
    op(&s, 2, 54, -1);
    for (int i = 0; i < 40; i++)
        says(&s, 2, "list-tubes\r\nstats\r\n", 255);
    op(&s, 2, 54, -1);
    op(&s, 2, 60, -1);
    seed_put(&s, "disconnects");

    /* Drain mode toggled; pause and unpause. */
    seed_start(&s, 0x01);
    op(&s, 0, 55, -1);
    says(&s, 0, "put 0 0 1 1\r\na\r\n", 255);
    op(&s, 0, 55, -1);
    says(&s, 0, "put 0 0 1 1\r\na\r\npause-tube default 2\r\n", 255);
    says(&s, 1, "reserve-with-timeout 5\r\n", 255);
    op(&s, 0, 51, 25);
    says(&s, 1, "delete 2\r\n", 255);
    seed_put(&s, "drain-pause");

    /* With allocation failures at a few points. */
    for (int i = 1; i < 40; i += 3) {
        seed_start(&s, 0x08 | (i % 2 ? 0x04 : 0));
        s.b[2] = (unsigned char)i;
        says(&s, 0, sessions[i % 4], 255);
        says(&s, 0, sessions[3], 255);
        snprintf(name, sizeof name, "allocfail-%02d", i);
        seed_put(&s, name);
    }
    /* Wide watchers (more than 16 tubes): hash index, server-wide wait. */
    seed_start(&s, 0x01);
    {
        char cmd[64];
        for (int i = 0; i < 20; i++) {
            snprintf(cmd, sizeof cmd, "watch w%d\r\n", i);
            says(&s, 0, cmd, 255);
        }
        says(&s, 0, "ignore w3\r\nignore default\r\nlist-tubes-watched\r\nreserve\r\n", 255);
        says(&s, 1, "use w7\r\nput 0 0 5 1\r\nx\r\nuse w3\r\nput 0 0 5 1\r\ny\r\n", 255);
        says(&s, 0, "delete 1\r\nreserve-with-timeout 1\r\n", 255);
        says(&s, 1, "pause-tube w7 1\r\nuse w7\r\nput 0 0 5 1\r\nz\r\n", 255);
        op(&s, 0, 51, 20);
        says(&s, 0, "watch w3\r\nreserve-with-timeout 0\r\n", 255);
        for (int i = 0; i < 20; i += 2) {
            snprintf(cmd, sizeof cmd, "ignore w%d\r\n", i);
            says(&s, 0, cmd, 255);
        }
        says(&s, 0, "list-tubes-watched\r\nreserve-with-timeout 1\r\n", 255);
    }
    seed_put(&s, "wide-watchers");

    /* Binlog with small files: rollover and compaction. */
    seed_start(&s, 0x14);
    for (int i = 0; i < 60; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "put %d 0 10 90\r\n%090d\r\n%s", i, i,
                 i % 3 == 2 ? "delete 1\r\n" : "");
        says(&s, 0, cmd, 255);
        if (i % 10 == 9) {
            snprintf(cmd, sizeof cmd, "delete %d\r\ndelete %d\r\n", i - 5, i - 4);
            says(&s, 0, cmd, 255);
        }
    }
    op(&s, 0, 60, -1);
    seed_put(&s, "binlog-rollover");
}

/* ---- fuzz_binlog ------------------------------------------------------ */

typedef struct {
    char b[16384];
    size_t n;
} File;

static void fb(File *f, const void *p, size_t n)
{
    memcpy(f->b + f->n, p, n);
    f->n += n;
}

static void rec(File *f, const BlRecord *r)
{
    size_t n = bl_record_size(r);

    bl_encode(r, f->b + f->n);
    f->n += n;
}

static void header(File *f)
{
    char h[BL_HEADER_SIZE];

    bl_encode_header(h);
    fb(f, h, sizeof h);
}

static void job(File *f, uint64_t id, const char *tube, const char *body, int state,
                int64_t deadline_wall)
{
    BlRecord r = {0};

    r.type = BL_JOB;
    r.id = id;
    r.pri = (uint32_t)id * 10;
    r.delay = state == 2 ? 30 : 0;
    r.ttr = 60;
    r.state = (uint8_t)state;
    r.deadline_wall = deadline_wall;
    r.created_wall = 1700000000LL * 1000000000LL;
    r.reserves = 1;
    r.tube = tube;
    r.tube_len = (uint8_t)strlen(tube);
    r.body = body;
    r.body_size = (uint32_t)strlen(body);
    rec(f, &r);
}

static void state(File *f, uint64_t id, int st, uint32_t pri)
{
    BlRecord r = {0};

    r.type = BL_STATE;
    r.id = id;
    r.pri = pri;
    r.state = (uint8_t)st;
    r.deadline_wall = st == 2 ? 4000000000LL * 1000000000LL : 0;
    r.kicks = 2;
    rec(f, &r);
}

static void del(File *f, uint64_t id)
{
    BlRecord r = {0};

    r.type = BL_DELETE;
    r.id = id;
    rec(f, &r);
}

static void child(File *f, const char *name, int on)
{
    BlRecord r = {0};

    r.type = BL_CHILD;
    r.flags = on ? BL_CHILD_ON : 0;
    r.tube = name;
    r.tube_len = (uint8_t)strlen(name);
    rec(f, &r);
}

/* flush-tube of `tube` up to `upto`, keeping the ids given (little-endian,
 * as the codec stores them). */
static void flush(File *f, const char *tube, uint64_t upto, const uint64_t *keep,
                  uint32_t nkeep)
{
    BlRecord r = {0};
    char ids[8 * 8];

    for (uint32_t i = 0; i < nkeep; i++)
        for (int b = 0; b < 8; b++)
            ids[i * 8 + b] = (char)(keep[i] >> (8 * b));
    r.type = BL_FLUSH;
    r.id = upto;
    r.tube = tube;
    r.tube_len = (uint8_t)strlen(tube);
    r.nkeep = nkeep;
    r.keep = ids;
    rec(f, &r);
}

/* A replication position record (doc/replication.md). */
static void position(File *f, uint64_t epoch, uint64_t pos, uint64_t start, uint8_t flags)
{
    BlRecord r = {0};

    r.type = BL_POS;
    r.id = epoch;
    r.pos = pos;
    r.epoch_start = start;
    r.flags = flags;
    rec(f, &r);
}

static void bl_put(const char *name, unsigned flags, const File *f)
{
    char buf[sizeof f->b + 1];

    buf[0] = (char)flags;
    memcpy(buf + 1, f->b, f->n);
    put_file("fuzz_binlog", name, buf, f->n + 1);
}

static void typical(File *f)
{
    f->n = 0;
    header(f);
    job(f, 1, "default", "hello", 0, 0);
    job(f, 2, "emails", "send it", 0, 0);
    job(f, 3, "emails", "later", 2, 4000000000LL * 1000000000LL);
    job(f, 4, "default", "", 3, 0);
    state(f, 1, 3, 7);
    state(f, 2, 2, 0);
    del(f, 4);
    job(f, 5, "x", "body\r\nwith crlf", 0, 0);
    state(f, 5, 0, 1);
    job(f, 5, "y", "again", 0, 0);
}

static void gen_binlog(void)
{
    File f, g;
    BlRecord r = {0};

    f.n = 0;
    bl_put("empty", 0, &f);
    header(&f);
    bl_put("header-only", 0, &f);
    typical(&f);
    bl_put("typical", 0, &f);
    bl_put("typical-recover", 1, &f);
    bl_put("typical-small", 0x10, &f);
    /* zero-filled tail, as a preallocated file */
    memset(f.b + f.n, 0, 512);
    f.n += 512;
    bl_put("typical-zero-tail", 0, &f);
    /* torn last record */
    typical(&f);
    f.n -= 3;
    bl_put("torn", 0, &f);
    /* damage in the middle, then valid records */
    typical(&f);
    f.b[40] ^= 0x55;
    bl_put("damaged-middle", 0, &f);
    bl_put("damaged-middle-recover", 1, &f);
    bl_put("damaged-middle-repaired", 3, &f);
    /* bad header */
    typical(&f);
    f.b[3] = 'X';
    bl_put("bad-header", 0, &f);
    bl_put("bad-header-recover", 1, &f);
    /* several files */
    typical(&f);
    fb(&f, "--FILE--", 8);
    header(&f);
    state(&f, 1, 0, 3);
    del(&f, 2);
    job(&f, 9, "late", "nine", 0, 0);
    fb(&f, "--FILE--", 8);
    header(&f);
    del(&f, 9);
    bl_put("three-files", 4, &f);
    bl_put("three-files-gap", 4 | 8, &f);
    bl_put("three-files-gap-recover", 1 | 4 | 8, &f);
    /* all zero newest file after a good one */
    typical(&f);
    fb(&f, "--FILE--", 8);
    memset(f.b + f.n, 0, 64);
    f.n += 64;
    bl_put("zero-newest", 4, &f);
    /* a long tube name and a big body */
    g.n = 0;
    header(&g);
    {
        char tube[201], body[3000];
        memset(tube, 'a', 200);
        tube[200] = 0;
        memset(body, 'b', sizeof body - 1);
        body[sizeof body - 1] = 0;
        job(&g, 77, tube, body, 0, 0);
    }
    bl_put("long-tube", 0, &g);
    /* state and delete of unknown jobs, ids out of order */
    g.n = 0;
    header(&g);
    state(&g, 1000, 3, 1);
    del(&g, 999);
    job(&g, 18446744073709551615ull, "max", "m", 0, 0);
    job(&g, 3, "default", "three", 1, 0);
    bl_put("odd-ids", 0, &g);
    /* A record whose checksum is right but type is unknown. */
    g.n = 0;
    header(&g);
    r.type = BL_DELETE;
    r.id = 5;
    rec(&g, &r);
    g.b[g.n - 9] = 'Q';
    bl_put("unknown-type-repaired", 2, &g);
    /* Read-behind (flag bits 5-7): tubes with a budget come back with their
     * bodies on disk only; the harness reads them back and damages one. */
    typical(&f);
    bl_put("readbehind-typical", 0x20, &f);
    bl_put("readbehind-typical-all", 0x40, &f);
    bl_put("readbehind-typical-damage", 0x20 | 0x80, &f);
    bl_put("readbehind-typical-all-damage", 0x40 | 0x80, &f);
    bl_put("readbehind-typical-small", 0x10 | 0x40, &f);
    g.n = 0;
    header(&g);
    {
        /* A backlog in tubes with and without a budget (b*: 1 KiB, d*: none,
         * others 64 bytes), bodies of every size, a JOBX record, states,
         * deletes and a job written again (compaction's move). */
        static const char *const tubes[] = {"backlog", "default", "spill", "big+x"};
        char body[700];
        for (uint64_t id = 1; id <= 24; id++) {
            size_t len = (size_t)(id * 29 % sizeof body);
            for (size_t k = 0; k < len; k++)
                body[k] = (char)(id * 7 + k);
            body[len] = 0;
            for (size_t k = 0; k < len; k++)
                if (!body[k])
                    body[k] = '\r';
            job(&g, id, tubes[id % 4], body, id % 5 == 0 ? 3 : 0, 0);
        }
        r = (BlRecord){0};
        r.type = BL_JOBX;
        r.id = 25;
        r.pri = 5;
        r.ttr = 10;
        r.created_wall = 1700000000LL * 1000000000LL;
        r.entered_wall = 1700000001LL * 1000000000LL;
        r.exptime_wall = 4000000000LL * 1000000000LL;
        r.tube = "spill";
        r.tube_len = 5;
        r.body = "with times";
        r.body_size = 10;
        rec(&g, &r);
        state(&g, 3, 2, 9);
        del(&g, 7);
        del(&g, 8);
        job(&g, 6, "spill", "moved", 0, 0);
    }
    bl_put("readbehind-backlog", 0x20, &g);
    bl_put("readbehind-backlog-all-damage", 0x40 | 0x80, &g);
    bl_put("readbehind-backlog-damage-recover", 0x20 | 0x80 | 1, &g);
    /* The backlog over several files, the first damaged (--recover
     * rewrites every job, reading every body back). */
    f = g;
    fb(&f, "--FILE--", 8);
    header(&f);
    job(&f, 30, "spill", "in the second file", 0, 0);
    del(&f, 1);
    bl_put("readbehind-two-files", 0x20 | 4, &f);
    /* Fanout children (C records): registered, let go, registered again,
     * one only let go, over two files; and after damage (--recover). */
    typical(&f);
    child(&f, "emails+a", 1);
    child(&f, "emails+b", 1);
    child(&f, "nobody+c", 1);
    child(&f, "emails+a", 0);
    fb(&f, "--FILE--", 8);
    header(&f);
    child(&f, "emails+a", 1);
    child(&f, "emails+b", 1);
    child(&f, "never+d", 0);
    job(&f, 40, "emails+b", "copy", 0, 0);
    bl_put("children", 0, &f);
    bl_put("children-two-files", 4, &f);
    bl_put("children-two-files-gap-recover", 1 | 4 | 8, &f);
    f.b[30] ^= 0x5a;
    bl_put("children-damaged-recover", 1 | 4, &f);
    bl_put("children-readbehind", 0x40 | 4, &f);
    f.b[200] ^= 0x11;
    bl_put("readbehind-two-files-damaged-recover", 0x20 | 4 | 1, &f);
    /* flush-tube (F records): jobs of the tube up to an id go, the kept
     * (reserved) ones stay, later ones and other tubes are untouched; the
     * tube's last job going with it; over two files, after damage, and
     * with read-behind (flushed jobs on disk only). */
    typical(&f);
    {
        static const uint64_t keep1[] = {7}, keep2[] = {3, 99, 12};
        job(&f, 6, "emails", "six", 0, 0);
        job(&f, 7, "emails", "seven, kept", 0, 0);
        job(&f, 8, "emails", "eight", 3, 0);
        flush(&f, "emails", 8, keep1, 1);
        job(&f, 9, "emails", "after the flush", 0, 0);
        flush(&f, "y", 5, NULL, 0);
        flush(&f, "nosuchtube", 100, NULL, 0);
        bl_put("flush", 0, &f);
        bl_put("flush-readbehind", 0x20, &f);
        bl_put("flush-readbehind-all-damage", 0x40 | 0x80, &f);
        bl_put("flush-small", 0x10, &f);
        fb(&f, "--FILE--", 8);
        header(&f);
        job(&f, 12, "emails", "twelve", 2, 4000000000LL * 1000000000LL);
        job(&f, 13, "emails", "thirteen", 0, 0);
        flush(&f, "emails", 12, keep2, 3);
        state(&f, 7, 3, 1);
        bl_put("flush-two-files", 4, &f);
        bl_put("flush-two-files-gap-recover", 1 | 4 | 8, &f);
        f.b[60] ^= 0x21;
        bl_put("flush-damaged-recover", 1 | 4, &f);
    }
    /* Replication positions (P records): a primary's, then a replica's
     * (follower: its own records after it do not count), an unheard
     * epoch; over two files and after damage. */
    typical(&f);
    position(&f, 1, 10, 0, 0);
    job(&f, 20, "default", "after the position", 0, 0);
    position(&f, 2, 12, 11, BL_POS_FOLLOWER);
    del(&f, 20);
    position(&f, 3, 13, 13, BL_POS_FOLLOWER | BL_POS_UNHEARD);
    bl_put("position", 0, &f);
    bl_put("position-readbehind", 0x20, &f);
    fb(&f, "--FILE--", 8);
    header(&f);
    position(&f, 3, 14, 13, 0);
    job(&f, 21, "emails", "in the second file", 0, 0);
    bl_put("position-two-files", 4, &f);
    f.b[45] ^= 0x08;
    bl_put("position-damaged-recover", 1 | 4, &f);
}

/* ---- fuzz_bsimport ---------------------------------------------------- */

/* beanstalkd's binlog, as beanstalkd 1.12 (version 7) and 1.4 (version 5)
 * write it on x86-64: name length, name, the 80-byte Jobrec (77 bytes in
 * version 5, times in microseconds), body with its "\r\n". */
static void bs_rec(File *f, int v5, const char *tube, uint64_t id, uint8_t state,
                   const char *body, uint32_t ct)
{
    unsigned char rec[80] = {0};
    uint32_t pri = (uint32_t)id * 3;
    int64_t k = v5 ? 1000 : 1;
    int64_t ttr = 60000000000LL / k, created = 1700000000000000000LL / k;
    int64_t delay = state == 4 ? 3600000000000LL / k : 0;
    int64_t deadline = state == 4 ? 4000000000000000000LL / k : 0;
    int32_t size = (int32_t)strlen(body) + 2;
    size_t nl = tube ? strlen(tube) : 0;

    memcpy(rec, &id, 8);
    memcpy(rec + 8, &pri, 4);
    memcpy(rec + 16, &delay, 8);
    memcpy(rec + 24, &ttr, 8);
    memcpy(rec + 32, &size, 4);
    memcpy(rec + 40, &created, 8);
    memcpy(rec + 48, &deadline, 8);
    for (int i = 0; i < 5; i++)
        memcpy(rec + 56 + 4 * i, &ct, 4);
    rec[76] = state;
    if (v5) {
        uint64_t n8 = nl;
        fb(f, &n8, 8);
    } else {
        uint32_t n4 = (uint32_t)nl;
        fb(f, &n4, 4);
    }
    fb(f, tube ? tube : "", nl);
    fb(f, rec, v5 ? 77 : 80);
    if (tube) {
        fb(f, body, strlen(body));
        fb(f, "\r\n", 2);
    }
}

static void bs_version(File *f, int v)
{
    uint32_t w = (uint32_t)v;

    fb(f, &w, 4);
}

static void bs_typical(File *f, int v5)
{
    f->n = 0;
    bs_version(f, v5 ? 5 : 7);
    bs_rec(f, v5, "default", 1, 1, "hello", 0);
    bs_rec(f, v5, "emails", 2, 1, "send it", 0);
    bs_rec(f, v5, "emails", 3, 4, "later", 0);
    bs_rec(f, v5, "a/b+c;d$e_(f).g-1", 4, 1, "", 0);
    bs_rec(f, v5, NULL, 4, 3, "", 1);       /* buried */
    bs_rec(f, v5, NULL, 2, 2, "send it", 2); /* reserved */
    bs_rec(f, v5, NULL, 1, 0, "hello", 0);  /* deleted */
    bs_rec(f, v5, NULL, 77, 3, "gone", 0);  /* compacted away */
}

static void bsi_put(const char *name, unsigned flags, const File *f)
{
    char buf[sizeof f->b + 1];

    buf[0] = (char)flags;
    memcpy(buf + 1, f->b, f->n);
    put_file("fuzz_bsimport", name, buf, f->n + 1);
}

static void gen_bsimport(void)
{
    File f;
    size_t n;

    f.n = 0;
    bsi_put("empty", 0, &f);
    bs_typical(&f, 0);
    bsi_put("typical", 0, &f);
    n = f.n;
    memset(f.b + f.n, 0, 300);
    f.n += 300;
    bsi_put("typical-zero-tail", 0, &f);
    f.n = n - 30;
    bsi_put("typical-cut", 0, &f);
    bs_typical(&f, 1);
    bsi_put("typical-v5", 0, &f);
    /* the records without the version word: flags bit 2 adds it */
    bs_typical(&f, 0);
    memmove(f.b, f.b + 4, f.n - 4);
    f.n -= 4;
    bsi_put("typical-noversion", 4, &f);
    /* several files: moved by compaction, then changed, then deleted */
    bs_typical(&f, 0);
    fb(&f, "--FILE--", 8);
    bs_version(&f, 7);
    bs_rec(&f, 0, "emails", 3, 4, "later", 1);
    bs_rec(&f, 0, NULL, 2, 0, "send it", 0);
    fb(&f, "--FILE--", 8);
    bs_version(&f, 7);
    bs_rec(&f, 0, NULL, 3, 1, "later", 2);
    bs_rec(&f, 0, "late", 9, 1, "nine", 0);
    bsi_put("three-files", 1, &f);
    bsi_put("three-files-gap", 1 | 2, &f);
    /* damage: a bad name length, an unknown state, a short record's size */
    bs_typical(&f, 0);
    f.b[4] = 0xff;
    bsi_put("bad-namelen", 0, &f);
    bs_typical(&f, 0);
    bs_rec(&f, 0, NULL, 2, 5, "send it", 0);
    bs_rec(&f, 0, "x", 10, 1, "after", 0);
    bsi_put("bad-state", 0, &f);
    bs_typical(&f, 0);
    bs_rec(&f, 0, NULL, 3, 3, "later and longer", 0);
    bsi_put("bad-size", 0, &f);
    /* A backlog: more jobs (90) and tubes (24) than the reader's first
     * tables hold (64 jobs, 16 tubes), some deleted and made anew, some
     * buried or delayed, compacted into a second file, v5 too. */
    for (int v5 = 0; v5 < 2; v5++) {
        f.n = 0;
        bs_version(&f, v5 ? 5 : 7);
        for (uint64_t id = 1; id <= 90; id++) {
            char tube[16], body[24];
            snprintf(tube, sizeof tube, "t%u", (unsigned)(id % 24));
            snprintf(body, sizeof body, "job %u", (unsigned)id);
            bs_rec(&f, v5, tube, id, id % 7 == 0 ? 4 : 1, body, 0);
            /* (a short record carries its job's body size) */
            snprintf(body, sizeof body, "job %u", (unsigned)(id - 2));
            if (id % 5 == 0)
                bs_rec(&f, v5, NULL, id - 2, 0, body, 0);
            snprintf(body, sizeof body, "job %u", (unsigned)(id - 1));
            if (id % 11 == 0)
                bs_rec(&f, v5, NULL, id - 1, 3, body, 1);
        }
        fb(&f, "--FILE--", 8);
        bs_version(&f, v5 ? 5 : 7);
        bs_rec(&f, v5, "t1", 3, 1, "job 3", 2);   /* deleted above: made anew */
        bs_rec(&f, v5, "t7", 40, 1, "job 40", 2); /* moved by compaction */
        bs_rec(&f, v5, NULL, 41, 0, "job 41", 0);
        bsi_put(v5 ? "backlog-v5" : "backlog", 1, &f);
    }
    /* tubed's own file, and text */
    f.n = 0;
    fb(&f, "TUBEDLOG\x02\0\0\0\0\0\0\0", 16);
    bsi_put("tubed", 0, &f);
    f.n = 0;
    fb(&f, "not a binlog\n", 13);
    bsi_put("text", 0, &f);
}

int main(int argc, char **argv)
{
    char path[1024];

    root = argc > 1 ? argv[1] : ".";
    snprintf(path, sizeof path, "%s/corpus", root);
    mkdir(path, 0755);
    gen_parse();
    gen_conn();
    gen_binlog();
    gen_bsimport();
    return 0;
}
