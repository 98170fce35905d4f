/*
 * serve.h — running the server: build it, listen, loop, free.
 *
 * Contract: server_init() builds an empty server (engine included) from a
 * Config and opens the signal pipe; server_listen() adds listening sockets
 * for one front-end's Proto; server_run() loops until SIGTERM/SIGINT and
 * returns 0 (-1 if epoll fails); SIGHUP reloads the config file
 * (server_reload); server_free() closes every connection,
 * syncs and closes the binlog, and frees everything. server.h describes
 * one loop iteration.
 */
#ifndef TUBED_SERVE_H
#define TUBED_SERVE_H

#include "conn.h"
#include "opts.h"
#include "server.h"

int server_init(Server *s, const Config *cfg);
/* Listen for protocol p: on the inherited sockets of socket activation
 * named `name` (NULL: the beanstalk listener, which takes every socket not
 * named "memcache", "metrics" or after a [listen] section), else on cfg's
 * address and this port. -1 (logged) on error. */
int server_listen(Server *s, const Proto *p, const char *name, int port);
/* Listen as the [listen] section lc says (its address, role, tubes,
 * users, groups, socket_mode), for protocol p; under socket activation
 * an inherited socket named after the section is taken instead of its
 * address. -1 (logged) on error. */
int server_listen_section(Server *s, const Proto *p, const ConfListen *lc);
int server_run(Server *s);
/* Read the config file again (SIGHUP, memcache reload) and put it in
 * force: 0, or -1 with "FILE:LINE: what" in err (logged; the old one stays). */
int server_reload(Server *s, char *err, size_t errlen);
void server_free(Server *s);

#endif
