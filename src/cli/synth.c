/* synth.c -- `perftracker synth`: write a synthetic job's worker traces (or summaries).
 *
 * The library (src/synth) plans the job once and then emits one worker at a time; this
 * command hands workers to THREADS threads through a shared counter, each streaming its
 * worker straight into a Kineto writer or into the summarizer, so memory stays at one
 * worker per thread whatever the job size. --size-mb sizes one worker's trace instead:
 * it measures a step's bytes by writing two short jobs to a byte counter, then picks the
 * step count. Progress goes to stderr; nothing else is printed unless asked. */
#define _POSIX_C_SOURCE 200809L
#include "cli/cli.h"
#include "cli/progress.h"
#include "report/report.h"
#include "summarize/summary_io.h"
#include "synth/synth.h"
#include "trace/kineto_writer.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROGRESS_MIN_WORKERS 16
#define SIZE_MB_DEFAULT_LAYERS 32

typedef enum output_format { FORMAT_KINETO, FORMAT_KINETO_GZ, FORMAT_SUMMARY } output_format;

typedef struct synth_run {
    const pt_synth_plan *plan;
    const char *out_dir;
    output_format format;
    int first_rank, rank_count;    /* the workers to write */
    atomic_int next;
    atomic_int done;
    atomic_int failed;
    pthread_mutex_t error_lock;
    char error[1024];              /* the first failure */
} synth_run;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: perftracker synth [options] -o DIR\n"
            "  Write a synthetic data-parallel training job, one trace per worker, with an\n"
            "  injected fault, plus DIR/expected.json (what the analysis should find).\n"
            "  Files are named as the vendor names them: <host>_<local_rank>_<pid>.json, host\n"
            "  node<rank / gpus-per-node>.\n"
            "\n"
            "  --fault KIND        none (default), slow_gpu, cpu_contention, slow_dataloader,\n"
            "                      gc_pause, blocking_dtoh, common_memcpy, two_slow, hang; and\n"
            "                      hangs the collectives explain (NCCL): hang_mismatch,\n"
            "                      hang_size, hang_skip, hang_order, hang_transport; and,\n"
            "                      with their true saving in expected.json (docs/synth.md):\n"
            "                      unbucketed_allreduce, unoverlapped_allreduce,\n"
            "                      intermittent_stall, loader_starved, single_process_loader,\n"
            "                      slow_gpu_mlp, empty_cache, pipeline_imbalance,\n"
            "                      absent_straggler\n"
            "  --rank R[,R...]     the faulty rank(s) (default: the last rank; two_slow: 1 and\n"
            "                      n-2; intermittent_stall: 0; pipeline_imbalance: a rank of the\n"
            "                      stage; ignored by the kinds every rank has)\n"
            "  --pipeline-stages S pipeline_imbalance: stages (default 4 when they divide the\n"
            "                      workers, else one per worker); workers / S replicas\n"
            "  --second-fault KIND a second fault on other ranks: slow_gpu, cpu_contention,\n"
            "                      slow_dataloader, gc_pause or blocking_dtoh (another kind)\n"
            "  --second-rank R[,R...]  its rank(s) (default: the highest the first leaves)\n"
            "  --second-severity X its extra step time (default 0.3)\n"
            "  --without-fault[=WHICH]  the same job (same seed, same noise) with the fault(s)\n"
            "                      fixed: all (default), first, second, or a fault's kind;\n"
            "                      the step with the fault against the step without is the\n"
            "                      true saving of fixing it\n"
            "  -n, --workers N     world size (default 8)\n"
            "  --steps N           profiled steps per worker (default 3)\n"
            "  --layers N          transformer blocks per step (default 12; more = bigger traces;\n"
            "                      slow_gpu_mlp: Linear layers)\n"
            "  --gpus-per-node N   workers per host (default 8)\n"
            "  --severity X        extra step time on the faulty rank, as a fraction of a healthy\n"
            "                      step (default 0.3; common_memcpy 0.11, ~10%% of the step;\n"
            "                      single_process_loader 0.43; empty_cache 0.59;\n"
            "                      intermittent_stall: the stall in healthy steps, default\n"
            "                      325 ms; none for unbucketed_allreduce,\n"
            "                      unoverlapped_allreduce and pipeline_imbalance)\n"
            "  --hang-step K       hangs: the step index it happens in (default: the last)\n"
            "  --backend B         nccl (default: all-reduce kernels on a GPU stream) or gloo\n"
            "                      (all-reduces on two CPU threads, each bucket copied to the\n"
            "                      host and back; backward blocks until the last one is done)\n"
            "  --noise X           0 (default: a few %% of jitter) to %g: every GPU op's time\n"
            "                      varies by +-X, every CPU op's by +-2.5X (at most 90%%), and\n"
            "                      a quarter of (rank, step) pairs run that step's kernels\n"
            "                      X/2 to 3X/2 slower, as processes sharing one GPU do\n"
            "  --seed S            random seed (default 1); same seed, same bytes\n"
            "  --format F          kineto (default, .json), kineto-gz (.json.gz), or summary\n"
            "                      (<stem>.ptsum: summarized in memory, no JSON written; fast)\n"
            "  --size-mb MB        write ONE trace (rank 0) of about MB megabytes of JSON (before\n"
            "                      any gzip), by choosing the step count (layers default to %d):\n"
            "                      for ingest benchmarks; no expected.json\n"
            "  -j, --threads N     workers written in parallel (default: number of CPUs)\n"
            "  -o, --output DIR    output directory (created if missing)\n"
            "  --quiet             no progress bar or closing line on stderr\n"
            "  -h, --help          this text\n"
            "\n"
            "Exit status: 0 written; 1 a file could not be written; 2 bad command line.\n",
            PT_SYNTH_MAX_NOISE, SIZE_MB_DEFAULT_LAYERS);
}

