/* Unit tests for access control's pure parts: the [listen] sections of the
 * config file (conflisten.c through conf_parse), tube pattern matching,
 * peer checks, the text stats-listeners shows, and the role tables of both
 * protocols (bsaccess.c, mcaccess.c) against the parsers' command tables. */
#include <stdio.h>
#include <string.h>

#include "bsaccess.h"
#include "conf.h"
#include "conflisten.h"
#include "mcaccess.h"
#include "unit.h"

static ConfFile *parse_ok(const char *text)
{
    ConfFile *cf = NULL;
    char err[512] = "";

    if (conf_parse("t.conf", text, strlen(text), &cf, err, sizeof err) < 0)
        ck_abort_msg("parse failed: %s\n--- input:\n%s", err, text);
    return cf;
}

static void parse_err(const char *text, const char *want)
{
    ConfFile *cf = (ConfFile *)&cf;
    char err[512] = "";

    ck_assert_int_eq(conf_parse("t.conf", text, strlen(text), &cf, err, sizeof err), -1);
    ck_assert_ptr_null(cf);
    ck_assert_msg(!strcmp(err, want), "input:\n%s\ngot:  %s\nwant: %s", text, err, want);
}

START_TEST(sections_parse)
{
    ConfFile *cf = parse_ok("max_items = 5\n"
                            "[listen web]\n"
                            "address = 10.0.0.1:11400\n"
                            "role = producer, read\n"
                            "tubes = app-*, jobs\n"
                            "[tube x]\nmax_items = 1\n"
                            "[listen run]\n"
                            "address = unix:/run/tubed/w.sock\n"
                            "protocol = memcache\n"
                            "role = worker\n"
                            "users = 1000, www-data\n"
                            "groups = 50\n"
                            "socket_mode = 0600\n"
                            "[listen v6]\naddress = [::1]:80\nprotocol = http\n");
    const ConfListen *l = cf->listen;

    ck_assert_uint_eq(cf->n_listen, 3);
    ck_assert_str_eq(l[0].name, "web");
    ck_assert_str_eq(l[0].host, "10.0.0.1");
    ck_assert_int_eq(l[0].port, 11400);
    ck_assert(!l[0].is_unix);
    ck_assert_uint_eq(l[0].roles, ROLE_PRODUCER | ROLE_READ);
    ck_assert_uint_eq(l[0].ntubes, 2);
    ck_assert_uint_eq(l[0].protocol, LP_BEANSTALK);
    ck_assert_uint_eq(l[0].socket_mode, 0660);
    ck_assert(l[1].is_unix);
    ck_assert_str_eq(l[1].host, "unix:/run/tubed/w.sock");
    ck_assert_uint_eq(l[1].protocol, LP_MEMCACHE);
    ck_assert_uint_eq(l[1].nusers, 2);
    ck_assert_uint_eq(l[1].users[0].id, 1000);
    ck_assert_str_eq(l[1].users[1].name, "www-data");
    ck_assert_uint_eq(l[1].groups[0].id, 50);
    ck_assert_uint_eq(l[1].socket_mode, 0600);
    ck_assert_str_eq(l[2].host, "::1");
    ck_assert_int_eq(l[2].port, 80);
    ck_assert_uint_eq(l[2].roles, ROLE_ADMIN); /* the default */
    ck_assert_uint_eq(cf->n_exact, 1);         /* [tube x] still a tube */
    conf_free(cf);
}
END_TEST

