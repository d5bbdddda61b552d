/* report_text.c -- the report as a person reads it at the terminal.
 *
 * The verdict and its findings come first, then the job in one line, then the warnings,
 * then one log line per seed section. A job's workers often say the same thing (every
 * rank of a CPU-only job: "no GPU events"), so warnings about single workers ("NAME:
 * text", as diagnose writes them) are grouped by their text and name the ranks ("4 workers
 * (ranks 0-3): text"); a warning about one worker keeps its file name beside its rank, as
 * that is what analyze was given. In the sections workers are ranks, numbers are rounded
 * (a ratio to a tenth of a percent or three digits, milliseconds to three), names are
 * shortened (a kernel without its parameter list, a Python stack by its last frames) and
 * each section shows its few largest entries, so the whole fits a screen whatever the
 * job; report.json holds everything.
 *
 * The seed's form of the sections -- each section's JSON as a log line,
 * "[2026-11-29 07:30:00,046 PerfTracker] (gpu_compute.c) INFO: {...}" under a line naming
 * it -- is kept, whole, as pt_report_render_sections (`--verbose`); the default keeps the
 * same section names and log prefixes with the digest in place of the JSON.
 *
 * Everything here reads a report that may come from a file (perftracker display, diff,
 * the fuzzers): a member of another type than expected is skipped, never trusted. */
#define _POSIX_C_SOURCE 200809L
#include "report/report.h"
#include "util/strtab.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOP_ENTRIES 3          /* entries shown per section (the largest) */
#define RANKS_LISTED 4         /* workers named in one entry before "+N more" */
#define RANK_RUNS_LISTED 8     /* runs ("0-3") of a rank list before "..." */
#define WARNING_GROUPS_SHOWN 24
#define NAME_MAX_SHOWN 72      /* a shortened name's characters before "..." */
#define NAME_PREFIX_SCAN 512   /* where a warning's "NAME: " prefix may end */
#define AMBIGUOUS_RANK INT32_MIN

/* ------------------------------------------------------------ workers by name */

/* Worker file names -> global ranks, from the report's "workers" (a bounded report lists
 * only some: the others keep their file name). A name two workers share names neither. */
typedef struct worker_names {
    pt_strtab names;
    int32_t *ranks; /* [id] */
    size_t cap;
} worker_names;

static void worker_names_init(worker_names *m, const pt_json *report)
{
    memset(m, 0, sizeof *m);
    pt_strtab_init(&m->names);
    const pt_json *workers = pt_json_get(report, "workers");
    for (size_t i = 0; workers && workers->type == PT_JSON_ARRAY && i < workers->count; i++) {
        const pt_json *w = workers->items[i];
        const pt_json *name = pt_json_get(w, "name"), *rank = pt_json_get(w, "rank");
        if (!name || name->type != PT_JSON_STRING || !rank || rank->type != PT_JSON_NUMBER || !rank->is_integer ||
            rank->integer < 0 || rank->integer > INT32_MAX)
            continue;
        size_t before = m->names.count;
        uint32_t id = pt_strtab_intern(&m->names, name->string, name->string_len);
        PT_GROW(m->ranks, m->cap, (size_t)id + 1);
        if (m->names.count > before)
            m->ranks[id] = (int32_t)rank->integer;
        else if (m->ranks[id] != (int32_t)rank->integer)
            m->ranks[id] = AMBIGUOUS_RANK;
    }
}

static void worker_names_free(worker_names *m)
{
    pt_strtab_free(&m->names);
    free(m->ranks);
}

/* The rank of the worker named name[0..n), or -1 when no single worker has that name. */
static int32_t rank_of(const worker_names *m, const char *name, size_t n)
{
    uint32_t id = pt_strtab_find(&m->names, name, n);
    return id == UINT32_MAX || m->ranks[id] == AMBIGUOUS_RANK ? -1 : m->ranks[id];
}

/* "rank 3" for a worker the report knows, else its name as given. */
static void put_worker(pt_buf *out, const worker_names *m, const pt_json *name)
{
    if (!name || name->type != PT_JSON_STRING)
        return pt_buf_puts(out, "?");
    int32_t rank = rank_of(m, name->string, name->string_len);
    if (rank >= 0)
        pt_buf_printf(out, "rank %d", rank);
    else
        pt_buf_puts(out, name->string);
}

