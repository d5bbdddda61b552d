/* diagnose.c -- assembles the report: job facts, the workers list, the diagnosis, the
 * five seed sections, hardware, the heatmap and the warnings, in the order of
 * docs/report-schema.md. The sections and findings live in their own files; this one
 * only admits, sorts and accounts for workers and puts the pieces together.
 *
 * Admission is the analysis's door: every worker given to pt_diagnose, however it was
 * made (decoded, summarized from a trace, synthesized, a hang's made by round.c), passes
 * pt_summary_check first. One that breaks a rule is not analysed: it is listed as a
 * failed worker, with a warning naming it and the rule, and the others are analysed as
 * usual. The sections may then rely on the rules (one entry per metric name, times
 * whose sums fit int64).
 *
 * Before anything is compared it decides what the workers are of a job (pt_job_gaps).
 * Summaries carry no job id: one job states one world size, has one worker per rank and
 * profiles every rank at the same time, so workers given without their job (analyze's
 * files) that state different world sizes, claim one rank twice, or whose window starts
 * more than 10 minutes from the median worker's are not one job ("mixed", identify_job):
 * nothing is compared, and the one finding says so (diagnosis.input_problem; analyze
 * exits 3). A round's workers are one job by construction: there these are warnings. Ranks of the job with no
 * analysed worker (lost, failed or not given) make it "partial" (find_not_analysed): the
 * verdict's sentence names them, and the findings do not take the others' waiting for a
 * communication problem (findings.c: the slowest rank may be among the missing).
 *
 * A rank lost mid-round (its process died, its connection dropped) is the first thing a
 * user must know: its finding leads whatever the others' summaries say, it counts among
 * the missing ranks (it has no data), and the others' waiting is not judged as exposed
 * communication -- their last steps wait for a rank that is gone (pt_build_diagnosis).
 *
 * A large job's report is the bounded form (report_scale.h): once the findings are known
 * it says which workers get full detail, the sections add those they list, and only then
 * is the workers list written; the rest of every worker goes to the parts. */
#define _POSIX_C_SOURCE 200809L
#include "diagnose/analysis.h"
#include "diagnose/finding.h"
#include "diagnose/windows.h"
#include "util/parallel.h"
#include "util/phase.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int32_t world_size_of(const pt_job_input *job, const pt_analysis *a)
{
    /* Claims beyond PT_MAX_WORLD_SIZE (summary.h) do not size the job: the readers
     * already warned about them, and each missing rank costs a report entry. */
    int32_t ws = job->world_size <= PT_MAX_WORLD_SIZE ? job->world_size : -1;
    for (size_t w = 0; ws < 0 && w < a->n; w++)
        if (a->workers[w]->world_size <= PT_MAX_WORLD_SIZE)
            ws = a->workers[w]->world_size > ws ? a->workers[w]->world_size : ws;
    int32_t max_rank = -1;
    for (size_t w = 0; w < a->n; w++)
        if (a->workers[w]->rank < PT_MAX_WORLD_SIZE)
            max_rank = a->workers[w]->rank > max_rank ? a->workers[w]->rank : max_rank;
    for (size_t i = 0; i < job->failed_count; i++)
        if (job->failed_ranks[i] < PT_MAX_WORLD_SIZE)
            max_rank = job->failed_ranks[i] > max_rank ? job->failed_ranks[i] : max_rank;
    if (ws < 0 || ws <= max_rank)
        ws = max_rank + 1;
    return ws;
}

/* known[r]: rank r has a summary or a recorded failure. One pass over each list, so a
 * round in which a million workers failed costs a million steps, not a million squared. */
static uint8_t *known_ranks(const pt_job_input *job, const pt_analysis *a, int32_t world_size)
{
    uint8_t *known = pt_xcalloc(world_size > 0 ? (size_t)world_size : 1, 1);
    for (size_t w = 0; w < a->n; w++)
        if (a->workers[w]->rank >= 0 && a->workers[w]->rank < world_size)
            known[a->workers[w]->rank] = 1;
    for (size_t i = 0; i < job->failed_count; i++)
        if (job->failed_ranks[i] >= 0 && job->failed_ranks[i] < world_size)
            known[job->failed_ranks[i]] = 1;
    return known;
}

/* Adds the exposed time of each class (and idle), divided by divide_by, to object b. */
static pt_json *add_breakdown(pt_json *b, const int64_t exposed[PT_CLASS_COUNT], int64_t idle, double divide_by)
{
    static const char *const keys[PT_CLASS_COUNT] = {"compute_ms", "memory_ms", "communication_ms", "runtime_ms",
                                                     "python_ms"};
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        pt_json_add(b, keys[c], pt_json_number_rounded((double)exposed[c] / 1e6 / divide_by, 6));
    pt_json_add(b, "idle_ms", pt_json_number_rounded((double)idle / 1e6 / divide_by, 6));
    return b;
}

static const char *status_name(int status)
{
    return status == 2 ? "hang" : status == 1 ? "slow" : "normal";
}

static const char *rank_source_name(pt_rank_source source)
{
    switch (source) {
    case PT_RANK_FROM_TRACE: return "distributedInfo";
    case PT_RANK_FROM_FILE_NAME: return "file name";
    case PT_RANK_FROM_FILE_ORDER: return "file order";
    default: return "unknown";
    }
}

