/*
 * table.h — aligned text tables that fit a width.
 *
 * Contract: columns are declared once, cells filled row by row (text is
 * copied). table_render() writes the header and the rows [first,
 * first+max_rows) with numbers right-aligned and two spaces between
 * columns, each line ended by `eol`. With width > 0, no line is wider
 * than width: a very long name column is first cut to a third of the
 * width, then the columns with the highest `drop` rank are left out one
 * by one (rank 0: never), then the name column is cut further; a cut
 * name ends in '~', which no tube name can hold. Colour escapes are
 * written only with `color` and never count toward the width.
 *
 * Cells are text for a terminal: text_safe() is applied to each (the
 * server's strings, a tube name or a version, must never move the cursor,
 * set the window title or write the clipboard).
 */
#ifndef TUBED_CLI_TABLE_H
#define TUBED_CLI_TABLE_H

#include <stddef.h>

#include "buf.h"

#define TABLE_MAX_COLS 24

typedef enum Style {
    STY_PLAIN,
    STY_DIM,    /* zeros, placeholders: the eye skips them */
    STY_BOLD,
    STY_GOOD,   /* green */
    STY_WARN,   /* yellow: paused, waiting */
    STY_BAD,    /* red: buried jobs */
    STY_KEY,    /* cyan: the keys of key/value lists */
} Style;

typedef struct Column {
    const char *title;
    int right;  /* right-aligned (numbers) */
    int drop;   /* 0: always shown; otherwise higher ranks go first */
    int shrink; /* may be cut to fit (the name column) */
} Column;

typedef struct Cell {
    char *text;
    Style style;
} Cell;

typedef struct Table {
    Column cols[TABLE_MAX_COLS];
    size_t ncols;
    Cell *cells; /* row-major, nrows * ncols */
    size_t nrows, cap;
    int oom;
} Table;

typedef struct TableView {
    int width;        /* 0: no limit */
    int color;
    int reverse_head; /* header in reverse video across the width (top) */
    const char *eol;
    size_t first, max_rows;
} TableView;

void table_init(Table *t);
/* Returns the column's index. */
size_t table_col(Table *t, const char *title, int right, int drop, int shrink);
/* Returns the new row's index; its cells are empty until set. */
size_t table_row(Table *t);
void table_set(Table *t, size_t row, size_t col, Style st, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void table_render(const Table *t, Buf *out, const TableView *v);
void table_free(Table *t);
/* The escape sequence that starts a style ("" for STY_PLAIN). */
const char *style_sgr(Style st);
/* Make n bytes of s harmless on a terminal, in place and at the same
 * length: control bytes (below 0x20, DEL), bytes that are not UTF-8 and
 * the C1 controls written in UTF-8 (U+0080-U+009F) each become '?'. */
void text_safe(char *s, size_t n);
/* Append s to b as text_safe() leaves it. */
void buf_append_safe(Buf *b, const char *s);

#endif
