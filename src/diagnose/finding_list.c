/* finding_list.c -- the findings being collected, and the sentence pieces every pass
 * shares (see finding.h). */
#include "diagnose/finding.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STEP_FRACTION_FLOOR 0.03
#define ABSOLUTE_FLOOR_MS 0.05

finding *pt_finding_add(finding_list *list, const char *category, const char *function, const char *section)
{
    PT_GROW(list->items, list->cap, list->count + 1);
    finding *f = &list->items[list->count++];
    memset(f, 0, sizeof *f);
    f->category = category;
    f->function = pt_xstrdup(function);
    f->section = section;
    f->metric = "bottleneck ms per step";
    return f;
}

void pt_finding_name_worker(finding *f, size_t w, double value)
{
    if (f->worker_count == f->worker_cap) {
        PT_GROW(f->workers, f->worker_cap, f->worker_count + 1);
        f->values = pt_xrealloc(f->values, f->worker_cap * sizeof *f->values);
    }
    f->workers[f->worker_count] = w;
    f->values[f->worker_count++] = value;
}

bool pt_finding_names(const finding *f, size_t w)
{
    for (size_t k = 0; k < f->worker_count; k++)
        if (f->workers[k] == w)
            return true;
    return false;
}

finding *pt_finding_find(finding_list *list, const char *category, const char *function)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->items[i].category, category) == 0 && strcmp(list->items[i].function, function) == 0)
            return &list->items[i];
    return NULL;
}

bool pt_findings_name_worker(const finding_list *list, size_t w)
{
    for (size_t i = 0; i < list->count; i++)
        if (!list->items[i].all_workers && pt_finding_names(&list->items[i], w))
            return true;
    return false;
}

void pt_finding_list_free(finding_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].function);
        free(list->items[i].workers);
        free(list->items[i].values);
        free(list->items[i].summary);
        pt_json_free(list->items[i].hang);
    }
    free(list->items);
    memset(list, 0, sizeof *list);
}

double pt_floor_ms(const pt_analysis *a)
{
    return fmax(STEP_FRACTION_FLOOR * a->median_step_ms, ABSOLUTE_FLOOR_MS);
}

double pt_impact_of(const pt_analysis *a, double excess_ms)
{
    return a->median_step_ms > 0 ? fmin(1.0, fmax(0.0, excess_ms / a->median_step_ms)) : 0;
}

/* "1460 ms", "12.5 ms", "0.043 ms": as many digits as a reader needs. */
void pt_put_ms(pt_buf *out, double ms)
{
    pt_buf_printf(out, ms >= 100 ? "%.0f ms" : "%.3g ms", ms);
}

const char *pt_percent(char out[PT_PERCENT_LEN], double percent)
{
    snprintf(out, PT_PERCENT_LEN, percent >= 9.5 || percent == 0 ? "%.0f%%" : "%.2g%%", percent);
    return out;
}

void pt_ranks_phrase(const pt_analysis *a, const finding *f, pt_buf *out)
{
    if (f->worker_count == 1) {
        pt_buf_printf(out, "Rank %d", pt_worker_rank(a, f->workers[0]));
        return;
    }
    pt_buf_puts(out, "Ranks ");
    for (size_t i = 0; i < f->worker_count && i < 8; i++)
        pt_buf_printf(out, "%s%d", i == 0 ? "" : i + 1 == f->worker_count ? " and " : ", ",
                      pt_worker_rank(a, f->workers[i]));
    if (f->worker_count > 8)
        pt_buf_printf(out, " and %zu more", f->worker_count - 8);
}
