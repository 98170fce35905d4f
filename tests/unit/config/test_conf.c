/* Unit tests for conf.c: the config file's syntax, every key and value
 * form, every error with its line and exact text, the precedence of
 * sections (also against a brute-force model), the checks that need the
 * command line, reading the file, and allocation failure. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "unit.h"

#define MJS 65535 /* the default -z */

static ConfFile *parse_ok(const char *text)
{
    ConfFile *cf = NULL;
    char err[512] = "";

    if (conf_parse("t.conf", text, strlen(text), &cf, err, sizeof err) < 0)
        ck_abort_msg("parse failed: %s\n--- input:\n%s", err, text);
    ck_assert_ptr_nonnull(cf);
    return cf;
}

/* The text must be refused with exactly this message. */
static void parse_err_n(const char *text, size_t len, const char *want)
{
    ConfFile *cf = (ConfFile *)&cf;
    char err[512] = "";

    ck_assert_int_eq(conf_parse("t.conf", text, len, &cf, err, sizeof err), -1);
    ck_assert_ptr_null(cf);
    ck_assert_msg(!strcmp(err, want), "input:\n%.*s\ngot:  %s\nwant: %s", (int)len, text,
                  err, want);
}

static void parse_err(const char *text, const char *want)
{
    parse_err_n(text, strlen(text), want);
}

static TubePolicy policy(const ConfFile *cf, const char *name)
{
    TubePolicy p;

    conf_policy(cf, name, strlen(name), MJS, &p);
    return p;
}

static void check_defaults(const TubePolicy *p, uint32_t mjs)
{
    ck_assert_uint_eq(p->set, 0);
    ck_assert_uint_eq(p->max_items, 0);
    ck_assert_uint_eq(p->max_size, 0);
    ck_assert_uint_eq(p->max_item_size, mjs);
    ck_assert(!p->discard_old_when_full);
    ck_assert_uint_eq(p->max_age_ms, 0);
    ck_assert_str_eq(p->move_expired_to, "");
    ck_assert_uint_eq(p->max_timeouts, 0);
    ck_assert(!p->fanout);
    ck_assert(p->journal);
    ck_assert(!p->sync_journal);
    ck_assert_uint_eq(p->priority, 1024);
    ck_assert_uint_eq(p->ttr_ms, 60000);
    ck_assert_uint_eq(p->max_memory_size, 0);
}

/* ---- syntax and values ------------------------------------------------ */

START_TEST(empty_and_no_file)
{
    static const char *const texts[] = {"", "\n", "\n\n  \n\t\n", "# only a comment",
                                        "   # indented\r\n\r\n"};
    TubePolicy p;

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        ConfFile *cf = parse_ok(texts[i]);
        ck_assert_uint_eq(cf->server.set, 0);
        ck_assert_uint_eq(cf->n_exact + cf->n_prefix, 0);
        p = policy(cf, "default");
        check_defaults(&p, MJS);
        conf_free(cf);
    }
    /* No file at all: the built-in defaults, which are beanstalkd's. */
    conf_policy(NULL, "x", 1, 100, &p);
    check_defaults(&p, 100);
    conf_free(NULL);
}
END_TEST

START_TEST(every_tube_key)
{
    ConfFile *cf = parse_ok("max_items = 100000\n"
                            "max_size = 10M\n"
                            "max_item_size = 1K\n"
                            "discard_old_when_full = true\n"
                            "max_age = 7d\n"
                            "move_expired_to = reports-expired\n"
                            "max_timeouts = 3\n"
                            "fanout = true\n"
                            "journal = false\n"
                            "sync_journal = true\n"
                            "priority = 7\n"
                            "ttr = 2m\n"
                            "max_memory_size = 2G\n");
    TubePolicy p = policy(cf, "anything");

    ck_assert_uint_eq(p.set, (1u << TK_COUNT) - 1);
    ck_assert_uint_eq(p.max_items, 100000);
    ck_assert_uint_eq(p.max_size, 10485760);
    ck_assert_uint_eq(p.max_item_size, 1024);
    ck_assert(p.discard_old_when_full);
    ck_assert_uint_eq(p.max_age_ms, 7ULL * 86400 * 1000);
    ck_assert_str_eq(p.move_expired_to, "reports-expired");
    ck_assert_uint_eq(p.max_timeouts, 3);
    ck_assert(p.fanout);
    ck_assert(!p.journal);
    ck_assert(p.sync_journal);
    ck_assert_uint_eq(p.priority, 7);
    ck_assert_uint_eq(p.ttr_ms, 120000);
    ck_assert_uint_eq(p.max_memory_size, 2147483648ULL);
    conf_free(cf);
}
END_TEST

/* A value read at the top level through key: the policy's field. */
static uint64_t tube_value(const char *key, const char *value)
{
    char text[512];
    ConfFile *cf;
    TubePolicy p;

    snprintf(text, sizeof text, "%s = %s\n", key, value);
    cf = parse_ok(text);
    conf_policy(cf, "t", 1, 1073741824, &p);
    conf_free(cf);
    if (!strcmp(key, "max_size"))
        return p.max_size;
    if (!strcmp(key, "max_age"))
        return p.max_age_ms;
    if (!strcmp(key, "ttr"))
        return p.ttr_ms;
    if (!strcmp(key, "max_item_size"))
        return p.max_item_size;
    if (!strcmp(key, "fanout"))
        return p.fanout;
    if (!strcmp(key, "max_items"))
        return p.max_items;
    if (!strcmp(key, "priority"))
        return p.priority;
    ck_abort_msg("no field for %s", key);
    return 0;
}

START_TEST(value_forms)
{
    static const struct { const char *key, *value; uint64_t want; } cases[] = {
        {"max_size", "0", 0},
        {"max_size", "1", 1},
        {"max_size", "1K", 1024},
        {"max_size", "3M", 3145728},
        {"max_size", "5G", 5368709120ULL},
        {"max_size", "16777215G", 16777215ULL << 30},
        {"max_size", "17179869183G", 17179869183ULL << 30},
        {"max_size", "18446744073709551615", UINT64_MAX},
        {"max_item_size", "1G", 1073741824},
        {"max_age", "0", 0},
        {"max_age", "90", 90000},
        {"max_age", "1500ms", 1500},
        {"max_age", "0ms", 0},
        {"max_age", "45s", 45000},
        {"max_age", "30m", 1800000},
        {"max_age", "2h", 7200000},
        {"max_age", "7d", 604800000},
        {"max_age", "4294967295", CONF_MAX_DURATION_MS},
        {"max_age", "4294967295000ms", CONF_MAX_DURATION_MS},
        {"ttr", "1", 1000},
        {"ttr", "1000ms", 1000},
        {"ttr", "1d", 86400000},
        {"fanout", "true", 1},
        {"fanout", "false", 0},
        {"max_items", "18446744073709551615", UINT64_MAX},
        {"max_items", "007", 7},
        {"priority", "0", 0},
        {"priority", "4294967295", UINT32_MAX},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = tube_value(cases[i].key, cases[i].value);
        ck_assert_msg(got == cases[i].want, "%s = %s: got %llu, want %llu", cases[i].key,
                      cases[i].value, (unsigned long long)got,
                      (unsigned long long)cases[i].want);
    }
}
END_TEST

