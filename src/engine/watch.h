/*
 * watch.h — a connection's watch list.
 *
 * Contract: the list keeps beanstalkd's order (append; a removed entry's
 * place is taken by the last one), which list-tubes-watched shows. Each
 * entry holds a reference on its tube. Past WATCH_WIDE entries the list
 * also keeps a hash index, so membership and removal stay O(1) for a
 * worker watching thousands of tubes; such a "wide" connection waits in one
 * server-wide list instead of in every tube's (see reserve.c). If the index
 * cannot be allocated the list simply stays narrow: slower, still correct.
 * No entry moves while its connection waits in a reserve (commands are not
 * read then), so wait_link pointers stay valid.
 */
#ifndef TUBED_WATCH_H
#define TUBED_WATCH_H

#include <stdint.h>

#include "conn.h"

#define WATCH_WIDE 16

int watch_find(const Conn *c, const Tube *t);
/* Append t (taking a reference); -1 when out of memory. */
int watch_add(Conn *c, Tube *t);
/* Remove entry i (dropping its reference). */
void watch_remove(Conn *c, int i);
/* Drop every entry, in the order beanstalkd lets them go, and the index. */
void watch_clear(Conn *c);

static inline int watch_is_wide(const Conn *c) { return c->wset != NULL; }

#endif
