/* analysis.c -- builds the function rows and offers the robust comparisons. Its workers
 * were admitted by pt_diagnose (pt_summary_check), so every time in them is bounded;
 * sums of them are still taken in double, never in int64. */
#include "diagnose/analysis.h"
#include "util/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sums of summary times are taken in double: admission bounds every time (summary.h),
 * but the arithmetic itself must not overflow whatever it is given. Below 2^53 ns (104
 * days), which admitted parts are, the double sum is exact, the same as the integer's. */
static double ns_sum_ms(int64_t x, int64_t y)
{
    return ((double)x + (double)y) / 1e6;
}

static double steps_of(const pt_worker_summary *s)
{
    return s->step_count ? (double)s->step_count : 1.0;
}

static void row_key(pt_buf *key, pt_class cls, const char *name)
{
    pt_buf_reset(key);
    pt_buf_putc(key, (char)('0' + cls));
    pt_buf_puts(key, name);
}

/* Steps line up across workers by position: in a synchronous job step k is the same
 * step everywhere, and a worker that hung has fewer. */
static void align_steps(pt_analysis *a)
{
    size_t steps = SIZE_MAX;
    bool per_function = true;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        steps = PT_MIN(steps, s->step_count);
        for (size_t i = 0; i < s->function_count && per_function; i++) {
            pt_function_summary cell;
            const pt_fn_column *col = pt_fn_store_function(a->fn_store, a->slot[w], i);
            per_function = pt_fn_store_get(col, a->slot[w], &cell, NULL)->step_count == s->step_count;
        }
    }
    a->aligned_steps = a->n && steps >= 2 && steps != SIZE_MAX ? steps : 0;
    a->function_steps = per_function ? a->aligned_steps : 0;
}

double pt_step_part_ms(const pt_step_summary *step, int part)
{
    if (part == PT_STEP_DURATION)
        return (double)step->dur_ns / 1e6;
    if (part == PT_STEP_IDLE)
        return (double)step->idle_ns / 1e6;
    return (double)step->exposed_ns[part] / 1e6;
}

double pt_step_sd_ms(const pt_worker_summary *s, int part)
{
    if (s->step_count < 2)
        return NAN;
    double *values = pt_xmalloc(s->step_count * sizeof *values);
    for (size_t i = 0; i < s->step_count; i++)
        values[i] = pt_step_part_ms(&s->steps[i], part);
    double sd = pt_sample_sd(values, s->step_count);
    free(values);
    return sd;
}

double pt_step_noise_ms(pt_worker_summary *const *workers, size_t n, int part)
{
    double *sd = pt_xmalloc((n ? n : 1) * sizeof *sd);
    size_t m = 0;
    for (size_t w = 0; w < n; w++)
        if (workers[w]->step_count >= 2)
            sd[m++] = pt_step_sd_ms(workers[w], part);
    double noise = 2 * m >= n && m > 0 ? pt_median(sd, m) : INFINITY;
    free(sd);
    return noise;
}

/* Every worker's functions in one store: the one the decoder moved them to, where it
 * did (analyze's summaries); the others' are copied into it, or into a store of the
 * analysis's own when no worker is in one. */
static void place_functions(pt_analysis *a)
{
    for (size_t w = 0; w < a->n && !a->fn_store; w++)
        a->fn_store = a->workers[w]->fn_store;
    if (!a->fn_store) {
        a->fn_store = pt_fn_store_new();
        a->own_store = true;
    }
    a->slot = pt_xmalloc((a->n ? a->n : 1) * sizeof *a->slot);
    a->added = pt_xcalloc(a->n ? a->n : 1, sizeof *a->added);
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        a->added[w] = s->fn_store != a->fn_store;
        a->slot[w] = a->added[w] ? pt_fn_store_add(a->fn_store, s) : s->fn_slot;
    }
}

