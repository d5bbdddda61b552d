/* stats.h -- the statistics the analysis needs: medians (by quickselect, linear time,
 * which keeps the cross-worker step linear in the number of workers) and means. */
#ifndef PT_UTIL_STATS_H
#define PT_UTIL_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Medians reorder their input. Even counts give the mean of the two middle values.
 * Empty input gives 0. */
double pt_median(double *values, size_t n);
int64_t pt_median_i64(int64_t *values, size_t n);
/* The k-th smallest of n (k < n) and its neighbours in order: out[0] the (k-1)-th, NAN
 * when k is 0; out[1] the k-th; out[2] the (k+1)-th, NAN when k is n - 1. Linear time,
 * where sorting to read three values is n log n. Reorders values. */
void pt_select_around(double *values, size_t n, size_t k, double out[3]);
double pt_mean(const double *values, size_t n);
/* Sample standard deviation (n - 1); 0 below two values. */
double pt_sample_sd(const double *values, size_t n);

#endif
