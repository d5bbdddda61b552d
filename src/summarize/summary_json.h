/* summary_json.h -- a worker summary rendered as JSON for people and tests. */
#ifndef PT_SUMMARIZE_SUMMARY_JSON_H
#define PT_SUMMARIZE_SUMMARY_JSON_H

#include "summarize/summary.h"
#include "util/json.h"

pt_json *pt_summary_to_json(const pt_worker_summary *s);

#endif
