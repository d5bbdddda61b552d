/* summarize_functions.c -- stages 4 and 5 of the pipeline (summarize.c): per-function
 * statistics, and the functions a summary keeps.
 *
 * A function is (class, id): a kernel key for compute kernels (name, grid, block), a
 * name for collectives, memory operations and runtime calls, a call stack for Python.
 * Each execution adds to its count, total and maximum, logs its clipped interval, and
 * its duration for the median (counting sort by function, then quickselect per function:
 * linear time). Exposed time is settled once all executions are known: the union of a
 * function's executions, its part not covered by a higher class, in total and per step
 * (sum_settle_functions). Communication kernels add their bus bandwidth and its share of
 * the link's peak (account_throughput). Then, per class, the first KEEP_ALWAYS functions
 * by weight and any above KEEP_MIN_SHARE of the window are kept, up to keep_max, so the
 * summary stays tens of kilobytes whatever the trace size (sum_emit_functions); those
 * that render to one name become one (sum_merge_same_names). */
#include "summarize/summarize_state.h"
#include "summarize/classify.h"
#include "util/group.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* How many functions of each class a summary keeps, and the share of the window below
 * which a function is dropped once the first few are kept. */
#define KEEP_ALWAYS 20
#define KEEP_MIN_SHARE 1e-4
static const size_t keep_max[PT_CLASS_COUNT] = {100, 24, 48, 40, 150};

/* ------------------------------------------------------------ executions */

/* Exposed time is settled once every execution is known (sum_settle_functions): the union
 * of a function's executions, not their sum, so calls running at once on several threads
 * count once. */
static void log_interval(func_acc *f, int64_t a, int64_t b)
{
    if (b <= a)
        return;
    PT_GROW(f->calls, f->call_cap, f->call_count + 1);
    f->calls[f->call_count++] = (pt_interval){a, b};
}

/* Accounts one execution of a span-like activity of class cls. */
static func_acc *account_span(reducer *r, pt_class cls, uint32_t id, int64_t start, int64_t end)
{
    if (!in_window(r, start, end))
        return NULL;
    func_acc *f = sum_func_get(r, cls, id);
    int64_t a = start, b = end;
    int64_t len = clip(r, &a, &b) ? b - a : 0;
    f->count++;
    f->total_ns = add_saturating(f->total_ns, len);
    log_interval(f, a, b);
    if (end - start > f->max_ns)
        f->max_ns = end - start;
    if (r->exec_count == r->exec_cap) {
        PT_GROW(r->exec_func, r->exec_cap, r->exec_count + 1);
        r->exec_dur = pt_xrealloc(r->exec_dur, r->exec_cap * sizeof *r->exec_dur);
    }
    r->exec_func[r->exec_count] = (uint32_t)(f - r->funcs);
    r->exec_dur[r->exec_count++] = end - start;
    return f;
}

/* ------------------------------------------------------------ GPU, runtime, CPU comm */

static uint32_t comm_group_name(reducer *r, uint32_t kernel_name, const coll_rec *c)
{
    const pt_strtab *names = &r->s->names;
    const pt_trace_meta *m = r->meta;
    int group = c && c->group_size > 0 ? c->group_size : m->world_size;
    const char *link = pt_collective_link(m->device_name, m->device_count, group);
    const char *pattern = pt_collective_pattern(pt_strtab_get(names, kernel_name), pt_strtab_len(names, kernel_name));
    char buf[64];
    snprintf(buf, sizeof buf, "%s %s", link, pattern);
    return pt_strtab_intern(&r->s->names, buf, strlen(buf));
}

static void account_throughput(reducer *r, func_acc *f, const span_rec *k)
{
    const coll_rec *c = k->aux != NO_ID ? &r->s->colls[k->aux] : NULL;
    if (f->group_name == NO_ID)
        f->group_name = comm_group_name(r, f->id, c);
    if (!c || c->dtype_bytes <= 0 || k->end <= k->start || c->name == NO_ID)
        return;
    const pt_strtab *names = &r->s->names;
    bool use_out;
    int n = c->group_size > 0 ? c->group_size : 1;
    double factor = pt_busbw_factor(pt_strtab_get(names, c->name), pt_strtab_len(names, c->name), n, &use_out);
    double bytes = (double)(use_out ? c->out_nelems : c->in_nelems) * c->dtype_bytes;
    double busbw_gbps = bytes / (double)(k->end - k->start) * factor; /* bytes/ns == GB/s */
    const char *link = pt_collective_link(r->meta->device_name, r->meta->device_count, n);
    double pct = 100.0 * busbw_gbps / pt_link_peak_gbps(link, r->meta->device_name);
    f->tput_sum += pct;
    f->tput_sq += pct * pct;
    f->busbw_sum += busbw_gbps;
    f->bytes_sum += bytes;
    f->bytes_max = fmax(f->bytes_max, bytes);
    f->tput_n++;
}

