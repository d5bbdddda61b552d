/* diff_document.c -- diff.json (pt_diff's document): the runs, the verdict sentence and
 * its cause, each class's and function's change, the findings both diagnoses hold, the
 * notes; every key is in docs/diff-schema.md.
 *
 * A hang in AFTER (its diagnosis's hang finding) is the verdict whatever the step times
 * say. Findings of both runs' diagnoses are matched by category and function, so the diff
 * also lists what AFTER's diagnosis gained or lost. When the runs ran on different setups
 * (GPU model, world size, a version of software both name), the sentence says so first
 * and the cause's class is "environment": a change of setup explains a change of speed
 * before any function does.
 *
 * Otherwise the sentence names the straggler ranks when diff.c's design says they are the
 * cause (explain_straggler), or else the median worker's classes that moved most
 * (explain_typical), each with the function that moved most in it.
 *
 * Cost: linear in the functions compared and in the findings (matched through a hash of
 * category and function). */
#include "compare/diff_state.h"
#include "summarize/summary_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHANGED 100
#define MAX_LISTED 200
#define NAME_CHARS 96        /* a function's short name in a sentence */

static const char *const part_labels[PT_STEP_PART_COUNT] = {
    "GPU compute", "GPU memory operations", "communication", "CUDA runtime", "Python", "idle", "step"};

/* ------------------------------------------------------------ JSON */

static pt_json *number_or_null(double v)
{
    return isfinite(v) ? pt_json_number_rounded(v, 6) : pt_json_null();
}

static pt_json *ranks_json(const change *c)
{
    pt_json *list = pt_json_array();
    for (size_t i = 0; i < c->rank_count; i++) {
        pt_json *r = pt_json_push(list, pt_json_object());
        pt_json_add(r, "rank", pt_json_int(c->ranks[i].rank));
        pt_json_add(r, "before_ms", number_or_null(c->ranks[i].before));
        pt_json_add(r, "after_ms", number_or_null(c->ranks[i].after));
        pt_json_add(r, "delta_ms", number_or_null(c->ranks[i].after - c->ranks[i].before));
    }
    return list;
}

static void add_change(pt_json *j, const change *c)
{
    pt_json_add(j, "before_ms", number_or_null(c->before));
    pt_json_add(j, "after_ms", number_or_null(c->after));
    pt_json_add(j, "delta_ms", number_or_null(c->delta));
    pt_json_add(j, "delta_pct", c->before > 0 ? number_or_null(100 * c->delta / c->before) : pt_json_null());
    pt_json_add(j, "threshold_ms", number_or_null(c->threshold));
    pt_json_add(j, "significant", pt_json_bool(c->significant));
    pt_json_add(j, "counted_by", !c->significant ? pt_json_null()
                                 : pt_json_string(c->by_steps_apart ? "steps_apart" : "noise"));
    pt_json_add(j, "ranks", ranks_json(c));
    if (c->ranks_standing_out > c->rank_count)
        pt_json_add(j, "ranks_standing_out", pt_json_int((int64_t)c->ranks_standing_out));
}

/* One quantity of both runs: "before_NAME" and "after_NAME". */
static void add_before_after(pt_json *j, const char *name, pt_json *before, pt_json *after)
{
    char key[64];
    snprintf(key, sizeof key, "before_%s", name);
    pt_json_add(j, key, before);
    snprintf(key, sizeof key, "after_%s", name);
    pt_json_add(j, key, after);
}

static pt_json *function_json(const fn_change *f)
{
    pt_json *j = pt_function_json_object(f->cls, f->name, f->group);
    add_change(j, &f->exposed);
    add_before_after(j, "total_ms", number_or_null(f->total_b), number_or_null(f->total_a));
    add_before_after(j, "calls", number_or_null(f->calls_b), number_or_null(f->calls_a));
    add_before_after(j, "ms_per_call", number_or_null(f->per_call_b), number_or_null(f->per_call_a));
    add_before_after(j, "workers", pt_json_int((int64_t)f->workers_b), pt_json_int((int64_t)f->workers_a));
    return j;
}

static const char *source_name(pt_run_source s)
{
    return s == PT_RUN_TRACES ? "traces" : s == PT_RUN_SUMMARIES ? "summaries" : "report";
}

/* The distinct GPU models of a run, up to four. */
static pt_json *devices_json(const side *s)
{
    pt_json *list = pt_json_array();
    for (size_t w = 0; w < s->a.n && list->count < 4; w++) {
        const char *dev = s->a.workers[w]->device_name;
        bool seen = !dev || !*dev;
        for (size_t i = 0; !seen && i < list->count; i++)
            seen = strcmp(list->items[i]->string, dev) == 0;
        if (!seen)
            pt_json_push(list, pt_json_string(dev));
    }
    return list;
}

