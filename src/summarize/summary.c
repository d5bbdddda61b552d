/* summary.c -- lifetime and small queries of pt_worker_summary. */
#include "summarize/summary.h"
#include "summarize/function_store.h"
#include "util/common.h"
#include "util/stats.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *pt_class_name(pt_class c)
{
    static const char *const names[PT_CLASS_COUNT] = {"compute", "memory", "communication", "runtime", "python"};
    return (unsigned)c < PT_CLASS_COUNT ? names[c] : "?";
}

pt_worker_summary *pt_summary_new(void)
{
    pt_worker_summary *s = pt_xcalloc(1, sizeof *s);
    s->rank = s->local_rank = s->world_size = -1;
    s->pid = -1;
    s->seen_uid = s->seen_pid = -1;
    s->hang_step = -1;
    s->hang_idle_ns = -1;
    s->hang_step_ns = -1;
    s->dropped_events = -1;
    s->hw_sample_period_us = -1;
    s->stall_class = PT_CLASS_PYTHON;
    return s;
}

void pt_summary_free(pt_worker_summary *s)
{
    if (!s)
        return;
    if (s->fn_store)
        pt_fn_store_release_slot(s->fn_store, s->fn_slot);
    for (size_t i = 0; s->functions && i < s->function_count; i++) {
        if (!s->shared_function_names) {
            free(s->functions[i].name);
            free(s->functions[i].group);
            free(s->functions[i].caller);
        }
        free(s->functions[i].step_exposed_ns);
    }
    for (size_t i = 0; i < s->metric_count; i++)
        free(s->metrics[i].name);
    pt_free_strings(s->warnings, s->warning_count);
    for (size_t i = 0; i < s->step_count; i++)
        free(s->steps[i].syncs);
    free(s->functions);
    free(s->metrics);
    free(s->steps);
    free(s->name);
    free(s->host);
    free(s->seen_from);
    free(s->device_name);
    free(s->software);
    free(s->backend);
    free(s->producer);
    free(s->hang_stack);
    free(s->stall_function);
    pt_summary_free_hang_state(s);
    free(s);
}

void pt_summary_free_hang_state(pt_worker_summary *s)
{
    for (size_t i = 0; i < s->thread_count; i++) {
        free(s->threads[i].name);
        free(s->threads[i].stack);
    }
    free(s->threads);
    s->threads = NULL;
    s->thread_count = 0;
    for (size_t i = 0; i < s->group_count; i++) {
        pt_collective_group *g = &s->groups[i];
        for (size_t k = 0; k < g->call_count; k++) {
            if (!s->shared_function_names) {
                free(g->calls[k].op);
                free(g->calls[k].dtype);
            }
            free(g->calls[k].error);
        }
        free(g->calls);
        free(g->runs);
        free(g->name);
        free(g->backend);
    }
    free(s->groups);
    s->groups = NULL;
    s->group_count = 0;
}

const char *pt_call_state_name(pt_call_state state)
{
    static const char *const names[PT_CALL_STATE_COUNT] = {NULL, "entered", "issued", "completed", "failed"};
    return state > 0 && state < PT_CALL_STATE_COUNT ? names[state] : "unknown";
}

bool pt_group_has_rank(const pt_collective_group *g, int32_t r)
{
    for (size_t i = 0; i < g->run_count; i++) {
        const pt_rank_run *run = &g->runs[i];
        if (r >= run->first && r <= run->last && run->stride > 0 && (r - run->first) % run->stride == 0)
            return true;
    }
    return false;
}

int64_t pt_group_run_members(const pt_collective_group *g)
{
    int64_t n = 0;
    for (size_t i = 0; i < g->run_count; i++)
        if (g->runs[i].stride > 0 && g->runs[i].last >= g->runs[i].first)
            n += ((int64_t)g->runs[i].last - g->runs[i].first) / g->runs[i].stride + 1;
    return n;
}

void pt_summary_add_warning(pt_worker_summary *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *msg = pt_xvformat(512, fmt, ap);
    va_end(ap);
    s->warnings = pt_xrealloc(s->warnings, (s->warning_count + 1) * sizeof *s->warnings);
    s->warnings[s->warning_count++] = msg;
}

int64_t pt_summary_step_ns(const pt_worker_summary *s)
{
    if (s->step_count == 0)
        return s->window_ns;
    int64_t *d = pt_xmalloc(s->step_count * sizeof *d);
    for (size_t i = 0; i < s->step_count; i++)
        d[i] = s->steps[i].dur_ns;
    int64_t m = pt_median_i64(d, s->step_count);
    free(d);
    return m;
}

const pt_function_summary *pt_summary_find(const pt_worker_summary *s, pt_class cls, const char *name)
{
    for (size_t i = 0; s->functions && i < s->function_count; i++)
        if (s->functions[i].cls == cls && strcmp(s->functions[i].name, name) == 0)
            return &s->functions[i];
    return NULL;
}
