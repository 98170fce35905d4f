#include "tubesjson.h"

#include <string.h>

#include "repl.h"
#include "stats.h"

/* Keys whose values are strings even when they look like a number (an
 * instance id may be all digits, a version "1" one day). */
static const char *const string_keys[] = {"version", "id", "hostname", "os", "platform",
                                          "name"};

void json_string(Buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;

    buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6];
        size_t elen = 2;

        if (c >= 0x20 && c != '"' && c != '\\' && c != 0x7f)
            continue;
        buf_append(b, s + run, i - run);
        run = i + 1;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        buf_append(b, esc, elen);
    }
    buf_append(b, s + run, n - run);
    buf_append(b, "\"", 1);
}

static size_t digits(const char *s, size_t i, size_t n)
{
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    return i;
}

int json_is_number(const char *s, size_t n)
{
    size_t i = 0, j;

    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0')
        i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        i = digits(s, i, n);
    else
        return 0;
    if (i < n && s[i] == '.') {
        j = digits(s, i + 1, n);
        if (j == i + 1)
            return 0;
        i = j;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        j = digits(s, i, n);
        if (j == i)
            return 0;
        i = j;
    }
    return i == n;
}

static int is_string_key(const char *k, size_t n)
{
    for (size_t i = 0; i < sizeof string_keys / sizeof string_keys[0]; i++)
        if (strlen(string_keys[i]) == n && !memcmp(string_keys[i], k, n))
            return 1;
    return 0;
}

/* A YAML double-quoted scalar as stats.h writes it (only \" and \\
 * escaped) as a JSON string. */
static void unquote_yaml(Buf *b, const char *v, size_t n)
{
    char tmp[256];
    size_t len = 0;
    Buf big = {0};

    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        if (c == '\\' && i + 1 < n)
            c = v[++i];
        if (len == sizeof tmp) { /* long: go on in a heap buffer */
            buf_append(&big, tmp, len);
            len = 0;
        }
        tmp[len++] = c;
    }
    if (big.len || big.oom) {
        buf_append(&big, tmp, len);
        if (big.oom)
            b->oom = 1;
        else
            json_string(b, big.data, big.len);
        buf_free(&big);
        return;
    }
    json_string(b, tmp, len);
}

static void value_json(Buf *b, const char *k, size_t klen, const char *v, size_t n)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"')
        unquote_yaml(b, v + 1, n - 2);
    else if (is_string_key(k, klen))
        json_string(b, v, n);
    else if ((n == 4 && !memcmp(v, "true", 4)) || (n == 5 && !memcmp(v, "false", 5)) ||
             json_is_number(v, n))
        buf_append(b, v, n);
    else
        json_string(b, v, n);
}

size_t yaml_members_json(Buf *b, const char *y, size_t n, size_t indent)
{
    size_t pos = 0;
    int first = 1;

    while (pos < n) {
        const char *line = y + pos, *nl = memchr(line, '\n', n - pos), *colon;
        size_t len = nl ? (size_t)(nl - line) : n - pos;

        if (len < indent || (indent && memcmp(line, "  ", indent)) ||
            (len > indent && line[indent] == ' '))
            break;
        colon = memchr(line + indent, ':', len - indent);
        if (!colon || colon + 1 >= line + len || colon[1] != ' ')
            break;
        if (!first)
            buf_append(b, ",", 1);
        first = 0;
        json_string(b, line + indent, (size_t)(colon - line) - indent);
        buf_append(b, ":", 1);
        value_json(b, line + indent, (size_t)(colon - line) - indent, colon + 2,
                   (size_t)(line + len - (colon + 2)));
        pos += len + (nl != NULL);
    }
    return pos;
}

/* The body of a document after its "---\n". */
static size_t doc_start(const Buf *y)
{
    return y->len >= 4 && !memcmp(y->data, "---\n", 4) ? 4 : y->len;
}

static void tubes_members(Buf *b, const Buf *y)
{
    size_t pos = doc_start(y);
    int first = 1;

    while (pos < y->len) {
        const char *line = y->data + pos, *nl = memchr(line, '\n', y->len - pos);
        size_t len = nl ? (size_t)(nl - line) : y->len - pos;

        /* "<name>":  (names hold no '"': names.h) */
        if (!nl || len < 4 || line[0] != '"' || memcmp(line + len - 2, "\":", 2))
            break;
        if (!first)
            buf_append(b, ",", 1);
        first = 0;
        json_string(b, line + 1, len - 3);
        buf_append(b, ":{", 2);
        pos += len + 1;
        pos += yaml_members_json(b, y->data + pos, y->len - pos, 2);
        buf_append(b, "}", 1);
    }
}

void tubes_json(const Beanstalk *f, const Listener *l, Buf *b)
{
    Buf y = {0};
    size_t start;

    stats_server(f, &y);
    if (y.oom) {
        b->oom = 1;
        buf_free(&y);
        return;
    }
    buf_append(b, "{\"server\":{", 11);
    start = doc_start(&y);
    yaml_members_json(b, y.data + start, y.len - start, 0);
    buf_append(b, "},\"tubes\":{", 11);
    y.len = 0;
    stats_tubes(&f->srv->eng, l, &y);
    if (y.oom)
        b->oom = 1;
    else
        tubes_members(b, &y);
    buf_append(b, "}", 1);
    /* The role and the lag, once replication is in use (repl.h). */
    if (f->srv->repl && (f->srv->eng.binlog.pos_persist || repl_is_replica(f->srv) ||
                         f->srv->cfg.sync_replicas)) {
        y.len = 0;
        repl_stats(f->srv, &y);
        if (y.oom) {
            b->oom = 1;
        } else {
            buf_append(b, ",\"replication\":{", 16);
            start = doc_start(&y);
            yaml_members_json(b, y.data + start, y.len - start, 0);
            buf_append(b, "}", 1);
        }
    }
    buf_append(b, "}\n", 2);
    buf_free(&y);
}
