/* bucketing.c -- what bucketing a collective's calls would leave of them.
 *
 * A row's calls per step, median per-call time and bus bandwidth (% of the link's peak).
 * What a call's bytes take at the bandwidth it reaches is throughput x time; the rest of
 * each call is its latency. Bucketed into buckets of PT_BUCKET_BYTES (DDP's default), the
 * calls beyond one per bucket stop paying it: (calls - buckets) x time x (1 - throughput),
 * no more than the row's exposed time. The buckets are counted from bandwidth x time, the
 * bus bytes (an all-reduce's twice its size): more than the bytes, so fewer calls to
 * remove. A call's time holds its wait for the other ranks too, read as latency: a DDP
 * job's own buckets (as many calls as buckets of their bytes) would otherwise seem to
 * pay some. Rows without bandwidth (no collective arguments in the trace, gloo) and
 * point-to-point transfers (a pipeline's activations: nothing to bucket) are not judged.
 *
 * Bucketed, the calls also overlap the backward pass (DDP reduces a bucket as soon as its
 * gradients are final), all but the last bucket: the gradients the backward pass
 * finishes last, the model's first layers, which no work is left to hide. That bucket
 * holds the largest tensor and up to a bucket's worth of others (DDP closes a bucket once
 * it passes its cap, so a tensor above the cap rides in the bucket being filled; in a
 * language model the largest is the input embedding, the first parameter and so the last
 * gradient; where the largest is finished earlier the last bucket is smaller and the
 * saving larger than said). Its share of the step's bytes is its share of the transfer,
 * the time the collectives take past the last worker's work less their latency; those
 * are its real bytes (summary version 6). Without them, a bucketed job is taken to
 * expose BUCKETED_EXPOSED of the step. */
#include "diagnose/bucketing.h"
#include "summarize/classify.h"

#include <math.h>

/* The share of the step communication is expected to take in the common rules'
 * exposed-communication finding (findings.c EXPECTED_COMM). */
#define BUCKETED_EXPOSED 0.10

/* The share of a step's bytes the last bucket holds; NAN when the summary carries no
 * bytes. */
static double last_bucket_share(const pt_function_summary *fn, double calls)
{
    double step_bytes = fn->bytes_avg * calls;
    if (!(fn->bytes_max > 0) || !(step_bytes > 0))
        return NAN;
    return fmin(1, (fn->bytes_max + PT_BUCKET_BYTES) / step_bytes);
}

pt_bucketing pt_bucketing_of(const pt_analysis *a, const pt_fn_row *row, size_t w)
{
    pt_function_summary cell;
    const pt_function_summary *fn = pt_row_function(a, row, w, &cell);
    pt_bucketing r = {0, 0, 0, NAN};
    if (!fn || fn->count < 2 || fn->median_ns <= 0 || !(fn->throughput_avg_pct > 0) || !(fn->busbw_avg_gbps > 0) ||
        pt_collective_is_point_to_point(row->name))
        return r;
    r.calls = (double)fn->count / a->steps[w];
    r.call_ms = (double)fn->median_ns / 1e6;
    double throughput = fmin(1, fn->throughput_avg_pct / 100);
    double bytes = fn->busbw_avg_gbps * 1e9 * (r.call_ms / 1e3);
    double buckets = fmax(1, ceil(r.calls * bytes / PT_BUCKET_BYTES));
    double latency = fmax(0, r.calls - buckets) * r.call_ms * (1 - throughput);
    r.latency_ms = fmin(latency, (double)fn->exposed_ns / 1e6 / a->steps[w]);
    r.last_share = last_bucket_share(fn, r.calls);
    return r;
}

double pt_bucketed_still_waits_ms(double waited, double latency, double last_share, double step_ms)
{
    if (isnan(last_share))
        return fmin(waited, BUCKETED_EXPOSED * step_ms);
    return fmax(0, waited - latency) * last_share;
}