START_TEST(every_server_key)
{
    ConfFile *cf = parse_ok("listen = 127.0.0.1\n"
                            "port = 11301\n"
                            "max_job_size = 64K\n"
                            "user = tubed\n"
                            "binlog_dir = /var/lib/my tubed\n"
                            "fsync_ms = 0\n"
                            "no_fsync = true\n"
                            "binlog_file_size = 4M\n"
                            "verbose = 2\n"
                            "max_connections = 1000\n"
                            "stall_timeout = 1m\n"
                            "job_memory = 1G\n"
                            "recover = true\n"
                            "memcache_port = 22133\n"
                            "metrics_port = 9100\n"
                            "allow_shutdown = true\n"
                            "main_listener = false\n"
                            "replica_of = 10.0.0.1:11300\n"
                            "sync_replicas = 2\n"
                            "allow_remote_admin = true\n"
                            "repl_backlog = 32M\n"
                            "import_beanstalkd = /var/lib/beanstalkd\n");
    const ConfServer *s = &cf->server;

    ck_assert_uint_eq(s->set, (1u << SK_COUNT) - 1);
    ck_assert_str_eq(s->import_beanstalkd, "/var/lib/beanstalkd");
    ck_assert_uint_eq(s->repl_backlog, 32u << 20);
    ck_assert_str_eq(s->listen, "127.0.0.1");
    ck_assert_uint_eq(s->port, 11301);
    ck_assert_uint_eq(s->max_job_size, 65536);
    ck_assert_str_eq(s->user, "tubed");
    ck_assert_str_eq(s->binlog_dir, "/var/lib/my tubed");
    ck_assert_uint_eq(s->fsync_ms, 0);
    ck_assert(s->no_fsync);
    ck_assert_uint_eq(s->binlog_file_size, 4194304);
    ck_assert_uint_eq(s->verbose, 2);
    ck_assert_uint_eq(s->max_connections, 1000);
    ck_assert_uint_eq(s->stall_timeout_ms, 60000);
    ck_assert_uint_eq(s->job_memory, 1073741824);
    ck_assert(s->recover);
    ck_assert_uint_eq(s->memcache_port, 22133);
    ck_assert_uint_eq(s->metrics_port, 9100);
    ck_assert(s->allow_shutdown);
    ck_assert(!s->main_listener);
    ck_assert_str_eq(s->replica_of, "10.0.0.1:11300");
    ck_assert_uint_eq(s->sync_replicas, 2);
    ck_assert(s->allow_remote_admin);
    for (int k = 0; k < SK_COUNT; k++)
        ck_assert_uint_eq(cf->server_line[k], (unsigned long)k + 1);
    /* Server keys are not tube keys: the tubes keep their defaults. */
    TubePolicy p = policy(cf, "default");
    check_defaults(&p, MJS);
    conf_free(cf);
}
END_TEST

/* The key table's order is what the name functions rely on: each name
 * must parse as the key with its own index. */
START_TEST(key_names_and_ids)
{
    static const char *const tube_vals[TK_COUNT] = {
        "1", "1", "1", "true", "1", "x", "1", "true", "true", "true", "1", "1", "1"};
    static const char *const server_vals[SK_COUNT] = {
        "a", "1", "1", "u", "/d", "1", "true", "1", "1", "1", "1", "1", "true", "1", "1", "true",
        "true", "h:1", "1", "true", "1M"};
    char text[256];

    for (int k = 0; k < TK_COUNT; k++) {
        snprintf(text, sizeof text, "[tube t]\n%s = %s\n", conf_tube_key_name(k), tube_vals[k]);
        ConfFile *cf = parse_ok(text);
        ck_assert_uint_eq(cf->exact[0].own.set, CONF_BIT(k));
        ck_assert_uint_eq(cf->exact[0].own_line[k], 2);
        conf_free(cf);
    }
    for (int k = 0; k < SK_COUNT; k++) {
        snprintf(text, sizeof text, "%s = %s\n", conf_server_key_name(k), server_vals[k]);
        ConfFile *cf = parse_ok(text);
        ck_assert_uint_eq(cf->server.set, CONF_BIT(k));
        conf_free(cf);
    }
    ck_assert_ptr_null(conf_tube_key_name(TK_COUNT));
    ck_assert_ptr_null(conf_tube_key_name(-1));
    ck_assert_ptr_null(conf_server_key_name(SK_COUNT));
    ck_assert_str_eq(conf_tube_key_name(TK_MAX_MEMORY_SIZE), "max_memory_size");
    ck_assert_str_eq(conf_server_key_name(SK_ALLOW_SHUTDOWN), "allow_shutdown");
}
END_TEST

START_TEST(layout_comments_and_blanks)
{
    /* Spaces and tabs anywhere around tokens, comments after values and
     * headers, CRLF, no final newline, '=' without spaces. */
    ConfFile *cf = parse_ok("# a comment\n"
                            "\n"
                            "  max_age = 7d      # top level\r\n"
                            "\tfanout=true\t\n"
                            "listen = unix:/run/tubed.sock # after a string\n"
                            "[tube emails]               # one tube\n"
                            "max_items = 100000\n"
                            "   discard_old_when_full   =   true\n"
                            "[  tube   reports-*  ]\n"
                            "max_age = 1h\n"
                            "move_expired_to = reports-expired#no space\n"
                            "[tube last]\n"
                            "priority = 5");
    TubePolicy p;

    ck_assert_str_eq(cf->server.listen, "unix:/run/tubed.sock");
    ck_assert_uint_eq(cf->n_exact, 2);
    ck_assert_uint_eq(cf->n_prefix, 1);
    p = policy(cf, "emails");
    ck_assert_uint_eq(p.max_items, 100000);
    ck_assert(p.discard_old_when_full);
    ck_assert(p.fanout);
    ck_assert_uint_eq(p.max_age_ms, 604800000);
    p = policy(cf, "reports-daily");
    ck_assert_uint_eq(p.max_age_ms, 3600000);
    ck_assert_str_eq(p.move_expired_to, "reports-expired");
    ck_assert_uint_eq(p.max_items, 0);
    p = policy(cf, "last");
    ck_assert_uint_eq(p.priority, 5);
    ck_assert_uint_eq(cf->exact[1].line, 12);
    ck_assert_uint_eq(cf->exact[1].own_line[TK_PRIORITY], 13);
    conf_free(cf);
}
END_TEST

