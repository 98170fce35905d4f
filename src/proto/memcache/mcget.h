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
 * get waits the connection is paused. The engine reports the end of a
 * wait after the operation that ended it (engine_deliver), so mc_wake()
 * finishes the get at once; a hang-up or close first ends it with nothing
 * taken (mc_hangup(), mc_closing()).
 */
#ifndef TUBED_MCGET_H
#define TUBED_MCGET_H

#include <stddef.h>

#include "mc.h"

/* The tube of a set or get, created if need be (a fanout child is
 * registered), with a reference the caller drops; NULL when out of memory. */
Tube *mc_tube_get(McConn *m, const char *name, size_t len);

void mc_get(McConn *m, const McCmd *cmd);
/* A get or monitor of a queue the listener may not touch: END, as an
 * empty queue answers, after the wait an empty queue would have for cmd
 * (none for /abort, /close without /open, or a monitor of 0), so a worker
 * polling it waits rather than spins; no counter but the refusal, which
 * the caller counted, moves. */
void mc_get_nothing(McConn *m, const McCmd *cmd);
void mc_monitor(McConn *m, const McCmd *cmd);
void mc_confirm(McConn *m, const McCmd *cmd);

/* The engine ended a wait of this connection's worker (WorkerOps.wake). */
void mc_wake(Worker *w, WaitEnd how, Job *j);
/* The peer half-closed or hit EOF while the connection was paused. */
void mc_hangup(McConn *m);
/* The server became a replica (follow) while a get waited: the get
 * answers SERVER_ERROR replica, as a get on a replica does. */
void mc_demoted(McConn *m);
/* A reload took the tubes (or, all set, the role) of open jobs from the
 * connection's listener: those jobs go back now, as /abort gives them
 * back, since the client can neither close nor abort them any more and
 * kestrel's jobs have no TTR to end them. */
void mc_give_back_refused(McConn *m, int all);
/* The connection is closing: give back its open jobs, drop its state. */
void mc_closing(McConn *m);

#endif
