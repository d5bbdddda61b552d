/* summary_json.c -- a worker summary as JSON, for people and for tests (`perftracker
 * summarize --json`). The binary format (summary_io.c) is what travels; this is what
 * one reads. */
#include "summarize/summary_json.h"
#include "summarize/function_store.h"

static pt_json *ns_ms(int64_t ns)
{
    return pt_json_number((double)ns / 1e6);
}

pt_json *pt_function_json_object(pt_class cls, const char *name, const char *group)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "class", pt_json_string(pt_class_name(cls)));
    pt_json_add(j, "name", pt_json_string(name));
    if (group)
        pt_json_add(j, "group", pt_json_string(group));
    return j;
}

static pt_json *function_json(const pt_function_summary *f)
{
    pt_json *j = pt_function_json_object(f->cls, f->name, f->group);
    pt_json_add(j, "count", pt_json_int((int64_t)f->count));
    pt_json_add(j, "total_ms", ns_ms(f->total_ns));
    pt_json_add(j, "exposed_ms", ns_ms(f->exposed_ns));
    pt_json_add(j, "median_ms", ns_ms(f->median_ns));
    pt_json_add(j, "max_ms", ns_ms(f->max_ns));
    if (f->waiting_ns)
        pt_json_add(j, "waiting_ms", ns_ms(f->waiting_ns));
    if (f->caller)
        pt_json_add(j, "caller", pt_json_string(f->caller));
    if (f->step_count) {
        pt_json *steps = pt_json_add(j, "step_exposed_ms", pt_json_array());
        for (size_t k = 0; k < f->step_count; k++)
            pt_json_push(steps, ns_ms(f->step_exposed_ns[k]));
    }
    if (f->cls == PT_CLASS_COMM) {
        pt_json_add(j, "throughput_avg_pct", pt_json_number(f->throughput_avg_pct));
        pt_json_add(j, "throughput_std_pct", pt_json_number(f->throughput_std_pct));
        pt_json_add(j, "busbw_avg_gbps", pt_json_number(f->busbw_avg_gbps));
        pt_json_add(j, "bytes_avg", pt_json_number(f->bytes_avg));
        pt_json_add(j, "bytes_max", pt_json_number(f->bytes_max));
    }
    return j;
}

static pt_json *classes_json(const int64_t ns[PT_CLASS_COUNT])
{
    pt_json *j = pt_json_object();
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        pt_json_add(j, pt_class_name((pt_class)c), ns_ms(ns[c]));
    return j;
}

/* Who the worker is. */
static void add_identity(pt_json *j, const pt_worker_summary *s)
{
    pt_json_add(j, "name", pt_json_string(s->name ? s->name : ""));
    pt_json_add(j, "rank", pt_json_int(s->rank));
    pt_json_add(j, "host", pt_json_string(s->host ? s->host : ""));
    pt_json_add(j, "local_rank", pt_json_int(s->local_rank));
    pt_json_add(j, "world_size", pt_json_int(s->world_size));
    pt_json_add(j, "pid", pt_json_int(s->pid));
    pt_json_add(j, "device", pt_json_string(s->device_name ? s->device_name : ""));
    pt_json_add(j, "producer", pt_json_string(s->producer ? s->producer : ""));
    pt_json_add(j, "backend", pt_json_string(s->backend ? s->backend : ""));
    pt_json_add(j, "software", pt_json_string(s->software ? s->software : ""));
}

/* The profiled window: its events, and the time each class kept busy and left exposed. */
static void add_window(pt_json *j, const pt_worker_summary *s)
{
    pt_json_add(j, "events", pt_json_int((int64_t)s->events));
    pt_json_add(j, "window_start_ns", pt_json_int(s->window_start_ns));
    pt_json_add(j, "window_ms", ns_ms(s->window_ns));
    pt_json_add(j, "busy_ms", classes_json(s->union_ns));
    pt_json_add(j, "exposed_ms", classes_json(s->exposed_ns));
    pt_json_add(j, "idle_ms", ns_ms(s->idle_ns));
    pt_json_add(j, "stall_ms", ns_ms(s->stall_ns));
}

