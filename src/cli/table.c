/* table.c — aligned tables fitted to a width; see table.h. */
#include "table.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "utf8.h"

#define GAP 2
/* A cut name keeps at least this much of itself. */
#define MIN_SHRINK 6

void table_init(Table *t)
{
    memset(t, 0, sizeof *t);
}

size_t table_col(Table *t, const char *title, int right, int drop, int shrink)
{
    /* Columns are fixed by the caller's code, never by data. */
    if (t->ncols == TABLE_MAX_COLS || t->nrows) {
        t->oom = 1;
        return TABLE_MAX_COLS - 1;
    }
    t->cols[t->ncols] = (Column){title, right, drop, shrink};
    return t->ncols++;
}

size_t table_row(Table *t)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        Cell *c = tb_realloc(t->cells, cap * t->ncols * sizeof *c);
        if (!c) {
            t->oom = 1;
            return t->nrows ? t->nrows - 1 : 0;
        }
        t->cells = c;
        t->cap = cap;
    }
    memset(&t->cells[t->nrows * t->ncols], 0, t->ncols * sizeof *t->cells);
    return t->nrows++;
}

void table_set(Table *t, size_t row, size_t col, Style st, const char *fmt, ...)
{
    va_list ap;
    Cell *c;
    int n;

    if (row >= t->nrows || col >= t->ncols)
        return;
    c = &t->cells[row * t->ncols + col];
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    tb_free(c->text);
    c->text = n >= 0 ? tb_malloc((size_t)n + 1) : NULL;
    if (!c->text) {
        t->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(c->text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    text_safe(c->text, (size_t)n);
    c->style = st;
}

void text_safe(char *s, size_t n)
{
    unsigned char *u = (unsigned char *)s;

    for (size_t i = 0, k; i < n; i += k) {
        k = u[i] < 0x80 ? 1 : utf8_seq(s + i, n - i);
        if (k == 0)
            k = 1, s[i] = '?'; /* not UTF-8: a lone 0x9b is CSI to some terminals */
        else if (utf8_c1(s + i, k))
            s[i] = s[i + 1] = '?';
        else if (k == 1 && (u[i] < 0x20 || u[i] == 0x7f))
            s[i] = '?';
    }
}

void buf_append_safe(Buf *b, const char *s)
{
    size_t n = strlen(s), at = b->len;

    if (buf_append(b, s, n) == 0)
        text_safe(b->data + at, n);
}

static const char *cell_text(const Table *t, size_t row, size_t col)
{
    const char *s = t->cells[row * t->ncols + col].text;
    return s ? s : "";
}

/* Which columns show, and how wide each is. */
typedef struct Layout {
    size_t w[TABLE_MAX_COLS];
    int show[TABLE_MAX_COLS];
} Layout;

static size_t total_width(const Table *t, const Layout *l)
{
    size_t sum = 0, n = 0;

    for (size_t i = 0; i < t->ncols; i++)
        if (l->show[i])
            sum += l->w[i], n++;
    return n ? sum + GAP * (n - 1) : 0;
}

/* Cut the shrinkable column so the total is at most `limit`, keeping at
 * least `floor` of it. */
static void shrink_to(const Table *t, Layout *l, size_t limit, size_t floor)
{
    for (size_t i = 0; i < t->ncols; i++) {
        size_t total = total_width(t, l);
        if (!l->show[i] || !t->cols[i].shrink || total <= limit)
            continue;
        size_t want = l->w[i] > total - limit ? l->w[i] - (total - limit) : 0;
        l->w[i] = want > floor ? want : (l->w[i] < floor ? l->w[i] : floor);
    }
}

/* Hide the shown column with the highest drop rank (rightmost on ties). */
static int drop_one(const Table *t, Layout *l)
{
    size_t best = 0;
    int rank = 0;

    for (size_t i = 0; i < t->ncols; i++)
        if (l->show[i] && t->cols[i].drop >= rank && t->cols[i].drop > 0)
            best = i, rank = t->cols[i].drop;
    if (rank == 0)
        return 0;
    l->show[best] = 0;
    return 1;
}

/* Columns dropped may leave room: give it back to a cut name. */
static void grow_back(const Table *t, Layout *l, size_t width,
                      const size_t *natural)
{
    for (size_t i = 0; i < t->ncols; i++) {
        size_t total = total_width(t, l);
        if (l->show[i] && t->cols[i].shrink && l->w[i] < natural[i] &&
            total < width) {
            size_t room = width - total;
            l->w[i] = natural[i] - l->w[i] < room ? natural[i] : l->w[i] + room;
        }
    }
}

static void layout(const Table *t, size_t width, Layout *l)
{
    size_t natural[TABLE_MAX_COLS];

    for (size_t i = 0; i < t->ncols; i++) {
        l->show[i] = 1;
        l->w[i] = strlen(t->cols[i].title);
        for (size_t r = 0; r < t->nrows; r++) {
            size_t n = strlen(cell_text(t, r, i));
            if (n > l->w[i])
                l->w[i] = n;
        }
        natural[i] = l->w[i];
    }
    if (width == 0 || total_width(t, l) <= width)
        return;
    /* A name of 150 characters should not push every number off screen:
     * cut it down to a third of the width before dropping columns, then
     * further only if the columns that always show still do not fit. */
    size_t third = width / 3 > 16 ? width / 3 : 16;
    shrink_to(t, l, width, third);
    while (total_width(t, l) > width && drop_one(t, l))
        ;
    shrink_to(t, l, width, MIN_SHRINK);
    grow_back(t, l, width, natural);
}

const char *style_sgr(Style st)
{
    switch (st) {
    case STY_DIM: return "\x1b[2m";
    case STY_BOLD: return "\x1b[1m";
    case STY_GOOD: return "\x1b[32m";
    case STY_WARN: return "\x1b[33m";
    case STY_BAD: return "\x1b[31m";
    case STY_KEY: return "\x1b[36m";
    default: return "";
    }
}

/* One line being written: how many columns are used, and the limit. */
typedef struct Pen {
    Buf *out;
    size_t col, width;
    int color;
} Pen;

static void pen_pad(Pen *p, size_t n)
{
    while (n-- > 0 && (p->width == 0 || p->col < p->width)) {
        buf_append(p->out, " ", 1);
        p->col++;
    }
}

static void pen_text(Pen *p, const char *s, size_t n, Style st)
{
    if (p->width && p->col + n > p->width)
        n = p->width > p->col ? p->width - p->col : 0;
    if (n == 0)
        return;
    if (p->color && st != STY_PLAIN)
        buf_printf(p->out, "%s", style_sgr(st));
    buf_append(p->out, s, n);
    if (p->color && st != STY_PLAIN)
        buf_append(p->out, "\x1b[0m", 4);
    p->col += n;
}

/* One cell: padded to w, cut with '~' if longer. */
static void pen_cell(Pen *p, const Column *c, const char *s, size_t w, Style st,
                     int last)
{
    size_t n = strlen(s);
    int cut = n > w;

    if (cut)
        n = w ? w - 1 : 0;
    if (c->right && !cut)
        pen_pad(p, w - n);
    pen_text(p, s, n, st);
    if (cut && w)
        pen_text(p, "~", 1, STY_DIM);
    if (!c->right && !cut && !last)
        pen_pad(p, w - n);
}

static size_t last_shown(const Table *t, const Layout *l)
{
    size_t last = 0;

    for (size_t i = 0; i < t->ncols; i++)
        if (l->show[i])
            last = i;
    return last;
}

static void render_line(const Table *t, const Layout *l, Pen *p, long row,
                        Style head)
{
    size_t last = last_shown(t, l);
    int first = 1;

    for (size_t i = 0; i < t->ncols; i++) {
        if (!l->show[i])
            continue;
        if (!first)
            pen_pad(p, GAP);
        first = 0;
        if (row < 0)
            pen_cell(p, &t->cols[i], t->cols[i].title, l->w[i], head, i == last);
        else
            pen_cell(p, &t->cols[i], cell_text(t, (size_t)row, i), l->w[i],
                     t->cells[(size_t)row * t->ncols + i].style, i == last);
    }
}

void table_render(const Table *t, Buf *out, const TableView *v)
{
    Layout l;
    Pen p = {out, 0, v->width > 0 ? (size_t)v->width : 0, v->color};
    size_t end = v->first + v->max_rows;

    layout(t, p.width, &l);
    if (v->reverse_head && v->color) {
        /* The whole header line in reverse video, as top and htop do. */
        buf_append(out, "\x1b[7m", 4);
        p.color = 0;
        render_line(t, &l, &p, -1, STY_PLAIN);
        pen_pad(&p, p.width > p.col ? p.width - p.col : 0);
        buf_append(out, "\x1b[0m", 4);
        p.color = v->color;
    } else {
        render_line(t, &l, &p, -1, STY_BOLD);
    }
    buf_printf(out, "%s", v->eol);
    for (size_t r = v->first; r < t->nrows && r < end; r++) {
        p.col = 0;
        render_line(t, &l, &p, (long)r, STY_PLAIN);
        buf_printf(out, "%s", v->eol);
    }
}

void table_free(Table *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        tb_free(t->cells[i].text);
    tb_free(t->cells);
    memset(t, 0, sizeof *t);
}
