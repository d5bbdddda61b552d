/* round.c -- gather one round's outcomes and turn them into the report.
 *
 * Memory is what the diagnosis needs anyway: the decoded summaries (a few hundred KB
 * each) plus one small record per failed worker, and one byte per rank saying whether it
 * has an outcome yet (so checking a rank is O(1), whatever the world size). Each summary's received bytes are
 * written to disk unchanged before anything else happens to them, so
 * `perftracker analyze <round_dir>/summaries` reproduces the report exactly. This runs in
 * the CLI, or in rank 0's coordinator thread for automatic rounds; it uses the analysis
 * side's allocators (which exit on exhaustion), a documented trade-off for the latter. */
#define _POSIX_C_SOURCE 200809L
#include "control/round.h"
#include "control/job_env.h"
#include "control/jobfile.h"
#include "diagnose/diagnose.h"
#include "report/report.h"
#include "summarize/hang_state.h"
#include "summarize/summary.h"
#include "summarize/summary_io.h"
#include "util/input.h"
#include "util/outdir.h"
#include "util/tar.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct outcome {
    int32_t rank;
    char *name;              /* the worker's file name, as the report names workers */
    pt_worker_summary *summary; /* decoded, or a hang's minimal one; NULL for a failure */
    char *raw_trace_path;
    char *failure;           /* "kind: text" of a failure, for saying why nothing was profiled */
    int kind;                /* pt_ctl_failure, 0 for a summary */
    bool profiled;           /* a summary came and was checked (kept or not: pt_round_drop_summaries) */
    bool lost;               /* a failure: lost mid-round (died, or its heartbeats stopped) ... */
    int64_t lost_step;       /* ... after this step (-1: not known) ... */
    char *reason;            /* ... as the round saw it */
} outcome;

struct pt_round {
    char *dir;
    int32_t world_size;
    uint8_t *settled;        /* [world_size]: the rank has an outcome (NULL: world unknown) */
    outcome *outcomes;
    size_t count, cap;
    char **warnings;
    size_t warning_count, warning_cap;
    size_t summaries, failures;
    bool in_memory;          /* pt_round_new_in_memory: nothing is written */
    int threads;             /* pt_round_set_threads */
    bool drop_summaries;     /* pt_round_drop_summaries */
    pt_out_dir summaries_dir; /* <dir>/summaries, checked and opened at the first summary, kept open:
                                 walking the path again per summary cost ~1 ms each at 10k workers */
    int archive_fd;           /* <dir>/summaries/summaries.tar in a large round (-1: not open) */
    uint64_t archive_end;     /* where its next member goes */
    size_t memory;            /* what the analysis may use, less the report's eighth (0: no limit) */
};

int pt_round_make_dir(const char *output_dir, char *dst, size_t cap, pt_error *err)
{
    char absolute[PT_CTL_MAX_PATH], cwd[PT_CTL_MAX_PATH];
    int n = output_dir[0] == '/' ? snprintf(absolute, sizeof absolute, "%s", output_dir)
            : getcwd(cwd, sizeof cwd) ? snprintf(absolute, sizeof absolute, "%s/%s", cwd, output_dir)
                                      : -1;
    if (n < 0 || (size_t)n + 32 >= sizeof absolute) { /* room for the timestamp and raw_trace/ */
        pt_error_set(err, "cannot use %s as the output directory (too long, or no working directory)", output_dir);
        return -1;
    }
    pt_out_dir top, round_dir;
    if (pt_out_dir_open(&top, absolute, true, err) != 0)
        return -1;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
    for (int attempt = 1; attempt < 100; attempt++) {
        char name[48];
        if (attempt == 1)
            snprintf(name, sizeof name, "%s", stamp);
        else
            snprintf(name, sizeof name, "%s_%d", stamp, attempt);
        snprintf(dst, cap, "%s/%s", absolute, name);
        if (pt_out_dir_make_new(&round_dir, &top, name, err) == 0) { /* made, reopened and checked */
            pt_out_dir_close(&round_dir);
            pt_out_dir_close(&top);
            return 0;
        }
        if (errno != EEXIST) {
            pt_out_dir_close(&top);
            return -1; /* err says why */
        }
    }
    pt_out_dir_close(&top);
    pt_error_set(err, "cannot create a round directory in %s: %s", absolute, strerror(EEXIST));
    return -1;
}