static double busy_ms(const int64_t busy[PT_CLASS_COUNT])
{
    double sum = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        sum += (double)busy[c] / 1e6;
    return sum;
}

/* A step's sync points as the page's step timeline draws them: per collective the worker
 * waited in, its end (ms from the step's start) and the work before it since the
 * previous one; then the work after the last. The step model's own input (whatif.c). */
static void add_sync_points(pt_json *step, const pt_step_summary *st)
{
    pt_json *syncs = pt_json_add(step, "syncs", pt_json_array());
    for (size_t k = 0; k < st->sync_count; k++) {
        pt_json *point = pt_json_push(syncs, pt_json_array());
        pt_json_push(point, pt_json_number_rounded((double)st->syncs[k].end_ns / 1e6, 6));
        pt_json_push(point, pt_json_number_rounded(busy_ms(st->syncs[k].busy_ns), 6));
    }
    pt_json_add(step, "tail_busy_ms", pt_json_number_rounded(busy_ms(st->tail_busy_ns), 6));
}

/* A step time for the report: the profiled steps' median, else (a worker a hang report
 * reached, with no profile) the mean step its collector measured before it stopped, else
 * unknown -- never "0 ms". */
static pt_json *step_time_json(double profiled_ms, int64_t before_hang_ns)
{
    if (profiled_ms > 0)
        return pt_json_number_rounded(profiled_ms, 6);
    return before_hang_ns > 0 ? pt_json_number_rounded((double)before_hang_ns / 1e6, 6) : pt_json_null();
}

static pt_json *worker_json(const pt_analysis *a, size_t w, int status, bool with_detail)
{
    const pt_worker_summary *s = a->workers[w];
    pt_json *j = pt_json_object();
    pt_json_add(j, "rank", pt_json_int(s->rank));
    pt_json_add(j, "name", pt_json_string(s->name ? s->name : ""));
    pt_json_add(j, "host", pt_json_string(s->host ? s->host : ""));
    pt_json_add(j, "local_rank", pt_json_int(s->local_rank));
    pt_json_add(j, "pid", pt_json_int(s->pid));
    if (s->seen_from) { /* the coordinator's word beside the worker's own */
        pt_json *c = pt_json_add(j, "connection", pt_json_object());
        pt_json_add(c, "seen_from", pt_json_string(s->seen_from));
        pt_json_add(c, "uid", s->seen_uid >= 0 ? pt_json_int(s->seen_uid) : pt_json_null());
        pt_json_add(c, "pid", s->seen_pid > 0 ? pt_json_int(s->seen_pid) : pt_json_null());
    }
    pt_json_add(j, "rank_source", pt_json_string(rank_source_name(s->rank_source)));
    pt_json_add(j, "step_time_ms", step_time_json(a->step_ms[w], s->hang_step_ns));
    double util = s->window_ns > 0 ? (double)s->union_ns[PT_CLASS_COMPUTE] / (double)s->window_ns : 0;
    pt_json_add(j, "gpu_utilization", pt_json_number_rounded(util, 6));
    pt_json_add(j, "status", pt_json_string(status_name(status)));
    /* The window's breakdown scaled to one median step, so the parts sum to step_time_ms. */
    double scale = pt_median_steps_in_window(a, w);
    pt_json_add(j, "breakdown", add_breakdown(pt_json_object(), s->exposed_ns, s->idle_ns, scale));
    pt_json *steps = pt_json_add(j, "steps", pt_json_array());
    for (size_t i = 0; i < s->step_count; i++) {
        const pt_step_summary *st = &s->steps[i];
        pt_json *step = pt_json_push(steps, pt_json_object());
        pt_json_add(step, "step", pt_json_int(st->step));
        pt_json_add(step, "ms", pt_json_number_rounded((double)st->dur_ns / 1e6, 6));
        add_breakdown(step, st->exposed_ns, st->idle_ns, 1.0);
        if (s->has_syncs)
            add_sync_points(step, st);
    }
    if (with_detail)
        pt_json_add(j, "detail", pt_json_string(pt_detail_name(a->scale->detail[w])));
    return j;
}

/* [lowest, highest] rank of workers [first, last). */
static pt_json *rank_range(const pt_analysis *a, size_t first, size_t last)
{
    pt_json *ranks = pt_json_array();
    pt_json_push(ranks, pt_json_int(pt_worker_rank(a, first)));
    pt_json_push(ranks, pt_json_int(pt_worker_rank(a, last - 1)));
    return ranks;
}

/* The bounded form's parts: every worker's full entry, heatmap row and hardware, in
 * chunks of PT_REPORT_PART_WORKERS in rank order. Each is built, handed to the writer and
 * freed before the next, so memory holds one part per thread, not all; the analysis's
 * threads take parts off a shared counter (each part reads the analysis only), and
 * scale.parts lists them in order whichever thread wrote which, so the report is the
 * same at any thread count. */
typedef struct parts_job {
    const pt_job_input *job;
    const pt_analysis *a;
    const int *status;
    const pt_heatmap *h;
    char **failed; /* [part] why it was not written, or NULL */
} parts_job;

