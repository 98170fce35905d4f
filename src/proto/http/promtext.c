#include "promtext.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"

static const char *const type_names[] = {
    [PROM_COUNTER] = "counter",     [PROM_GAUGE] = "gauge",
    [PROM_UNTYPED] = "untyped",     [PROM_HISTOGRAM] = "histogram",
    [PROM_SUMMARY] = "summary",
};

static void put_str(Buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

/* Append s with each byte in `special` written as '\' + its escape; runs
 * of plain bytes go in one append (tube names never need an escape). */
static void put_escaped(Buf *b, const char *s, size_t n, const char *special)
{
    size_t run = 0;

    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\0' || !strchr(special, c))
            continue;
        buf_append(b, s + run, i - run);
        buf_append(b, c == '\n' ? "\\n" : c == '"' ? "\\\"" : "\\\\", 2);
        run = i + 1;
    }
    buf_append(b, s + run, n - run);
}

PromLabel prom_label(const char *name, const char *value)
{
    return (PromLabel){name, value, strlen(value)};
}

void prom_family(Buf *b, const char *name, PromType type, const char *help)
{
    put_str(b, "# HELP ");
    put_str(b, name);
    buf_append(b, " ", 1);
    put_escaped(b, help, strlen(help), "\\\n");
    put_str(b, "\n# TYPE ");
    put_str(b, name);
    buf_append(b, " ", 1);
    put_str(b, type_names[type]);
    buf_append(b, "\n", 1);
}

/* "name{...} " — everything before the value. */
static void sample_head(Buf *b, const char *name, const PromLabel *labels, size_t n)
{
    put_str(b, name);
    for (size_t i = 0; i < n; i++) {
        buf_append(b, i ? "," : "{", 1);
        put_str(b, labels[i].name);
        buf_append(b, "=\"", 2);
        put_escaped(b, labels[i].value, labels[i].value_len, "\\\"\n");
        buf_append(b, "\"", 1);
    }
    if (n)
        buf_append(b, "}", 1);
    buf_append(b, " ", 1);
}

void prom_sample_u64(Buf *b, const char *name, const PromLabel *labels, size_t nlabels,
                     uint64_t v)
{
    char num[FMT_U64_MAX + 1];
    size_t k = fmt_u64(num, v);

    sample_head(b, name, labels, nlabels);
    num[k++] = '\n';
    buf_append(b, num, k);
}

void prom_sample_i64(Buf *b, const char *name, const PromLabel *labels, size_t nlabels,
                     int64_t v)
{
    char num[FMT_U64_MAX + 2];
    size_t k = 0;
    /* the magnitude in unsigned arithmetic: -INT64_MIN overflows int64_t */
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

    if (v < 0)
        num[k++] = '-';
    k += fmt_u64(num + k, mag);
    num[k++] = '\n';
    sample_head(b, name, labels, nlabels);
    buf_append(b, num, k);
}

size_t prom_fmt_f64(char *dst, double v)
{
    char tmp[PROM_F64_MAX + 8];
    int n = 0;

    if (isnan(v))
        n = snprintf(tmp, sizeof tmp, "NaN");
    else if (isinf(v))
        n = snprintf(tmp, sizeof tmp, v > 0 ? "+Inf" : "-Inf");
    else
        /* the fewest digits that read back as v: 15 digits always survive
         * a round trip through decimal, 17 always identify a double. The
         * server never calls setlocale, so the decimal point is '.'. */
        for (int prec = 15; prec <= 17; prec++) {
            n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
            if (strtod(tmp, NULL) == v)
                break;
        }
    memcpy(dst, tmp, (size_t)n);
    return (size_t)n;
}

void prom_sample_f64(Buf *b, const char *name, const PromLabel *labels, size_t nlabels,
                     double v)
{
    char num[PROM_F64_MAX + 1];
    size_t k = prom_fmt_f64(num, v);

    num[k++] = '\n';
    sample_head(b, name, labels, nlabels);
    buf_append(b, num, k);
}

static int name_char(char c, int first, int colon)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
        return 1;
    if (c == ':')
        return colon;
    return !first && c >= '0' && c <= '9';
}

int prom_name_valid(const char *name)
{
    if (!name[0])
        return 0;
    for (size_t i = 0; name[i]; i++)
        if (!name_char(name[i], i == 0, 1))
            return 0;
    return 1;
}

int prom_label_name_valid(const char *name)
{
    if (!name[0] || (name[0] == '_' && name[1] == '_'))
        return 0; /* "__" names are reserved for Prometheus itself */
    for (size_t i = 0; name[i]; i++)
        if (!name_char(name[i], i == 0, 0))
            return 0;
    return 1;
}
