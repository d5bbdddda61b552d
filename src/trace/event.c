/* event.c -- defaults for the event model (see event.h). */
#include "event.h"

#include <string.h>

void pt_event_init(pt_event *ev, pt_event_kind kind)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->device = -1;
    ev->depth = -1;
    ev->step = -1;
}

void pt_trace_meta_init(pt_trace_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    meta->rank = meta->local_rank = meta->world_size = -1;
    meta->pid = -1;
    meta->hang_step = -1;
    meta->dropped_events = -1;
    meta->hw_sample_period_us = -1;
}

void pt_trace_meta_merge(pt_trace_meta *dst, const pt_trace_meta *src)
{
#define TAKE_NUMBER(field, unknown) \
    if (dst->field == (unknown))   \
    dst->field = src->field
#define TAKE_STRING(field) \
    if (!dst->field[0])    \
    memcpy(dst->field, src->field, sizeof dst->field)
    TAKE_NUMBER(rank, -1);
    TAKE_NUMBER(local_rank, -1);
    TAKE_NUMBER(world_size, -1);
    TAKE_NUMBER(pid, -1);
    TAKE_NUMBER(device_count, 0);
    TAKE_NUMBER(clock_origin_ns, 0);
    TAKE_NUMBER(hang_step, -1);
    TAKE_NUMBER(dropped_events, -1);
    TAKE_NUMBER(hw_sample_period_us, -1);
    TAKE_STRING(host);
    TAKE_STRING(backend);
    TAKE_STRING(device_name);
    TAKE_STRING(producer);
#undef TAKE_NUMBER
#undef TAKE_STRING
}