static void write_one_part(void *ctx, size_t part)
{
    parts_job *pj = ctx;
    const pt_analysis *a = pj->a;
    size_t first = part * PT_REPORT_PART_WORKERS, last = PT_MIN(first + PT_REPORT_PART_WORKERS, a->n);
    pt_json *doc = pt_json_object();
    pt_json_add(doc, "part", pt_json_int((int64_t)part));
    pt_json_add(doc, "ranks", rank_range(a, first, last));
    pt_json *workers = pt_json_add(doc, "workers", pt_json_array());
    pt_json *hardware = pt_json_object();
    for (size_t w = first; w < last; w++) {
        pt_json_push(workers, worker_json(a, w, pj->status[w], false));
        pt_hardware_worker(a->workers[w], hardware);
    }
    pt_json_add(doc, "heatmap", pt_heatmap_rows(a, pj->h, first, last, false));
    pt_json_add(doc, "hardware", hardware);
    char stem[32];
    snprintf(stem, sizeof stem, "workers-%04zu", part);
    pt_error err = {{0}};
    if (pj->job->write_part(pj->job->part_ctx, stem, doc, &err) != 0)
        pj->failed[part] = pt_xstrdup(err.message);
    pt_json_free(doc);
}

static pt_json *write_parts(const pt_job_input *job, const pt_analysis *a, const int *status, const pt_heatmap *h,
                            pt_json *warnings)
{
    if (!job->write_part)
        return NULL;
    size_t count = (a->n + PT_REPORT_PART_WORKERS - 1) / PT_REPORT_PART_WORKERS;
    parts_job pj = {job, a, status, h, pt_xcalloc(count ? count : 1, sizeof(char *))};
    pt_parallel_for(count, a->threads, 1, write_one_part, &pj);

    pt_json *parts = pt_json_object();
    pt_json_add(parts, "folder", pt_json_string("parts"));
    pt_json_add(parts, "workers_per_part", pt_json_int(PT_REPORT_PART_WORKERS));
    pt_json *files = pt_json_add(parts, "files", pt_json_array());
    for (size_t part = 0; part < count; part++) {
        size_t first = part * PT_REPORT_PART_WORKERS, last = PT_MIN(first + PT_REPORT_PART_WORKERS, a->n);
        pt_buf b = PT_BUF_INIT;
        if (!pj.failed[part]) {
            pt_json *f = pt_json_push(files, pt_json_object());
            pt_buf_printf(&b, "workers-%04zu.json", part);
            pt_json_add(f, "file", pt_json_string(b.data));
            pt_json_add(f, "ranks", rank_range(a, first, last));
            pt_json_add(f, "workers", pt_json_int((int64_t)(last - first)));
        } else {
            pt_buf_printf(&b, "report part workers-%04zu not written: %s", part, pj.failed[part]);
            pt_json_push(warnings, pt_json_string(b.data));
            free(pj.failed[part]);
        }
        pt_buf_free(&b);
    }
    free(pj.failed);
    return parts;
}

static pt_json *absent_worker_json(int32_t rank, const char *name, const char *status)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "rank", pt_json_int(rank));
    pt_json_add(j, "name", pt_json_string(name ? name : ""));
    pt_json_add(j, "host", pt_json_string(""));
    pt_json_add(j, "step_time_ms", pt_json_null());
    pt_json_add(j, "gpu_utilization", pt_json_null());
    pt_json_add(j, "status", pt_json_string(status));
    return j;
}

#define MISSING_LISTED 4096

static void add_job(pt_json *report, const pt_job_input *job, const pt_analysis *a, int32_t world_size,
                    pt_json *missing, int64_t missing_count)
{
    pt_json *j = pt_json_add(report, "job", pt_json_object());
    pt_json_add(j, "world_size", pt_json_int(world_size));
    pt_json_add(j, "workers_analyzed", pt_json_int((int64_t)a->n));
    pt_json_add(j, "workers_failed", pt_json_int((int64_t)job->failed_count));
    pt_json_add(j, "missing_ranks", missing);
    pt_json_add(j, "missing_count", pt_json_int(missing_count));
    pt_json_add(j, "steps", pt_json_number(pt_median_of(a->steps, a->n, a->scratch)));
    double *before = pt_xmalloc((a->n ? a->n : 1) * sizeof *before);
    size_t known = 0;
    for (size_t w = 0; w < a->n; w++)
        if (a->workers[w]->hang_step_ns > 0)
            before[known++] = (double)a->workers[w]->hang_step_ns;
    int64_t before_hang_ns = known ? (int64_t)pt_median(before, known) : 0;
    free(before);
    pt_json_add(j, "median_step_time_ms", step_time_json(a->median_step_ms, before_hang_ns));
}

/* ------------------------------------------------------------ one job, or several */

/* A profiled window further than this from the median worker's cannot be the same
 * window of a synchronous job (a window is seconds; a hang stretches it by minutes). */
#define CLOCK_SKEW_WARN_NS (10 * 60 * INT64_C(1000000000))
#define EPOCH_2001_NS INT64_C(1000000000000000000) /* earlier starts are not wall-clock times */
#define IDENTITY_LISTED 8                          /* world sizes and ranks a sentence names */

/* What the workers say of the job they belong to. Summaries carry no job or run id: the
 * world size, the rank and the window's wall-clock start are what identify it. One job
 * states one world size, has one worker per rank, and profiles its ranks' windows at
 * the same time. */