static int by_rank(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* "0-3, 5, 7-9": ranks sorted (in place), repeats dropped, at most RANK_RUNS_LISTED runs. */
static void put_rank_runs(pt_buf *out, int32_t *ranks, size_t n)
{
    qsort(ranks, n, sizeof *ranks, by_rank);
    size_t runs = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && (ranks[j + 1] == ranks[j] || ranks[j + 1] == ranks[j] + 1))
            j++;
        if (runs++ == RANK_RUNS_LISTED) {
            pt_buf_puts(out, ", ...");
            return;
        }
        pt_buf_printf(out, "%s%d", runs > 1 ? ", " : "", ranks[i]);
        if (ranks[j] != ranks[i])
            pt_buf_printf(out, "-%d", ranks[j]);
        i = j + 1;
    }
}

/* ------------------------------------------------------------ numbers and names */

/* Milliseconds to three significant digits, in plain notation (1003 ms, not 1e+03). */
static void put_ms(pt_buf *out, double ms)
{
    double a = fabs(ms);
    pt_buf_printf(out, a >= 100 ? "%.0f ms" : a >= 10 ? "%.1f ms" : a >= 1 ? "%.2f ms" : "%.3g ms", ms);
}

/* A ratio in [0,1] as a percentage: to a tenth of a percent from 1%, two significant
 * digits below it (0.84%, 0.053%: a small share still tells its size), "<0.01%" below
 * that, "0%" for none. */
static void put_share(pt_buf *out, double ratio)
{
    double pct = 100 * ratio;
    if (!isfinite(pct))
        pt_buf_puts(out, "?%");
    else if (pct == 0)
        pt_buf_puts(out, "0%");
    else if (fabs(pct) < 0.01)
        pt_buf_puts(out, "<0.01%");
    else
        pt_buf_printf(out, fabs(pct) >= 1 ? "%.1f%%" : "%#.2g%%", pct);
}

static double number_of(const pt_json *v)
{
    return v && v->type == PT_JSON_NUMBER ? v->number : NAN;
}

/* The first n bytes of s, then "..." when it is longer than max. */
static void put_cut(pt_buf *out, const char *s, size_t n, size_t max)
{
    if (n <= max) {
        pt_buf_append(out, s, n);
        return;
    }
    pt_buf_append(out, s, max - 3);
    pt_buf_puts(out, "...");
}

static bool is_identifier_char(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* s[0..n) without its namespace qualifiers ("at::native::" in "at::native::fill<int>"):
 * what tells two kernels apart is further right. */
static void put_unqualified(pt_buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (i == 0 || !is_identifier_char(s[i - 1]))
            while (j < n && is_identifier_char(s[j]))
                j++;
        if (j > i && j + 1 < n && s[j] == ':' && s[j + 1] == ':') {
            i = j + 2; /* a qualifier: dropped */
            continue;
        }
        pt_buf_append(out, s + i, j > i ? j - i : 1);
        i = j > i ? j : i + 1;
    }
}

/* A kernel (or any function) key shortened: "void " and namespace qualifiers dropped,
 * the parameter list of "name(params)1_1_1|128_1_1" replaced by "(...)", and a name still
 * too long cut in the middle, so that both its start and its grid and block stay in view. */
