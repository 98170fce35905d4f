/* Unit tests for opts.c: beanstalkd-style flags plus tubed's long options,
 * and the config file merged under them (--config, --check-config,
 * reload). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opts.h"
#include "unit.h"

/* One opts_parse run over a NULL-terminated argument list (argv[0] is
 * supplied). The argv strings stay alive until run_free(), since the
 * Config may point into them. */
typedef struct Run {
    Config cfg;
    int rc;
    char err[256];
    char *out;     /* what went to the out FILE* */
    size_t outlen;
    char *argv[32];
    int argc;
} Run;

static void run_free(Run *r)
{
    opts_free(&r->cfg);
    for (int i = 0; i < r->argc; i++)
        free(r->argv[i]);
    free(r->out);
    r->argc = 0;
    r->out = NULL;
}

static void run_opts(Run *r, ...)
{
    va_list ap;
    const char *a;
    FILE *f;

    memset(r, 0, sizeof *r);
    r->argv[r->argc++] = strdup("tubed");
    va_start(ap, r);
    while ((a = va_arg(ap, const char *)) != NULL) {
        ck_assert_int_lt(r->argc, 31);
        r->argv[r->argc++] = strdup(a);
    }
    va_end(ap);
    r->argv[r->argc] = NULL;

    opts_defaults(&r->cfg);
    f = open_memstream(&r->out, &r->outlen);
    ck_assert_ptr_nonnull(f);
    r->rc = opts_parse(&r->cfg, r->argc, r->argv, f, r->err, sizeof r->err);
    fclose(f);
}

#define RUN(r, ...) run_opts(r, __VA_ARGS__, (const char *)NULL)

static void check_defaults(const Config *c)
{
    ck_assert_ptr_null(c->listen_addr);
    ck_assert_int_eq(c->port, 11300);
    ck_assert_uint_eq(c->max_job_size, 65535);
    ck_assert_ptr_null(c->user);
    ck_assert_ptr_null(c->binlog_dir);
    ck_assert_uint_eq(c->binlog_size, 10485760);
    ck_assert_uint_eq(c->fsync_ms, 50);
    ck_assert_int_eq(c->fsync_never, 0);
    ck_assert_int_eq(c->verbosity, 0);
    ck_assert_uint_eq(c->max_connections, 0);
    ck_assert_int_eq(c->recover, 0);
    ck_assert_int_eq(c->addr_given, 0);
}

/* A run that must fail with a message naming what: nothing printed. */
static void expect_error(Run *r, const char *mention)
{
    ck_assert_int_eq(r->rc, OPTS_ERROR);
    ck_assert_msg(r->err[0] != '\0', "no error message");
    ck_assert_msg(strstr(r->err, mention) != NULL, "error '%s' lacks '%s'",
                  r->err, mention);
    ck_assert_uint_eq(r->outlen, 0);
}

START_TEST(defaults)
{
    Run r;
    Config c;

    memset(&c, 0xff, sizeof c);
    opts_defaults(&c);
    check_defaults(&c);

    /* No arguments at all: run with the defaults. */
    run_opts(&r, (const char *)NULL);
    ck_assert_int_eq(r.rc, OPTS_RUN);
    check_defaults(&r.cfg);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);
}
END_TEST

START_TEST(port_forms)
{
    Run r;

    RUN(&r, "-p11301");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 11301);
    run_free(&r);

    RUN(&r, "-p", "11302");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 11302);
    run_free(&r);

    RUN(&r, "-p", "0");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 0);
    run_free(&r);

    RUN(&r, "-p65535");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 65535);
    run_free(&r);

    /* The last one wins. */
    RUN(&r, "-p1", "-p", "2");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 2);
    run_free(&r);

    /* Blanks and a '+', as beanstalkd takes them; -f and -s too. */
    RUN(&r, "-p", "+11303", "-f", " 7", "-s", "\t+4096");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 11303);
    ck_assert_uint_eq(r.cfg.fsync_ms, 7);
    ck_assert_uint_eq(r.cfg.binlog_size, 4096);
    run_free(&r);
    RUN(&r, "-p", "+-1");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "-p", "+");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "-f", "5 ");
    expect_error(&r, "-f");
    run_free(&r);
}
END_TEST

/* --stall-timeout takes the file's whole-second durations. */
START_TEST(stall_timeout_durations)
{
    static const struct { const char *arg; uint64_t s; } ok[] = {
        {"45", 45}, {"45s", 45}, {"5m", 300}, {"2h", 7200}, {"1d", 86400},
    };
    static const char *const bad[] = {"2d", "0", "1500ms", "1S", "", "s", "86401", "-1"};
    Run r;

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        RUN(&r, "--stall-timeout", ok[i].arg);
        ck_assert_int_eq(r.rc, OPTS_RUN);
        ck_assert_uint_eq(r.cfg.stall_timeout, ok[i].s);
        run_free(&r);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RUN(&r, "--stall-timeout", bad[i]);
        expect_error(&r, "--stall-timeout");
        run_free(&r);
    }
}
END_TEST

