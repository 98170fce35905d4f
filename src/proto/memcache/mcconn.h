/*
 * mcconn.h — the kestrel (memcache text) front-end: a Proto for the
 * connection layer.
 *
 * Contract: memcache_init() fills a Memcache whose proto member main.c
 * hands to server_listen(..., "memcache", port). Each connection then
 * frames request lines per spec kestrel.md §3 (LF ends a line, a CR before
 * it is dropped, a line over MC_MAX_LINE bytes answers CLIENT_ERROR line
 * too long and closes), reads set bodies straight into the new job, and
 * runs each command through mccmd.c. memcache_free() releases what
 * memcache_init() made; call it after server_free() (closing connections
 * still uses the front-end).
 */
#ifndef TUBED_MCCONN_H
#define TUBED_MCCONN_H

#include "mc.h"

/* 0, or -1 (logged) when its eventfd or its tables cannot be made. */
int memcache_init(Memcache *f, Server *s);
void memcache_free(Memcache *f);

#endif
