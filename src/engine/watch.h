/*
 * watch.h — a worker's watch list.
 *
 * Contract: the list keeps beanstalkd's order (append; a removed entry's
 * place is taken by the last one), which list-tubes-watched shows. Each
 * entry holds a reference on its tube. Past WATCH_WIDE entries the list
 * also keeps a hash index, so membership and removal stay O(1) for a
 * worker watching thousands of tubes; past WAIT_WIDE entries such a worker
 * waits in one engine-wide list instead of in every tube's (waiter.c). If
 * the index cannot be allocated the list simply stays narrow: slower,
 * still correct.
 * No entry moves while its worker waits (its front-end reads no commands
 * then), so the tubes' waitq pointers to entries stay valid.
 */
#ifndef TUBED_WATCH_H
#define TUBED_WATCH_H

#include <stdint.h>

#include "core.h"
#include "worker.h"

#define WATCH_WIDE 16

int watch_find(const Worker *w, const Tube *t);
/* Append t (taking a reference); -1 when out of memory. */
int watch_add(Worker *w, Tube *t);
/* Remove entry i (dropping its reference). */
void watch_remove(Engine *e, Worker *w, int i);
/* Drop every entry, in the order beanstalkd lets them go, and the index. */
void watch_clear(Engine *e, Worker *w);

static inline int watch_is_wide(const Worker *w) { return w->wset != NULL; }

/* Up to WAIT_WIDE watched tubes a worker waits in every tube's set, in
 * beanstalkd's order (waiter.c); past it, once, engine-wide, as joining and
 * leaving that many sets would cost too much per wait. Only such workers
 * are served in another order than beanstalkd's (by when they began to
 * wait, against the worker at a tube's cursor). */
#define WAIT_WIDE 1024

static inline int watch_waits_wide(const Worker *w) { return w->nwatch > WAIT_WIDE; }

#endif