typedef struct job_identity {
    const pt_worker_summary *sized_by;     /* the first worker stating a world size */
    int32_t sizes[IDENTITY_LISTED];        /* the distinct world sizes stated (the first) */
    size_t size_count;
    size_t disagreeing;                    /* workers stating another size than sized_by */
    int32_t claimed[IDENTITY_LISTED];      /* ranks more than one worker claims (the first) */
    size_t claimed_count;
    int64_t median_start;                  /* the median worker's window start (0: under two) */
    size_t far;                            /* workers whose window is far from it */
    double far_ns;                         /* the furthest */
} job_identity;

/* How far worker s's window starts from the median worker's (0 without a wall clock).
 * Both are after 2001 and before 2262 (int64 ns), so the difference fits. */
static int64_t window_offset_ns(const pt_worker_summary *s, int64_t median_start)
{
    return median_start && s->window_start_ns > EPOCH_2001_NS ? s->window_start_ns - median_start : 0;
}

static bool window_far(int64_t offset_ns)
{
    return offset_ns > CLOCK_SKEW_WARN_NS || offset_ns < -CLOCK_SKEW_WARN_NS;
}

/* Keeps the smallest distinct sizes, in increasing order. */
static void note_size(job_identity *id, int32_t size)
{
    size_t at = 0;
    while (at < id->size_count && id->sizes[at] < size)
        at++;
    if ((at < id->size_count && id->sizes[at] == size) || at == IDENTITY_LISTED)
        return;
    size_t kept = PT_MIN(id->size_count, IDENTITY_LISTED - 1);
    memmove(id->sizes + at + 1, id->sizes + at, (kept - at) * sizeof *id->sizes);
    id->sizes[at] = size;
    id->size_count = kept + 1;
}

/* Linear in workers (they are in rank order: a rank claimed twice is two neighbours). */
static void identify_job(const pt_analysis *a, job_identity *id)
{
    memset(id, 0, sizeof *id);
    int64_t *starts = pt_xmalloc((a->n ? a->n : 1) * sizeof *starts);
    size_t nstarts = 0;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        if (s->world_size > 0 && s->world_size <= PT_MAX_WORLD_SIZE) {
            if (!id->sized_by)
                id->sized_by = s;
            note_size(id, s->world_size);
            id->disagreeing += s->world_size != id->sized_by->world_size;
        }
        bool repeat = w > 0 && a->workers[w - 1]->rank == s->rank;
        bool first_repeat = repeat && (w < 2 || a->workers[w - 2]->rank != s->rank);
        if (first_repeat && id->claimed_count++ < IDENTITY_LISTED)
            id->claimed[id->claimed_count - 1] = s->rank;
        if (s->window_start_ns > EPOCH_2001_NS)
            starts[nstarts++] = s->window_start_ns;
    }
    id->median_start = nstarts >= 2 ? pt_median_i64(starts, nstarts) : 0;
    free(starts);
    for (size_t w = 0; w < a->n; w++) {
        double off = (double)window_offset_ns(a->workers[w], id->median_start);
        if (window_far(window_offset_ns(a->workers[w], id->median_start)))
            id->far++, id->far_ns = fmax(id->far_ns, fabs(off));
    }
}

static bool mixed_jobs(const job_identity *id)
{
    return id->disagreeing || id->claimed_count || id->far;
}

static void put_int_list(pt_buf *b, const int32_t *values, size_t listed, size_t total)
{
    for (size_t i = 0; i < listed && i < IDENTITY_LISTED; i++)
        pt_buf_printf(b, "%s%d", i == 0 ? "" : i + 1 == total ? " and " : ", ", values[i]);
    if (total > IDENTITY_LISTED)
        pt_buf_printf(b, " and %zu more", total - IDENTITY_LISTED);
}

/* diagnosis.input_problem of inputs that are not one job: what gives them away, and that
 * their workers are therefore not compared. */
static char *mixed_sentence(const job_identity *id)
{
    pt_buf b = PT_BUF_INIT;
    pt_buf_puts(&b, "These inputs are not one job: ");
    const char *sep = "";
    if (id->disagreeing) {
        pt_buf_puts(&b, "they state world sizes ");
        put_int_list(&b, id->sizes, id->size_count, id->size_count);
        sep = "; ";
    }
    if (id->claimed_count) {
        pt_buf_printf(&b, "%s%s ", sep, id->claimed_count == 1 ? "rank" : "ranks");
        put_int_list(&b, id->claimed, PT_MIN(id->claimed_count, IDENTITY_LISTED), id->claimed_count);
        pt_buf_printf(&b, " %s claimed by more than one worker", id->claimed_count == 1 ? "is" : "are each");
        sep = "; ";
    }
    if (id->far) {
        double hours = id->far_ns / 3.6e12;
        pt_buf_printf(&b, "%s%zu profiled %s %s up to ", sep, id->far, id->far == 1 ? "window" : "windows",
                      id->far == 1 ? "starts" : "start");
        pt_buf_printf(&b, hours >= 10 ? "%.0f h" : hours >= 1 ? "%.1f h" : "%.0f min", hours >= 1 ? hours : hours * 60);
        pt_buf_puts(&b, " away from the others' (another run, or a clock that is off)");
    }
    pt_buf_puts(&b, ". Workers of different jobs do the same work at different times or different work, so they "
                    "are not compared and nothing is diagnosed: analyse each job's traces on their own (the warnings "
                    "name each file).");
    return pt_buf_take(&b);
}

