/*
 * tubestats.h — every tube's stats, from tubed's one `stats-tubes` request
 * or, on a plain beanstalkd, from `list-tubes` and one `stats-tube` per
 * tube; and the table `tubes` and `top` show of them.
 *
 * Contract: tubes_fetch() fills a TubeSet sorted by name (byte order). A
 * TubeSource remembers whether the server answered stats-tubes, so `top`
 * asks only once per connection (zero it for a new connection). A tube
 * that vanishes between list-tubes and its stats-tube is left out, not an
 * error. tubes_table() builds the table; given an earlier sample it adds
 * per-second rates of puts (growth of total-jobs) and deletes (growth of
 * cmd-delete), "-" where there is nothing to compare with. The columns
 * that only tubed's stats-tubes gives appear only when the sample has
 * them.
 */
#ifndef TUBED_CLI_TUBESTATS_H
#define TUBED_CLI_TUBESTATS_H

#include "buf.h"
#include "client.h"
#include "cli.h"
#include "table.h"
#include "yamlish.h"

typedef struct TubeSource {
    int probed;      /* stats-tubes was tried on this connection */
    int has_ext;     /* ... and answered */
} TubeSource;

typedef struct TubeSet {
    DictList tubes;  /* name and stats, sorted by name */
    int extended;    /* from stats-tubes: has tubed's extra keys */
    double at;       /* monotonic seconds when taken */
} TubeSet;

Status tubes_fetch(Client *c, TubeSource *src, TubeSet *out, Err *e);
void tubeset_free(TubeSet *s);

/* prev may be NULL; with_rates adds the PUT/S and DEL/S columns. */
void tubes_table(Table *t, const TubeSet *cur, const TubeSet *prev,
                 int with_rates);
/* {"<name>": {<stats-tube keys>}, ...} */
void tubes_json(Buf *b, const TubeSet *s);

/* Shared formatting: "45s", "3m20s", "2h5m", "4d3h". */
void fmt_duration(char *out, size_t n, unsigned long long secs);
/* "512", "12.3K", "4.0M", "1.2G" (powers of 1024). */
void fmt_bytes(char *out, size_t n, unsigned long long bytes);
double mono_now(void);

#endif
