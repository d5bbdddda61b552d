/* report.c -- writes report.json (atomically: a reader never sees half a report) and the
 * PerfDisplay folder next to it, all inside one checked output folder (util/outdir.h: no
 * other user can redirect the write), the bounded form's parts beside them, and renders
 * the seed-style log lines. */
#define _POSIX_C_SOURCE 200809L
#include "report/report.h"
#include "report/perfdisplay.h"
#include "util/outdir.h"

#include <time.h>

/* report.json's text (pretty, 2-space, a final newline). */
static void document_text(const pt_json *doc, pt_buf *out)
{
    pt_json_write(out, doc, 2);
    pt_buf_putc(out, '\n');
}

int pt_report_write_document(const char *out_dir, const char *file_name, const pt_json *doc, pt_error *err)
{
    pt_out_dir out, display;
    if (pt_out_dir_open(&out, out_dir, true, err) != 0)
        return -1;
    pt_buf json = PT_BUF_INIT;
    document_text(doc, &json);
    const void *parts[] = {json.data};
    size_t sizes[] = {json.len};
    int rc = pt_out_dir_write(&out, file_name, parts, sizes, 1, 0644, err);
    if (rc == 0)
        rc = pt_out_dir_sub(&display, &out, "PerfDisplay", true, err);
    if (rc == 0) {
        rc = pt_perfdisplay_write_doc_into(&display, doc, json.data, json.len, err);
        pt_out_dir_close(&display);
    }
    pt_out_dir_close(&out);
    pt_buf_free(&json);
    return rc;
}

/* One file in out_dir/<sub...>/ (folders made as needed, each checked). */
static int write_in(const char *out_dir, const char *const *subs, size_t sub_count, const char *name,
                    const pt_buf *text, pt_error *err)
{
    pt_out_dir dirs[4];
    size_t opened = 0;
    int rc = pt_out_dir_open(&dirs[0], out_dir, true, err);
    opened += rc == 0;
    for (size_t i = 0; rc == 0 && i < sub_count && i + 1 < PT_ARRAY_LEN(dirs); i++) {
        rc = pt_out_dir_sub(&dirs[i + 1], &dirs[i], subs[i], true, err);
        opened += rc == 0;
    }
    if (rc == 0) {
        const void *parts[] = {text->data};
        size_t sizes[] = {text->len};
        rc = pt_out_dir_write(&dirs[opened - 1], name, parts, sizes, 1, 0644, err);
    }
    while (opened)
        pt_out_dir_close(&dirs[--opened]);
    return rc;
}

int pt_report_write_part(const char *out_dir, const char *stem, const pt_json *part, pt_error *err)
{
    pt_buf text = PT_BUF_INIT, name = PT_BUF_INIT;
    pt_json_write(&text, part, -1);
    pt_buf_putc(&text, '\n');
    pt_buf_printf(&name, "%s.json", stem);
    static const char *const json_dir[] = {"parts"}, *const script_dir[] = {"PerfDisplay", "parts"};
    int rc = write_in(out_dir, json_dir, 1, name.data, &text, err);
    if (rc == 0) {
        /* The same data as a script the page loads from file:// too (the writer is
         * HTML-safe: nothing in it can end the script). */
        const pt_json *index = pt_json_get(part, "part");
        pt_buf script = PT_BUF_INIT;
        pt_buf_printf(&script, "(window.PT_REPORT_PARTS = window.PT_REPORT_PARTS || {})[%lld] = ",
                      (long long)(index ? index->integer : 0));
        pt_buf_append(&script, text.data, text.len - 1);
        pt_buf_puts(&script, ";\n");
        pt_buf_reset(&name);
        pt_buf_printf(&name, "%s.js", stem);
        rc = write_in(out_dir, script_dir, 2, name.data, &script, err);
        pt_buf_free(&script);
    }
    pt_buf_free(&text);
    pt_buf_free(&name);
    return rc;
}

int pt_report_write(const char *out_dir, const pt_json *report, pt_error *err)
{
    return pt_report_write_document(out_dir, "report.json", report, err);
}

int pt_report_render(const pt_json *report, pt_buf *report_json, pt_buf *data_js, pt_error *err)
{
    document_text(report, report_json);
    bool is_diff;
    return pt_perfdisplay_render_data(report_json->data, report_json->len, data_js, &is_diff, err);
}

/* ------------------------------------------------------------ log lines */

static void log_prefix(pt_buf *out, const char *source)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    pt_buf_printf(out, "[%s,%03ld PerfTracker] (%s) INFO: ", when, ts.tv_nsec / 1000000, source);
}

void pt_report_render_log(const pt_json *report, pt_buf *out)
{
    /* The seed's key reads as "these workers are anomalous"; in these two sections it
     * means "above the 1% threshold", which can be every worker: the line says so. */
    static const char threshold_legend[] =
        "  (abnormal_workers: the workers whose bottleneck ratio -- the share of the step this holds up -- is "
        "above 0.01 (1%), with their ratio; not a comparison between workers, so every worker can be listed)\n";
    static const struct {
        const char *section, *source, *legend;
    } sections[] = {
        {"GPU Compute", "gpu_compute.c", NULL},
        {"GPU memory operations", "gpu_memory.c", threshold_legend},
        {"Communication", "communication.c", NULL},
        {"CUDA Runtime", "cuda_runtime.c", threshold_legend},
        {"Python functions", "python_functions.c", NULL},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(sections); i++) {
        const pt_json *s = pt_json_get(report, sections[i].section);
        if (!s)
            continue;
        pt_buf_printf(out, "%s:\n", sections[i].section);
        log_prefix(out, sections[i].source);
        pt_json_write_for_terminal(out, s, 4);
        pt_buf_putc(out, '\n');
        if (sections[i].legend && s->count)
            pt_buf_puts(out, sections[i].legend);
    }
    pt_report_render_verdict(report, out);
}

void pt_report_render_verdict(const pt_json *report, pt_buf *out)
{
    const pt_json *diagnosis = pt_json_get(report, "diagnosis");
    const pt_json *findings = pt_json_get(diagnosis, "findings");
    pt_buf_puts(out, "Diagnosis:\n");
    log_prefix(out, "findings.c");
    pt_buf_printf(out, "verdict: %s\n", pt_json_get_string(diagnosis, "verdict", "unknown"));
    for (size_t i = 0; findings && i < findings->count; i++) {
        const pt_json *f = findings->items[i];
        pt_buf_printf(out, "  %zu. [%s, impact %.1f%%] %s\n", i + 1, pt_json_get_string(f, "category", "?"),
                      100 * pt_json_get_number(f, "impact", 0), pt_json_get_string(f, "summary", ""));
    }
}
