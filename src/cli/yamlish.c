/* yamlish.c — beanstalk's YAML subset; see yamlish.h. */
#include "yamlish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "numparse.h"

/* One line of a document: [s, s+n), without its '\n'. */
typedef struct Line {
    const char *s;
    size_t n;
    unsigned no; /* 1-based, counting the "---" line */
} Line;

typedef struct Cursor {
    const char *p, *end;
    unsigned no;
} Cursor;

static int bad(char *err, size_t errlen, const Line *l, const char *why)
{
    snprintf(err, errlen, "line %u: %s: '%.*s'", l->no, why,
             (int)(l->n > 60 ? 60 : l->n), l->s);
    return -1;
}

/* Check the "---\n" header and set up the cursor after it. */
static int start(Cursor *c, const char *data, size_t len, char *err, size_t errlen)
{
    if (len < 3 || memcmp(data, "---", 3) != 0 || (len > 3 && data[3] != '\n')) {
        snprintf(err, errlen, "data does not start with '---'");
        return -1;
    }
    c->p = data + (len > 3 ? 4 : 3);
    c->end = data + len;
    c->no = 1;
    return 0;
}

static int next_line(Cursor *c, Line *l)
{
    const char *nl;

    if (c->p >= c->end)
        return 0;
    nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    l->s = c->p;
    l->n = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);
    l->no = ++c->no;
    c->p = nl ? nl + 1 : c->end;
    return 1;
}

