/*
 * conf.h — the config file (--config FILE): server settings and tube
 * policies (doc/configuration.md; contract: spec/extensions.md §1).
 *
 * Contract: conf_parse() is pure: bytes in, a ConfFile out, or the first
 * error as "FILE:LINE: what is wrong" (one line, printable ASCII) and no
 * ConfFile. conf_load() and conf_readable() are the only parts that touch
 * the file system.
 * conf_validate() adds the checks that need the merged command line (read-
 * behind needs a binlog). conf_policy() resolves a tube's policy key by
 * key: exact section, else the longest matching [tube PREFIX*] that sets
 * the key, else the top level, else the built-in default. It allocates
 * nothing and costs O(log E + log P + d) name comparisons (E exact and P
 * prefix sections, d how deeply the matching prefix sections nest) and
 * one struct copy, because conf_parse() sorts the sections and merges
 * each one with everything above it once. A ConfFile is read-only after
 * parsing, so one may be shared freely until conf_free().
 *
 * Units: durations are stored in milliseconds (fields named *_ms), sizes
 * in bytes.
 */
#ifndef TUBED_CONF_H
#define TUBED_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conflisten.h"
#include "names.h"

/* The tube keys, in the order of the spec's table. */
enum TubeKey {
    TK_MAX_ITEMS,
    TK_MAX_SIZE,
    TK_MAX_ITEM_SIZE,
    TK_DISCARD_OLD_WHEN_FULL,
    TK_MAX_AGE,
    TK_MOVE_EXPIRED_TO,
    TK_MAX_TIMEOUTS,
    TK_FANOUT,
    TK_JOURNAL,
    TK_SYNC_JOURNAL,
    TK_PRIORITY,
    TK_TTR,
    TK_MAX_MEMORY_SIZE,
    TK_COUNT
};

/* The top-level server keys: every command-line option, plus the keys
 * only the file has (allow_shutdown, allow_remote_admin). */
enum ServerKey {
    SK_LISTEN,           /* -l */
    SK_PORT,             /* -p */
    SK_MAX_JOB_SIZE,     /* -z */
    SK_USER,             /* -u */
    SK_BINLOG_DIR,       /* -b */
    SK_FSYNC_MS,         /* -f */
    SK_NO_FSYNC,         /* -F */
    SK_BINLOG_FILE_SIZE, /* -s */
    SK_VERBOSE,          /* -V, a count */
    SK_MAX_CONNECTIONS,
    SK_STALL_TIMEOUT,
    SK_JOB_MEMORY,
    SK_RECOVER,
    SK_MEMCACHE_PORT,
    SK_METRICS_PORT,
    SK_ALLOW_SHUTDOWN,
    SK_MAIN_LISTENER,    /* false: only the [listen] sections listen */
    SK_REPLICA_OF,       /* --replica-of */
    SK_SYNC_REPLICAS,    /* --sync-replicas */
    SK_ALLOW_REMOTE_ADMIN,
    SK_REPL_BACKLOG,     /* --repl-backlog */
    SK_IMPORT_BEANSTALKD, /* --import-beanstalkd */
    SK_COUNT
};

#define CONF_BIT(k) (UINT32_C(1) << (k))

/* The longest duration any key accepts: the protocol's own limit for
 * delays and TTRs (2^32-1 s), which also keeps ms * 10^6 inside int64 ns. */
#define CONF_MAX_DURATION_MS (UINT64_C(4294967295) * 1000)

/* -z's ceiling (beanstalkd's), also the most max_item_size may say. */
#define MAX_JOB_SIZE_LIMIT 1073741824ULL

#define DEFAULT_TUBE_PRIORITY 1024
#define DEFAULT_TUBE_TTR_MS 60000

/* One tube's policy. conf_policy() zeroes the whole struct first (padding
 * and the unused tail of move_expired_to too), so two results compare
 * equal with memcmp exactly when the policies are the same. */
