/* test_args.c — tubed-cli's command line: the arity of commands with one
 * form or two (move), the usage line that names every form, the options
 * that belong to one command; and the helpers the per-job commands share
 * (ids, their JSON). No server: args_parse() only reads argv. */
#include <stdarg.h>
#include <string.h>

#include "unit.h"

#include "args.h"
#include "commands.h"

/* args_parse() over a NULL-terminated list of words after "tubed-cli". */
static int parse(Err *e, ...)
{
    char *argv[32] = {"tubed-cli"};
    int argc = 1, npos, r;
    char **pos = NULL;
    Cli cli;
    va_list ap;

    va_start(ap, e);
    for (char *w; (w = va_arg(ap, char *)) && argc < 31;)
        argv[argc++] = w;
    va_end(ap);
    e->code = ST_OK;
    e->msg[0] = '\0';
    r = args_parse(&cli, argc, argv, &pos, &npos, e);
    tb_free(pos);
    return r;
}

START_TEST(move_has_two_forms)
{
    Err e;

    REQ_IEQ(parse(&e, "move", "1", "t", NULL), ST_OK);
    REQ_IEQ(parse(&e, "move", "1", "2", "3", "4", "t", NULL), ST_OK);
    REQ_IEQ(parse(&e, "move", "from", "buried", "t", NULL), ST_OK);
    REQ_IEQ(parse(&e, "move", "1", NULL), ST_USAGE);
    REQUIRE_MSG(strcmp(e.msg, "usage: tubed-cli move ID... TUBE | move FROM STATE "
                       "TUBE") == 0, "usage: %s", e.msg);
    REQ_IEQ(parse(&e, "move", NULL), ST_USAGE);
}
END_TEST

START_TEST(arity_of_the_job_commands)
{
    Err e;

    REQ_IEQ(parse(&e, "delete", "1", NULL), ST_OK);
    REQ_IEQ(parse(&e, "delete", "1", "2", "3", NULL), ST_OK);
    REQ_IEQ(parse(&e, "delete", NULL), ST_USAGE);
    REQUIRE_MSG(strcmp(e.msg, "usage: tubed-cli delete ID...") == 0, "%s", e.msg);
    REQ_IEQ(parse(&e, "kick-job", NULL), ST_USAGE);
    REQ_IEQ(parse(&e, "job", "1", "2", NULL), ST_USAGE);
    REQUIRE_MSG(strcmp(e.msg, "usage: tubed-cli job ID") == 0, "%s", e.msg);
    REQ_IEQ(parse(&e, "pause", "t", NULL), ST_USAGE);
    REQ_IEQ(parse(&e, "pause", "t", "0", NULL), ST_OK);
    REQ_IEQ(parse(&e, "stats-tube", "t", NULL), ST_OK);
    REQ_IEQ(parse(&e, "stats", "x", NULL), ST_USAGE);
    REQUIRE_MSG(strcmp(e.msg, "usage: tubed-cli stats (no arguments)") == 0, "%s",
                e.msg);
}
END_TEST

START_TEST(raw_is_for_peek_and_job)
{
    Err e;

    REQ_IEQ(parse(&e, "job", "1", "--raw", NULL), ST_OK);
    REQ_IEQ(parse(&e, "--raw", "peek", "t", NULL), ST_OK);
    REQ_IEQ(parse(&e, "delete", "1", "--raw", NULL), ST_USAGE);
    REQUIRE_MSG(strstr(e.msg, "--raw is for peek and job") != NULL, "%s", e.msg);
    REQ_IEQ(parse(&e, "job", "1", "--raw", "--json", NULL), ST_USAGE);
}
END_TEST

START_TEST(every_form_of_a_command_stands_together)
{
    /* command_find() gives the first row and the arity check walks the
     * rows after it: a second form elsewhere in the table would be lost. */
    for (const Command *c = commands; c->name; c++)
        for (const Command *d = c + 1; d->name; d++)
            if (strcmp(c->name, d->name) == 0)
                REQUIRE_MSG(d == c + 1 || strcmp((d - 1)->name, c->name) == 0,
                            "the forms of %s are apart in the table", c->name);
}
END_TEST

START_TEST(ids_and_their_json)
{
    IdList l = {0};
    Buf b = {0};
    Err e;
    uint64_t id;

    json_ids(&b, &l);
    REQUIRE(b.len == 2 && memcmp(b.data, "[]", 2) == 0);
    b.len = 0;
    for (uint64_t i = 0; i < 1000; i++)
        REQ_IEQ(idlist_push(&l, i * 3, &e), ST_OK);
    REQ_UEQ(l.n, 1000);
    REQ_UEQ(l.ids[999], 2997);
    json_ids(&b, &l);
    REQUIRE(!b.oom && b.len > 10);
    REQUIRE(memcmp(b.data, "[0,3,6,", 7) == 0);
    REQUIRE(memcmp(b.data + b.len - 11, ",2994,2997]", 11) == 0);
    idlist_free(&l);
    REQUIRE(l.ids == NULL && l.n == 0);
    buf_free(&b);

    REQ_IEQ(parse_id("job", "18446744073709551615", &id, &e), ST_OK);
    REQ_UEQ(id, UINT64_MAX);
    REQ_IEQ(parse_id("job", "18446744073709551616", &id, &e), ST_USAGE);
    REQUIRE_MSG(strstr(e.msg, "is not a job id") != NULL, "%s", e.msg);
    REQ_IEQ(parse_id("job", "", &id, &e), ST_USAGE);
    REQ_IEQ(parse_id("job", "+1", &id, &e), ST_USAGE);
}
END_TEST

START_TEST(idlist_out_of_memory)
{
    IdList l = {0};
    Err e;

    alloc_fail_after(1);
    REQ_IEQ(idlist_push(&l, 1, &e), ST_LOCAL);
    alloc_fail_after(0);
    REQ_UEQ(l.n, 0);
    REQ_IEQ(idlist_push(&l, 1, &e), ST_OK);
    idlist_free(&l);
}
END_TEST

START_TEST(words)
{
    static const char *const states[] = {"ready", "buried", NULL};

    REQUIRE(is_word("ready", states));
    REQUIRE(!is_word("read", states));
    REQUIRE(!is_word("readyy", states));
    REQUIRE(!is_word("", states));
}
END_TEST

static Suite *args_suite(void)
{
    Suite *s = suite_create("cli_args");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, move_has_two_forms);
    tcase_add_test(tc, arity_of_the_job_commands);
    tcase_add_test(tc, raw_is_for_peek_and_job);
    tcase_add_test(tc, every_form_of_a_command_stands_together);
    tcase_add_test(tc, ids_and_their_json);
    tcase_add_test(tc, idlist_out_of_memory);
    tcase_add_test(tc, words);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(args_suite)
