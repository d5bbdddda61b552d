/* discover.c -- find the running jobs on this machine (discover.h).
 *
 * The job files say where each job's coordinator is and which key it holds, so only this
 * user's own are believed, root's CLI included: each of this user's runtime directories
 * (jobfile.h) is opened once, without following a symlink, checked to be private, and
 * its files are opened relative to it, each checked to be this user's, regular and small.
 * Other users' job files are named, never read: a planted one would make the CLI connect
 * to whatever that user runs. A file whose process is gone is stale, and removed (with
 * its key file, but only a key file beside it: a path read from a file is never trusted
 * further than its own directory). When no job
 * is found, /proc says why: a process whose environment has RANK and MASTER_PORT is a
 * worker of a distributed job; the collector's extension in its memory map says whether
 * perftracker runs in it. A process without it that started moments ago and has not yet
 * joined its job's rendezvous (no socket of its on MASTER_PORT, which init_process_group()
 * opens) is still starting -- importing torch takes seconds, and PerfTracker() comes after
 * -- so it is told to try again, not that its script does without the collector. Cost: a few directory reads, and for the explanation one pass over
 * /proc reading the environ of the processes this user may read (milliseconds); this runs
 * in the CLI only. */
#define _GNU_SOURCE
#include "control/discover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENVIRON_MAX (256u << 10)
/* Every user's default and fallback runtime directories' job files. */
#define RUNTIME_GLOB "/tmp/perftracker-[0-9]*/job-*.info"

static bool key_file_beside(const pt_job_record *r)
{
    const char *slash = strrchr(r->file, '/');
    size_t dir_len = slash ? (size_t)(slash - r->file) : 0;
    const char *name = r->key_file + dir_len + 1;
    size_t n = strlen(name);
    return r->key_file[0] && strncmp(r->key_file, r->file, dir_len + 1) == 0 && !strchr(name, '/') &&
           strncmp(name, "control-", 8) == 0 && n > 12 && strcmp(name + n - 4, ".key") == 0;
}

static void remove_stale(const pt_job_record *r, bool *removed)
{
    *removed = false;
    if (r->uid != (uint32_t)geteuid())
        return;
    if (unlink(r->file) == 0 || errno == ENOENT) {
        *removed = true;
        if (key_file_beside(r))
            unlink(r->key_file);
    }
}

static int by_start(const void *a, const void *b)
{
    const pt_job_record *x = a, *y = b;
    return x->started < y->started ? -1 : x->started > y->started ? 1 : strcmp(x->file, y->file);
}

static void add_record(pt_job_list *l, pt_job_record *r, size_t *cap, size_t *stale_cap)
{
    if (!key_file_beside(r))
        r->key_file[0] = '\0'; /* a key elsewhere is not this job's to offer */
    if (pt_job_record_alive(r)) {
        PT_GROW(l->jobs, *cap, l->count + 1);
        l->jobs[l->count++] = *r;
        return;
    }
    PT_GROW(l->stale, *stale_cap, l->stale_count + 1);
    size_t removed_cap = *stale_cap;
    l->stale_removed = pt_xrealloc(l->stale_removed, removed_cap * sizeof *l->stale_removed);
    remove_stale(r, &l->stale_removed[l->stale_count]);
    l->stale[l->stale_count++] = *r;
}

static bool is_job_file_name(const char *name)
{
    return strncmp(name, "job-", 4) == 0 && pt_ends_with(name, ".info");
}

/* The job files of one of this user's directories. The directory is opened once, not
 * through a symlink, and checked to be private before any file in it is believed; each
 * file is then opened relative to it (pt_job_file_read_at), so nothing can be swapped
 * in between. */
