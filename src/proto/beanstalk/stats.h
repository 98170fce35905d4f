/*
 * stats.h — the YAML documents of stats, stats-tube, stats-job, list-tubes,
 * list-tubes-watched, and tubed's stats-tubes and stats-binlog.
 *
 * Contract: each function appends the document body (starting "---\n",
 * lines ending "\n") to a Buf, in beanstalkd's key order and number
 * formats, with the 1.13 quoting of string values. Keys tubed adds come
 * after the standard ones. Errors show as buf->oom. Each renders the
 * snapshot (srvstats.h, snapshot.h); nothing here gathers figures.
 */
#ifndef TUBED_STATS_H
#define TUBED_STATS_H

#include "bs.h"
#include "buf.h"
#include "engine.h"
#include "srvstats.h"

void stats_server(const Beanstalk *f, Buf *b);
/* This front-end's counters (commands, producers, workers) for another
 * front-end's renderings (HTTP), through srvstats.h. */
StatsSource bs_stats_source(const Beanstalk *f);
/* stats-replication (doc/replication.md): the spec's keys in order. */
void stats_replication(Server *s, Buf *b);
void stats_tube(const Engine *e, const Tube *t, Buf *b);
void stats_job(const Engine *e, const Job *j, Buf *b);
/* l: only the tubes listener l may touch (NULL: every tube). */
void stats_list_tubes(const Engine *e, const Listener *l, Buf *b);
void stats_list_watched(const Worker *w, Buf *b);
/* Extensions (extensions.md §2): every tube in name order, its stats-tube
 * keys indented under "<name>": and then tubed's own; the binlog's health. */
void stats_tubes(const Server *s, const Listener *l, Buf *b);
/* oldest-file-pinned-by names a job only where listener l may see it
 * (0 otherwise, as when none pins): the job's tube decides. */
void stats_binlog(Server *s, const Listener *l, Buf *b);
/* stats-listeners: every listener, with its role, tubes and counters;
 * asked on a listener with tubes (me restricted), only me's entry. */
void stats_listeners(const Server *s, const Listener *me, Buf *b);

#endif