START_TEST(section_errors)
{
    parse_err("[listen]\n", "t.conf:1: missing listener name in section header");
    parse_err("[listen a.b]\naddress = 1.2.3.4:5\n",
              "t.conf:1: illegal listener name (want letters, digits, '-' and '_')");
    parse_err("[listen a]\naddress = 1.2.3.4:5\nrole = read,boss\n",
              "t.conf:3: unknown role 'boss' (want admin, worker, producer or read, "
              "comma-separated)");
    parse_err("[listen a]\naddress = 1.2.3.4:5\nrole = read,\n",
              "t.conf:3: unknown role '' (want admin, worker, producer or read, "
              "comma-separated)");
    parse_err("[listen a]\naddress = 1.2.3.4:0\n",
              "t.conf:2: bad address '1.2.3.4:0' (want HOST:PORT, [V6]:PORT or unix:/path)");
    parse_err("[listen a]\naddress = ::1:80\n",
              "t.conf:2: bad address '::1:80' (an IPv6 host goes in [])");
    parse_err("[listen a]\naddress = unix:rel.sock\n",
              "t.conf:2: bad address 'unix:rel.sock' (want unix:/absolute/path, under 108 "
              "bytes)");
    parse_err("[listen a]\naddress = 1.2.3.4:5\ntubes = a*b\n",
              "t.conf:3: bad tube pattern 'a*b' (want a tube name, or a name prefix "
              "followed by '*')");
    parse_err("[listen a]\naddress = 1.2.3.4:5\nusers = 0\n",
              "t.conf:3: users needs a Unix socket (address unix:/path), not 1.2.3.4:5");
    parse_err("[listen a]\naddress = 1.2.3.4:5\nsocket_mode = 0600\n",
              "t.conf:3: socket_mode needs a Unix socket (address unix:/path), not 1.2.3.4:5");
    parse_err("[listen a]\naddress = unix:/x\nusers = a b\n",
              "t.conf:3: bad entry 'a b' in users (want a name or a number)");
    parse_err("[listen a]\naddress = 1.2.3.4:5\naddress = 1.2.3.4:6\n",
              "t.conf:3: duplicate key address (first set at line 2)");
    parse_err("[listen a]\nrole = read\n", "t.conf:1: [listen a] has no address");
    parse_err("[listen a]\naddress = 1.2.3.4:5\n[listen b]\naddress = *:5\n",
              "t.conf:4: [listen b] and [listen a] (line 1) both listen on *:5");
    parse_err("[listen a]\naddress = unix:/s\n[listen b]\naddress = unix:/s\n",
              "t.conf:4: [listen b] and [listen a] (line 1) both listen on unix:/s");
    parse_err("[listen a]\naddress = 1.2.3.4:5\n[listen a]\naddress = 1.2.3.4:6\n",
              "t.conf:3: duplicate section [listen a] (first at line 1)");
    parse_err("[listen a]\naddress = 1.2.3.4:5\nmax_items = 3\n",
              "t.conf:3: unknown key 'max_items' in [listen a] (want address, protocol, "
              "role, tubes, users, groups or socket_mode)");
    parse_err("[listen a]\naddress = 1.2.3.4:5\n[tube x]\nport = 3\n",
              "t.conf:4: port is a server setting: allowed only at the top level, before "
              "the first [tube] section");
}
END_TEST