static void read_dir(pt_job_list *l, const char *dir, pt_buf *notes, size_t *cap, size_t *stale_cap)
{
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0)
        return; /* not there: no job registered */
    struct stat st;
    if (fstat(dir_fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
        char owner[300];
        pt_user_describe(st.st_uid, owner, sizeof owner);
        pt_buf_printf(notes, "did not read %s: it belongs to %s with mode %04o, and job files are trusted only in a "
                             "directory of this user's that nobody else may enter (mode 0700)\n",
                      dir, owner, (unsigned)(st.st_mode & 07777));
        close(dir_fd);
        return;
    }
    DIR *d = fdopendir(dup(dir_fd));
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!is_job_file_name(de->d_name))
            continue;
        pt_job_record r;
        pt_error err;
        int rc = pt_job_file_read_at(dir_fd, dir, de->d_name, &r, &err);
        if (rc == 0)
            add_record(l, &r, cap, stale_cap);
        else if (rc == -2)
            pt_buf_printf(notes, "ignored %s: it belongs to uid %u, not to this user\n", r.file, (unsigned)r.uid);
        else
            pt_buf_printf(notes, "ignored a job file: %s\n", err.message);
    }
    if (d)
        closedir(d);
    close(dir_fd);
}

#define FOREIGN_LISTED 8

/* Other users' job files this user can see (root sees them all). None is read -- their
 * contents are whatever that user wrote -- but each is named, with how to profile that
 * user's job instead: as that user, whose trust the CLI then has. */
static void note_foreign_job_files(const pt_runtime_dirs *mine, pt_buf *notes)
{
    glob_t found;
    if (glob(RUNTIME_GLOB, GLOB_NOSORT, NULL, &found) != 0)
        return;
    size_t foreign = 0;
    for (size_t i = 0; i < found.gl_pathc; i++) {
        const char *path = found.gl_pathv[i];
        bool own_dir = false;
        for (size_t k = 0; k < mine->count; k++) {
            size_t n = strlen(mine->dir[k]);
            own_dir |= strncmp(path, mine->dir[k], n) == 0 && path[n] == '/';
        }
        struct stat st;
        if (own_dir || lstat(path, &st) != 0 || st.st_uid == geteuid())
            continue;
        if (foreign++ >= FOREIGN_LISTED)
            continue;
        char owner[300], name[256];
        pt_user_describe(st.st_uid, owner, sizeof owner);
        pt_buf_printf(notes, "ignored %s: it belongs to %s, and the trigger trusts only job files of this user (uid "
                             "%u); to profile that user's job, run the trigger as that user: ",
                      path, owner, (unsigned)geteuid());
        if (pt_user_name(st.st_uid, name, sizeof name))
            pt_buf_printf(notes, "runuser -u %s -- perftracker --trigger-on --auto-analyze\n", name);
        else
            pt_buf_printf(notes, "setpriv --reuid=%u --regid=%u --clear-groups perftracker --trigger-on "
                                 "--auto-analyze\n", (unsigned)st.st_uid, (unsigned)st.st_gid);
    }
    if (foreign > FOREIGN_LISTED)
        pt_buf_printf(notes, "... and %zu more job files of other users, ignored\n", foreign - FOREIGN_LISTED);
    globfree(&found);
}

void pt_jobs_list(pt_job_list *out)
{
    memset(out, 0, sizeof *out);
    pt_runtime_dirs dirs;
    pt_runtime_dirs_to_read(&dirs);
    snprintf(out->dir, sizeof out->dir, "%s", dirs.shown);
    pt_buf notes = PT_BUF_INIT;
    if (dirs.note[0])
        pt_buf_printf(&notes, "%s\n", dirs.note);
    size_t cap = 0, stale_cap = 0;
    for (size_t i = 0; i < dirs.count; i++)
        read_dir(out, dirs.dir[i], &notes, &cap, &stale_cap);
    note_foreign_job_files(&dirs, &notes);
    out->notes = pt_buf_take(&notes);
    if (out->count > 1)
        qsort(out->jobs, out->count, sizeof *out->jobs, by_start);
}

void pt_job_list_free(pt_job_list *l)
{
    free(l->notes);
    free(l->jobs);
    free(l->stale);
    free(l->stale_removed);
    memset(l, 0, sizeof *l);
}

static int32_t job_id(const pt_job_record *r)
{
    return r->master_port > 0 ? r->master_port : (int32_t)r->port;
}

