/* finding_list.c -- the findings being collected (added, dropped), and the sentence
 * pieces every pass shares (see finding.h). */
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

bool pt_stack_is_ancestor(const char *frame, const char *stack)
{
    size_t len = strlen(frame);
    return len > 0 && strncmp(frame, stack, len) == 0 && stack[len] == '|';
}

bool pt_findings_name_worker(const finding_list *list, size_t w)
{
    for (size_t i = 0; i < list->count; i++)
        if (!list->items[i].all_workers && pt_finding_names(&list->items[i], w))
            return true;
    return false;
}

static void finding_free(finding *f)
{
    free(f->function);
    free(f->workers);
    free(f->values);
    free(f->summary);
    pt_json_free(f->hang);
    for (size_t i = 0; i < f->part_count; i++)
        finding_free(&f->parts[i]);
    free(f->parts);
}

void pt_finding_drop_last(finding_list *list)
{
    if (list->count)
        finding_free(&list->items[--list->count]);
}

void pt_finding_list_drop(finding_list *list, bool *drop)
{
    size_t count = list->count, kept = 0;
    for (size_t i = 0; i < count; i++) /* hardware evidence goes with what it explains */
        if (list->items[i].explains && drop[list->items[i].explains - 1])
            drop[i] = true;
    size_t *moved_to = pt_xmalloc((count ? count : 1) * sizeof *moved_to);
    for (size_t i = 0; i < count; i++) {
        moved_to[i] = kept;
        if (drop[i])
            finding_free(&list->items[i]);
        else
            list->items[kept++] = list->items[i];
    }
    list->count = kept;
    for (size_t i = 0; i < kept; i++)
        if (list->items[i].explains)
            list->items[i].explains = moved_to[list->items[i].explains - 1] + 1;
    free(moved_to);
}

