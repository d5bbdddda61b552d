/* jobfile.c -- the per-user runtime directory and the job files in it (jobfile.h).
 *
 * A job file is a few "name value" lines: trivially written without allocating inside
 * the training process, readable by people, and parsed here without a JSON reader. It is
 * written with mkstemp (0600) and renamed into place, so a reader never sees half of one.
 * Values are single lines: control characters in host names or the command line become
 * '?' before they are written. */
#define _GNU_SOURCE
#include "control/jobfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define JOB_FILE_MAX 8192
#define JOB_FILE_MAGIC "perftracker-job 1"

void pt_runtime_dir(char *dst, size_t cap)
{
    const char *configured = pt_env_str("PERFTRACKER_KEY_DIR", NULL);
    if (configured)
        snprintf(dst, cap, "%s", configured);
    else
        snprintf(dst, cap, "/tmp/perftracker-%u", (unsigned)geteuid());
}

int pt_runtime_dir_ensure(const char *dir, pt_error *err)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        pt_error_set(err, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        pt_error_set(err, "%s is not a private directory of this user (mode 0700 expected)", dir);
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
static uint64_t process_start_ticks(int64_t pid)
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
    r->start_ticks = process_start_ticks(r->pid);
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

static void parse_line(pt_job_record *r, const char *name, const char *value)
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
    for (size_t i = 0; i < PT_ARRAY_LEN(texts); i++)
        if (strcmp(name, texts[i].name) == 0)
            snprintf(texts[i].dst, texts[i].cap, "%s", value);
    if (strcmp(name, "pid") == 0)
        r->pid = strtoll(value, NULL, 10);
    else if (strcmp(name, "start_ticks") == 0)
        r->start_ticks = strtoull(value, NULL, 10);
    else if (strcmp(name, "started") == 0)
        r->started = strtoll(value, NULL, 10);
    else if (strcmp(name, "world_size") == 0)
        r->world_size = (int32_t)strtol(value, NULL, 10);
    else if (strcmp(name, "master_port") == 0)
        r->master_port = (int32_t)strtol(value, NULL, 10);
    else if (strcmp(name, "port") == 0)
        r->port = (uint16_t)strtoul(value, NULL, 10);
}

int pt_job_file_read(const char *path, pt_job_record *r, pt_error *err)
{
    memset(r, 0, sizeof *r);
    r->master_port = -1;
    snprintf(r->file, sizeof r->file, "%s", path);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_error_set(err, "cannot read %s: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    r->uid = (uint32_t)st.st_uid;
    char text[JOB_FILE_MAX + 1];
    ssize_t n = read(fd, text, JOB_FILE_MAX);
    close(fd);
    if (n < 0)
        n = 0;
    text[n] = '\0';
    size_t magic = strlen(JOB_FILE_MAGIC);
    if (strncmp(text, JOB_FILE_MAGIC, magic) != 0 || text[magic] != '\n') {
        pt_error_set(err, "%s is not a perftracker job file", path);
        return -1;
    }
    for (char *line = text + magic + 1, *next; *line; line = next) {
        next = strchr(line, '\n');
        next = next ? (*next = '\0', next + 1) : line + strlen(line);
        char *space = strchr(line, ' ');
        if (space) {
            *space = '\0';
            parse_line(r, line, space + 1);
        }
    }
    if (r->pid <= 0 || r->port == 0 || !r->connect_host[0]) {
        pt_error_set(err, "%s is incomplete", path);
        return -1;
    }
    return 0;
}

bool pt_job_record_alive(const pt_job_record *r)
{
    if (r->pid <= 0)
        return false;
    uint64_t ticks = process_start_ticks(r->pid);
    if (ticks)
        return r->start_ticks == 0 || ticks == r->start_ticks;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/%lld", (long long)r->pid);
    if (access("/proc/self/stat", R_OK) == 0) /* /proc works, and this pid is not in it */
        return access(proc, F_OK) == 0;
    return kill((pid_t)r->pid, 0) == 0 || errno == EPERM;
}
