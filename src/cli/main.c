/*
 * main.c — tubed-cli: a command-line client for people, for tubed and
 * beanstalkd. Parse the command line, connect, run one command, and turn
 * its Status into the exit status (cli.h, man/tubed-cli.1).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "args.h"
#include "cli.h"
#include "client.h"
#include "commands.h"
#include "table.h"

/* A standard descriptor the caller closed (`<&-`, `>&-`) would be the
 * next one opened, the server's socket: put would read its body from the
 * server, output would go to the server as commands. Hold each closed one
 * with /dev/null opened the wrong way round, so that it stays unusable:
 * reading stdin or writing stdout fails with EBADF as it would closed. */
static void hold_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int got = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (got >= 0 && got != fd)
            close(got); /* cannot happen: open takes the lowest free fd */
    }
}

/* The error on stderr, one line, safe for a terminal: a message quotes the
 * operator's arguments and the server's replies (a YAML line it could not
 * read), either of which may hold newlines or escape sequences. */
static void report(Err *e, int r)
{
    text_safe(e->msg, strlen(e->msg));
    cli_warn("%s", e->msg);
    if (r == ST_USAGE)
        fprintf(stderr, "Try 'tubed-cli --help'.\n");
}

int main(int argc, char **argv)
{
    Cli cli;
    Client c = {.fd = -1};
    Err e = {ST_OK, ""};
    char **pos = NULL;
    int npos, r;
    const Command *cmd;

    hold_std_fds();
    r = args_parse(&cli, argc, argv, &pos, &npos, &e);
    if (r < 0) { /* --help, --version: answered on stdout */
        tb_free(pos);
        if (fflush(stdout) == 0)
            return ST_OK;
        err_set(&e, ST_LOCAL, "cannot write to standard output");
        report(&e, ST_LOCAL);
        return ST_LOCAL;
    }
    if (r != ST_OK) {
        report(&e, r);
        tb_free(pos);
        return r;
    }
    cmd = command_find(pos[0]);
    r = client_open(&c, cli.host, cli.port, cli.timeout_ms, &e);
    if (r == ST_OK)
        r = cmd->fn(&cli, &c, pos + 1, npos - 1, &e);
    client_close(&c);
    tb_free(pos);
    if (fflush(stdout) != 0 && r == ST_OK)
        r = err_set(&e, ST_LOCAL, "cannot write to standard output");
    if (r != ST_OK)
        report(&e, r);
    return r;
}
