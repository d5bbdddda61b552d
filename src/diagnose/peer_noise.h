/* peer_noise.h -- the noise test of peers.c: whether a worker's excess over its peers is
 * real (peer_noise.c). */
#ifndef PT_DIAGNOSE_PEER_NOISE_H
#define PT_DIAGNOSE_PEER_NOISE_H

#include "diagnose/finding.h"

#include <stdbool.h>
#include <stddef.h>

#define STEP_SIGMAS 5.0   /* what a difference in time must clear: sigmas of the noise */
#define SPREAD_SIGMAS 5.0 /* ... of the spread across workers, when steps cannot be compared */
#define CHANCE_WORKERS 0.01 /* a worker further up in every step than chance puts this many of
                               the job's workers is slower (peer_noise.c, steadily_above) */

/* One function's (or class's) values on every worker, and what chance reaches. */
typedef struct peer_values {
    size_t steps;
    double *mean;        /* [w]: ms per step */
    double *per_step;    /* [w * steps + s], when steps >= 2 */
    double median;       /* the typical worker */
    double threshold;    /* statistical: what clears the typical worker's noise (never under the floor) */
    double noise;        /* the typical worker's own step-to-step spread (steps >= 2) */
    double floor;        /* pt_floor_ms */
    double *own_noise;   /* [w]: that worker's own step-to-step spread (steps >= 2) */
    double *step_median; /* [s] */
    double swing;        /* how far the typical worker itself moves from step to step (the
                            spread of step_median): the machine-wide slowdown's noise */
    bool cpu_side;       /* the values are CPU-side time (runtime calls, Python) ... */
    bool *contended;     /* [w]: ... and that worker's host CPU is saturated and shared */
    size_t n;            /* workers */
    double *sorted;      /* [s * n + i]: step s's values in ascending order, when some worker
                            is above the typical one by the floor in every step; else NULL */
} peer_values;

void pt_peer_values_init(peer_values *v, const pt_analysis *a, size_t steps);
void pt_peer_values_free(peer_values *v);
/* The typical worker and its noise, from v->mean and v->per_step. */
void pt_peer_measure(const pt_analysis *a, peer_values *v);
/* Above the typical worker in every step (all but one of four or more), not in one. */
bool pt_peer_above_in_steps(const peer_values *v, size_t w);
/* Above the typical worker by more than margin in every step (of two or more). */
bool pt_peer_above_in_each_step(const peer_values *v, size_t w, double margin);
/* CPU-side time on a host whose saturated CPU several workers share, swinging: no rank
 * is named for it. */
bool pt_peer_load_bound(const peer_values *v, size_t w);
/* What a difference in time must clear on worker w. */
double pt_peer_time_threshold(const peer_values *v, size_t w);
/* Worker w's excess over the typical worker when it is real, else 0; exact evidence
 * (extra calls) needs only the floor. */
double pt_peer_real_excess(const pt_analysis *a, const peer_values *v, size_t w, bool exact);
bool pt_peer_cpu_side(pt_class cls);
/* A row's values, a class's, or several classes' together, measured. */
void pt_peer_row_values(const pt_analysis *a, const pt_fn_row *row, peer_values *v);
void pt_peer_classes_values(const pt_analysis *a, const pt_class *classes, size_t count, peer_values *v);
void pt_peer_class_values(const pt_analysis *a, pt_class cls, peer_values *v);

#endif
