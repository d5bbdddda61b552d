/* export.c -- `perftracker export TRACE -o OUT.json[.gz]`: any trace perftracker reads
 * (its native raw trace above all) as Chrome/Perfetto JSON, for Perfetto UI or
 * chrome://tracing. The reader streams straight into the Kineto writer, so a trace of any
 * size is converted in constant memory (plus each distinct kernel name: mangled ones are
 * demangled, once each, as Kineto writes them). A Kineto input keeps its process and thread names
 * (the "M" records), its user annotations and the records the event model does not carry
 * (flow arrows from a launch to its kernel, instants, spans of other categories); a
 * native trace's processes and threads are named (the worker, its threads, each GPU and
 * stream), as it records no names. A gzip output always ends in .gz, so that
 * viewers and `analyze` see what it is. An input without a single event (JSON that is
 * not a trace, "[1, 2]", an empty event list) is an error and writes nothing. */
#include "cli/cli.h"
#include "summarize/demangle.h"
#include "trace/kineto_writer.h"
#include "trace/reader.h"
#include "util/strtab.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: perftracker export TRACE -o OUT [--gzip]\n"
                 "  Convert a trace (a perftracker raw trace, or Kineto JSON) to Chrome/Perfetto JSON\n"
                 "  that Perfetto UI (ui.perfetto.dev) and chrome://tracing open.\n"
                 "  -o OUT   the JSON file to write (gzip-compressed when OUT ends in .gz)\n"
                 "  --gzip   compress; OUT gets \".gz\" appended when it lacks it\n"
                 "Exit status: 0 written; 1 the trace could not be read, holds no event, or OUT could not be\n"
                 "written; 2 bad command line.\n");
}

typedef struct export_state {
    pt_kineto_writer *writer;
    const pt_trace_meta *meta; /* the reader's, filled as it goes */
    bool meta_given;
    uint64_t events, metadata, others;
    pt_demangler demangler;
    pt_strtab kernel_names;
    pt_strtab named;           /* processes and threads named so far (native inputs) */
} export_state;

static void write_name(export_state *s, const char *what, int64_t pid, int64_t tid, const char *name)
{
    pt_trace_metadata md = {what, strlen(what), pid, tid, NULL, 0, NULL, 0, "name", 4, name, strlen(name), 0};
    pt_kineto_writer_metadata(s->writer, &md);
    s->metadata++;
}

/* A native trace names no process or thread; a viewer then shows bare numbers. Each
 * process and thread gets a name the first time an event lands on it, placed where the
 * writer places the event (kineto_writer.h): the worker's process and its threads, a
 * GPU and its streams. A Kineto input brings its own names. */
static void name_place(export_state *s, const pt_event *ev)
{
    const pt_trace_meta *m = s->meta;
    if (strcmp(m->producer, "kineto") == 0)
        return;
    bool gpu = ev->kind == PT_EVENT_GPU_KERNEL || ev->kind == PT_EVENT_GPU_MEMCPY || ev->kind == PT_EVENT_GPU_MEMSET;
    int64_t worker = m->pid >= 0 ? m->pid : 0;
    int64_t pid = gpu ? (ev->device >= 0 ? ev->device : 0)
                  : ev->kind == PT_EVENT_COUNTER && ev->device >= 0 ? ev->device : worker;
    bool on_gpu = pid != worker || gpu;
    char key[64], name[PT_NAME_MAX + 96];
    snprintf(key, sizeof key, "%c%lld", on_gpu ? 'g' : 'p', (long long)pid);
    if (pt_strtab_find(&s->named, key, strlen(key)) == UINT32_MAX) {
        pt_strtab_intern(&s->named, key, strlen(key));
        if (on_gpu)
            snprintf(name, sizeof name, "GPU %lld%s%s", (long long)pid, m->device_name[0] ? " " : "", m->device_name);
        else if (m->rank >= 0)
            snprintf(name, sizeof name, "rank %d (%s, pid %lld)", (int)m->rank, m->host[0] ? m->host : "?",
                     (long long)worker);
        else
            snprintf(name, sizeof name, "pid %lld%s%s", (long long)worker, m->host[0] ? " on " : "", m->host);
        write_name(s, "process_name", pid, 0, name);
    }
    snprintf(key, sizeof key, "%c%lld:%lld", on_gpu ? 'g' : 'p', (long long)pid, (long long)ev->tid);
    if (pt_strtab_find(&s->named, key, strlen(key)) != UINT32_MAX)
        return;
    pt_strtab_intern(&s->named, key, strlen(key));
    if (gpu)
        snprintf(name, sizeof name, "stream %lld", (long long)ev->tid);
    else if (ev->kind == PT_EVENT_COUNTER)
        snprintf(name, sizeof name, "hardware samples");
    else if (ev->tid == worker)
        snprintf(name, sizeof name, "main thread (%lld)", (long long)ev->tid);
    else
        snprintf(name, sizeof name, "thread %lld", (long long)ev->tid);
    write_name(s, "thread_name", pid, ev->tid, name);
}

