/* analyze.c -- `perftracker analyze [-o OUT] [-j THREADS] TRACE_OR_DIR...`.
 *
 * The map step runs here in parallel: THREADS workers take files off a shared counter
 * and summarize each one (a trace is streamed; a summary file is just read). Each file
 * is independent, so one unreadable file costs only itself: it is named on stderr and in
 * the report's warnings, and the report is built from everyone else. That holds for
 * memory too: the memory this process may still use (pt_memory_headroom: ulimit -v, the
 * cgroup, what the machine has free), less a reserve for the reduce step, is shared
 * evenly by the files read at once (fewer of them than THREADS when a share would be too
 * small to be useful), a file that needs more than its share is refused (the summarizer
 * counts a trace's records; what decoding allocates -- a zstd window, a summary's payload,
 * its names and its place in the function store -- is counted against the share before
 * it is allocated: pt_share_begin, util/input.h; what the summaries read so far keep in
 * the pool and the store is taken from the shares of the files read after them), and an
 * allocation that fails anyway inside one file's read fails that file alone
 * (pt_run_guarded). Decoded summaries share one pool of function names
 * (pt_summary_share_names), and are freed as soon as the report tree exists. Then the
 * reduce step (pt_diagnose) and the writers; a job above PT_REPORT_FULL_MAX_WORKERS gets
 * the bounded report, its parts written beside report.json as pt_diagnose makes them. A JSON file that is no trace at all (a label.json
 * beside the traces) is noted and skipped, not counted as a worker. Exit status, as for
 * every subcommand (README.md): 0 all inputs read (ranks of the job that were not given
 * are a note, not a failure), 3 report written but some inputs unreadable, the inputs not
 * one job (diagnosis.inputs "mixed": world sizes that differ, a rank claimed twice,
 * windows far apart) or the verdict is a hang, 1 nothing to analyse (no report: a missing
 * path, no worker file, none readable) or -o not writable (checked before reading
 * anything), 2 bad command line. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "cli/progress.h"
#include "diagnose/diagnose.h"
#include "report/report.h"
#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "trace/reader.h"
#include "util/input.h"
#include "util/strtab.h"
#include "util/tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_OUT "perftracker-report"
#define PROGRESS_MIN_FILES 4

/* Where an input's bytes are when it is a member of an archive (a large round's
 * summaries.tar): paths[i] then reads "<archive>/<member>", as if the archive were the
 * folder it replaces. */
typedef struct input_member {
    int archive_fd;      /* -1: the input is a file of its own */
    uint64_t offset, size;
    char *error;         /* set: the input cannot be read, and this says why (a damaged archive) */
} input_member;

typedef struct input_list {
    char **paths;
    input_member *members; /* [count], beside paths */
    size_t count, cap, member_cap;
    char **archives;       /* the archives' paths, owned here ... */
    int *archive_fds;      /* ... and each open once, for all its members' reads */
    size_t archive_count, archive_cap, archive_fd_cap;
    struct input_file_id { dev_t dev; ino_t ino; const char *path; } *ids; /* the regular files in paths */
    size_t id_count, id_cap;
    size_t *id_slots;   /* open addressing over ids (index + 1, 0 empty), at most half full:
                           a folder of 100 000 files is not 100 000^2 comparisons */
    size_t slot_count;  /* power of two */
} input_list;

typedef struct job_state {
    input_list *inputs;
    size_t memory_budget;          /* per file read at once; 0: no limit known */
    size_t usable;                 /* for all the files read at once (memory_budget x readers) */
    size_t readers;                /* files read at once */
    pt_worker_summary **summaries; /* [i] or NULL when it failed */
    char **errors;                 /* [i] message when it failed */
    atomic_size_t next;
    atomic_size_t done;
    atomic_size_t failed;
    /* Single-file progress (bytes of the one big trace). */
    atomic_ullong bytes_done, bytes_total;
    int threads;
} job_state;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perftracker analyze [-o OUT] [-j THREADS] [--quiet | --verbose] [--force]\n"
            "                           TRACE_OR_DIR...\n"
            "  Analyze the traces (Kineto JSON, .json.gz, perftracker raw traces) or summaries\n"
            "  (.ptsum) of one job: one file per worker, directories of them, or tar archives of\n"
            "  summaries (a large round's summaries/summaries.tar).\n"
            "  -o OUT         output directory (default ./%s): OUT/report.json, OUT/PerfDisplay/;\n"
            "                 one that already holds a report is refused (nothing read) unless --force\n"
            "  -j THREADS     files read in parallel (default: number of CPUs)\n"
            "  -q, --quiet    print only the verdict and findings\n"
            "  -v, --verbose  print the report's sections as JSON log lines (the seed's form) instead\n"
            "                 of their rounded digest\n"
            "  --force        replace the report OUT already holds\n"
            "Exit status: 0 every input read (ranks not given are noted, not failed); 3 report\n"
            "written, but some inputs were unreadable or the verdict is a hang; 1 nothing could\n"
            "be analysed, or OUT is not writable or already holds a report; 2 bad command line.\n",
            DEFAULT_OUT);
}