/* Usable: it exists (or can be made), this user may create a round folder in it, and no
 * other user can redirect what goes there (util/outdir.h checks every folder on the way). */
static bool writable_dir(const char *dir, pt_error *err)
{
    struct stat st;
    if (stat(dir, &st) == 0 && st.st_uid != geteuid() && access(dir, W_OK | X_OK) != 0) {
        pt_error_set(err, "%s belongs to another user (uid %u) and this one (uid %u) cannot write there", dir,
                     (unsigned)st.st_uid, (unsigned)geteuid());
        return false;
    }
    return pt_check_writable(dir, true, err) == 0;
}

void pt_round_default_output_dir(char *dst, size_t cap, char *note, size_t note_cap)
{
    pt_error why;
    note[0] = '\0';
    snprintf(dst, cap, "%s", PT_DEFAULT_OUTPUT_DIR);
    if (writable_dir(PT_DEFAULT_OUTPUT_DIR, &why))
        return;
    /* The shared folder is a convenience, not worth failing over: this user's runtime
     * directory, chosen as the job files' is (jobfile.h: /tmp/perftracker-<uid>, or a
     * private fallback when another user squatted that name), is checked to be private,
     * so its output/ keeps the reports out of other users' reach as well. */
    char own[PT_RUNTIME_PATH_MAX];
    pt_runtime_dir(own, sizeof own);
    pt_error ignored;
    if (pt_runtime_dir_ensure(own, &ignored) != 0)
        return; /* leave the shared folder: creating the round there names the problem */
    snprintf(dst, cap, "%s/output", own);
    snprintf(note, note_cap, "%.250s; writing to %.200s instead", why.message, dst);
}

pt_round *pt_round_new(const char *round_dir, int32_t world_size)
{
    pt_round *r = pt_xcalloc(1, sizeof *r);
    r->dir = pt_xstrdup(round_dir);
    r->world_size = world_size;
    r->summaries_dir = (pt_out_dir)PT_OUT_DIR_INIT;
    r->archive_fd = -1;
    r->threads = 1;
    size_t usable = pt_analysis_memory();
    r->memory = usable == SIZE_MAX ? 0 : usable - usable / 8;
    if (world_size > 0 && world_size <= PT_MAX_WORLD_SIZE) { /* 1 MiB at most */
        r->settled = pt_xcalloc((size_t)world_size, 1);
        pt_summary_expect_ranks((size_t)world_size); /* they arrive in no order; the analysis reads by rank */
    }
    return r;
}

pt_round *pt_round_new_in_memory(const char *round_dir, int32_t world_size)
{
    pt_round *r = pt_round_new(round_dir, world_size);
    r->in_memory = true;
    return r;
}

void pt_round_drop_summaries(pt_round *r)
{
    r->drop_summaries = true;
}

void pt_round_add_warning(pt_round *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = pt_xvformat(1024, fmt, ap);
    va_end(ap);
    PT_GROW(r->warnings, r->warning_cap, r->warning_count + 1);
    r->warnings[r->warning_count++] = line;
}

/* The collector's name for a worker: "<host>_<local_rank>_<pid>" + suffix. */
static void worker_name(const pt_ctl_worker *w, const char *suffix, char *dst, size_t cap)
{
    char host[PT_HOST_MAX];
    pt_ctl_copy_str(host, sizeof host, w->host);
    pt_worker_file_name(dst, cap, host, w->local_rank, w->pid, suffix);
}

static outcome *add_outcome(pt_round *r, const pt_ctl_worker *w)
{
    PT_GROW(r->outcomes, r->cap, r->count + 1);
    outcome *o = &r->outcomes[r->count++];
    memset(o, 0, sizeof *o);
    o->rank = w->rank;
    if (r->settled && w->rank >= 0 && w->rank < r->world_size)
        r->settled[w->rank] = 1;
    char name[PT_HOST_MAX + 64];
    if (w->host.len == 0 && w->pid < 0) /* never heard from: nothing but its rank is known */
        snprintf(name, sizeof name, "rank%d", (int)w->rank);
    else
        worker_name(w, ".ptrace", name, sizeof name);
    o->name = pt_xstrdup(name);
    return o;
}

