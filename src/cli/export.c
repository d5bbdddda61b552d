/* export.c -- `perftracker export TRACE -o OUT.json[.gz]`: any trace perftracker reads
 * (its native raw trace above all) as Chrome/Perfetto JSON, for Perfetto UI or
 * chrome://tracing. The reader streams straight into the Kineto writer, so a trace of any
 * size is converted in constant memory (plus each distinct kernel name: mangled ones are
 * demangled, once each, as Kineto writes them). */
#include "cli/cli.h"
#include "summarize/demangle.h"
#include "trace/kineto_writer.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: perftracker export TRACE -o OUT [--gzip]\n"
                 "  Convert a trace (a perftracker raw trace, or Kineto JSON) to Chrome/Perfetto JSON\n"
                 "  that Perfetto UI (ui.perfetto.dev) and chrome://tracing open.\n"
                 "  -o OUT   the JSON file to write (gzip-compressed when OUT ends in .gz or with --gzip)\n");
}

typedef struct export_state {
    pt_kineto_writer *writer;
    const pt_trace_meta *meta; /* the reader's, filled as it goes */
    bool meta_given;
    uint64_t events;
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

static void on_warning(void *ctx, const char *message)
{
    (void)ctx;
    fprintf(stderr, "perftracker: warning: %s\n", message);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int cmd_export(int argc, char **argv)
{
    const char *input = NULL, *output = NULL;
    bool gzip = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            output = argv[++i];
        else if (strcmp(argv[i], "--gzip") == 0)
            gzip = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return usage(stdout), PT_EXIT_OK;
        else if (argv[i][0] == '-' || input)
            return usage(stderr), PT_EXIT_USAGE;
        else
            input = argv[i];
    }
    if (!input || !output)
        return usage(stderr), PT_EXIT_USAGE;
    pt_error err = {{0}};
    pt_kineto_writer *w = pt_kineto_writer_open(output, gzip || ends_with(output, ".gz"), &err);
    if (!w) {
        fprintf(stderr, "perftracker: %s: %s\n", output, err.message);
        return PT_EXIT_FAILURE;
    }
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    export_state s = {w, &meta, false, 0};
    pt_demangler_init(&s.demangler);
    pt_strtab_init(&s.kernel_names);
    pt_trace_sink sink = {&s, on_event, on_warning};
    int rc = pt_trace_read(input, &sink, &meta, NULL, &err);
    pt_demangler_free(&s.demangler);
    pt_strtab_free(&s.kernel_names);
    if (rc != 0) {
        fprintf(stderr, "perftracker: %s: %s\n", input, err.message);
        pt_kineto_writer_discard(w); /* a half-read trace must not look like a whole one */
        return PT_EXIT_FAILURE;
    }
    pt_kineto_writer_meta(w, &meta);
    if (pt_kineto_writer_close(w, &err) != 0) {
        fprintf(stderr, "perftracker: %s: %s\n", output, err.message);
        return PT_EXIT_FAILURE;
    }
    fprintf(stderr, "perftracker: %s: %llu events written to %s\n", input, (unsigned long long)s.events, output);
    return PT_EXIT_OK;
}
