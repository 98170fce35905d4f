#include "priv.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int priv_drop(const char *user, char *err, size_t errlen)
{
    struct passwd *pw;

    errno = 0;
    pw = getpwnam(user);
    if (!pw) {
        snprintf(err, errlen, "user %s: %s", user,
                 errno ? strerror(errno) : "no such user");
        return -1;
    }
    if (geteuid() != 0) {
        if (pw->pw_uid == geteuid())
            return 0; /* already that user: nothing to give up */
        snprintf(err, errlen, "-u %s needs root privileges", user);
        return -1;
    }
    if (setgroups(0, NULL) < 0) {
        snprintf(err, errlen, "setgroups: %s", strerror(errno));
        return -1;
    }
    if (setgid(pw->pw_gid) < 0) {
        snprintf(err, errlen, "setgid(%lu): %s", (unsigned long)pw->pw_gid, strerror(errno));
        return -1;
    }
    if (setuid(pw->pw_uid) < 0) {
        snprintf(err, errlen, "setuid(%lu): %s", (unsigned long)pw->pw_uid, strerror(errno));
        return -1;
    }
    if (pw->pw_uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        snprintf(err, errlen, "could still regain root after dropping to %s", user);
        return -1;
    }
    return 0;
}