/* O(1) with a known world, so naming every unheard rank of a big job stays linear. */
bool pt_round_has_rank(const pt_round *r, int32_t rank)
{
    if (r->settled)
        return rank >= 0 && rank < r->world_size && r->settled[rank];
    for (size_t i = 0; i < r->count; i++)
        if (r->outcomes[i].rank == rank)
            return true;
    return false;
}

/* Above PT_ROUND_ARCHIVE_ABOVE workers a round's summaries go into one archive: creating
 * 100,000 files (an inode, a directory entry and a partly filled page each) was most of
 * the collecting CLI's kernel time at 100k workers. */
static bool archived(const pt_round *r)
{
    return r->world_size > PT_ROUND_ARCHIVE_ABOVE;
}

/* Appends one summary to the round's archive, created at the first. false when it could
 * not go there (the caller then writes it as a file of its own, so it is still kept). */
static bool archive_summary(pt_round *r, const char *name, const void *blob, size_t len, pt_error *err)
{
    if (r->archive_fd < 0) {
        r->archive_fd = pt_out_dir_create_new(&r->summaries_dir, PT_ROUND_SUMMARY_ARCHIVE, 0644, err);
        r->archive_end = 0;
        if (r->archive_fd < 0)
            return false;
    }
    return pt_tar_append(r->archive_fd, &r->archive_end, name, blob, len, 0644, (int64_t)time(NULL), err) == 0;
}

/* The archive's end marker once the last summary is in (tar(1) then lists it without a
 * warning); an archive without one still reads up to its last whole member. */
static void end_archive(pt_round *r)
{
    if (r->archive_fd < 0)
        return;
    pt_error err;
    if (pt_tar_finish(r->archive_fd, r->archive_end, &err) != 0)
        pt_round_add_warning(r, "%s/summaries/%s: %s", r->dir, PT_ROUND_SUMMARY_ARCHIVE, err.message);
    close(r->archive_fd);
    r->archive_fd = -1;
}

/* The bytes as received, before anything can go wrong with them; written like every other
 * output file (util/outdir.h), so a shared output folder cannot redirect them. */
static void store_summary_file(pt_round *r, const pt_ctl_worker *w, const void *blob, size_t len)
{
    pt_out_dir round_dir;
    pt_error err;
    if (r->in_memory)
        return;
    int rc = 0;
    if (r->summaries_dir.fd < 0) {
        if (pt_out_dir_open(&round_dir, r->dir, false, &err) != 0) {
            pt_round_add_warning(r, "%s", err.message);
            return;
        }
        rc = pt_out_dir_sub(&r->summaries_dir, &round_dir, "summaries", true, &err);
        pt_out_dir_close(&round_dir);
    }
    if (rc == 0) {
        char name[PT_HOST_MAX + 64];
        worker_name(w, ".ptsum", name, sizeof name);
        if (archived(r) && archive_summary(r, name, blob, len, &err))
            return;
        const void *parts[] = {blob};
        rc = pt_out_dir_write(&r->summaries_dir, name, parts, &len, 1, 0644, &err);
    }
    if (rc != 0)
        pt_round_add_warning(r, "cannot store a summary: %s", err.message);
}

/* A collective that failed as the window ended is in the collector's own record (the
 * snapshot its agent sent as the error came), not in the trace, which saw a call but not
 * its error: that record replaces the trace's collectives and threads. One that does not
 * parse leaves the trace's, with a warning. */
static void adopt_final_collectives(pt_worker_summary *s, const pt_round_snapshot *snap)
{
    pt_worker_summary *record = pt_summary_new();
    record->rank = s->rank;
    record->world_size = s->world_size;
    pt_error err;
    if (pt_hang_state_parse(record, snap->threads, snap->collectives, &err) != 0) {
        pt_summary_add_warning(s, "its collectives as its window ended were not read: %s", err.message);
    } else {
        if (s->shared_function_names) /* s never frees its calls' names: they must be the pool's */
            pt_summary_pool_call_names(record);
        pt_summary_free_hang_state(s);
        s->threads = record->threads, s->thread_count = record->thread_count;
        s->groups = record->groups, s->group_count = record->group_count;
        record->threads = NULL, record->thread_count = 0;
        record->groups = NULL, record->group_count = 0;
    }
    pt_summary_free(record);
}