/* The world size the run's own report gives, NAN when it gives none. */
static double world_size_of(const side *s)
{
    return pt_json_get_number(pt_json_get(s->run->report, "job"), "world_size", NAN);
}

static pt_json *run_json(const side *s, const change *step, bool before)
{
    const pt_json *report = s->run->report;
    pt_json *j = pt_json_object();
    pt_json_add(j, "input", pt_json_string(s->run->label));
    pt_json_add(j, "source", pt_json_string(source_name(s->run->source)));
    pt_json_add(j, "workers", pt_json_int((int64_t)s->a.n));
    pt_json_add(j, "world_size", number_or_null(world_size_of(s)));
    pt_json_add(j, "steps", number_or_null(s->steps));
    pt_json_add(j, "step_time_ms", number_or_null(before ? step->before : step->after));
    pt_json_add(j, "devices", devices_json(s));
    pt_json_add(j, "verdict", pt_json_string(pt_json_get_string(pt_json_get(report, "diagnosis"), "verdict", "unknown")));
    return j;
}

/* ------------------------------------------------------------ findings: new, resolved */

static const pt_json *findings_of(const pt_diff_run *run)
{
    const pt_json *f = pt_json_get(pt_json_get(run->report, "diagnosis"), "findings");
    return f && f->type == PT_JSON_ARRAY ? f : NULL;
}

/* A run's findings by (category, function), the first of each: matched in constant time,
 * however many a report lists. */
typedef struct finding_index {
    const pt_json *list;
    pt_strtab keys;
    size_t *first;                     /* [key id] its first finding in list */
} finding_index;

static void finding_key(pt_buf *key, const pt_json *f)
{
    const char *category = pt_json_get_string(f, "category", ""), *function = pt_json_get_string(f, "function", "");
    pt_buf_reset(key);
    pt_buf_append(key, category, strlen(category) + 1); /* its NUL too: "a" + "bc" is not "ab" + "c" */
    pt_buf_puts(key, function);
}

static void index_findings(finding_index *x, const pt_json *list)
{
    x->list = list;
    pt_strtab_init(&x->keys);
    x->first = pt_xmalloc((list && list->count ? list->count : 1) * sizeof *x->first);
    pt_buf key = PT_BUF_INIT;
    for (size_t i = 0; list && i < list->count; i++) {
        finding_key(&key, list->items[i]);
        size_t known = x->keys.count;
        uint32_t id = pt_strtab_intern(&x->keys, key.data, key.len);
        if (x->keys.count > known)
            x->first[id] = i;
    }
    pt_buf_free(&key);
}

static void free_finding_index(finding_index *x)
{
    pt_strtab_free(&x->keys);
    free(x->first);
}

/* The first finding of the index with f's category and function, or NULL. */
static const pt_json *find_same(const finding_index *x, const pt_json *f)
{
    pt_buf key = PT_BUF_INIT;
    finding_key(&key, f);
    uint32_t id = pt_strtab_find(&x->keys, key.data, key.len);
    pt_buf_free(&key);
    return id == UINT32_MAX ? NULL : x->list->items[x->first[id]];
}

/* A report finding's "function" (a string, or null) and "workers" (its ranks; what is
 * not a number is left out), copied for the diff. */
static pt_json *finding_function(const pt_json *f)
{
    const pt_json *fn = pt_json_get(f, "function");
    return fn && fn->type == PT_JSON_STRING ? pt_json_string(fn->string) : pt_json_null();
}

static pt_json *finding_ranks(const pt_json *f)
{
    pt_json *list = pt_json_array();
    const pt_json *ranks = pt_json_get(f, "workers");
    for (size_t i = 0; ranks && ranks->type == PT_JSON_ARRAY && i < ranks->count; i++)
        if (ranks->items[i]->type == PT_JSON_NUMBER)
            pt_json_push(list, pt_json_int((int64_t)ranks->items[i]->number));
    return list;
}

