/* jobfile.c -- the per-user runtime directory and the job files in it (jobfile.h).
 *
 * A job file is a few "name value" lines: trivially written without allocating inside
 * the training process, readable by people, and parsed here without a JSON reader. It is
 * written with mkstemp (0600) and renamed into place, so a reader never sees half of one.
 * Values are single lines: control characters in host names or the command line become
 * '?' before they are written. */
#define _GNU_SOURCE
#include "control/jobfile.h"

#include "summarize/summary.h"
#include "util/buf.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JOB_FILE_MAX 8192
#define JOB_FILE_MAGIC "perftracker-job 1"
#define RUNTIME_BASE "/tmp"
#define FALLBACK_SUFFIX_LEN 6 /* mkdtemp's XXXXXX */

bool pt_user_name(uint32_t uid, char *dst, size_t cap)
{
    struct passwd pw, *found = NULL;
    char buf[2048];
    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &found) == 0 && found) {
        snprintf(dst, cap, "%s", found->pw_name);
        return true;
    }
    snprintf(dst, cap, "%u", (unsigned)uid);
    return false;
}

void pt_user_describe(uint32_t uid, char *dst, size_t cap)
{
    char name[256];
    if (pt_user_name(uid, name, sizeof name))
        snprintf(dst, cap, "uid %u (%s)", (unsigned)uid, name);
    else
        snprintf(dst, cap, "uid %u", (unsigned)uid);
}

/* What a path that should be this user's private directory is instead. */
static void describe_not_private(const char *path, const struct stat *st, char *why, size_t cap)
{
    char owner[300], me[300];
    pt_user_describe(st->st_uid, owner, sizeof owner);
    pt_user_describe((uint32_t)geteuid(), me, sizeof me);
    const char *what = S_ISLNK(st->st_mode) ? "a symbolic link" : S_ISDIR(st->st_mode) ? "a directory" : "a file";
    if (st->st_uid != geteuid())
        snprintf(why, cap, "%s is %s of %s, mode %04o, not of this user (%s)", path, what, owner,
                 (unsigned)(st->st_mode & 07777), me);
    else if (!S_ISDIR(st->st_mode))
        snprintf(why, cap, "%s is %s, not a directory", path, what);
    else
        snprintf(why, cap, "%s is this user's, but its mode %04o lets other users in (chmod 700 it)", path,
                 (unsigned)(st->st_mode & 07777));
}

bool pt_runtime_dir_is_private(const char *path, char *why, size_t cap)
{
    struct stat st;
    why[0] = '\0';
    if (lstat(path, &st) != 0) {
        if (errno != ENOENT)
            snprintf(why, cap, "%s cannot be examined: %s", path, strerror(errno));
        return false;
    }
    if (S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077))
        return true;
    describe_not_private(path, &st, why, cap);
    return false;
}

static void default_dir(char *dst, size_t cap)
{
    snprintf(dst, cap, RUNTIME_BASE "/perftracker-%u", (unsigned)geteuid());
}

/* Inserts path into the sorted list dirs[*count] (at most max kept: the smallest). */
static void keep_sorted(char (*dirs)[PT_RUNTIME_PATH_MAX], size_t *count, size_t max, const char *path)
{
    size_t at = *count;
    while (at > 0 && strcmp(dirs[at - 1], path) > 0)
        at--;
    if (at >= max)
        return;
    size_t last = *count < max ? *count : max - 1;
    memmove(dirs[at + 1], dirs[at], (last - at) * sizeof dirs[0]);
    snprintf(dirs[at], PT_RUNTIME_PATH_MAX, "%s", path);
    if (*count < max)
        (*count)++;
}

/* This user's private fallbacks, /tmp/perftracker-<euid>.XXXXXX, in name order (the
 * first is the one rank 0 uses). A directory there that is not this user's private one
 * is someone else's and skipped. */
static size_t find_fallbacks(char (*dirs)[PT_RUNTIME_PATH_MAX], size_t max)
{
    char prefix[64];
    int prefix_len = snprintf(prefix, sizeof prefix, "perftracker-%u.", (unsigned)geteuid());
    DIR *base = opendir(RUNTIME_BASE);
    size_t count = 0;
    struct dirent *de;
    while (base && (de = readdir(base)) != NULL) {
        if (strncmp(de->d_name, prefix, (size_t)prefix_len) != 0 ||
            strlen(de->d_name) != (size_t)prefix_len + FALLBACK_SUFFIX_LEN)
            continue;
        char path[PT_RUNTIME_PATH_MAX], why[8];
        snprintf(path, sizeof path, RUNTIME_BASE "/%s", de->d_name);
        if (pt_runtime_dir_is_private(path, why, sizeof why))
            keep_sorted(dirs, &count, max, path);
    }
    if (base)
        closedir(base);
    return count;
}