void sum_account_gpu_and_runtime(reducer *r)
{
    pt_summarizer *s = r->s;
    for (size_t i = 0; i < s->kernels_count; i++) {
        const span_rec *k = &s->kernels[i];
        if (!sum_kernel_is_collective(r, k->key)) {
            account_span(r, PT_CLASS_COMPUTE, k->key, k->start, k->end);
            continue;
        }
        /* Collectives are keyed by kernel name alone, as the seed reports them. */
        func_acc *f = account_span(r, PT_CLASS_COMM, kernel_key_of(&s->kernel_keys, k->key).name, k->start, k->end);
        if (f)
            account_throughput(r, f, k);
    }
    for (size_t i = 0; i < s->memops_count; i++)
        account_span(r, PT_CLASS_MEMORY, s->memops[i].key, s->memops[i].start, s->memops[i].end);
    for (size_t i = 0; i < s->runtime_count; i++)
        account_span(r, PT_CLASS_RUNTIME, s->runtime[i].key, s->runtime[i].start, s->runtime[i].end);
}

/* CPU-side collectives (gloo jobs) are communication functions in their own right. */
void sum_account_cpu_collectives(reducer *r)
{
    pt_summarizer *s = r->s;
    char group[64];
    snprintf(group, sizeof group, "cpu %s", r->meta->backend[0] ? r->meta->backend : "collective");
    uint32_t group_id = pt_strtab_intern(&s->names, group, strlen(group));
    for (size_t i = 0; i < s->cpu_count; i++) {
        const cpu_rec *e = &s->cpu[i];
        if (!sum_name_is_cpu_collective(r, e->name))
            continue;
        func_acc *f = account_span(r, PT_CLASS_COMM, sum_normalized_frame(r, e->name), e->start, e->end);
        if (f)
            f->group_name = group_id;
    }
}

/* ------------------------------------------------------------ medians */

int64_t *sum_compute_medians(reducer *r)
{
    size_t nf = r->funcs_count;
    int64_t *grouped = pt_xmalloc((r->exec_count ? r->exec_count : 1) * sizeof *grouped);
    size_t *offset = pt_group_by_key(r->exec_func, r->exec_count, nf, r->exec_dur, sizeof *r->exec_dur, grouped);
    int64_t *medians = pt_xcalloc(nf ? nf : 1, sizeof *medians);
    for (size_t f = 0; f < nf; f++)
        medians[f] = pt_median_i64(grouped + offset[f], offset[f + 1] - offset[f]);
    free(grouped);
    free(offset);
    return medians;
}

/* ------------------------------------------------------------ exposed time */

/* Per function: the union of its executions, its exposed part (not covered by a higher
 * class), and that per step. Each function's executions arrive in nearly always time
 * order and are sorted only when they are not; they are freed as soon as they are
 * settled. CPU-side functions report the union as their total (a call on two threads at
 * once is busy once); GPU kernels keep the summed duration, the seed's per-kernel
 * execution time. */
void sum_settle_functions(reducer *r)
{
    size_t nf = r->funcs_count;
    for (size_t f = 0; f < nf; f++) {
        func_acc *acc = &r->funcs[f];
        if (acc->cls == PT_CLASS_PYTHON) { /* accounted segment by segment (account_work) */
            acc->total_ns = add_saturating(acc->total_ns, acc->waiting_ns);
            continue;
        }
        pt_interval *g = acc->calls;
        size_t k = acc->call_count;
        bool sorted = true;
        for (size_t i = 1; i < k && sorted; i++)
            sorted = g[i - 1].start <= g[i].start;
        if (!sorted)
            qsort(g, k, sizeof *g, sum_cmp_interval);
        const pt_timeline *above = &r->layer[acc->cls];
        int64_t busy = 0, exposed = 0;
        for (size_t i = 0; i < k;) {
            int64_t a = g[i].start, b = g[i].end;
            for (i++; i < k && g[i].start <= b; i++)
                b = PT_MAX(b, g[i].end);
            busy = add_saturating(busy, b - a);
            exposed = add_saturating(exposed, (b - a) - pt_timeline_covered(above, a, b));
            if (r->step_values)
                sum_add_step_exposure(r, f, above, a, b);
        }
        free(acc->calls);
        acc->calls = NULL;
        acc->exposed_ns = exposed;
        if (acc->cls != PT_CLASS_COMPUTE && acc->cls != PT_CLASS_MEMORY)
            acc->total_ns = busy;
    }
}