/* --job-memory takes the file's size form. */
START_TEST(job_memory_sizes)
{
    Run r;

    RUN(&r, "--job-memory", "4G");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.job_memory, 4ULL << 30);
    run_free(&r);
    RUN(&r, "--job-memory=64K");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.job_memory, 65536);
    run_free(&r);
    RUN(&r, "--job-memory", "4g");
    expect_error(&r, "--job-memory");
    run_free(&r);
    RUN(&r, "--job-memory", "99999999999G");
    expect_error(&r, "--job-memory");
    run_free(&r);
}
END_TEST

START_TEST(port_invalid)
{
    Run r;

    RUN(&r, "-p65536");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "-p", "abc");
    expect_error(&r, "abc");
    run_free(&r);
    RUN(&r, "-p", "-1");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "-p", "");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "-p11300x");
    expect_error(&r, "11300x");
    run_free(&r);
    RUN(&r, "-p", "99999999999999999999999");
    expect_error(&r, "-p");
    run_free(&r);
}
END_TEST

START_TEST(verbosity_and_combined)
{
    Run r;

    RUN(&r, "-V");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.verbosity, 1);
    run_free(&r);

    RUN(&r, "-VV");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.verbosity, 2);
    run_free(&r);

    RUN(&r, "-V", "-VVV", "-V");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.verbosity, 5);
    run_free(&r);

    /* A value flag ends the word: the rest is its value. */
    RUN(&r, "-Vp11300");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.verbosity, 1);
    ck_assert_int_eq(r.cfg.port, 11300);
    run_free(&r);

    RUN(&r, "-VVp", "4000");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.verbosity, 2);
    ck_assert_int_eq(r.cfg.port, 4000);
    run_free(&r);

    RUN(&r, "-FVl127.0.0.1");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.fsync_never, 1);
    ck_assert_int_eq(r.cfg.verbosity, 1);
    ck_assert_str_eq(r.cfg.listen_addr, "127.0.0.1");
    run_free(&r);

    /* "-pV" is port "V", not a verbosity flag. */
    RUN(&r, "-pV");
    expect_error(&r, "V");
    run_free(&r);
}
END_TEST

START_TEST(string_flags)
{
    Run r;

    RUN(&r, "-l", "127.0.0.1", "-u", "nobody", "-b", "/var/lib/tubed");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_str_eq(r.cfg.listen_addr, "127.0.0.1");
    ck_assert_str_eq(r.cfg.user, "nobody");
    ck_assert_str_eq(r.cfg.binlog_dir, "/var/lib/tubed");
    ck_assert_int_eq(r.cfg.port, 11300);
    run_free(&r);

    RUN(&r, "-lunix:/tmp/tubed.sock", "-unobody", "-b/tmp/b");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_str_eq(r.cfg.listen_addr, "unix:/tmp/tubed.sock");
    ck_assert_str_eq(r.cfg.user, "nobody");
    ck_assert_str_eq(r.cfg.binlog_dir, "/tmp/b");
    run_free(&r);
}
END_TEST

START_TEST(binlog_numbers)
{
    Run r;

    RUN(&r, "-f0", "-s", "1000");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.fsync_ms, 0);
    ck_assert_uint_eq(r.cfg.binlog_size, 1000);
    ck_assert_int_eq(r.cfg.fsync_never, 0);
    run_free(&r);

    RUN(&r, "-f", "200", "-F");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.fsync_ms, 200);
    ck_assert_int_eq(r.cfg.fsync_never, 1);
    run_free(&r);

    RUN(&r, "-f", "x");
    expect_error(&r, "-f");
    run_free(&r);
    RUN(&r, "-s", "-5");
    expect_error(&r, "-s");
    run_free(&r);
}
END_TEST

START_TEST(job_size_limits)
{
    Run r;

    RUN(&r, "-z", "1073741824");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_job_size, 1073741824U);
    run_free(&r);

    RUN(&r, "-z1073741824");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_job_size, 1073741824U);
    run_free(&r);

    RUN(&r, "-z", "0");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_job_size, 0);
    run_free(&r);

    /* beanstalkd's sscanf("%zu") takes a sign and leading blanks. */
    RUN(&r, "-z", "+5");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_job_size, 5);
    run_free(&r);
    RUN(&r, "-z", " 7");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_job_size, 7);
    run_free(&r);
    RUN(&r, "-z", "7 ");
    expect_error(&r, "-z");
    run_free(&r);
    RUN(&r, "-z", "+-5");
    expect_error(&r, "-z");
    run_free(&r);
    RUN(&r, "-z", "");
    expect_error(&r, "-z");
    run_free(&r);
}
END_TEST