static void squat_note(const char *why, const char *instead, char *note, size_t cap)
{
    snprintf(note, cap, "%.700s: perftracker does not use it; this user's job files and keys are in %.400s instead",
             why, instead);
}

void pt_runtime_dir_choose(char *dst, size_t cap, bool create, char *note, size_t note_cap)
{
    if (note && note_cap)
        note[0] = '\0';
    const char *configured = pt_env_str("PERFTRACKER_KEY_DIR", NULL);
    char primary[64], why[PT_RUNTIME_PATH_MAX];
    default_dir(primary, sizeof primary);
    if (configured || pt_runtime_dir_is_private(primary, why, sizeof why) || !why[0]) {
        snprintf(dst, cap, "%s", configured ? configured : primary); /* private, or not there yet */
        return;
    }
    char found[1][PT_RUNTIME_PATH_MAX], fresh[80];
    snprintf(fresh, sizeof fresh, "%s.XXXXXX", primary);
    if (find_fallbacks(found, 1) == 1)
        snprintf(dst, cap, "%s", found[0]);
    else if (create && mkdtemp(fresh)) /* 0700 */
        snprintf(dst, cap, "%s", fresh);
    else if (create) /* cannot make one: pt_runtime_dir_ensure will say why the default is refused */
        snprintf(dst, cap, "%s", primary);
    else
        snprintf(dst, cap, "%s.XXXXXX", primary);
    if (note && note_cap)
        squat_note(why, strcmp(dst, primary) == 0 ? "no other directory (mkdtemp failed)" : dst, note, note_cap);
}

void pt_runtime_dir(char *dst, size_t cap)
{
    pt_runtime_dir_choose(dst, cap, true, NULL, 0);
}

bool pt_runtime_dir_note(char *note, size_t cap)
{
    char dir[PT_RUNTIME_PATH_MAX];
    pt_runtime_dir_choose(dir, sizeof dir, false, note, cap);
    return note[0] != '\0';
}

void pt_runtime_dirs_to_read(pt_runtime_dirs *out)
{
    memset(out, 0, sizeof *out);
    const char *configured = pt_env_str("PERFTRACKER_KEY_DIR", NULL);
    if (configured) {
        out->count = 1;
        snprintf(out->dir[0], sizeof out->dir[0], "%s", configured);
        snprintf(out->shown, sizeof out->shown, "%s", configured);
        return;
    }
    char primary[64], why[PT_RUNTIME_PATH_MAX];
    default_dir(primary, sizeof primary);
    bool usable = pt_runtime_dir_is_private(primary, why, sizeof why);
    if (usable)
        snprintf(out->dir[out->count++], sizeof out->dir[0], "%s", primary);
    out->count += find_fallbacks(out->dir + out->count, PT_RUNTIME_DIRS_MAX - out->count);
    pt_buf shown = PT_BUF_INIT;
    for (size_t i = 0; i < out->count; i++)
        pt_buf_printf(&shown, "%s%s", i ? " or " : "", out->dir[i]);
    if (usable || !why[0]) {
        if (!usable)
            pt_buf_printf(&shown, "%s%s", shown.len ? " or " : "", primary);
    } else {
        char instead[PT_RUNTIME_PATH_MAX];
        snprintf(instead, sizeof instead, "%s", out->count ? out->dir[0] : "");
        if (!out->count) {
            snprintf(instead, sizeof instead, "a private %s.XXXXXX (none exists yet: no job of this user has "
                     "registered since)", primary);
            pt_buf_printf(&shown, "%s.XXXXXX", primary);
        }
        squat_note(why, instead, out->note, sizeof out->note);
    }
    snprintf(out->shown, sizeof out->shown, "%s", pt_buf_cstr(&shown));
    pt_buf_free(&shown);
}

int pt_runtime_dir_ensure(const char *dir, pt_error *err)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        pt_error_set(err, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char why[PT_RUNTIME_PATH_MAX];
    if (!pt_runtime_dir_is_private(dir, why, sizeof why)) {
        pt_error_set(err, "%s is not a private directory of this user (mode 0700 expected): %.700s", dir,
                     why[0] ? why : "it vanished");
        return -1;
    }
    return 0;
}

/* One line of text: control characters (and the separators we rely on) become '?'. */
static void single_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

/* Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat); 0 when
 * unknown. The command name (field 2) may hold spaces and parentheses: skip to the last ')'. */
