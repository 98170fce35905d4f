/* Unit tests for promtext.c: the exact bytes of families, samples, label
 * escaping and number formatting; doubles read back exactly; the metric
 * names of doc/monitoring.md are valid and follow the naming rules. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "promtext.h"
#include "unit.h"

static void expect(Buf *b, const char *want)
{
    ck_assert_int_eq(b->oom, 0);
    ck_assert_msg(b->len == strlen(want) && !memcmp(b->data, want, b->len),
                  "got:\n%.*s\nwant:\n%s", (int)b->len, b->data ? b->data : "", want);
    buf_free(b);
}

START_TEST(family_lines)
{
    Buf b = {0};

    prom_family(&b, "tubed_commands_total", PROM_COUNTER, "Commands received.");
    expect(&b, "# HELP tubed_commands_total Commands received.\n"
               "# TYPE tubed_commands_total counter\n");
    prom_family(&b, "tubed_jobs", PROM_GAUGE, "Jobs");
    prom_family(&b, "x", PROM_UNTYPED, "");
    prom_family(&b, "h", PROM_HISTOGRAM, "h");
    prom_family(&b, "s", PROM_SUMMARY, "s");
    expect(&b, "# HELP tubed_jobs Jobs\n# TYPE tubed_jobs gauge\n"
               "# HELP x \n# TYPE x untyped\n"
               "# HELP h h\n# TYPE h histogram\n"
               "# HELP s s\n# TYPE s summary\n");
}
END_TEST

START_TEST(help_escaping)
{
    Buf b = {0};

    /* only backslash and newline; a double quote stays as it is */
    prom_family(&b, "m", PROM_GAUGE, "a\\b\nc \"q\" \\n \xc3\xa9");
    expect(&b, "# HELP m a\\\\b\\nc \"q\" \\\\n \xc3\xa9\n# TYPE m gauge\n");
    prom_family(&b, "m", PROM_GAUGE, "\n\n\\");
    expect(&b, "# HELP m \\n\\n\\\\\n# TYPE m gauge\n");
}
END_TEST

START_TEST(samples_and_labels)
{
    Buf b = {0};
    PromLabel one[] = {prom_label("tube", "default")};
    PromLabel two[] = {prom_label("tube", "emails"), prom_label("state", "ready")};

    prom_sample_u64(&b, "tubed_uptime_seconds", NULL, 0, 12);
    prom_sample_u64(&b, "tubed_tube_jobs_created_total", one, 1, 0);
    prom_sample_u64(&b, "tubed_tube_jobs", two, 2, 4);
    expect(&b, "tubed_uptime_seconds 12\n"
               "tubed_tube_jobs_created_total{tube=\"default\"} 0\n"
               "tubed_tube_jobs{tube=\"emails\",state=\"ready\"} 4\n");
}
END_TEST

START_TEST(label_escaping)
{
    Buf b = {0};
    PromLabel l[] = {prom_label("path", "C:\\DIR\\FILE.TXT"),
                     prom_label("error", "Cannot find file:\n\"FILE.TXT\"")};
    /* a value with an explicit length, not NUL-terminated */
    PromLabel part[] = {{"tube", "emails-and-more", 6}};
    /* every legal tube-name character passes through unchanged */
    PromLabel names[] = {prom_label("tube", "a;b"), prom_label("t2", "$(x)"),
                         prom_label("t3", "A-Za-z0-9+/;.$_()")};

    prom_sample_f64(&b, "msdos_file_access_time_seconds", l, 2, 1.458255915e9);
    prom_sample_u64(&b, "m", part, 1, 1);
    prom_sample_u64(&b, "m", names, 3, 2);
    prom_sample_u64(&b, "m", (PromLabel[]){prom_label("v", "")}, 1, 3);
    prom_sample_u64(&b, "m", (PromLabel[]){prom_label("v", "\\\"\n\\")}, 1, 4);
    expect(&b, "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\","
               "error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\"} 1458255915\n"
               "m{tube=\"emails\"} 1\n"
               "m{tube=\"a;b\",t2=\"$(x)\",t3=\"A-Za-z0-9+/;.$_()\"} 2\n"
               "m{v=\"\"} 3\n"
               "m{v=\"\\\\\\\"\\n\\\\\"} 4\n");
}
END_TEST