const pt_job_record *pt_jobs_find(const pt_job_list *l, const char *id)
{
    char *end;
    long long v = strtoll(id, &end, 10);
    if (*id == '\0' || *end != '\0')
        return NULL;
    for (size_t i = 0; i < l->count; i++)
        if (job_id(&l->jobs[i]) == v)
            return &l->jobs[i];
    for (size_t i = 0; i < l->count; i++)
        if (l->jobs[i].port == v || l->jobs[i].pid == v)
            return &l->jobs[i];
    return NULL;
}

const pt_job_record *pt_jobs_match_env(const pt_job_list *l, const pt_job_env *env)
{
    const pt_job_record *match = NULL;
    for (size_t i = 0; i < l->count; i++) {
        const pt_job_record *r = &l->jobs[i];
        bool same = (env->master_port > 0 && r->master_port == env->master_port) ||
                    (env->coordinator_port && r->port == env->coordinator_port);
        if (same && match)
            return NULL; /* the environment does not tell them apart */
        if (same)
            match = r;
    }
    return match;
}

void pt_jobs_format(const pt_job_list *l, pt_buf *out)
{
    pt_buf_printf(out, "%-7s %-8s %-10s %-7s %-21s %-19s %s\n", "JOB", "PID", "USER", "WORKERS", "COORDINATOR",
                  "STARTED", "COMMAND");
    for (size_t i = 0; i < l->count; i++) {
        const pt_job_record *r = &l->jobs[i];
        char user[64], started[32] = "?", where[PT_HOST_MAX + 8];
        pt_user_name(r->uid, user, sizeof user);
        time_t t = (time_t)r->started;
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(where, sizeof where, "%s:%u", r->connect_host, (unsigned)r->port);
        pt_buf_printf(out, "%-7d %-8lld %-10s %-7d %-21s %-19s %s\n", (int)job_id(r), (long long)r->pid, user,
                      (int)r->world_size, where, started, r->command[0] ? r->command : "?");
    }
}

/* ---------------------------------------------------------------- /proc */

/* Reads a whole small /proc file (environ, maps) into a fresh buffer; NULL when unreadable. */
static char *read_proc(int64_t pid, const char *what, size_t max, size_t *len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/%s", (long long)pid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    pt_buf b = PT_BUF_INIT;
    char chunk[16384];
    ssize_t n;
    while (b.len < max && (n = read(fd, chunk, sizeof chunk)) > 0)
        pt_buf_append(&b, chunk, (size_t)n);
    close(fd);
    *len = b.len;
    pt_buf_append(&b, "", 1); /* NUL-terminated for strstr */
    return pt_buf_take(&b);
}

static const char *environ_value(const char *env, size_t len, const char *name)
{
    size_t n = strlen(name);
    for (size_t off = 0; off < len; off += strlen(env + off) + 1)
        if (strncmp(env + off, name, n) == 0 && env[off + n] == '=')
            return env + off + n + 1;
    return NULL;
}

/* Long enough for a loaded machine to import torch; a job that trains without the
 * collector has joined its rendezvous by then, and is named at once anyway. */
#define STARTING_GRACE_S 120
#define SOCKETS_MAX 64