/* Run with stderr sent to a temporary file; returns what was written. */
static char *run_capturing_stderr(Run *r, const char *flag, const char *val)
{
    FILE *tmp = tmpfile();
    int saved = dup(STDERR_FILENO);
    char *text = calloc(1, 4096);

    ck_assert_ptr_nonnull(tmp);
    ck_assert_int_ge(saved, 0);
    fflush(stderr);
    ck_assert_int_ge(dup2(fileno(tmp), STDERR_FILENO), 0);
    RUN(r, flag, val);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    size_t n = fread(text, 1, 4095, tmp);
    text[n] = '\0';
    fclose(tmp);
    return text;
}

/* Above the limit, beanstalkd caps the size, warns, and runs; tubed does
 * the same (one more than 1073741824 is not an error). */
START_TEST(job_size_capped_above_limit)
{
    static const char *const vals[] = {"1073741825", "4294967297",
                                       "18446744073709551615",
                                       "18446744073709551616", /* saturates */
                                       "-1", "-1073741824"};   /* wrap */
    Run r;

    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char *warn = run_capturing_stderr(&r, "-z", vals[i]);
        ck_assert_int_eq(r.rc, OPTS_RUN);
        ck_assert_uint_eq(r.cfg.max_job_size, 1073741824U);
        ck_assert_msg(strstr(warn, "1073741824") != NULL,
                      "no warning for -z %s: '%s'", vals[i], warn);
        ck_assert_uint_eq(r.outlen, 0);
        free(warn);
        run_free(&r);
    }
    /* At the limit: no warning. */
    char *warn = run_capturing_stderr(&r, "-z", "1073741824");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_str_eq(warn, "");
    free(warn);
    run_free(&r);
}
END_TEST

START_TEST(recover_and_addr_given)
{
    Run r;

    RUN(&r, "--recover");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.recover, 1);
    ck_assert_int_eq(r.cfg.addr_given, 0);
    run_free(&r);

    RUN(&r, "-V");
    ck_assert_int_eq(r.cfg.recover, 0);
    ck_assert_int_eq(r.cfg.addr_given, 0);
    run_free(&r);

    RUN(&r, "-p", "11300");
    ck_assert_int_eq(r.cfg.addr_given, 1);
    run_free(&r);

    RUN(&r, "-l0.0.0.0");
    ck_assert_int_eq(r.cfg.addr_given, 1);
    run_free(&r);

    RUN(&r, "--recover=1");
    expect_error(&r, "--recover");
    run_free(&r);
}
END_TEST

START_TEST(obsolete_flags_ignored)
{
    Run r;

    RUN(&r, "-c");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    check_defaults(&r.cfg);
    run_free(&r);

    RUN(&r, "-n", "-c", "-cn", "-ncnc");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    check_defaults(&r.cfg);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);

    /* Ignored flags take no value: the next word is parsed normally. */
    RUN(&r, "-c", "-p", "7");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 7);
    run_free(&r);
}
END_TEST

START_TEST(unknown_flags)
{
    Run r;

    RUN(&r, "-x");
    expect_error(&r, "-x");
    run_free(&r);
    RUN(&r, "-Vx");
    expect_error(&r, "-x");
    run_free(&r);
    RUN(&r, "-");
    expect_error(&r, "-");
    run_free(&r);
    RUN(&r, "--bogus");
    expect_error(&r, "--bogus");
    run_free(&r);
    RUN(&r, "--bogus=1");
    expect_error(&r, "--bogus");
    run_free(&r);
    RUN(&r, "--max-connection=5"); /* not a prefix match */
    expect_error(&r, "--max-connection");
    run_free(&r);
    RUN(&r, "--");
    expect_error(&r, "--");
    run_free(&r);
    RUN(&r, "stray");
    expect_error(&r, "stray");
    run_free(&r);
    RUN(&r, "-p", "1", "stray");
    expect_error(&r, "stray");
    run_free(&r);
    /* A very long unknown long option does not overflow anything. */
    char longopt[300];
    memset(longopt, 'y', sizeof longopt - 1);
    longopt[0] = longopt[1] = '-';
    longopt[sizeof longopt - 1] = '\0';
    RUN(&r, longopt);
    ck_assert_int_eq(r.rc, OPTS_ERROR);
    ck_assert_uint_lt(strlen(r.err), sizeof r.err);
    run_free(&r);
}
END_TEST