static void put_short_kernel(pt_buf *out, const char *key, size_t n)
{
    if (n > 5 && strncmp(key, "void ", 5) == 0)
        key += 5, n -= 5;
    size_t close = n, open = n; /* the last ')' and the '(' that it closes */
    for (size_t i = n; i-- > 0;)
        if (key[i] == ')') {
            close = i;
            break;
        }
    int depth = 0;
    for (size_t i = close + 1; close < n && i-- > 0;) {
        depth += key[i] == ')' ? 1 : key[i] == '(' ? -1 : 0;
        if (depth == 0) {
            open = i;
            break;
        }
    }
    if (open == n || open == 0) {
        put_cut(out, key, n, NAME_MAX_SHOWN);
        return;
    }
    pt_buf tail = PT_BUF_INIT;
    pt_buf_puts(&tail, "(...)");
    if (close + 1 < n) { /* the grid and block */
        pt_buf_putc(&tail, ' ');
        put_cut(&tail, key + close + 1, n - close - 1, NAME_MAX_SHOWN / 2);
    }
    size_t room = NAME_MAX_SHOWN > tail.len ? NAME_MAX_SHOWN - tail.len : 8;
    pt_buf name = PT_BUF_INIT;
    put_unqualified(&name, key, open);
    put_cut(out, pt_buf_cstr(&name), name.len, room);
    pt_buf_free(&name);
    pt_buf_append(out, tail.data, tail.len);
    pt_buf_free(&tail);
}

/* A Python call stack "a.py: f|b.py: g|c" by its last two frames, as the findings name it. */
static void put_short_stack(pt_buf *out, const char *stack, size_t n)
{
    size_t frames = 0, cut = n;
    for (size_t i = n; i-- > 0;)
        if (stack[i] == '|' && ++frames == 2) {
            cut = i;
            break;
        }
    pt_buf tmp = PT_BUF_INIT;
    if (cut < n)
        pt_buf_puts(&tmp, "... > ");
    for (size_t i = cut < n ? cut + 1 : 0; i < n; i++) {
        if (stack[i] == '|')
            pt_buf_puts(&tmp, " > ");
        else
            pt_buf_putc(&tmp, stack[i]);
    }
    put_cut(out, tmp.data, tmp.len, NAME_MAX_SHOWN + 24);
    pt_buf_free(&tmp);
}

/* ------------------------------------------------------------ choosing what to show */

/* The indices of the (at most) TOP_ENTRIES members of obj with the largest metric,
 * largest first; returns how many. A member whose metric is not a number is not shown. */
static size_t top_members(const pt_json *obj, double (*metric)(const pt_json *value), size_t top[TOP_ENTRIES])
{
    size_t n = 0;
    double best[TOP_ENTRIES];
    for (size_t i = 0; obj && i < obj->count; i++) {
        double v = metric(obj->items[i]);
        if (isnan(v))
            continue;
        size_t at = n < TOP_ENTRIES ? n++ : TOP_ENTRIES;
        while (at > 0 && best[at - 1] < v) {
            if (at < TOP_ENTRIES)
                best[at] = best[at - 1], top[at] = top[at - 1];
            at--;
        }
        if (at < TOP_ENTRIES)
            best[at] = v, top[at] = i;
    }
    return n;
}

static bool is_object(const pt_json *v)
{
    return v && v->type == PT_JSON_OBJECT;
}

static bool is_array(const pt_json *v)
{
    return v && v->type == PT_JSON_ARRAY;
}

/* "rank 3 12%, rank 5 9.0%, +2 more" for a {worker: ratio} map, largest first. */
static void put_worker_shares(pt_buf *out, const worker_names *m, const pt_json *map)
{
    size_t shown = 0, total = is_object(map) ? map->count : 0;
    bool *used = total ? calloc(total, sizeof *used) : NULL;
    for (; used && shown < RANKS_LISTED && shown < total; shown++) {
        size_t best = total;
        for (size_t i = 0; i < total; i++)
            if (!used[i] && (best == total || number_of(map->items[i]) > number_of(map->items[best])))
                best = i;
        used[best] = true;
        pt_json name = {.type = PT_JSON_STRING, .string = map->keys[best], .string_len = strlen(map->keys[best])};
        pt_buf_puts(out, shown ? ", " : "");
        put_worker(out, m, &name);
        pt_buf_putc(out, ' ');
        put_share(out, number_of(map->items[best]));
    }
    free(used);
    if (total > shown)
        pt_buf_printf(out, ", +%zu more", total - shown);
    if (total == 0)
        pt_buf_puts(out, "none");
}