/* One file is one worker however often it is named (a repeated argument, a directory and
 * a file in it, a symlink, a hard link): read twice, it would be two identical workers
 * with one rank. Files are told apart by device and inode, not by name. Returns NULL
 * when path was added, else the name under which that file already is an input. */
static size_t id_slot(const input_list *list, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)ino * 0xc2b2ae3d27d4eb4full);
    size_t slot = (size_t)(h ^ (h >> 29)) & (list->slot_count - 1);
    while (list->id_slots[slot]) {
        const struct input_file_id *id = &list->ids[list->id_slots[slot] - 1];
        if (id->dev == dev && id->ino == ino)
            break;
        slot = (slot + 1) & (list->slot_count - 1);
    }
    return slot;
}

static void grow_id_slots(input_list *list)
{
    free(list->id_slots);
    list->slot_count = list->slot_count ? 2 * list->slot_count : 64;
    list->id_slots = pt_xcalloc(list->slot_count, sizeof *list->id_slots);
    for (size_t i = 0; i < list->id_count; i++)
        list->id_slots[id_slot(list, list->ids[i].dev, list->ids[i].ino)] = i + 1;
}

/* The name under which the file st describes is already an input (or an archive of
 * inputs), else NULL. */
static const char *known_file(const input_list *list, const struct stat *st)
{
    if (!list->slot_count)
        return NULL;
    size_t slot = id_slot(list, st->st_dev, st->st_ino);
    return list->id_slots[slot] ? list->ids[list->id_slots[slot] - 1].path : NULL;
}

static void remember_file(input_list *list, const struct stat *st, const char *path)
{
    if (2 * (list->id_count + 1) > list->slot_count)
        grow_id_slots(list);
    PT_GROW(list->ids, list->id_cap, list->id_count + 1);
    list->ids[list->id_count++] = (struct input_file_id){st->st_dev, st->st_ino, path};
    list->id_slots[id_slot(list, st->st_dev, st->st_ino)] = list->id_count;
}

static void push_input(input_list *list, const char *path, input_member member)
{
    PT_GROW(list->paths, list->cap, list->count + 1);
    PT_GROW(list->members, list->member_cap, list->count + 1);
    list->paths[list->count] = pt_xstrdup(path);
    list->members[list->count++] = member;
}

/* Whether path is a regular file (st then describes it), and the name under which it is
 * already an input (NULL: it is not). */
static const char *seen_before(const input_list *list, const char *path, struct stat *st, bool *regular)
{
    *regular = stat(path, st) == 0 && S_ISREG(st->st_mode);
    return *regular ? known_file(list, st) : NULL;
}

static const char *add_input(input_list *list, const char *path)
{
    struct stat st;
    bool regular;
    const char *same = seen_before(list, path, &st, &regular);
    if (same)
        return same;
    push_input(list, path, (input_member){-1, 0, 0, NULL});
    if (regular)
        remember_file(list, &st, list->paths[list->count - 1]);
    return NULL;
}

static int by_member_name(const void *a, const void *b)
{
    return strcmp(((const pt_tar_member *)a)->name, ((const pt_tar_member *)b)->name);
}

/* A tar archive of summaries (a large round's summaries/summaries.tar): each .ptsum
 * member is an input, in name order as a folder's files are. One that cannot be listed
 * is a single input that fails saying why, so it is named with the unreadable inputs
 * and costs nothing else. Returns as add_input does. */
