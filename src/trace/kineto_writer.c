/* kineto_writer.c -- streaming Chrome-trace JSON writer (see kineto_writer.h).
 *
 * Design. Events are formatted straight into one pt_buf that is handed to the output
 * (stdio or zlib) whenever it passes FLUSH_AT, so memory stays at about a megabyte
 * whatever the trace size. Numbers are formatted by hand (two digits per table lookup)
 * rather than with printf: a generated 1 GB trace is tens of millions of numbers, and
 * printf's locale and format parsing would cost more than everything else together.
 * Times go out as microseconds with up to three decimals, which is exactly the integer
 * nanoseconds the reader scans back. Names go through pt_json_write_string, so any byte
 * sequence is valid JSON and safe to show in HTML.
 *
 * Files. The output is created under a temporary name with O_EXCL | O_NOFOLLOW in a checked
 * folder and renamed into place at close (util/outdir.h): a planted symlink is never
 * followed, and a failed or abandoned trace leaves nothing under the final name.
 *
 * Cost. About 150-300 bytes of output per event and no allocation after the buffer has
 * grown to its working size; gzip output costs zlib's level-1 deflate on top. */
#define _POSIX_C_SOURCE 200809L
#include "trace/kineto_writer.h"
#include "util/buf.h"
#include "util/json.h"
#include "util/outdir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define FLUSH_AT (1u << 20)
#define EVENT_FIXED_BYTES 640 /* everything in one event except its names */

struct pt_kineto_writer {
    char *path;          /* NULL: count bytes only */
    pt_out_file file;    /* a temporary name renamed into place at close (util/outdir.h) */
    FILE *plain;
    gzFile gz;
    pt_buf buf;
    uint64_t flushed;    /* bytes already handed to the output */
    uint64_t events;
    pt_trace_meta meta;
    bool have_meta;
    bool failed;
    pt_error err;
};

/* ------------------------------------------------------------ number formatting */

static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    char *end = tmp + sizeof tmp, *q = end;
    while (v >= 100) {
        unsigned pair = (unsigned)(v % 100) * 2;
        v /= 100;
        *--q = digit_pairs[pair + 1];
        *--q = digit_pairs[pair];
    }
    if (v >= 10) {
        *--q = digit_pairs[v * 2 + 1];
        *--q = digit_pairs[v * 2];
    } else {
        *--q = (char)('0' + v);
    }
    size_t n = (size_t)(end - q);
    memcpy(p, q, n);
    return p + n;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

/* Nanoseconds as microseconds: "1234", "1234.5", "1234.567", "-0.25". */
static char *put_us(char *p, int64_t ns)
{
    uint64_t mag = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        *p++ = '-';
    p = put_u64(p, mag / 1000);
    unsigned frac = (unsigned)(mag % 1000);
    if (frac) {
        char d[3] = {(char)('0' + frac / 100), (char)('0' + frac / 10 % 10), (char)('0' + frac % 10)};
        size_t n = d[2] != '0' ? 3 : d[1] != '0' ? 2 : 1;
        *p++ = '.';
        memcpy(p, d, n);
        p += n;
    }
    return p;
}

#define PUT_LIT(p, lit) (memcpy((p), (lit), sizeof(lit) - 1), (p) += sizeof(lit) - 1)

/* ------------------------------------------------------------ output */

static void fail(pt_kineto_writer *w, const char *what)
{
    if (!w->failed)
        pt_error_set(&w->err, "cannot write %s: %s", w->path ? w->path : "trace", what);
    w->failed = true;
}

static void flush(pt_kineto_writer *w)
{
    if (w->failed || w->buf.len == 0)
        return;
    if (w->gz) {
        if (gzwrite(w->gz, w->buf.data, (unsigned)w->buf.len) != (int)w->buf.len) {
            int code;
            const char *msg = gzerror(w->gz, &code);
            fail(w, code == Z_ERRNO ? strerror(errno) : msg);
        }
    } else if (w->plain) {
        if (fwrite(w->buf.data, 1, w->buf.len, w->plain) != w->buf.len)
            fail(w, strerror(errno));
    }
    w->flushed += w->buf.len;
    pt_buf_reset(&w->buf);
}

/* Room for one event's fixed part; returns where to write. */
static char *reserve(pt_kineto_writer *w, size_t n)
{
    if (w->buf.len >= FLUSH_AT)
        flush(w);
    pt_buf_reserve(&w->buf, n);
    return w->buf.data + w->buf.len;
}

static void commit(pt_kineto_writer *w, char *p)
{
    w->buf.len = (size_t)(p - w->buf.data);
    *p = '\0'; /* pt_buf keeps its bytes NUL-terminated */
}