/* ------------------------------------------------------------ the functions kept */

/* Compute kernels are keyed by kernel key (name + grid + block, the seed's
 * "name320_1_1|512_1_1"), Python by call stack, everything else by name. */
static void render_function_name(const reducer *r, const func_acc *f, pt_buf *out)
{
    const pt_strtab *names = &r->s->names;
    if (f->cls == PT_CLASS_PYTHON) {
        sum_render_stack(r, f->id, out);
    } else if (f->cls == PT_CLASS_COMPUTE) {
        kernel_key k = kernel_key_of(&r->s->kernel_keys, f->id);
        pt_buf_append(out, pt_strtab_get(names, k.name), pt_strtab_len(names, k.name));
        if (k.grid[0] > 0)
            pt_buf_printf(out, "%d_%d_%d|%d_%d_%d", k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                          k.block[2]);
    } else {
        pt_buf_append(out, pt_strtab_get(names, f->id), pt_strtab_len(names, f->id));
    }
}

typedef struct ranked {
    const func_acc *f;
    size_t index;
    int64_t weight;
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    int order = pt_cmp_i64(x->f->cls, y->f->cls);
    if (order == 0)
        order = pt_cmp_i64(y->weight, x->weight); /* heaviest first */
    return order ? order : pt_cmp_i64((int64_t)x->index, (int64_t)y->index); /* stable, deterministic */
}

/* Keeps, per class, the functions that carry time: the first KEEP_ALWAYS by weight
 * and then any above KEEP_MIN_SHARE of the window, up to keep_max. Runtime APIs are
 * ranked by total time (the seed's "execution time / monitoring duration"), the rest
 * by exposed time (Python: plus its waiting, so the frames a step blocks in stay visible). */
void sum_emit_functions(reducer *r, pt_worker_summary *out, const int64_t *medians)
{
    size_t n = r->funcs_count;
    ranked *order = pt_xmalloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) {
        const func_acc *f = &r->funcs[i];
        order[i] = (ranked){f, i, f->cls == PT_CLASS_RUNTIME ? f->total_ns : add_saturating(f->exposed_ns, f->waiting_ns)};
    }
    qsort(order, n, sizeof *order, cmp_ranked);
    out->functions = pt_xcalloc(n ? n : 1, sizeof *out->functions);
    int64_t floor_ns = (int64_t)((double)(r->w1 - r->w0) * KEEP_MIN_SHARE);
    size_t kept_in_class = 0;
    for (size_t i = 0; i < n; i++) {
        const func_acc *f = order[i].f;
        if (i == 0 || order[i - 1].f->cls != f->cls)
            kept_in_class = 0;
        if (f->count == 0 && f->total_ns == 0 && f->waiting_ns == 0)
            continue;
        if (kept_in_class >= keep_max[f->cls] || (kept_in_class >= KEEP_ALWAYS && order[i].weight < floor_ns))
            continue;
        kept_in_class++;
        pt_function_summary *fs = &out->functions[out->function_count++];
        pt_buf name = PT_BUF_INIT;
        render_function_name(r, f, &name);
        fs->cls = f->cls;
        fs->name = pt_buf_take(&name);
        if (f->group_name != NO_ID)
            fs->group = pt_xstrdup(pt_strtab_get(&r->s->names, f->group_name));
        fs->count = f->count;
        fs->total_ns = f->total_ns;
        fs->exposed_ns = f->exposed_ns;
        fs->waiting_ns = f->waiting_ns;
        if (r->step_values) {
            fs->step_count = r->step_values;
            fs->step_exposed_ns = pt_xmalloc(r->step_values * sizeof *fs->step_exposed_ns);
            memcpy(fs->step_exposed_ns, r->step_exposed + order[i].index * r->step_values,
                   r->step_values * sizeof *fs->step_exposed_ns);
        }
        fs->max_ns = f->max_ns;
        fs->median_ns = f->cls == PT_CLASS_PYTHON ? 0 : medians[order[i].index];
        uint32_t caller = f->cls == PT_CLASS_RUNTIME ? sum_main_caller(r, f->id) : NO_ID;
        if (caller != NO_ID) {
            pt_buf stack = PT_BUF_INIT;
            sum_render_stack(r, caller, &stack);
            fs->caller = pt_buf_take(&stack);
        }
        if (f->tput_n) {
            double mean = f->tput_sum / (double)f->tput_n;
            double var = f->tput_sq / (double)f->tput_n - mean * mean;
            fs->throughput_avg_pct = mean;
            fs->throughput_std_pct = var > 0 ? sqrt(var) : 0;
            fs->busbw_avg_gbps = f->busbw_sum / (double)f->tput_n;
            fs->bytes_avg = f->bytes_sum / (double)f->tput_n;
            fs->bytes_max = f->bytes_max;
        }
    }
    free(order);
}