/* What the coordinator saw of the worker's connection goes into its report entry beside
 * what the worker says of itself. */
static void note_connection(pt_worker_summary *s, const pt_ctl_worker *w)
{
    if (w->seen_from.len == 0)
        return;
    char seen[PT_CTL_MAX_SEEN_FROM + 1];
    pt_ctl_copy_str(seen, sizeof seen, w->seen_from);
    free(s->seen_from);
    s->seen_from = pt_xstrdup(seen);
    s->seen_uid = w->uid;
    s->seen_pid = w->conn_pid;
}

/* What decoding one summary may allocate (util/input.h): the round's memory, as analyze
 * plans it, less what the summaries kept so far hold (their names and functions), so a
 * worker's summary of a million names is refused by name, not paid for in gigabytes. */
static size_t decode_share(const pt_round *r)
{
    if (!r->memory)
        return 0;
    size_t kept = pt_summary_kept_bytes();
    return PT_MAX(r->memory > kept ? r->memory - kept : 0, (size_t)1); /* 1, not 0: 0 is no limit */
}

int pt_round_add_summary(pt_round *r, const pt_ctl_worker *w, const char *raw_trace_path, const void *blob,
                         size_t len, const pt_round_snapshot *snap, pt_error *err)
{
    char name[PT_HOST_MAX + 64];
    worker_name(w, ".ptrace", name, sizeof name);
    store_summary_file(r, w, blob, len);
    pt_share_begin(decode_share(r));
    pt_worker_summary *s = pt_summary_decode(blob, len, err);
    pt_share_end();
    if (!s) {
        pt_round_add_failure(r, w, PT_FAIL_BAD_SUMMARY, -1, 0, err->message, NULL);
        return -1;
    }
    note_connection(s, w);
    if (s->rank != w->rank) {
        if (s->rank >= 0)
            pt_round_add_warning(r, "%s: its summary says rank %d, its agent rank %d; the agent's is used",
                                 s->name ? s->name : name, s->rank, w->rank);
        s->rank = w->rank;
        s->rank_source = PT_RANK_FROM_TRACE;
    }
    outcome *o = add_outcome(r, w);
    o->profiled = true;
    o->raw_trace_path = raw_trace_path && *raw_trace_path ? pt_xstrdup(raw_trace_path) : NULL;
    r->summaries++;
    int steps = (int)PT_MIN(s->step_count, (size_t)INT32_MAX);
    if (r->drop_summaries) { /* checked and counted: nothing more is read of it */
        pt_summary_free(s);
        return steps;
    }
    if (snap && snap->collectives && *snap->collectives)
        adopt_final_collectives(s, snap);
    o->summary = s;
    return steps;
}

/* A worker a hang report reached has no profile, only where it was: a summary with
 * hang_step set, its stacks and its collectives, which the diagnosis matches across the
 * workers. A snapshot that does not parse is dropped with a warning naming why; the
 * stack it came with is kept. */
static pt_worker_summary *snapshot_summary(const outcome *o, const pt_ctl_worker *w, int64_t steps_done,
                                           const pt_round_snapshot *snap)
{
    pt_worker_summary *s = pt_summary_new();
    char host[PT_HOST_MAX];
    pt_ctl_copy_str(host, sizeof host, w->host);
    s->rank = w->rank;
    s->rank_source = PT_RANK_FROM_TRACE;
    s->local_rank = w->local_rank;
    s->world_size = w->world_size;
    s->pid = w->pid;
    s->name = pt_xstrdup(o->name);
    s->host = pt_xstrdup(host);
    s->producer = pt_xstrdup("perftracker");
    note_connection(s, w);
    s->hang_step = steps_done >= 0 ? steps_done : 0;
    if (!snap)
        return s;
    s->hang_stack = snap->stack && *snap->stack ? pt_xstrdup(snap->stack) : NULL;
    s->hang_idle_ns = snap->since_step_ns >= 0 ? snap->since_step_ns : -1;
    s->hang_step_ns = snap->mean_step_ns > 0 ? snap->mean_step_ns : -1;
    pt_error err;
    if (pt_hang_state_parse(s, snap->threads, snap->collectives, &err) != 0)
        pt_summary_add_warning(s, "its hang snapshot was not read: %s", err.message);
    return s;
}

