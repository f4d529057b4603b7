// SPDX-License-Identifier: Apache-2.0
/* file.c — regular files only, read whole under a size cap (see file.h). */
#include "common/file.h"
#include "common/set_err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

pk_status pk_file_open_regular(const char *path, int *fd, uint64_t *size, char *err, size_t err_len) {
    *fd = -1;
    *size = 0;
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0) return pk_set_err(err, err_len, PK_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int e = errno;
        close(f);
        return pk_set_err(err, err_len, PK_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return pk_set_err(err, err_len, PK_ERR_IO, "%s is %s, not a regular file", path, kind_of(sb.st_mode));
    }
    *fd = f;
    *size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    return PK_OK;
}

pk_status pk_file_read_capped(const char *path, size_t max, const char *what, char **out, size_t *len, char *err,
                              size_t err_len) {
    *out = NULL;
    *len = 0;
    int fd;
    uint64_t size;
    pk_status s = pk_file_open_regular(path, &fd, &size, err, err_len);
    if (s != PK_OK) return s;
    if (size > max) {
        close(fd);
        return pk_set_err(err, err_len, PK_ERR_FORMAT, "%s is %llu bytes, more than %s can be (%zu)", path,
                       (unsigned long long)size, what, max);
    }
    /* One byte past the cap tells a file that grew since fstat. */
    size_t cap = (size_t)size + 1, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            s = pk_set_err(err, err_len, PK_ERR_IO, "cannot read %s: %s", path, strerror(errno));
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n > max) {
            s = pk_set_err(err, err_len, PK_ERR_FORMAT, "%s is more than %zu bytes, more than %s can be", path,
                        max, what);
            break;
        }
        if (n == cap) {
            size_t bigger_cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *bigger = realloc(buf, bigger_cap + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap = bigger_cap;
        }
    }
    close(fd);
    if (s == PK_OK && !buf) s = pk_set_err(err, err_len, PK_ERR_NO_MEMORY, "out of memory reading %s", path);
    if (s != PK_OK) {
        free(buf);
        return s;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return PK_OK;
}
