/*
 * fuzz_config.c — conf_parse() (src/config/conf.h) on arbitrary bytes, then
 * conf_validate() and conf_policy() on what it accepted.
 *
 * Checks: a refused file leaves no ConfFile and one error line,
 * "f.conf:LINE: what" in printable ASCII with LINE inside the input; the
 * same bytes give the same answer twice; sections are legal names, sorted
 * and unique; conf_policy() for the sections' names, names just longer or
 * shorter, and a few fixed ones equals a brute-force model of the
 * precedence rule (exact, longest prefix setting the key, top, default)
 * and keeps every documented bound. The bytes are then parsed again with
 * the N-th allocation failing (N from byte 0): the result must be the
 * same answer or "f.conf: out of memory", with nothing leaked.
 *
 * [listen] sections (spec access.md): every accepted one has a legal name,
 * an address (a Unix path, or a TCP port 1..65535), a role that is a
 * non-empty union of the four, users/groups/socket_mode only on a Unix
 * socket, legal patterns; no two share a name or an address; and
 * conf_listen_tube_ok() agrees with a brute-force model of the patterns
 * for the patterns' own names, one byte shorter and longer, and fixed
 * names.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "conf.h"
#include "names.h"

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            fprintf(stderr, "\nFUZZ CHECK FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");                                \
            abort();                                              \
        }                                                         \
    } while (0)

#define PATH "f.conf"
#define MAX_NAMES 48 /* sections whose names are resolved, per input */

static void check_error(const char *err, const char *buf, size_t size)
{
    unsigned long lines = 1, line = 0;
    const char *p = err + strlen(PATH);

    for (size_t i = 0; i < size; i++)
        lines += buf[i] == '\n';
    CHECK(!strncmp(err, PATH ":", strlen(PATH) + 1), "error without the path: %s", err);
    for (const char *c = err; *c; c++)
        CHECK(*c >= 0x20 && *c < 0x7f, "unprintable byte 0x%02x in error", (unsigned char)*c);
    if (!strcmp(p, ": out of memory"))
        return;
    CHECK(sscanf(p, ":%lu: ", &line) == 1, "error without a line: %s", err);
    CHECK(line >= 1 && line <= lines, "line %lu outside 1..%lu: %s", line, lines, err);
}

static void copy_key(TubePolicy *dst, const TubePolicy *src, int k)
{
    switch (k) {
    case TK_MAX_ITEMS: dst->max_items = src->max_items; break;
    case TK_MAX_SIZE: dst->max_size = src->max_size; break;
    case TK_MAX_ITEM_SIZE: dst->max_item_size = src->max_item_size; break;
    case TK_DISCARD_OLD_WHEN_FULL: dst->discard_old_when_full = src->discard_old_when_full; break;
    case TK_MAX_AGE: dst->max_age_ms = src->max_age_ms; break;
    case TK_MOVE_EXPIRED_TO:
        memcpy(dst->move_expired_to, src->move_expired_to, sizeof dst->move_expired_to);
        break;
    case TK_MAX_TIMEOUTS: dst->max_timeouts = src->max_timeouts; break;
    case TK_FANOUT: dst->fanout = src->fanout; break;
    case TK_JOURNAL: dst->journal = src->journal; break;
    case TK_SYNC_JOURNAL: dst->sync_journal = src->sync_journal; break;
    case TK_PRIORITY: dst->priority = src->priority; break;
    case TK_TTR: dst->ttr_ms = src->ttr_ms; break;
    case TK_MAX_MEMORY_SIZE: dst->max_memory_size = src->max_memory_size; break;
    }
    dst->set |= CONF_BIT(k);
}

/* The precedence rule by linear scans over every section's own keys. */
static void model(const ConfFile *cf, const char *name, size_t len, uint32_t mjs,
                  TubePolicy *out)
{
    conf_policy(NULL, name, len, mjs, out);
    for (int k = 0; k < TK_COUNT; k++) {
        const ConfSection *from = NULL;
        for (size_t i = 0; i < cf->n_exact && !from; i++)
            if (cf->exact[i].len == len && !memcmp(cf->exact[i].name, name, len) &&
                (cf->exact[i].own.set & CONF_BIT(k)))
                from = &cf->exact[i];
        for (size_t i = 0; i < cf->n_prefix && (!from || from->is_prefix); i++) {
            const ConfSection *s = &cf->prefix[i];
            if (s->len <= len && !memcmp(s->name, name, s->len) && (s->own.set & CONF_BIT(k)) &&
                (!from || s->len > from->len))
                from = s;
        }
        if (!from && (cf->top.own.set & CONF_BIT(k)))
            from = &cf->top;
        if (from)
            copy_key(out, &from->own, k);
    }
    if (out->max_item_size > mjs)
        out->max_item_size = mjs;
}

