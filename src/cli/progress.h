/* progress.h -- a one-line progress bar on stderr for long CLI work (only when stderr is
 * a terminal or PT_PROGRESS=1; otherwise a line every 10%). Shared by the subcommands. */
#ifndef PT_CLI_PROGRESS_H
#define PT_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pt_progress {
    const char *what;     /* "files", "MB", ... */
    uint64_t total;
    uint64_t last_shown;
    int64_t last_ns;
    int last_decile;
    bool interactive;
    bool active;
} pt_progress;

void pt_progress_start(pt_progress *p, const char *what, uint64_t total);
/* Redraws at most every 100 ms; extra is a short note ("3 unreadable"). */
void pt_progress_update(pt_progress *p, uint64_t done, const char *extra);
void pt_progress_finish(pt_progress *p, uint64_t done, const char *extra);

#endif