/* Facts each worker states about the whole job that the others contradict: a world size
 * unlike the one the job was sized by, or a window hours away from everyone else's (a
 * clock that is off, or a trace from another run mixed in). */
static void add_disagreements(pt_json *warnings, const pt_analysis *a, const job_identity *id, pt_buf *b)
{
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        if (id->sized_by && s->world_size > 0 && s->world_size != id->sized_by->world_size) {
            pt_buf_reset(b);
            pt_buf_printf(b, "%s: world size %d differs from the %d of %s, which sized the job", s->name,
                          s->world_size, id->sized_by->world_size, id->sized_by->name);
            pt_json_push(warnings, pt_json_string(b->data));
        }
    }
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        int64_t offset = window_offset_ns(s, id->median_start);
        double off = (double)offset;
        if (window_far(offset)) {
            pt_buf_reset(b);
            pt_buf_printf(b, "%s: its profiled window starts %.1f h %s the median worker's: its clock is off, or "
                          "the trace comes from another run", s->name, (off < 0 ? -off : off) / 3.6e12,
                          off < 0 ? "before" : "after");
            pt_json_push(warnings, pt_json_string(b->data));
        }
    }
}

static void add_warnings(pt_json *report, const pt_job_input *job, const pt_analysis *a, const job_identity *id,
                         const pt_json *missing, int64_t missing_count)
{
    pt_json *warnings = pt_json_add(report, "warnings", pt_json_array());
    for (size_t i = 0; i < job->warning_count; i++)
        pt_json_push(warnings, pt_json_string(job->warnings[i]));
    pt_buf b = PT_BUF_INIT;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        for (size_t i = 0; i < s->warning_count; i++) {
            pt_buf_reset(&b);
            pt_buf_printf(&b, "%s: %s", s->name, s->warnings[i]);
            pt_json_push(warnings, pt_json_string(b.data));
        }
        if (w > 0 && a->workers[w - 1]->rank == s->rank) {
            pt_buf_reset(&b);
            pt_buf_printf(&b, "%s and %s both claim rank %d; both are analysed", a->workers[w - 1]->name, s->name,
                          s->rank);
            pt_json_push(warnings, pt_json_string(b.data));
        }
    }
    add_disagreements(warnings, a, id, &b);
    pt_window_alignment_warnings(a->workers, a->n, warnings);
    if (missing_count) {
        pt_buf_reset(&b);
        pt_buf_printf(&b, "%lld rank%s of the job %s no trace:", (long long)missing_count,
                      missing_count == 1 ? "" : "s", missing_count == 1 ? "has" : "have");
        for (size_t i = 0; i < missing->count && i < 32; i++)
            pt_buf_printf(&b, " %lld", (long long)missing->items[i]->integer);
        if (missing_count > 32)
            pt_buf_puts(&b, " ...");
        pt_json_push(warnings, pt_json_string(b.data));
    }
    pt_buf_free(&b);
}

/* The job as the analysis sees it: the workers that keep every rule of a summary, and
 * the caller's failures and warnings followed by one of each per refused worker. */
typedef struct admitted {
    pt_job_input job;
    pt_worker_summary **workers;
    int32_t *failed_ranks;
    const char **failed_names;
    const char **warnings;
    bool *failed_lost;
    int64_t *failed_lost_step;
    const char **failed_reasons;
    char **refusals; /* owned: the warnings and names of refused workers */
    size_t refused;
} admitted;

static void admit_workers(const pt_job_input *in, admitted *out)
{
    size_t n = in->worker_count, failed = in->failed_count + n, warned = in->warning_count + n;
    memset(out, 0, sizeof *out);
    out->job = *in;
    out->workers = pt_xmalloc((n ? n : 1) * sizeof *out->workers);
    out->failed_ranks = pt_xmalloc((failed ? failed : 1) * sizeof *out->failed_ranks);
    out->failed_names = pt_xmalloc((failed ? failed : 1) * sizeof *out->failed_names);
    out->warnings = pt_xmalloc((warned ? warned : 1) * sizeof *out->warnings);
    out->refusals = pt_xmalloc((n ? 2 * n : 1) * sizeof *out->refusals);
    out->failed_lost = pt_xcalloc(failed ? failed : 1, sizeof *out->failed_lost);
    out->failed_lost_step = pt_xmalloc((failed ? failed : 1) * sizeof *out->failed_lost_step);
    out->failed_reasons = pt_xcalloc(failed ? failed : 1, sizeof *out->failed_reasons);
    for (size_t i = 0; i < failed; i++)
        out->failed_lost_step[i] = -1;
    for (size_t i = 0; i < in->failed_count; i++) {
        out->failed_ranks[i] = in->failed_ranks[i];
        out->failed_names[i] = in->failed_names ? in->failed_names[i] : "";
        out->failed_lost[i] = in->failed_lost && in->failed_lost[i];
        out->failed_lost_step[i] = in->failed_lost_step ? in->failed_lost_step[i] : -1;
        out->failed_reasons[i] = in->failed_reasons ? in->failed_reasons[i] : NULL;
    }
    for (size_t i = 0; i < in->warning_count; i++)
        out->warnings[i] = in->warnings[i];
    size_t kept = 0, nfailed = in->failed_count, nwarnings = in->warning_count, owned = 0;
    for (size_t w = 0; w < n; w++) {
        const pt_worker_summary *s = in->workers[w];
        pt_error rule;
        if (pt_summary_check(s, &rule) == 0) {
            out->workers[kept++] = in->workers[w];
            continue;
        }
        char who[128];
        pt_summary_describe(s, who, sizeof who);
        pt_buf b = PT_BUF_INIT;
        pt_buf_printf(&b, "%s: invalid summary, not analysed: %s", who, rule.message);
        out->warnings[nwarnings++] = out->refusals[owned++] = pt_buf_take(&b);
        /* Listed by its name when that is a plausible file name, else by its rank alone. */
        bool named = s->name && strnlen(s->name, PT_NAME_MAX) < PT_NAME_MAX;
        out->failed_names[nfailed] = out->refusals[owned++] = pt_xstrdup(named ? s->name : "");
        out->failed_ranks[nfailed++] = s->rank >= 0 && s->rank < PT_MAX_WORLD_SIZE ? s->rank : -1;
    }
    out->refused = n - kept;
    out->job.workers = out->workers;
    out->job.worker_count = kept;
    out->job.failed_ranks = out->failed_ranks;
    out->job.failed_names = out->failed_names;
    out->job.failed_count = nfailed;
    out->job.failed_lost = out->failed_lost;
    out->job.failed_lost_step = out->failed_lost_step;
    out->job.failed_reasons = out->failed_reasons;
    out->job.warnings = out->warnings;
    out->job.warning_count = nwarnings;
}

