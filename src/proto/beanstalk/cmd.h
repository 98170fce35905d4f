/*
 * cmd.h — command handlers: one function per protocol command.
 *
 * Contract: cmd_line() takes one complete request line (without "\r\n")
 * from a connection in state CMD, parses it with parse_command() and runs
 * the handler, which queues exactly one reply — except put, which moves the
 * connection to BODY (or DISCARD) and replies from cmd_put_body_done() once
 * the body is in, reserve, which may wait, and quit, which closes.
 */
#ifndef TUBED_CMD_H
#define TUBED_CMD_H

#include <stddef.h>

#include "conn.h"

void cmd_line(Conn *c, const char *line, size_t len);
void cmd_put_body_done(Conn *c);

#endif