typedef struct TubePolicy {
    uint32_t set;             /* CONF_BIT(TK_x): key x came from the file */
    uint64_t max_items;       /* jobs in every state; 0: no limit */
    uint64_t max_size;        /* body bytes; 0: no limit */
    uint64_t max_age_ms;      /* 0: jobs never expire */
    uint64_t ttr_ms;          /* memcache set's TTR: whole seconds, >= 1000 */
    uint64_t max_memory_size; /* body bytes kept in memory; 0: no limit */
    uint32_t max_item_size;   /* largest body; never above the -z value */
    uint32_t max_timeouts;    /* 0: off */
    uint32_t priority;        /* memcache set's priority */
    bool discard_old_when_full;
    bool fanout;
    bool journal;
    bool sync_journal;
    char move_expired_to[MAX_TUBE_NAME + 1]; /* "": expired jobs are deleted */
} TubePolicy;

/* Server keys as the file gives them; opts.c merges them into a Config
 * (the command line wins). The strings belong to the ConfFile. */
typedef struct ConfServer {
    uint32_t set; /* CONF_BIT(SK_x): the file sets key x */
    char *listen, *user, *binlog_dir, *replica_of, *import_beanstalkd;
    uint32_t sync_replicas;
    uint32_t port, max_job_size, fsync_ms, binlog_file_size, verbose;
    uint32_t max_connections, memcache_port, metrics_port; /* ports: 0 = off */
    uint64_t job_memory, stall_timeout_ms, repl_backlog;
    bool no_fsync, recover, allow_shutdown, main_listener, allow_remote_admin;
} ConfServer;

/* One [tube NAME] or [tube PREFIX*] section; the top level is one too
 * (empty name, line 0). Read-only after conf_parse(). */
typedef struct ConfSection {
    char name[MAX_TUBE_NAME + 1]; /* the name, or the prefix without '*' */
    size_t len;
    bool is_prefix;
    unsigned long line;           /* of its header */
    long parent;                  /* prefix sections: index (in prefix[]) of
                                     the longest other prefix section that
                                     is a prefix of this one; -1: none */
    TubePolicy own;               /* what the section itself sets */
    TubePolicy eff;               /* own, filled from the sections above it
                                     and the top level (no built-in defaults) */
    unsigned long own_line[TK_COUNT], eff_line[TK_COUNT]; /* where each was set */
} ConfSection;

typedef struct ConfFile {
    char *path;                   /* as given, for FILE:LINE messages */
    ConfServer server;
    unsigned long server_line[SK_COUNT];
    ConfSection top;              /* top-level tube keys: defaults for all */
    ConfSection *exact;           /* sorted by name */
    size_t n_exact;
    ConfSection *prefix;          /* sorted by prefix; the same allocation,
                                     right after the exact ones */
    size_t n_prefix;
    ConfListen *listen;           /* [listen NAME] sections, in file order */
    size_t n_listen;
} ConfFile;

/* Parse [buf, buf+len) (any bytes). path only names the file in messages.
 * 0: *out is a new ConfFile. -1: *out is NULL and err holds the first
 * error, "PATH:LINE: what" ("PATH: out of memory" if an allocation failed). */
int conf_parse(const char *path, const char *buf, size_t len, ConfFile **out,
               char *err, size_t errlen);

/* Read the file at path and conf_parse() it. Errors as conf_parse(), or
 * "PATH: cannot read: REASON". Files above 16 MiB are refused. */
int conf_load(const char *path, ConfFile **out, char *err, size_t errlen);

/* Can this process open the file at path as conf_load() does (a reload
 * will)? 0, or -1 with REASON ("Permission denied", "a pipe, not a
 * file") in err. Reads nothing. */
int conf_readable(const char *path, char *err, size_t errlen);

/* The checks that need the merged configuration: max_memory_size without a
 * binlog directory (binlog_dir NULL), or in a policy whose journal is false
 * (wherever each key was set). 0, or -1 with "PATH:LINE: what" in err. */
int conf_validate(const ConfFile *cf, const char *binlog_dir, char *err,
                  size_t errlen);

/* The policy of the tube [name, name+len): see the contract above. cf may
 * be NULL (no config file: every tube gets the built-in defaults, which
 * are beanstalkd's behaviour). max_job_size is the -z value: the default
 * of max_item_size, and its ceiling. */
void conf_policy(const ConfFile *cf, const char *name, size_t len,
                 uint32_t max_job_size, TubePolicy *out);

/* The key's name as written in the file, for messages and stats. */
const char *conf_tube_key_name(int key);
const char *conf_server_key_name(int key);

void conf_free(ConfFile *cf);

#endif
