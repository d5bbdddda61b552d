/* stats.h -- robust statistics for comparing workers: median, MAD, quantiles. */
#ifndef PT_UTIL_STATS_H
#define PT_UTIL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Both sort their input in place. Empty input gives 0. */
double pt_median(double *values, size_t n);
int64_t pt_median_i64(int64_t *values, size_t n);
/* q in [0,1], linear interpolation between order statistics. */
double pt_quantile(double *values, size_t n, double q);
/* Median absolute deviation around `center` (unscaled). Uses scratch of n doubles. */
double pt_mad(const double *values, size_t n, double center, double *scratch);
double pt_mean(const double *values, size_t n);
double pt_stddev(const double *values, size_t n);

#endif