/* A UTF-8 byte-order mark opening the file (Windows editors) is skipped;
 * lines still count from 1. Anywhere else it is an error as before. The
 * old parser read it as part of the first key: "unknown key '???max_items'". */
START_TEST(utf8_bom_at_start)
{
    ConfFile *cf = parse_ok("\xef\xbb\xbfmax_items = 5\r\n[tube a]\r\nmax_size = 1K\r\n");

    ck_assert_uint_eq(policy(cf, "b").max_items, 5);
    ck_assert_uint_eq(policy(cf, "a").max_size, 1024);
    ck_assert_uint_eq(cf->exact[0].line, 2);
    conf_free(cf);
    cf = parse_ok("\xef\xbb\xbf");
    conf_free(cf);
    parse_err("\xef\xbb\xbf\nbogus = 1\n", "t.conf:2: unknown key 'bogus'");
    parse_err("max_items = 5\n\xef\xbb\xbfmax_size = 1\n",
              "t.conf:2: unknown key '???max_size'");
    parse_err("\xef\xbb\xbf\xef\xbb\xbfmax_items = 5\n",
              "t.conf:1: unknown key '???max_items'");
}
END_TEST

START_TEST(tube_names_in_headers)
{
    char text[512], name[MAX_TUBE_NAME + 2];
    ConfFile *cf;
    TubePolicy p;

    /* Every legal character, and the longest names. */
    cf = parse_ok("[tube aZ09-+/;.$_()]\npriority = 1\n[tube aZ09-+/;.$_()*]\npriority = 2\n");
    p = policy(cf, "aZ09-+/;.$_()");
    ck_assert_uint_eq(p.priority, 1);
    p = policy(cf, "aZ09-+/;.$_()x");
    ck_assert_uint_eq(p.priority, 2);
    conf_free(cf);

    memset(name, 'n', MAX_TUBE_NAME);
    name[MAX_TUBE_NAME] = '\0';
    snprintf(text, sizeof text, "[tube %s]\npriority = 1\n[tube %s*]\npriority = 2\n", name,
             name);
    cf = parse_ok(text);
    p = policy(cf, name);
    ck_assert_uint_eq(p.priority, 1);
    conf_free(cf);

    name[MAX_TUBE_NAME] = 'n';
    name[MAX_TUBE_NAME + 1] = '\0';
    snprintf(text, sizeof text, "[tube %s]\n", name);
    parse_err(text, "t.conf:1: illegal tube name 'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' "
                    "in section header");
    snprintf(text, sizeof text, "\n[tube %s*]\n", name);
    parse_err(text, "t.conf:2: illegal tube name prefix "
                    "'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn...' in section header");
}
END_TEST

/* ---- errors ------------------------------------------------------------ */