void pt_analysis_init(pt_analysis *a, pt_worker_summary *const *workers, size_t n)
{
    memset(a, 0, sizeof *a);
    a->workers = pt_xmalloc((n ? n : 1) * sizeof *a->workers);
    memcpy(a->workers, workers, n * sizeof *workers);
    a->n = n;
    a->steps = pt_xmalloc((n ? n : 1) * sizeof *a->steps);
    a->step_ms = pt_xmalloc((n ? n : 1) * sizeof *a->step_ms);
    a->window_ns = pt_xmalloc((n ? n : 1) * sizeof *a->window_ns);
    a->has_gpu = pt_xcalloc(n ? n : 1, sizeof *a->has_gpu);
    a->scratch = pt_xmalloc((n ? 2 * n : 2) * sizeof *a->scratch);
    a->scratch2 = pt_xmalloc((n ? n : 1) * sizeof *a->scratch2);
    pt_strtab_init(&a->row_index);

    place_functions(a);
    size_t rows_cap = 0;
    pt_buf key = PT_BUF_INIT;
    for (size_t w = 0; w < n; w++) {
        const pt_worker_summary *s = workers[w];
        a->steps[w] = steps_of(s);
        a->step_ms[w] = (double)pt_summary_step_ns(s) / 1e6;
        a->window_ns[w] = (double)s->window_ns;
        a->has_gpu[w] = s->union_ns[PT_CLASS_COMPUTE] > 0 || s->union_ns[PT_CLASS_MEMORY] > 0;
        a->gpu_workers += a->has_gpu[w];
        for (size_t i = 0; i < s->function_count; i++) {
            const pt_fn_column *col = pt_fn_store_function(a->fn_store, a->slot[w], i);
            pt_function_summary cell;
            const pt_function_summary *f = pt_fn_store_get(col, a->slot[w], &cell, NULL);
            row_key(&key, f->cls, f->name);
            uint32_t id = pt_strtab_intern(&a->row_index, key.data, key.len);
            if (id == a->row_count) {
                PT_GROW(a->rows, rows_cap, a->row_count + 1);
                pt_fn_row *row = &a->rows[a->row_count++];
                row->cls = f->cls;
                row->name = pt_fn_column_name(col);
                row->group = f->group;
                row->column = col;
                row->max_ratio = 0;
            }
            pt_fn_row *row = &a->rows[id];
            if (!row->group && f->group)
                row->group = f->group;
            double ratio = s->window_ns > 0 ? (double)f->exposed_ns / (double)s->window_ns : 0;
            row->max_ratio = fmax(row->max_ratio, ratio);
        }
    }
    pt_buf_free(&key);
    a->median_step_ms = pt_median_of(a->step_ms, n, a->scratch);
    align_steps(a);
}

