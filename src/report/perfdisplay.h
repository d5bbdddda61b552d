/* perfdisplay.h -- writing PerfDisplay/, the portable web report.
 *
 * A PerfDisplay folder is self-contained: index.html, assets/ (the page's script and
 * style, and the chart library when the build bundled it), the report as report.json and
 * as data.js (so the page also opens from file://), and app.py, which serves the folder
 * with Python's standard library only (`cd PerfDisplay && python3 app.py`, then
 * http://127.0.0.1:5000/). The page's files are compiled into the binary, so any
 * perftracker binary can write a PerfDisplay anywhere, with no install path. */
#ifndef PT_REPORT_PERFDISPLAY_H
#define PT_REPORT_PERFDISPLAY_H

#include "util/buf.h"
#include "util/common.h"
#include "util/json.h"
#include "util/outdir.h"

#include <stdbool.h>

/* Writes the folder display_dir itself (e.g. "OUT/PerfDisplay"), creating it and its
 * parents when missing and replacing the files of an earlier PerfDisplay there; each file
 * appears complete or not at all, created with O_EXCL | O_NOFOLLOW in checked folders. report_json is the whole report.json document; it must
 * parse as JSON (it is re-serialised, HTML-safe, into data.js). A diff document (with
 * "diff_version") is kept as diff.json instead of report.json. 0 or -1 with err. */
int pt_perfdisplay_write(const char *display_dir, const char *report_json, size_t report_len,
                         pt_error *err);
/* The same into a folder already opened and checked (outdir.h). */
int pt_perfdisplay_write_into(const pt_out_dir *display_dir, const char *report_json, size_t report_len,
                              pt_error *err);

/* The same, data.js written from doc, the tree report_json was written from (no parse:
 * the JSON writer is HTML-safe whatever the tree holds). */
int pt_perfdisplay_write_doc_into(const pt_out_dir *display_dir, const pt_json *doc, const char *report_json,
                                  size_t report_len, pt_error *err);
/* data.js for report_json, appended to data_js (the report parsed and re-serialised, as
 * the writers above write it); is_diff: a diff document. 0 or -1 with err when the text
 * is not a JSON object. */
int pt_perfdisplay_render_data(const char *report_json, size_t report_len, pt_buf *data_js, bool *is_diff,
                               pt_error *err);

/* Whether this binary bundles the chart library (false when npm was unavailable at build
 * time: the page then shows tables and its own canvas heatmap, and says so). */
bool pt_perfdisplay_has_charts(void);

#endif