/* Where the worker was in its collectives (and, from a hang report, its threads). */
static void add_hang_state(pt_json *j, const pt_worker_summary *s)
{
    if (s->hang_step >= 0) {
        pt_json_add(j, "hang_step", pt_json_int(s->hang_step));
        pt_json_add(j, "hang_idle_ms", ns_ms(s->hang_idle_ns));
    }
    if (s->thread_count) {
        pt_json *threads = pt_json_add(j, "threads", pt_json_array());
        for (size_t i = 0; i < s->thread_count; i++) {
            pt_json *t = pt_json_push(threads, pt_json_object());
            pt_json_add(t, "name", pt_json_string(s->threads[i].name));
            pt_json_add(t, "training", pt_json_bool(s->threads[i].training));
            pt_json_add(t, "stack", pt_json_string(s->threads[i].stack));
        }
    }
    if (!s->group_count)
        return;
    pt_json *groups = pt_json_add(j, "process_groups", pt_json_array());
    for (size_t i = 0; i < s->group_count; i++) {
        const pt_collective_group *g = &s->groups[i];
        pt_json *gj = pt_json_push(groups, pt_json_object());
        pt_json_add(gj, "name", pt_json_string(g->name));
        pt_json_add(gj, "size", pt_json_int(g->size));
        pt_json *calls = pt_json_add(gj, "calls", pt_json_array());
        for (size_t k = 0; k < g->call_count; k++) {
            const pt_collective_call *c = &g->calls[k];
            pt_json *cj = pt_json_push(calls, pt_json_object());
            pt_json_add(cj, "seq", pt_json_int(c->seq));
            pt_json_add(cj, "op", pt_json_string(c->op));
            pt_json_add(cj, "count", pt_json_int(c->count));
            pt_json_add(cj, "dtype", c->dtype ? pt_json_string(c->dtype) : pt_json_null());
            pt_json_add(cj, "state", pt_json_string(pt_call_state_name(c->state)));
        }
    }
}

pt_json *pt_summary_to_json(const pt_worker_summary *s)
{
    pt_json *j = pt_json_object();
    add_identity(j, s);
    add_window(j, s);
    if (s->stall_function)
        pt_json_add(j, "stall_function", pt_json_string(s->stall_function));
    pt_json *steps = pt_json_add(j, "steps", pt_json_array());
    for (size_t i = 0; i < s->step_count; i++) {
        pt_json *st = pt_json_push(steps, pt_json_object());
        pt_json_add(st, "step", pt_json_int(s->steps[i].step));
        pt_json_add(st, "start_ms", ns_ms(s->steps[i].start_ns));
        pt_json_add(st, "ms", ns_ms(s->steps[i].dur_ns));
        pt_json_add(st, "exposed_ms", classes_json(s->steps[i].exposed_ns));
        if (!s->has_syncs)
            continue;
        pt_json *syncs = pt_json_add(st, "sync_points", pt_json_array());
        for (size_t k = 0; k < s->steps[i].sync_count; k++) {
            pt_json *p = pt_json_push(syncs, pt_json_object());
            pt_json_add(p, "end_ms", ns_ms(s->steps[i].syncs[k].end_ns));
            pt_json_add(p, "work_before_ms", classes_json(s->steps[i].syncs[k].busy_ns));
        }
        pt_json_add(st, "work_after_ms", classes_json(s->steps[i].tail_busy_ns));
    }
    pt_json *functions = pt_json_add(j, "functions", pt_json_array());
    pt_function_summary record;
    int64_t step_values[PT_SUMMARY_MAX_STEP_VALUES];
    for (size_t i = 0; i < s->function_count; i++)
        pt_json_push(functions, function_json(pt_summary_function(s, i, &record, step_values)));
    pt_json *metrics = pt_json_add(j, "metrics", pt_json_object());
    for (size_t i = 0; i < s->metric_count; i++) {
        pt_json *m = pt_json_add(metrics, s->metrics[i].name, pt_json_object());
        pt_json_add(m, "samples", pt_json_int((int64_t)s->metrics[i].samples));
        pt_json_add(m, "mean", pt_json_number(s->metrics[i].mean));
        pt_json_add(m, "min", pt_json_number(s->metrics[i].min));
        pt_json_add(m, "max", pt_json_number(s->metrics[i].max));
    }
    add_hang_state(j, s);
    pt_json *warnings = pt_json_add(j, "warnings", pt_json_array());
    for (size_t i = 0; i < s->warning_count; i++)
        pt_json_push(warnings, pt_json_string(s->warnings[i]));
    return j;
}
