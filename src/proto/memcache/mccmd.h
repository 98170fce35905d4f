/*
 * mccmd.h — memcache command dispatch and the handlers of everything but
 * the get family (mcget.h): set, queue administration, server commands.
 *
 * Contract: mc_line() takes one complete request line (without its
 * terminator) from a connection in state LINE, parses it with mc_parse()
 * and runs the command, which calls the engine and queues its reply (or,
 * with noreply, none) — except a command with a body, which moves the
 * connection to BODY (mc_body_done() answers once the body and its "\r\n"
 * are in), a get that waits (mcget.h), quit and shutdown, which close.
 * Every error reply is mcparse.h's table; a reply that reports a change
 * the binlog holds (STORED, DELETED, ...) is held until the engine says
 * the change is durable (conn_hold).
 */
#ifndef TUBED_MCCMD_H
#define TUBED_MCCMD_H

#include <stddef.h>

#include "mc.h"

void mc_line(McConn *m, const char *line, size_t len);
void mc_body_done(McConn *m);

#endif
