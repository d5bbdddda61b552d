/* perfdisplay.c -- write PerfDisplay/: the page (compiled in), the report, and app.py.
 *
 * Design: the page is static. It reads the report from data.js, a script that assigns
 * the report to window.PT_REPORT, so it works from file:// as well as from either server
 * (browsers refuse fetch() of local files). data.js is the report re-serialised by the
 * project's JSON writer rather than the caller's bytes pasted into a script: the writer
 * escapes '<', '>' and '&' and replaces invalid UTF-8, so no report content, however
 * hostile its kernel or function names, can end the script or become markup; and parsing
 * first means a truncated report fails here, loudly, instead of as a blank page. report.json
 * keeps the caller's bytes for people and tools. A diff (`perftracker diff`) is shown by the
 * same page (app.js hands it to diff.js) and kept as diff.json instead.
 *
 * Every file is written to a temporary name and renamed into place, so a reader (or a
 * server already running on the folder) sees the old file or the new one, never half.
 * Cost: one parse and one compact write of the report (the report is small next to the
 * traces it summarises: a few MB for 4096 workers) plus ~1 MB of page assets. */
#define _POSIX_C_SOURCE 200809L
#include "report/perfdisplay.h"
#include "report/perfdisplay_assets.h"
#include "report/report.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPORT_MAX_DEPTH 64

static const char data_js_prefix[] =
    "/* The report for this PerfDisplay page, written by perftracker. report.json holds the "
    "same data. */\nwindow.PT_REPORT = ";

bool pt_perfdisplay_has_charts(void)
{
    for (size_t i = 0; i < pt_perfdisplay_asset_count; i++)
        if (strstr(pt_perfdisplay_assets[i].path, "echarts"))
            return true;
    return false;
}

/* Writes dir/name from parts (concatenated), atomically. */
static int write_file(const char *dir, const char *name, const void *const *parts,
                      const size_t *sizes, size_t part_count, bool executable, pt_error *err)
{
    pt_buf path = PT_BUF_INIT;
    pt_buf_printf(&path, "%s/%s", dir, name);
    int rc = pt_write_file_atomic(path.data, parts, sizes, part_count, executable ? 0755 : 0644, err);
    pt_buf_free(&path);
    return rc;
}

static int write_assets(const char *dir, pt_error *err)
{
    pt_buf parent = PT_BUF_INIT;
    int rc = 0;
    for (size_t i = 0; i < pt_perfdisplay_asset_count && rc == 0; i++) {
        const pt_perfdisplay_asset *asset = &pt_perfdisplay_assets[i];
        const char *slash = strrchr(asset->path, '/');
        if (slash) {
            pt_buf_reset(&parent);
            pt_buf_printf(&parent, "%s/%.*s", dir, (int)(slash - asset->path), asset->path);
            rc = pt_make_dirs(parent.data, err);
        }
        const void *parts[] = {asset->data};
        if (rc == 0)
            rc = write_file(dir, asset->path, parts, &asset->size, 1, asset->executable, err);
    }
    for (const char *const *absent = pt_perfdisplay_absent_assets; rc == 0 && *absent; absent++) {
        pt_buf_reset(&parent);
        pt_buf_printf(&parent, "%s/%s", dir, *absent);
        unlink(parent.data); /* a stale copy from an older build; usually not there */
    }
    pt_buf_free(&parent);
    return rc;
}

static int write_report_data(const char *dir, const char *report_json, size_t report_len,
                             pt_error *err)
{
    pt_error parse_err = {{0}};
    pt_json *report = pt_json_parse(report_json, report_len, REPORT_MAX_DEPTH, &parse_err);
    if (!report) {
        pt_error_set(err, "the report is not valid JSON: %s", parse_err.message);
        return -1;
    }
    if (report->type != PT_JSON_OBJECT) {
        pt_json_free(report);
        pt_error_set(err, "the report is not a JSON object");
        return -1;
    }
    /* A diff (perftracker diff) keeps its own name beside the page; the other name goes,
     * so a folder never holds a stale document of the other kind. */
    bool is_diff = pt_json_get(report, "diff_version") != NULL;
    const char *name = is_diff ? "diff.json" : "report.json";
    pt_buf compact = PT_BUF_INIT;
    pt_json_write(&compact, report, -1);
    pt_json_free(report);
    static const char suffix[] = ";\n";
    const void *js_parts[] = {data_js_prefix, compact.data, suffix};
    const size_t js_sizes[] = {sizeof data_js_prefix - 1, compact.len, sizeof suffix - 1};
    const void *json_parts[] = {report_json};
    int rc = write_file(dir, "data.js", js_parts, js_sizes, 3, false, err);
    if (rc == 0)
        rc = write_file(dir, name, json_parts, &report_len, 1, false, err);
    if (rc == 0) {
        pt_buf other = PT_BUF_INIT;
        pt_buf_printf(&other, "%s/%s", dir, is_diff ? "report.json" : "diff.json");
        unlink(other.data); /* usually not there */
        pt_buf_free(&other);
    }
    pt_buf_free(&compact);
    return rc;
}

int pt_perfdisplay_write(const char *display_dir, const char *report_json, size_t report_len,
                         pt_error *err)
{
    if (pt_make_dirs(display_dir, err) != 0)
        return -1;
    /* The data first: a folder with a page but no data is worse than an old folder. */
    if (write_report_data(display_dir, report_json, report_len, err) != 0)
        return -1;
    return write_assets(display_dir, err);
}
