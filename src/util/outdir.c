/* outdir.c -- the checked walk, checked folders and files written whole before they are
 * named (O_TMPFILE and linkat, or a temporary name and a rename; see outdir.h).
 *
 * Design: the walk keeps one descriptor, the folder reached so far, and the text still to
 * walk. Each component is opened relative to that descriptor with O_NOFOLLOW, so what we
 * check (fstat of the descriptor we got) is what we then use; nothing is looked up twice
 * by name. A symlink is read with readlinkat from the same descriptor and its target put
 * in front of the rest of the path, as the kernel would, after its owner was checked;
 * ".." opens the parent of the descriptor, which is checked like any other folder. Cost:
 * an openat and an fstat per component, nothing next to writing a report. */
#define _GNU_SOURCE
#include "util/outdir.h"
#include "util/buf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_SYMLINKS 40 /* the kernel's own limit */
#define TMP_ATTEMPTS 16

static const int dir_flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

static bool trusted_owner(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

static mode_t folder_mode(bool private_files)
{
    return private_files ? 0700 : 0755;
}

/* Whether the folder open as fd may hold what we write; sets *world_writable. */
static int check_folder(int fd, const char *shown, bool *world_writable, pt_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        pt_error_set(err, "cannot inspect %s: %s", shown, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        pt_error_set(err, "%s is not a directory", shown);
        return -1;
    }
    if (!trusted_owner(st.st_uid)) {
        pt_error_set(err, "%s belongs to another user (uid %u), who could replace what is written there; "
                          "perftracker writes only into folders that this user (uid %u) or root owns",
                     shown, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
        pt_error_set(err, "%s can be written by every user (mode %04o, without the sticky bit that /tmp has), "
                          "so anyone could replace what is written there; refusing it",
                     shown, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if (st.st_mode & S_IWOTH)
        *world_writable = true;
    return 0;
}

/* "shown/name", or for ".." shown without its last component. */
static void shown_step(pt_buf *shown, const char *name)
{
    if (strcmp(name, "..") == 0) {
        char *slash = strrchr(shown->data, '/');
        if (slash && slash != shown->data)
            shown->len = (size_t)(slash - shown->data);
        else
            shown->len = 1;
        shown->data[shown->len] = '\0';
        return;
    }
    if (shown->len > 1)
        pt_buf_putc(shown, '/');
    pt_buf_puts(shown, name);
}

typedef struct walk {
    int fd;
    bool world_writable;
    int links;
    pt_buf rest;  /* what is still to walk */
    size_t pos;   /* into rest */
    pt_buf shown; /* where the walk is, for messages */
} walk;

static int walk_restart_at_root(walk *w, pt_error *err)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = open("/", dir_flags);
    pt_buf_reset(&w->shown);
    pt_buf_putc(&w->shown, '/');
    if (w->fd < 0) {
        pt_error_set(err, "cannot open /: %s", strerror(errno));
        return -1;
    }
    return check_folder(w->fd, "/", &w->world_writable, err);
}

/* name in w->fd is a symlink: checks who made it and walks its target next. */
static int walk_symlink(walk *w, const char *name, const struct stat *link, pt_error *err)
{
    pt_buf where = PT_BUF_INIT;
    pt_buf_puts(&where, w->shown.data);
    shown_step(&where, name);
    int rc = -1;
    char target[PATH_MAX];
    ssize_t n = -1;
    if (!trusted_owner(link->st_uid))
        pt_error_set(err, "%s is a symlink that another user (uid %u) made; perftracker does not follow it",
                     where.data, (unsigned)link->st_uid);
    else if (++w->links > MAX_SYMLINKS)
        pt_error_set(err, "%s: too many levels of symbolic links", where.data);
    else if ((n = readlinkat(w->fd, name, target, sizeof target)) < 0 || (size_t)n >= sizeof target || n == 0)
        pt_error_set(err, "cannot read the symlink %s: %s", where.data, n < 0 ? strerror(errno) : "bad target");
    else
        rc = 0;
    pt_buf_free(&where);
    if (rc != 0)
        return -1;
    pt_buf next = PT_BUF_INIT;
    pt_buf_append(&next, target, (size_t)n);
    pt_buf_putc(&next, '/');
    pt_buf_puts(&next, w->rest.data + w->pos);
    pt_buf_free(&w->rest);
    w->rest = next;
    w->pos = 0;
    return target[0] == '/' ? walk_restart_at_root(w, err) : 0;
}

/* Opens the next component; 1 when the walk is over, 0 to go on, -1 on error. */
static int walk_step(walk *w, bool create, pt_error *err)
{
    const char *p = w->rest.data + w->pos;
    while (*p == '/')
        p++;
    size_t len = strcspn(p, "/");
    w->pos = (size_t)(p - w->rest.data) + len;
    if (len == 0)
        return 1;
    char name[NAME_MAX + 1];
    if (len > NAME_MAX) {
        pt_error_set(err, "%s/%.*s...: a name longer than %d bytes", w->shown.data, 32, p, NAME_MAX);
        return -1;
    }
    memcpy(name, p, len);
    name[len] = '\0';
    if (strcmp(name, ".") == 0)
        return 0;
    int next = openat(w->fd, name, dir_flags);
    if (next < 0 && errno == ENOENT && create) {
        if (mkdirat(w->fd, name, folder_mode(w->world_writable)) != 0 && errno != EEXIST) {
            pt_error_set(err, "cannot create directory %s%s%s: %s", w->shown.data, w->shown.len > 1 ? "/" : "",
                         name, strerror(errno));
            return -1;
        }
        next = openat(w->fd, name, dir_flags);
    }
    if (next < 0 && (errno == ELOOP || errno == ENOTDIR) && strcmp(name, "..") != 0) {
        int why = errno;
        struct stat st;
        if (fstatat(w->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            return walk_symlink(w, name, &st, err);
        errno = why;
    }
    shown_step(&w->shown, name);
    if (next < 0) {
        pt_error_set(err, "cannot open %s: %s", w->shown.data, strerror(errno));
        return -1;
    }
    close(w->fd);
    w->fd = next;
    return check_folder(w->fd, w->shown.data, &w->world_writable, err);
}

int pt_out_dir_open(pt_out_dir *d, const char *path, bool create, pt_error *err)
{
    *d = (pt_out_dir)PT_OUT_DIR_INIT;
    walk w = {-1, false, 0, PT_BUF_INIT, 0, PT_BUF_INIT};
    if (path[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            pt_error_set(err, "cannot use %s: the working directory is gone (%s)", path, strerror(errno));
            return -1;
        }
        pt_buf_printf(&w.rest, "%s/", cwd);
    }
    pt_buf_puts(&w.rest, path);
    int rc = walk_restart_at_root(&w, err);
    while (rc == 0)
        rc = walk_step(&w, create, err);
    pt_buf_free(&w.rest);
    pt_buf_free(&w.shown);
    if (rc < 0) {
        if (w.fd >= 0)
            close(w.fd);
        return -1;
    }
    d->fd = w.fd;
    d->private_files = w.world_writable;
    d->path = pt_xstrdup(path);
    return 0;
}

static bool is_one_name(const char *name)
{
    return name[0] && strchr(name, '/') == NULL && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static char *child_path(const pt_out_dir *parent, const char *name)
{
    pt_buf b = PT_BUF_INIT;
    pt_buf_printf(&b, "%s/%s", parent->path, name);
    return pt_buf_take(&b);
}

/* Opens parent/name (a folder already there) and checks it. */
static int open_sub(pt_out_dir *sub, const pt_out_dir *parent, const char *name, pt_error *err)
{
    char *path = child_path(parent, name);
    int fd = openat(parent->fd, name, dir_flags);
    if (fd < 0) {
        struct stat st;
        if ((errno == ELOOP || errno == ENOTDIR) && fstatat(parent->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode))
            pt_error_set(err, "%s is a symlink; perftracker writes only into real folders there", path);
        else
            pt_error_set(err, "cannot open %s: %s", path, strerror(errno));
        free(path);
        return -1;
    }
    bool world_writable = false;
    if (check_folder(fd, path, &world_writable, err) != 0) {
        close(fd);
        free(path);
        return -1;
    }
    sub->fd = fd;
    sub->private_files = parent->private_files || world_writable;
    sub->path = path;
    return 0;
}

int pt_out_dir_sub(pt_out_dir *sub, const pt_out_dir *parent, const char *name, bool create, pt_error *err)
{
    *sub = (pt_out_dir)PT_OUT_DIR_INIT;
    if (!is_one_name(name)) {
        pt_error_set(err, "%s/%s: not a folder name", parent->path, name);
        return -1;
    }
    if (create && mkdirat(parent->fd, name, folder_mode(parent->private_files)) != 0 && errno != EEXIST) {
        pt_error_set(err, "cannot create directory %s/%s: %s", parent->path, name, strerror(errno));
        return -1;
    }
    return open_sub(sub, parent, name, err);
}

int pt_out_dir_make_new(pt_out_dir *sub, const pt_out_dir *parent, const char *name, pt_error *err)
{
    *sub = (pt_out_dir)PT_OUT_DIR_INIT;
    if (!is_one_name(name)) {
        pt_error_set(err, "%s/%s: not a folder name", parent->path, name);
        errno = EINVAL;
        return -1;
    }
    if (mkdirat(parent->fd, name, folder_mode(parent->private_files)) != 0) {
        int why = errno;
        pt_error_set(err, "cannot create directory %s/%s: %s", parent->path, name, strerror(why));
        errno = why;
        return -1;
    }
    if (open_sub(sub, parent, name, err) != 0) {
        errno = EACCES; /* not EEXIST: the caller must not try another name as if it were taken */
        return -1;
    }
    return 0;
}

void pt_out_dir_close(pt_out_dir *d)
{
    if (d->fd >= 0)
        close(d->fd);
    free(d->path);
    *d = (pt_out_dir)PT_OUT_DIR_INIT;
}

void pt_out_dir_remove(const pt_out_dir *d, const char *name)
{
    if (is_one_name(name))
        unlinkat(d->fd, name, 0);
}

/* ------------------------------------------------------------ files */

static uint64_t random_suffix(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        static uint64_t counter; /* only makes names differ; O_EXCL keeps them safe */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15u ^ (uint64_t)getpid() << 32 ^ ++counter;
    }
    return r;
}

/* A fresh temporary name for name: a dotfile, so neither server publishes it while it is
 * being written. */
static void temporary_name(pt_buf *tmp, const char *name)
{
    pt_buf_reset(tmp);
    pt_buf_printf(tmp, ".%.200s.tmp-%016llx", name, (unsigned long long)random_suffix());
}

/* What a file we create in d is made with: mode, or its owner's bits below a folder every
 * user can write to. */
static mode_t file_mode(const pt_out_dir *d, int mode)
{
    return (mode_t)(d->private_files ? mode & 0700 : mode);
}

int pt_out_dir_create_new(const pt_out_dir *d, const char *name, int mode, pt_error *err)
{
    if (!is_one_name(name)) {
        pt_error_set(err, "%s/%s: not a file name", d->path, name);
        return -1;
    }
    int fd = openat(d->fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, file_mode(d, mode));
    if (fd < 0) {
        int why = errno;
        char *path = child_path(d, name);
        pt_error_set(err, "cannot create %s: %s", path, strerror(why));
        free(path);
        errno = why;
    }
    return fd;
}

static void free_names(pt_out_file *f)
{
    free(f->tmp_name);
    free(f->name);
    free(f->path);
    f->tmp_name = f->name = f->path = NULL;
}

int pt_out_file_create_in(pt_out_file *f, const pt_out_dir *d, const char *name, int mode, pt_error *err)
{
    memset(f, 0, sizeof *f);
    f->fd = f->dir_fd = -1;
    if (!is_one_name(name)) {
        pt_error_set(err, "%s/%s: not a file name", d->path, name);
        return -1;
    }
    f->path = child_path(d, name);
    f->name = pt_xstrdup(name);
    mode_t m = file_mode(d, mode);
    pt_buf tmp = PT_BUF_INIT;
    for (int attempt = 0; attempt < TMP_ATTEMPTS && f->fd < 0; attempt++) {
        temporary_name(&tmp, name);
        f->fd = openat(d->fd, tmp.data, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, m);
        if (f->fd < 0 && errno != EEXIST)
            break;
    }
    if (f->fd < 0) {
        int why = errno;
        pt_error_set(err, "cannot write %s: %s", f->path, strerror(why));
        pt_buf_free(&tmp);
        free_names(f);
        errno = why; /* for callers that word their own message */
        return -1;
    }
    f->tmp_name = pt_buf_take(&tmp);
    f->dir_fd = fcntl(d->fd, F_DUPFD_CLOEXEC, 0);
    if (f->dir_fd < 0) {
        pt_error_set(err, "cannot write %s: %s", f->path, strerror(errno));
        close(f->fd);
        unlinkat(d->fd, f->tmp_name, 0);
        free_names(f);
        return -1;
    }
    return 0;
}

/* A device or a pipe at path: written directly (there is nothing to replace). 1 when it
 * is one and f is open, 0 when it is not, -1 on error. */
static int open_special(pt_out_file *f, const pt_out_dir *d, const char *name, pt_error *err)
{
    struct stat st;
    if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
        return 0;
    memset(f, 0, sizeof *f);
    f->dir_fd = -1;
    f->path = child_path(d, name);
    f->fd = openat(d->fd, name, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
    struct stat opened;
    if (f->fd < 0 || fstat(f->fd, &opened) != 0 || opened.st_ino != st.st_ino || opened.st_dev != st.st_dev) {
        pt_error_set(err, "cannot write %s: %s", f->path, f->fd < 0 ? strerror(errno) : "it changed while opened");
        if (f->fd >= 0)
            close(f->fd);
        free_names(f);
        return -1;
    }
    return 1;
}

int pt_out_file_create(pt_out_file *f, const char *path, int mode, pt_error *err)
{
    memset(f, 0, sizeof *f);
    f->fd = f->dir_fd = -1;
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!is_one_name(name)) {
        pt_error_set(err, "%s: not a file name", path);
        return -1;
    }
    pt_buf folder = PT_BUF_INIT;
    if (!slash)
        pt_buf_puts(&folder, ".");
    else
        pt_buf_append(&folder, path, slash == path ? 1 : (size_t)(slash - path));
    pt_out_dir d;
    pt_error why;
    int rc = pt_out_dir_open(&d, folder.data, false, &why);
    pt_buf_free(&folder);
    if (rc != 0) {
        pt_error_set(err, "cannot write %s: %s", path, why.message);
        return -1;
    }
    rc = open_special(f, &d, name, err);
    if (rc == 0) {
        struct stat st;
        if (fstatat(d.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            pt_error_set(err, "cannot write %s: it is a directory", path);
            rc = -1;
        } else {
            rc = pt_out_file_create_in(f, &d, name, mode, err);
        }
    }
    pt_out_dir_close(&d);
    if (rc < 0)
        return -1;
    free(f->path);
    f->path = pt_xstrdup(path);
    return 0;
}

int pt_out_file_commit(pt_out_file *f, pt_error *err)
{
    int rc = 0;
    if (f->fd >= 0 && close(f->fd) != 0) {
        pt_error_set(err, "cannot write %s: %s", f->path, strerror(errno));
        rc = -1;
    }
    f->fd = -1;
    if (f->dir_fd >= 0) {
        if (rc == 0 && renameat(f->dir_fd, f->tmp_name, f->dir_fd, f->name) != 0) {
            pt_error_set(err, "cannot write %s: %s", f->path, strerror(errno));
            rc = -1;
        }
        if (rc != 0)
            unlinkat(f->dir_fd, f->tmp_name, 0);
        close(f->dir_fd);
        f->dir_fd = -1;
    }
    free_names(f);
    return rc;
}

void pt_out_file_abandon(pt_out_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    if (f->dir_fd >= 0) {
        unlinkat(f->dir_fd, f->tmp_name, 0);
        close(f->dir_fd);
        f->dir_fd = -1;
    }
    free_names(f);
}

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

/* Writes the parts into f and commits it, or abandons it with err. */
static int fill_and_commit(pt_out_file *f, const void *const *parts, const size_t *sizes, size_t part_count,
                           pt_error *err)
{
    for (size_t i = 0; i < part_count; i++) {
        if (write_all(f->fd, parts[i], sizes[i]) != 0) {
            pt_error_set(err, "cannot write %s: %s", f->path, strerror(errno));
            pt_out_file_abandon(f);
            return -1;
        }
    }
    return pt_out_file_commit(f, err);
}

/* Links the unnamed file fd under a fresh dotfile name in d and renames that over name
 * (which exists): the replace the temporary-name path does, without writing again. */
static int link_and_replace(const pt_out_dir *d, const char *proc_path, const char *name)
{
    pt_buf tmp = PT_BUF_INIT;
    int rc = -1;
    for (int attempt = 0; attempt < TMP_ATTEMPTS && rc != 0; attempt++) {
        temporary_name(&tmp, name);
        rc = linkat(AT_FDCWD, proc_path, d->fd, tmp.data, AT_SYMLINK_FOLLOW);
        if (rc != 0 && errno != EEXIST)
            break;
    }
    if (rc == 0 && renameat(d->fd, tmp.data, d->fd, name) != 0) {
        int why = errno;
        unlinkat(d->fd, tmp.data, 0);
        errno = why;
        rc = -1;
    }
    pt_buf_free(&tmp);
    return rc;
}

/* The file written unnamed (O_TMPFILE) and linked under its name once complete: readers
 * never see it partial, as with a temporary name, but the folder gains one entry instead
 * of a temporary one, a rename and a removal -- a 100k-worker round writes 100k summaries
 * into one folder, and ext4's directory work was most of the CLI's time (a fifth less
 * kernel time per file measured). A name that exists (or is a planted symlink) is replaced
 * by a rename as before; linkat never follows a symlink at its new name. 1 done, 0 not
 * possible here (no O_TMPFILE in this file system, no /proc: the caller writes it the
 * other way), -1 with err. */
static int write_unnamed(const pt_out_dir *d, const char *name, const void *const *parts, const size_t *sizes,
                         size_t part_count, int mode, pt_error *err)
{
    int fd = openat(d->fd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, file_mode(d, mode));
    if (fd < 0)
        return 0;
    char *path = child_path(d, name);
    int rc = 1;
    for (size_t i = 0; i < part_count && rc == 1; i++)
        if (write_all(fd, parts[i], sizes[i]) != 0) {
            pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
            rc = -1;
        }
    char proc_path[64];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
    if (rc == 1 && linkat(AT_FDCWD, proc_path, d->fd, name, AT_SYMLINK_FOLLOW) != 0) {
        int why = errno;
        if (why == EEXIST && link_and_replace(d, proc_path, name) != 0)
            why = errno;
        else if (why == EEXIST)
            why = 0;
        if (why == ENOENT || why == EPERM || why == EXDEV || why == EOPNOTSUPP)
            rc = 0; /* no /proc, or linking refused here: the temporary name will do */
        else if (why != 0)
            pt_error_set(err, "cannot write %s: %s", path, strerror(why)), rc = -1;
    }
    if (close(fd) != 0 && rc == 1) {
        pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
        unlinkat(d->fd, name, 0);
        rc = -1;
    }
    free(path);
    return rc;
}

int pt_out_dir_write(const pt_out_dir *d, const char *name, const void *const *parts, const size_t *sizes,
                     size_t part_count, int mode, pt_error *err)
{
    if (!is_one_name(name)) {
        pt_error_set(err, "%s/%s: not a file name", d->path, name);
        return -1;
    }
    int done = write_unnamed(d, name, parts, sizes, part_count, mode, err);
    if (done != 0)
        return done > 0 ? 0 : -1;
    pt_out_file f;
    if (pt_out_file_create_in(&f, d, name, mode, err) != 0)
        return -1;
    return fill_and_commit(&f, parts, sizes, part_count, err);
}

int pt_out_write_path(const char *path, const void *const *parts, const size_t *sizes, size_t part_count, int mode,
                      pt_error *err)
{
    pt_out_file f;
    if (pt_out_file_create(&f, path, mode, err) != 0)
        return -1;
    return fill_and_commit(&f, parts, sizes, part_count, err);
}
