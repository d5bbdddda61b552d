/* stats.c -- medians by sorting: the inputs are per-worker or per-function vectors of at
 * most a few hundred thousand values, where qsort is fast and simple to trust. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

double pt_quantile(double *values, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(values, n, sizeof *values, cmp_double);
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    if (lo + 1 >= n)
        return values[n - 1];
    double frac = pos - (double)lo;
    return values[lo] + (values[lo + 1] - values[lo]) * frac;
}

double pt_median(double *values, size_t n)
{
    return pt_quantile(values, n, 0.5);
}

int64_t pt_median_i64(int64_t *values, size_t n)
{
    if (n == 0)
        return 0;
    qsort(values, n, sizeof *values, cmp_i64);
    if (n % 2)
        return values[n / 2];
    /* Average of the two middle values without overflow. */
    int64_t a = values[n / 2 - 1], b = values[n / 2];
    return a + (b - a) / 2;
}

double pt_mad(const double *values, size_t n, double center, double *scratch)
{
    for (size_t i = 0; i < n; i++)
        scratch[i] = fabs(values[i] - center);
    return pt_median(scratch, n);
}

double pt_mean(const double *values, size_t n)
{
    if (n == 0)
        return 0;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += values[i];
    return sum / (double)n;
}

double pt_stddev(const double *values, size_t n)
{
    if (n < 2)
        return 0;
    double mean = pt_mean(values, n), sq = 0;
    for (size_t i = 0; i < n; i++)
        sq += (values[i] - mean) * (values[i] - mean);
    return sqrt(sq / (double)(n - 1));
}
