/*
 * access.h — who may do what through a listener (spec access.md): the role
 * check, the tube check, refused peers, and the refusal counters.
 *
 * Contract: a connection accepted on a [listen] section's listener has
 * c->lis set; one with c->lis NULL (the -l/-p, memcache and metrics
 * listeners, and test harnesses) may run every command on every tube.
 * - access_role(c, allowed): a bitmask test of the listener's roles
 *   against the roles that may run a command.
 * - access_tube(l, t): whether listener l may touch tube t. The answer is
 *   cached in the tube per server generation (Tube.access_gen/access_ok),
 *   so a command pays for pattern matching once per tube and reload, not
 *   once per command; unrestricted listeners never look.
 * - access_name(l, name, len): the same for a name that may not be a tube
 *   yet (use, watch).
 * - access_refused(c, what): count a refused command on its listener and
 *   log it, at most once a second per listener.
 * - access_peer_ok(l, fd): at accept, a Unix-socket listener with users or
 *   groups lets only those peers in (SO_PEERCRED); others are logged with
 *   uid and pid, counted, and the caller closes them.
 * - access_reload_check() refuses a reload that adds, removes or changes a
 *   [listen] section beyond role, tubes, users and groups; access_reload()
 *   points the listeners at the new file, bumps the generation and closes
 *   open connections of peers no longer allowed.
 */
#ifndef TUBED_ACCESS_H
#define TUBED_ACCESS_H

#include <stddef.h>

#include "conn.h"
#include "server.h"
#include "tube.h"

void access_recompute(Server *s, Tube *t);

static inline int access_role(const Conn *c, unsigned allowed)
{
    return !c->lis || (c->lis->roles & allowed);
}

static inline int access_tube(const Listener *l, Tube *t)
{
    if (!l || !l->restricted)
        return 1;
    if (t->access_gen != l->srv->access_gen)
        access_recompute(l->srv, t);
    return (int)(t->access_ok >> l->index) & 1;
}

static inline int access_restricted(const Conn *c)
{
    return c->lis && c->lis->restricted;
}

int access_name(const Listener *l, const char *name, size_t len);
/* Copy to v the tubes of list[0, n) l may touch; returns how many. */
size_t access_filter(const Listener *l, Tube **v, Tube *const *list, size_t n);
void access_refused(Conn *c, const char *what);
int access_peer_ok(Listener *l, int fd);

int access_reload_check(const Server *s, const ConfFile *next, char *err, size_t errlen);
void access_reload(Server *s);

#endif