/* "ranks 0-7" (or names) for a list of worker names or {worker: ...} keys. */
static void put_worker_set(pt_buf *out, const worker_names *m, const pt_json *set)
{
    size_t total = is_object(set) || is_array(set) ? set->count : 0, known = 0;
    int32_t *ranks = pt_xmalloc((total ? total : 1) * sizeof *ranks);
    pt_buf unknown = PT_BUF_INIT;
    size_t unknown_count = 0;
    for (size_t i = 0; i < total; i++) {
        const pt_json *item = set->items[i];
        const char *name = is_object(set) ? set->keys[i] : item->type == PT_JSON_STRING ? item->string : NULL;
        if (is_array(set) && is_object(item)) /* Communication: {"worker": name, ...} */
            name = pt_json_get_string(item, "worker", NULL);
        int32_t rank = name ? rank_of(m, name, strlen(name)) : -1;
        if (rank >= 0)
            ranks[known++] = rank;
        else if (name && unknown_count++ < RANKS_LISTED)
            pt_buf_printf(&unknown, "%s%s", unknown.len ? ", " : "", name);
    }
    if (total == 0)
        pt_buf_puts(out, "none");
    if (known) {
        pt_buf_puts(out, known == 1 ? "rank " : "ranks ");
        put_rank_runs(out, ranks, known);
    }
    if (unknown_count)
        pt_buf_printf(out, "%s%s%s", known ? ", " : "", unknown.data, unknown_count > RANKS_LISTED ? ", ..." : "");
    pt_buf_free(&unknown);
    free(ranks);
}

/* ------------------------------------------------------------ the sections */

static void log_prefix(pt_buf *out, const char *source)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    pt_buf_printf(out, "[%s,%03ld PerfTracker] (%s) INFO: ", when, ts.tv_nsec / 1000000, source);
}

static double kernel_ratio(const pt_json *v)
{
    return number_of(pt_json_get(v, "bottleneck ratio (in [0,1])"));
}

static void digest_gpu_compute(pt_buf *out, const pt_json *s, const worker_names *m)
{
    const pt_json *util = pt_json_get(s, "min/median/max GPU utilization (in [0,1])");
    pt_buf_puts(out, "GPU utilization ");
    if (is_array(util) && util->count == 3) {
        static const char *const what[] = {"min ", ", median ", ", max "};
        for (size_t i = 0; i < 3; i++) {
            pt_buf_puts(out, what[i]);
            put_share(out, number_of(util->items[i]));
        }
    } else {
        pt_buf_puts(out, "unknown");
    }
    pt_buf_puts(out, "; abnormal: ");
    put_worker_shares(out, m, pt_json_get(s, "workers with abnormal GPU utilization"));
    pt_buf_puts(out, "; kernels slower than on the other workers: ");
    put_worker_set(out, m, pt_json_get(s, "workers with potential GPU issues"));
    pt_buf_putc(out, '\n');
    const pt_json *kernels = pt_json_get(s, "major_kernel_executions");
    size_t top[TOP_ENTRIES], n = is_object(kernels) ? top_members(kernels, kernel_ratio, top) : 0;
    for (size_t i = 0; i < n; i++) {
        const pt_json *k = kernels->items[top[i]];
        pt_buf_puts(out, "    ");
        put_share(out, kernel_ratio(k));
        pt_buf_puts(out, " of the window, ");
        put_ms(out, number_of(pt_json_get(k, "median cost per execution (ms)")));
        pt_buf_puts(out, " each: ");
        put_short_kernel(out, kernels->keys[top[i]], strlen(kernels->keys[top[i]]));
        pt_buf_putc(out, '\n');
    }
    if (n && kernels->count > n)
        pt_buf_printf(out, "    (%zu of %zu kernels; report.json lists each)\n", n, kernels->count);
}

static double avg_ratio(const pt_json *v)
{
    return number_of(pt_json_get(v, "avg bottleneck ratio (in [0,1])"));
}

