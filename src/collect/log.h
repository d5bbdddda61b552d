/* log.h -- the collector's only output: one line on stderr, "[perftracker] ...".
 *
 * The collector lives inside the user's training process, where a Python exception or a
 * crash is never acceptable and silence hides problems; a single line per condition is
 * the middle ground. The line goes straight to fd 2 with one write(), so it is safe from
 * any thread (no stdio lock) and never interleaves mid-line. PERFTRACKER_QUIET=1 mutes
 * everything but failures. */
#ifndef PT_COLLECT_LOG_H
#define PT_COLLECT_LOG_H

#include "util/common.h"

#include <stdbool.h>

typedef enum pt_log_level { PT_LOG_INFO, PT_LOG_FAILURE } pt_log_level;

void pt_collect_log(pt_log_level level, const char *fmt, ...) PT_PRINTF(2, 3);
void pt_collect_log_quiet(bool quiet);

#endif