static const char *add_archive(input_list *list, const char *path)
{
    struct stat st;
    bool regular;
    const char *same = seen_before(list, path, &st, &regular);
    if (same)
        return same;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    PT_GROW(list->archives, list->archive_cap, list->archive_count + 1);
    PT_GROW(list->archive_fds, list->archive_fd_cap, list->archive_count + 1);
    list->archive_fds[list->archive_count] = fd;
    const char *archive = list->archives[list->archive_count++] = pt_xstrdup(path);
    if (regular)
        remember_file(list, &st, archive);
    pt_error err = {{0}};
    pt_tar_listing l = {0};
    if (fd < 0)
        pt_error_set(&err, "cannot open: %s", strerror(errno));
    if (fd < 0 || pt_tar_list(fd, PT_MAX_WORLD_SIZE, &l, &err) != 0) {
        push_input(list, path, (input_member){-1, 0, 0, pt_xstrdup(err.message)});
        return NULL;
    }
    if (l.count)
        qsort(l.members, l.count, sizeof *l.members, by_member_name);
    size_t other = 0;
    pt_buf member_path = PT_BUF_INIT;
    for (size_t i = 0; i < l.count; i++) {
        if (!pt_ends_with(l.members[i].name, ".ptsum")) {
            other++;
            continue;
        }
        pt_buf_reset(&member_path);
        pt_buf_printf(&member_path, "%s/%s", path, l.members[i].name);
        push_input(list, member_path.data, (input_member){fd, l.members[i].offset, l.members[i].size, NULL});
    }
    pt_buf_free(&member_path);
    if (other + l.skipped)
        pt_cli_print(stderr, "perftracker: note: %s: %zu of its members are not summaries (.ptsum files): not read\n",
                     path, other + l.skipped);
    if (l.damaged) { /* the members past the damage are lost: an input that failed, so the report says so */
        pt_buf why = PT_BUF_INIT;
        pt_buf_printf(&why, "damaged (%s): the members after it are not read, the %zu before it are", l.damage,
                      l.count);
        push_input(list, path, (input_member){-1, 0, 0, pt_buf_take(&why)});
    } else if (l.unfinished)
        pt_cli_print(stderr, "perftracker: note: %s has no end marker (its writer stopped, or is still writing): "
                             "its %zu whole members are read\n", path, l.count);
    pt_tar_listing_free(&l);
    return NULL;
}

static void input_list_free(input_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->members[i].error);
    pt_free_strings(list->paths, list->count);
    for (size_t i = 0; i < list->archive_count; i++)
        if (list->archive_fds[i] >= 0)
            close(list->archive_fds[i]);
    pt_free_strings(list->archives, list->archive_count);
    free(list->archive_fds);
    free(list->members);
    free(list->ids);
    free(list->id_slots);
    memset(list, 0, sizeof *list);
}

static bool is_archive(const char *name)
{
    return pt_ends_with(name, ".tar");
}

/* Which directory entries are worker files: traces and summaries by extension; the
 * report and the synthetic generator's answer key are not. */