void pt_round_add_failure(pt_round *r, const pt_ctl_worker *w, int kind, int64_t steps_done, int64_t stalled_ns,
                          const char *text, const pt_round_snapshot *snap)
{
    outcome *o = add_outcome(r, w);
    o->kind = kind;
    r->failures++;
    if (kind == PT_FAIL_HANG || kind == PT_FAIL_NOT_PROFILED) {
        o->summary = snapshot_summary(o, w, steps_done, snap);
        if (kind == PT_FAIL_NOT_PROFILED) { /* an older coordinator's "alive, not profiled" */
            o->summary->hang_step = -1;
            pt_summary_add_warning(o->summary, "still stepping when the hang was reported; not profiled");
            r->failures--;
        } else if (stalled_ns > 0) {
            pt_summary_add_warning(o->summary, "stopped stepping in step %lld (no step for %.1f s); it has no "
                                   "profile, only where it was", (long long)o->summary->hang_step,
                                   (double)stalled_ns / 1e9);
        } else { /* answered a hang report before its own stall threshold: not a failure */
            r->failures--;
            pt_summary_add_warning(o->summary, "a hang report took where it was in step %lld (%.1f s after its "
                                   "last step); it has no profile", (long long)o->summary->hang_step,
                                   snap && snap->since_step_ns > 0 ? (double)snap->since_step_ns / 1e9 : 0.0);
        }
        return;
    }
    char where[64] = "";
    if (steps_done >= 0)
        snprintf(where, sizeof where, " (at step %lld)", (long long)steps_done);
    pt_round_add_warning(r, "rank %d (%s): %s%s%s%s", w->rank, o->name, pt_ctl_failure_name(kind), where,
                         text && *text ? ": " : "", text ? text : "");
    pt_buf failure = PT_BUF_INIT;
    pt_buf_printf(&failure, "%s%s%s", pt_ctl_failure_name(kind), text && *text ? ": " : "", text ? text : "");
    o->failure = pt_buf_take(&failure);
    /* A rank lost mid-round leads the diagnosis (pt_job_input.failed_lost). */
    o->lost = kind == PT_FAIL_DIED || kind == PT_FAIL_UNRESPONSIVE;
    o->lost_step = steps_done;
    if (o->lost) {
        pt_buf reason = PT_BUF_INIT;
        if (text && *text)
            pt_buf_puts(&reason, text);
        else
            pt_buf_printf(&reason, "%s%s", pt_ctl_failure_name(kind), where);
        o->reason = pt_buf_take(&reason);
    }
    /* It died or left right after its collectives said where it was (one failed): that
     * state is evidence too. */
    if (snap && snap->collectives && *snap->collectives) {
        o->summary = snapshot_summary(o, w, steps_done, snap);
        pt_summary_add_warning(o->summary, "%s%s%s%s; this is where it was before", pt_ctl_failure_name(kind), where,
                               text && *text ? ": " : "", text ? text : "");
    }
}

bool pt_round_rank_open(const pt_round *r, int32_t rank)
{
    return rank >= 0 && (r->world_size <= 0 || rank < r->world_size) && !pt_round_has_rank(r, rank);
}

int32_t pt_round_world_size(const pt_round *r)
{
    return r->world_size;
}

size_t pt_round_summary_count(const pt_round *r)
{
    return r->summaries;
}

size_t pt_round_failure_count(const pt_round *r)
{
    return r->failures;
}

const char *pt_round_dir(const pt_round *r)
{
    return r->dir;
}

/* workers[].raw_trace: relative to the round directory when the trace is inside it. */
static void add_raw_trace_paths(const pt_round *r, pt_json *report)
{
    pt_json *workers = pt_json_get(report, "workers");
    size_t dir_len = strlen(r->dir);
    for (size_t i = 0; i < r->count; i++) {
        const outcome *o = &r->outcomes[i];
        if (!o->raw_trace_path || !workers)
            continue;
        const char *shown = o->raw_trace_path;
        if (strncmp(shown, r->dir, dir_len) == 0 && shown[dir_len] == '/')
            shown += dir_len + 1;
        for (size_t k = 0; k < workers->count; k++)
            if (pt_json_get_number(workers->items[k], "rank", -2) == o->rank)
                pt_json_set(workers->items[k], "raw_trace", pt_json_string(shown));
    }
}

