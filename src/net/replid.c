#include "replid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "crc32c.h"
#include "log.h"

uint64_t replid_new(void)
{
    uint64_t x = 0;

    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x)
        x = (uint64_t)clock_wall() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)clock_mono();
    return x ? x : 1;
}

static void id_path(const char *dir, const char *suffix, char *out, size_t n)
{
    snprintf(out, n, "%s/replication-id%s", dir, suffix);
}

int replid_save(const char *dir, int nosync, uint64_t id)
{
    char path[4096], tmp[4096], line[32];
    int fd, n, ok;

    if (!dir)
        return -1;
    id_path(dir, "", path, sizeof path);
    id_path(dir, ".tmp", tmp, sizeof tmp);
    if (!id) /* no history to resume: no file */
        return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
    n = snprintf(line, sizeof line, "%016llx\n", (unsigned long long)id);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0) {
        log_warn("replication: cannot write %s: %s", tmp, strerror(errno));
        unlink(path); /* a stale id must not stay */
        return -1;
    }
    ok = write(fd, line, (size_t)n) == n && (nosync || fsync(fd) == 0);
    close(fd);
    if (!ok || rename(tmp, path) < 0) {
        log_warn("replication: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        unlink(path);
        return -1;
    }
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        if (!nosync)
            fsync(fd);
        close(fd);
    }
    return 0;
}

uint64_t replid_load(const char *dir)
{
    char path[4096], line[40];
    int fd;
    ssize_t n;
    uint64_t v = 0;

    if (!dir)
        return 0;
    id_path(dir, "", path, sizeof path);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n != 17 || line[16] != '\n')
        return 0;
    for (int i = 0; i < 16; i++) {
        char c = line[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint64_t)d;
    }
    return v;
}

int replid_sync_binlogs(const char *dir)
{
    DIR *d;
    struct dirent *de;
    int rc = 0;

    if (!dir || !(d = opendir(dir)))
        return -1;
    while ((de = readdir(d))) {
        char path[4096];
        int fd;
        if (strncmp(de->d_name, "binlog.", 7))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fdatasync(fd) < 0) {
            log_warn("replication: fsync %s: %s", path, strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
    }
    closedir(d);
    return rc;
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void replid_record(uint64_t history, uint64_t stream, char out[REPLID_RECORD_SIZE])
{
    unsigned char *p = (unsigned char *)out + 8;
    uint32_t len = REPLID_PAYLOAD, crc;

    p[0] = REPLID_TYPE;
    for (int i = 0; i < 8; i++) {
        p[1 + i] = (unsigned char)(history >> (8 * i));
        p[9 + i] = (unsigned char)(stream >> (8 * i));
    }
    crc = crc32c(0, p, len);
    for (int i = 0; i < 4; i++) {
        out[i] = (char)(len >> (8 * i));
        out[4 + i] = (char)(crc >> (8 * i));
    }
}

int replid_decode(const char *p, size_t n, uint64_t *history, uint64_t *stream)
{
    const unsigned char *h = (const unsigned char *)p;

    if (n < 9 || h[8] != REPLID_TYPE || get32(h) != REPLID_PAYLOAD)
        return 0;
    if (n < REPLID_RECORD_SIZE)
        return -1;
    if (crc32c(0, h + 8, REPLID_PAYLOAD) != get32(h + 4))
        return 0;
    *history = *stream = 0;
    for (int i = 7; i >= 0; i--) {
        *history = *history << 8 | h[9 + i];
        *stream = *stream << 8 | h[17 + i];
    }
    return 1;
}