static pt_json *finding_json(const pt_json *f, const pt_json *other)
{
    pt_json *j = pt_json_object();
    pt_json_add(j, "category", pt_json_string(pt_json_get_string(f, "category", "other")));
    pt_json_add(j, "function", finding_function(f));
    pt_json_add(j, "workers", finding_ranks(f));
    const pt_json *all = pt_json_get(f, "all_workers");
    pt_json_add(j, "all_workers", pt_json_bool(all && all->type == PT_JSON_BOOL && all->boolean));
    pt_json_add(j, "impact", number_or_null(pt_json_get_number(f, "impact", NAN)));
    if (other)
        pt_json_add(j, "impact_before", number_or_null(pt_json_get_number(other, "impact", NAN)));
    pt_json_add(j, "summary", pt_json_string(pt_json_get_string(f, "summary", "")));
    return j;
}

static pt_json *findings_json(const pt_diff_run *before, const pt_diff_run *after)
{
    const pt_json *fb = findings_of(before), *fa = findings_of(after);
    finding_index ib, ia;
    index_findings(&ib, fb);
    index_findings(&ia, fa);
    pt_json *j = pt_json_object();
    pt_json *added = pt_json_add(j, "new", pt_json_array());
    pt_json *resolved = pt_json_add(j, "resolved", pt_json_array());
    pt_json *persisting = pt_json_add(j, "persisting", pt_json_array());
    for (size_t i = 0; fa && i < fa->count; i++) {
        const pt_json *was = find_same(&ib, fa->items[i]);
        pt_json_push(was ? persisting : added, finding_json(fa->items[i], was));
    }
    for (size_t i = 0; fb && i < fb->count; i++)
        if (!find_same(&ia, fb->items[i]))
            pt_json_push(resolved, finding_json(fb->items[i], NULL));
    free_finding_index(&ib);
    free_finding_index(&ia);
    return j;
}

/* ------------------------------------------------------------ the verdict */

static void put_ms(pt_buf *out, double ms)
{
    double a = fabs(ms);
    pt_buf_printf(out, a >= 1000 ? "%.0f ms" : a >= 0.1 ? "%.3g ms" : "%.2g ms", ms);
}

static void put_signed_ms(pt_buf *out, double ms)
{
    pt_buf_puts(out, ms >= 0 ? "+" : "\xe2\x88\x92"); /* U+2212 minus */
    put_ms(out, fabs(ms));
}

static void put_capitalized(pt_buf *out, const char *text)
{
    pt_buf_putc(out, text[0] >= 'a' && text[0] <= 'z' ? (char)(text[0] - 'a' + 'A') : text[0]);
    pt_buf_puts(out, text + 1);
}

static void put_function(pt_buf *out, const fn_change *f)
{
    pt_buf name = PT_BUF_INIT;
    pt_short_function_name(f->cls, f->name, &name);
    if (name.len > NAME_CHARS)
        pt_buf_puts(out, "..."), pt_buf_append(out, name.data + name.len - NAME_CHARS, NAME_CHARS);
    else
        pt_buf_append(out, name.data, name.len);
    pt_buf_free(&name);
}

static void put_ranks(pt_buf *out, const rank_change *ranks, size_t n, size_t total)
{
    pt_buf_puts(out, n == 1 && total == 1 ? "Rank " : "Ranks ");
    for (size_t i = 0; i < n && i < 4; i++)
        pt_buf_printf(out, "%s%d", i == 0 ? "" : i + 1 == n && total == n ? " and " : ", ", ranks[i].rank);
    if (total > 4)
        pt_buf_printf(out, " and %zu more", total - 4);
}

/* The function of a class that moved most in direction sign: on the median worker, or
 * on the ranks of ranks_of when given. It attributes a class's change that is beyond
 * noise, so a function needs only be material (over floor), not beyond noise by itself:
 * a class's change can be spread over many functions, each within noise. */
static const fn_change *top_function(const fn_list *fns, pt_class cls, double sign, const change *ranks_of,
                                     double floor)
{
    const fn_change *best = NULL;
    double best_delta = 0;
    for (size_t i = 0; i < fns->count; i++) {
        const fn_change *f = &fns->items[i];
        if (f->cls != cls)
            continue;
        double delta = !ranks_of && fabs(f->exposed.delta) > floor ? f->exposed.delta : 0;
        for (size_t k = 0; ranks_of && k < f->exposed.rank_count; k++)
            for (size_t r = 0; r < ranks_of->rank_count; r++)
                if (f->exposed.ranks[k].rank == ranks_of->ranks[r].rank) {
                    double dr = f->exposed.ranks[k].after - f->exposed.ranks[k].before;
                    delta = sign * dr > sign * delta ? dr : delta;
                }
        if (sign * delta > sign * best_delta)
            best = f, best_delta = delta;
    }
    return best;
}