static int by_rank(const void *x, const void *y)
{
    const pt_worker_summary *a = *(pt_worker_summary *const *)x, *b = *(pt_worker_summary *const *)y;
    int order = pt_cmp_i64(a->rank, b->rank);
    return order ? order : strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

void pt_analysis_init_by_rank(pt_analysis *a, pt_worker_summary *const *workers, size_t n)
{
    pt_worker_summary **sorted = pt_xmalloc((n ? n : 1) * sizeof *sorted);
    memcpy(sorted, workers, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_rank);
    pt_analysis_init(a, sorted, n);
    free(sorted);
}

void pt_analysis_free(pt_analysis *a)
{
    for (size_t w = 0; w < a->n && !a->own_store; w++)
        if (a->added[w])
            pt_fn_store_release_slot(a->fn_store, a->slot[w]);
    if (a->own_store)
        pt_fn_store_free(a->fn_store);
    free(a->slot);
    free(a->added);
    free(a->rows);
    pt_strtab_free(&a->row_index);
    free(a->workers);
    free(a->steps);
    free(a->step_ms);
    free(a->window_ns);
    free(a->has_gpu);
    free(a->scratch);
    free(a->scratch2);
    memset(a, 0, sizeof *a);
}

const pt_fn_row *pt_analysis_row(const pt_analysis *a, pt_class cls, const char *name)
{
    pt_buf key = PT_BUF_INIT;
    row_key(&key, cls, name);
    uint32_t id = pt_strtab_find(&a->row_index, key.data, key.len);
    pt_buf_free(&key);
    return id == UINT32_MAX ? NULL : &a->rows[id];
}

const pt_function_summary *pt_row_function(const pt_analysis *a, const pt_fn_row *row, size_t w,
                                           pt_function_summary *cell)
{
    return pt_fn_store_get(row->column, a->slot[w], cell, NULL);
}

/* Worker w's value of a row's field (0 where absent). */
static int64_t row_value(const pt_analysis *a, const pt_fn_row *row, size_t w, pt_fn_field field, bool *present)
{
    int64_t v;
    *present = pt_fn_store_value(row->column, a->slot[w], field, &v);
    return v;
}

void pt_row_exposed_ms(const pt_analysis *a, const pt_fn_row *row, double *out)
{
    for (size_t w = 0; w < a->n; w++) {
        bool present;
        int64_t exposed = row_value(a, row, w, PT_FN_EXPOSED, &present);
        out[w] = present ? (double)exposed / 1e6 / a->steps[w] : 0;
    }
}

void pt_row_calls_per_step(const pt_analysis *a, const pt_fn_row *row, double *out)
{
    for (size_t w = 0; w < a->n; w++) {
        bool present;
        uint64_t count = (uint64_t)row_value(a, row, w, PT_FN_COUNT, &present);
        out[w] = present ? (double)count / a->steps[w] : 0;
    }
}

void pt_row_step_ms(const pt_analysis *a, const pt_fn_row *row, double *out)
{
    size_t steps = a->function_steps;
    int64_t values[PT_SUMMARY_MAX_STEP_VALUES];
    for (size_t w = 0; w < a->n; w++) {
        pt_function_summary cell;
        const pt_function_summary *f = pt_fn_store_get(row->column, a->slot[w], &cell, values);
        for (size_t s = 0; s < steps; s++)
            out[w * steps + s] = f && f->step_count ? (double)f->step_exposed_ns[s] / 1e6 : 0;
    }
}

void pt_class_step_ms(const pt_analysis *a, pt_class cls, double *out)
{
    size_t steps = a->aligned_steps;
    for (size_t w = 0; w < a->n; w++)
        for (size_t s = 0; s < steps; s++)
            out[w * steps + s] = pt_step_part_ms(&a->workers[w]->steps[s], (int)cls);
}

void pt_waiting_step_ms(const pt_analysis *a, double *out)
{
    size_t steps = a->aligned_steps;
    for (size_t w = 0; w < a->n; w++)
        for (size_t s = 0; s < steps; s++) {
            const pt_step_summary *st = &a->workers[w]->steps[s];
            out[w * steps + s] = ns_sum_ms(st->exposed_ns[PT_CLASS_COMM], st->idle_ns);
        }
}

void pt_waiting_ms(const pt_analysis *a, double *out)
{
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        out[w] = ns_sum_ms(s->exposed_ns[PT_CLASS_COMM], s->idle_ns) / a->steps[w];
    }
}

void pt_row_exposed_ratio(const pt_analysis *a, const pt_fn_row *row, double *out)
{
    for (size_t w = 0; w < a->n; w++) {
        bool present;
        int64_t exposed = row_value(a, row, w, PT_FN_EXPOSED, &present);
        double window = a->window_ns[w];
        out[w] = present && window > 0 ? (double)exposed / window : 0;
    }
}

void pt_row_total_ratio(const pt_analysis *a, const pt_fn_row *row, double *out)
{
    for (size_t w = 0; w < a->n; w++) {
        bool present;
        int64_t total = row_value(a, row, w, PT_FN_TOTAL, &present);
        double window = a->window_ns[w];
        out[w] = present && window > 0 ? (double)total / window : 0;
    }
}

void pt_row_median_ms(const pt_analysis *a, const pt_fn_row *row, double *out)
{
    for (size_t w = 0; w < a->n; w++) {
        bool present;
        int64_t median = row_value(a, row, w, PT_FN_MEDIAN, &present);
        out[w] = present ? (double)median / 1e6 : 0;
    }
}

void pt_class_exposed_ms(const pt_analysis *a, pt_class cls, double *out)
{
    for (size_t w = 0; w < a->n; w++)
        out[w] = (double)a->workers[w]->exposed_ns[cls] / 1e6 / a->steps[w];
}

double pt_median_steps_in_window(const pt_analysis *a, size_t w)
{
    return a->step_ms[w] > 0 ? pt_window_ms(a, w) / a->step_ms[w] : a->steps[w];
}