/* GPU memory operations and CUDA Runtime: {name: {avg ratio, ..., abnormal_workers}}. */
static void digest_ratio_section(pt_buf *out, const pt_json *s, const worker_names *m, const char *one,
                                 const char *many)
{
    size_t top[TOP_ENTRIES], n = is_object(s) ? top_members(s, avg_ratio, top) : 0;
    if (!n) {
        pt_buf_puts(out, "none\n");
        return;
    }
    pt_buf_printf(out, "%zu %s; the largest, by share of the window not hidden by other work:\n", s->count,
                  s->count == 1 ? one : many);
    for (size_t i = 0; i < n; i++) {
        const pt_json *e = s->items[top[i]];
        pt_buf_puts(out, "    ");
        put_share(out, avg_ratio(e));
        double overlapped = number_of(pt_json_get(e, "avg execution time / monitoring duration (in [0,1])"));
        if (!isnan(overlapped)) {
            pt_buf_puts(out, " (");
            put_share(out, overlapped);
            pt_buf_puts(out, " with overlap)");
        }
        pt_buf_printf(out, " %s; above 1%% on: ", s->keys[top[i]]);
        put_worker_set(out, m, pt_json_get(e, "abnormal_workers"));
        pt_buf_putc(out, '\n');
    }
}

static double normal_ratio(const pt_json *v)
{
    return number_of(pt_json_get(pt_json_get(pt_json_get(v, "example_of_normal_worker"), "features"),
                                 "bottleneck ratio (in [0,1])"));
}

static void digest_communication(pt_buf *out, const pt_json *s, const worker_names *m)
{
    size_t kinds = 0;
    for (size_t g = 0; is_object(s) && g < s->count; g++)
        kinds += is_object(s->items[g]) ? s->items[g]->count : 0;
    if (!kinds) {
        pt_buf_puts(out, "none\n");
        return;
    }
    pt_buf_printf(out, "%zu collective%s; by share of the window not overlapped with computation, on a typical "
                       "worker:\n", kinds, kinds == 1 ? "" : "s");
    for (size_t g = 0; g < s->count; g++) {
        const pt_json *group = s->items[g];
        size_t top[TOP_ENTRIES], n = is_object(group) ? top_members(group, normal_ratio, top) : 0;
        for (size_t i = 0; i < n; i++) {
            const pt_json *e = group->items[top[i]];
            const pt_json *normal = pt_json_get(e, "example_of_normal_worker");
            const pt_json *features = pt_json_get(normal, "features");
            pt_buf_puts(out, "    ");
            put_share(out, normal_ratio(e));
            pt_buf_printf(out, " %s ", s->keys[g]);
            put_short_kernel(out, group->keys[top[i]], strlen(group->keys[top[i]]));
            double throughput = number_of(pt_json_get(features, "avg throughput (%)"));
            if (throughput > 0)
                pt_buf_printf(out, ", %.0f%% of the link's peak", throughput);
            pt_buf_puts(out, " (typical: ");
            put_worker(out, m, pt_json_get(normal, "worker"));
            pt_buf_puts(out, "); abnormal: ");
            put_worker_set(out, m, pt_json_get(e, "abnormal_workers"));
            pt_buf_putc(out, '\n');
        }
    }
}

static double largest_share(const pt_json *v)
{
    double best = NAN;
    for (size_t i = 0; is_object(v) && i < v->count; i++)
        if (isnan(best) || number_of(v->items[i]) > best)
            best = number_of(v->items[i]);
    return best;
}

static void digest_python(pt_buf *out, const pt_json *s, const worker_names *m)
{
    size_t top[TOP_ENTRIES], n = is_object(s) ? top_members(s, largest_share, top) : 0;
    if (!n) {
        pt_buf_puts(out, "none above 1% of the window\n");
        return;
    }
    pt_buf_printf(out, "%zu call stack%s above 1%% of the window; the largest, by share on each worker:\n", s->count,
                  s->count == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        pt_buf_puts(out, "    ");
        put_short_stack(out, s->keys[top[i]], strlen(s->keys[top[i]]));
        pt_buf_puts(out, ": ");
        put_worker_shares(out, m, s->items[top[i]]);
        pt_buf_putc(out, '\n');
    }
}

typedef struct section_form {
    const char *section, *source;
} section_form;