START_TEST(errors_exact_text)
{
    static const struct { const char *text, *want; } cases[] = {
        {"bogus = 1\n", "t.conf:1: unknown key 'bogus'"},
        {"\n\nmax items = 1\n", "t.conf:3: unknown key 'max items'"},
        {"Max_Items = 1\n", "t.conf:1: unknown key 'Max_Items'"},
        {"max_items\n", "t.conf:1: malformed line 'max_items' (want key = value, "
                        "[tube NAME] or # comment)"},
        {"just some words", "t.conf:1: malformed line 'just some words' (want key = value, "
                            "[tube NAME] or # comment)"},
        {"= 5\n", "t.conf:1: missing key before '='"},
        {"max_items =\n", "t.conf:1: missing value for max_items"},
        {"max_items =   # nothing\n", "t.conf:1: missing value for max_items"},
        {"listen = \n", "t.conf:1: missing value for listen"},
        {"max_items = 1\nmax_items = 2\n",
         "t.conf:2: duplicate key max_items (first set at line 1)"},
        {"port = 1\n\nport = 1\n", "t.conf:3: duplicate key port (first set at line 1)"},
        {"[tube a]\nfanout = true\n# x\nfanout = false\n",
         "t.conf:4: duplicate key fanout (first set at line 2)"},
        {"max_items = -1\n", "t.conf:1: bad value for max_items: '-1' (want a whole number "
                             "from 0 to 18446744073709551615)"},
        {"max_items = +1\n", "t.conf:1: bad value for max_items: '+1' (want a whole number "
                             "from 0 to 18446744073709551615)"},
        {"max_items = 18446744073709551616\n",
         "t.conf:1: bad value for max_items: '18446744073709551616' (want a whole number "
         "from 0 to 18446744073709551615)"},
        {"max_items = 1 000\n", "t.conf:1: bad value for max_items: '1 000' (want a whole "
                                "number from 0 to 18446744073709551615)"},
        {"max_items = 10K\n", "t.conf:1: bad value for max_items: '10K' (want a whole "
                              "number from 0 to 18446744073709551615)"},
        {"max_timeouts = 4294967296\n", "t.conf:1: bad value for max_timeouts: '4294967296' "
                                        "(want a whole number from 0 to 4294967295)"},
        {"priority = 4294967296\n", "t.conf:1: bad value for priority: '4294967296' (want a "
                                    "whole number from 0 to 4294967295)"},
        {"port = 65536\n", "t.conf:1: bad value for port: '65536' (want a whole number from "
                           "0 to 65535)"},
        {"memcache_port = x\n", "t.conf:1: bad value for memcache_port: 'x' (want a whole "
                                "number from 0 to 65535)"},
        {"metrics_port = 99999\n", "t.conf:1: bad value for metrics_port: '99999' (want a "
                                   "whole number from 0 to 65535)"},
        {"verbose = 2147483648\n", "t.conf:1: bad value for verbose: '2147483648' (want a "
                                   "whole number from 0 to 2147483647)"},
        {"max_size = 10KB\n", "t.conf:1: bad value for max_size: '10KB' (want a size in bytes "
                              "up to 18446744073709551615, with an optional K, M or G)"},
        {"max_size = 10k\n", "t.conf:1: bad value for max_size: '10k' (want a size in bytes "
                             "up to 18446744073709551615, with an optional K, M or G)"},
        {"max_size = K\n", "t.conf:1: bad value for max_size: 'K' (want a size in bytes "
                           "up to 18446744073709551615, with an optional K, M or G)"},
        {"max_size = 1.5M\n", "t.conf:1: bad value for max_size: '1.5M' (want a size in "
                              "bytes up to 18446744073709551615, with an optional K, M or G)"},
        {"max_size = 17179869184G\n", "t.conf:1: bad value for max_size: '17179869184G' (want "
                                      "a size in bytes up to 18446744073709551615, with an "
                                      "optional K, M or G)"},
        {"max_size = 1T\n", "t.conf:1: bad value for max_size: '1T' (want a size in bytes "
                            "up to 18446744073709551615, with an optional K, M or G)"},
        {"max_item_size = 1048577K\n", "t.conf:1: bad value for max_item_size: '1048577K' "
                                       "(want a size in bytes up to 1073741824, with an "
                                       "optional K, M or G)"},
        {"max_job_size = 2G\n", "t.conf:1: bad value for max_job_size: '2G' (want a size in "
                                "bytes up to 1073741824, with an optional K, M or G)"},
        {"binlog_file_size = 4G\n", "t.conf:1: bad value for binlog_file_size: '4G' (want a "
                                    "size in bytes up to 4294967295, with an optional K, M "
                                    "or G)"},
        {"max_age = 5w\n", "t.conf:1: bad value for max_age: '5w' (want a duration up to "
                           "4294967295s: a number with an optional ms, s, m, h or d)"},
        {"max_age = 1.5h\n", "t.conf:1: bad value for max_age: '1.5h' (want a duration up to "
                             "4294967295s: a number with an optional ms, s, m, h or d)"},
        {"max_age = ms\n", "t.conf:1: bad value for max_age: 'ms' (want a duration up to "
                           "4294967295s: a number with an optional ms, s, m, h or d)"},
        {"max_age = 1 h\n", "t.conf:1: bad value for max_age: '1 h' (want a duration up to "
                            "4294967295s: a number with an optional ms, s, m, h or d)"},
        {"max_age = 1H\n", "t.conf:1: bad value for max_age: '1H' (want a duration up to "
                           "4294967295s: a number with an optional ms, s, m, h or d)"},
        {"max_age = 4294967296\n", "t.conf:1: bad value for max_age: '4294967296' (want a "
                                   "duration up to 4294967295s: a number with an optional ms, "
                                   "s, m, h or d)"},
        {"max_age = 4294967295001ms\n", "t.conf:1: bad value for max_age: '4294967295001ms' "
                                        "(want a duration up to 4294967295s: a number with "
                                        "an optional ms, s, m, h or d)"},
        {"max_age = 213503982334601d\n", "t.conf:1: bad value for max_age: '213503982334601d' "
                                         "(want a duration up to 4294967295s: a number with "
                                         "an optional ms, s, m, h or d)"},
        {"ttr = 0\n", "t.conf:1: bad value for ttr: '0' (want whole seconds from 1s to "
                      "4294967295s: a number with an optional s, m, h or d)"},
        {"ttr = 1500ms\n", "t.conf:1: bad value for ttr: '1500ms' (want whole seconds from 1s "
                           "to 4294967295s: a number with an optional s, m, h or d)"},
        {"stall_timeout = 0\n", "t.conf:1: bad value for stall_timeout: '0' (want whole "
                                "seconds from 1s to 86400s: a number with an optional s, m, "
                                "h or d)"},
        {"stall_timeout = 2d\n", "t.conf:1: bad value for stall_timeout: '2d' (want whole "
                                 "seconds from 1s to 86400s: a number with an optional s, m, "
                                 "h or d)"},
        {"fanout = yes\n", "t.conf:1: bad value for fanout: 'yes' (want true or false)"},
        {"fanout = True\n", "t.conf:1: bad value for fanout: 'True' (want true or false)"},
        {"journal = 1\n", "t.conf:1: bad value for journal: '1' (want true or false)"},
        {"recover = truee\n", "t.conf:1: bad value for recover: 'truee' (want true or false)"},
        {"move_expired_to = bad name\n",
         "t.conf:1: illegal tube name 'bad name' for move_expired_to"},
        {"move_expired_to = -dash\n",
         "t.conf:1: illegal tube name '-dash' for move_expired_to"},
        {"move_expired_to = a*\n", "t.conf:1: illegal tube name 'a*' for move_expired_to"},
        {"[tube a]\nport = 11300\n", "t.conf:2: port is a server setting: allowed only at the "
                                     "top level, before the first [tube] section"},
        {"[tube a*]\n\nallow_shutdown = true\n",
         "t.conf:3: allow_shutdown is a server setting: allowed only at the top level, before "
         "the first [tube] section"},
        {"[tube a]\nmemcache_port = 1\n", "t.conf:2: memcache_port is a server setting: "
                                          "allowed only at the top level, before the first "
                                          "[tube] section"},
        {"[server]\n", "t.conf:1: unknown section '[server]' (want [tube NAME], "
                       "[tube PREFIX*] or [listen NAME])"},
        {"[]\n", "t.conf:1: unknown section '[]' (want [tube NAME], [tube PREFIX*] or "
                 "[listen NAME])"},
        {"[tubes a]\n", "t.conf:1: unknown section '[tubes a]' (want [tube NAME], "
                        "[tube PREFIX*] or [listen NAME])"},
        {"[tube]\n", "t.conf:1: missing tube name in section header"},
        {"[ tube   ]\n", "t.conf:1: missing tube name in section header"},
        {"[tube a\n", "t.conf:1: malformed section header '[tube a' (missing ']')"},
        {"[tube a] x\n", "t.conf:1: malformed section header '[tube a] x' (missing ']')"},
        {"[\n", "t.conf:1: malformed section header '[' (missing ']')"},
        {"[tube *]\n", "t.conf:1: empty prefix in [tube *]: keys for every tube go at the top "
                       "level"},
        {"[tube a b]\n", "t.conf:1: illegal tube name 'a b' in section header"},
        {"[tube -a]\n", "t.conf:1: illegal tube name '-a' in section header"},
        {"[tube a*b]\n", "t.conf:1: illegal tube name 'a*b' in section header"},
        {"[tube a**]\n", "t.conf:1: illegal tube name prefix 'a**' in section header"},
        {"[tube -*]\n", "t.conf:1: illegal tube name prefix '-*' in section header"},
        {"[tube a]]\n", "t.conf:1: illegal tube name 'a]' in section header"},
        {"[tube a\xc3\xa9]\n", "t.conf:1: illegal tube name 'a?\?' in section header"},
        {"max_items = 1\x01\n", "t.conf:1: control character (byte 0x01) in line"},
        {"\n\rmax_items = 1\n", "t.conf:2: control character (byte 0x0d) in line"},
        {"max_items = 1\x7f\n", "t.conf:1: control character (byte 0x7f) in line"},
        {"listen = a\x1b[31m\n", "t.conf:1: control character (byte 0x1b) in line"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        parse_err(cases[i].text, cases[i].want);
}
END_TEST

START_TEST(errors_nul_and_quoting)
{
    static const char nul[] = "max_items = 1\nfanout = tr\0ue\n";
    char text[6000];

    parse_err_n(nul, sizeof nul - 1, "t.conf:2: control character (byte 0x00) in line");
    /* A NUL inside a comment is only comment. */
    static const char in_comment[] = "max_items = 1 # a\0b\n";
    ConfFile *cf = NULL;
    char err[256];
    ck_assert_int_eq(conf_parse("t.conf", in_comment, sizeof in_comment - 1, &cf, err,
                                sizeof err), 0);
    conf_free(cf);
    /* Long values are cut in messages; other bytes become '?'. */
    parse_err("max_items = 123456789012345678901234567890123456789012345678901234567890\n",
              "t.conf:1: bad value for max_items: '1234567890123456789012345678901234567890...' "
              "(want a whole number from 0 to 18446744073709551615)");
    parse_err("fanout = \xff\xfe\n", "t.conf:1: bad value for fanout: '?\?' (want true or false)");
    /* Strings have a length limit. */
    memcpy(text, "user = ", 7);
    memset(text + 7, 'u', 4097);
    text[7 + 4097] = '\0';
    parse_err(text, "t.conf:1: value of user too long (4097 bytes, at most 4096)");
    text[7 + 4096] = '\0';
    cf = parse_ok(text);
    ck_assert_uint_eq(strlen(cf->server.user), 4096);
    conf_free(cf);
}
END_TEST

START_TEST(error_message_bounded)
{
    static const char text[] = "bogus_key_with_a_long_name = 1\n";
    ConfFile *cf = NULL;
    char err[12];

    memset(err, 'Z', sizeof err);
    ck_assert_int_eq(conf_parse("t.conf", text, sizeof text - 1, &cf, err, sizeof err), -1);
    ck_assert_str_eq(err, "t.conf:1: u");
    /* A zero-length buffer is never written. */
    ck_assert_int_eq(conf_parse("t.conf", text, sizeof text - 1, &cf, err, 0), -1);
    ck_assert_str_eq(err, "t.conf:1: u");
}
END_TEST

START_TEST(duplicate_sections)
{
    /* Reported at the second header, naming the first. */
    parse_err("[tube a]\nmax_items = 1\n[tube b]\n[tube a]\n",
              "t.conf:4: duplicate section [tube a] (first at line 1)");
    parse_err("# c\n[tube r-*]\n[tube r-*]\n",
              "t.conf:3: duplicate section [tube r-*] (first at line 2)");
    /* Three times: the second header is the error. */
    parse_err("[tube a]\n[tube a]\n[tube a]\n",
              "t.conf:2: duplicate section [tube a] (first at line 1)");
    /* The earliest repeat wins, whatever the names. */
    parse_err("[tube z]\n[tube a]\n[tube z]\n[tube a]\n",
              "t.conf:3: duplicate section [tube z] (first at line 1)");
    /* A repeat before a bad line is the error reported ... */
    parse_err("[tube a]\n[tube a]\nbogus = 1\n",
              "t.conf:2: duplicate section [tube a] (first at line 1)");
    /* ... a bad line before a repeat is. */
    parse_err("[tube a]\nbogus = 1\n[tube a]\n", "t.conf:2: unknown key 'bogus'");
    /* A name and the prefix of the same spelling are different sections,
     * and section names are case-sensitive. */
    ConfFile *cf = parse_ok("[tube a]\n[tube a*]\n[tube A]\n");
    ck_assert_uint_eq(cf->n_exact, 2);
    ck_assert_uint_eq(cf->n_prefix, 1);
    conf_free(cf);
}
END_TEST

/* ---- precedence -------------------------------------------------------- */

START_TEST(precedence_per_key)
{
    ConfFile *cf = parse_ok("max_items = 1\n"          /* top: every tube */
                            "max_size = 1\n"
                            "priority = 1\n"
                            "[tube r*]\n"
                            "max_items = 2\n"
                            "ttr = 2\n"
                            "[tube reports-daily]\n"   /* exact */
                            "max_size = 3\n"
                            "[tube reports-*]\n"       /* longer prefix */
                            "max_items = 4\n"
                            "[tube rep*]\n"
                            "max_timeouts = 5\n"
                            "max_items = 5\n");
    TubePolicy p;

    /* Exact section: its own key, then keys from the longest prefix that
     * sets each, then the top level, then the defaults. */
    p = policy(cf, "reports-daily");
    ck_assert_uint_eq(p.max_size, 3);      /* exact */
    ck_assert_uint_eq(p.max_items, 4);     /* reports-* beats rep* and r* */
    ck_assert_uint_eq(p.max_timeouts, 5);  /* rep*: reports-* does not set it */
    ck_assert_uint_eq(p.ttr_ms, 2000);     /* r* */
    ck_assert_uint_eq(p.priority, 1);      /* top */
    ck_assert_uint_eq(p.max_age_ms, 0);    /* default */
    ck_assert_uint_eq(p.set, CONF_BIT(TK_MAX_SIZE) | CONF_BIT(TK_MAX_ITEMS) |
                                 CONF_BIT(TK_MAX_TIMEOUTS) | CONF_BIT(TK_TTR) |
                                 CONF_BIT(TK_PRIORITY));
    p = policy(cf, "reports-weekly");
    ck_assert_uint_eq(p.max_size, 1);
    ck_assert_uint_eq(p.max_items, 4);
    ck_assert_uint_eq(p.max_timeouts, 5);
    p = policy(cf, "repo");
    ck_assert_uint_eq(p.max_items, 5);
    ck_assert_uint_eq(p.ttr_ms, 2000);
    p = policy(cf, "rx");
    ck_assert_uint_eq(p.max_items, 2);
    ck_assert_uint_eq(p.max_timeouts, 0);
    p = policy(cf, "r");                    /* the prefix itself matches */
    ck_assert_uint_eq(p.max_items, 2);
    p = policy(cf, "reports-");
    ck_assert_uint_eq(p.max_items, 4);
    p = policy(cf, "report");               /* shorter than reports-* */
    ck_assert_uint_eq(p.max_items, 5);
    p = policy(cf, "x");
    ck_assert_uint_eq(p.max_items, 1);
    ck_assert_uint_eq(p.ttr_ms, 60000);
    p = policy(cf, "reports-daily2");       /* not the exact section */
    ck_assert_uint_eq(p.max_size, 1);
    /* Names are compared by length too. */
    ck_assert_uint_eq(policy(cf, "reports-dail").max_size, 1);
    conf_policy(cf, "reports-daily-x", 13, MJS, &p); /* first 13 bytes only */
    ck_assert_uint_eq(p.max_size, 3);
    conf_free(cf);
}
END_TEST

START_TEST(exact_and_prefix_same_name)
{
    ConfFile *cf = parse_ok("[tube q*]\npriority = 2\nttr = 9\n[tube q]\npriority = 1\n");

    ck_assert_uint_eq(policy(cf, "q").priority, 1);
    ck_assert_uint_eq(policy(cf, "q").ttr_ms, 9000);
    ck_assert_uint_eq(policy(cf, "qq").priority, 2);
    ck_assert_uint_eq(policy(cf, "p").priority, 1024);
    conf_free(cf);
}
END_TEST

/* Prefixes that sort between a name and its matching prefix must not hide
 * it (the index walks parent links, not neighbours). */
START_TEST(prefix_index_neighbours)
{
    ConfFile *cf = parse_ok("[tube a*]\npriority = 1\n"
                            "[tube ab*]\npriority = 2\n"
                            "[tube abc*]\npriority = 3\n"
                            "[tube abd*]\npriority = 4\n"
                            "[tube abz*]\npriority = 5\n"
                            "[tube ac*]\npriority = 6\n"
                            "[tube b*]\nttr = 7\n");

    ck_assert_uint_eq(policy(cf, "abcx").priority, 3);
    ck_assert_uint_eq(policy(cf, "abdx").priority, 4);
    ck_assert_uint_eq(policy(cf, "abe").priority, 2);   /* after abd*, before abz* */
    ck_assert_uint_eq(policy(cf, "abzz").priority, 5);
    ck_assert_uint_eq(policy(cf, "ab").priority, 2);
    ck_assert_uint_eq(policy(cf, "ab+").priority, 2);   /* '+' sorts before 'c' */
    ck_assert_uint_eq(policy(cf, "ad").priority, 1);    /* after ac* */
    ck_assert_uint_eq(policy(cf, "a").priority, 1);
    ck_assert_uint_eq(policy(cf, "b").priority, 1024);
    ck_assert_uint_eq(policy(cf, "b").ttr_ms, 7000);
    ck_assert_uint_eq(policy(cf, "A").priority, 1024);  /* sorts before all */
    ck_assert_uint_eq(policy(cf, "zzz").priority, 1024);
    ck_assert_int_eq(cf->prefix[0].parent, -1);          /* a* */
    ck_assert_int_eq(cf->prefix[2].parent, 1);           /* abc* -> ab* */
    ck_assert_int_eq(cf->prefix[5].parent, 0);           /* ac* -> a* */
    conf_free(cf);
}
END_TEST

/* The model: each key from the exact section, else the longest matching
 * prefix section setting it, else top, else default, by a linear scan of
 * every section's own keys. */
static void model_policy(const ConfFile *cf, const char *name, size_t len, TubePolicy *out)
{
    const ConfSection *all[512];
    size_t n = 0;

    conf_policy(NULL, name, len, MJS, out);
    out->set = 0;
    for (size_t i = 0; i < cf->n_exact; i++)
        if (cf->exact[i].len == len && !memcmp(cf->exact[i].name, name, len))
            all[n++] = &cf->exact[i];
    for (size_t l = len + 1; l-- > 0;)
        for (size_t i = 0; i < cf->n_prefix; i++)
            if (cf->prefix[i].len == l && l <= len && !memcmp(cf->prefix[i].name, name, l))
                all[n++] = &cf->prefix[i];
    all[n++] = &cf->top;
    for (int k = 0; k < TK_COUNT; k++) {
        for (size_t i = 0; i < n; i++) {
            const TubePolicy *o = &all[i]->own;
            if (!(o->set & CONF_BIT(k)))
                continue;
            out->set |= CONF_BIT(k);
            switch (k) {
            case TK_MAX_ITEMS: out->max_items = o->max_items; break;
            case TK_PRIORITY: out->priority = o->priority; break;
            case TK_TTR: out->ttr_ms = o->ttr_ms; break;
            case TK_FANOUT: out->fanout = o->fanout; break;
            default: ck_abort_msg("model: key %d", k);
            }
            break;
        }
    }
}

/* Whether "[tube NAME]" (or NAME*) was generated already. */
static int seen_before(char seen[][8], size_t n, const char *tag)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(seen[i], tag))
            return 1;
    return 0;
}