double pt_median_of(const double *values, size_t n, double *scratch)
{
    memcpy(scratch, values, n * sizeof *values);
    return pt_median(scratch, n);
}

pt_spread pt_spread_of(const double *values, size_t n, double *scratch)
{
    pt_spread s = {0, 0};
    if (n == 0)
        return s;
    s.median = pt_median_of(values, n, scratch);
    double *deviation = scratch + n;
    for (size_t i = 0; i < n; i++)
        deviation[i] = fabs(values[i] - s.median);
    s.sigma = 1.4826 * pt_median_of(deviation, n, scratch);
    return s;
}

size_t pt_high_outliers(const double *values, size_t n, pt_spread s, double k, double floor, bool *flags)
{
    double threshold = fmax(k * s.sigma, floor);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        flags[i] = values[i] - s.median > threshold;
        count += flags[i];
    }
    return count;
}

void pt_short_function_name(pt_class cls, const char *name, pt_buf *out)
{
    if (cls == PT_CLASS_PYTHON) {
        /* The innermost two frames say what it is; the full stack is in "function". */
        const char *last = strrchr(name, '|');
        const char *start = name;
        if (last) {
            const char *prev = last;
            while (prev > name && prev[-1] != '|')
                prev--;
            start = prev > name ? prev : name;
        }
        if (start != name)
            pt_buf_puts(out, "... > ");
        for (const char *p = start; *p; p++)
            *p == '|' ? pt_buf_puts(out, " > ") : pt_buf_putc(out, *p);
        return;
    }
    if (cls == PT_CLASS_MEMORY || cls == PT_CLASS_RUNTIME) {
        pt_buf_puts(out, name); /* already short; "(Device -> Device)" is part of the name */
        return;
    }
    /* Kernels: drop "void ", template arguments and the parameter list. */
    const char *p = strncmp(name, "void ", 5) == 0 ? name + 5 : name;
    int depth = 0;
    size_t kept = 0;
    for (; *p && kept < 80; p++) {
        if (*p == '<') {
            if (depth++ == 0)
                pt_buf_puts(out, "<...>"), kept += 5;
            continue;
        }
        if (*p == '>' && depth > 0) {
            depth--;
            continue;
        }
        if (depth == 0 && *p == '(')
            break;
        if (depth == 0)
            pt_buf_putc(out, *p), kept++;
    }
}

static int by_score_desc(const void *a, const void *b)
{
    const pt_ranked_row *x = a, *y = b;
    int order = pt_cmp_desc(x->score, y->score);
    if (order == 0)
        order = pt_cmp_i64(x->row->cls, y->row->cls);
    return order ? order : strcmp(x->row->name, y->row->name);
}

pt_ranked_row *pt_rank_rows(const pt_analysis *a, pt_row_scorer scorer, const void *ctx, size_t *count)
{
    pt_ranked_row *ranked = pt_xmalloc((a->row_count ? a->row_count : 1) * sizeof *ranked);
    double *values = pt_xmalloc((a->n ? a->n : 1) * sizeof *values);
    size_t k = 0;
    for (size_t i = 0; i < a->row_count; i++)
        if (scorer(a, &a->rows[i], ctx, values, &ranked[k].score))
            ranked[k++].row = &a->rows[i];
    qsort(ranked, k, sizeof *ranked, by_score_desc);
    free(values);
    *count = k;
    return ranked;
}

static int by_distance_desc(const void *a, const void *b)
{
    const pt_ranked_worker *x = a, *y = b;
    int order = pt_cmp_desc(x->distance, y->distance);
    return order ? order : pt_cmp_i64((int64_t)x->worker, (int64_t)y->worker);
}

void pt_sort_ranked_workers(pt_ranked_worker *list, size_t n)
{
    qsort(list, n, sizeof *list, by_distance_desc);
}

const char *pt_category_of(pt_class cls)
{
    static const char *const names[PT_CLASS_COUNT] = {"gpu_compute", "gpu_memory", "communication",
                                                      "cuda_runtime", "python"};
    return names[cls];
}

const char *pt_section_of(pt_class cls)
{
    static const char *const names[PT_CLASS_COUNT] = {"GPU Compute", "GPU memory operations", "Communication",
                                                      "CUDA Runtime", "Python functions"};
    return names[cls];
}