static const section_form seed_sections[] = {
    {"GPU Compute", "gpu_compute.c"}, {"GPU memory operations", "gpu_memory.c"},
    {"Communication", "communication.c"}, {"CUDA Runtime", "cuda_runtime.c"},
    {"Python functions", "python_functions.c"},
};

static void digest_section(pt_buf *out, size_t which, const pt_json *s, const worker_names *m)
{
    switch (which) {
    case 0: digest_gpu_compute(out, s, m); break;
    case 1: digest_ratio_section(out, s, m, "kind of memory operation", "kinds of memory operation"); break;
    case 2: digest_communication(out, s, m); break;
    case 3: digest_ratio_section(out, s, m, "runtime call", "runtime calls"); break;
    default: digest_python(out, s, m); break;
    }
}

void pt_report_render_sections(const pt_json *report, pt_buf *out)
{
    /* The seed's key reads as "these workers are anomalous"; in these two sections it
     * means "above the 1% threshold", which can be every worker: the line says so. */
    static const char threshold_legend[] =
        "  (abnormal_workers: the workers whose bottleneck ratio -- the share of the step this holds up -- is "
        "above 0.01 (1%), with their ratio; not a comparison between workers, so every worker can be listed)\n";
    for (size_t i = 0; i < PT_ARRAY_LEN(seed_sections); i++) {
        const pt_json *s = pt_json_get(report, seed_sections[i].section);
        if (!s)
            continue;
        pt_buf_printf(out, "%s:\n", seed_sections[i].section);
        log_prefix(out, seed_sections[i].source);
        pt_json_write_for_terminal(out, s, 4);
        pt_buf_putc(out, '\n');
        if ((i == 1 || i == 3) && s->count)
            pt_buf_puts(out, threshold_legend);
    }
}

/* ------------------------------------------------------------ warnings, grouped */

/* One line to print: the warnings with the same text about single workers, or one
 * warning about something else. */
typedef struct warning_group {
    bool about_workers;
    const char *text;         /* the text after "NAME: ", or the whole warning */
    size_t text_len;
    int32_t *ranks;           /* about_workers: the workers' ranks */
    size_t *sources;          /* indices into the report's warnings */
    size_t count, cap, source_cap;
    const char *first_name;   /* about_workers: the first worker's name */
    size_t first_name_len;
} warning_group;

typedef struct warning_groups {
    pt_strtab keys; /* "W" + text or "V" + warning -> index into groups */
    warning_group *groups;
    size_t count, cap;
} warning_groups;

/* Where the "NAME: " that starts w ends (the text's start), for a NAME the report's
 * workers have, or 0. Names may hold ": " themselves, so each occurrence is tried. */
static size_t worker_prefix(const worker_names *m, const char *w, size_t n, int32_t *rank)
{
    size_t scan = PT_MIN(n, (size_t)NAME_PREFIX_SCAN);
    for (size_t i = 1; i + 1 < scan; i++)
        if (w[i] == ':' && w[i + 1] == ' ' && (*rank = rank_of(m, w, i)) >= 0)
            return i + 2;
    return 0;
}

static void add_to_group(warning_groups *g, const worker_names *m, const char *w, size_t n, size_t index)
{
    int32_t rank = -1;
    size_t text = worker_prefix(m, w, n, &rank);
    pt_buf key = PT_BUF_INIT;
    pt_buf_putc(&key, text ? 'W' : 'V');
    pt_buf_append(&key, w + text, n - text);
    size_t before = g->keys.count;
    uint32_t id = pt_strtab_intern(&g->keys, key.data, key.len);
    pt_buf_free(&key);
    if (g->keys.count > before) {
        PT_GROW(g->groups, g->cap, (size_t)id + 1);
        g->groups[id] = (warning_group){text > 0, w + text, n - text, NULL, NULL, 0, 0, 0, w, text ? text - 2 : 0};
        g->count = (size_t)id + 1;
    }
    warning_group *grp = &g->groups[id];
    PT_GROW(grp->ranks, grp->cap, grp->count + 1);
    PT_GROW(grp->sources, grp->source_cap, grp->count + 1);
    grp->ranks[grp->count] = rank;
    grp->sources[grp->count++] = index;
}