START_TEST(precedence_random_against_model)
{
    static const int mkeys[] = {TK_MAX_ITEMS, TK_PRIORITY, TK_TTR, TK_FANOUT};
    char text[16384], name[8], seen[64][8];
    size_t used = 0, nseen = 0;
    ConfFile *cf = NULL;
    char err[256];
    Rng r;

    rng_seed(&r, (uint64_t)_i + 1);
    /* Sections over a tiny alphabet, so names and prefixes nest and
     * neighbour a lot; each sets a random subset of the keys, to a value
     * unique to the section. */
    for (int s = 0; s < 48; s++) {
        size_t nl = 1 + rng_below(&r, 4);
        for (size_t c = 0; c < nl; c++)
            name[c] = "abc"[rng_below(&r, 3)];
        name[nl] = rng_below(&r, 2) ? '*' : '\0';
        name[nl + 1] = '\0';
        if (s > 0 && seen_before(seen, nseen, name))
            continue;
        if (s > 0) {
            strcpy(seen[nseen++], name);
            used += (size_t)snprintf(text + used, sizeof text - used, "[tube %s]\n", name);
        }
        for (size_t k = 0; k < 4; k++) {
            if (rng_below(&r, 3))
                continue;
            if (mkeys[k] == TK_FANOUT)
                used += (size_t)snprintf(text + used, sizeof text - used, "fanout = %s\n",
                                         rng_below(&r, 2) ? "true" : "false");
            else
                used += (size_t)snprintf(text + used, sizeof text - used, "%s = %d\n",
                                         conf_tube_key_name(mkeys[k]), s + 1);
        }
    }
    ck_assert_uint_lt(used, sizeof text);
    if (conf_parse("t.conf", text, used, &cf, err, sizeof err) < 0)
        ck_abort_msg("%s", err);
    /* Every name up to 5 letters over a, b, c, d. */
    for (size_t len = 1; len <= 5; len++) {
        size_t total = 1;
        for (size_t i = 0; i < len; i++)
            total *= 4;
        for (size_t v = 0; v < total; v++) {
            TubePolicy got, want;
            size_t x = v;
            for (size_t i = 0; i < len; i++, x /= 4)
                name[i] = "abcd"[x % 4];
            conf_policy(cf, name, len, MJS, &got);
            model_policy(cf, name, len, &want);
            REQUIRE_MSG(got.set == want.set && got.max_items == want.max_items &&
                        got.priority == want.priority && got.ttr_ms == want.ttr_ms &&
                        got.fanout == want.fanout, "seed %d name %.*s", _i, (int)len, name);
        }
    }
    conf_free(cf);
}
END_TEST

