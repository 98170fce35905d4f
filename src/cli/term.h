/*
 * term.h — the terminal: its size, whether to colour, and the full-screen
 * mode `top` runs in.
 *
 * Contract: term_width() is the width output on fd may use: the terminal's
 * (TIOCGWINSZ) when fd is one, else $COLUMNS when set to a number, else 0
 * (no limit: output to a pipe or file keeps every column and whole
 * names). term_color() is true only when fd is a terminal, NO_COLOR is not
 * set (to any value, even empty) and TERM is not "dumb".
 *
 * term_enter() switches to raw input (no echo, no line editing, no
 * signals from keys: Ctrl-C arrives as a byte), the alternate screen and
 * a hidden cursor; term_leave() restores all three exactly and is safe to
 * call twice, from atexit too. term_signals() turns SIGWINCH, SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT into bytes on a pipe (returned fd) that a
 * poll loop reads with term_signal_take(), so no work happens in a
 * handler.
 */
#ifndef TUBED_CLI_TERM_H
#define TUBED_CLI_TERM_H

#include <termios.h>

#include "cli.h"

int term_width(int fd);
/* Rows and columns of the terminal on fd: 0, or -1 if it is none. */
int term_size(int fd, int *rows, int *cols);
int term_color(int fd);

typedef struct Term {
    int in, out;
    struct termios saved;
    int active;
} Term;

Status term_enter(Term *t, int in, int out, Err *e);
void term_leave(Term *t);

enum { TERM_SIG_RESIZE = 1, TERM_SIG_QUIT = 2 };
int term_signals(Err *e);
/* Drain the pipe: TERM_SIG_* bits of what arrived since the last call. */
int term_signal_take(int fd);

#endif
