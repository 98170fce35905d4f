/* Unit tests for hostport.c: the address of --replica-of, replica_of and
 * follow (spec/replication.md §1, §4). */
#include <string.h>

#include "hostport.h"
#include "unit.h"

static void ok(const char *a, const char *want_host, int want_port)
{
    char host[64] = "untouched";
    int port = 0;

    ck_assert_msg(hostport_split(a, host, sizeof host, &port) == 0, "'%s' refused", a);
    ck_assert_msg(!strcmp(host, want_host), "'%s' gave host '%s'", a, host);
    ck_assert_msg(port == want_port, "'%s' gave port %d", a, port);
}

static void bad(const char *a)
{
    char host[64];
    int port = 0;

    ck_assert_msg(hostport_split(a, host, sizeof host, &port) == -1, "'%s' accepted", a);
}

START_TEST(accepted)
{
    ok("127.0.0.1:11300", "127.0.0.1", 11300);
    ok("primary.example.com:1", "primary.example.com", 1);
    ok("db_1-a:65535", "db_1-a", 65535);
    ok("[::1]:11300", "::1", 11300);
    ok("[fe80::1%eth0]:11300", "fe80::1%eth0", 11300);
    ok("[::ffff:127.0.0.1]:7", "::ffff:127.0.0.1", 7);
    ok("unix:/run/tubed.sock", "/run/tubed.sock", -1);
}
END_TEST

START_TEST(refused)
{
    static const char *const cases[] = {
        "", "127.0.0.1", "127.0.0.1:", ":11300", "127.0.0.1:0", "127.0.0.1:65536",
        "127.0.0.1:-1", "127.0.0.1:+1", "127.0.0.1: 5", "127.0.0.1:5 ", "127.0.0.1:123456",
        "127.0.0.1:11300x", "a b:1", "host\t:1", "::1:11300", "[::1]", "[::1]:",
        "[::1:11300", "[]:1", "[zz]:1", "[127.0.0.1]:5", "[::1%]:1", "[::1]x:1",
        "unix:", "unix:rel/path", "unix", "localhost:1:2",
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad(cases[i]);
}
END_TEST

START_TEST(host_must_fit)
{
    char host[8];
    int port;

    ck_assert_int_eq(hostport_split("abcdefgh:1", host, sizeof host, &port), -1);
    ck_assert_int_eq(hostport_split("abcdefg:1", host, sizeof host, &port), 0);
    ck_assert_int_eq(hostport_split("unix:/abcdefg", host, sizeof host, &port), -1);
    ck_assert_int_eq(hostport_split("unix:/abcdef", host, sizeof host, &port), 0);
}
END_TEST

static Suite *hostport_suite(void)
{
    Suite *s = suite_create("hostport");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, accepted);
    tcase_add_test(tc, refused);
    tcase_add_test(tc, host_must_fit);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(hostport_suite)