/* ------------------------------------------------------------ option parsing */

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_ranks(const char *s, int *ranks, int *count)
{
    *count = 0;
    char *copy = pt_xstrdup(s), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int r;
        if (*count == PT_SYNTH_MAX_FAULT_RANKS || parse_int(tok, 0, PT_SYNTH_MAX_WORKERS, &r) != 0) {
            rc = -1;
            break;
        }
        ranks[(*count)++] = r;
    }
    free(copy);
    return rc == 0 && *count > 0 ? 0 : -1;
}

/* --without-fault's value: all, first, second, or the kind of one of the job's faults
 * (resolved once both faults are known). */
static int parse_without(const char *s, const pt_synth_job *job, unsigned *without)
{
    pt_fault_kind kind;
    if (!s || strcmp(s, "all") == 0)
        *without = PT_SYNTH_WITHOUT_ALL;
    else if (strcmp(s, "first") == 0)
        *without = PT_SYNTH_WITHOUT_FIRST;
    else if (strcmp(s, "second") == 0)
        *without = PT_SYNTH_WITHOUT_SECOND;
    else if (pt_fault_parse(s, &kind) == 0 && kind != PT_FAULT_NONE && kind == job->fault)
        *without = PT_SYNTH_WITHOUT_FIRST;
    else if (pt_fault_parse(s, &kind) == 0 && kind != PT_FAULT_NONE && kind == job->second_fault)
        *without = PT_SYNTH_WITHOUT_SECOND;
    else
        return -1;
    return 0;
}

static int parse_format(const char *s, output_format *f)
{
    if (strcmp(s, "kineto") == 0)
        *f = FORMAT_KINETO;
    else if (strcmp(s, "kineto-gz") == 0)
        *f = FORMAT_KINETO_GZ;
    else if (strcmp(s, "summary") == 0)
        *f = FORMAT_SUMMARY;
    else
        return -1;
    return 0;
}

/* ------------------------------------------------------------ one worker */

static void record_error(synth_run *run, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&run->error_lock);
    if (!run->error[0])
        snprintf(run->error, sizeof run->error, fmt, a, b);
    pthread_mutex_unlock(&run->error_lock);
    atomic_fetch_add(&run->failed, 1);
}

static int write_trace(synth_run *run, int rank, const char *stem, pt_error *err)
{
    bool gz = run->format == FORMAT_KINETO_GZ;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.json%s", run->out_dir, stem, gz ? ".gz" : "");
    pt_kineto_writer *w = pt_kineto_writer_open(path, gz, err);
    if (!w)
        return -1;
    pt_trace_meta meta;
    pt_synth_plan_meta(run->plan, rank, &meta);
    pt_kineto_writer_meta(w, &meta);
    pt_trace_sink sink = pt_kineto_writer_sink(w);
    if (pt_synth_plan_worker(run->plan, rank, &sink, &meta, err) != 0) {
        pt_kineto_writer_discard(w);
        return -1;
    }
    return pt_kineto_writer_close(w, err);
}

/* The summary is named after the trace the worker would have written, so reports name
 * workers the same way whichever form was analysed. */
