/* event.c -- defaults for the event model (see event.h). */
#include "event.h"

#include <stdbool.h>
#include <string.h>

void pt_event_init(pt_event *ev, pt_event_kind kind)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = kind;
    ev->device = -1;
    ev->depth = -1;
    ev->step = -1;
    ev->coll.rank_start = ev->coll.rank_stride = -1;
    ev->coll.seq = -1;
}

#define FIELD(name, type, unknown) \
    {#name, type, offsetof(pt_trace_meta, name), sizeof(((pt_trace_meta *)0)->name), unknown}
const pt_meta_field pt_meta_fields[] = {
    FIELD(rank, PT_META_I32, -1),       FIELD(local_rank, PT_META_I32, -1),
    FIELD(world_size, PT_META_I32, -1), FIELD(pid, PT_META_I64, -1),
    FIELD(host, PT_META_STRING, 0),     FIELD(backend, PT_META_STRING, 0),
    FIELD(device_name, PT_META_STRING, 0), FIELD(device_count, PT_META_I32, 0),
    FIELD(software, PT_META_STRING, 0),
    FIELD(clock_origin_ns, PT_META_I64, 0), FIELD(producer, PT_META_STRING, 0),
    FIELD(hang_step, PT_META_I64, -1),  FIELD(dropped_events, PT_META_COUNT32, -1),
    FIELD(hw_sample_period_us, PT_META_I32, -1),
};
#undef FIELD
const size_t pt_meta_field_count = sizeof pt_meta_fields / sizeof pt_meta_fields[0];

const pt_meta_field *pt_meta_field_named(const char *key, size_t key_len)
{
    for (size_t i = 0; i < pt_meta_field_count; i++)
        if (strlen(pt_meta_fields[i].key) == key_len && memcmp(pt_meta_fields[i].key, key, key_len) == 0)
            return &pt_meta_fields[i];
    return NULL;
}

int64_t pt_meta_int(const pt_trace_meta *m, const pt_meta_field *f)
{
    const char *at = (const char *)m + f->offset;
    if (f->type == PT_META_I64) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        return v;
    }
    int32_t v;
    memcpy(&v, at, sizeof v);
    return v;
}

void pt_meta_set_int(pt_trace_meta *m, const pt_meta_field *f, int64_t v)
{
    char *at = (char *)m + f->offset;
    if (f->type == PT_META_I64) {
        memcpy(at, &v, sizeof v);
        return;
    }
    int32_t v32 = (int32_t)(f->type == PT_META_COUNT32 && v > INT32_MAX ? INT32_MAX : v);
    memcpy(at, &v32, sizeof v32);
}

const char *pt_meta_string(const pt_trace_meta *m, const pt_meta_field *f)
{
    return (const char *)m + f->offset;
}

void pt_meta_set_string(pt_trace_meta *m, const pt_meta_field *f, const char *s, size_t n)
{
    char *at = (char *)m + f->offset;
    n = n < f->size - 1 ? n : f->size - 1;
    memcpy(at, s, n);
    at[n] = '\0';
}

void pt_trace_meta_init(pt_trace_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    for (size_t i = 0; i < pt_meta_field_count; i++)
        if (pt_meta_fields[i].type != PT_META_STRING)
            pt_meta_set_int(meta, &pt_meta_fields[i], pt_meta_fields[i].unknown);
}

void pt_trace_meta_merge(pt_trace_meta *dst, const pt_trace_meta *src)
{
    for (size_t i = 0; i < pt_meta_field_count; i++) {
        const pt_meta_field *f = &pt_meta_fields[i];
        bool known = f->type == PT_META_STRING ? pt_meta_string(dst, f)[0] != '\0' : pt_meta_int(dst, f) != f->unknown;
        if (!known)
            memcpy((char *)dst + f->offset, (const char *)src + f->offset, f->size);
    }
}