START_TEST(missing_argument)
{
    static const char *const flags[] = {"-p", "-l", "-u", "-b", "-z", "-s",
                                        "-f", "-Vp", "-VVz"};
    Run r;

    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        RUN(&r, flags[i]);
        ck_assert_int_eq(r.rc, OPTS_ERROR);
        ck_assert_msg(strstr(r.err, "requires an argument") != NULL,
                      "%s: '%s'", flags[i], r.err);
        run_free(&r);
    }
    RUN(&r, "--max-connections");
    expect_error(&r, "--max-connections");
    ck_assert_ptr_nonnull(strstr(r.err, "requires an argument"));
    run_free(&r);
}
END_TEST

START_TEST(max_connections)
{
    Run r;

    RUN(&r, "--max-connections=5");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_connections, 5);
    run_free(&r);

    RUN(&r, "--max-connections", "5");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_connections, 5);
    run_free(&r);

    RUN(&r, "-V", "--max-connections", "4294967295", "-p", "9");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.max_connections, 4294967295U);
    ck_assert_int_eq(r.cfg.port, 9);
    ck_assert_int_eq(r.cfg.verbosity, 1);
    run_free(&r);

    RUN(&r, "--max-connections=");
    expect_error(&r, "--max-connections");
    run_free(&r);
    RUN(&r, "--max-connections=x");
    expect_error(&r, "--max-connections");
    run_free(&r);
    RUN(&r, "--max-connections", "-1");
    expect_error(&r, "--max-connections");
    run_free(&r);
    RUN(&r, "--max-connections=4294967296");
    expect_error(&r, "--max-connections");
    run_free(&r);
}
END_TEST