/* "most in NAME (+4.5 ms[, 774 calls per step instead of 3])" */
static void put_most_in(pt_buf *out, const fn_change *f, double delta)
{
    if (!f)
        return;
    pt_buf_puts(out, ", most in ");
    put_function(out, f);
    pt_buf_puts(out, " (");
    put_signed_ms(out, delta);
    if (f->kind == FN_ADDED)
        pt_buf_puts(out, ", new");
    else if (f->kind == FN_REMOVED)
        pt_buf_puts(out, ", gone");
    else if (isfinite(f->calls_b) && isfinite(f->calls_a) && fabs(f->calls_a - f->calls_b) >= 0.5 &&
             fabs(f->calls_a - f->calls_b) > 0.1 * fmax(f->calls_b, 1))
        pt_buf_printf(out, ", %.4g calls per step instead of %.4g", f->calls_a, f->calls_b);
    pt_buf_putc(out, ')');
}

static double rank_delta_of(const fn_change *f, const change *ranks_of)
{
    double best = 0;
    for (size_t k = 0; k < f->exposed.rank_count; k++)
        for (size_t r = 0; r < ranks_of->rank_count; r++)
            if (f->exposed.ranks[k].rank == ranks_of->ranks[r].rank) {
                double dr = f->exposed.ranks[k].after - f->exposed.ranks[k].before;
                best = fabs(dr) > fabs(best) ? dr : best;
            }
    return best;
}

/* A straggler: ranks whose non-communication time moved in direction sign while the
 * median worker's waiting (communication or idle) moved the same way. Returns the class,
 * or -1. */
static int find_straggler_class(const change *parts, double sign)
{
    int best = -1;
    double best_delta = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++) {
        if (c == PT_CLASS_COMM)
            continue;
        for (size_t r = 0; r < parts[c].rank_count; r++) {
            double dr = parts[c].ranks[r].after - parts[c].ranks[r].before;
            if (sign * (dr - parts[c].delta) > 0 && sign * dr > best_delta)
                best = c, best_delta = sign * dr;
        }
    }
    return best;
}

static bool others_wait(const change *parts, double sign)
{
    const change *comm = &parts[PT_CLASS_COMM], *idle = &parts[PT_STEP_IDLE];
    return (comm->significant && sign * comm->delta > 0) || (idle->significant && sign * idle->delta > 0);
}

static void explain_straggler(pt_buf *out, pt_json *cause, const change *parts, const fn_list *fns, int cls,
                              double sign)
{
    /* The ranks that moved in this direction. */
    change moved = parts[cls];
    moved.rank_count = 0;
    for (size_t r = 0; r < parts[cls].rank_count; r++)
        if (sign * (parts[cls].ranks[r].after - parts[cls].ranks[r].before - parts[cls].delta) > 0)
            moved.ranks[moved.rank_count++] = parts[cls].ranks[r];
    double dr = moved.ranks[0].after - moved.ranks[0].before;
    put_ranks(out, moved.ranks, moved.rank_count, moved.rank_count);
    pt_buf_printf(out, ": %s time %s by ", part_labels[cls], sign > 0 ? "grew" : "fell");
    put_ms(out, fabs(dr));
    pt_buf_puts(out, " per step");
    const fn_change *f = top_function(fns, (pt_class)cls, sign, &moved, 0);
    put_most_in(out, f, f ? rank_delta_of(f, &moved) : 0);
    bool one = moved.rank_count == 1;
    if (others_wait(parts, sign)) {
        const change *wait = parts[PT_CLASS_COMM].significant ? &parts[PT_CLASS_COMM] : &parts[PT_STEP_IDLE];
        pt_buf_printf(out, "; the other workers %s for %s %s (%s ", sign > 0 ? "wait" : "no longer wait",
                      one ? "it" : "them", wait == &parts[PT_CLASS_COMM] ? "in collectives" : "idle",
                      part_labels[wait == &parts[PT_CLASS_COMM] ? PT_CLASS_COMM : PT_STEP_IDLE]);
        put_signed_ms(out, wait->delta);
        pt_buf_puts(out, " per step on the median worker)");
    }
    pt_buf_puts(out, ".");
    pt_json_add(cause, "class", pt_json_string(pt_class_name((pt_class)cls)));
    pt_json_add(cause, "function", f ? pt_json_string(f->name) : pt_json_null());
    pt_json *ranks = pt_json_add(cause, "ranks", pt_json_array());
    for (size_t r = 0; r < moved.rank_count; r++)
        pt_json_push(ranks, pt_json_int(moved.ranks[r].rank));
}