void pt_finding_list_free(finding_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        finding_free(&list->items[i]);
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

void pt_put_mb(pt_buf *out, double mb)
{
    pt_buf_printf(out, mb >= 1000 ? "%.0f MB" : "%.3g MB", mb);
}

void pt_put_saving(const pt_analysis *a, const finding *f, double step_ms, pt_buf *out)
{
    char pct[PT_PERCENT_LEN];
    bool several = f->worker_count > 1 && !f->all_workers;
    pt_buf_puts(out, several ? "; fixing all of them saves " : "; fixing it saves ");
    pt_put_ms(out, f->impact * step_ms);
    pt_buf_printf(out, " per step (%s of the step)", pt_percent(pct, 100 * f->impact));
    if (several && f->alone < f->impact - 0.005) {
        pt_buf_printf(out, ", fixing rank %d alone ", pt_worker_rank(a, f->worst));
        pt_put_ms(out, f->alone * step_ms);
        pt_buf_printf(out, " (%s)", pt_percent(pct, 100 * f->alone));
    }
    bool kept = f->impact < PT_SAVES_NOTHING && pt_finding_saves_nothing_kept(a, f);
    if (kept && pt_job_waits_unseen(a))
        pt_buf_puts(out, " in the step model, which saw no worker wait (their collectives ran on threads the collector "
                         "does not see, such as gloo's): the others' wait for this work counts as their own work there, "
                         "so the model cannot say what removing it saves");
    else if (kept)
        pt_buf_puts(out, " in the step model, as the other workers' own work then sets the pace; but its GPU may be "
                         "shared with other ranks (its host has more ranks than GPUs, or is not known), whose kernels "
                         "this work then delays, which the model does not count");
    else if (!f->all_workers && f->impact * step_ms < 0.5 * f->excess_ms)
        pt_buf_puts(out, several ? " (the others' own work then sets the pace)"
                                 : " (the other workers' own work then sets the pace)");
}

#define SHARING_CHECKED 8 /* named workers whose GPU is looked at: each look is linear in workers */

bool pt_job_waits_unseen(const pt_analysis *a)
{
    if (a->n < 2)
        return false;
    for (size_t w = 0; w < a->n; w++) {
        const pt_worker_summary *s = a->workers[w];
        if (s->exposed_ns[PT_CLASS_COMM] > 0 || s->idle_ns > 0)
            return false;
        for (size_t k = 0; s->has_syncs && k < s->step_count; k++)
            if (s->steps[k].sync_count)
                return false;
    }
    return true;
}

bool pt_finding_saves_nothing_kept(const pt_analysis *a, const finding *f)
{
    if (f->all_workers || (f->evidence != PT_EVIDENCE_ONLY_HERE && f->evidence != PT_EVIDENCE_MORE_CALLS))
        return false;
    if (pt_job_waits_unseen(a))
        return true;
    if (f->cls != PT_CLASS_COMPUTE && f->cls != PT_CLASS_MEMORY)
        return false;
    for (size_t k = 0; k < f->worker_count && k < SHARING_CHECKED; k++)
        if (pt_worker_may_share_gpu(a, f->workers[k]))
            return true;
    return false;
}

bool pt_worker_may_share_gpu(const pt_analysis *a, size_t w)
{
    const pt_worker_summary *s = a->workers[w];
    if (!s->host || !*s->host || s->device_count <= 0)
        return true; /* unknown: cannot tell */
    int64_t on_host = 0;
    for (size_t v = 0; v < a->n; v++)
        on_host += a->workers[v]->host && strcmp(a->workers[v]->host, s->host) == 0;
    return on_host > s->device_count;
}

void pt_put_rank_list(pt_buf *out, const int32_t *ranks, size_t listed, int64_t total)
{
    pt_buf_puts(out, total == 1 ? "rank " : "ranks ");
    /* Runs of three or more consecutive ranks as "2-127", at most 8 parts. */
    size_t shown = 0, parts = 0;
    for (size_t i = 0; i < listed && parts < 8;) {
        size_t j = i;
        while (j + 1 < listed && ranks[j + 1] == ranks[j] + 1)
            j++;
        if (j - i < 2)
            j = i;
        bool last = j + 1 == listed && (int64_t)listed == total;
        pt_buf_printf(out, "%s%d", parts == 0 ? "" : last ? " and " : ", ", ranks[i]);
        if (j > i)
            pt_buf_printf(out, "-%d", ranks[j]);
        shown = j + 1, parts++, i = j + 1;
    }
    if ((int64_t)shown < total)
        pt_buf_printf(out, " and %lld more", (long long)(total - (int64_t)shown));
}

const char *pt_percent(char out[PT_PERCENT_LEN], double percent)
{
    snprintf(out, PT_PERCENT_LEN, percent >= 9.5 || percent == 0 ? "%.0f%%" : "%.2g%%", percent);
    return out;
}

/* The host every named worker is on when they are all of its workers (and the job has
 * others), else NULL. */
static const char *whole_host(const pt_analysis *a, const finding *f)
{
    const char *host = a->workers[f->workers[0]]->host;
    if (!host || !*host || f->worker_count >= a->n)
        return NULL;
    size_t on_host = 0;
    for (size_t w = 0; w < a->n; w++)
        on_host += a->workers[w]->host && strcmp(a->workers[w]->host, host) == 0;
    for (size_t k = 0; k < f->worker_count; k++)
        if (!a->workers[f->workers[k]]->host || strcmp(a->workers[f->workers[k]]->host, host) != 0)
            return NULL;
    return on_host == f->worker_count ? host : NULL;
}

void pt_ranks_phrase(const pt_analysis *a, const finding *f, pt_buf *out)
{
    if (f->worker_count == 1) {
        pt_buf_printf(out, "Rank %d", pt_worker_rank(a, f->workers[0]));
        return;
    }
    /* Workers are in rank order: runs of three or more consecutive ranks as "8-15". */
    pt_buf_puts(out, "Ranks ");
    size_t shown = 0, parts = 0;
    for (size_t i = 0; i < f->worker_count && parts < 8;) {
        size_t j = i;
        while (j + 1 < f->worker_count && pt_worker_rank(a, f->workers[j + 1]) == pt_worker_rank(a, f->workers[j]) + 1)
            j++;
        if (j - i < 2)
            j = i;
        bool last = j + 1 == f->worker_count;
        pt_buf_printf(out, "%s%d", parts == 0 ? "" : last ? " and " : ", ", pt_worker_rank(a, f->workers[i]));
        if (j > i)
            pt_buf_printf(out, "-%d", pt_worker_rank(a, f->workers[j]));
        shown = j + 1, parts++, i = j + 1;
    }
    if (shown < f->worker_count)
        pt_buf_printf(out, " and %zu more", f->worker_count - shown);
    const char *host = whole_host(a, f);
    if (host)
        pt_buf_printf(out, " (every rank of host %s)", host);
}

const pt_metric_summary *pt_worker_metric(const pt_worker_summary *s, const char *suffix)
{
    for (size_t i = 0; i < s->metric_count; i++)
        if (pt_ends_with(s->metrics[i].name, suffix))
            return &s->metrics[i];
    return NULL;
}

bool pt_worker_shares_host(const pt_analysis *a, size_t w)
{
    const char *host = a->workers[w]->host;
    if (!host || !*host)
        return true; /* unknown: cannot tell hosts apart */
    for (size_t v = 0; v < a->n; v++)
        if (v != w && a->workers[v]->host && strcmp(a->workers[v]->host, host) == 0)
            return true;
    return false;
}

bool pt_worker_cpu_contended(const pt_analysis *a, size_t w)
{
    const pt_metric_summary *busy = pt_worker_metric(a->workers[w], "host.cpu_util");
    return busy && busy->mean >= PT_HOST_SATURATED_PCT && pt_worker_shares_host(a, w);
}