static void put_group_line(pt_buf *line, warning_group *grp)
{
    pt_buf_reset(line);
    if (!grp->about_workers) {
        pt_buf_append(line, grp->text, grp->text_len);
        if (grp->count > 1)
            pt_buf_printf(line, " (%zu times)", grp->count);
        return;
    }
    if (grp->count == 1) {
        pt_buf_printf(line, "rank %d (", grp->ranks[0]);
        pt_buf_append(line, grp->first_name, grp->first_name_len);
        pt_buf_puts(line, "): ");
    } else {
        pt_buf_printf(line, "%zu workers (ranks ", grp->count);
        put_rank_runs(line, grp->ranks, grp->count);
        pt_buf_puts(line, "): ");
    }
    pt_buf_append(line, grp->text, grp->text_len);
}

size_t pt_report_each_warning(const pt_json *report, pt_report_warning_visitor visit, void *ctx)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    if (!is_array(warnings) || warnings->count == 0)
        return 0;
    worker_names m;
    worker_names_init(&m, report);
    warning_groups g = {0};
    pt_strtab_init(&g.keys);
    for (size_t i = 0; i < warnings->count; i++) {
        const pt_json *w = warnings->items[i];
        if (w->type == PT_JSON_STRING)
            add_to_group(&g, &m, w->string, w->string_len, i);
    }
    pt_buf line = PT_BUF_INIT;
    for (size_t i = 0; i < g.count; i++) {
        put_group_line(&line, &g.groups[i]);
        visit(ctx, pt_buf_cstr(&line), g.groups[i].sources, g.groups[i].count);
        free(g.groups[i].ranks);
        free(g.groups[i].sources);
    }
    size_t groups = g.count;
    pt_buf_free(&line);
    free(g.groups);
    pt_strtab_free(&g.keys);
    worker_names_free(&m);
    return groups;
}

typedef struct warning_text {
    pt_buf *out;
    size_t shown;
} warning_text;

static void add_warning_line(void *ctx, const char *line, const size_t *sources, size_t count)
{
    (void)sources, (void)count;
    warning_text *t = ctx;
    if (t->shown++ < WARNING_GROUPS_SHOWN)
        pt_buf_printf(t->out, "  %s\n", line);
}

static void render_warnings(const pt_json *report, pt_buf *out)
{
    const pt_json *warnings = pt_json_get(report, "warnings");
    if (!is_array(warnings) || warnings->count == 0)
        return;
    pt_buf lines = PT_BUF_INIT;
    warning_text t = {&lines, 0};
    size_t groups = pt_report_each_warning(report, add_warning_line, &t);
    pt_buf_printf(out, "Warnings (%zu in report.json%s):\n", warnings->count,
                  groups < warnings->count ? "; the same one on several workers is one line" : "");
    pt_buf_append(out, lines.data, lines.len);
    if (groups > WARNING_GROUPS_SHOWN)
        pt_buf_printf(out, "  ... and %zu more (report.json lists every warning)\n", groups - WARNING_GROUPS_SHOWN);
    pt_buf_free(&lines);
}

/* ------------------------------------------------------------ the whole text */

/* One line on the job the verdict stands on: how many workers, which ranks are missing,
 * the steps and the median step. */
