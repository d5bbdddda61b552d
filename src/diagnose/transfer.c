/* transfer.c -- a collective's own transfer, timed by the links' counters.
 *
 * A collective's call on a worker lasts while it waits for the last worker to arrive,
 * then while the bytes move; its duration alone cannot tell the two apart (every call
 * of a job whose slow rank is not analysed waits for it). The links' counters can: the
 * collector samples the bytes the host's network links sent (host.nic_tx_mibps, every
 * 10 ms) and each GPU's NVLink traffic (gpuN.nvlink_tx_mibps, GPM), and a ring
 * all-reduce sends 2(n-1)/n of its bytes over each GPU's NVLink within a node, and as
 * much out of each node across nodes (every ring leaves it once): the rate those
 * counters reach while it moves is its bus bandwidth. The fastest sample of a worker is
 * that rate (a sample partly outside a transfer reads less, so a transfer shorter than
 * two samples reads under it: then the transfer said is longer, the saving smaller),
 * and the median over the workers that have the counter is the link's. Which counter:
 * the row's group, "network ..." or "nvlink ...".
 *
 * Cost: O(workers x metrics) once per call. */
#include "diagnose/transfer.h"
#include "summarize/classify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIB 1048576.0

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Whether metric `name` counts the bytes sent over the link `network` (else NVLink) says. */
static bool link_counter(const char *name, bool network)
{
    return network ? strcmp(name, "host.nic_tx_mibps") == 0
                   : strncmp(name, "gpu", 3) == 0 && ends_with(name, ".nvlink_tx_mibps");
}

/* The link's bus bandwidth in GB/s: the median over the workers with its counter of
 * their fastest sample; 0 where none has it. */
static double link_busbw_gbps(const pt_analysis *a, bool network)
{
    double *fastest = pt_xmalloc((a->n ? a->n : 1) * sizeof *fastest);
    size_t k = 0;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        double most = 0;
        for (size_t i = 0; i < s->metric_count; i++)
            if (s->metrics[i].name && link_counter(s->metrics[i].name, network) && isfinite(s->metrics[i].max))
                most = fmax(most, s->metrics[i].max);
        if (most > 0)
            fastest[k++] = most;
    }
    double gbps = k ? pt_median_of(fastest, k, a->scratch) * MIB / 1e9 : 0;
    free(fastest);
    return gbps;
}

double pt_measured_transfer_ms(const pt_analysis *a, const pt_fn_row *row, double *busbw_gbps, double *bytes)
{
    *busbw_gbps = *bytes = 0;
    if (!row->group || (strncmp(row->group, "network", 7) != 0 && strncmp(row->group, "nvlink", 6) != 0))
        return 0;
    int world = 0;
    for (size_t w = 0; w < a->n; w++) {
        pt_function_summary cell;
        const pt_function_summary *fn = pt_row_function(a, row, w, &cell);
        if (fn && isfinite(fn->bytes_max))
            *bytes = fmax(*bytes, fn->bytes_max);
        world = a->workers[w]->world_size > world ? a->workers[w]->world_size : world;
    }
    *busbw_gbps = link_busbw_gbps(a, strncmp(row->group, "network", 7) == 0);
    if (*bytes <= 0 || *busbw_gbps <= 0)
        return 0;
    bool output_size;
    double factor = pt_busbw_factor(row->name, strlen(row->name), world > 0 ? world : (int)a->n, &output_size);
    return *bytes * factor / (*busbw_gbps * 1e9) * 1e3;
}