/* The median worker's classes that moved most in direction sign (two at most). */
static void explain_typical(pt_buf *out, pt_json *cause, const change *parts, const fn_list *fns, double sign)
{
    int order[PT_CLASS_COUNT], n = 0;
    for (int c = 0; c < PT_CLASS_COUNT; c++)
        if (parts[c].significant && sign * parts[c].delta > 0)
            order[n++] = c;
    for (int i = 1; i < n; i++) /* insertion sort by |delta|, n <= 5 */
        for (int k = i; k > 0 && fabs(parts[order[k]].delta) > fabs(parts[order[k - 1]].delta); k--) {
            int t = order[k];
            order[k] = order[k - 1], order[k - 1] = t;
        }
    if (n == 0) {
        const change *idle = &parts[PT_STEP_IDLE];
        pt_buf_printf(out, "No class of activity explains it%s", idle->significant ? ": idle time " : ".");
        if (idle->significant) {
            put_signed_ms(out, idle->delta);
            pt_buf_puts(out, " per step (waiting on something the trace does not show).");
        }
        pt_json_add(cause, "class", pt_json_string(idle->significant ? "idle" : ""));
        pt_json_add(cause, "function", pt_json_null());
        pt_json_add(cause, "ranks", pt_json_array());
        return;
    }
    const fn_change *first = NULL;
    for (int i = 0; i < n && i < 2; i++) {
        int c = order[i];
        const fn_change *f = top_function(fns, (pt_class)c, sign, NULL,
                                          MATERIAL_SHARE * fmax(parts[PT_STEP_DURATION].before, parts[PT_STEP_DURATION].after));
        first = i == 0 ? f : first;
        if (i == 0) {
            put_capitalized(out, part_labels[c]);
            pt_buf_printf(out, " time %s by ", sign > 0 ? "grew" : "fell");
            put_ms(out, fabs(parts[c].delta));
            pt_buf_puts(out, " per step");
        } else {
            pt_buf_printf(out, "; %s ", part_labels[c]);
            put_signed_ms(out, parts[c].delta);
        }
        put_most_in(out, f, f ? f->exposed.delta : 0);
    }
    pt_buf_puts(out, ".");
    pt_json_add(cause, "class", pt_json_string(pt_class_name((pt_class)order[0])));
    pt_json_add(cause, "function", first ? pt_json_string(first->name) : pt_json_null());
    pt_json_add(cause, "ranks", pt_json_array());
}

static size_t significant_functions(const fn_list *fns)
{
    size_t n = 0;
    for (size_t i = 0; i < fns->count; i++)
        n += fns->items[i].score > 0;
    return n;
}

/* The first hang finding of a run's diagnosis, or NULL. */
static const pt_json *hang_of(const pt_diff_run *run)
{
    const pt_json *findings = findings_of(run);
    for (size_t i = 0; findings && i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "category", ""), "hang") == 0)
            return findings->items[i];
    return NULL;
}

/* A run that hangs says more than any step time: its diagnosis's hang finding leads. */
static bool explain_hang(pt_buf *out, pt_json *v, pt_json *cause, const pt_diff_run *before, const pt_diff_run *after)
{
    const pt_json *hang_b = hang_of(before), *hang_a = hang_of(after);
    if (hang_a && !hang_b) {
        pt_json_add(v, "change", pt_json_string("hang"));
        pt_buf_printf(out, "AFTER hangs and BEFORE did not: %s", pt_json_get_string(hang_a, "summary", ""));
        pt_json_add(cause, "class", pt_json_string("hang"));
        pt_json_add(cause, "function", finding_function(hang_a));
        pt_json_add(cause, "ranks", finding_ranks(hang_a));
        return true;
    }
    if (hang_b && !hang_a)
        pt_buf_puts(out, "BEFORE hung and AFTER does not. ");
    return false;
}

/* ------------------------------------------------------------ what the runs ran on */

/* The first GPU model and the first software list any worker of a run states ("" when
 * none does), and the world size its report gives (0 unknown). */
static const char *first_stated(const side *s, bool software)
{
    for (size_t w = 0; w < s->a.n; w++) {
        const char *v = software ? s->a.workers[w]->software : s->a.workers[w]->device_name;
        if (v && *v)
            return v;
    }
    return "";
}

static void add_difference(pt_json *list, const char *what, const char *before, const char *after)
{
    pt_json *d = pt_json_push(list, pt_json_object());
    pt_json_add(d, "what", pt_json_string(what));
    pt_json_add(d, "before", pt_json_string(before));
    pt_json_add(d, "after", pt_json_string(after));
}