static void put_string(pt_kineto_writer *w, const char *s, size_t n)
{
    pt_json_write_string(&w->buf, s ? s : "", s ? n : 0);
}

pt_kineto_writer *pt_kineto_writer_open(const char *path, bool gzip, pt_error *err)
{
    pt_kineto_writer *w = pt_xcalloc(1, sizeof *w);
    pt_trace_meta_init(&w->meta);
    w->file.fd = w->file.dir_fd = -1;
    if (path) {
        if (pt_out_file_create(&w->file, path, 0644, err) != 0) {
            free(w);
            return NULL;
        }
        w->path = pt_xstrdup(path);
        if (gzip) {
            w->gz = gzdopen(w->file.fd, "wb1");
            if (w->gz)
                gzbuffer(w->gz, 256 * 1024);
        } else {
            w->plain = fdopen(w->file.fd, "wb");
            if (w->plain)
                setvbuf(w->plain, NULL, _IONBF, 0); /* our buffer is the only one */
        }
        if (!w->gz && !w->plain) {
            pt_error_set(err, "cannot create %s: %s", path, strerror(errno ? errno : ENOMEM));
            pt_out_file_abandon(&w->file);
            free(w->path);
            free(w);
            return NULL;
        }
        w->file.fd = -1; /* zlib or stdio closes it now */
    }
    pt_buf_reserve(&w->buf, FLUSH_AT + EVENT_FIXED_BYTES);
    pt_buf_puts(&w->buf, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    return w;
}

void pt_kineto_writer_meta(pt_kineto_writer *w, const pt_trace_meta *meta)
{
    w->meta = *meta;
    w->have_meta = true;
}

uint64_t pt_kineto_writer_bytes(const pt_kineto_writer *w)
{
    return w->flushed + w->buf.len;
}

/* ------------------------------------------------------------ events */

static bool is_python_frame(const char *s, size_t n)
{
    static const char builtin[] = "<built-in";
    if (n >= sizeof builtin - 1 && memcmp(s, builtin, sizeof builtin - 1) == 0)
        return true;
    /* Kineto's "file.py(12): f" and the collector's "file.py: f". */
    for (size_t i = 0; i + 4 <= n; i++)
        if (s[i] == '.' && s[i + 1] == 'p' && s[i + 2] == 'y' && (s[i + 3] == '(' || s[i + 3] == ':'))
            return true;
    return false;
}

/* The event's own kind when its producer said, else Python frames by their names. */
static const char *cpu_category(const pt_event *ev)
{
    switch (ev->cpu_kind) {
    case PT_CPU_ANNOTATION: return "{\"ph\":\"X\",\"cat\":\"user_annotation\"";
    case PT_CPU_PYTHON: return "{\"ph\":\"X\",\"cat\":\"python_function\"";
    case PT_CPU_OPERATOR: return "{\"ph\":\"X\",\"cat\":\"cpu_op\"";
    case PT_CPU_UNKNOWN: break;
    }
    return is_python_frame(ev->name, ev->name_len) ? "{\"ph\":\"X\",\"cat\":\"python_function\""
                                                   : "{\"ph\":\"X\",\"cat\":\"cpu_op\"";
}

/* Driver API calls are cuXxx; runtime calls are cudaXxx (and hipXxx on ROCm). */
static bool is_driver_call(const char *s, size_t n)
{
    return n > 2 && s[0] == 'c' && s[1] == 'u' && !(n > 4 && memcmp(s, "cuda", 4) == 0);
}

static const char *dtype_name(int32_t bytes)
{
    switch (bytes) {
    case 8: return "Double";
    case 4: return "Float";
    case 2: return "Half";
    case 1: return "Byte";
    default: return NULL;
    }
}

/* `{"ph":"X","cat":"<cat>","name":` */
static void open_event(pt_kineto_writer *w, const char *ph_and_cat)
{
    char *p = reserve(w, EVENT_FIXED_BYTES);
    if (w->events++)
        *p++ = ',';
    *p++ = '\n';
    size_t n = strlen(ph_and_cat);
    memcpy(p, ph_and_cat, n);
    p += n;
    PUT_LIT(p, ",\"name\":");
    commit(w, p);
}

/* `,"pid":..,"tid":..,"ts":..,"dur":..` ; the caller adds args and the closing brace. */
static char *put_place_and_time(pt_kineto_writer *w, int64_t pid, int64_t tid, const pt_event *ev, bool with_dur)
{
    char *p = reserve(w, EVENT_FIXED_BYTES);
    PUT_LIT(p, ",\"pid\":");
    p = put_i64(p, pid);
    PUT_LIT(p, ",\"tid\":");
    p = put_i64(p, tid);
    PUT_LIT(p, ",\"ts\":");
    p = put_us(p, ev->ts_ns);
    if (with_dur) {
        PUT_LIT(p, ",\"dur\":");
        p = put_us(p, ev->dur_ns > 0 ? ev->dur_ns : 0);
    }
    return p;
}

static char *put_dim3(char *p, const int32_t v[3])
{
    *p++ = '[';
    for (int i = 0; i < 3; i++) {
        if (i)
            *p++ = ',';
        p = put_i64(p, v[i]);
    }
    *p++ = ']';
    return p;
}

static void put_collective_args(pt_kineto_writer *w, const pt_event *ev);

static void write_gpu_event(pt_kineto_writer *w, const pt_event *ev, const char *ph_and_cat)
{
    open_event(w, ph_and_cat);
    put_string(w, ev->name, ev->name_len);
    int32_t device = ev->device >= 0 ? ev->device : 0;
    char *p = put_place_and_time(w, device, ev->tid, ev, true);
    PUT_LIT(p, ",\"args\":{\"device\":");
    p = put_i64(p, device);
    PUT_LIT(p, ",\"stream\":");
    p = put_i64(p, ev->tid);
    if (ev->kind == PT_EVENT_GPU_KERNEL) {
        PUT_LIT(p, ",\"grid\":");
        p = put_dim3(p, ev->grid);
        PUT_LIT(p, ",\"block\":");
        p = put_dim3(p, ev->block);
    } else {
        PUT_LIT(p, ",\"bytes\":");
        p = put_i64(p, ev->bytes);
    }
    bool collective = ev->kind == PT_EVENT_GPU_KERNEL && (ev->coll.name || ev->coll.in_nelems > 0);
    if (!collective) {
        PUT_LIT(p, "}}");
        commit(w, p);
        return;
    }
    commit(w, p);
    put_collective_args(w, ev);
    p = reserve(w, EVENT_FIXED_BYTES);
    PUT_LIT(p, "}}");
    commit(w, p);
}

/* The args torch writes for a collective (kernel or record_param_comms), each after a
 * comma (they follow other args). */
static void put_collective_args(pt_kineto_writer *w, const pt_event *ev)
{
    const pt_collective *c = &ev->coll;
    char *p = reserve(w, EVENT_FIXED_BYTES);
    if (c->name) {
        PUT_LIT(p, ",\"Collective name\":");
        commit(w, p);
        put_string(w, c->name, c->name_len);
        p = reserve(w, EVENT_FIXED_BYTES);
    }
    PUT_LIT(p, ",\"In msg nelems\":");
    p = put_i64(p, c->in_nelems);
    PUT_LIT(p, ",\"Out msg nelems\":");
    p = put_i64(p, c->out_nelems);
    PUT_LIT(p, ",\"Group size\":");
    p = put_i64(p, c->group_size);
    const char *dtype = dtype_name(c->dtype_bytes);
    if (c->dtype) {
        PUT_LIT(p, ",\"dtype\":");
        commit(w, p);
        put_string(w, c->dtype, c->dtype_len);
        p = reserve(w, EVENT_FIXED_BYTES);
    } else if (dtype) {
        PUT_LIT(p, ",\"dtype\":\"");
        size_t n = strlen(dtype);
        memcpy(p, dtype, n);
        p += n;
        *p++ = '"';
    }
    const struct { const char *key; const char *text; size_t len; } strings[] = {
        {",\"Process Group Name\":", c->group, c->group_len},
        {",\"Process Group Ranks\":", c->ranks, c->ranks_len},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(strings); i++) {
        if (!strings[i].text)
            continue;
        size_t n = strlen(strings[i].key);
        memcpy(p, strings[i].key, n);
        p += n;
        commit(w, p);
        put_string(w, strings[i].text, strings[i].len);
        p = reserve(w, EVENT_FIXED_BYTES);
    }
    if (c->rank_start >= 0) {
        PUT_LIT(p, ",\"Global rank start\":");
        p = put_i64(p, c->rank_start);
    }
    if (c->rank_stride >= 0) {
        PUT_LIT(p, ",\"Global rank stride\":");
        p = put_i64(p, c->rank_stride);
    }
    if (c->seq >= 0) {
        PUT_LIT(p, ",\"Seq\":");
        p = put_i64(p, c->seq);
    }
    commit(w, p);
}

static void write_cpu_side_event(pt_kineto_writer *w, const pt_event *ev, const char *ph_and_cat)
{
    open_event(w, ph_and_cat);
    put_string(w, ev->name, ev->name_len);
    char *p = put_place_and_time(w, w->meta.pid >= 0 ? w->meta.pid : 0, ev->tid, ev, true);
    if (ev->kind == PT_EVENT_CPU && (ev->coll.name || ev->coll.group)) { /* record_param_comms */
        PUT_LIT(p, ",\"args\":{\"Rank\":");
        p = put_i64(p, w->meta.rank);
        commit(w, p);
        put_collective_args(w, ev);
        p = reserve(w, EVENT_FIXED_BYTES);
        *p++ = '}';
    }
    *p++ = '}';
    commit(w, p);
}

static void write_step(pt_kineto_writer *w, const pt_event *ev)
{
    open_event(w, "{\"ph\":\"X\",\"cat\":\"user_annotation\"");
    if (ev->step >= 0) {
        char *p = reserve(w, 64);
        PUT_LIT(p, "\"ProfilerStep#");
        p = put_i64(p, ev->step);
        *p++ = '"';
        commit(w, p);
    } else {
        put_string(w, ev->name, ev->name_len);
    }
    char *p = put_place_and_time(w, w->meta.pid >= 0 ? w->meta.pid : 0, ev->tid, ev, true);
    *p++ = '}';
    commit(w, p);
}

static void write_counter(pt_kineto_writer *w, const pt_event *ev)
{
    open_event(w, "{\"ph\":\"C\"");
    put_string(w, ev->name, ev->name_len);
    int64_t pid = ev->device >= 0 ? ev->device : w->meta.pid >= 0 ? w->meta.pid : 0;
    char *p = put_place_and_time(w, pid, ev->tid, ev, false);
    PUT_LIT(p, ",\"args\":{\"value\":");
    commit(w, p);
    pt_json_write_double(&w->buf, ev->value);
    pt_buf_puts(&w->buf, "}}");
}

int pt_kineto_writer_event(pt_kineto_writer *w, const pt_event *ev)
{
    if (w->failed)
        return -1;
    switch (ev->kind) {
    case PT_EVENT_GPU_KERNEL:
        write_gpu_event(w, ev, "{\"ph\":\"X\",\"cat\":\"kernel\"");
        break;
    case PT_EVENT_GPU_MEMCPY:
        write_gpu_event(w, ev, "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\"");
        break;
    case PT_EVENT_GPU_MEMSET:
        write_gpu_event(w, ev, "{\"ph\":\"X\",\"cat\":\"gpu_memset\"");
        break;
    case PT_EVENT_RUNTIME:
        write_cpu_side_event(w, ev, is_driver_call(ev->name, ev->name_len) ? "{\"ph\":\"X\",\"cat\":\"cuda_driver\""
                                                                             : "{\"ph\":\"X\",\"cat\":\"cuda_runtime\"");
        break;
    case PT_EVENT_CPU:
        write_cpu_side_event(w, ev, cpu_category(ev));
        break;
    case PT_EVENT_STEP:
        write_step(w, ev);
        break;
    case PT_EVENT_COUNTER:
        write_counter(w, ev);
        break;
    case PT_EVENT_KIND_COUNT:
        break;
    }
    return w->failed ? -1 : 0;
}

/* `,"pid":7` or `,"pid":"Spans"`: an id as the trace had it. */
static void put_id(pt_kineto_writer *w, const char *key, int64_t number, const char *text, size_t text_len)
{
    pt_buf_puts(&w->buf, key);
    if (text)
        put_string(w, text, text_len);
    else
        pt_buf_printf(&w->buf, "%lld", (long long)number);
}

/* `{"ph":"M","name":..,"pid":..,"tid":..,"args":{KEY:VALUE}}` */
int pt_kineto_writer_metadata(pt_kineto_writer *w, const pt_trace_metadata *md)
{
    if (w->failed)
        return -1;
    open_event(w, "{\"ph\":\"M\"");
    put_string(w, md->name, md->name_len);
    put_id(w, ",\"pid\":", md->pid, md->pid_text, md->pid_text_len);
    put_id(w, ",\"tid\":", md->tid, md->tid_text, md->tid_text_len);
    pt_buf_puts(&w->buf, ",\"args\":{");
    put_string(w, md->key, md->key_len);
    pt_buf_putc(&w->buf, ':');
    if (md->text)
        put_string(w, md->text, md->text_len);
    else
        pt_buf_printf(&w->buf, "%lld", (long long)md->number);
    pt_buf_puts(&w->buf, "}}");
    return w->failed ? -1 : 0;
}

/* Parsed again, not copied: what is written is this writer's JSON (escaped as its own
 * strings are), whatever bytes the input spelt it with. */
int pt_kineto_writer_other(pt_kineto_writer *w, const char *json, size_t len)
{
    if (w->failed)
        return -1;
    pt_error err;
    pt_json *object = pt_json_parse(json, len, 64, &err);
    if (object && object->type == PT_JSON_OBJECT) {
        char *p = reserve(w, 2);
        if (w->events++)
            *p++ = ',';
        *p++ = '\n';
        commit(w, p);
        pt_json_write(&w->buf, object, -1);
    }
    pt_json_free(object);
    return w->failed ? -1 : 0;
}

static int sink_event(void *ctx, const pt_event *ev)
{
    return pt_kineto_writer_event(ctx, ev);
}

static void sink_metadata(void *ctx, const pt_trace_metadata *md)
{
    pt_kineto_writer_metadata(ctx, md);
}

static void sink_other(void *ctx, const char *json, size_t len)
{
    pt_kineto_writer_other(ctx, json, len);
}

pt_trace_sink pt_kineto_writer_sink(pt_kineto_writer *w)
{
    pt_trace_sink sink = {w, sink_event, NULL, sink_metadata, sink_other};
    return sink;
}

/* ------------------------------------------------------------ closing */

static void write_top_level(pt_kineto_writer *w)
{
    const pt_trace_meta *m = &w->meta;
    pt_buf *b = &w->buf;
    pt_buf_puts(b, "\n],\n\"baseTimeNanoseconds\":");
    pt_buf_printf(b, "%lld", (long long)m->clock_origin_ns);
    if (m->rank >= 0 || m->world_size > 0 || m->backend[0]) {
        pt_buf_puts(b, ",\n\"distributedInfo\":{\"backend\":");
        put_string(w, m->backend, strlen(m->backend));
        if (m->rank >= 0)
            pt_buf_printf(b, ",\"rank\":%d", (int)m->rank);
        if (m->world_size > 0)
            pt_buf_printf(b, ",\"world_size\":%d", (int)m->world_size);
        pt_buf_putc(b, '}');
    }
    if (m->device_count > 0) {
        pt_buf_puts(b, ",\n\"deviceProperties\":[");
        for (int32_t i = 0; i < m->device_count && i < 4096; i++) {
            pt_buf_printf(b, "%s{\"id\":%d,\"name\":", i ? "," : "", (int)i);
            put_string(w, m->device_name, strlen(m->device_name));
            pt_buf_putc(b, '}');
        }
        pt_buf_putc(b, ']');
    }
    /* Kineto does not record the host; TraceLens-style harnesses put it here, and the
     * reader takes it from here. */
    pt_buf_puts(b, ",\n\"metadata\":{\"producer\":");
    put_string(w, m->producer, strlen(m->producer));
    if (m->software[0]) { /* the reader takes it back from here */
        pt_buf_puts(b, ",\"software\":");
        put_string(w, m->software, strlen(m->software));
    }
    if (m->host[0] || m->pid >= 0) {
        pt_buf_puts(b, ",\"system\":{");
        if (m->pid >= 0)
            pt_buf_printf(b, "\"pid\":%lld%s", (long long)m->pid, m->host[0] ? "," : "");
        if (m->host[0]) {
            pt_buf_puts(b, "\"uname\":{\"node\":");
            put_string(w, m->host, strlen(m->host));
            pt_buf_putc(b, '}');
        }
        pt_buf_putc(b, '}');
    }
    pt_buf_puts(b, "}}\n");
}

static void release(pt_kineto_writer *w)
{
    pt_buf_free(&w->buf);
    free(w->path);
    free(w);
}

int pt_kineto_writer_close(pt_kineto_writer *w, pt_error *err)
{
    write_top_level(w);
    flush(w);
    if (w->gz) {
        int rc = gzclose(w->gz);
        if (rc != Z_OK)
            fail(w, rc == Z_ERRNO ? strerror(errno) : "zlib could not finish the stream");
    } else if (w->plain) {
        if (fclose(w->plain) != 0)
            fail(w, strerror(errno));
    }
    int result = 0;
    if (w->failed) {
        *err = w->err;
        pt_out_file_abandon(&w->file);
        result = -1;
    } else if (w->path && pt_out_file_commit(&w->file, err) != 0) {
        result = -1;
    }
    release(w);
    return result;
}

void pt_kineto_writer_discard(pt_kineto_writer *w)
{
    if (w->gz)
        gzclose(w->gz);
    if (w->plain)
        fclose(w->plain);
    pt_out_file_abandon(&w->file);
    release(w);
}