START_TEST(max_item_size_default_and_ceiling)
{
    ConfFile *cf = parse_ok("[tube big]\nmax_item_size = 1M\n[tube small]\nmax_item_size = 10\n"
                            "[tube zero]\nmax_item_size = 0\n");
    TubePolicy p;

    conf_policy(cf, "big", 3, 65535, &p);
    ck_assert_uint_eq(p.max_item_size, 65535);       /* -z is the ceiling */
    ck_assert(p.set & CONF_BIT(TK_MAX_ITEM_SIZE));
    conf_policy(cf, "big", 3, 1073741824, &p);
    ck_assert_uint_eq(p.max_item_size, 1048576);
    conf_policy(cf, "small", 5, 65535, &p);
    ck_assert_uint_eq(p.max_item_size, 10);
    conf_policy(cf, "zero", 4, 65535, &p);
    ck_assert_uint_eq(p.max_item_size, 0);            /* only empty bodies */
    conf_policy(cf, "other", 5, 12345, &p);
    ck_assert_uint_eq(p.max_item_size, 12345);       /* default: the -z value */
    ck_assert(!(p.set & CONF_BIT(TK_MAX_ITEM_SIZE)));
    conf_free(cf);
}
END_TEST

START_TEST(policies_compare_with_memcmp)
{
    ConfFile *a = parse_ok("priority = 5\n[tube x]\nmove_expired_to = dead\n");
    ConfFile *b = parse_ok("[tube x]\npriority = 5\nmove_expired_to = dead\n");
    TubePolicy pa, pb;

    /* Dirty the outputs first: conf_policy must write every byte. */
    memset(&pa, 0xa5, sizeof pa);
    memset(&pb, 0x5a, sizeof pb);
    conf_policy(a, "x", 1, MJS, &pa);
    conf_policy(b, "x", 1, MJS, &pb);
    ck_assert_int_eq(memcmp(&pa, &pb, sizeof pa), 0);
    conf_policy(b, "y", 1, MJS, &pb);
    ck_assert_int_ne(memcmp(&pa, &pb, sizeof pa), 0);
    memset(&pa, 0xa5, sizeof pa);
    memset(&pb, 0x5a, sizeof pb);
    conf_policy(NULL, "y", 1, MJS, &pa);
    conf_policy(a, "y", 1, MJS, &pb);
    pb.set = 0;
    pb.priority = 1024;
    ck_assert_int_eq(memcmp(&pa, &pb, sizeof pa), 0);
    conf_free(a);
    conf_free(b);
}
END_TEST

