/* jsonout.c — JSON output; see jsonout.h. */
#include "jsonout.h"

#include <string.h>

void json_cstr(Buf *b, const char *s)
{
    json_string(b, s, strlen(s));
}

/* JSON's number grammar, restricted to what stats print: 0 or digits
 * without a leading zero, then an optional fraction. */
static int is_number(const char *s)
{
    const char *p = s;

    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    if (*p == '.') {
        if (!(p[1] >= '0' && p[1] <= '9'))
            return 0;
        for (p++; *p >= '0' && *p <= '9'; p++)
            ;
    }
    return *p == '\0';
}

static int in_list(const char *key, const char *const *list)
{
    for (; list && *list; list++)
        if (strcmp(key, *list) == 0)
            return 1;
    return 0;
}

void json_scalar(Buf *b, const Pair *p, const char *const *string_keys)
{
    if (!p->quoted && !in_list(p->key, string_keys)) {
        if (is_number(p->value) || strcmp(p->value, "true") == 0 ||
            strcmp(p->value, "false") == 0) {
            buf_printf(b, "%s", p->value);
            return;
        }
    }
    json_cstr(b, p->value);
}

void json_dict(Buf *b, const Dict *d, const char *const *string_keys)
{
    buf_append(b, "{", 1);
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            buf_append(b, ",", 1);
        json_cstr(b, d->items[i].key);
        buf_append(b, ":", 1);
        json_scalar(b, &d->items[i], string_keys);
    }
    buf_append(b, "}", 1);
}

static void base64(Buf *b, const unsigned char *s, size_t n)
{
    static const char al[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];

    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        q[0] = al[(v >> 18) & 63];
        q[1] = al[(v >> 12) & 63];
        q[2] = i + 1 < n ? al[(v >> 6) & 63] : '=';
        q[3] = i + 2 < n ? al[v & 63] : '=';
        buf_append(b, q, 4);
    }
}

void json_bytes_member(Buf *b, const char *key, const char *s, size_t n)
{
    if (utf8_valid(s, n)) {
        json_cstr(b, key);
        buf_append(b, ":", 1);
        json_string(b, s, n);
        return;
    }
    buf_printf(b, "\"%s-base64\":\"", key);
    base64(b, (const unsigned char *)s, n);
    buf_append(b, "\"", 1);
}