/* Two functions can render to one name: Python stacks deeper than 256 frames keep only
 * their innermost frames, and a kernel literally named like another's "name|grid" key.
 * Nothing downstream could tell them apart, and the analysis keys functions by
 * (class, name), so they become one function: counts, times and per-step times add
 * (CPU-side and GPU times capped by the window and the step, which their union never
 * exceeds), and the heavier one, kept first, gives the median and throughput. */
static int cmp_function_name(const void *a, const void *b)
{
    const pt_function_summary *x = *(const pt_function_summary *const *)a, *y = *(const pt_function_summary *const *)b;
    int order = pt_cmp_i64(x->cls, y->cls);
    if (order == 0)
        order = strcmp(x->name, y->name);
    return order ? order : (x > y) - (x < y); /* the first kept (the heavier) first */
}

static void merge_into(pt_function_summary *into, pt_function_summary *from, const pt_worker_summary *out)
{
    bool unioned = into->cls != PT_CLASS_PYTHON; /* Python time adds up over threads */
    into->count = into->count + from->count < into->count ? UINT64_MAX : into->count + from->count;
    into->total_ns = add_saturating(into->total_ns, from->total_ns);
    into->waiting_ns = add_saturating(into->waiting_ns, from->waiting_ns);
    into->exposed_ns = add_saturating(into->exposed_ns, from->exposed_ns);
    if (unioned)
        into->exposed_ns = PT_MIN(into->exposed_ns, out->window_ns);
    if (unioned && into->cls != PT_CLASS_COMPUTE && into->cls != PT_CLASS_MEMORY)
        into->total_ns = PT_MIN(into->total_ns, out->window_ns);
    for (size_t k = 0; k < into->step_count && k < from->step_count; k++) {
        into->step_exposed_ns[k] = add_saturating(into->step_exposed_ns[k], from->step_exposed_ns[k]);
        if (unioned && k < out->step_count)
            into->step_exposed_ns[k] = PT_MIN(into->step_exposed_ns[k], out->steps[k].dur_ns);
    }
    into->max_ns = PT_MAX(into->max_ns, from->max_ns);
    if (!into->caller) /* a runtime API's caller: the first one's, else the other's */
        into->caller = from->caller, from->caller = NULL;
    free(from->name);
    free(from->group);
    free(from->caller);
    free(from->step_exposed_ns);
    from->name = NULL;
}

void sum_merge_same_names(pt_worker_summary *out)
{
    size_t n = out->function_count;
    if (n < 2)
        return;
    pt_function_summary **by_name = pt_xmalloc(n * sizeof *by_name);
    for (size_t i = 0; i < n; i++)
        by_name[i] = &out->functions[i];
    qsort(by_name, n, sizeof *by_name, cmp_function_name);
    size_t merged = 0;
    for (size_t i = 0; i < n;) {
        pt_function_summary *first = by_name[i];
        size_t j = i + 1;
        for (; j < n && by_name[j]->cls == first->cls && strcmp(by_name[j]->name, first->name) == 0; j++) {
            merge_into(first, by_name[j], out);
            merged++;
        }
        i = j;
    }
    free(by_name);
    if (!merged)
        return;
    size_t kept = 0; /* keep the ranked order of what remains */
    for (size_t i = 0; i < n; i++)
        if (out->functions[i].name)
            out->functions[kept++] = out->functions[i];
    out->function_count = kept;
    pt_summary_add_warning(out, "%zu functions shared a name with another (Python stacks deeper than 256 frames "
                                "cut to their innermost frames, or a kernel named like another's key) and were "
                                "merged with it", merged);
}