static void check_policy(const ConfFile *cf, const char *name, size_t len, uint32_t mjs)
{
    TubePolicy got, want, again;

    conf_policy(cf, name, len, mjs, &got);
    memset(&want, 0, sizeof want);
    model(cf, name, len, mjs, &want);
    CHECK(got.set == want.set, "'%.*s': set %#x, model %#x", (int)len, name, got.set, want.set);
#define SAME(f) CHECK(got.f == want.f, "'%.*s': " #f " differs from the model", (int)len, name)
    SAME(max_items); SAME(max_size); SAME(max_item_size); SAME(discard_old_when_full);
    SAME(max_age_ms); SAME(max_timeouts); SAME(fanout); SAME(journal); SAME(sync_journal);
    SAME(priority); SAME(ttr_ms); SAME(max_memory_size);
#undef SAME
    CHECK(!strcmp(got.move_expired_to, want.move_expired_to), "move_expired_to differs");
    CHECK(got.set < CONF_BIT(TK_COUNT), "stray bits in set");
    CHECK(got.ttr_ms >= 1000 && got.ttr_ms % 1000 == 0, "ttr %llu ms",
          (unsigned long long)got.ttr_ms);
    CHECK(got.max_age_ms <= CONF_MAX_DURATION_MS, "max_age beyond the limit");
    CHECK(got.max_item_size <= mjs, "max_item_size above -z");
    CHECK(!got.move_expired_to[0] ||
          tube_name_valid(got.move_expired_to, strlen(got.move_expired_to)),
          "illegal move_expired_to");
    /* Deterministic, every byte written: memcmp-comparable. */
    memset(&again, 0xa5, sizeof again);
    conf_policy(cf, name, len, mjs, &again);
    CHECK(!memcmp(&got, &again, sizeof got), "conf_policy not byte-for-byte repeatable");
}

static void check_sections(const ConfSection *s, size_t n, int is_prefix)
{
    for (size_t i = 0; i < n; i++) {
        CHECK(s[i].is_prefix == is_prefix, "section in the wrong array");
        CHECK(tube_name_valid(s[i].name, s[i].len), "illegal section name");
        CHECK(s[i].name[s[i].len] == '\0', "section name not terminated");
        CHECK(s[i].line >= 1, "section without a line");
        if (i > 0) {
            size_t m = s[i].len < s[i - 1].len ? s[i].len : s[i - 1].len;
            int c = memcmp(s[i - 1].name, s[i].name, m);
            CHECK(c < 0 || (c == 0 && s[i - 1].len < s[i].len), "sections not sorted/unique");
        }
    }
}

static void resolve_some(const ConfFile *cf)
{
    static const char *const fixed[] = {"default", "a", "emails", "reports-daily", "x+y",
                                        "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"};
    char name[MAX_TUBE_NAME + 2];

    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        check_policy(cf, fixed[i], strlen(fixed[i]), 65535);
        check_policy(cf, fixed[i], strlen(fixed[i]), 1073741824);
    }
    for (size_t a = 0; a < 2; a++) {
        const ConfSection *s = a ? cf->prefix : cf->exact;
        size_t n = a ? cf->n_prefix : cf->n_exact;
        for (size_t i = 0; i < n && i < MAX_NAMES; i++) {
            memcpy(name, s[i].name, s[i].len);
            check_policy(cf, name, s[i].len, 65535);
            check_policy(cf, name, s[i].len - 1, 65535); /* one shorter (maybe empty) */
            name[s[i].len] = 'z';
            check_policy(cf, name, s[i].len + 1, 65535); /* one longer */
            name[s[i].len] = '+';
            check_policy(cf, name, s[i].len + 1, 100);
        }
    }
}

/* The pattern rule, written the slow way: a name matches an exact
 * pattern when equal, a PREFIX* one when it starts with PREFIX. */
static int model_tube_ok(const ConfListen *l, const char *name, size_t len)
{
    if (!(l->set & (1u << LK_TUBES)))
        return 1;
    for (size_t i = 0; i < l->ntubes; i++) {
        const TubePattern *p = &l->tubes[i];
        size_t k;
        if (!p->is_prefix && p->len != len)
            continue;
        if (p->len > len)
            continue;
        for (k = 0; k < p->len && p->name[k] == name[k]; k++)
            ;
        if (k == p->len)
            return 1;
    }
    return 0;
}

static void check_tube_ok(const ConfListen *l, const char *name, size_t len)
{
    CHECK(conf_listen_tube_ok(l, name, len) == (bool)model_tube_ok(l, name, len),
          "[listen %s]: tube '%.*s' allowed %d, model %d", l->name, (int)len, name,
          conf_listen_tube_ok(l, name, len), model_tube_ok(l, name, len));
}

