/* output.c -- atomic file writes and mkdir -p (see output.h). */
#define _POSIX_C_SOURCE 200809L
#include "util/output.h"
#include "util/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t got = write(fd, p, n);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int pt_write_file_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t part_count,
                         int mode, pt_error *err)
{
    pt_buf tmp = PT_BUF_INIT;
    pt_buf_printf(&tmp, "%s.tmp%ld", path, (long)getpid());
    int rc = -1;
    int fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) {
        pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < part_count; i++) {
        if (write_all(fd, parts[i], sizes[i]) != 0) {
            pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
            close(fd);
            unlink(tmp.data);
            goto out;
        }
    }
    if (close(fd) != 0 || rename(tmp.data, path) != 0) {
        pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp.data);
        goto out;
    }
    rc = 0;
out:
    pt_buf_free(&tmp);
    return rc;
}

int pt_make_dirs(const char *path, pt_error *err)
{
    pt_buf b = PT_BUF_INIT;
    pt_buf_puts(&b, path);
    int rc = 0;
    for (char *p = b.data + 1; rc == 0; p++) {
        bool end = *p == '\0';
        if (*p != '/' && !end)
            continue;
        *p = '\0';
        if (mkdir(b.data, 0755) != 0 && errno != EEXIST) {
            pt_error_set(err, "cannot create directory %s: %s", b.data, strerror(errno));
            rc = -1;
        }
        if (end)
            break;
        *p = '/';
    }
    struct stat st;
    if (rc == 0 && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        pt_error_set(err, "%s is not a directory", path);
        rc = -1;
    }
    pt_buf_free(&b);
    return rc;
}

int pt_check_writable(const char *path, bool is_dir, pt_error *err)
{
    pt_buf dir = PT_BUF_INIT;
    const char *slash = strrchr(path, '/');
    if (is_dir)
        pt_buf_puts(&dir, path);
    else if (slash)
        pt_buf_append(&dir, path, slash == path ? 1 : (size_t)(slash - path));
    else
        pt_buf_puts(&dir, ".");
    int rc = is_dir ? pt_make_dirs(dir.data, err) : 0;
    if (rc == 0) {
        pt_buf probe = PT_BUF_INIT;
        pt_buf_printf(&probe, "%s/.perftracker-probe-XXXXXX", dir.data);
        int fd = mkstemp(probe.data);
        if (fd >= 0) {
            close(fd);
            unlink(probe.data);
        } else {
            pt_error_set(err, "cannot write to %s: %s", is_dir ? path : dir.data, strerror(errno));
            rc = -1;
        }
        pt_buf_free(&probe);
    }
    pt_buf_free(&dir);
    return rc;
}
