/* diff_report.c -- the terminal summary of a diff document (docs/diff-schema.md).
 *
 * It reads the document, not the comparison's structures, so what the terminal says is
 * exactly what diff.json and the page say. Short by design: the verdict, the step and
 * class table, the ten largest function changes, the first few functions added and
 * removed, the findings that appeared or went away, and the notes. */
#include "report/diff_report.h"

#include <math.h>
#include <string.h>

#define FUNCTIONS_SHOWN 10
#define LISTED_SHOWN 5
#define NAME_CHARS 90

static const struct {
    const char *key, *label;
} class_labels[] = {
    {"compute", "GPU compute"}, {"memory", "GPU memory ops"}, {"communication", "communication"},
    {"runtime", "CUDA runtime"}, {"python", "Python"},         {"idle", "idle"},
};

static const char *class_label(const char *key)
{
    for (size_t i = 0; i < PT_ARRAY_LEN(class_labels); i++)
        if (strcmp(class_labels[i].key, key) == 0)
            return class_labels[i].label;
    return key;
}

static void put_name(pt_buf *out, const char *name)
{
    size_t n = strlen(name);
    if (n <= NAME_CHARS)
        pt_buf_puts(out, name);
    else
        pt_buf_printf(out, "%.*s...", NAME_CHARS - 3, name);
}

/* Decimals for a figure a person reads: three significant digits at most, never an
 * exponent (0.0000175 ms reads "0.000"). */
static int decimals(double v)
{
    double a = fabs(v);
    return a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
}

static void put_ms(pt_buf *out, const char *prefix, double ms)
{
    if (!isfinite(ms))
        pt_buf_printf(out, "%s%10s", prefix, "-");
    else
        pt_buf_printf(out, "%s%7.*f ms", prefix, decimals(ms), ms);
}

static void put_delta(pt_buf *out, const pt_json *c)
{
    double delta = pt_json_get_number(c, "delta_ms", NAN), pct = pt_json_get_number(c, "delta_pct", NAN);
    pt_buf_printf(out, "  %+8.*f ms", decimals(delta), delta);
    if (isfinite(pct))
        pt_buf_printf(out, " (%+.*f%%)", fabs(pct) >= 100 ? 0 : 1, pct);
    else if (delta != 0)
        pt_buf_puts(out, " (new)");
}

static bool significant(const pt_json *c)
{
    const pt_json *s = pt_json_get(c, "significant");
    return s && s->type == PT_JSON_BOOL && s->boolean;
}

static void put_run(pt_buf *out, const char *label, const pt_json *run)
{
    pt_buf_printf(out, "%-7s %s: %g worker%s (%s), %g steps, step %.4g ms, verdict %s\n", label,
                  pt_json_get_string(run, "input", "?"), pt_json_get_number(run, "workers", 0),
                  pt_json_get_number(run, "workers", 0) == 1 ? "" : "s", pt_json_get_string(run, "source", "?"),
                  pt_json_get_number(run, "steps", 0), pt_json_get_number(run, "step_time_ms", NAN),
                  pt_json_get_string(run, "verdict", "unknown"));
}

static void put_figure_row(pt_buf *out, const char *label, const pt_json *c)
{
    pt_buf_printf(out, "  %-16s", label);
    put_ms(out, " ", pt_json_get_number(c, "before_ms", NAN));
    put_ms(out, " ", pt_json_get_number(c, "after_ms", NAN));
    put_delta(out, c);
    pt_buf_puts(out, significant(c) ? "  *\n" : "\n");
}

static void put_rank_note(pt_buf *out, const pt_json *f)
{
    const pt_json *ranks = pt_json_get(f, "ranks");
    if (!ranks || ranks->type != PT_JSON_ARRAY || ranks->count == 0)
        return;
    pt_buf_puts(out, "      on rank");
    pt_buf_puts(out, ranks->count > 1 ? "s" : "");
    for (size_t i = 0; i < ranks->count && i < 4; i++) {
        double delta = pt_json_get_number(ranks->items[i], "delta_ms", NAN);
        pt_buf_printf(out, "%s %g: %+.*f ms", i ? "," : "", pt_json_get_number(ranks->items[i], "rank", -1),
                      decimals(delta), delta);
    }
    if (ranks->count > 4)
        pt_buf_printf(out, ", and %zu more", ranks->count - 4);
    pt_buf_putc(out, '\n');
}