static void check_listen(const ConfFile *cf)
{
    static const char *const fixed[] = {"default", "a", "app-1", "x+y", ""};
    char name[MAX_TUBE_NAME + 2], text[64 * (MAX_TUBE_NAME + 2) + 2];

    CHECK(cf->n_listen <= CONF_MAX_LISTEN, "%zu listen sections", cf->n_listen);
    for (size_t i = 0; i < cf->n_listen; i++) {
        const ConfListen *l = &cf->listen[i];
        size_t nl = strlen(l->name);

        CHECK(nl >= 1 && nl <= LISTEN_NAME_MAX, "listener name length %zu", nl);
        CHECK(l->set & (1u << LK_ADDRESS), "[listen %s] without an address", l->name);
        if (l->is_unix)
            CHECK(!strncmp(l->host, "unix:/", 6), "unix host '%s'", l->host);
        else
            CHECK(l->port >= 1 && l->port <= 65535 && !l->nusers && !l->ngroups &&
                  !(l->set & (1u << LK_SOCKET_MODE)), "[listen %s] TCP keys", l->name);
        CHECK(l->roles && !(l->roles & ~ROLE_ALL), "roles %#x", l->roles);
        CHECK(l->protocol <= LP_HTTP, "protocol %d", l->protocol);
        CHECK(l->socket_mode <= 07777, "socket_mode %o", l->socket_mode);
        CHECK(l->ntubes <= LISTEN_MAX_PATTERNS, "%zu patterns", l->ntubes);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(cf->listen[j].name, l->name), "two [listen %s]", l->name);
        for (size_t t = 0; t < l->ntubes; t++) {
            const TubePattern *p = &l->tubes[t];
            CHECK(p->is_prefix ? (p->len == 0 || tube_name_valid(p->name, p->len))
                               : tube_name_valid(p->name, p->len), "pattern %zu", t);
            memcpy(name, p->name, p->len);
            check_tube_ok(l, name, p->len);
            if (p->len)
                check_tube_ok(l, name, p->len - 1u);
            name[p->len] = 'z';
            check_tube_ok(l, name, p->len + 1u);
        }
        for (size_t f = 0; f < sizeof fixed / sizeof fixed[0]; f++)
            check_tube_ok(l, fixed[f], strlen(fixed[f]));
        conf_tubes_text(l, text, sizeof text);
        conf_role_text(l->roles, text, sizeof text);
        CHECK(text[0], "no role text");
    }
}

static void check_file(const ConfFile *cf, const char *buf, size_t size)
{
    char err[512];

    CHECK(!strcmp(cf->path, PATH), "path");
    CHECK(cf->top.line == 0 && cf->top.len == 0, "top level is not a section");
    check_sections(cf->exact, cf->n_exact, 0);
    check_sections(cf->prefix, cf->n_prefix, 1);
    CHECK(cf->server.set < CONF_BIT(SK_COUNT), "stray server bits");
    check_listen(cf);
    resolve_some(cf);
    if (conf_validate(cf, NULL, err, sizeof err) < 0)
        check_error(err, buf, size);
    if (conf_validate(cf, "/b", err, sizeof err) < 0)
        CHECK(!strncmp(err, PATH ":", strlen(PATH) + 1) && strstr(err, "journal = false"),
              "validate with a binlog: %s", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    char err[512], err2[512];
    ConfFile *cf = NULL, *cf2 = NULL;
    int r, r2;

    memcpy(buf, data, size);
    r = conf_parse(PATH, buf, size, &cf, err, sizeof err);
    CHECK(r == 0 || r == -1, "result %d", r);
    CHECK((r == 0) == (cf != NULL), "result %d with cf %p", r, (void *)cf);
    if (r < 0)
        check_error(err, buf, size);
    else
        check_file(cf, buf, size);

    /* Again, with the N-th allocation failing. */
    alloc_fail_after(1 + (size ? data[0] % 16 : 0));
    r2 = conf_parse(PATH, buf, size, &cf2, err2, sizeof err2);
    alloc_fail_after(0);
    if (r2 == 0) {
        CHECK(r == 0, "parse succeeded only with an allocation failing");
        conf_free(cf2);
    } else {
        CHECK(!cf2, "a failed parse left a ConfFile");
        CHECK(!strcmp(err2, PATH ": out of memory") || (r < 0 && !strcmp(err, err2)),
              "with an allocation failing: '%s', without: '%s'", err2, r < 0 ? err : "ok");
    }
    conf_free(cf);
    free(buf);
    return 0;
}
