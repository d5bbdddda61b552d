/* summary_json.h -- a worker summary rendered as JSON for people and tests. */
#ifndef PT_SUMMARIZE_SUMMARY_JSON_H
#define PT_SUMMARIZE_SUMMARY_JSON_H

#include "summarize/summary.h"
#include "util/json.h"

pt_json *pt_summary_to_json(const pt_worker_summary *s);
/* A new object that names a function as every document does: "class", "name", and
 * "group" when it has one. */
pt_json *pt_function_json_object(pt_class cls, const char *name, const char *group);

#endif