/* The raw trace's facts come before its events, so the writer gets the process id and
 * rank before the first event (CPU events carry them). */
static int on_event(void *ctx, const pt_event *ev)
{
    export_state *s = ctx;
    if (!s->meta_given) {
        pt_kineto_writer_meta(s->writer, s->meta);
        s->meta_given = true;
    }
    s->events++;
    name_place(s, ev);
    if (ev->kind == PT_EVENT_GPU_KERNEL && pt_is_mangled(ev->name, ev->name_len)) {
        uint32_t id = pt_demangler_intern(&s->demangler, &s->kernel_names, ev->name, ev->name_len);
        pt_event shown = *ev;
        shown.name = pt_strtab_get(&s->kernel_names, id);
        shown.name_len = pt_strtab_len(&s->kernel_names, id);
        return pt_kineto_writer_event(s->writer, &shown);
    }
    return pt_kineto_writer_event(s->writer, ev);
}

static void on_metadata(void *ctx, const pt_trace_metadata *md)
{
    export_state *s = ctx;
    s->metadata++;
    pt_kineto_writer_metadata(s->writer, md);
}

static void on_other(void *ctx, const char *json, size_t len)
{
    export_state *s = ctx;
    s->others++;
    pt_kineto_writer_other(s->writer, json, len);
}

static void on_warning(void *ctx, const char *message)
{
    (void)ctx;
    pt_cli_print(stderr, "perftracker: warning: %s\n", message);
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int export_trace(const char *input, const char *output)
{
    pt_error err = {{0}};
    if (same_file(input, output)) { /* opening the output would truncate the input */
        pt_cli_print(stderr, "perftracker: %s: the output is the same file as the input\n", output);
        return PT_EXIT_FAILURE;
    }
    pt_kineto_writer *w = pt_kineto_writer_open(output, pt_ends_with(output, ".gz"), &err);
    if (!w) {
        pt_cli_print(stderr, "perftracker: %s: %s\n", output, err.message);
        return PT_EXIT_FAILURE;
    }
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    export_state s = {w, &meta, false, 0, 0, 0};
    pt_demangler_init(&s.demangler);
    pt_strtab_init(&s.kernel_names);
    pt_strtab_init(&s.named);
    pt_trace_sink sink = {&s, on_event, on_warning, on_metadata, on_other};
    int rc = pt_trace_read(input, &sink, &meta, NULL, &err);
    pt_demangler_free(&s.demangler);
    pt_strtab_free(&s.kernel_names);
    pt_strtab_free(&s.named);
    if (rc != 0) {
        pt_cli_print(stderr, "perftracker: %s: %s\n", input, err.message);
        pt_kineto_writer_discard(w); /* a half-read trace must not look like a whole one */
        return PT_EXIT_FAILURE;
    }
    if (s.events == 0) { /* "0 events written" with exit 0 would pass for a conversion */
        pt_cli_print(stderr, "perftracker: %s: no events in it: not a trace, or an empty one; nothing written\n",
                     input);
        pt_kineto_writer_discard(w);
        return PT_EXIT_FAILURE;
    }
    pt_kineto_writer_meta(w, &meta);
    if (pt_kineto_writer_close(w, &err) != 0) {
        pt_cli_print(stderr, "perftracker: %s: %s\n", output, err.message);
        return PT_EXIT_FAILURE;
    }
    pt_cli_print(stderr, "perftracker: %s: %llu events, %llu other records (flows, instants) and %llu metadata "
                         "records written to %s\n", input, (unsigned long long)s.events, (unsigned long long)s.others,
                 (unsigned long long)s.metadata, output);
    return PT_EXIT_OK;
}

int cmd_export(int argc, char **argv)
{
    pt_cli_trace_args a = {"export", usage, "--gzip", "the JSON file to write", NULL, NULL, false};
    int status;
    if (!pt_cli_parse_trace_args(argc, argv, &a, &status))
        return status;
    if (!a.output)
        return pt_cli_usage_error(a.command, usage, "-o OUT is missing (the JSON file to write)", NULL);
    const char *input = a.input, *output = a.output;
    bool gzip = a.flag_given;
    char *gz_name = NULL;
    if (gzip && !pt_ends_with(output, ".gz")) {
        size_t n = strlen(output) + 4;
        gz_name = pt_xmalloc(n);
        snprintf(gz_name, n, "%s.gz", output);
        pt_cli_print(stderr, "perftracker: --gzip: writing %s (a gzip file is named .gz)\n", gz_name);
        output = gz_name;
    }
    int rc = export_trace(input, output);
    free(gz_name);
    return rc;
}