/* ---- checks against the merged configuration --------------------------- */

static void validate_err(const char *text, const char *binlog_dir, const char *want)
{
    ConfFile *cf = parse_ok(text);
    char err[512] = "";

    ck_assert_int_eq(conf_validate(cf, binlog_dir, err, sizeof err), -1);
    ck_assert_msg(!strcmp(err, want), "got:  %s\nwant: %s", err, want);
    conf_free(cf);
}

static void validate_ok(const char *text, const char *binlog_dir)
{
    ConfFile *cf = parse_ok(text);
    char err[512] = "";

    ck_assert_msg(conf_validate(cf, binlog_dir, err, sizeof err) == 0, "%s", err);
    conf_free(cf);
}

START_TEST(read_behind_checks)
{
    validate_ok("", NULL);
    validate_ok("max_memory_size = 0\n[tube a]\njournal = false\n", NULL);
    validate_ok("max_memory_size = 1M\n", "/var/lib/tubed");
    validate_err("\nmax_memory_size = 1M\n", NULL,
                 "t.conf:2: max_memory_size needs a binlog: give -b DIR or binlog_dir");
    validate_err("[tube a]\nmax_memory_size = 1M\n[tube b]\n\nmax_memory_size = 2M\n", NULL,
                 "t.conf:2: max_memory_size needs a binlog: give -b DIR or binlog_dir");
    /* The two keys at different levels: the later line is the error. */
    validate_err("journal = false\n[tube logs*]\nmax_memory_size = 1M\n", "/b",
                 "t.conf:3: max_memory_size (line 3) and journal = false (line 1) both apply "
                 "to [tube logs*]: read-behind keeps bodies in the binlog");
    validate_err("max_memory_size = 1M\n[tube cache]\njournal = false\n", "/b",
                 "t.conf:3: max_memory_size (line 1) and journal = false (line 3) both apply "
                 "to [tube cache]: read-behind keeps bodies in the binlog");
    validate_err("max_memory_size = 1M\njournal = false\n", "/b",
                 "t.conf:2: max_memory_size (line 1) and journal = false (line 2) both apply "
                 "to tubes in no section: read-behind keeps bodies in the binlog");
    /* A more specific section that turns either back is fine. */
    validate_ok("max_memory_size = 1M\n[tube cache*]\njournal = false\nmax_memory_size = 0\n",
                "/b");
    validate_ok("[tube c*]\njournal = false\n[tube cache]\nmax_memory_size = 1M\n"
                "journal = true\n", "/b");
    /* Inherited through a chain of prefixes. */
    validate_err("[tube c*]\njournal = false\n[tube cach*]\n[tube cache*]\n"
                 "max_memory_size = 4K\n", "/b",
                 "t.conf:5: max_memory_size (line 5) and journal = false (line 2) both apply "
                 "to [tube cache*]: read-behind keeps bodies in the binlog");
}
END_TEST

/* ---- reading the file -------------------------------------------------- */