/* The next "name version" of a software list ("torch 2.5.1, nccl 2.21.5"): false at its
 * end. The name is everything before the last space. */
static bool next_component(const char **p, char *name, size_t name_cap, char *version, size_t version_cap)
{
    while (*p && **p) {
        const char *end = strstr(*p, ", ");
        size_t len = end ? (size_t)(end - *p) : strlen(*p);
        size_t space = len;
        while (space > 0 && (*p)[space - 1] != ' ')
            space--;
        const char *item = *p;
        *p = end ? end + 2 : NULL;
        if (space > 1) {
            snprintf(name, name_cap, "%.*s", (int)(space - 1), item);
            snprintf(version, version_cap, "%.*s", (int)(len - space), item + space);
            return true;
        }
    }
    return false;
}

/* Each component both software lists name, with a different version. */
static void add_software_differences(pt_json *list, const char *before, const char *after)
{
    char name[64], was[64], other[64], now[64];
    for (const char *p = before; next_component(&p, name, sizeof name, was, sizeof was);)
        for (const char *q = after; next_component(&q, other, sizeof other, now, sizeof now);)
            if (strcmp(name, other) == 0 && strcmp(was, now) != 0)
                add_difference(list, name, was, now);
}

/* What the two runs ran on, where it differs: the GPU model, the job's world size, the
 * versions of the software both name. A change there explains a change of step time
 * better than any function can, so the verdict leads with it. */
static pt_json *environment_json(const diff_ctx *d)
{
    pt_json *list = pt_json_array();
    const char *gpu_b = first_stated(&d->before, false), *gpu_a = first_stated(&d->after, false);
    if (*gpu_b && *gpu_a && strcmp(gpu_b, gpu_a) != 0)
        add_difference(list, "GPU", gpu_b, gpu_a);
    double ws_b = world_size_of(&d->before), ws_a = world_size_of(&d->after);
    if (ws_b > 0 && ws_a > 0 && ws_b != ws_a) {
        char b[32], a[32];
        snprintf(b, sizeof b, "%g", ws_b);
        snprintf(a, sizeof a, "%g", ws_a);
        add_difference(list, "world size", b, a);
    }
    add_software_differences(list, first_stated(&d->before, true), first_stated(&d->after, true));
    return list;
}

/* "The runs ran on different setups (GPU A100 -> V100; world size 8 -> 2), which alone
 * can change the step time. " */
static void put_environment(pt_buf *out, const pt_json *environment)
{
    pt_buf_puts(out, "The runs ran on different setups (");
    for (size_t i = 0; i < environment->count; i++) {
        const pt_json *d = environment->items[i];
        pt_buf_printf(out, "%s%s %s \xe2\x86\x92 %s", i ? "; " : "", pt_json_get_string(d, "what", ""),
                      pt_json_get_string(d, "before", ""), pt_json_get_string(d, "after", ""));
    }
    pt_buf_puts(out, "), which alone can change the step time. ");
}

