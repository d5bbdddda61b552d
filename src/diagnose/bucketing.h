/* bucketing.h -- what bucketing a collective's calls would leave of them (bucketing.c):
 * the latency its calls pay for their few bytes, and the last bucket a bucketed job still
 * waits for. candidates.c makes the finding. */
#ifndef PT_DIAGNOSE_BUCKETING_H
#define PT_DIAGNOSE_BUCKETING_H

#include "diagnose/analysis.h"

#define PT_BUCKET_BYTES (25.0 * 1024 * 1024) /* DDP's bucket_cap_mb default */

/* A collective row on one worker, as bucketing sees it. */
typedef struct pt_bucketing {
    double calls;        /* per step */
    double call_ms;      /* median */
    double latency_ms;   /* per step: what bucketing removes of the calls' latency */
    double last_share;   /* the last bucket's share of the step's bytes; NAN unknown */
} pt_bucketing;

/* Row's calls on worker w; all 0 (last_share NAN) when it has no bandwidth to judge. */
pt_bucketing pt_bucketing_of(const pt_analysis *a, const pt_fn_row *row, size_t w);
/* What a bucketed job still waits for, ms per step, of the `waited` its collectives take
 * past the last worker's work, `latency` of which bucketing removes. */
double pt_bucketed_still_waits_ms(double waited, double latency, double last_share, double step_ms);

#endif