START_TEST(version_and_help)
{
    Run r;
    const char *want = "tubed " TUBED_VERSION "\n";

    RUN(&r, "-v");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    ck_assert_uint_eq(r.outlen, strlen(want));
    ck_assert_str_eq(r.out, want);
    run_free(&r);

    RUN(&r, "--version");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    ck_assert_str_eq(r.out, want);
    run_free(&r);

    /* -v stops parsing: what follows is not looked at. */
    RUN(&r, "-Vv", "--bogus");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    ck_assert_str_eq(r.out, want);
    run_free(&r);

    /* -h, as beanstalkd's: nothing on out; main prints the usage on
     * stderr and exits 0. What follows is not looked at. */
    RUN(&r, "-h", "--bogus");
    ck_assert_int_eq(r.rc, OPTS_HELP);
    ck_assert_str_eq(r.out, "");
    run_free(&r);
    RUN(&r, "-Vh");
    ck_assert_int_eq(r.rc, OPTS_HELP);
    ck_assert_str_eq(r.out, "");
    run_free(&r);

    RUN(&r, "--help");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    ck_assert_ptr_nonnull(strstr(r.out, "Usage: tubed"));
    ck_assert_ptr_nonnull(strstr(r.out, "-p PORT"));
    ck_assert_ptr_nonnull(strstr(r.out, "-z BYTES"));
    ck_assert_ptr_nonnull(strstr(r.out, "--max-connections"));
    ck_assert_ptr_nonnull(strstr(r.out, "1073741824"));
    run_free(&r);

    /* opts_usage names the program it is given. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    opts_usage(f, "/usr/bin/tubed");
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "Usage: /usr/bin/tubed [OPTIONS]"));
    free(buf);
}
END_TEST

START_TEST(error_message_truncated_safely)
{
    Config c;
    char *argv[] = {"tubed", "-p", "not-a-port-at-all", NULL};
    char err[8];
    FILE *f = fopen("/dev/null", "w");

    opts_defaults(&c);
    memset(err, 'Z', sizeof err);
    ck_assert_int_eq(opts_parse(&c, 3, argv, f, err, sizeof err), OPTS_ERROR);
    ck_assert_uint_eq(strlen(err), sizeof err - 1);
    fclose(f);
}
END_TEST

/* ---- the config file ----------------------------------------------------- */

static char conf_dir[64];
static char conf_path[128];

static void conf_setup(void)
{
    strcpy(conf_dir, "/tmp/tubed-unit-opts-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(conf_dir));
    snprintf(conf_path, sizeof conf_path, "%s/tubed.conf", conf_dir);
}

static void conf_teardown(void)
{
    unlink(conf_path);
    rmdir(conf_dir);
}

static void write_conf(const char *text)
{
    FILE *f = fopen(conf_path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* Every server key, none at its default. */
static const char all_keys[] =
    "listen = 127.0.0.2\nport = 11301\nmax_job_size = 1K\nuser = root\n"
    "binlog_dir = /file/binlog\nfsync_ms = 9\nno_fsync = true\nbinlog_file_size = 1M\n"
    "verbose = 3\nmax_connections = 40\nstall_timeout = 2m\njob_memory = 2G\n"
    "recover = true\nmemcache_port = 22133\nmetrics_port = 9100\nallow_shutdown = true\n"
    "[tube emails]\nmax_items = 5\n";

START_TEST(config_file_values)
{
    Run r;
    TubePolicy p;

    write_conf(all_keys);
    RUN(&r, "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_str_eq(r.cfg.config_path, conf_path);
    ck_assert_ptr_nonnull(r.cfg.conf);
    ck_assert_str_eq(r.cfg.listen_addr, "127.0.0.2");
    ck_assert_int_eq(r.cfg.port, 11301);
    ck_assert_int_eq(r.cfg.addr_given, 1);
    ck_assert_uint_eq(r.cfg.max_job_size, 1024);
    ck_assert_str_eq(r.cfg.user, "root");
    ck_assert_str_eq(r.cfg.binlog_dir, "/file/binlog");
    ck_assert_uint_eq(r.cfg.fsync_ms, 9);
    ck_assert_int_eq(r.cfg.fsync_never, 1);
    ck_assert_uint_eq(r.cfg.binlog_size, 1048576);
    ck_assert_int_eq(r.cfg.verbosity, 3);
    ck_assert_uint_eq(r.cfg.max_connections, 40);
    ck_assert_uint_eq(r.cfg.stall_timeout, 120);
    ck_assert_uint_eq(r.cfg.job_memory, 2147483648ULL);
    ck_assert_int_eq(r.cfg.recover, 1);
    ck_assert_int_eq(r.cfg.memcache_port, 22133);
    ck_assert_int_eq(r.cfg.metrics_port, 9100);
    ck_assert_int_eq(r.cfg.allow_shutdown, 1);
    ck_assert_uint_eq(r.cfg.cli_set, 0);
    ck_assert_uint_eq(r.outlen, 0);
    /* The strings are the Config's own copies, not the file's. */
    ck_assert_ptr_ne(r.cfg.listen_addr, r.cfg.conf->server.listen);
    ck_assert_ptr_ne(r.cfg.binlog_dir, r.cfg.conf->server.binlog_dir);
    conf_policy(r.cfg.conf, "emails", 6, r.cfg.max_job_size, &p);
    ck_assert_uint_eq(p.max_items, 5);
    run_free(&r);

    /* An empty file changes nothing. */
    write_conf("# nothing\n");
    RUN(&r, "--config=" "/dev/null");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    check_defaults(&r.cfg);
    run_free(&r);
}
END_TEST

/* The command line wins key by key, wherever --config stands. */
START_TEST(config_command_line_wins)
{
    Run r;

    write_conf(all_keys);
    RUN(&r, "-p", "9", "-l", "10.0.0.1", "-z", "100", "-u", "nobody", "-b", "/cli", "-f", "7",
        "-s", "2048", "-V", "--max-connections=3", "--config", conf_path, "--stall-timeout",
        "5", "--job-memory=77", "--memcache-port", "1", "--metrics-port=2");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 9);
    ck_assert_str_eq(r.cfg.listen_addr, "10.0.0.1");
    ck_assert_uint_eq(r.cfg.max_job_size, 100);
    ck_assert_str_eq(r.cfg.user, "nobody");
    ck_assert_str_eq(r.cfg.binlog_dir, "/cli");
    ck_assert_uint_eq(r.cfg.fsync_ms, 7);
    ck_assert_uint_eq(r.cfg.binlog_size, 2048);
    ck_assert_int_eq(r.cfg.verbosity, 1);          /* -V replaces verbose = 3 */
    ck_assert_uint_eq(r.cfg.max_connections, 3);
    ck_assert_uint_eq(r.cfg.stall_timeout, 5);
    ck_assert_uint_eq(r.cfg.job_memory, 77);
    ck_assert_int_eq(r.cfg.memcache_port, 1);
    ck_assert_int_eq(r.cfg.metrics_port, 2);
    /* -f turns syncing on, as in beanstalkd: over the file's no_fsync. */
    ck_assert_int_eq(r.cfg.fsync_never, 0);
    /* Keys the command line did not give still come from the file. */
    ck_assert_int_eq(r.cfg.recover, 1);
    ck_assert_int_eq(r.cfg.allow_shutdown, 1);
    ck_assert_uint_eq(r.cfg.cli_set,
                      CONF_BIT(SK_PORT) | CONF_BIT(SK_LISTEN) | CONF_BIT(SK_MAX_JOB_SIZE) |
                      CONF_BIT(SK_USER) | CONF_BIT(SK_BINLOG_DIR) | CONF_BIT(SK_FSYNC_MS) |
                      CONF_BIT(SK_NO_FSYNC) |
                      CONF_BIT(SK_BINLOG_FILE_SIZE) | CONF_BIT(SK_VERBOSE) |
                      CONF_BIT(SK_MAX_CONNECTIONS) | CONF_BIT(SK_STALL_TIMEOUT) |
                      CONF_BIT(SK_JOB_MEMORY) | CONF_BIT(SK_MEMCACHE_PORT) |
                      CONF_BIT(SK_METRICS_PORT));
    run_free(&r);

    /* One key from each side. */
    write_conf("port = 5\nlisten = 127.0.0.9\nno_fsync = false\nrecover = false\n");
    RUN(&r, "--config", conf_path, "-p", "6", "-F", "--recover");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 6);
    ck_assert_str_eq(r.cfg.listen_addr, "127.0.0.9");
    ck_assert_int_eq(r.cfg.fsync_never, 1);
    ck_assert_int_eq(r.cfg.recover, 1);
    run_free(&r);

    /* The last --config wins, as for every flag. */
    RUN(&r, "--config", "/nonexistent/tubed.conf", "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 5);
    run_free(&r);
}
END_TEST

START_TEST(config_bad_file)
{
    char want[256];
    Run r;

    write_conf("port = 1\n[tube a]\nbogus = 2\n");
    RUN(&r, "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_CONFIG_ERROR);
    snprintf(want, sizeof want, "%s:3: unknown key 'bogus'", conf_path);
    ck_assert_str_eq(r.err, want);
    ck_assert_ptr_null(r.cfg.conf);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);

    RUN(&r, "--config", "/nonexistent/tubed.conf");
    ck_assert_int_eq(r.rc, OPTS_CONFIG_ERROR);
    ck_assert_str_eq(r.err, "/nonexistent/tubed.conf: cannot read: No such file or directory");
    run_free(&r);

    /* A flag error is still a flag error (usage follows), even with a
     * bad file: the file is read only once the flags are good. */
    RUN(&r, "--config", conf_path, "-p", "x");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "--config");
    expect_error(&r, "--config");
    ck_assert_ptr_nonnull(strstr(r.err, "requires an argument"));
    run_free(&r);
}
END_TEST

/* Read-behind needs a binlog, from the command line or the file. */
START_TEST(config_validated_after_merge)
{
    char want[256];
    Run r;

    write_conf("\nmax_memory_size = 1M\n");
    RUN(&r, "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_CONFIG_ERROR);
    snprintf(want, sizeof want,
             "%s:2: max_memory_size needs a binlog: give -b DIR or binlog_dir", conf_path);
    ck_assert_str_eq(r.err, want);
    ck_assert_ptr_null(r.cfg.conf);
    ck_assert_ptr_null(r.cfg.file_strings);
    run_free(&r);

    RUN(&r, "--config", conf_path, "-b", "/var/lib/tubed");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    run_free(&r);

    write_conf("binlog_dir = /var/lib/tubed\nmax_memory_size = 1M\n");
    RUN(&r, "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_RUN);
    run_free(&r);

    write_conf("binlog_dir = /b\nmax_memory_size = 1M\n[tube cache]\njournal = false\n");
    RUN(&r, "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_CONFIG_ERROR);
    snprintf(want, sizeof want, "%s:4: max_memory_size (line 2) and journal = false (line 4) "
             "both apply to [tube cache]: read-behind keeps bodies in the binlog", conf_path);
    ck_assert_str_eq(r.err, want);
    run_free(&r);
}
END_TEST

START_TEST(check_config)
{
    char want[256];
    Run r;

    write_conf(all_keys);
    RUN(&r, "--config", conf_path, "--check-config");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    snprintf(want, sizeof want, "%s: ok\n", conf_path);
    ck_assert_str_eq(r.out, want);
    ck_assert_ptr_null(r.cfg.conf);     /* nothing left to free */
    run_free(&r);

    /* Flags are checked too, and order does not matter. */
    RUN(&r, "--check-config", "-p", "99999", "--config", conf_path);
    expect_error(&r, "-p");
    run_free(&r);

    write_conf("max_items = 1\nmax_items = 2\n");
    RUN(&r, "--check-config", "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_CONFIG_ERROR);
    snprintf(want, sizeof want, "%s:2: duplicate key max_items (first set at line 1)",
             conf_path);
    ck_assert_str_eq(r.err, want);
    ck_assert_uint_eq(r.outlen, 0);
    run_free(&r);

    /* The merged configuration is what is checked. */
    write_conf("max_memory_size = 1M\n");
    RUN(&r, "--check-config", "--config", conf_path);
    ck_assert_int_eq(r.rc, OPTS_CONFIG_ERROR);
    run_free(&r);
    RUN(&r, "--check-config", "--config", conf_path, "-b", "/b");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    run_free(&r);

    RUN(&r, "--check-config");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    ck_assert_str_eq(r.out, "command line: ok\n");
    run_free(&r);
    RUN(&r, "--check-config", "-p", "abc");
    expect_error(&r, "-p");
    run_free(&r);
    RUN(&r, "--check-config=1");
    expect_error(&r, "--check-config");
    run_free(&r);
}
END_TEST

START_TEST(listener_ports)
{
    Run r;

    RUN(&r, "--memcache-port", "22133", "--metrics-port=9100");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.memcache_port, 22133);
    ck_assert_int_eq(r.cfg.metrics_port, 9100);
    ck_assert_int_eq(r.cfg.port, 11300);
    ck_assert_int_eq(r.cfg.addr_given, 0);
    run_free(&r);

    RUN(&r, "--metrics-port", "0");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.metrics_port, 0);
    run_free(&r);

    RUN(&r, "--memcache-port", "65536");
    expect_error(&r, "--memcache-port");
    run_free(&r);
    RUN(&r, "--metrics-port=x");
    expect_error(&r, "--metrics-port");
    run_free(&r);
    RUN(&r, "--memcache-port");
    expect_error(&r, "requires an argument");
    run_free(&r);
    /* Defaults: both off, no shutdown, no file. */
    RUN(&r, "-V");
    ck_assert_int_eq(r.cfg.memcache_port, 0);
    ck_assert_int_eq(r.cfg.metrics_port, 0);
    ck_assert_int_eq(r.cfg.allow_shutdown, 0);
    ck_assert_ptr_null(r.cfg.config_path);
    ck_assert_ptr_null(r.cfg.conf);
    run_free(&r);
}
END_TEST

/* -c keeps beanstalkd's meaning: an obsolete flag with no argument. */
START_TEST(c_is_not_config)
{
    Run r;

    write_conf("port = 5\n");
    RUN(&r, "-c", conf_path);
    expect_error(&r, "unexpected argument");
    run_free(&r);
    RUN(&r, "-c", "--config", conf_path, "-cn");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_int_eq(r.cfg.port, 5);
    run_free(&r);
}
END_TEST

START_TEST(usage_lists_new_options)
{
    Run r;

    RUN(&r, "--help");
    ck_assert_int_eq(r.rc, OPTS_EXIT_OK);
    ck_assert_ptr_nonnull(strstr(r.out, "--config FILE"));
    ck_assert_ptr_nonnull(strstr(r.out, "--check-config"));
    ck_assert_ptr_nonnull(strstr(r.out, "--memcache-port PORT"));
    ck_assert_ptr_nonnull(strstr(r.out, "--metrics-port PORT"));
    run_free(&r);
}
END_TEST

/* A reload refuses what the next start (same command line) would. */
START_TEST(reload_checks_the_next_start)
{
    char err[256];
    ConfFile *next = (ConfFile *)&next;
    Run r;

    write_conf("max_items = 1\n");
    RUN(&r, "--config", conf_path, "--memcache-port", "7");
    ck_assert_int_eq(r.rc, OPTS_RUN);

    write_conf("metrics_port = 7\n");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), -1);
    ck_assert_ptr_null(next);
    ck_assert_msg(strstr(err, "--memcache-port and metrics_port") &&
                  strstr(err, "both port 7"), "err '%s'", err);

    write_conf("main_listener = false\nmemcache_port = 0\n");
    /* --memcache-port 7 still listens: not "listen nowhere". */
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), 0);
    conf_free(next);

    write_conf("user = tubed-unit-no-such-user\n");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), -1);
    ck_assert_msg(strstr(err, ":1: unknown user 'tubed-unit-no-such-user'"), "err '%s'", err);

    write_conf("max_items = 2\n");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), 0);
    ck_assert_ptr_nonnull(next);
    conf_free(next);
    run_free(&r);
}
END_TEST