START_TEST(integers)
{
    Buf b = {0};

    prom_sample_u64(&b, "a", NULL, 0, 0);
    prom_sample_u64(&b, "a", NULL, 0, UINT64_MAX);
    prom_sample_i64(&b, "b", NULL, 0, 0);
    prom_sample_i64(&b, "b", NULL, 0, -1);
    prom_sample_i64(&b, "b", NULL, 0, INT64_MAX);
    prom_sample_i64(&b, "b", NULL, 0, INT64_MIN);
    expect(&b, "a 0\na 18446744073709551615\n"
               "b 0\nb -1\nb 9223372036854775807\nb -9223372036854775808\n");
}
END_TEST

static void fmt_is(double v, const char *want)
{
    char out[PROM_F64_MAX + 1];
    size_t n = prom_fmt_f64(out, v);

    out[n] = '\0';
    ck_assert_msg(!strcmp(out, want), "%.17g: got '%s', want '%s'", v, out, want);
}

START_TEST(doubles)
{
    Buf b = {0};

    fmt_is(0.0, "0");
    fmt_is(-0.0, "-0");
    fmt_is(1.0, "1");
    fmt_is(12.0, "12");
    fmt_is(1.5, "1.5");
    fmt_is(0.1, "0.1");
    fmt_is(0.000001, "1e-06");
    fmt_is(1e21, "1e+21");
    fmt_is(123456.789, "123456.789");
    fmt_is(1.0 / 3.0, "0.3333333333333333");
    fmt_is(2.0 / 3.0, "0.6666666666666666");
    fmt_is(0.1 + 0.2, "0.30000000000000004");
    fmt_is(9007199254740992.0, "9007199254740992");
    fmt_is(DBL_MAX, "1.7976931348623157e+308");
    fmt_is(-DBL_MAX, "-1.7976931348623157e+308");
    fmt_is(DBL_MIN, "2.2250738585072014e-308");
    fmt_is(NAN, "NaN");
    fmt_is(-NAN, "NaN");
    fmt_is(INFINITY, "+Inf");
    fmt_is(-INFINITY, "-Inf");
    prom_sample_f64(&b, "tubed_cpu_seconds_total", (PromLabel[]){prom_label("mode", "user")},
                    1, 0.012345);
    prom_sample_f64(&b, "x", NULL, 0, NAN);
    prom_sample_f64(&b, "x", NULL, 0, -INFINITY);
    expect(&b, "tubed_cpu_seconds_total{mode=\"user\"} 0.012345\nx NaN\nx -Inf\n");
}
END_TEST

/* Any finite double reads back as itself, in at most 17 digits. */
START_TEST(doubles_round_trip)
{
    Rng r;
    char out[PROM_F64_MAX + 1];

    rng_seed(&r, 7);
    for (int i = 0; i < 200000; i++) {
        uint64_t bits = rng_next(&r);
        double v;
        size_t n;
        memcpy(&v, &bits, sizeof v);
        if (i % 2)
            v = (double)(bits >> (bits % 64)) / 1000.0; /* everyday values too */
        if (!isfinite(v))
            continue;
        n = prom_fmt_f64(out, v);
        REQUIRE(n > 0 && n <= 24);
        out[n] = '\0';
        REQUIRE_MSG(strtod(out, NULL) == v && signbit(strtod(out, NULL)) == signbit(v),
                    "%s does not read back as %.17g", out, v);
        REQUIRE_MSG(!strchr(out, ' ') && !strchr(out, ','), "'%s'", out);
    }
}
END_TEST

START_TEST(out_of_memory)
{
    Buf b = {0};

    alloc_fail_after(1);
    prom_family(&b, "m", PROM_GAUGE, "help");
    ck_assert_int_eq(b.oom, 1);
    /* later appends may succeed, but the flag stays for the final check */
    prom_sample_u64(&b, "m", NULL, 0, 1);
    ck_assert_int_eq(b.oom, 1);
    buf_free(&b);
}
END_TEST

START_TEST(names)
{
    ck_assert(prom_name_valid("tubed_jobs"));
    ck_assert(prom_name_valid("_x:y_1"));
    ck_assert(prom_name_valid("a"));
    ck_assert(!prom_name_valid(""));
    ck_assert(!prom_name_valid("1a"));
    ck_assert(!prom_name_valid("a-b"));
    ck_assert(!prom_name_valid("a b"));
    ck_assert(!prom_name_valid("é"));
    ck_assert(prom_label_name_valid("tube"));
    ck_assert(prom_label_name_valid("_a1"));
    ck_assert(!prom_label_name_valid("__name__"));
    ck_assert(!prom_label_name_valid("a:b"));
    ck_assert(!prom_label_name_valid("1a"));
    ck_assert(!prom_label_name_valid(""));
}
END_TEST