static void admitted_free(admitted *a)
{
    pt_free_strings(a->refusals, 2 * a->refused);
    free(a->workers);
    free(a->failed_ranks);
    free(a->failed_names);
    free(a->warnings);
    free(a->failed_lost);
    free(a->failed_lost_step);
    free(a->failed_reasons);
}

/* lost[r]: rank r was lost mid-round. */
static uint8_t *lost_ranks(const pt_job_input *job, int32_t world_size, size_t *count)
{
    uint8_t *lost = pt_xcalloc(world_size > 0 ? (size_t)world_size : 1, 1);
    *count = 0;
    for (size_t i = 0; i < job->failed_count; i++) {
        int32_t r = job->failed_ranks[i];
        if (job->failed_lost[i] && r >= 0 && r < world_size && !lost[r])
            lost[r] = 1, (*count)++;
    }
    return lost;
}

/* "Rank 3 was lost mid-round (died (at step 22): connection lost ...)": the finding that
 * leads, about ranks the analysis has no data of. Its impact is the whole step, as a
 * hang's is: the job cannot step without them. */
#define LOST_LISTED 8

static pt_json *lost_finding(const pt_job_input *job, const uint8_t *lost, int32_t world_size, size_t count)
{
    pt_json *f = pt_json_object();
    pt_json_add(f, "category", pt_json_string("lost"));
    pt_json_add(f, "function", pt_json_string(""));
    pt_json *ranks = pt_json_add(f, "workers", pt_json_array());
    pt_buf s = PT_BUF_INIT;
    pt_buf_puts(&s, count == 1 ? "Rank " : "Ranks ");
    size_t listed = 0;
    for (int32_t r = 0; r < world_size; r++) {
        if (!lost[r])
            continue;
        pt_json_push(ranks, pt_json_int(r));
        if (listed < LOST_LISTED)
            pt_buf_printf(&s, "%s%d", listed == 0 ? "" : listed + 1 == count ? " and " : ", ", r);
        listed++;
    }
    if (count > LOST_LISTED)
        pt_buf_printf(&s, " and %zu more", count - LOST_LISTED);
    pt_buf_printf(&s, " %s lost in the middle of the round", count == 1 ? "was" : "were");
    for (size_t i = 0; i < job->failed_count && count == 1; i++)
        if (job->failed_lost[i] && job->failed_reasons[i])
            pt_buf_printf(&s, " (%s)", job->failed_reasons[i]);
    pt_buf_printf(&s, ": %s no profile, and the job cannot step without %s. The other workers' last steps waited "
                      "for %s, so their waiting is not diagnosed as communication. Find out why %s stopped (%s log; "
                      "dmesg for the OOM killer or a signal; the host's health), then profile again.",
                  count == 1 ? "it has" : "they have", count == 1 ? "it" : "them", count == 1 ? "it" : "them",
                  count == 1 ? "it" : "they", count == 1 ? "its" : "their");
    pt_json_add(f, "all_workers", pt_json_bool(false));
    pt_json_add(f, "impact", pt_json_number(1));
    pt_json_add(f, "summary", pt_json_string(s.data));
    pt_buf_free(&s);
    pt_json *ev = pt_json_add(f, "evidence", pt_json_object());
    pt_json_add(ev, "section", pt_json_string("workers"));
    pt_json_add(ev, "metric", pt_json_string("ranks lost mid-round"));
    pt_json_add(ev, "median", pt_json_number(0));
    pt_json *values = pt_json_add(ev, "values", pt_json_object());
    for (size_t i = 0; i < job->failed_count; i++) {
        char rank[16];
        snprintf(rank, sizeof rank, "%d", job->failed_ranks[i]);
        if (job->failed_lost[i] && job->failed_ranks[i] >= 0 && !pt_json_get(values, rank))
            pt_json_add(values, rank, pt_json_int(job->failed_lost_step[i]));
    }
    return f;
}

