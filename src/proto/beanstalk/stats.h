/*
 * stats.h — the YAML documents of stats, stats-tube, stats-job, list-tubes
 * and list-tubes-watched.
 *
 * Contract: each function appends the document body (starting "---\n",
 * lines ending "\n") to a Buf, in beanstalkd's key order and number
 * formats, with the 1.13 quoting of string values. Keys tubed adds come
 * after the standard ones. Errors show as buf->oom.
 */
#ifndef TUBED_STATS_H
#define TUBED_STATS_H

#include "bs.h"
#include "buf.h"
#include "engine.h"

void stats_server(const Beanstalk *f, Buf *b);
void stats_tube(const Engine *e, const Tube *t, Buf *b);
void stats_job(const Engine *e, const Job *j, Buf *b);
void stats_list_tubes(const Engine *e, Buf *b);
void stats_list_watched(const Worker *w, Buf *b);

#endif