static int write_summary(synth_run *run, int rank, const char *stem, pt_error *err)
{
    pt_worker_summary *summary = pt_synth_plan_summary(run->plan, rank, err);
    if (!summary)
        return -1;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.ptsum", run->out_dir, stem);
    int rc = pt_summary_write_file(summary, path, err);
    pt_summary_free(summary);
    return rc;
}

static void *worker_thread(void *arg)
{
    synth_run *run = arg;
    for (;;) {
        int i = atomic_fetch_add(&run->next, 1);
        if (i >= run->rank_count || atomic_load(&run->failed))
            break;
        int rank = run->first_rank + i;
        if (!pt_synth_plan_writes(run->plan, rank)) { /* absent_straggler's culprit */
            atomic_fetch_add(&run->done, 1);
            continue;
        }
        char stem[PT_NAME_MAX];
        pt_synth_plan_worker_stem(run->plan, rank, stem, sizeof stem);
        pt_error err = {{0}};
        int rc = run->format == FORMAT_SUMMARY ? write_summary(run, rank, stem, &err) : write_trace(run, rank, stem, &err);
        if (rc != 0)
            record_error(run, "%.256s: %.512s", stem, err.message);
        atomic_fetch_add(&run->done, 1);
    }
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int write_workers(synth_run *run, int threads, bool quiet)
{
    if (threads > run->rank_count)
        threads = run->rank_count;
    pthread_t *tids = pt_xcalloc((size_t)threads, sizeof *tids);
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tids[started], NULL, worker_thread, run) != 0)
            break;
    if (started == 0)
        worker_thread(run); /* no threads to be had: do it here */
    pt_progress bar;
    bool show = !quiet && run->rank_count >= PROGRESS_MIN_WORKERS;
    if (show)
        pt_progress_start(&bar, "workers", (uint64_t)run->rank_count);
    while (started > 0 && atomic_load(&run->done) < run->rank_count && !atomic_load(&run->failed)) {
        if (show)
            pt_progress_update(&bar, (uint64_t)atomic_load(&run->done), NULL);
        sleep_ms(50);
    }
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    if (show)
        pt_progress_finish(&bar, (uint64_t)atomic_load(&run->done), NULL);
    free(tids);
    return atomic_load(&run->failed) ? -1 : 0;
}

/* ------------------------------------------------------------ --size-mb */

/* JSON bytes of rank 0's trace for a job of `steps` steps, written to a byte counter. */
static int trace_bytes(pt_synth_job job, int steps, uint64_t *bytes, pt_error *err)
{
    job.steps = steps;
    if (pt_fault_is_hang(job.fault))
        job.hang_step = -1;
    pt_synth_plan *plan = pt_synth_plan_new(&job, err);
    if (!plan)
        return -1;
    pt_kineto_writer *w = pt_kineto_writer_open(NULL, false, err);
    pt_trace_meta meta;
    pt_synth_plan_meta(plan, 0, &meta);
    pt_kineto_writer_meta(w, &meta);
    pt_trace_sink sink = pt_kineto_writer_sink(w);
    int rc = pt_synth_plan_worker(plan, 0, &sink, &meta, err);
    *bytes = pt_kineto_writer_bytes(w);
    pt_kineto_writer_discard(w);
    pt_synth_plan_free(plan);
    return rc;
}

static int steps_for_size(const pt_synth_job *job, double size_mb, int *steps, pt_error *err)
{
    uint64_t two, three;
    if (trace_bytes(*job, 2, &two, err) != 0 || trace_bytes(*job, 3, &three, err) != 0)
        return -1;
    double per_step = (double)(three - two), fixed = (double)two - 2 * per_step;
    double want = (size_mb * 1e6 - fixed) / per_step;
    *steps = want < 2 ? 2 : want > 1e7 ? 10000000 : (int)(want + 0.5);
    return 0;
}

/* ------------------------------------------------------------ expected.json */

static int write_expected(const pt_synth_plan *plan, const char *dir, pt_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    pt_json *expected = pt_synth_plan_expected(plan);
    pt_buf text = PT_BUF_INIT;
    pt_json_write(&text, expected, 2);
    pt_buf_putc(&text, '\n');
    pt_json_free(expected);
    const void *parts[] = {text.data};
    int rc = pt_write_file_atomic(path, parts, &text.len, 1, 0644, err); /* checked, like every output */
    pt_buf_free(&text);
    return rc;
}

/* ------------------------------------------------------------ the command */

