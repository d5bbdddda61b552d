/* diff_report.h -- a diff document (`perftracker diff`, docs/diff-schema.md) for people:
 * the short summary the CLI prints. diff.json and its PerfDisplay page are written by
 * pt_report_write_document (report.h) like a report. */
#ifndef PT_REPORT_DIFF_REPORT_H
#define PT_REPORT_DIFF_REPORT_H

#include "util/json.h"

/* The verdict, the step and class table, the largest function changes, the functions
 * added and removed, the findings that appeared or went away, and the notes. */
void pt_diff_render_text(const pt_json *diff, pt_buf *out);
/* Only the verdict line ("Verdict (slower): ..."): what --quiet still prints. */
void pt_diff_render_verdict(const pt_json *diff, pt_buf *out);

#endif