static int64_t process_age_s(int64_t pid)
{
    uint64_t start = pt_process_start_ticks(pid);
    long hz = sysconf(_SC_CLK_TCK);
    char text[64] = "";
    int fd = open("/proc/uptime", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, text, sizeof text - 1);
        text[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    double up = strtod(text, NULL);
    if (!start || hz <= 0 || up <= 0)
        return -1;
    double age = up - (double)start / (double)hz;
    return age < 0 ? 0 : (int64_t)age;
}

/* The inodes of the TCP sockets in pid's network namespace whose local or remote port is
 * port (lines of /proc/PID/net/tcp and tcp6: "sl: local:port remote:port st ... inode"). */
static size_t sockets_on_port(int64_t pid, int32_t port, unsigned long *inodes, size_t cap)
{
    size_t count = 0;
    const char *tables[] = {"net/tcp", "net/tcp6"};
    for (size_t t = 0; t < PT_ARRAY_LEN(tables); t++) {
        size_t len;
        char *text = read_proc(pid, tables[t], 4u << 20, &len);
        for (char *line = text ? strchr(text, '\n') : NULL; line && count < cap; line = strchr(line + 1, '\n')) {
            unsigned local = 0, remote = 0;
            unsigned long inode = 0;
            if (sscanf(line + 1, "%*d: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%x %*x %*s %*s %*s %*u %*d %lu", &local, &remote,
                       &inode) == 3 && inode && ((int32_t)local == port || (int32_t)remote == port))
                inodes[count++] = inode;
        }
        free(text);
    }
    return count;
}

/* Whether pid holds a TCP socket on port: listening there (rank 0's store) or connected. */
static bool holds_socket_on_port(int64_t pid, int32_t port)
{
    unsigned long inodes[SOCKETS_MAX];
    size_t n = port > 0 ? sockets_on_port(pid, port, inodes, SOCKETS_MAX) : 0;
    if (n == 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/fd", (long long)pid);
    DIR *fds = opendir(path);
    if (!fds)
        return false;
    bool found = false;
    struct dirent *de;
    while (!found && (de = readdir(fds)) != NULL) {
        char link[96], target[64];
        snprintf(link, sizeof link, "%s/%.20s", path, de->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        unsigned long inode;
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) == 1)
            for (size_t i = 0; i < n && !found; i++)
                found = inodes[i] == inode;
    }
    closedir(fds);
    return found;
}

/* Fills p from a process's environment; false when it is not a worker of a job. */
static bool read_worker(int64_t pid, pt_job_process *p)
{
    size_t len = 0;
    char *env = read_proc(pid, "environ", ENVIRON_MAX, &len);
    if (!env)
        return false;
    const char *rank = environ_value(env, len, "RANK");
    const char *port = environ_value(env, len, "MASTER_PORT");
    bool worker = rank && port && *rank && *port;
    if (worker) {
        memset(p, 0, sizeof *p);
        p->pid = pid;
        p->rank = (int32_t)strtol(rank, NULL, 10);
        p->master_port = (int32_t)strtol(port, NULL, 10);
        const char *agent = environ_value(env, len, "PERFTRACKER_AGENT");
        p->agent_disabled = agent && strcmp(agent, "0") == 0;
        const char *dir = environ_value(env, len, "PERFTRACKER_KEY_DIR");
        if (dir && *dir)
            snprintf(p->key_dir, sizeof p->key_dir, "%s", dir);
    }
    free(env);
    if (!worker)
        return false;
    char *maps = read_proc(pid, "maps", 64u << 20, &len);
    p->has_collector = maps && strstr(maps, "/_perftracker") != NULL;
    free(maps);
    p->age_s = process_age_s(pid);
    p->starting = !p->has_collector && p->age_s >= 0 && p->age_s < STARTING_GRACE_S &&
                  !holds_socket_on_port(pid, p->master_port);
    pt_process_command(pid, p->command, sizeof p->command);
    return true;
}

size_t pt_jobs_scan_processes(const pt_job_list *l, pt_job_process **out)
{
    *out = NULL;
    size_t count = 0, cap = 0;
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    int64_t self = (int64_t)getpid();
    struct dirent *de;
    while ((de = readdir(proc)) != NULL) {
        char *end;
        long long pid = strtoll(de->d_name, &end, 10);
        pt_job_process p;
        if (*end || pid <= 0 || pid == self || !read_worker(pid, &p))
            continue;
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%lld", pid);
        p.uid = stat(path, &st) == 0 ? (uint32_t)st.st_uid : (uint32_t)geteuid();
        size_t same = count;
        for (size_t i = 0; i < count; i++)
            if ((*out)[i].master_port == p.master_port)
                same = i;
        if (same < count && (*out)[same].rank <= p.rank)
            continue; /* one process per job: the lowest rank */
        if (same == count) {
            PT_GROW(*out, cap, count + 1);
            count++;
        }
        (*out)[same] = p;
    }
    closedir(proc);
    for (size_t i = 0; i < count; i++)
        for (size_t k = 0; k < l->count; k++)
            if (l->jobs[k].pid == (*out)[i].pid || l->jobs[k].master_port == (*out)[i].master_port)
                (*out)[i].registered = true;
    return count;
}

/* Where this build's collector package is, for the PYTHONPATH hint: <bin>/../python. */
static void collector_path_hint(char *dst, size_t cap)
{
    dst[0] = '\0';
    char exe[PT_RUNTIME_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 32);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    char probe[PT_RUNTIME_PATH_MAX + 64];
    snprintf(probe, sizeof probe, "%s/python/perftracker/__init__.py", exe);
    if (access(probe, R_OK) == 0)
        snprintf(dst, cap, "%.1300s/python", exe);
}

/* Whether a job's PERFTRACKER_KEY_DIR is where this shell reads. */
static bool same_dir_as_read(const char *key_dir)
{
    pt_runtime_dirs dirs;
    pt_runtime_dirs_to_read(&dirs);
    for (size_t i = 0; i < dirs.count; i++)
        if (strcmp(dirs.dir[i], key_dir) == 0)
            return true;
    return false;
}

static void explain_process(const pt_job_process *p, const pt_job_list *l, pt_buf *out)
{
    pt_buf_printf(out, "pid %lld (%s) is rank %d of a job with MASTER_PORT %d ", (long long)p->pid,
                  p->command[0] ? p->command : "?", (int)p->rank, (int)p->master_port);
    if (p->starting) {
        pt_buf_printf(out, "that is still starting (it started %lld s ago and has not joined its job's rendezvous "
                           "yet) and has not loaded the perftracker collector yet: a job registers once its training "
                           "script constructs PerfTracker(); try again in a few seconds\n", (long long)p->age_s);
    } else if (!p->has_collector) {
        char hint[PT_RUNTIME_PATH_MAX];
        collector_path_hint(hint, sizeof hint);
        pt_buf_printf(out, "that runs without the perftracker collector: its training script did not load it. Is "
                           "perftracker importable there (%s%s%s) and is PerfTracker() constructed?\n",
                      hint[0] ? "PYTHONPATH=" : "installed, or PYTHONPATH=<build>/python", hint,
                      hint[0] ? ", for this build" : "");
    } else if (p->agent_disabled) {
        pt_buf_puts(out, "that runs the collector with PERFTRACKER_AGENT=0, which turns the control plane off\n");
    } else if (p->rank != 0) {
        pt_buf_puts(out, "whose rank 0 is not on this machine (or not readable by this user): run this in rank "
                         "0's container as the job's user\n");
    } else if (p->uid != (uint32_t)geteuid()) {
        char owner[300], name[256];
        pt_user_describe(p->uid, owner, sizeof owner);
        pt_buf_printf(out, "run by %s: the trigger profiles only jobs of this user (uid %u), whose job files it "
                           "trusts; run it as that user", owner, (unsigned)geteuid());
        if (pt_user_name(p->uid, name, sizeof name))
            pt_buf_printf(out, " (runuser -u %s -- perftracker --trigger-on --auto-analyze)", name);
        pt_buf_putc(out, '\n');
    } else if (p->key_dir[0] ? !same_dir_as_read(p->key_dir) : pt_env_str("PERFTRACKER_KEY_DIR", NULL) != NULL) {
        pt_buf_printf(out, "that registers in %s, not in %s where this shell looks: run this with the job's "
                           "PERFTRACKER_KEY_DIR%s\n", p->key_dir[0] ? p->key_dir : "the default directory", l->dir,
                      p->key_dir[0] ? "" : " (unset)");
    } else {
        pt_buf_puts(out, "that runs the collector but has not registered: if it just started, try again in a few "
                         "seconds; otherwise its log says why its coordinator did not start "
                         "(\"perftracker[coordinator]: ...\")\n");
    }
}

void pt_jobs_explain(const pt_job_list *l, pt_buf *out)
{
    pt_buf_puts(out, l->notes ? l->notes : "");
    for (size_t i = 0; i < l->stale_count; i++) {
        const pt_job_record *r = &l->stale[i];
        pt_buf_printf(out, "the job that registered in %s (pid %lld, MASTER_PORT %d) is no longer running%s\n",
                      r->file, (long long)r->pid, (int)r->master_port,
                      l->stale_removed[i] ? "; its files were removed" : "");
    }
    pt_job_process *procs;
    size_t n = pt_jobs_scan_processes(l, &procs);
    for (size_t i = 0; i < n; i++)
        if (!procs[i].registered)
            explain_process(&procs[i], l, out);
    free(procs);
}