START_TEST(load_from_disk)
{
    char dir[] = "/tmp/tubed-unit-conf-XXXXXX", path[128], err[512];
    ConfFile *cf = (ConfFile *)&cf;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/none.conf", dir);
    ck_assert_int_eq(conf_load(path, &cf, err, sizeof err), -1);
    ck_assert_ptr_null(cf);
    char want[256];
    snprintf(want, sizeof want, "%s: cannot read: %s", path, strerror(ENOENT));
    ck_assert_str_eq(err, want);

    /* A directory opens but does not read. */
    ck_assert_int_eq(conf_load(dir, &cf, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot read: %s", dir, strerror(EISDIR));
    ck_assert_str_eq(err, want);

    snprintf(path, sizeof path, "%s/t.conf", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("port = 1\n[tube a]\nbogus = 2\n", f);
    fclose(f);
    ck_assert_int_eq(conf_load(path, &cf, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:3: unknown key 'bogus'", path);
    ck_assert_str_eq(err, want);

    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("port = 1\n[tube a]\npriority = 2\n", f);
    fclose(f);
    ck_assert_int_eq(conf_load(path, &cf, err, sizeof err), 0);
    ck_assert_str_eq(cf->path, path);
    ck_assert_uint_eq(cf->server.port, 1);
    ck_assert_uint_eq(policy(cf, "a").priority, 2);
    conf_free(cf);

    /* Empty file. */
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fclose(f);
    ck_assert_int_eq(conf_load(path, &cf, err, sizeof err), 0);
    conf_free(cf);

    /* A file past 16 MiB is refused (a sparse one: nothing is written). */
    ck_assert_int_eq(truncate(path, 16 * 1024 * 1024 + 1), 0);
    ck_assert_int_eq(conf_load(path, &cf, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: cannot read: larger than 16777216 bytes", path);
    ck_assert_str_eq(err, want);

    unlink(path);
    rmdir(dir);
}
END_TEST

/* The packaged example: as shipped it sets nothing; with every commented
 * setting ("# key = ..." and "# [tube ...") uncommented it is a valid file
 * whose values are the documented defaults where it says so. */
static char *example_path(void)
{
    static char path[512];
    const char *me = __FILE__, *tail = strstr(me, "tests/unit/");

    ck_assert_ptr_nonnull(tail);
    snprintf(path, sizeof path, "%.*spkg/tubed.conf", (int)(tail - me), me);
    return path;
}

static int commented_setting(const char *line)
{
    size_t k = 2;

    if (strncmp(line, "# ", 2))
        return 0;
    if (!strncmp(line + 2, "[tube ", 6))
        return 1;
    while ((line[k] >= 'a' && line[k] <= 'z') || line[k] == '_')
        k++;
    return k > 2 && !strncmp(line + k, " = ", 3);
}

START_TEST(packaged_example)
{
    char line[512], text[16384], err[512];
    size_t used = 0, settings = 0;
    ConfFile *cf;
    TubePolicy p;
    FILE *f;

    ck_assert_msg(conf_load(example_path(), &cf, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(cf->server.set, 0);
    ck_assert_uint_eq(cf->top.own.set, 0);
    ck_assert_uint_eq(cf->n_exact + cf->n_prefix, 0);
    conf_free(cf);

    ck_assert_ptr_nonnull(f = fopen(example_path(), "r"));
    while (fgets(line, sizeof line, f)) {
        const char *l = commented_setting(line) ? (settings++, line + 2) : line;
        used += (size_t)snprintf(text + used, sizeof text - used, "%s", l);
        ck_assert_uint_lt(used, sizeof text);
    }
    fclose(f);
    /* Every server key and every tube key is in it. */
    ck_assert_uint_ge(settings, SK_COUNT + TK_COUNT);
    cf = parse_ok(text);
    ck_assert_uint_eq(cf->server.set, (1u << SK_COUNT) - 1);
    ck_assert_uint_eq(cf->top.own.set, (1u << TK_COUNT) - 1);
    ck_assert_uint_eq(cf->server.port, 11300);
    ck_assert_uint_eq(cf->server.max_job_size, 65535);
    ck_assert_uint_eq(cf->server.fsync_ms, 50);
    ck_assert_uint_eq(cf->server.binlog_file_size, 10485760);
    ck_assert_uint_eq(cf->server.stall_timeout_ms, 30000);
    ck_assert_uint_eq(cf->server.memcache_port, 0);
    ck_assert(!cf->server.allow_shutdown);
    p = policy(cf, "other");
    ck_assert_uint_eq(p.priority, 1024);
    ck_assert_uint_eq(p.ttr_ms, 60000);
    ck_assert(p.journal);
    ck_assert_uint_eq(policy(cf, "emails").max_items, 100000);
    ck_assert_uint_eq(policy(cf, "reports-x").max_age_ms, 3600000);
    ck_assert_msg(conf_validate(cf, NULL, err, sizeof err) == 0, "%s", err);
    conf_free(cf);
}
END_TEST

/* ---- allocation failure ------------------------------------------------ */

static const char rich[] =
    "listen = 127.0.0.1\nuser = tubed\nbinlog_dir = /b\nmax_age = 1d\n"
    "[tube a]\n[tube b]\n[tube c*]\n[tube d]\n[tube e*]\n[tube f]\n[tube g]\n[tube h]\n"
    "[tube i]\n[tube j]\npriority = 1\n";

START_TEST(allocation_failure_sweep)
{
    int ok = 0, failed = 0;

    for (unsigned long n = 1; n < 40; n++) {
        ConfFile *cf = (ConfFile *)&cf;
        char err[256] = "";

        alloc_fail_after(n);
        if (conf_parse("t.conf", rich, sizeof rich - 1, &cf, err, sizeof err) == 0) {
            ok++;
            ck_assert_uint_eq(cf->n_exact + cf->n_prefix, 10);
            ck_assert_uint_eq(policy(cf, "j").priority, 1);
            conf_free(cf);
        } else {
            failed++;
            ck_assert_ptr_null(cf);
            ck_assert_str_eq(err, "t.conf: out of memory");
        }
        alloc_fail_after(0);
    }
    /* Seven allocations: the file, its path, three strings, the sections
     * array twice (8, then 16). */
    ck_assert_int_eq(failed, 7);
    ck_assert_int_eq(ok, 39 - 7);
}
END_TEST

static Suite *conf_suite(void)
{
    Suite *s = suite_create("conf");
    TCase *tc = unit_tcase("syntax");

    tcase_add_test(tc, empty_and_no_file);
    tcase_add_test(tc, every_tube_key);
    tcase_add_test(tc, value_forms);
    tcase_add_test(tc, every_server_key);
    tcase_add_test(tc, key_names_and_ids);
    tcase_add_test(tc, utf8_bom_at_start);
    tcase_add_test(tc, layout_comments_and_blanks);
    tcase_add_test(tc, tube_names_in_headers);
    suite_add_tcase(s, tc);

    tc = unit_tcase("errors");
    tcase_add_test(tc, errors_exact_text);
    tcase_add_test(tc, errors_nul_and_quoting);
    tcase_add_test(tc, error_message_bounded);
    tcase_add_test(tc, duplicate_sections);
    suite_add_tcase(s, tc);

    tc = unit_tcase("precedence");
    tcase_add_test(tc, precedence_per_key);
    tcase_add_test(tc, exact_and_prefix_same_name);
    tcase_add_test(tc, prefix_index_neighbours);
    tcase_add_loop_test(tc, precedence_random_against_model, 0, 40);
    tcase_add_test(tc, max_item_size_default_and_ceiling);
    tcase_add_test(tc, policies_compare_with_memcmp);
    suite_add_tcase(s, tc);

    tc = unit_tcase("merged");
    tcase_add_test(tc, read_behind_checks);
    tcase_add_test(tc, load_from_disk);
    tcase_add_test(tc, packaged_example);
    tcase_add_test(tc, allocation_failure_sweep);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(conf_suite)