/* A worker that died, hung, left or was never heard from is a finding about the job even
 * when nobody was profiled; a collector that refused or failed its window is not. */
static bool lost(int kind)
{
    return kind == PT_FAIL_NEVER_CONNECTED || kind == PT_FAIL_DIED || kind == PT_FAIL_EXITED || kind == PT_FAIL_HANG ||
           kind == PT_FAIL_UNRESPONSIVE || kind == PT_FAIL_COORDINATOR_LOST;
}

static void explain_unprofiled(const pt_round *r, pt_buf *out);

bool pt_round_nothing_to_diagnose(const pt_round *r, pt_error *why)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->outcomes[i].profiled || r->outcomes[i].summary || lost(r->outcomes[i].kind))
            return false;
    if (r->world_size > 0 && r->count < (size_t)r->world_size)
        return false; /* an unheard rank is missing: lost */
    if (why) {
        pt_buf text = PT_BUF_INIT;
        explain_unprofiled(r, &text);
        pt_error_set(why, "the round failed: no worker was profiled, so there is no report (it would diagnose "
                     "nothing): %s", text.len ? pt_buf_cstr(&text) : "no worker answered");
        pt_buf_free(&text);
    }
    return true;
}

#define REASONS_LISTED 3
#define RANKS_LISTED 8

/* "4 of 4 workers: collector error: the collector could not arm ... (ranks 0, 1, 2, 3)":
 * the failures grouped by what they say, the most common first. */