START_TEST(reload)
{
    char err[256], note[128], kept[128], want[256];
    ConfFile *next = (ConfFile *)&next;
    TubePolicy p;
    Run r;

    write_conf("listen = 127.0.0.1\nport = 11301\nmax_connections = 10\nstall_timeout = 5\n"
               "job_memory = 1M\n[tube x]\npriority = 1\n");
    RUN(&r, "--config", conf_path, "--max-connections", "99");
    ck_assert_int_eq(r.rc, OPTS_RUN);
    ck_assert_uint_eq(r.cfg.stall_timeout, 5);

    /* stall_timeout and job_memory dropped: back to their defaults;
     * max_connections is the command line's; port needs a restart. */
    write_conf("listen = 127.0.0.1\nport = 11302\nmax_connections = 20\nverbose = 2\n"
               "allow_shutdown = true\nuser = root\n[tube x]\npriority = 3\n");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), 0);
    ck_assert_ptr_nonnull(next);
    opts_reload_apply(&r.cfg, next, note, sizeof note, kept, sizeof kept);
    ck_assert_str_eq(kept, "max_connections"); /* 20 in the file, 99 given */
    ck_assert_ptr_eq(r.cfg.conf, next);
    ck_assert_str_eq(note, "port, user");
    ck_assert_int_eq(r.cfg.port, 11301);
    ck_assert_ptr_null(r.cfg.user);
    ck_assert_uint_eq(r.cfg.max_connections, 99);
    ck_assert_uint_eq(r.cfg.stall_timeout, 30);
    ck_assert_uint_eq(r.cfg.job_memory, 0);
    ck_assert_int_eq(r.cfg.verbosity, 2);
    ck_assert_int_eq(r.cfg.allow_shutdown, 1);
    ck_assert_str_eq(r.cfg.listen_addr, "127.0.0.1"); /* still readable: owned copy */
    conf_policy(r.cfg.conf, "x", 1, r.cfg.max_job_size, &p);
    ck_assert_uint_eq(p.priority, 3);

    /* A bad file: refused, nothing changes. */
    write_conf("max_connections = 1\n[tube x]\nport = 1\n");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), -1);
    ck_assert_ptr_null(next);
    snprintf(want, sizeof want, "%s:3: port is a server setting: allowed only at the top "
             "level, before the first [tube] section", conf_path);
    ck_assert_str_eq(err, want);
    ck_assert_uint_eq(r.cfg.verbosity, 2);

    /* Checked against the running binlog (none here). */
    write_conf("binlog_dir = /b\nmax_memory_size = 1M\n");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), -1);
    snprintf(want, sizeof want,
             "%s:2: max_memory_size needs a binlog: give -b DIR or binlog_dir", conf_path);
    ck_assert_str_eq(err, want);

    /* The file gone: refused too. */
    unlink(conf_path);
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), -1);
    run_free(&r);

    /* Without --config: nothing to read, nothing changes. */
    RUN(&r, "-V");
    ck_assert_int_eq(opts_reload(&r.cfg, &next, err, sizeof err), 0);
    ck_assert_ptr_null(next);
    opts_reload_apply(&r.cfg, next, note, sizeof note, kept, sizeof kept);
    ck_assert_str_eq(note, "");
    ck_assert_str_eq(kept, "");
    ck_assert_int_eq(r.cfg.verbosity, 1);
    ck_assert_ptr_null(r.cfg.conf);
    run_free(&r);
}
END_TEST