static pt_json *verdict_json(const diff_ctx *d, const change *parts, const fn_list *fns)
{
    bool paired = d->paired;
    const pt_diff_run *before = d->before.run, *after = d->after.run;
    const change *step = &parts[PT_STEP_DURATION];
    pt_json *v = pt_json_object();
    pt_buf s = PT_BUF_INIT;
    pt_json *cause = pt_json_object();
    pt_json *environment = environment_json(d);
    if (environment->count)
        put_environment(&s, environment);
    bool hang = explain_hang(&s, v, cause, before, after);
    if (hang) {
        /* the hang is the verdict */
    } else if (step->significant) {
        double sign = step->delta > 0 ? 1 : -1;
        pt_json_add(v, "change", pt_json_string(sign > 0 ? "slower" : "faster"));
        pt_buf_puts(&s, "AFTER is ");
        put_ms(&s, fabs(step->delta));
        if (step->before > 0)
            pt_buf_printf(&s, " (%.3g%%)", 100 * fabs(step->delta) / step->before);
        pt_buf_printf(&s, " %s per step than BEFORE (", sign > 0 ? "slower" : "faster");
        put_ms(&s, step->before);
        pt_buf_puts(&s, " \xe2\x86\x92 "); /* U+2192 arrow */
        put_ms(&s, step->after);
        pt_buf_puts(&s, "). ");
        int straggler = paired ? find_straggler_class(parts, sign) : -1;
        if (straggler >= 0)
            explain_straggler(&s, cause, parts, fns, straggler, sign);
        else
            explain_typical(&s, cause, parts, fns, sign);
    } else {
        pt_json_add(v, "change", pt_json_string("unchanged"));
        pt_buf_puts(&s, "Step time did not change beyond noise (");
        put_ms(&s, step->before);
        pt_buf_puts(&s, " \xe2\x86\x92 ");
        put_ms(&s, step->after);
        pt_buf_puts(&s, ", threshold \xc2\xb1");
        put_ms(&s, step->threshold);
        size_t changed = significant_functions(fns);
        if (changed == 0) {
            pt_buf_puts(&s, ") and no function's time per step changed beyond noise.");
            pt_json_free(cause);
            cause = NULL;
        } else {
            const fn_change *f = &fns->items[0]; /* sorted: the largest change */
            pt_buf_puts(&s, "), but ");
            put_function(&s, f);
            pt_buf_puts(&s, " changed by ");
            put_signed_ms(&s, f->exposed.significant ? f->exposed.delta : rank_delta_of(f, &f->exposed));
            pt_buf_printf(&s, " per step%s", f->exposed.significant ? "" : " on some ranks");
            if (changed > 1)
                pt_buf_printf(&s, " (and %zu more function%s)", changed - 1, changed > 2 ? "s" : "");
            pt_buf_puts(&s, ".");
            pt_json_add(cause, "class", pt_json_string(pt_class_name(f->cls)));
            pt_json_add(cause, "function", pt_json_string(f->name));
            pt_json *ranks = pt_json_add(cause, "ranks", pt_json_array());
            for (size_t r = 0; r < f->exposed.rank_count; r++)
                pt_json_push(ranks, pt_json_int(f->exposed.ranks[r].rank));
        }
    }
    if (environment->count && cause && !hang) /* the setup comes first; the function is what changed most */
        pt_json_set(cause, "class", pt_json_string("environment"));
    pt_json_add(v, "sentence", pt_json_string(pt_buf_cstr(&s)));
    pt_json_add(v, "cause", cause ? cause : pt_json_null());
    pt_json_add(v, "environment", environment);
    pt_buf_free(&s);
    return v;
}

/* ------------------------------------------------------------ notes */

static void note(pt_json *notes, const char *fmt, ...) PT_PRINTF(2, 3);
static void note(pt_json *notes, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pt_json_push(notes, pt_json_string(text));
}

static void add_notes(pt_json *notes, const diff_ctx *d)
{
    const side *sides[2] = {&d->before, &d->after};
    static const char *const names[2] = {"BEFORE", "AFTER"};
    if (d->paired)
        note(notes, "Both runs have the same %zu rank%s: figures are the median worker's, and ranks whose change "
                    "stands out from the others' are listed.",
             d->before.a.n, d->before.a.n == 1 ? "" : "s");
    else if (d->before.a.n == 1 && d->after.a.n == 1)
        note(notes, "Each run has one worker (BEFORE rank %d, AFTER rank %d): the two are compared directly.",
             pt_worker_rank(&d->before.a, 0), pt_worker_rank(&d->after.a, 0));
    else
        note(notes, "BEFORE has %zu worker%s and AFTER %zu%s: figures are the median worker's (per-worker "
                    "medians), not rank by rank.",
             d->before.a.n, d->before.a.n == 1 ? "" : "s", d->after.a.n,
             d->before.a.n == d->after.a.n ? ", with other ranks" : "");
    double ws_b = world_size_of(&d->before), ws_a = world_size_of(&d->after);
    if (ws_b > 0 && ws_a > 0 && ws_b != ws_a)
        note(notes, "The runs come from jobs of different sizes (world size %g and %g).", ws_b, ws_a);
    bool reports[2] = {d->before.run->source == PT_RUN_REPORT, d->after.run->source == PT_RUN_REPORT};
    if (reports[0] || reports[1])
        note(notes, "%s, which carr%s less than traces or summaries: bottleneck ratios of the 10 costliest "
                    "kernels, of runtime calls over 0.1%% and of Python stacks over 1%% on some worker, and no execution "
                    "counts or total times. A kernel, runtime call or Python stack it does not list is not compared; "
                    "only memory operations and collectives are judged added or removed.",
             reports[0] && reports[1] ? "BEFORE and AFTER are report.json files" : reports[0] ? "BEFORE is a report.json"
                                                                                      : "AFTER is a report.json",
             reports[0] && reports[1] ? "y" : "ies");
    for (int i = 0; i < 2; i++) {
        const side *s = sides[i];
        if (!isfinite(s->noise[PT_STEP_DURATION]))
            note(notes, "%s has fewer than two profiled steps on most workers, so its step-to-step noise is unknown: "
                        "its changes are judged by size (%g%% of the step time)%s.",
                 names[i], 100 * MATERIAL_SHARE, s->a.n >= MIN_SPREAD_WORKERS ? " and by the spread across workers" : "");
    }
    pt_json *db = devices_json(&d->before), *da = devices_json(&d->after);
    if (db->count && da->count && strcmp(db->items[0]->string, da->items[0]->string) != 0)
        note(notes, "The runs used different GPUs (%s; %s): kernel times are not comparable one for one.",
             db->items[0]->string, da->items[0]->string);
    pt_json_free(db);
    pt_json_free(da);
}

