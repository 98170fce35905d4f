/*
 * conflisten.h — the config file's [listen NAME] sections: more listeners,
 * each with a role and the tubes it may touch (spec access.md §1).
 *
 * Contract: conf.c hands each key of a [listen] section to
 * conf_listen_key(), which checks and stores its value or describes what is
 * wrong (no FILE:LINE: the caller adds it). conf_listen_finish() checks a
 * whole file's sections (address given, users only on Unix sockets, no two
 * listeners on one address) and returns the line of the first problem.
 * conf_listen_resolve() and conf_listen_clash() are the only parts that
 * ask the system (user and group names through getpwnam/getgrnam, host
 * names through getaddrinfo, so that "localhost" and "127.0.0.1" on one
 * port are one address); conf_load() calls the first, so conf_parse()
 * stays pure. A ConfListen is read-only once its file is
 * parsed; the running server points at the one of the live file.
 *
 * Matching: conf_listen_tube_ok() tells whether a tube name is allowed by
 * the section's `tubes` (every tube when it has none): a name is allowed if
 * it equals a pattern without '*' or starts with the part before a
 * trailing '*'. It allocates nothing.
 */
#ifndef TUBED_CONFLISTEN_H
#define TUBED_CONFLISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "names.h"

/* A buffer for a value shown in a configuration error (the file's, a
 * [listen] section's, the user's): ascii_text_cut() into it shows at most
 * 40 bytes of printable ASCII, "..." when cut. */
#define CONF_QUOTED_SIZE (40 + 4)

/* The roles, as bits: a listener's role is their union. */
enum {
    ROLE_READ = 1u << 0,
    ROLE_PRODUCER = 1u << 1,
    ROLE_WORKER = 1u << 2,
    ROLE_ADMIN = 1u << 3,
    ROLE_ALL = ROLE_READ | ROLE_PRODUCER | ROLE_WORKER | ROLE_ADMIN,
};

/* A front-end's decisions: which roles may run each command word. */
typedef struct RoleRow {
    const char *word;
    uint8_t roles;
} RoleRow;

/* The roles of word in rows[0..n), 0 when it has no row. */
unsigned role_rows_find(const RoleRow *rows, size_t n, const char *word);
/* allow[t] = the roles of name(t), for t in [first, count); a command
 * without a row is admin-only. How many had no row. */
size_t role_rows_fill(const RoleRow *rows, size_t n, uint8_t *allow, int first, int count,
                      const char *(*name)(int t));
/* Row i's word and roles, NULL past the end (tests walk the table). */
const char *role_rows_at(const RoleRow *rows, size_t n, size_t i, unsigned *roles);

typedef enum ListenProto {
    LP_BEANSTALK,
    LP_MEMCACHE,
    LP_HTTP,
} ListenProto;

/* The keys of a [listen] section, in the spec's order. */
enum ListenKey {
    LK_ADDRESS,
    LK_PROTOCOL,
    LK_ROLE,
    LK_TUBES,
    LK_USERS,
    LK_GROUPS,
    LK_SOCKET_MODE,
    LK_COUNT
};

#define CONF_MAX_LISTEN 24       /* [listen] sections in one file */
#define LISTEN_NAME_MAX 32       /* bytes of NAME */
#define LISTEN_MAX_IDS 32        /* entries of users, and of groups */
#define LISTEN_MAX_PATTERNS 64   /* entries of tubes */
#define LISTEN_ADDR_MAX 256      /* bytes of address */

typedef struct TubePattern {
    uint8_t len;                 /* of name (the prefix, for a pattern) */
    bool is_prefix;              /* written as PREFIX* */
    char name[MAX_TUBE_NAME + 1];
} TubePattern;

/* A user or group as written: a number, or a name resolved at load. */
typedef struct ListenId {
    char name[33];               /* "" when written as a number */
    uint32_t id;
} ListenId;

typedef struct ConfListen {
    char name[LISTEN_NAME_MAX + 1];
    unsigned long line;          /* of its header */
    unsigned long key_line[LK_COUNT];
    uint32_t set;                /* bit LK_x: the section sets key x */
    char address[LISTEN_ADDR_MAX + 1]; /* as written */
    char host[LISTEN_ADDR_MAX + 1];    /* TCP: the host ("" any IPv4); unix: "unix:/path" */
    int port;                    /* TCP port; 0 for a Unix socket */
    bool is_unix;
    uint8_t protocol;            /* ListenProto */
    uint8_t roles;               /* ROLE_* bits; admin by default */
    uint32_t socket_mode;        /* 0660 by default */
    TubePattern *tubes;          /* NULL, ntubes 0: every tube */
    size_t ntubes;
    ListenId users[LISTEN_MAX_IDS], groups[LISTEN_MAX_IDS];
    size_t nusers, ngroups;
} ConfListen;

/* Start a section: its defaults. name must be 1..LISTEN_NAME_MAX bytes of
 * letters, digits, '-' and '_' (else -1 and why). */
int conf_listen_start(ConfListen *l, const char *name, size_t len, unsigned long line,
                      char *why, size_t whylen);
/* key = value of a section. 0, or -1 with why ("unknown key ...", "bad
 * value ..."); -2: out of memory. */
int conf_listen_key(ConfListen *l, const char *key, size_t kn, const char *v, size_t vn,
                    unsigned long line, char *why, size_t whylen);
/* Whole-file checks; 0, or the line of the first problem with why. */
unsigned long conf_listen_finish(const ConfListen *ls, size_t n, char *why, size_t whylen);
/* The section that listens where another listener, named who in the
 * message, does (host NULL or "unix:/path" as -l takes it); 0, or its line
 * with why. */
unsigned long conf_listen_clash(const ConfListen *ls, size_t n, const char *host, int port,
                                const char *who, char *why, size_t whylen);
/* Names of users and groups to numbers, and no two sections on one
 * address once host names are looked up; 0, or the line of the first
 * unknown name or clash with why. */
unsigned long conf_listen_resolve(ConfListen *ls, size_t n, char *why, size_t whylen);
void conf_listen_free(ConfListen *ls, size_t n);

bool conf_listen_tube_ok(const ConfListen *l, const char *name, size_t len);
/* Some tube is outside the section's tubes (it has tubes, and none of
 * them is "*"): only then need commands check. */
bool conf_listen_restricted(const ConfListen *l);
/* A peer of this uid and gid may connect (users/groups, else anyone). */
bool conf_listen_peer_ok(const ConfListen *l, uint32_t uid, uint32_t gid);

/* "producer,worker" into buf; "" for no role. */
const char *conf_role_text(unsigned roles, char *buf, size_t cap);
const char *conf_proto_name(int protocol);
/* The tubes as written ("*" for every tube) into buf, comma-separated. */
const char *conf_tubes_text(const ConfListen *l, char *buf, size_t cap);

#endif