static void render_job(const pt_json *report, pt_buf *out)
{
    const pt_json *job = pt_json_get(report, "job");
    if (!is_object(job))
        return;
    double analysed = pt_json_get_number(job, "workers_analyzed", NAN);
    double world = pt_json_get_number(job, "world_size", NAN);
    double missing = pt_json_get_number(job, "missing_count", 0), failed = pt_json_get_number(job, "workers_failed", 0);
    pt_buf_puts(out, "Job: ");
    if (!isnan(analysed) && !isnan(world))
        pt_buf_printf(out, "%.0f of %.0f workers analysed", analysed, world);
    if (failed > 0)
        pt_buf_printf(out, ", %.0f unreadable", failed);
    if (missing > 0) {
        pt_buf_printf(out, ", %.0f missing (rank%s ", missing, missing == 1 ? "" : "s");
        const pt_json *ranks = pt_json_get(job, "missing_ranks");
        size_t n = is_array(ranks) ? ranks->count : 0, k = 0;
        int32_t *list = pt_xmalloc((n ? n : 1) * sizeof *list);
        for (size_t i = 0; i < n; i++)
            if (ranks->items[i]->type == PT_JSON_NUMBER && ranks->items[i]->is_integer &&
                ranks->items[i]->integer >= 0 && ranks->items[i]->integer <= INT32_MAX)
                list[k++] = (int32_t)ranks->items[i]->integer;
        put_rank_runs(out, list, k);
        pt_buf_puts(out, missing > (double)k ? ", ...)" : ")");
        free(list);
    }
    double steps = pt_json_get_number(job, "steps", NAN), step_ms = pt_json_get_number(job, "median_step_time_ms", NAN);
    if (!isnan(steps))
        pt_buf_printf(out, "; %.0f profiled step%s", steps, steps == 1 ? "" : "s");
    if (step_ms > 0) { /* none measured: nothing to say (a hang report's may be null) */
        pt_buf_puts(out, ", median step ");
        put_ms(out, step_ms);
    }
    pt_buf_puts(out, "\n");
}

/* Whether some finding's sentence is text (a mixed input's one finding is its problem). */
static bool a_finding_says(const pt_json *findings, const char *text)
{
    for (size_t i = 0; is_array(findings) && i < findings->count; i++)
        if (strcmp(pt_json_get_string(findings->items[i], "summary", ""), text) == 0)
            return true;
    return false;
}

void pt_report_render_verdict(const pt_json *report, pt_buf *out)
{
    const pt_json *diagnosis = pt_json_get(report, "diagnosis");
    const pt_json *findings = pt_json_get(diagnosis, "findings");
    pt_buf_puts(out, "Diagnosis:\n");
    log_prefix(out, "findings.c");
    pt_buf_printf(out, "verdict: %s\n", pt_json_get_string(diagnosis, "verdict", "unknown"));
    /* A verdict on partial or mixed input says so under it, before any finding. */
    const char *problem = pt_json_get_string(diagnosis, "input_problem", NULL);
    if (problem && *problem && !a_finding_says(findings, problem))
        pt_buf_printf(out, "%s\n", problem); /* "Partial: ...", "Mixed: ..." */
    size_t count = is_array(findings) ? findings->count : 0;
    for (size_t i = 0; i < count; i++) {
        const pt_json *f = findings->items[i];
        pt_buf_printf(out, "  %zu. [%s, impact %.1f%%] %s\n", i + 1, pt_json_get_string(f, "category", "?"),
                      100 * pt_json_get_number(f, "impact", 0), pt_json_get_string(f, "summary", ""));
    }
    double joint = pt_json_get_number(diagnosis, "joint_impact", NAN);
    if (count > 1 && joint > 0)
        pt_buf_printf(out, "Fixing all %zu findings at once saves %.1f%% of the step.\n", count, 100 * joint);
}

void pt_report_render_text(const pt_json *report, const pt_report_text_options *options, pt_buf *out)
{
    pt_report_render_verdict(report, out);
    render_job(report, out);
    if (options->warnings)
        render_warnings(report, out);
    if (options->sections_json) {
        pt_report_render_sections(report, out);
        return;
    }
    worker_names m;
    worker_names_init(&m, report);
    bool any = false;
    for (size_t i = 0; i < PT_ARRAY_LEN(seed_sections); i++) {
        const pt_json *s = pt_json_get(report, seed_sections[i].section);
        if (!s)
            continue;
        if (!any)
            pt_buf_puts(out, "Report sections, rounded (--verbose prints each as JSON; report.json holds them "
                             "whole):\n");
        any = true;
        pt_buf_printf(out, "%s:\n", seed_sections[i].section);
        log_prefix(out, seed_sections[i].source);
        digest_section(out, i, s, &m);
    }
    worker_names_free(&m);
}

void pt_report_render_log(const pt_json *report, pt_buf *out)
{
    pt_report_text_options everything_readable = {true, false};
    pt_report_render_text(report, &everything_readable, out);
}
