/*
 * reserve.h — matching workers with jobs: reserve, waiting, timeouts.
 *
 * Contract: reserve_start() answers a reserve at once when it can (a job
 * from the watched tubes, DEADLINE_SOON, or TIMED_OUT) and otherwise parks
 * the connection in the waiting list of every tube it watches, with a
 * timer for its timeout and for the one-second safety margin before the
 * TTR of a job it holds. reserve_serve() hands a tube's ready jobs to its
 * waiting connections, first come first served; queue.c calls it whenever
 * a job becomes ready or a pause ends. reserve_tick() answers waits whose
 * time came. reserve_cancel() takes a connection out of all waiting lists.
 */
#ifndef TUBED_RESERVE_H
#define TUBED_RESERVE_H

#include <stdint.h>

#include "clock.h"
#include "conn.h"
#include "server.h"

/* 1 second: the last second of a TTR belongs to the server. */
#define SAFETY_MARGIN NS_PER_SEC

void reserve_init(Server *s);
/* timeout: ns to wait, INT64_MAX for ever, 0 to answer at once. */
void reserve_start(Server *s, Conn *c, int64_t timeout);
void reserve_serve(Server *s, Tube *t);
void reserve_tick(Server *s);
void reserve_cancel(Server *s, Conn *c);
/* The connection half-closed: a waiting reserve answers TIMED_OUT. */
void reserve_hangup(Server *s, Conn *c);
int64_t reserve_next_due(const Server *s);
/* Connections waiting in a reserve that watch t (stats-tube). */
uint32_t reserve_tube_waiting(const Server *s, const Tube *t);

/* The best ready job across c's watched, unpaused tubes, or NULL. */
Job *reserve_find(const Server *s, const Conn *c);

#endif