static void put_functions(pt_buf *out, const pt_json *diff)
{
    const pt_json *fns = pt_json_get(diff, "functions");
    size_t total = (size_t)pt_json_get_number(diff, "functions_changed", 0);
    if (!fns || fns->count == 0) {
        pt_buf_printf(out, "\nNo function's time per step changed beyond noise (%g compared).\n",
                      pt_json_get_number(diff, "functions_compared", 0));
        return;
    }
    pt_buf_printf(out, "\nFunctions whose time per step changed most (%zu of %g changed; exposed ms per step):\n", total,
                  pt_json_get_number(diff, "functions_compared", 0));
    for (size_t i = 0; i < fns->count && i < FUNCTIONS_SHOWN; i++) {
        const pt_json *f = fns->items[i];
        pt_buf_printf(out, "  %-14s", class_label(pt_json_get_string(f, "class", "")));
        put_ms(out, "", pt_json_get_number(f, "before_ms", NAN));
        put_ms(out, " ", pt_json_get_number(f, "after_ms", NAN));
        put_delta(out, f);
        pt_buf_puts(out, significant(f) ? "  " : "  (some ranks) ");
        put_name(out, pt_json_get_string(f, "name", ""));
        pt_buf_putc(out, '\n');
        put_rank_note(out, f);
    }
}

static void put_listed(pt_buf *out, const pt_json *diff, const char *key, const char *title, const char *side)
{
    const pt_json *list = pt_json_get(diff, key);
    double count = pt_json_get_number(diff, key[0] == 'a' ? "added_count" : "removed_count", 0);
    if (!list || list->count == 0)
        return;
    pt_buf_printf(out, "\n%s (%g; time and calls per step on the median %s worker):\n", title, count, side);
    for (size_t i = 0; i < list->count && i < LISTED_SHOWN; i++) {
        const pt_json *f = list->items[i];
        double ms = pt_json_get_number(f, key[0] == 'a' ? "after_ms" : "before_ms", NAN);
        double calls = pt_json_get_number(f, key[0] == 'a' ? "after_calls" : "before_calls", NAN);
        pt_buf_printf(out, "  %-14s", class_label(pt_json_get_string(f, "class", "")));
        put_ms(out, "", ms);
        if (isfinite(calls))
            pt_buf_printf(out, " %7.4g calls", calls);
        pt_buf_puts(out, significant(f) ? "  * " : "    ");
        put_name(out, pt_json_get_string(f, "name", ""));
        pt_buf_putc(out, '\n');
        put_rank_note(out, f); /* one rank's new work reads 0 ms on the median worker */
    }
    if (count > LISTED_SHOWN)
        pt_buf_printf(out, "  ... and %g more in diff.json\n", count - LISTED_SHOWN);
}

static size_t count_of(const pt_json *object, const char *key)
{
    const pt_json *list = pt_json_get(object, key);
    return list && list->type == PT_JSON_ARRAY ? list->count : 0;
}

static void put_findings(pt_buf *out, const pt_json *findings, const char *key, const char *title)
{
    const pt_json *list = pt_json_get(findings, key);
    for (size_t i = 0; list && i < list->count; i++)
        pt_buf_printf(out, "%s %s\n", i == 0 ? title : "   ", pt_json_get_string(list->items[i], "summary", ""));
}

void pt_diff_render_verdict(const pt_json *diff, pt_buf *out)
{
    const pt_json *verdict = pt_json_get(diff, "verdict");
    pt_buf_printf(out, "Verdict (%s): %s\n", pt_json_get_string(verdict, "change", "?"),
                  pt_json_get_string(verdict, "sentence", ""));
}

void pt_diff_render_text(const pt_json *diff, pt_buf *out)
{
    put_run(out, "BEFORE", pt_json_get(diff, "before"));
    put_run(out, "AFTER", pt_json_get(diff, "after"));
    pt_buf_putc(out, '\n');
    pt_diff_render_verdict(diff, out);
    pt_buf_putc(out, '\n');
    pt_buf_printf(out, "  %-16s %10s %10s  %s    (median worker, per step; * beyond noise)\n", "", "before", "after",
                  "change");
    put_figure_row(out, "step time", pt_json_get(diff, "step_time"));
    const pt_json *classes = pt_json_get(diff, "classes");
    for (size_t i = 0; classes && i < classes->count; i++)
        put_figure_row(out, class_label(pt_json_get_string(classes->items[i], "class", "")), classes->items[i]);
    put_functions(out, diff);
    put_listed(out, diff, "added", "Added in AFTER", "AFTER");
    put_listed(out, diff, "removed", "Removed in AFTER", "BEFORE");
    const pt_json *findings = pt_json_get(diff, "findings");
    if (count_of(findings, "new") + count_of(findings, "resolved"))
        pt_buf_putc(out, '\n');
    put_findings(out, findings, "new", "New in AFTER's diagnosis:");
    put_findings(out, findings, "resolved", "Gone from AFTER's diagnosis:");
    const pt_json *notes = pt_json_get(diff, "notes");
    for (size_t i = 0; notes && i < notes->count; i++)
        pt_buf_printf(out, "%s%s\n", i == 0 ? "\nNotes:\n  - " : "  - ", notes->items[i]->string);
}