enum { OPT_FAULT = 256, OPT_RANK, OPT_STEPS, OPT_LAYERS, OPT_GPUS, OPT_SEVERITY, OPT_SEED, OPT_FORMAT,
       OPT_SIZE_MB, OPT_HANG_STEP, OPT_BACKEND, OPT_NOISE, OPT_QUIET, OPT_SECOND_FAULT, OPT_SECOND_RANK,
       OPT_SECOND_SEVERITY, OPT_WITHOUT, OPT_STAGES };

/* Names the option as the user wrote it (getopt's argv[optind - 1] is the value, not the
 * option, for "--fault bogus"), and for --fault the kinds there are. */
static void report_bad_value(int c, int option_index, const struct option *options, const char *value)
{
    char name[64];
    if (option_index >= 0)
        snprintf(name, sizeof name, "--%s", options[option_index].name);
    else
        snprintf(name, sizeof name, "-%c", c);
    pt_cli_print(stderr, "perftracker synth: bad value '%s' for option %s", value, name);
    if (c == OPT_FAULT || c == OPT_SECOND_FAULT) {
        fprintf(stderr, " (kinds:");
        for (int k = 0; k < PT_FAULT_KIND_COUNT; k++)
            fprintf(stderr, "%s %s", k ? "," : "", pt_fault_name((pt_fault_kind)k));
        fputc(')', stderr);
    }
    fputc('\n', stderr);
}

