#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "alloc.h"
#include "clock.h"
#include "conn.h"
#include "log.h"
#include "net.h"
#include "repl.h"
#include "sd.h"

static void on_wake(void *arg)
{
    Server *s = arg;

    s->eng.now = s->loop.now;
}

/* The loop woke for the engine's timers or a stall check: the loop runs
 * engine_tick() and conn_check_stalled() after every wake-up anyway. */
static void on_due(EvTimer *t)
{
    (void)t;
}

static void make_instance_id(Server *s)
{
    unsigned char r[8];

    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        uint64_t x = (uint64_t)clock_wall() ^ ((uint64_t)getpid() << 32);
        memcpy(r, &x, sizeof r);
    }
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(s->instance_id + 2 * i, 3, "%02x", r[i]);
}

/* ---- accepting -------------------------------------------------------- */

/* Out of descriptors: give up the spare one to accept and close the
 * oldest pending connection, so clients see a close instead of hanging in
 * the backlog and the loop does not spin on a readable listener. */
static void shed_one(Server *s, int lfd)
{
    int fd;

    if (s->spare_fd >= 0) {
        close(s->spare_fd);
        s->spare_fd = -1;
    }
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void refuse(int fd, const Proto *p)
{
    /* Best effort: the client learns why before the close. */
    if (p->refusal && send(fd, p->refusal, strlen(p->refusal),
                           MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        (void)0;
    close(fd);
}

static void on_accept(EvSource *src, uint32_t events)
{
    Listener *l = container_of(src, Listener, ev);
    Server *s = l->srv;

    for (int i = 0; i < 64; i++) {
        int fd = net_accept(src->fd);
        Conn *c;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                log_warn("accept: %s; closing a new connection", strerror(errno));
                shed_one(s, src->fd);
            } else if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            return;
        }
        /* A peer its users/groups do not name is closed without a word. */
        if (!access_peer_ok(l, fd)) {
            close(fd);
            continue;
        }
        if (s->cfg.max_connections && s->conn_ct >= s->cfg.max_connections) {
            refuse(fd, l->proto);
            continue;
        }
        c = conn_new_on(s, fd, l);
        if (!c) {
            log_warn("out of memory for a new connection; closing it");
            refuse(fd, l->proto);
            continue;
        }
        log_msg(LOG_CONN, "fd %d: accepted", fd);
    }
}

/* lc NULL: an admin listener on every tube, named name. */
static int add_listener(Server *s, int fd, const Proto *p, const char *name,
                        const ConfListen *lc)
{
    Listener *l;

    if (s->nlisteners == SERVER_MAX_LISTENERS) {
        log_err("too many listening sockets (at most %d)", SERVER_MAX_LISTENERS);
        close(fd);
        return -1;
    }
    l = &s->listeners[s->nlisteners];
    memset(l, 0, sizeof *l);
    l->srv = s;
    l->proto = p;
    l->index = (uint8_t)s->nlisteners;
    l->ev.handler = on_accept;
    l->roles = ROLE_ADMIN;
    if (lc) {
        l->conf = lc;
        l->roles = lc->roles;
        l->restricted = conf_listen_restricted(lc);
        l->peer_check = lc->nusers || lc->ngroups;
    }
    snprintf(l->name, sizeof l->name, "%s", lc ? lc->name : name);
    if (ev_add(&s->loop, &l->ev, fd, EPOLLIN) < 0) {
        log_err("epoll_ctl: %s", strerror(errno));
        close(fd);
        return -1;
    }
    s->nlisteners++;
    s->access_gen++; /* a new listener: every tube's cached answer is stale */
    net_describe(fd, l->address, sizeof l->address);
    if (lc)
        log_info("listening on %s (listener %s: %s)", l->address, l->name, p->name);
    else
        log_info("listening on %s", l->address);
    return 0;
}

/* Socket activation hands over every socket at once: read them once,
 * each with its name, and let each front-end take its own. */
static int inherited(Server *s)
{
    if (!s->sd_read) {
        s->sd_read = 1;
        s->sd_n = sd_listen_fds(s->sd_names, SERVER_MAX_LISTENERS);
        if (s->sd_n < 0) {
            log_err("socket activation: bad LISTEN_FDS/LISTEN_PID: %s", strerror(errno));
            return -1;
        }
        if (s->sd_n > SERVER_MAX_LISTENERS) {
            log_err("socket activation: %d sockets, at most %d", s->sd_n,
                    SERVER_MAX_LISTENERS);
            return -1;
        }
    }
    return s->sd_n;
}

/* A [listen] section of the live config file is named name. */
static int section_named(const Server *s, const char *name)
{
    const ConfFile *cf = s->cfg.conf;

    for (size_t i = 0; cf && i < cf->n_listen; i++)
        if (!strcmp(cf->listen[i].name, name))
            return 1;
    return 0;
}

/* The inherited sockets a listener of this name takes: exactly its name,
 * or for the beanstalk listener (name NULL) every socket not named for
 * another front-end nor for a [listen] section (which takes it with its
 * own role and tubes: the admin listener must not serve it). */
static int takes(const Server *s, const char *have, const char *want)
{
    if (want)
        return strcmp(have, want) == 0;
    return strcmp(have, "memcache") != 0 && strcmp(have, "metrics") != 0 &&
           !section_named(s, have);
}

int server_listen(Server *s, const Proto *p, const char *name, int port)
{
    char err[256];
    int n = inherited(s), fd, adopted = 0;

    if (n < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!takes(s, s->sd_names[i], name))
            continue;
        if (add_listener(s, SD_LISTEN_FDS_START + i, p,
                         s->sd_names[i][0] ? s->sd_names[i] : "main", NULL) < 0)
            return -1;
        adopted++;
    }
    if (adopted) {
        if (s->cfg.addr_given && !name)
            log_warn("socket activation: -l/-p ignored, using %d inherited socket%s",
                     adopted, adopted == 1 ? "" : "s");
        return 0;
    }
    if (n > 0 && !name)
        return 0; /* every inherited socket is named for another listener */
    /* -l (or listen =) as beanstalkd binds it: an IPv6 socket keeps the
     * system's dual-stack default, so "-l ::" serves IPv4 clients too. */
    fd = net_listen_v6(s->cfg.listen_addr, port, 0, err, sizeof err);
    if (fd < 0) {
        log_err("cannot listen for %s: %s", p->name, err);
        return -1;
    }
    return add_listener(s, fd, p, name ? name : "main", NULL);
}