START_TEST(patterns_match)
{
    ConfFile *cf = parse_ok("[listen a]\naddress = 1.2.3.4:5\ntubes = app-*, jobs, x*\n"
                            "[listen b]\naddress = 1.2.3.4:6\n"
                            "[listen c]\naddress = 1.2.3.4:7\ntubes = *\n");
    const ConfListen *a = &cf->listen[0];
    struct { const char *name; bool ok; } cases[] = {
        {"app-", true}, {"app-1", true}, {"app", false}, {"jobs", true}, {"jobs2", false},
        {"job", false}, {"x", true}, {"xyz", true}, {"default", false}, {"ap", false},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(conf_listen_tube_ok(a, cases[i].name, strlen(cases[i].name)) ==
                      cases[i].ok, "%s", cases[i].name);
    ck_assert(conf_listen_tube_ok(&cf->listen[1], "anything", 8));
    ck_assert(conf_listen_tube_ok(&cf->listen[2], "anything", 8));
    ck_assert(conf_listen_tube_ok(NULL, "x", 1));
    ck_assert(conf_listen_restricted(a));
    ck_assert(!conf_listen_restricted(&cf->listen[1]));
    ck_assert(!conf_listen_restricted(&cf->listen[2])); /* "*": every tube */
    conf_free(cf);
}
END_TEST

START_TEST(peers)
{
    ConfFile *cf = parse_ok("[listen a]\naddress = unix:/a\nusers = 10, 20\ngroups = 7\n"
                            "[listen b]\naddress = unix:/b\n");

    ck_assert(conf_listen_peer_ok(&cf->listen[0], 10, 99));
    ck_assert(conf_listen_peer_ok(&cf->listen[0], 20, 99));
    ck_assert(conf_listen_peer_ok(&cf->listen[0], 99, 7));
    ck_assert(!conf_listen_peer_ok(&cf->listen[0], 0, 0));
    ck_assert(conf_listen_peer_ok(&cf->listen[1], 0, 0));
    conf_free(cf);
}
END_TEST

START_TEST(texts)
{
    ConfFile *cf = parse_ok("[listen a]\naddress = 1.2.3.4:5\ntubes = app-*, jobs\n"
                            "role = read,worker,producer\n");
    char buf[256];

    ck_assert_str_eq(conf_role_text(cf->listen[0].roles, buf, sizeof buf),
                     "worker,producer,read");
    ck_assert_str_eq(conf_role_text(ROLE_ALL, buf, sizeof buf), "admin,worker,producer,read");
    ck_assert_str_eq(conf_tubes_text(&cf->listen[0], buf, sizeof buf), "app-*,jobs");
    ck_assert_str_eq(conf_tubes_text(NULL, buf, sizeof buf), "*");
    ck_assert_str_eq(conf_proto_name(LP_HTTP), "http");
    conf_free(cf);
}
END_TEST

START_TEST(main_clash)
{
    ConfFile *cf = parse_ok("[listen a]\naddress = 127.0.0.1:11300\n"
                            "[listen u]\naddress = unix:/t.sock\n");
    const char *who = "the -l/-p listener";
    char why[256];

    ck_assert_uint_eq(conf_listen_clash(cf->listen, 2, NULL, 11300, who, why, sizeof why), 2);
    ck_assert_str_eq(why, "[listen a] listens on 127.0.0.1:11300, as the -l/-p listener does");
    ck_assert_uint_eq(conf_listen_clash(cf->listen, 2, "127.0.0.1", 11301, who, why,
                                        sizeof why), 0);
    ck_assert_uint_eq(conf_listen_clash(cf->listen, 2, "10.0.0.1", 11300, who, why,
                                        sizeof why), 0);
    ck_assert_uint_eq(conf_listen_clash(cf->listen, 2, "unix:/t.sock", 0, who, why,
                                        sizeof why), 4);
    conf_free(cf);
}
END_TEST

/* One socket file spelt two ways is one address ("//", "/./", "d/.."). */
START_TEST(unix_spellings_clash)
{
    static const struct {
        const char *a, *b;
        int clash;
    } cases[] = {
        {"/run/t/w.sock", "/run/t//w.sock", 1},
        {"/run/t/w.sock", "/run/./t/w.sock", 1},
        {"/run/t/w.sock", "/run/x/../t/w.sock", 1},
        {"/run/t/w.sock", "//run/t/w.sock/", 1},
        {"/run/t/w.sock", "/run/t/w.sock2", 0},
        {"/run/t/w.sock", "/run/t/x/../../w.sock", 0},
        {"/run/t/w.sock", "/run/t/.w.sock", 0},
    };
    const char *who = "the -l/-p listener";
    char text[512], why[256];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ConfFile *cf = parse_ok("[listen u]\naddress = unix:/run/t/w.sock\n");
        snprintf(text, sizeof text, "unix:%s", cases[i].b);
        ck_assert_msg((conf_listen_clash(cf->listen, 1, text, 0, who, why, sizeof why) != 0) ==
                      cases[i].clash, "%s vs %s", cases[i].a, cases[i].b);
        conf_free(cf);
        snprintf(text, sizeof text, "[listen u]\naddress = unix:%s\n[listen v]\n"
                 "address = unix:%s\n", cases[i].a, cases[i].b);
        if (cases[i].clash) {
            char want[512];
            snprintf(want, sizeof want, "t.conf:4: [listen v] and [listen u] (line 1) both "
                     "listen on unix:%s", cases[i].b);
            parse_err(text, want);
        } else {
            conf_free(parse_ok(text));
        }
    }
}
END_TEST

/* Every command of the beanstalk parser has a row, every row admits
 * admin, and the replication commands another branch adds are decided. */