static char *dupn(const char *s, size_t n)
{
    char *d = tb_malloc(n + 1);

    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A scalar: "quoted" (with \" and \\ escapes) or bare. */
static int scalar(const char *s, size_t n, char **out, int *quoted)
{
    size_t o = 0;

    *quoted = n >= 2 && s[0] == '"' && s[n - 1] == '"';
    if (!*quoted)
        return (*out = dupn(s, n)) ? 0 : -1;
    if (!(*out = dupn(s + 1, n - 2)))
        return -1;
    for (size_t i = 1; i < n - 1; i++) {
        if (s[i] == '\\' && i + 1 < n - 1)
            i++;
        else if (s[i] == '"')
            return -1; /* an unescaped quote inside: not one scalar */
        (*out)[o++] = s[i];
    }
    (*out)[o] = '\0';
    return 0;
}

static int dict_add(Dict *d, const char *k, size_t kn, const char *v, size_t vn)
{
    Pair *p;

    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        Pair *items = tb_realloc(d->items, cap * sizeof *items);
        if (!items)
            return -1;
        d->items = items;
        d->cap = cap;
    }
    p = &d->items[d->n];
    p->key = dupn(k, kn);
    if (!p->key)
        return -1;
    if (scalar(v, vn, &p->value, &p->quoted) < 0) {
        tb_free(p->key);
        return -1;
    }
    d->n++;
    return 0;
}

/* "key: value" (or "key:" with an empty value) into d. */
static int key_value(Dict *d, const Line *l, char *err, size_t errlen)
{
    const char *colon = memchr(l->s, ':', l->n);
    size_t kn, vstart;

    if (!colon || colon == l->s || memchr(l->s, ' ', (size_t)(colon - l->s)))
        return bad(err, errlen, l, "not 'key: value'");
    kn = (size_t)(colon - l->s);
    vstart = kn + 1;
    if (vstart < l->n && l->s[vstart] != ' ')
        return bad(err, errlen, l, "no space after ':'");
    if (vstart < l->n)
        vstart++;
    if (dict_add(d, l->s, kn, l->s + vstart, l->n - vstart) < 0)
        return bad(err, errlen, l, "bad value (or out of memory)");
    return 0;
}

int yaml_dict(const char *data, size_t len, Dict *out, char *err, size_t errlen)
{
    Cursor c;
    Line l;

    memset(out, 0, sizeof *out);
    if (start(&c, data, len, err, errlen) < 0)
        return -1;
    while (next_line(&c, &l))
        if (key_value(out, &l, err, errlen) < 0) {
            dict_free(out);
            return -1;
        }
    return 0;
}

static int list_add(StrList *lst, char *s)
{
    if (lst->n == lst->cap) {
        size_t cap = lst->cap ? lst->cap * 2 : 64;
        char **items = tb_realloc(lst->items, cap * sizeof *items);
        if (!items)
            return -1;
        lst->items = items;
        lst->cap = cap;
    }
    lst->items[lst->n++] = s;
    return 0;
}

int yaml_list(const char *data, size_t len, StrList *out, char *err, size_t errlen)
{
    Cursor c;
    Line l;
    char *s;
    int quoted;

    memset(out, 0, sizeof *out);
    if (start(&c, data, len, err, errlen) < 0)
        return -1;
    while (next_line(&c, &l)) {
        if (l.n < 3 || memcmp(l.s, "- ", 2) != 0 ||
            scalar(l.s + 2, l.n - 2, &s, &quoted) < 0) {
            strlist_free(out);
            return bad(err, errlen, &l, "not '- item'");
        }
        if (list_add(out, s) < 0) {
            tb_free(s);
            strlist_free(out);
            return bad(err, errlen, &l, "out of memory");
        }
    }
    return 0;
}

/* A tube header line, "\"name\":", starts a new NamedDict. */
static int tube_header(DictList *out, const Line *l, char *err, size_t errlen)
{
    NamedDict *t;
    int quoted;

    if (l->n < 2 || l->s[l->n - 1] != ':')
        return bad(err, errlen, l, "not a tube header '\"name\":'");
    if (out->n == out->cap) {
        size_t cap = out->cap ? out->cap * 2 : 16;
        NamedDict *items = tb_realloc(out->items, cap * sizeof *items);
        if (!items)
            return bad(err, errlen, l, "out of memory");
        out->items = items;
        out->cap = cap;
    }
    t = &out->items[out->n];
    memset(t, 0, sizeof *t);
    if (scalar(l->s, l->n - 1, &t->name, &quoted) < 0)
        return bad(err, errlen, l, "bad tube name");
    out->n++;
    return 0;
}

int yaml_tubes(const char *data, size_t len, DictList *out, char *err,
               size_t errlen)
{
    Cursor c;
    Line l, inner;
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (start(&c, data, len, err, errlen) < 0)
        return -1;
    while (rc == 0 && next_line(&c, &l)) {
        if (l.n >= 2 && memcmp(l.s, "  ", 2) == 0) {
            if (out->n == 0) {
                rc = bad(err, errlen, &l, "key before the first tube");
                break;
            }
            inner = (Line){l.s + 2, l.n - 2, l.no};
            rc = key_value(&out->items[out->n - 1].dict, &inner, err, errlen);
        } else {
            rc = tube_header(out, &l, err, errlen);
        }
    }
    if (rc < 0)
        dictlist_free(out);
    return rc;
}

const char *dict_get(const Dict *d, const char *key)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->items[i].key, key) == 0)
            return d->items[i].value;
    return NULL;
}

unsigned long long dict_num(const Dict *d, const char *key,
                            unsigned long long dflt)
{
    const char *v = dict_get(d, key);
    uint64_t n;

    if (!v || parse_u64_str(v, &n) < 0)
        return dflt;
    return n;
}

void dict_free(Dict *d)
{
    for (size_t i = 0; i < d->n; i++) {
        tb_free(d->items[i].key);
        tb_free(d->items[i].value);
    }
    tb_free(d->items);
    memset(d, 0, sizeof *d);
}

void strlist_free(StrList *l)
{
    for (size_t i = 0; i < l->n; i++)
        tb_free(l->items[i]);
    tb_free(l->items);
    memset(l, 0, sizeof *l);
}

void dictlist_free(DictList *l)
{
    for (size_t i = 0; i < l->n; i++) {
        tb_free(l->items[i].name);
        dict_free(&l->items[i].dict);
    }
    tb_free(l->items);
    memset(l, 0, sizeof *l);
}
