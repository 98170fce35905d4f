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

#include "buf.h"
#include "conn.h"
#include "job.h"
#include "server.h"
#include "tube.h"

void stats_server(const Server *s, Buf *b);
void stats_tube(const Server *s, const Tube *t, Buf *b);
void stats_job(const Server *s, const Job *j, Buf *b);
void stats_list_tubes(const Server *s, Buf *b);
void stats_list_watched(const Conn *c, Buf *b);

#endif