/* The lost ranks' finding first, and a verdict that is not "healthy". First even before
 * a hang's findings: those follow from the loss (the others blocked in the call it never
 * joined, or gloo raising on them once it was gone) and say less precisely what it was. */
static void lead_with_lost(pt_json *diagnosis, pt_json *lost)
{
    pt_json *findings = pt_json_get(diagnosis, "findings");
    pt_json_push(findings, lost);
    memmove(findings->items + 1, findings->items, (findings->count - 1) * sizeof *findings->items);
    findings->items[0] = lost;
    pt_json *verdict = pt_json_get(diagnosis, "verdict");
    if (verdict && verdict->string && strcmp(verdict->string, "healthy") == 0)
        pt_json_set(diagnosis, "verdict", pt_json_string("degraded"));
}

/* ------------------------------------------------------------ a partial job */

/* The job's ranks that no analysed worker is (lost, failed or not given), in rank order:
 * the first MISSING_LISTED into gaps, all counted; gaps says why, and the sentence of
 * diagnosis.input_problem says the report is partial. */
typedef struct not_analysed {
    int32_t *ranks;
    size_t listed;
    int64_t count, lost, failed;
    char *why, *sentence;
} not_analysed;

static void find_not_analysed(const pt_job_input *job, const pt_analysis *a, const uint8_t *lost, int32_t world_size,
                              not_analysed *out)
{
    memset(out, 0, sizeof *out);
    uint8_t *seen = pt_xcalloc(world_size > 0 ? (size_t)world_size : 1, 1);
    for (size_t w = 0; w < a->n; w++)
        if (a->workers[w]->rank >= 0 && a->workers[w]->rank < world_size)
            seen[a->workers[w]->rank] = 1;
    uint8_t *failed = pt_xcalloc(world_size > 0 ? (size_t)world_size : 1, 1);
    for (size_t i = 0; i < job->failed_count; i++)
        if (job->failed_ranks[i] >= 0 && job->failed_ranks[i] < world_size)
            failed[job->failed_ranks[i]] = 1;
    out->ranks = pt_xmalloc(MISSING_LISTED * sizeof *out->ranks);
    for (int32_t r = 0; r < world_size; r++) {
        if (seen[r])
            continue;
        if (out->listed < MISSING_LISTED)
            out->ranks[out->listed++] = r;
        out->count++;
        out->lost += lost[r] != 0;
        out->failed += !lost[r] && failed[r];
    }
    free(seen);
    free(failed);
    if (!out->count)
        return;
    int64_t absent = out->count - out->lost - out->failed;
    pt_buf why = PT_BUF_INIT;
    bool one_kind = (out->lost > 0) + (out->failed > 0) + (absent > 0) == 1;
    const char *sep = "";
    if (out->lost)
        pt_buf_printf(&why, one_kind ? "lost mid-round" : "%lld lost mid-round", (long long)out->lost), sep = ", ";
    if (out->failed)
        pt_buf_printf(&why, one_kind ? "failed: see the warnings" : "%s%lld failed", sep, (long long)out->failed),
            sep = ", ";
    if (absent)
        pt_buf_printf(&why, one_kind ? "not given to this analysis" : "%s%lld not given", sep, (long long)absent);
    out->why = pt_buf_take(&why);
    pt_buf b = PT_BUF_INIT;
    pt_buf_printf(&b, "Partial: %zu of the job's %d ranks %s analysed; ", a->n, world_size, a->n == 1 ? "was" : "were");
    pt_put_rank_list(&b, out->ranks, out->listed, out->count);
    pt_buf_printf(&b, " %s not (%s). A slow rank among them would not be seen, and the %s analysed may be waiting "
                      "for it: the findings are about the %s analysed only.",
                  out->count == 1 ? "was" : "were", out->why, a->n == 1 ? "rank" : "ranks", a->n == 1 ? "rank" : "ranks");
    out->sentence = pt_buf_take(&b);
}

static void not_analysed_free(not_analysed *n)
{
    free(n->ranks);
    free(n->why);
    free(n->sentence);
}