START_TEST(beanstalk_table_complete)
{
    uint8_t allow[CMD_COUNT];
    unsigned roles;
    const char *w;

    ck_assert_uint_eq(bs_access_init(allow), 0);
    for (int t = 0; t < CMD_COUNT; t++) {
        ck_assert_msg(allow[t] & ROLE_ADMIN, "%s", cmd_name((CmdType)t));
        ck_assert_msg(bs_access_roles(cmd_name((CmdType)t)) != 0, "%s has no row",
                      cmd_name((CmdType)t));
    }
    for (size_t i = 0; (w = bs_access_row(i, &roles)); i++)
        ck_assert_msg(roles & ROLE_ADMIN, "%s", w);
    ck_assert_uint_eq(bs_access_roles("stats-replication"), ROLE_ALL);
    ck_assert_uint_eq(bs_access_roles("promote"), ROLE_ADMIN);
    ck_assert_uint_eq(bs_access_roles("follow"), ROLE_ADMIN);
    ck_assert_uint_eq(bs_access_roles("replicate"), ROLE_ADMIN);
    ck_assert_uint_eq(bs_access_roles("put"), ROLE_PRODUCER | ROLE_ADMIN);
    ck_assert_uint_eq(allow[CMD_RESERVE], ROLE_WORKER | ROLE_ADMIN);
    ck_assert_uint_eq(allow[CMD_STATS_LISTENERS], ROLE_ADMIN);
    ck_assert_uint_eq(bs_access_roles("no-such-command"), 0);
}
END_TEST

START_TEST(memcache_table_complete)
{
    uint8_t allow[MC_CMD_COUNT];
    unsigned roles;
    const char *w;

    ck_assert_uint_eq(mc_access_init(allow), 0);
    for (int t = MC_CMD_UNKNOWN + 1; t < MC_CMD_COUNT; t++)
        ck_assert_msg(allow[t] & ROLE_ADMIN, "%s", mc_cmd_name((McCmdType)t));
    for (size_t i = 0; (w = mc_access_row(i, &roles)); i++)
        ck_assert_msg(roles & ROLE_ADMIN, "%s", w);
    ck_assert_uint_eq(mc_access_roles("get/peek"), ROLE_ALL);
    ck_assert_uint_eq(allow[MC_CMD_GET], ROLE_WORKER | ROLE_ADMIN);
    ck_assert_uint_eq(allow[MC_CMD_SET], ROLE_PRODUCER | ROLE_ADMIN);
    ck_assert_uint_eq(allow[MC_CMD_FLUSH_ALL], ROLE_ADMIN);
}
END_TEST

/* Every allocation of a file with [listen] sections can fail: the parse
 * then reports out of memory and leaks nothing (ASan's leak check). */
START_TEST(allocation_failure_sweep)
{
    static const char text[] =
        "[listen a]\naddress = 1.2.3.4:5\ntubes = app-*, b\n"
        "[listen b]\naddress = 1.2.3.4:6\n"
        "[listen c]\naddress = 1.2.3.4:7\ntubes = c*\n"
        "[listen d]\naddress = 1.2.3.4:8\n"
        "[listen e]\naddress = unix:/e\nusers = 0\n"
        "[tube app-x]\nmax_items = 3\n";
    int ok = 0, failed = 0;

    for (unsigned long n = 1; n < 30; n++) {
        ConfFile *cf = (ConfFile *)&cf;
        char err[256] = "";

        alloc_fail_after(n);
        if (conf_parse("t.conf", text, sizeof text - 1, &cf, err, sizeof err) == 0) {
            ok++;
            ck_assert_uint_eq(cf->n_listen, 5);
            ck_assert(conf_listen_tube_ok(&cf->listen[2], "cx", 2));
            conf_free(cf);
        } else {
            failed++;
            ck_assert_ptr_null(cf);
            ck_assert_str_eq(err, "t.conf: out of memory");
        }
        alloc_fail_after(0);
    }
    /* The file, its path, the listen array twice (4, then 8), two pattern
     * arrays, the tube sections. */
    ck_assert_int_eq(failed, 7);
    ck_assert_int_eq(ok, 29 - 7);
}
END_TEST

static Suite *access_suite(void)
{
    Suite *s = suite_create("access");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, sections_parse);
    tcase_add_test(tc, section_errors);
    tcase_add_test(tc, patterns_match);
    tcase_add_test(tc, peers);
    tcase_add_test(tc, texts);
    tcase_add_test(tc, main_clash);
    tcase_add_test(tc, unix_spellings_clash);
    tcase_add_test(tc, beanstalk_table_complete);
    tcase_add_test(tc, memcache_table_complete);
    tcase_add_test(tc, allocation_failure_sweep);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(access_suite)