/* ------------------------------------------------------------ the document */

/* fns is sorted by score (largest change first). */
static void add_function_lists(pt_json *doc, const fn_list *fns)
{
    pt_json *changed = pt_json_add(doc, "functions", pt_json_array());
    pt_json *added = pt_json_array(), *removed = pt_json_array();
    size_t counts[3] = {0, 0, 0};
    for (size_t i = 0; i < fns->count; i++) {
        const fn_change *f = &fns->items[i];
        if (f->kind == FN_CHANGED && f->score == 0)
            continue;
        pt_json *list = f->kind == FN_ADDED ? added : f->kind == FN_REMOVED ? removed : changed;
        if (counts[f->kind]++ < (f->kind == FN_CHANGED ? MAX_CHANGED : MAX_LISTED))
            pt_json_push(list, function_json(f));
    }
    pt_json_add(doc, "functions_changed", pt_json_int((int64_t)counts[FN_CHANGED]));
    pt_json_add(doc, "functions_compared", pt_json_int((int64_t)fns->count));
    pt_json_add(doc, "added", added);
    pt_json_add(doc, "added_count", pt_json_int((int64_t)counts[FN_ADDED]));
    pt_json_add(doc, "removed", removed);
    pt_json_add(doc, "removed_count", pt_json_int((int64_t)counts[FN_REMOVED]));
}

static void add_warnings(pt_json *doc, const pt_diff_run *before, const pt_diff_run *after)
{
    pt_json *list = pt_json_add(doc, "warnings", pt_json_array());
    const pt_diff_run *runs[2] = {before, after};
    static const char *const names[2] = {"BEFORE", "AFTER"};
    pt_buf line = PT_BUF_INIT;
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < runs[i]->warning_count; k++) {
            pt_buf_reset(&line);
            pt_buf_printf(&line, "%s: %s", names[i], runs[i]->warnings[k]);
            pt_json_push(list, pt_json_string(line.data));
        }
    pt_buf_free(&line);
}

pt_json *diff_document(const diff_ctx *d, const change *parts, const fn_list *fns, const char *generated_at)
{
    const pt_diff_run *before = d->before.run, *after = d->after.run;
    pt_json *doc = pt_json_object();
    char now[32];
    if (!generated_at)
        pt_iso_now(now, sizeof now);
    pt_json_add(doc, "diff_version", pt_json_int(1));
    pt_json_add(doc, "perftracker_version", pt_json_string(PT_VERSION));
    pt_json_add(doc, "generated_at", pt_json_string(generated_at ? generated_at : now));
    pt_json_add(doc, "before", run_json(&d->before, &parts[PT_STEP_DURATION], true));
    pt_json_add(doc, "after", run_json(&d->after, &parts[PT_STEP_DURATION], false));
    pt_json_add(doc, "comparison", pt_json_string(d->paired ? "rank by rank" : "median worker"));
    pt_json_add(doc, "verdict", verdict_json(d, parts, fns));
    pt_json *step = pt_json_add(doc, "step_time", pt_json_object());
    add_change(step, &parts[PT_STEP_DURATION]);
    pt_json *classes = pt_json_add(doc, "classes", pt_json_array());
    for (int p = 0; p <= PT_STEP_IDLE; p++) {
        pt_json *c = pt_json_push(classes, pt_json_object());
        pt_json_add(c, "class", pt_json_string(p == PT_STEP_IDLE ? "idle" : pt_class_name((pt_class)p)));
        add_change(c, &parts[p]);
    }
    add_function_lists(doc, fns);
    pt_json_add(doc, "findings", findings_json(before, after));
    pt_json *notes = pt_json_add(doc, "notes", pt_json_array());
    add_notes(notes, d);
    add_warnings(doc, before, after);
    return doc;
}