static bool looks_like_worker_file(const char *name)
{
    if (name[0] == '.' || strcmp(name, "report.json") == 0 || strcmp(name, "expected.json") == 0)
        return false;
    static const char *const suffixes[] = {".json", ".json.gz", ".gz", ".ptsum", ".ptrace", ".zst", ".tar"};
    for (size_t i = 0; i < PT_ARRAY_LEN(suffixes); i++)
        if (pt_ends_with(name, suffixes[i]))
            return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int expand(input_list *list, const char *arg)
{
    struct stat st;
    if (stat(arg, &st) != 0) {
        pt_cli_print(stderr, "perftracker: %s: no such file or directory\n", arg);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        const char *same = is_archive(arg) ? add_archive(list, arg) : add_input(list, arg);
        if (same && strcmp(same, arg) == 0)
            pt_cli_print(stderr, "perftracker: note: %s is named twice: analysed once\n", arg);
        else if (same)
            pt_cli_print(stderr, "perftracker: note: %s is the same file as %s: analysed once\n", arg, same);
        return 0;
    }
    DIR *dir = opendir(arg);
    if (!dir) {
        pt_cli_print(stderr, "perftracker: %s: cannot open directory\n", arg);
        return -1;
    }
    size_t first = list->count, named = 0, repeated = 0, archive_count = 0, archive_cap = 0;
    char **archives = NULL; /* read after the files, which are sorted among themselves */
    struct dirent *de;
    pt_buf path = PT_BUF_INIT;
    while ((de = readdir(dir)) != NULL) {
        if (!looks_like_worker_file(de->d_name))
            continue;
        pt_buf_reset(&path);
        pt_buf_printf(&path, "%s/%s", arg, de->d_name);
        /* Whatever is named like a worker file is an input, even a dangling symlink, a
         * FIFO or a directory: reading it fails with a warning naming it, instead of the
         * worker vanishing silently. */
        named++;
        if (is_archive(de->d_name)) {
            PT_GROW(archives, archive_cap, archive_count + 1);
            archives[archive_count++] = pt_xstrdup(path.data);
        } else {
            repeated += add_input(list, path.data) != NULL;
        }
    }
    closedir(dir);
    pt_buf_free(&path);
    if (list->count > first) /* qsort wants an array even for none, and a folder of archives has no files */
        qsort(list->paths + first, list->count - first, sizeof *list->paths, cmp_str);
    if (archive_count)
        qsort(archives, archive_count, sizeof *archives, cmp_str);
    for (size_t i = 0; i < archive_count; i++)
        repeated += add_archive(list, archives[i]) != NULL;
    pt_free_strings(archives, archive_count);
    if (named == 0)
        pt_cli_print(stderr, "perftracker: note: %s holds no trace or summary files (names ending in .json, .json.gz, "
                             ".gz, .zst, .ptrace or .ptsum, or .tar archives of summaries)\n", arg);
    else if (repeated)
        pt_cli_print(stderr, "perftracker: note: %zu of the files in %s were already named: each is analysed once\n",
                     repeated, arg);
    return 0;
}

static void on_bytes(void *ctx, uint64_t done, uint64_t total)
{
    job_state *js = ctx;
    atomic_store(&js->bytes_done, done);
    atomic_store(&js->bytes_total, total);
}

typedef struct worker_file {
    const char *path;
    const input_member *member;
    const pt_read_options *opts;
    pt_worker_summary *summary;
    pt_error err;
} worker_file;

static void load_worker_file(void *arg)
{
    worker_file *f = arg;
    const input_member *m = f->member;
    if (m->error)
        pt_error_set(&f->err, "%s", m->error);
    else if (m->archive_fd >= 0)
        f->summary = pt_summary_read_at(m->archive_fd, m->offset, m->size, &f->err);
    else
        f->summary = pt_load_worker(f->path, f->opts, &f->err);
}

/* A file's share: the planned one, less what the summaries decoded so far keep (their
 * names and functions, which outlive their files): the memory the files are read in
 * shrinks as they are kept, so that files each within its share cannot add up past the
 * budget together (a folder of summaries of 100 000 new names each, ~45 MB kept apiece). */
static size_t file_share(const job_state *js)
{
    if (!js->memory_budget)
        return 0;
    size_t kept = pt_summary_kept_bytes();
    size_t left = js->usable > kept ? (js->usable - kept) / js->readers : 0;
    return PT_MAX(PT_MIN(js->memory_budget, left), (size_t)1); /* 1, not 0: 0 is no limit */
}

static void *summarize_worker(void *arg)
{
    job_state *js = arg;
    /* One big file gets every thread (read in spans); many files get one each. */
    bool single = js->inputs->count == 1;
    pt_read_options opts = {single ? on_bytes : NULL, js, 0, single ? js->threads : 1, 0};
    for (;;) {
        size_t i = atomic_fetch_add(&js->next, 1);
        if (i >= js->inputs->count)
            break;
        worker_file f = {js->inputs->paths[i], &js->inputs->members[i], &opts, NULL, {{0}}};
        size_t asked = 0;
        opts.memory_budget = file_share(js);
        pt_share_begin(opts.memory_budget); /* what decoding it allocates is counted (util/input.h) */
        if (!pt_run_guarded(load_worker_file, &f, &asked))
            pt_error_set(&f.err, "out of memory while reading it (an allocation of %zu MiB failed)", asked >> 20);
        pt_share_end();
        js->summaries[i] = f.summary;
        if (!js->summaries[i]) {
            js->errors[i] = pt_xstrdup(f.err.message[0] ? f.err.message : "unreadable");
            atomic_fetch_add(&js->failed, 1);
        }
        atomic_fetch_add(&js->done, 1);
    }
    return NULL;
}

static void show_progress(job_state *js, pt_progress *bar, bool single_file)
{
    char extra[64] = "";
    size_t failed = atomic_load(&js->failed);
    if (failed)
        snprintf(extra, sizeof extra, "%zu unreadable", failed);
    if (single_file)
        pt_progress_update(bar, atomic_load(&js->bytes_done) >> 20, extra);
    else
        pt_progress_update(bar, atomic_load(&js->done), extra);
}

/* The memory plan. A share below MIN_SHARE helps no trace (a 400 MB one needs ~160 MB),
 * so then fewer files are read at once; the reduce step and the report keep RESERVE. */
#define MIN_SHARE ((size_t)256 << 20)
#define RESERVE_DIVISOR 8

/* How many of `wanted` readers (files at once, or the spans of one file) the memory
 * affords; sets the budget of each file. */
static int plan_memory(job_state *js, int wanted)
{
    /* Allocations that fail anyway are still each file's own failure. */
    size_t headroom = pt_analysis_memory();
    if (headroom == SIZE_MAX)
        return wanted;
    size_t usable = headroom - headroom / RESERVE_DIVISOR;
    int affordable = (int)PT_MIN((size_t)wanted, PT_MAX(usable / MIN_SHARE, (size_t)1));
    bool single = js->inputs->count == 1; /* its spans split the one share themselves */
    js->readers = single ? 1 : (size_t)affordable;
    js->memory_budget = usable / js->readers;
    js->usable = usable;
    if (affordable < wanted && !single)
        pt_cli_print(stderr,
                     "perftracker: note: reading %d files at a time, not %d: %zu MiB of memory is left to this "
                     "process, and each file gets an equal share\n",
                     affordable, wanted, headroom >> 20);
    return affordable;
}

static void summarize_all(job_state *js, int threads)
{
    size_t n = js->inputs->count;
    if (n == 1) {
        js->threads = plan_memory(js, js->threads); /* the spans of the one file */
        threads = 1;
    } else {
        threads = plan_memory(js, (size_t)threads > n ? (int)n : threads);
    }
    /* A thread that cannot be created (no memory for its stack) is not waited for: the
     * files it would have read go to the others, or to this thread. */
    pthread_t *tids = pt_xmalloc((size_t)threads * sizeof *tids);
    int started = 0;
    while (started < threads && pthread_create(&tids[started], NULL, summarize_worker, js) == 0)
        started++;
    if (started == 0)
        summarize_worker(js);
    bool single_file = n == 1;
    pt_progress bar;
    bool show = n >= PROGRESS_MIN_FILES || single_file;
    if (show)
        pt_progress_start(&bar, single_file ? "MB" : "files", single_file ? 0 : n);
    while (atomic_load(&js->done) < n) {
        if (show) {
            if (single_file)
                bar.total = atomic_load(&js->bytes_total) >> 20;
            if (!single_file || bar.total >= 64) /* small single files finish before a bar helps */
                show_progress(js, &bar, single_file);
        }
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    if (show && (!single_file || bar.total >= 64))
        pt_progress_finish(&bar, single_file ? bar.total : n, NULL);
    free(tids);
}

/* Ranks nobody stated: the i-th input (in sorted order) gets rank i when it is free. */
static void assign_missing_ranks(job_state *js)
{
    size_t n = js->inputs->count;
    bool *used = pt_xcalloc(n + 1, sizeof *used);
    for (size_t i = 0; i < n; i++) {
        pt_worker_summary *s = js->summaries[i];
        if (s && s->rank >= 0 && (size_t)s->rank < n)
            used[s->rank] = true;
    }
    size_t next_free = 0;
    for (size_t i = 0; i < n; i++) {
        pt_worker_summary *s = js->summaries[i];
        if (!s || s->rank >= 0)
            continue;
        size_t r = i < n && !used[i] ? i : next_free;
        while (r < n && used[r])
            r++;
        if (r >= n)
            r = n; /* cannot happen: n files, n ranks */
        used[r] = true;
        next_free = r;
        s->rank = (int32_t)r;
        s->rank_source = PT_RANK_FROM_FILE_ORDER;
        pt_summary_add_warning(s, "rank %zu assigned from the file order (no rank in the trace or its name)", r);
    }
    free(used);
}

/* The command line (PT_EXIT_USAGE when it is wrong), then the inputs it names: a path
 * that does not exist, or folders without a single worker file, leave nothing to analyse
 * (PT_EXIT_FAILURE, said on stderr) -- the input is wrong, not the command line. */
static int parse_args(int argc, char **argv, pt_cli_job_options *o, input_list *inputs)
{
    char **operands = pt_xmalloc((size_t)(argc > 0 ? argc : 1) * sizeof *operands);
    int count = 0, rc = PT_EXIT_OK;
    for (int i = 1; i < argc && rc == PT_EXIT_OK; i++) {
        int taken = pt_cli_job_option(argc, argv, &i, o);
        if (taken < 0)
            rc = PT_EXIT_USAGE;
        else if (taken == 0)
            operands[count++] = argv[i];
    }
    if (rc == PT_EXIT_OK && count == 0) {
        usage(stderr);
        rc = PT_EXIT_USAGE;
    }
    for (int i = 0; i < count && rc == PT_EXIT_OK; i++)
        if (expand(inputs, operands[i]) != 0)
            rc = PT_EXIT_FAILURE;
    if (rc == PT_EXIT_OK && inputs->count == 0) {
        pt_cli_print(stderr, "perftracker: nothing to analyse: no trace or summary file among the paths given; no "
                             "report written\n");
        rc = PT_EXIT_FAILURE;
    }
    free(operands);
    return rc;
}

/* Whether OUT holds a report already (report.json or its page): replaced only with
 * --force, since an analysis into the folder of an earlier one would otherwise lose that
 * one without a word. A name there that is a symlink, or not this user's, is no report of
 * ours but someone's trap (a PerfDisplay pointing elsewhere, in a shared folder): refused
 * by name before anything is read, --force or not. Returns 0 (free), 1 (a report), -1
 * (a trap: *why says what). */
static int holds_report(const char *out_dir, char *why, size_t why_cap)
{
    static const char *const report_files[] = {"report.json", "PerfDisplay"};
    struct stat st;
    pt_buf path = PT_BUF_INIT;
    int found = 0;
    for (size_t i = 0; i < PT_ARRAY_LEN(report_files) && found >= 0; i++) {
        pt_buf_reset(&path);
        pt_buf_printf(&path, "%s/%s", out_dir, report_files[i]);
        if (lstat(path.data, &st) != 0)
            continue;
        if (S_ISLNK(st.st_mode) || st.st_uid != geteuid()) {
            snprintf(why, why_cap, "%s is %s: not a report of this user's, and never written through; nothing "
                     "was read", path.data, S_ISLNK(st.st_mode) ? "a symlink" : "another user's");
            found = -1;
        } else {
            found = 1;
        }
    }
    pt_buf_free(&path);
    return found;
}

#define FOLDERS_MADE_MAX 64

/* The folders on the way to out_dir that do not exist yet, deepest first: the check that
 * OUT is writable makes them, and they are removed again when no report is written, so a
 * failed analysis leaves no empty folder behind that reads as a report gone missing. */
static size_t folders_to_make(const char *out_dir, char **folders)
{
    size_t n = 0;
    struct stat st;
    char *path = pt_xstrdup(out_dir);
    while (n < FOLDERS_MADE_MAX && lstat(path, &st) != 0 && errno == ENOENT) {
        char *parent = pt_dirname(path);
        folders[n++] = path;
        path = parent;
    }
    free(path);
    return n;
}

/* Forgets the folders folders_to_make listed, removing each first when it was made for
 * nothing (remove), if it is still empty (rmdir refuses otherwise). */
static void release_folders(char **folders, size_t n, bool remove)
{
    for (size_t i = 0; i < n; i++) {
        if (remove)
            rmdir(folders[i]);
        free(folders[i]);
    }
}

/* Offline, ranks that were not given are information (one rank's traces of a big job is a
 * normal thing to analyse), not a failure: diagnose.c's warning for them prints as a note. */
static bool about_missing_ranks(const char *warning)
{
    return strstr(warning, " of the job has no trace:") || strstr(warning, " of the job have no trace:");
}

/* The report's warnings on stderr, grouped as the terminal report groups them (the same
 * text about several workers on one line, naming their ranks: report/report_text.c),
 * except what stderr said already (the unreadable inputs, as the report words them). */
typedef struct stderr_warnings {
    const pt_json *warnings;
    const pt_strtab *said;
} stderr_warnings;

static void print_warning(void *ctx, const char *line, const size_t *sources, size_t count)
{
    const stderr_warnings *w = ctx;
    size_t unsaid = 0;
    for (size_t i = 0; i < count; i++) {
        const pt_json *source = w->warnings->items[sources[i]];
        unsaid += pt_strtab_find(w->said, source->string, source->string_len) == UINT32_MAX;
    }
    if (unsaid == 0)
        return;
    bool note = about_missing_ranks(line);
    pt_cli_print(stderr, "perftracker: %s: %s%s\n", note ? "note" : "warning", line,
                 note ? " (not given to this analysis)" : "");
}

/* What analyze prints on stdout: the report without its warnings, which stderr has. */
static void render_readable(const pt_json *report, pt_buf *out)
{
    pt_report_text_options options = {false, false};
    pt_report_render_text(report, &options, out);
}

static void render_verbose(const pt_json *report, pt_buf *out)
{
    pt_report_text_options options = {false, true};
    pt_report_render_text(report, &options, out);
}

int cmd_analyze(int argc, char **argv)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pt_cli_job_options o = {"analyze", usage, DEFAULT_OUT, cpus > 0 ? (int)cpus : 1, false, true, false, false};
    input_list inputs = {0};
    int parsed = parse_args(argc, argv, &o, &inputs);
    if (parsed != PT_EXIT_OK) {
        input_list_free(&inputs);
        return parsed;
    }
    const char *out_dir = o.out_dir;
    int threads = o.threads;
    void (*render)(const pt_json *, pt_buf *) = o.quiet ? pt_report_render_verdict
                                                : o.verbose ? render_verbose
                                                            : render_readable;
    char trap[4096 + 128];
    int held = holds_report(out_dir, trap, sizeof trap); /* before hours of reading, not after */
    if (held < 0 || (held > 0 && !o.force)) {
        if (held < 0)
            pt_cli_print(stderr, "perftracker: %s\n", trap);
        else
            pt_cli_print(stderr, "perftracker: %s already holds a report (report.json, PerfDisplay/): give another -o, "
                                 "or --force to replace it; nothing was read\n", out_dir);
        input_list_free(&inputs);
        return PT_EXIT_FAILURE;
    }
    char *made[FOLDERS_MADE_MAX];
    size_t made_count = folders_to_make(out_dir, made);
    bool written = false;
    pt_error out_err = {{0}};
    if (pt_check_writable(out_dir, true, &out_err) != 0) {
        pt_cli_print(stderr, "perftracker: %s\n", out_err.message);
        release_folders(made, made_count, true);
        input_list_free(&inputs);
        return PT_EXIT_FAILURE;
    }

    size_t n = inputs.count;
    job_state js = {0};
    js.inputs = &inputs;
    js.summaries = pt_xcalloc(n, sizeof *js.summaries);
    js.errors = pt_xcalloc(n, sizeof *js.errors);
    js.threads = threads;
    pt_summary_share_names(); /* every worker names the same functions: one copy of each */
    pt_summary_expect_ranks(n); /* one input per rank, most often */
    summarize_all(&js, threads);
    assign_missing_ranks(&js);

    /* Split into readable workers and failures; failures keep their name and the rank
     * their file name suggests, so the report can list them. */
    pt_worker_summary **ok = pt_xmalloc(n * sizeof *ok);
    int32_t *failed_ranks = pt_xmalloc(n * sizeof *failed_ranks);
    const char **failed_names = pt_xmalloc(n * sizeof *failed_names);
    char **warnings = pt_xmalloc(n * sizeof *warnings);
    size_t nok = 0, nfailed = 0, nwarnings = 0;
    for (size_t i = 0; i < n; i++) {
        if (js.summaries[i]) {
            ok[nok++] = js.summaries[i];
            continue;
        }
        pt_buf w = PT_BUF_INIT;
        pt_buf_printf(&w, "%s: %s (skipped)", inputs.paths[i], js.errors[i]);
        warnings[nwarnings++] = pt_buf_take(&w);
        pt_error why;
        snprintf(why.message, sizeof why.message, "%s", js.errors[i]);
        if (pt_trace_error_is_foreign_json(&why)) { /* a label.json beside the traces: not a worker */
            pt_cli_print(stderr, "perftracker: note: %s: %s: skipped, not a worker\n", inputs.paths[i], js.errors[i]);
            continue;
        }
        pt_file_name_facts facts;
        pt_parse_worker_file_name(pt_basename(inputs.paths[i]), &facts);
        failed_ranks[nfailed] = facts.rank;
        failed_names[nfailed++] = pt_basename(inputs.paths[i]);
        pt_cli_print(stderr, "perftracker: %s: %s (skipped)\n", inputs.paths[i], js.errors[i]);
    }
    pt_strtab printed; /* warnings already on stderr, as the report words them */
    pt_strtab_init(&printed);
    for (size_t i = 0; i < nwarnings; i++)
        pt_strtab_intern(&printed, warnings[i], strlen(warnings[i]));

    pt_job_input job = {ok, nok, -1, (const char *const *)warnings, nwarnings, failed_ranks, failed_names, nfailed,
                        NULL};
    job.write_part = pt_report_part_writer; /* the parts beside report.json */
    job.part_ctx = (void *)out_dir;
    job.threads = threads; /* the reduce writes the bounded report's parts on as many */
    pt_json *report = pt_diagnose(&job);
    /* The report holds copies of all it needs: the summaries go before its text is made. */
    for (size_t i = 0; i < n; i++) {
        pt_summary_free(js.summaries[i]);
        js.summaries[i] = NULL;
    }
    /* Every worker's warnings and the cross-worker ones (duplicate or missing ranks,
     * disagreeing world sizes, clocks), which exist only now: stderr names every problem,
     * the same one on many workers once. */
    stderr_warnings said = {pt_json_get(report, "warnings"), &printed};
    pt_report_each_warning(report, print_warning, &said);
    pt_strtab_free(&printed);
    /* Counted from the report: pt_diagnose also refuses workers whose summary is invalid. */
    const pt_json *job_facts = pt_json_get(report, "job");
    bool some_failed = pt_json_get_number(job_facts, "workers_failed", 0) > 0;
    int rc = PT_EXIT_OK;
    if (pt_json_get_number(job_facts, "workers_analyzed", 0) == 0) {
        /* A report of nobody would only restate stderr, with a verdict about no job. */
        if (n == 1)
            pt_cli_print(stderr, "perftracker: nothing could be analysed: the input is not a readable trace or "
                                 "summary; no report written\n");
        else
            pt_cli_print(stderr, "perftracker: nothing could be analysed: none of the %zu inputs is a readable trace "
                                 "or summary (each is named above); no report written\n", n);
        rc = PT_EXIT_FAILURE;
    } else if (pt_cli_write_document(out_dir, "report.json", report, render) != 0) {
        rc = PT_EXIT_FAILURE;
    } else {
        written = true;
        const char *verdict = pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", "");
        bool mixed = strcmp(pt_json_get_string(pt_json_get(report, "diagnosis"), "inputs", ""), "mixed") == 0;
        if (rc == PT_EXIT_OK && (some_failed || mixed || strcmp(verdict, "hang") == 0))
            rc = PT_EXIT_PARTIAL;
        if (strcmp(verdict, "hang") == 0)
            pt_cli_print(stderr, "perftracker: the verdict is a hang (exit status 3)\n");
        if (mixed)
            pt_cli_print(stderr, "perftracker: the inputs are not one job, so nothing is diagnosed (exit status 3)\n");
        pt_cli_print(stderr, "perftracker: report written to %s/report.json; open %s/PerfDisplay (python3 app.py)\n",
                out_dir, out_dir);
    }
    pt_json_free(report);
    release_folders(made, made_count, !written);
    for (size_t i = 0; i < n; i++) {
        pt_summary_free(js.summaries[i]);
        free(js.errors[i]);
    }
    pt_free_strings(warnings, nwarnings);
    free(failed_ranks);
    free(failed_names);
    free(ok);
    free(js.summaries);
    free(js.errors);
    input_list_free(&inputs);
    return rc;
}

/* ------------------------------------------------------------ for other commands */

bool pt_cli_is_worker_file(const char *name)
{
    return looks_like_worker_file(name);
}

int pt_cli_write_document(const char *out_dir, const char *file_name, const pt_json *doc,
                          void (*render)(const pt_json *doc, pt_buf *out))
{
    pt_error err = {{0}};
    if (pt_report_write_document(out_dir, file_name, doc, &err) != 0) {
        pt_cli_print(stderr, "perftracker: %s\n", err.message);
        return -1;
    }
    pt_buf text = PT_BUF_INIT;
    render(doc, &text);
    pt_cli_print(stdout, "%s", pt_buf_cstr(&text));
    pt_buf_free(&text);
    return 0;
}

int pt_cli_read_job(const char *const *paths, size_t path_count, int threads, pt_cli_job *job)
{
    memset(job, 0, sizeof *job);
    input_list inputs = {0};
    int rc = 0;
    for (size_t i = 0; i < path_count && rc == 0; i++)
        rc = expand(&inputs, paths[i]);
    size_t n = rc == 0 ? inputs.count : 0;
    job_state js = {0};
    js.inputs = &inputs;
    js.summaries = pt_xcalloc(n, sizeof *js.summaries);
    js.errors = pt_xcalloc(n, sizeof *js.errors);
    js.threads = threads;
    if (n) {
        summarize_all(&js, threads);
        assign_missing_ranks(&js);
    }
    job->workers = pt_xmalloc((n ? n : 1) * sizeof *job->workers);
    job->failures = pt_xmalloc((n ? n : 1) * sizeof *job->failures);
    for (size_t i = 0; i < n; i++) {
        if (js.summaries[i]) {
            job->workers[job->worker_count++] = js.summaries[i];
            continue;
        }
        pt_error err;
        snprintf(err.message, sizeof err.message, "%s", js.errors[i]);
        if (pt_trace_error_is_foreign_json(&err)) {
            pt_cli_print(stderr, "perftracker: note: %s: %s: skipped, not a worker\n", inputs.paths[i], js.errors[i]);
        } else {
            pt_buf why = PT_BUF_INIT;
            pt_buf_printf(&why, "%s: %s", inputs.paths[i], js.errors[i]);
            job->failures[job->failure_count++] = pt_buf_take(&why);
        }
        free(js.errors[i]);
    }
    input_list_free(&inputs);
    free(js.summaries);
    free(js.errors);
    return rc;
}

void pt_cli_job_free(pt_cli_job *job)
{
    for (size_t i = 0; i < job->worker_count; i++)
        pt_summary_free(job->workers[i]);
    pt_free_strings(job->failures, job->failure_count);
    free(job->workers);
    memset(job, 0, sizeof *job);
}