int server_listen_section(Server *s, const Proto *p, const ConfListen *lc)
{
    char err[256];
    /* A Unix socket file is made with socket_mode's bits at most: between
     * bind() and the chmod() below it must not let in more peers than
     * the mode does (listen() is called in between). */
    mode_t old = 0;
    int fd, n = inherited(s);

    if (n < 0)
        return -1;
    /* Socket activation: the socket named after the section is its own
     * (systemd made it, with its own address and mode). */
    for (int i = 0; i < n; i++)
        if (!strcmp(s->sd_names[i], lc->name))
            return add_listener(s, SD_LISTEN_FDS_START + i, p, NULL, lc);
    if (lc->is_unix)
        old = umask((mode_t)(~lc->socket_mode & 0777));
    fd = net_listen(lc->is_unix || lc->host[0] ? lc->host : NULL, lc->port, err, sizeof err);
    if (lc->is_unix)
        umask(old);
    if (fd < 0) {
        log_err("cannot listen for [listen %s] on %s: %s", lc->name, lc->address, err);
        return -1;
    }
    /* Who may open the socket file is the first gate of a Unix listener. */
    if (lc->is_unix && chmod(lc->host + 5, (mode_t)lc->socket_mode) < 0) {
        log_err("[listen %s]: chmod %s: %s", lc->name, lc->host + 5, strerror(errno));
        close(fd);
        return -1;
    }
    return add_listener(s, fd, p, NULL, lc);
}

/* ---- signals ---------------------------------------------------------- */

/* The write end of the self-pipe. The handler's only state: a handler can
 * reach nothing else, and all it does is pass the signal number on. */
static int sig_pipe_w = -1;

