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
 * server already running on the folder) sees the old file or the new one, never half; all
 * of it goes through outdir.c's checked folders (O_EXCL | O_NOFOLLOW files, no symlink
 * followed, private below a world-writable folder), so a shared output folder cannot turn
 * the write into one somewhere else.
 * Cost: one compact write of the report (and one parse first when the report is text
 * someone gave, not the tree perftracker just wrote) plus ~1 MB of page assets. */
#define _POSIX_C_SOURCE 200809L
#include "report/perfdisplay.h"
#include "report/perfdisplay_assets.h"
#include "report/report.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/outdir.h"

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

/* The folder that holds rel (a path inside the PerfDisplay folder, like "assets/app.js")
 * and rel's last name. create: make missing folders. 0, or -1 with err (or quietly, for a
 * folder that is not there and was not to be made). */
static int open_parent(const pt_out_dir *display, const char *rel, bool create, pt_out_dir *parent,
                       const char **name, pt_error *err)
{
    pt_out_dir at = PT_OUT_DIR_INIT;
    const char *p = rel;
    for (const char *slash; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        char part[256];
        snprintf(part, sizeof part, "%.*s", (int)(slash - p), p);
        pt_out_dir next;
        int rc = pt_out_dir_sub(&next, at.fd >= 0 ? &at : display, part, create, err);
        pt_out_dir_close(&at);
        if (rc != 0)
            return -1;
        at = next;
    }
    if (at.fd < 0) { /* rel is a name in the folder itself: a second descriptor of it */
        at.fd = fcntl(display->fd, F_DUPFD_CLOEXEC, 0);
        at.private_files = display->private_files;
        at.path = pt_xstrdup(display->path);
        if (at.fd < 0) {
            pt_error_set(err, "cannot write %s/%s: %s", display->path, rel, strerror(errno));
            free(at.path);
            return -1;
        }
    }
    *parent = at;
    *name = p;
    return 0;
}

/* Writes display/rel from parts (concatenated), atomically. */
static int write_file(const pt_out_dir *display, const char *rel, const void *const *parts, const size_t *sizes,
                      size_t part_count, bool executable, pt_error *err)
{
    pt_out_dir parent;
    const char *name;
    if (open_parent(display, rel, true, &parent, &name, err) != 0)
        return -1;
    int rc = pt_out_dir_write(&parent, name, parts, sizes, part_count, executable ? 0755 : 0644, err);
    pt_out_dir_close(&parent);
    return rc;
}

static void remove_file(const pt_out_dir *display, const char *rel)
{
    pt_out_dir parent;
    const char *name;
    pt_error ignored;
    if (open_parent(display, rel, false, &parent, &name, &ignored) != 0)
        return; /* its folder is not there: neither is it */
    pt_out_dir_remove(&parent, name);
    pt_out_dir_close(&parent);
}

static int write_assets(const pt_out_dir *display, pt_error *err)
{
    int rc = 0;
    for (size_t i = 0; i < pt_perfdisplay_asset_count && rc == 0; i++) {
        const pt_perfdisplay_asset *asset = &pt_perfdisplay_assets[i];
        const void *parts[] = {asset->data};
        rc = write_file(display, asset->path, parts, &asset->size, 1, asset->executable, err);
    }
    for (const char *const *absent = pt_perfdisplay_absent_assets; rc == 0 && *absent; absent++)
        remove_file(display, *absent); /* a stale copy from an older build; usually not there */
    return rc;
}

int pt_perfdisplay_render_data(const char *report_json, size_t report_len, pt_buf *data_js, bool *is_diff,
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
    *is_diff = pt_json_get(report, "diff_version") != NULL;
    pt_buf_puts(data_js, data_js_prefix);
    pt_json_write(data_js, report, -1);
    pt_buf_puts(data_js, ";\n");
    pt_json_free(report);
    return 0;
}

/* data.js of a document: doc when the caller has its tree (it was written from it), else
 * report_json parsed (a file someone gave). */
static int render_data(const pt_json *doc, const char *report_json, size_t report_len, pt_buf *data_js,
                       bool *is_diff, pt_error *err)
{
    if (!doc)
        return pt_perfdisplay_render_data(report_json, report_len, data_js, is_diff, err);
    *is_diff = pt_json_get(doc, "diff_version") != NULL;
    pt_buf_puts(data_js, data_js_prefix);
    pt_json_write(data_js, doc, -1);
    pt_buf_puts(data_js, ";\n");
    return 0;
}

static int write_report_data(const pt_out_dir *dir, const pt_json *doc, const char *report_json, size_t report_len,
                             pt_error *err)
{
    pt_buf data_js = PT_BUF_INIT;
    bool is_diff;
    if (render_data(doc, report_json, report_len, &data_js, &is_diff, err) != 0) {
        pt_buf_free(&data_js);
        return -1;
    }
    /* A diff (perftracker diff) keeps its own name beside the page; the other name goes,
     * so a folder never holds a stale document of the other kind. */
    const char *name = is_diff ? "diff.json" : "report.json";
    const void *js_parts[] = {data_js.data};
    const void *json_parts[] = {report_json};
    int rc = write_file(dir, "data.js", js_parts, &data_js.len, 1, false, err);
    if (rc == 0)
        rc = write_file(dir, name, json_parts, &report_len, 1, false, err);
    if (rc == 0)
        remove_file(dir, is_diff ? "report.json" : "diff.json"); /* usually not there */
    pt_buf_free(&data_js);
    return rc;
}

int pt_perfdisplay_write_into(const pt_out_dir *display_dir, const char *report_json, size_t report_len,
                              pt_error *err)
{
    return pt_perfdisplay_write_doc_into(display_dir, NULL, report_json, report_len, err);
}

int pt_perfdisplay_write_doc_into(const pt_out_dir *display_dir, const pt_json *doc, const char *report_json,
                                  size_t report_len, pt_error *err)
{
    /* The data first: a folder with a page but no data is worse than an old folder. */
    if (write_report_data(display_dir, doc, report_json, report_len, err) != 0)
        return -1;
    return write_assets(display_dir, err);
}

int pt_perfdisplay_write(const char *display_dir, const char *report_json, size_t report_len,
                         pt_error *err)
{
    pt_out_dir d;
    if (pt_out_dir_open(&d, display_dir, true, err) != 0)
        return -1;
    int rc = pt_perfdisplay_write_into(&d, report_json, report_len, err);
    pt_out_dir_close(&d);
    return rc;
}
