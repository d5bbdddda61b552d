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