static Suite *opts_suite(void)
{
    Suite *s = suite_create("opts");
    TCase *tc = unit_tcase("flags");

    tcase_add_test(tc, defaults);
    tcase_add_test(tc, port_forms);
    tcase_add_test(tc, port_invalid);
    tcase_add_test(tc, job_memory_sizes);
    tcase_add_test(tc, stall_timeout_durations);
    tcase_add_test(tc, verbosity_and_combined);
    tcase_add_test(tc, string_flags);
    tcase_add_test(tc, binlog_numbers);
    tcase_add_test(tc, job_size_limits);
    tcase_add_test(tc, job_size_capped_above_limit);
    tcase_add_test(tc, recover_and_addr_given);
    tcase_add_test(tc, obsolete_flags_ignored);
    tcase_add_test(tc, unknown_flags);
    tcase_add_test(tc, missing_argument);
    tcase_add_test(tc, max_connections);
    tcase_add_test(tc, version_and_help);
    tcase_add_test(tc, error_message_truncated_safely);
    suite_add_tcase(s, tc);

    tc = unit_tcase("config");
    tcase_add_checked_fixture(tc, conf_setup, conf_teardown);
    tcase_add_test(tc, config_file_values);
    tcase_add_test(tc, config_command_line_wins);
    tcase_add_test(tc, config_bad_file);
    tcase_add_test(tc, config_validated_after_merge);
    tcase_add_test(tc, check_config);
    tcase_add_test(tc, listener_ports);
    tcase_add_test(tc, c_is_not_config);
    tcase_add_test(tc, usage_lists_new_options);
    tcase_add_test(tc, reload);
    tcase_add_test(tc, reload_checks_the_next_start);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(opts_suite)