/* The families of doc/monitoring.md, as the renderer will write them:
 * valid names, "_total" exactly on counters, no reserved suffixes. */
static const struct {
    const char *name;
    PromType type;
} families[] = {
    {"tubed_build_info", PROM_GAUGE},
    {"tubed_uptime_seconds", PROM_GAUGE},
    {"tubed_draining", PROM_GAUGE},
    {"tubed_commands_total", PROM_COUNTER},
    {"tubed_jobs", PROM_GAUGE},
    {"tubed_jobs_urgent", PROM_GAUGE},
    {"tubed_jobs_created_total", PROM_COUNTER},
    {"tubed_job_timeouts_total", PROM_COUNTER},
    {"tubed_tubes", PROM_GAUGE},
    {"tubed_connections", PROM_GAUGE},
    {"tubed_connections_accepted_total", PROM_COUNTER},
    {"tubed_unread_reply_bytes", PROM_GAUGE},
    {"tubed_unread_reply_budget_bytes", PROM_GAUGE},
    {"tubed_replies_refused_total", PROM_COUNTER},
    {"tubed_producers", PROM_GAUGE},
    {"tubed_workers", PROM_GAUGE},
    {"tubed_workers_waiting", PROM_GAUGE},
    {"tubed_max_job_size_bytes", PROM_GAUGE},
    {"tubed_job_memory_bytes", PROM_GAUGE},
    {"tubed_job_memory_limit_bytes", PROM_GAUGE},
    {"tubed_cpu_seconds_total", PROM_COUNTER},
    {"tubed_binlog_enabled", PROM_GAUGE},
    {"tubed_binlog_healthy", PROM_GAUGE},
    {"tubed_binlog_disk_bytes", PROM_GAUGE},
    {"tubed_binlog_live_bytes", PROM_GAUGE},
    {"tubed_binlog_records_written_total", PROM_COUNTER},
    {"tubed_binlog_records_migrated_total", PROM_COUNTER},
    {"tubed_tube_jobs", PROM_GAUGE},
    {"tubed_tube_jobs_urgent", PROM_GAUGE},
    {"tubed_tube_body_bytes", PROM_GAUGE},
    {"tubed_tube_jobs_created_total", PROM_COUNTER},
    {"tubed_tube_jobs_deleted_total", PROM_COUNTER},
    {"tubed_tube_jobs_expired_total", PROM_COUNTER},
    {"tubed_tube_jobs_discarded_total", PROM_COUNTER},
    {"tubed_tube_job_timeouts_total", PROM_COUNTER},
    {"tubed_tube_oldest_ready_age_seconds", PROM_GAUGE},
    {"tubed_tube_workers_waiting", PROM_GAUGE},
    {"tubed_tube_connections_using", PROM_GAUGE},
    {"tubed_tube_connections_watching", PROM_GAUGE},
    {"tubed_tube_paused", PROM_GAUGE},
    {"tubed_tube_pause_remaining_seconds", PROM_GAUGE},
    {"tubed_tube_pauses_total", PROM_COUNTER},
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

START_TEST(tubed_names)
{
    static const char *const labels[] = {"command", "state", "tube", "mode", "version"};
    size_t nf = sizeof families / sizeof families[0];

    for (size_t i = 0; i < nf; i++) {
        const char *n = families[i].name;
        ck_assert_msg(prom_name_valid(n) && !strncmp(n, "tubed_", 6), "%s", n);
        ck_assert_msg(ends_with(n, "_total") == (families[i].type == PROM_COUNTER),
                      "%s: _total exactly on counters", n);
        ck_assert_msg(!ends_with(n, "_count") && !ends_with(n, "_sum") &&
                          !ends_with(n, "_bucket") && !strchr(n, ':'),
                      "%s: reserved suffix", n);
        for (size_t k = 0; k < i; k++)
            ck_assert_msg(strcmp(n, families[k].name), "%s twice", n);
    }
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        ck_assert(prom_label_name_valid(labels[i]));
}
END_TEST

static Suite *promtext_suite(void)
{
    Suite *s = suite_create("promtext");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, family_lines);
    tcase_add_test(tc, help_escaping);
    tcase_add_test(tc, samples_and_labels);
    tcase_add_test(tc, label_escaping);
    tcase_add_test(tc, integers);
    tcase_add_test(tc, doubles);
    tcase_add_test(tc, doubles_round_trip);
    tcase_add_test(tc, out_of_memory);
    tcase_add_test(tc, names);
    tcase_add_test(tc, tubed_names);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(promtext_suite)
