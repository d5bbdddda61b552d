/* report.h -- writing the report: OUT/report.json, OUT/PerfDisplay/, and the seed-style
 * log lines the CLI prints. The library builds the text; callers decide where it goes. */
#ifndef PT_REPORT_REPORT_H
#define PT_REPORT_REPORT_H

#include "util/json.h"
#include "util/output.h" /* pt_make_dirs, for the writers of report folders */

/* Creates out_dir if needed and writes out_dir/report.json (pretty, 2-space) atomically,
 * then out_dir/PerfDisplay/ (the portable web report); every folder on the way is checked
 * and no symlink is followed (util/outdir.h). 0 or -1 with err. */
int pt_report_write(const char *out_dir, const pt_json *report, pt_error *err);
/* The same for any document PerfDisplay shows (a report, or a diff as diff.json). */
int pt_report_write_document(const char *out_dir, const char *file_name, const pt_json *doc, pt_error *err);

/* One part of a bounded report (docs/report-schema.md, "Parts"): out_dir/parts/STEM.json
 * and out_dir/PerfDisplay/parts/STEM.js, each written atomically in checked folders.
 * 0 or -1 with err. */
int pt_report_write_part(const char *out_dir, const char *stem, const pt_json *part, pt_error *err);
/* The same as pt_job_input.write_part wants it (diagnose.h), with part_ctx the output
 * folder (a char *): what analyze and a triggered round both hand the diagnosis. */
int pt_report_part_writer(void *out_dir, const char *stem, const pt_json *part, pt_error *err);

/* Each part a bounded report lists (scale.parts), read from beside report_path and
 * checked (a plain file name in a plain folder name, an object holding its own index and a
 * workers list): visit(ctx, folder, file, part, err) for each; visit's 0 counts it. A part
 * that is missing, not the report's, or that visit refuses is a line in problems (with
 * visit's err). Returns how many were visited with 0. */
typedef int (*pt_report_part_visitor)(void *ctx, const char *folder, const char *file, const pt_json *part,
                                      pt_error *err);
size_t pt_report_each_part(const pt_json *report, const char *report_path, pt_report_part_visitor visit, void *ctx,
                           pt_buf *problems);

/* For a PerfDisplay folder written from a report.json elsewhere (perftracker display
 * --report): each part the report lists (scale.parts), read from beside report_path and
 * checked, written into display_dir/<folder>/ as the script the page loads. A part that
 * is missing or not the report's is skipped with a line in problems; *copied counts the
 * rest. -1 with err only when the report does not parse. */
int pt_report_copy_parts(const char *report_path, const char *report_json, size_t report_len, const char *display_dir,
                         size_t *copied, pt_buf *problems, pt_error *err);

/* What pt_report_write puts in its files' content, rendered in memory only: report.json's
 * text and PerfDisplay's data.js, appended to the buffers (for in-memory rounds: see
 * pt_round_new_in_memory). 0, or -1 with err where the write would fail for the content. */
int pt_report_render(const pt_json *report, pt_buf *report_json, pt_buf *data_js, pt_error *err);

/* The report at the terminal (report_text.c): the verdict (with input_problem under it,
 * for partial or mixed input) and its findings first, the job in one line, the warnings (options->warnings; the same text about several workers
 * on one line, naming their ranks), then each seed section under its name as a log line
 *   GPU Compute:
 *   [2026-11-29 07:30:00,046 PerfTracker] (gpu_compute.c) INFO: GPU utilization min ...
 * holding its few largest entries, rounded, workers by rank -- or, with
 * options->sections_json, each section's JSON as the seed prints it (pt_report_render_sections). */
typedef struct pt_report_text_options {
    bool warnings;      /* the report's warnings, grouped (analyze prints them on stderr instead) */
    bool sections_json; /* --verbose: the sections' JSON instead of their digest */
} pt_report_text_options;
void pt_report_render_text(const pt_json *report, const pt_report_text_options *options, pt_buf *out);
/* pt_report_render_text with the warnings and the digests. */
void pt_report_render_log(const pt_json *report, pt_buf *out);
/* Only the verdict and findings (what --quiet still prints). */
void pt_report_render_verdict(const pt_json *report, pt_buf *out);
/* The seed's form of the five sections: each one's name, then its JSON as a log line. */
void pt_report_render_sections(const pt_json *report, pt_buf *out);
/* The report's warnings as the terminal shows them: those about single workers ("NAME:
 * text", NAME a worker of the report) grouped by text -- "4 workers (ranks 0-3): text", or
 * "rank 3 (NAME): text" for one -- the others as they are (one line for repeats), in the
 * order each first appears. visit gets each line and the indices in "warnings" of the
 * warnings it stands for. Returns the number of lines. */
typedef void (*pt_report_warning_visitor)(void *ctx, const char *line, const size_t *sources, size_t count);
size_t pt_report_each_warning(const pt_json *report, pt_report_warning_visitor visit, void *ctx);

#endif
