/*
 * mcget.h — the memcache get family: get/gets with its options, monitor,
 * confirm, and the end of waits the engine reports.
 *
 * Contract: mc_get() follows spec kestrel.md §5's order: /abort gives this
 * connection's open job of the tube back (to the head of its priority) and
 * answers END; else /close deletes it, and alone answers END; then a
 * plain get or /open while one is still held answers ERROR and closes;
 * else the job a reserve watching only that tube would take is fetched,
 * waiting per t= in the tubes' shared first-come-first-served line: a
 * plain get deletes it (journaled; its VALUE held until durable), /open
 * reserves it with no TTR deadline, /peek shows it and leaves it. While a
 * get waits the connection is paused. The engine ends a wait from inside
 * its own operations, so mc_wake() only records the outcome; the get is
 * finished by mc_run_deferred() (the front-end's eventfd), mc_hangup() or
 * mc_closing(), whichever comes first.
 */
#ifndef TUBED_MCGET_H
#define TUBED_MCGET_H

#include <stddef.h>

#include "mc.h"

/* The tube of a set or get, created if need be (a fanout child is
 * registered), with a reference the caller drops; NULL when out of memory. */
Tube *mc_tube_get(McConn *m, const char *name, size_t len);

void mc_get(McConn *m, const McCmd *cmd);
void mc_monitor(McConn *m, const McCmd *cmd);
void mc_confirm(McConn *m, const McCmd *cmd);

/* The engine ended a wait of this connection's worker (WorkerOps.wake). */
void mc_wake(Worker *w, WaitEnd how, Job *j);
/* Finish every get whose wait the engine ended (the eventfd fired). */
void mc_run_deferred(Memcache *f);
/* The peer half-closed or hit EOF while the connection was paused. */
void mc_hangup(McConn *m);
/* The connection is closing: give back its open jobs, drop its state. */
void mc_closing(McConn *m);

#endif
