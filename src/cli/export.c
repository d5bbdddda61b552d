/* export.c -- `perftracker export TRACE -o OUT.json[.gz]`: any trace perftracker reads
 * (its native raw trace above all) as Chrome/Perfetto JSON, for Perfetto UI or
 * chrome://tracing. The reader streams straight into the Kineto writer, so a trace of any
 * size is converted in constant memory (plus each distinct kernel name: mangled ones are
 * demangled, once each, as Kineto writes them). A Kineto input keeps its process and thread names
 * (the "M" records) and its user annotations. A gzip output always ends in .gz, so that
 * viewers and `analyze` see what it is. An input without a single event (JSON that is
 * not a trace, "[1, 2]", an empty event list) is an error and writes nothing. */
#include "cli/cli.h"
#include "summarize/demangle.h"
#include "trace/kineto_writer.h"
#include "trace/reader.h"

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
                 "  --gzip   compress; OUT gets \".gz\" appended when it lacks it\n");
}

typedef struct export_state {
    pt_kineto_writer *writer;
    const pt_trace_meta *meta; /* the reader's, filled as it goes */
    bool meta_given;
    uint64_t events, metadata;
    pt_demangler demangler;
    pt_strtab kernel_names;
} export_state;

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
    export_state s = {w, &meta, false, 0, 0};
    pt_demangler_init(&s.demangler);
    pt_strtab_init(&s.kernel_names);
    pt_trace_sink sink = {&s, on_event, on_warning, on_metadata};
    int rc = pt_trace_read(input, &sink, &meta, NULL, &err);
    pt_demangler_free(&s.demangler);
    pt_strtab_free(&s.kernel_names);
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
    pt_cli_print(stderr, "perftracker: %s: %llu events and %llu metadata records written to %s\n", input,
                 (unsigned long long)s.events, (unsigned long long)s.metadata, output);
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
