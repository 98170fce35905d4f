/*
 * metrics.h — the text of GET /metrics: every family of doc/monitoring.md,
 * in its order, from the engine's state and the beanstalk front-end's
 * counters.
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

#include "bs.h"
#include "buf.h"

/* l: the listener asking; per-tube families show only the tubes it may
 * touch (NULL: every tube). The tubed_listener_* families list every
 * listener. */
void metrics_render(const Beanstalk *f, const Listener *l, Buf *b);

#endif
