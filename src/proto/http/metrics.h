/*
 * metrics.h — the text of GET /metrics: every family of doc/monitoring.md,
 * in its order, rendered from the statistics snapshot (srvstats.h): the
 * engine's figures, the connection layer's and those of the front-end
 * that src names (the beanstalk front-end's commands).
 *
 * Contract: metrics_render() appends the whole exposition (Prometheus text
 * format 0.0.4) to b; a failure shows only as b->oom. It reads and never
 * changes anything: the caller expires due jobs first (engine_expire_all)
 * so that no expired job is counted. Tubes come in name order (byte
 * order), as stats-tubes lists them; every per-tube family has a sample for
 * every tube.
 */
#ifndef TUBED_METRICS_H
#define TUBED_METRICS_H

#include "buf.h"
#include "server.h"
#include "srvstats.h"

/* l: the listener asking; per-tube families show only the tubes it may
 * touch (NULL: every tube). The tubed_listener_* families list every
 * listener. */
void metrics_render(Server *s, const StatsSource *src, const Listener *l, Buf *b);

#endif
