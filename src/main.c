/*
 * main.c — tubed: a work-queue server speaking the beanstalk protocol.
 *
 * main wires the layers: the server (event loop, engine, connections),
 * and the front-ends it listens for. Startup order matters: parse flags,
 * bind the sockets (which may need root), drop privileges, then open the
 * binlog and serve.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bsconn.h"
#include "conf.h"
#include "engine.h"
#include "http.h"
#include "log.h"
#include "mcconn.h"
#include "opts.h"
#include "priv.h"
#include "repl.h"
#include "sd.h"
#include "serve.h"
#include "stats.h"

/* Socket activation handed over a socket of this name (the sockets are
 * read by the first server_listen()). */
static int inherited_named(const Server *s, const char *name)
{
    for (int i = 0; i < s->sd_n && i < SERVER_MAX_LISTENERS; i++)
        if (strcmp(s->sd_names[i], name) == 0)
            return 1;
    return 0;
}

/* The [listen] sections of the config file: each its own listener, of
 * its protocol, with its role and tubes. The memcache and HTTP fronts are
 * set up once, for their own ports and the sections alike. */
static int listen_sections(Server *s, Beanstalk *bs, Memcache *mc, Http *http)
{
    const ConfFile *cf = s->cfg.conf;

    for (size_t i = 0; cf && i < cf->n_listen; i++) {
        const ConfListen *lc = &cf->listen[i];
        const Proto *p = &bs->proto;

        if (lc->protocol == LP_MEMCACHE) {
            if (!mc->srv && memcache_init(mc, s) < 0)
                return -1;
            p = &mc->proto;
        } else if (lc->protocol == LP_HTTP) {
            if (!http->srv && http_init(http, s, bs_stats_source(bs)) < 0)
                return -1;
            p = &http->proto;
        }
        if (server_listen_section(s, p, lc) < 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static Server srv; /* large (event array); not on the stack */
    static Beanstalk beanstalk;
    static Memcache memcache;
    static Http http;
    Config cfg;
    char err[1024];
    int r;

    opts_defaults(&cfg);
    r = opts_parse(&cfg, argc, argv, stdout, err, sizeof err);
    if (r == OPTS_EXIT_OK)
        return 0;
    if (r == OPTS_HELP) { /* beanstalkd's -h: usage on stderr, status 0 */
        opts_usage(stderr, argv[0]);
        return 0;
    }
    if (r == OPTS_ERROR) {
        fprintf(stderr, "tubed: %s\n", err);
        opts_usage(stderr, argv[0]);
        return 2;
    }
    if (r == OPTS_CONFIG_ERROR) { /* "FILE:LINE: what", nothing served */
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    log_verbosity = cfg.verbosity;
    if (server_init(&srv, &cfg) < 0)
        return 1;
    beanstalk_init(&beanstalk, &srv);
    /* main_listener = false: only the [listen] sections listen. */
    if (!cfg.no_main_listener && server_listen(&srv, &beanstalk.proto, NULL, cfg.port) < 0)
        return 1;
    /* kestrel's memcache dialect on its own port (or the inherited socket
     * named "memcache"); the same engine behind both. */
    if ((cfg.memcache_port || inherited_named(&srv, "memcache")) &&
        (memcache_init(&memcache, &srv) < 0 ||
         server_listen(&srv, &memcache.proto, "memcache", cfg.memcache_port) < 0))
        return 1;
    /* HTTP: /metrics, /healthz, the status page (or the inherited socket
     * named "metrics"). */
    if ((cfg.metrics_port || inherited_named(&srv, "metrics")) &&
        (http_init(&http, &srv, bs_stats_source(&beanstalk)) < 0 ||
         server_listen(&srv, &http.proto, "metrics", cfg.metrics_port) < 0))
        return 1;
    if (listen_sections(&srv, &beanstalk, &memcache, &http) < 0)
        return 1;
    if (cfg.user && priv_drop(cfg.user, err, sizeof err) < 0) {
        log_err("cannot drop privileges: %s", err);
        return 1;
    }
    /* Every reload reads the file again as USER: say now, not at the
     * first SIGHUP, that it cannot. */
    if (cfg.user && cfg.config_path && conf_readable(cfg.config_path, err, sizeof err) < 0)
        log_warn("user %s cannot read %s (%s): every reload will fail until it can",
                 cfg.user, cfg.config_path, err);
    /* After the privilege drop: the binlog belongs to the service user. */
    if (cfg.binlog_dir && engine_open_binlog(&srv.eng, err, sizeof err) < 0) {
        log_err("%s", err);
        return 1;
    }
    repl_start(&srv); /* tap the binlog; a replica connects */
    log_info("tubed %s started, pid %ld", TUBED_VERSION, (long)getpid());
    /* Ready only now: the binlog is replayed and the sockets listen. */
    sd_notifyf("READY=1\nSTATUS=serving %zu jobs%s", srv.eng.jobs.len,
               srv.eng.binlog.enabled ? " (binlog replayed)" : "");
    r = server_run(&srv);
    server_free(&srv);
    if (memcache.srv)
        memcache_free(&memcache);
    if (http.srv)
        http_free(&http);
    opts_free(&srv.cfg); /* the server's copy is the live one */
    log_info("stopped");
    return r < 0 ? 1 : 0;
}
