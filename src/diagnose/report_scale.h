/* report_scale.h -- the bounded form of report.json (docs/report-schema.md, "The bounded
 * form"): above PT_REPORT_FULL_MAX_WORKERS analysed workers nothing in the report grows
 * as workers x functions. Full detail is kept for the workers the report is about (named
 * by a finding, outliers, listed by a section, examples: pt_keep_worker); everyone else is
 * a row of scale.worker_table, part of the distributions and per-node aggregates, and in
 * full detail in the parts written beside report.json (pt_job_input.write_part). */
#ifndef PT_DIAGNOSE_REPORT_SCALE_H
#define PT_DIAGNOSE_REPORT_SCALE_H

#include "util/json.h"
#include "util/strtab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Up to this many analysed workers the report is the full form, unchanged. */
#define PT_REPORT_FULL_MAX_WORKERS 4096
/* Bounded form: most workers in full detail in "workers", most entries a section's
 * per-worker map keeps, workers per part file. */
#define PT_REPORT_FULL_DETAIL_MAX 1024
#define PT_REPORT_LISTED_MAX 64
#define PT_REPORT_PART_WORKERS 1024
/* Outliers kept in full detail: the slowest, the fastest, the least GPU-busy. */
#define PT_REPORT_OUTLIERS 16

/* Why a worker has full detail in the bounded form; lower values win. */
typedef enum pt_detail {
    PT_DETAIL_NONE = 0,
    PT_DETAIL_NAMED,    /* a finding names it */
    PT_DETAIL_OUTLIER,  /* among the slowest, fastest or least GPU-busy */
    PT_DETAIL_LISTED,   /* a section lists it by name */
    PT_DETAIL_EXAMPLE,  /* rank 0, the median worker, a section's normal example */
} pt_detail;

const char *pt_detail_name(pt_detail d); /* "named", ... */

/* The threshold in force: PERFTRACKER_REPORT_FULL_MAX when set to a number >= 0, else
 * PT_REPORT_FULL_MAX_WORKERS. */
size_t pt_report_full_max_workers(void);

typedef struct pt_report_scale {
    size_t full_max;        /* the threshold this report was written with */
    uint8_t *detail;        /* [worker] pt_detail */
    size_t kept;            /* workers with detail != NONE */
    pt_json *truncated;     /* array: every cut map or list */
    pt_strtab hosts;        /* node id -> host, in order of each host's lowest rank */
    uint32_t *node_of;      /* [worker] node id */
} pt_report_scale;

/* Robust summaries of n values (any order; values is not changed): quantiles p0..p100
 * and a 32-bin histogram, as scale.distributions holds them. NAN values are skipped. */
pt_json *pt_distribution_json(const double *values, size_t n);
/* Its quantiles alone: {"p0": .., ..., "p100": ..}. */
pt_json *pt_quantiles_json(const double *values, size_t n);

#endif