int cmd_synth(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"fault", required_argument, NULL, OPT_FAULT},
        {"rank", required_argument, NULL, OPT_RANK},
        {"second-fault", required_argument, NULL, OPT_SECOND_FAULT},
        {"second-rank", required_argument, NULL, OPT_SECOND_RANK},
        {"second-severity", required_argument, NULL, OPT_SECOND_SEVERITY},
        {"without-fault", optional_argument, NULL, OPT_WITHOUT},
        {"workers", required_argument, NULL, 'n'},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"gpus-per-node", required_argument, NULL, OPT_GPUS},
        {"severity", required_argument, NULL, OPT_SEVERITY},
        {"seed", required_argument, NULL, OPT_SEED},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"size-mb", required_argument, NULL, OPT_SIZE_MB},
        {"hang-step", required_argument, NULL, OPT_HANG_STEP},
        {"pipeline-stages", required_argument, NULL, OPT_STAGES},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"noise", required_argument, NULL, OPT_NOISE},
        {"threads", required_argument, NULL, 'j'},
        {"output", required_argument, NULL, 'o'},
        {"quiet", no_argument, NULL, OPT_QUIET},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    pt_synth_job job;
    pt_synth_job_init(&job);
    output_format format = FORMAT_KINETO;
    const char *out_dir = NULL;
    double size_mb = 0;
    long nproc = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = nproc > 0 ? (int)PT_MIN(nproc, 256) : 1;
    bool layers_given = false, quiet = false, without = false;
    const char *without_which = NULL;
    int c;
    optind = 1;
    int option_index = -1;
    while ((option_index = -1, c = getopt_long(argc, argv, "n:j:o:h", long_options, &option_index)) != -1) {
        int bad = 0;
        char *end = NULL;
        switch (c) {
        case OPT_FAULT:
            bad = pt_fault_parse(optarg, &job.fault);
            break;
        case OPT_RANK:
            bad = parse_ranks(optarg, job.fault_ranks, &job.fault_rank_count);
            break;
        case OPT_SECOND_FAULT:
            bad = pt_fault_parse(optarg, &job.second_fault);
            break;
        case OPT_SECOND_RANK:
            bad = parse_ranks(optarg, job.second_ranks, &job.second_rank_count);
            break;
        case OPT_SECOND_SEVERITY:
            job.second_severity = strtod(optarg, &end);
            bad = *end || end == optarg || !(job.second_severity > 0 && job.second_severity <= 100);
            break;
        case OPT_WITHOUT:
            without = true;
            without_which = optarg;
            break;
        case 'n':
            bad = parse_int(optarg, 1, PT_SYNTH_MAX_WORKERS, &job.workers);
            break;
        case OPT_STEPS:
            bad = parse_int(optarg, 1, 10000000, &job.steps);
            break;
        case OPT_LAYERS:
            bad = parse_int(optarg, 1, PT_SYNTH_MAX_LAYERS, &job.layers);
            layers_given = true;
            break;
        case OPT_GPUS:
            bad = parse_int(optarg, 1, 64, &job.gpus_per_node);
            break;
        case OPT_SEVERITY:
            job.severity = strtod(optarg, &end);
            bad = *end || end == optarg || !(job.severity > 0 && job.severity <= 100);
            break;
        case OPT_SEED:
            errno = 0;
            job.seed = strtoull(optarg, &end, 10);
            bad = errno || *end || end == optarg;
            break;
        case OPT_FORMAT:
            bad = parse_format(optarg, &format);
            break;
        case OPT_SIZE_MB:
            size_mb = strtod(optarg, &end);
            bad = *end || end == optarg || !(size_mb > 0 && size_mb <= 1e6);
            break;
        case OPT_HANG_STEP:
            bad = parse_int(optarg, 0, 10000000, &job.hang_step);
            break;
        case OPT_STAGES:
            bad = parse_int(optarg, 2, 1024, &job.pipeline_stages);
            break;
        case OPT_BACKEND:
            bad = pt_synth_backend_parse(optarg, &job.backend);
            break;
        case OPT_NOISE:
            job.noise = strtod(optarg, &end);
            bad = *end || end == optarg || !(job.noise >= 0 && job.noise <= PT_SYNTH_MAX_NOISE);
            break;
        case 'j':
            bad = parse_int(optarg, 1, 1024, &threads);
            break;
        case 'o':
            out_dir = optarg;
            break;
        case OPT_QUIET:
            quiet = true;
            break;
        case 'h':
            usage(stdout);
            return PT_EXIT_OK;
        default:
            usage(stderr);
            return PT_EXIT_USAGE;
        }
        if (bad) {
            report_bad_value(c, option_index, long_options, optarg);
            return PT_EXIT_USAGE;
        }
    }
    if (optind < argc || !out_dir) {
        fprintf(stderr, "perftracker synth: %s\n\n", out_dir ? "unexpected argument" : "-o DIR is required");
        usage(stderr);
        return PT_EXIT_USAGE;
    }
    if (without && parse_without(without_which, &job, &job.without) != 0) {
        pt_cli_print(stderr, "perftracker synth: bad value '%s' for option --without-fault (all, first, second, or "
                             "the kind of one of the job's faults)", without_which);
        fputc('\n', stderr);
        return PT_EXIT_USAGE;
    }
    if (size_mb > 0 && format == FORMAT_SUMMARY) {
        fprintf(stderr, "perftracker synth: --size-mb sizes a trace; it cannot be used with --format summary\n");
        return PT_EXIT_USAGE;
    }

    pt_error err = {{0}};
    if (size_mb > 0) {
        if (!layers_given)
            job.layers = SIZE_MB_DEFAULT_LAYERS;
        if (steps_for_size(&job, size_mb, &job.steps, &err) != 0) {
            fprintf(stderr, "perftracker synth: %s\n", err.message);
            return PT_EXIT_USAGE;
        }
    }
    pt_synth_plan *plan = pt_synth_plan_new(&job, &err);
    if (!plan) {
        fprintf(stderr, "perftracker synth: %s\n", err.message);
        return PT_EXIT_USAGE;
    }
    int status = PT_EXIT_OK;
    if (pt_make_dirs(out_dir, &err) != 0) {
        fprintf(stderr, "perftracker synth: %s\n", err.message);
        pt_synth_plan_free(plan);
        return PT_EXIT_FAILURE;
    }
    synth_run run = {.plan = plan, .out_dir = out_dir, .format = format, .first_rank = 0,
                     .rank_count = size_mb > 0 ? 1 : job.workers};
    atomic_init(&run.next, 0);
    atomic_init(&run.done, 0);
    atomic_init(&run.failed, 0);
    pthread_mutex_init(&run.error_lock, NULL);
    if (write_workers(&run, threads, quiet) != 0) {
        fprintf(stderr, "perftracker synth: %s\n", run.error);
        status = PT_EXIT_FAILURE;
    } else if (size_mb <= 0 && write_expected(plan, out_dir, &err) != 0) {
        fprintf(stderr, "perftracker synth: %s\n", err.message);
        status = PT_EXIT_FAILURE;
    }
    pthread_mutex_destroy(&run.error_lock);
    if (status == PT_EXIT_OK && !quiet) {
        const pt_synth_job *resolved = pt_synth_plan_job(plan);
        fprintf(stderr, "perftracker synth: %d worker%s x %d steps (%s) written to %s\n", run.rank_count,
                run.rank_count == 1 ? "" : "s", resolved->steps, pt_fault_name(resolved->fault), out_dir);
    }
    pt_synth_plan_free(plan);
    return status;
}