uint64_t pt_process_start_ticks(int64_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    for (int field = 3; field < 22 && *p; field++) { /* p is before field 3 */
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    return strtoull(p, NULL, 10);
}

void pt_process_command(int64_t pid, char *dst, size_t cap)
{
    dst[0] = '\0';
    if (cap < 2)
        return;
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/cmdline", (long long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, dst, cap - 1);
    close(fd);
    if (n <= 0) {
        dst[0] = '\0';
        return;
    }
    while (n > 0 && dst[n - 1] == '\0')
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (dst[i] == '\0')
            dst[i] = ' ';
    dst[n] = '\0';
    single_line(dst);
}

void pt_job_record_for_self(pt_job_record *r, const pt_job_env *env)
{
    memset(r, 0, sizeof *r);
    r->uid = (uint32_t)geteuid();
    r->pid = (int64_t)getpid();
    r->start_ticks = pt_process_start_ticks(r->pid);
    r->started = (int64_t)time(NULL);
    r->world_size = env->world_size;
    snprintf(r->master_addr, sizeof r->master_addr, "%s", env->master_addr);
    r->master_port = env->master_port;
    snprintf(r->coordinator_host, sizeof r->coordinator_host, "%s", env->coordinator_host);
    r->port = env->coordinator_port;
    pt_process_command(r->pid, r->command, sizeof r->command);
}

int pt_runtime_write_private(const char *path, const char *text, size_t len, pt_error *err)
{
    char dir[PT_RUNTIME_PATH_MAX], tmp[PT_RUNTIME_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (pt_runtime_dir_ensure(dir, err) != 0)
            return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp); /* 0600 */
    if (fd < 0) {
        pt_error_set(err, "cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    ssize_t wrote = write(fd, text, len);
    int close_rc = close(fd);
    if (wrote != (ssize_t)len || close_rc != 0 || rename(tmp, path) != 0) {
        pt_error_set(err, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int pt_job_file_write(pt_job_record *r, pt_error *err)
{
    char dir[PT_RUNTIME_PATH_MAX - 300], text[JOB_FILE_MAX];
    pt_runtime_dir(dir, sizeof dir);
    char host[PT_HOST_MAX];
    pt_runtime_safe_host(r->coordinator_host, host, sizeof host);
    snprintf(r->file, sizeof r->file, "%s/job-%s-%u.info", dir, host, (unsigned)r->port);
    single_line(r->master_addr), single_line(r->coordinator_host), single_line(r->connect_host);
    single_line(r->key_file), single_line(r->command);
    int n = snprintf(text, sizeof text,
                     JOB_FILE_MAGIC "\npid %lld\nstart_ticks %llu\nstarted %lld\nworld_size %d\nmaster_addr %s\n"
                     "master_port %d\ncoordinator_host %s\nconnect_host %s\nport %u\nkey_file %s\ncommand %s\n",
                     (long long)r->pid, (unsigned long long)r->start_ticks, (long long)r->started, (int)r->world_size,
                     r->master_addr, (int)r->master_port, r->coordinator_host, r->connect_host, (unsigned)r->port,
                     r->key_file, r->command);
    if (n < 0 || (size_t)n >= sizeof text) {
        pt_error_set(err, "the job file for %s would be too long", r->file);
        return -1;
    }
    return pt_runtime_write_private(r->file, text, (size_t)n, err);
}

void pt_runtime_safe_host(const char *host, char *dst, size_t cap)
{
    size_t i = 0;
    for (const char *p = host; *p && i + 1 < cap; p++)
        dst[i++] = (isalnum((unsigned char)*p) || *p == '.' || *p == '-') ? *p : '_';
    dst[i] = '\0';
}

/* A whole decimal number in [lo, hi]: a job file with anything else is refused. */
static bool parse_in_range(const char *text, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* One "name value" line. Unknown names are skipped (a newer writer); a known number out
 * of its range makes the file invalid: false. */
static bool parse_line(pt_job_record *r, const char *name, char *value)
{
    const struct {
        const char *name;
        char *dst;
        size_t cap;
    } texts[] = {
        {"master_addr", r->master_addr, sizeof r->master_addr},
        {"coordinator_host", r->coordinator_host, sizeof r->coordinator_host},
        {"connect_host", r->connect_host, sizeof r->connect_host},
        {"key_file", r->key_file, sizeof r->key_file},
        {"command", r->command, sizeof r->command},
    };
    single_line(value);
    for (size_t i = 0; i < PT_ARRAY_LEN(texts); i++)
        if (strcmp(name, texts[i].name) == 0) {
            snprintf(texts[i].dst, texts[i].cap, "%s", value);
            return true;
        }
    long long v;
    if (strcmp(name, "start_ticks") == 0) {
        char *end;
        errno = 0;
        r->start_ticks = strtoull(value, &end, 10);
        return !errno && end != value && !*end && value[0] != '-';
    }
    const struct {
        const char *name;
        long long lo, hi;
    } numbers[] = {
        {"pid", 1, INT32_MAX}, {"started", 0, INT64_MAX}, {"world_size", 1, PT_MAX_WORLD_SIZE},
        {"master_port", -1, 65535}, {"port", 1, 65535},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(numbers); i++) {
        if (strcmp(name, numbers[i].name) != 0)
            continue;
        if (!parse_in_range(value, numbers[i].lo, numbers[i].hi, &v))
            return false;
        if (i == 0)
            r->pid = v;
        else if (i == 1)
            r->started = v;
        else if (i == 2)
            r->world_size = (int32_t)v;
        else if (i == 3)
            r->master_port = (int32_t)v;
        else
            r->port = (uint16_t)v;
    }
    return true;
}

static int parse_job_text(char *text, pt_job_record *r, pt_error *err)
{
    size_t magic = strlen(JOB_FILE_MAGIC);
    if (strncmp(text, JOB_FILE_MAGIC, magic) != 0 || text[magic] != '\n') {
        pt_error_set(err, "%s is not a perftracker job file", r->file);
        return -1;
    }
    for (char *line = text + magic + 1, *next; *line; line = next) {
        next = strchr(line, '\n');
        next = next ? (*next = '\0', next + 1) : line + strlen(line);
        char *space = strchr(line, ' ');
        if (!space)
            continue;
        *space = '\0';
        if (!parse_line(r, line, space + 1)) {
            pt_error_set(err, "%s has an invalid %s ('%.40s')", r->file, line, space + 1);
            return -1;
        }
    }
    if (r->pid <= 0 || r->port == 0 || !r->connect_host[0]) {
        pt_error_set(err, "%s is incomplete", r->file);
        return -1;
    }
    return 0;
}

/* The file behind fd, if it may be trusted: a regular file of this user's that nobody
 * else can write, small enough to be a job file. 0, -1 (err), -2 (another user's). */
static int read_own_small_file(int fd, const char *path, char *text, size_t max, uint32_t *owner, pt_error *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_error_set(err, "%s is not a regular file", path);
        return -1;
    }
    *owner = (uint32_t)st.st_uid;
    if (st.st_uid != geteuid())
        return -2;
    if (st.st_mode & 022) {
        pt_error_set(err, "%s can be written by other users (mode %04o)", path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size > max) {
        pt_error_set(err, "%s is %lld bytes, more than a job file's %zu", path, (long long)st.st_size, max);
        return -1;
    }
    size_t len = 0;
    while (len < max) {
        ssize_t n = read(fd, text + len, max - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            pt_error_set(err, "cannot read %s: %s", path, strerror(errno));
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    text[len] = '\0';
    return 0;
}

int pt_job_file_read_at(int dir_fd, const char *dir, const char *name, pt_job_record *r, pt_error *err)
{
    memset(r, 0, sizeof *r);
    r->master_port = -1;
    if (dir)
        snprintf(r->file, sizeof r->file, "%s/%s", dir, name);
    else
        snprintf(r->file, sizeof r->file, "%s", name);
    /* No symlink (it could point anywhere), no waiting on a FIFO. */
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        pt_error_set(err, "cannot open %s: %s", r->file, strerror(errno));
        return -1;
    }
    char text[JOB_FILE_MAX + 1];
    int rc = read_own_small_file(fd, r->file, text, JOB_FILE_MAX, &r->uid, err);
    close(fd);
    if (rc != 0)
        return rc;
    return parse_job_text(text, r, err);
}

int pt_job_file_read(const char *path, pt_job_record *r, pt_error *err)
{
    return pt_job_file_read_at(AT_FDCWD, NULL, path, r, err);
}

bool pt_job_record_alive(const pt_job_record *r)
{
    if (r->pid <= 0)
        return false;
    uint64_t ticks = pt_process_start_ticks(r->pid);
    if (ticks)
        return r->start_ticks == 0 || ticks == r->start_ticks;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%lld", (long long)r->pid);
    if (access("/proc/self/stat", R_OK) == 0) /* /proc works, and this pid is not in it */
        return access(proc, F_OK) == 0;
    return kill((pid_t)r->pid, 0) == 0 || errno == EPERM;
}
