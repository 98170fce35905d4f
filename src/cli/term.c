/* term.c — terminal size, colour and full-screen mode; see term.h. */
#include "term.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "numparse.h"

/* Alternate screen on, cursor hidden; and back. */
#define ENTER_SEQ "\x1b[?1049h\x1b[?25l"
#define LEAVE_SEQ "\x1b[?25h\x1b[?1049l"

static int env_columns(void)
{
    const char *s = getenv("COLUMNS");
    uint64_t v;

    if (!s || parse_u64_str(s, &v) < 0 || v == 0 || v > 100000)
        return 0;
    return (int)v;
}

int term_size(int fd, int *rows, int *cols)
{
    struct winsize ws;

    if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) < 0)
        return -1;
    *rows = ws.ws_row;
    *cols = ws.ws_col;
    return 0;
}

int term_width(int fd)
{
    int rows, cols;

    if (term_size(fd, &rows, &cols) == 0 && cols > 0)
        return cols;
    if (env_columns())
        return env_columns();
    /* A terminal that does not know its size: the classic width. */
    return isatty(fd) ? 80 : 0;
}

int term_color(int fd)
{
    const char *t = getenv("TERM");

    return isatty(fd) && getenv("NO_COLOR") == NULL && !(t && strcmp(t, "dumb") == 0);
}

static void write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* The one Term an atexit handler must restore (there is one terminal). */
static Term *active_term;

static void leave_at_exit(void)
{
    if (active_term)
        term_leave(active_term);
}

Status term_enter(Term *t, int in, int out, Err *e)
{
    struct termios raw;
    static int registered;

    t->in = in;
    t->out = out;
    t->active = 0;
    if (tcgetattr(in, &t->saved) < 0)
        return err_set(e, ST_LOCAL, "cannot read the terminal's mode: %s",
                       strerror(errno));
    raw = t->saved;
    raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL | INLCR | IGNCR | ISTRIP | BRKINT);
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ECHONL | ISIG | IEXTEN);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(in, TCSAFLUSH, &raw) < 0)
        return err_set(e, ST_LOCAL, "cannot set the terminal's mode: %s",
                       strerror(errno));
    t->active = 1;
    active_term = t;
    if (!registered && atexit(leave_at_exit) == 0)
        registered = 1;
    write_all(out, ENTER_SEQ, sizeof ENTER_SEQ - 1);
    return ST_OK;
}

void term_leave(Term *t)
{
    if (!t->active)
        return;
    t->active = 0;
    write_all(t->out, LEAVE_SEQ, sizeof LEAVE_SEQ - 1);
    tcsetattr(t->in, TCSAFLUSH, &t->saved);
    if (active_term == t)
        active_term = NULL;
}

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    char c = sig == SIGWINCH ? 'w' : 'q';
    int saved = errno;

    /* The pipe is non-blocking: when full, the wake-up is already queued. */
    if (write(sig_pipe[1], &c, 1) < 0) {
    }
    errno = saved;
}

int term_signals(Err *e)
{
    static const int sigs[] = {SIGWINCH, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction sa;

    if (sig_pipe[0] < 0 && pipe2(sig_pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
        err_set(e, ST_LOCAL, "pipe: %s", strerror(errno));
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
    return sig_pipe[0];
}

int term_signal_take(int fd)
{
    char buf[64];
    ssize_t n;
    int bits = 0;

    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            bits |= buf[i] == 'w' ? TERM_SIG_RESIZE : TERM_SIG_QUIT;
    return bits;
}
