/*
 * tubesjson.h — GET /tubes.json: {"server": {...}, "tubes": {"<name>":
 * {...}, ...}}, what the status page reads (doc/monitoring.md).
 *
 * Contract: tubes_json() appends one JSON object to b (b->oom on failure).
 * "server" has every key of beanstalk `stats`, in its order, names
 * unchanged; "tubes" has every tube in name order with every key of its
 * `stats-tubes` entry, in that order; "replication" (once it is in use)
 * the keys of stats-replication. The server and tube members are the very
 * key walk the YAML documents render (srvstats.h's stats_doc_server() and
 * stats_doc_tube()), so the two can never disagree: numbers as JSON
 * numbers, true/false as booleans, the rest as strings escaped by
 * json_string(). Changes nothing: the caller expires due jobs first.
 */
#ifndef TUBED_TUBESJSON_H
#define TUBED_TUBESJSON_H

#include <stddef.h>

#include "buf.h"
#include "jsonstr.h" /* json_string(), the members' escaping */
#include "server.h"
#include "srvstats.h"

/* l: only the tubes listener l may touch (NULL: every tube); src: the
 * front-end whose counters `stats` shows (the beanstalk one). */
void tubes_json(Server *s, const StatsSource *src, const Listener *l, Buf *b);

#endif
