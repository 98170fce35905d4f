#include "access.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "log.h"

void access_recompute(Server *s, Tube *t)
{
    uint32_t ok = 0;

    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];
        if (!l->restricted || conf_listen_tube_ok(l->conf, t->name, t->name_len))
            ok |= UINT32_C(1) << i;
    }
    t->access_ok = ok;
    t->access_gen = s->access_gen;
}

int access_name(const Listener *l, const char *name, size_t len)
{
    return !l || !l->restricted || conf_listen_tube_ok(l->conf, name, len);
}

size_t access_filter(const Listener *l, Tube **v, Tube *const *list, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        if (access_tube(l, list[i]))
            v[k++] = list[i];
    return k;
}

void access_refused(Conn *c, const char *what)
{
    Listener *l = c->lis;
    int64_t now = clock_mono();

    if (!l)
        return;
    l->refused_cmds++;
    if (l->refusal_logged && now - l->refusal_logged < NS_PER_SEC)
        return;
    l->refusal_logged = now;
    log_info("listener %s: refused %s on fd %d (%llu refused so far)", l->name, what,
             c->ev.fd, (unsigned long long)l->refused_cmds);
}

/* The peer's credentials; -1 if the kernel cannot tell. */
static int peer_cred(int fd, struct ucred *uc)
{
    socklen_t len = sizeof *uc;

    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, uc, &len) < 0 || len != sizeof *uc ? -1 : 0;
}

int access_peer_ok(Listener *l, int fd)
{
    struct ucred uc;
    int known;

    if (!l->peer_check)
        return 1;
    known = peer_cred(fd, &uc) == 0;
    if (known && conf_listen_peer_ok(l->conf, uc.uid, uc.gid))
        return 1;
    l->refused_peers++;
    if (known)
        log_warn("listener %s: refused peer uid %u gid %u pid %ld (not in its users or groups)",
                 l->name, (unsigned)uc.uid, (unsigned)uc.gid, (long)uc.pid);
    else
        log_warn("listener %s: refused a peer whose credentials are unknown", l->name);
    return 0;
}

static const ConfListen *find_section(const ConfFile *cf, const char *name)
{
    for (size_t i = 0; cf && i < cf->n_listen; i++)
        if (!strcmp(cf->listen[i].name, name))
            return &cf->listen[i];
    return NULL;
}

/* What a reload may not change in a section (it needs a new socket). */
static const char *fixed_change(const ConfListen *a, const ConfListen *b)
{
    if (strcmp(a->address, b->address))
        return "address";
    if (a->protocol != b->protocol)
        return "protocol";
    if (a->socket_mode != b->socket_mode)
        return "socket_mode";
    return NULL;
}

int access_reload_check(const Server *s, const ConfFile *next, char *err, size_t errlen)
{
    const ConfFile *cur = s->cfg.conf;
    size_t ncur = cur ? cur->n_listen : 0, nnext = next ? next->n_listen : 0;

    for (size_t i = 0; i < ncur; i++) {
        const ConfListen *a = &cur->listen[i], *b = find_section(next, a->name);
        const char *what;
        if (!b) {
            snprintf(err, errlen, "%s: [listen %s] removed; listeners change only at a restart",
                     s->cfg.config_path, a->name);
            return -1;
        }
        if ((what = fixed_change(a, b))) {
            snprintf(err, errlen, "%s:%lu: [listen %s] %s changed; only role, tubes, users "
                     "and groups change at a reload", s->cfg.config_path, b->line, a->name, what);
            return -1;
        }
    }
    for (size_t i = 0; i < nnext; i++)
        if (!find_section(cur, next->listen[i].name)) {
            snprintf(err, errlen, "%s:%lu: [listen %s] added; listeners change only at a "
                     "restart", s->cfg.config_path, next->listen[i].line, next->listen[i].name);
            return -1;
        }
    return 0;
}

/* Close the open connections of l whose peer its users/groups now refuse. */
static void recheck_peers(Server *s, Listener *l)
{
    List *n, *next;

    for (n = s->conns.next; n != &s->conns; n = next) {
        Conn *c = container_of(n, Conn, link);
        next = n->next;
        if (c->lis == l && !(c->flags & CONN_DEAD) && !access_peer_ok(l, c->ev.fd))
            conn_close(c);
    }
}

/* Waits already parked that a listener's role or tubes no longer allow
 * end or move (the protocol decides how); other commands check at their
 * next run. Every section's connections hear it: a role may have shrunk,
 * or tubes widened, on a listener that is not restricted (any more). */
static void recheck_waits(Server *s)
{
    List *n, *next;

    for (n = s->conns.next; n != &s->conns; n = next) {
        Conn *c = container_of(n, Conn, link);
        next = n->next;
        if (c->lis && c->lis->conf && c->proto->access_changed &&
            !(c->flags & CONN_DEAD))
            c->proto->access_changed(c);
    }
}

void access_reload(Server *s)
{
    for (int i = 0; i < s->nlisteners; i++) {
        Listener *l = &s->listeners[i];
        const ConfListen *lc;
        if (!l->conf)
            continue;
        lc = find_section(s->cfg.conf, l->name);
        l->conf = lc; /* access_reload_check() saw it there */
        l->roles = lc->roles;
        l->restricted = conf_listen_restricted(lc);
        l->peer_check = lc->nusers || lc->ngroups;
        if (l->peer_check)
            recheck_peers(s, l);
    }
    s->access_gen++;
    recheck_waits(s);
}
