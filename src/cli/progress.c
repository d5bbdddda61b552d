/* progress.c -- the CLI progress bar (see progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/progress.h"
#include "util/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pt_progress_start(pt_progress *p, const char *what, uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->what = what;
    p->total = total;
    const char *force = getenv("PT_PROGRESS");
    p->interactive = (force && strcmp(force, "1") == 0) || isatty(STDERR_FILENO);
    p->active = true;
    p->last_decile = -1;
}

static void draw(pt_progress *p, uint64_t done, const char *extra, bool final)
{
    double frac = p->total ? (double)done / (double)p->total : 1.0;
    if (frac > 1)
        frac = 1;
    if (!p->interactive) {
        int decile = (int)(frac * 10);
        if (decile == p->last_decile && !final)
            return;
        p->last_decile = decile;
        fprintf(stderr, "perftracker: %3.0f%% (%llu/%llu %s)%s%s\n", 100 * frac, (unsigned long long)done,
                (unsigned long long)p->total, p->what, extra && *extra ? ", " : "", extra ? extra : "");
        return;
    }
    char bar[31];
    int filled = (int)(frac * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
    bar[30] = '\0';
    fprintf(stderr, "\r[%s] %3.0f%% %llu/%llu %s%s%s%s", bar, 100 * frac, (unsigned long long)done,
            (unsigned long long)p->total, p->what, extra && *extra ? ", " : "", extra ? extra : "",
            final ? "\n" : "");
    fflush(stderr);
}

void pt_progress_update(pt_progress *p, uint64_t done, const char *extra)
{
    if (!p->active)
        return;
    int64_t now = pt_now_ns();
    if (now - p->last_ns < 100000000 && done < p->total)
        return;
    p->last_ns = now;
    p->last_shown = done;
    draw(p, done, extra, false);
}

void pt_progress_finish(pt_progress *p, uint64_t done, const char *extra)
{
    if (!p->active)
        return;
    /* A log already showing 100% needs no second line; a terminal needs its newline. */
    if (p->interactive || p->last_shown != done || p->total != done)
        draw(p, done, extra, true);
    p->active = false;
}
