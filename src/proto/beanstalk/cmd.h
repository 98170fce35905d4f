/*
 * cmd.h — beanstalk command handlers: one function per protocol command.
 *
 * Contract: cmd_line() takes one complete request line (without "\r\n")
 * from a connection in state CMD, parses it with parse_command() and runs
 * the handler, which calls the engine and queues exactly one reply —
 * except put, which moves the connection to BODY (or DISCARD) and replies
 * from cmd_put_body_done() once the body is in, reserve, which may wait
 * (cmd_wake() replies when the engine wakes the worker), and quit, which
 * closes. Replies that report a change the binlog holds are held until
 * the engine says the change is durable (conn_hold).
 */
#ifndef TUBED_CMD_H
#define TUBED_CMD_H

#include <stddef.h>

#include "bs.h"

void cmd_line(BsConn *b, const char *line, size_t len);
void cmd_put_body_done(BsConn *b);
/* The engine ended a wait of this connection's worker. */
void cmd_wake(Worker *w, WaitEnd how, Job *j);
/* A reload changed the listener's role or tubes: a reserve waiting while
 * the role no longer reserves answers NOT_ALLOWED; one waiting on a tube
 * it may no longer touch waits again on the tubes left (for the time
 * left), or answers NOT_ALLOWED when none is left. A connection that
 * started with no tube (default was not allowed) and may touch default
 * now uses it unless it has used another since, and watches it unless it
 * has watched another. A replica's link on
 * a listener that may no longer run the handshake is closed. */
void cmd_access_changed(BsConn *b);

#endif