static int compare_ranks(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void explain_unprofiled(const pt_round *r, pt_buf *out)
{
    bool *told = pt_xcalloc(r->count ? r->count : 1, sizeof *told);
    for (int listed = 0; listed < REASONS_LISTED; listed++) {
        size_t best = r->count, best_n = 0;
        for (size_t i = 0; i < r->count; i++) {
            if (told[i] || !r->outcomes[i].failure)
                continue;
            size_t n = 0;
            for (size_t k = i; k < r->count; k++)
                n += !told[k] && r->outcomes[k].failure && strcmp(r->outcomes[k].failure, r->outcomes[i].failure) == 0;
            if (n > best_n)
                best = i, best_n = n;
        }
        if (best == r->count)
            break;
        pt_buf_printf(out, "%s%zu of %d workers: %s (rank%s", listed ? "; " : "", best_n, (int)r->world_size,
                      r->outcomes[best].failure, best_n == 1 ? "" : "s");
        int32_t *ranks = pt_xmalloc(best_n * sizeof *ranks);
        size_t n = 0;
        for (size_t k = best; k < r->count; k++) {
            if (told[k] || !r->outcomes[k].failure || strcmp(r->outcomes[k].failure, r->outcomes[best].failure) != 0)
                continue;
            ranks[n++] = r->outcomes[k].rank;
            told[k] = true;
        }
        qsort(ranks, n, sizeof *ranks, compare_ranks);
        for (size_t k = 0; k < n && k < RANKS_LISTED; k++)
            pt_buf_printf(out, "%s %d", k ? "," : "", (int)ranks[k]);
        pt_buf_puts(out, n > RANKS_LISTED ? ", ...)" : ")");
        free(ranks);
    }
    size_t missing = 0;
    for (size_t i = 0; i < r->count; i++)
        missing += !told[i] && r->outcomes[i].failure;
    if (missing)
        pt_buf_printf(out, "; %zu more workers for other reasons (the log above names each)", missing);
    free(told);
}

void pt_round_discard(pt_round *r, const char *round_dir)
{
    pt_out_dir dir = PT_OUT_DIR_INIT, summaries = PT_OUT_DIR_INIT;
    pt_error err;
    if (r && pt_out_dir_open(&dir, round_dir, false, &err) == 0 &&
        pt_out_dir_sub(&summaries, &dir, "summaries", false, &err) == 0) {
        for (size_t i = 0; i < r->count; i++) {
            const char *name = r->outcomes[i].name;
            size_t stem = strlen(name) - (pt_ends_with(name, ".ptrace") ? strlen(".ptrace") : 0);
            char file[PT_HOST_MAX + 80];
            snprintf(file, sizeof file, "%.*s.ptsum", (int)PT_MIN(stem, (size_t)PT_HOST_MAX + 64), name);
            pt_out_dir_remove(&summaries, file);
        }
        end_archive(r);
        pt_out_dir_remove(&summaries, PT_ROUND_SUMMARY_ARCHIVE);
        pt_out_dir_close(&summaries);
    }
    pt_out_dir_close(&dir);
    char sub[PT_CTL_MAX_PATH + 32];
    snprintf(sub, sizeof sub, "%s/summaries", round_dir);
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/raw_trace", round_dir);
    rmdir(sub); /* only when empty: a raw trace a worker wrote is its own */
    rmdir(round_dir);
}

void pt_round_set_threads(pt_round *r, int threads)
{
    r->threads = PT_MAX(threads, 1);
}

pt_json *pt_round_report(pt_round *r, pt_error *err)
{
    end_archive(r); /* every summary is in: the archive is whole before the analysis */
    if (pt_round_nothing_to_diagnose(r, err)) /* a diagnosis of nothing would only mislead */
        return NULL;
    pt_worker_summary **workers = pt_xmalloc((r->count ? r->count : 1) * sizeof *workers);
    int32_t *failed_ranks = pt_xmalloc((r->count ? r->count : 1) * sizeof *failed_ranks);
    const char **failed_names = pt_xmalloc((r->count ? r->count : 1) * sizeof *failed_names);
    bool *lost = pt_xmalloc((r->count ? r->count : 1) * sizeof *lost);
    int64_t *lost_step = pt_xmalloc((r->count ? r->count : 1) * sizeof *lost_step);
    const char **reasons = pt_xmalloc((r->count ? r->count : 1) * sizeof *reasons);
    size_t nworkers = 0, nfailed = 0;
    for (size_t i = 0; i < r->count; i++) {
        if (r->outcomes[i].summary) {
            workers[nworkers++] = r->outcomes[i].summary;
        } else {
            failed_ranks[nfailed] = r->outcomes[i].rank;
            lost[nfailed] = r->outcomes[i].lost;
            lost_step[nfailed] = r->outcomes[i].lost_step;
            reasons[nfailed] = r->outcomes[i].reason;
            failed_names[nfailed++] = r->outcomes[i].name;
        }
    }
    pt_job_input job = {workers, nworkers, r->world_size, (const char *const *)r->warnings, r->warning_count,
                        failed_ranks, failed_names, nfailed, NULL, lost, lost_step, reasons};
    if (!r->in_memory) {
        /* a bounded report's parts beside its report.json, as analyze writes them: the
         * page's node drill-down and worker detail read them */
        job.write_part = pt_report_part_writer;
        job.part_ctx = r->dir;
        job.threads = r->threads;
    }
    pt_json *report = pt_diagnose(&job);
    add_raw_trace_paths(r, report);
    free(workers);
    free(failed_ranks);
    free(failed_names);
    free(lost);
    free(lost_step);
    free(reasons);
    int rc;
    if (r->in_memory) {
        pt_buf text = PT_BUF_INIT, data_js = PT_BUF_INIT;
        rc = pt_report_render(report, &text, &data_js, err);
        pt_buf_free(&text);
        pt_buf_free(&data_js);
    } else {
        rc = pt_report_write(r->dir, report, err);
    }
    if (rc != 0) {
        pt_json_free(report);
        return NULL;
    }
    return report;
}

void pt_round_free(pt_round *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++) {
        outcome *o = &r->outcomes[i];
        pt_summary_free(o->summary);
        free(o->failure);
        free(o->name);
        free(o->raw_trace_path);
        free(o->reason);
    }
    end_archive(r);
    pt_free_strings(r->warnings, r->warning_count);
    pt_out_dir_close(&r->summaries_dir);
    free(r->outcomes);
    free(r->settled);
    free(r->dir);
    free(r);
}