static pt_json *diagnose_admitted(const pt_job_input *job)
{
    pt_phase("decoded");
    pt_analysis a;
    pt_analysis_init_by_rank(&a, job->workers, job->worker_count);
    a.threads = job->threads;
    pt_phase("analysis rows");

    int32_t world_size = world_size_of(job, &a);
    size_t lost_count;
    uint8_t *lost = lost_ranks(job, world_size, &lost_count);
    job_identity id;
    identify_job(&a, &id);
    not_analysed gone;
    find_not_analysed(job, &a, lost, world_size, &gone);
    /* A round's workers are one job by construction (the caller knows its world size;
     * the coordinator admits one worker per rank): what one of them claims otherwise
     * is a warning, and cannot silence the diagnosis of the others. */
    char *mixed = job->world_size < 0 && mixed_jobs(&id) ? mixed_sentence(&id) : NULL;
    pt_job_gaps gaps = {mixed != NULL, lost_count > 0, gone.ranks, gone.listed, gone.count, gone.why,
                        mixed ? "mixed" : gone.count ? "partial" : "complete", mixed ? mixed : gone.sentence};
    int *status = pt_xcalloc(a.n ? a.n : 1, sizeof *status);
    pt_json *diagnosis = pt_build_diagnosis(&a, status, &gaps);
    pt_scale_begin(&a, status);
    pt_phase("findings");
    if (lost_count && !mixed)
        lead_with_lost(diagnosis, lost_finding(job, lost, world_size, lost_count));
    else if (a.n == 0) {
        pt_json *findings = pt_json_get(diagnosis, "findings");
        pt_json *f = pt_json_push(findings, pt_json_object());
        pt_json_add(f, "category", pt_json_string("other"));
        pt_json_add(f, "function", pt_json_string(""));
        pt_json_add(f, "workers", pt_json_array());
        pt_json_add(f, "all_workers", pt_json_bool(true));
        pt_json_add(f, "impact", pt_json_number(0));
        pt_json_add(f, "summary", pt_json_string("No worker could be analysed: every input failed to read or was "
                                                 "invalid (see warnings)."));
        pt_json_set(diagnosis, "verdict", pt_json_string("degraded"));
    }

    pt_json *report = pt_json_object();
    char now[32];
    if (!job->generated_at)
        pt_iso_now(now, sizeof now);
    pt_json_add(report, "report_version", pt_json_int(1));
    pt_json_add(report, "perftracker_version", pt_json_string(PT_VERSION));
    pt_json_add(report, "generated_at", pt_json_string(job->generated_at ? job->generated_at : now));

    /* Missing ranks are listed up to MISSING_LISTED and counted beyond: a trace claiming
     * a world of a million ranks must not cost a million report entries. A rank lost
     * mid-round is missing too (it has no data), and listed once among the workers. */
    pt_json *missing = pt_json_array();
    int64_t missing_count = 0;
    uint8_t *known = known_ranks(job, &a, world_size);
    for (int32_t r = 0; r < world_size; r++)
        if ((!known[r] || lost[r]) && missing_count++ < MISSING_LISTED)
            pt_json_push(missing, pt_json_int(r));
    add_job(report, job, &a, world_size, missing, missing_count);

    /* Filled once the sections have said which workers they list (the bounded form). */
    pt_json *workers = pt_json_add(report, "workers", pt_json_array());
    pt_json_add(report, "diagnosis", diagnosis);
    pt_json_add(report, "GPU Compute", pt_section_gpu_compute(&a));
    pt_json_add(report, "GPU memory operations", pt_section_gpu_memory(&a));
    pt_json_add(report, "Communication", pt_section_communication(&a));
    pt_json_add(report, "CUDA Runtime", pt_section_cuda_runtime(&a));
    pt_json_add(report, "Python functions", pt_section_python(&a));
    pt_phase("sections");
    bool *highlight = pt_xcalloc(a.n ? a.n : 1, sizeof *highlight);
    for (size_t w = 0; w < a.n; w++)
        highlight[w] = status[w] != 0;
    pt_json *hardware = pt_section_hardware(&a, highlight);
    if (hardware)
        pt_json_add(report, "Hardware", hardware);
    free(highlight);
    pt_phase("hardware");
    pt_heatmap heatmap;
    pt_heatmap_build(&a, status, &heatmap);
    pt_json_add(report, "Heatmap", pt_section_heatmap(&a, &heatmap));
    pt_json *parts_warnings = pt_json_array();
    /* The matrix goes before the worker table is built: at 100 000 workers both are tens of MB. */
    pt_phase("heatmap");
    pt_json *parts = pt_bounded(&a) ? write_parts(job, &a, status, &heatmap, parts_warnings) : NULL;
    pt_phase("parts");
    pt_heatmap_free(&heatmap);
    if (pt_bounded(&a))
        pt_json_add(report, "scale", pt_section_scale(&a, status, parts));
    add_warnings(report, job, &a, &id, missing, missing_count);
    pt_json *all_warnings = pt_json_get(report, "warnings");
    for (size_t i = 0; i < parts_warnings->count; i++)
        pt_json_push(all_warnings, parts_warnings->items[i]);
    parts_warnings->count = 0;
    pt_json_free(parts_warnings);

    for (size_t w = 0; w < a.n; w++)
        if (!pt_bounded(&a) || a.scale->detail[w])
            pt_json_push(workers, worker_json(&a, w, status[w], pt_bounded(&a)));
    for (size_t i = 0; i < job->failed_count; i++)
        pt_json_push(workers, absent_worker_json(job->failed_ranks[i], job->failed_names ? job->failed_names[i] : "",
                                                 "error"));
    for (size_t i = 0; i < missing->count; i++)
        if (!known[missing->items[i]->integer])
            pt_json_push(workers, absent_worker_json((int32_t)missing->items[i]->integer, "", "missing"));
    free(known);
    free(lost);
    free(status);
    free(mixed);
    not_analysed_free(&gone);
    pt_scale_end(&a);
    pt_analysis_free(&a);
    pt_phase("report tree");
    return report;
}

pt_json *pt_diagnose(const pt_job_input *in)
{
    admitted admit;
    admit_workers(in, &admit);
    pt_json *report = diagnose_admitted(&admit.job);
    admitted_free(&admit);
    return report;
}
