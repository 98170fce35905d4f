"""LD_PRELOAD fault shims: a few lines of C that stand between tubed and
libc (a disk that fails, a slow reader), compiled per test.

build(binary, tmpdir, source) compiles source into tmpdir and returns the
LD_PRELOAD value for binary: a sanitizer build's runtime must come first.
It raises harness.Skip when there is no C compiler, under valgrind (which
does not take a preload before its own), or when the shim does not build.
"""

import os
import re
import shutil
import subprocess

import harness

# pread sleeps while SLOW_PREAD_FLAG exists (off the main thread only: the
# reader thread); pwrite past offset 0 fails with EIO while
# FAIL_PWRITE_FLAG exists (a new file's header, at 0, is still written).
DISK_FAULTS_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    const char *flag = getenv("SLOW_PREAD_FLAG"), *ms = getenv("SLOW_PREAD_MS");

    if (!real)
        real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
    if (flag && syscall(SYS_gettid) != getpid() && access(flag, F_OK) == 0) {
        long m = ms ? atol(ms) : 300;
        struct timespec ts = {m / 1000, (m % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return real(fd, buf, n, off);
}
ssize_t pread64(int fd, void *buf, size_t n, off_t off) __attribute__((alias("pread")));

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    const char *flag = getenv("FAIL_PWRITE_FLAG");

    if (!real)
        real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (flag && off > 0 && access(flag, F_OK) == 0) {
        errno = EIO;
        return -1;
    }
    return real(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) __attribute__((alias("pwrite")));
"""


def asan_runtime(binary):
    """[path of the sanitizer runtime binary links], or []."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True,
                             timeout=20).stdout
    except OSError:
        return []
    m = re.search(r"(\S*libasan\S*) => (\S+)", out)
    return [m.group(2)] if m else []


def build(binary, tmpdir, source, name="shim"):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc or harness.VALGRIND:
        raise harness.Skip("needs a C compiler (and no valgrind) for the fault shim")
    src, so = os.path.join(tmpdir, name + ".c"), os.path.join(tmpdir, name + ".so")
    with open(src, "w") as f:
        f.write(source)
    r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise harness.Skip("cannot build the fault shim: %s" % r.stderr[-300:])
    return ":".join(asan_runtime(binary) + [so])