static void on_sig(int signo)
{
    int saved = errno;
    unsigned char b = (unsigned char)signo;

    /* A full pipe drops the byte: the loop is that far behind anyway. */
    if (write(sig_pipe_w, &b, 1) < 0)
        (void)0;
    errno = saved;
}

static void handle_signal(Server *s, int signo)
{
    switch (signo) {
    case SIGUSR1:
        if (!s->draining)
            log_info("SIGUSR1: entering drain mode");
        s->draining = 1;
        sd_notify("STATUS=draining: put answers DRAINING");
        break;
    case SIGUSR2:
        if (s->draining)
            log_info("SIGUSR2: leaving drain mode");
        s->draining = 0;
        sd_notify("STATUS=serving");
        break;
    case SIGHUP:
        server_reload(s, NULL, 0);
        break;
    case SIGTERM:
    case SIGINT:
        log_info("%s: shutting down", signo == SIGTERM ? "SIGTERM" : "SIGINT");
        s->stopping = 1;
        break;
    }
}

static void on_signal(EvSource *src, uint32_t events)
{
    Server *s = container_of(src, Server, sig);
    unsigned char buf[64];
    ssize_t n;

    /* In arrival order, so SIGUSR1 then SIGUSR2 ends undrained. */
    while ((n = read(src->fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            handle_signal(s, buf[i]);
}

/* Signals come through a self-pipe into the loop; handlers only write the
 * signal number. (A signalfd would do too, but valgrind cannot deliver
 * to one, and the suite runs under valgrind.) */
static int open_signals(Server *s)
{
    static const int sigs[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP};
    struct sigaction sa;
    int p[2];

    signal(SIGPIPE, SIG_IGN);
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
        return -1;
    sig_pipe_w = p[1];
    s->sig_pipe_w = p[1];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* An interrupt ignored by whoever started us (a shell's background
         * job, `beanstalkd &` in a script) stays ignored, as it does for
         * beanstalkd, which leaves SIGINT alone: a Ctrl-C meant for the
         * terminal's foreground job must not stop the queue. */
        if (sigs[i] == SIGINT && sigaction(SIGINT, NULL, &old) == 0 &&
            old.sa_handler == SIG_IGN)
            continue;
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -1;
    }
    s->sig.handler = on_signal;
    return ev_add(&s->loop, &s->sig, p[0], EPOLLIN);
}

/* ---- reload ----------------------------------------------------------- */

int server_reload(Server *s, char *err, size_t errlen)
{
    char buf[512], note[256] = "", kept[256] = "";
    ConfFile *next;

    if (!err) {
        err = buf;
        errlen = sizeof buf;
    }
    if (!s->cfg.config_path) {
        log_info("reload: no --config file; nothing to reload");
        return 0;
    }
    if (opts_reload(&s->cfg, &next, err, errlen) < 0) {
        log_err("reload: %s; the old configuration stays in force", err);
        return -1;
    }
    /* Listeners open only at start: a reload that would add, remove or
     * move one is refused whole. */
    if (access_reload_check(s, next, err, errlen) < 0) {
        conf_free(next);
        log_err("reload: %s; the old configuration stays in force", err);
        return -1;
    }
    /* Applying cannot fail half-way: what it needs is taken first. */
    if (next && engine_reload_prepare(&s->eng, next) < 0) {
        conf_free(next);
        snprintf(err, errlen, "%s: out of memory", s->cfg.config_path);
        log_err("reload: %s; the old configuration stays in force", err);
        return -1;
    }
    opts_reload_apply(&s->cfg, next, note, sizeof note, kept, sizeof kept);
    log_verbosity = s->cfg.verbosity;
    engine_reload(&s->eng);
    access_reload(s); /* role, tubes, users, groups: at once, open connections too */
    repl_reloaded(s);
    log_info("reloaded %s", s->cfg.config_path);
    if (note[0])
        log_warn("reload: %s changed in %s; that takes effect at the next restart",
                 note, s->cfg.config_path);
    if (kept[0])
        log_warn("reload: %s in %s differs from the command line, whose value stays "
                 "(the command line wins over the file)", kept, s->cfg.config_path);
    return 0;
}

/* ---- life cycle ------------------------------------------------------- */

static void on_durable(void *arg, uint64_t upto)
{
    repl_durable(arg, upto); /* replicas may have to have it too */
}

static void on_lost(void *arg, uint64_t from)
{
    conn_lost(arg, from);
}

int server_init(Server *s, const Config *cfg)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->spare_fd = -1;
    s->sig.fd = -1;
    s->sig_pipe_w = -1;
    s->loop.epfd = -1;
    s->access_gen = 1; /* a new tube's 0 is never current */
    list_init(&s->conns);
    list_init(&s->pending_out);
    list_init(&s->dead);
    list_init(&s->held);
    list_init(&s->stalled);
    make_instance_id(s);
    /* The loop first: the engine posts on it and arms its eventfds. */
    if (ev_init(&s->loop) < 0) {
        log_err("epoll_create: %s", strerror(errno));
        return -1;
    }
    ev_timer_init(&s->due, on_due);
    if (engine_init(&s->eng, &s->cfg, &s->loop) < 0 ||
        !(s->scratch = tb_malloc(SCRATCH_SIZE))) {
        log_err("out of memory at startup");
        return -1;
    }
    s->eng.hooks = (EngineHooks){on_durable, on_lost, s};
    if (repl_init(s) < 0) {
        log_err("out of memory at startup");
        return -1;
    }
    s->loop.on_wake = on_wake;
    s->loop.wake_arg = s;
    if (open_signals(s) < 0) {
        log_err("signal pipe: %s", strerror(errno));
        return -1;
    }
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return 0;
}

static void free_dead(Server *s)
{
    List *n;

    while ((n = list_first(&s->dead)))
        conn_free(container_of(n, Conn, link));
}

/* Wake for the engine's next timer or the next stall check. */
static void arm_due(Server *s)
{
    int64_t due = engine_next_due(&s->eng), st = conn_next_stall(s);
    int64_t rd = repl_next_due(s);

    if (st < due)
        due = st;
    ev_timer_set(&s->loop, &s->due, rd < due ? rd : due);
}

int server_run(Server *s)
{
    while (!s->stopping) {
        /* What the tick and the stall check made ready, or ended, is
         * delivered before this iteration's records are written. */
        ev_run_posted(&s->loop);
        engine_commit(&s->eng);
        repl_tick(s); /* snapshots, acknowledgements, reconnects */
        conn_flush_all(s);
        free_dead(s);
        arm_due(s);
        /* Replies still to send (a full socket buffer), or a snapshot to go
         * on with: look again at once. */
        if (ev_poll(&s->loop, list_empty(&s->pending_out) && !repl_busy(s) ? -1 : 0) < 0) {
            log_err("epoll_wait: %s", strerror(errno));
            return -1;
        }
        engine_tick(&s->eng);
        conn_check_stalled(s);
    }
    /* Stopping: no new connections; the replies already made go out, the
     * binlog is synced by server_free(). */
    sd_notify("STOPPING=1\nSTATUS=stopping");
    for (int i = 0; i < s->nlisteners; i++)
        ev_del(&s->loop, &s->listeners[i].ev);
    ev_run_posted(&s->loop);
    engine_commit(&s->eng);
    engine_settle(&s->eng);
    conn_flush_all(s);
    free_dead(s);
    return 0;
}

void server_free(Server *s)
{
    List *n;

    while ((n = list_first(&s->conns)))
        conn_close(container_of(n, Conn, link));
    free_dead(s);
    engine_commit(&s->eng); /* conns closing released jobs; nothing new to log */
    for (int i = 0; i < s->nlisteners; i++)
        close(s->listeners[i].ev.fd);
    if (s->sig.fd >= 0)
        close(s->sig.fd);
    if (s->sig_pipe_w >= 0)
        close(s->sig_pipe_w);
    if (s->spare_fd >= 0)
        close(s->spare_fd);
    repl_free(s); /* its links went with their connections */
    ev_close(&s->loop);
    engine_free(&s->eng);
    tb_free(s->scratch);
}
