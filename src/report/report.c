/* report.c -- writes report.json (atomically: a reader never sees half a report) and the
 * PerfDisplay folder next to it, all inside one checked output folder (util/outdir.h: no
 * other user can redirect the write) and the bounded form's parts beside them. What the
 * terminal shows of a report is report_text.c's. */
#define _POSIX_C_SOURCE 200809L
#include "report/report.h"
#include "report/perfdisplay.h"
#include "util/input.h"
#include "util/outdir.h"
#include "util/phase.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PART_MAX_BYTES ((size_t)256 << 20) /* a part of 1024 workers is ~1.5 MB */

/* report.json's text (pretty, 2-space, a final newline). */
static void document_text(const pt_json *doc, pt_buf *out)
{
    pt_json_write(out, doc, 2);
    pt_buf_putc(out, '\n');
}

int pt_report_write_document(const char *out_dir, const char *file_name, const pt_json *doc, pt_error *err)
{
    pt_out_dir out, display;
    if (pt_out_dir_open(&out, out_dir, true, err) != 0)
        return -1;
    pt_buf json = PT_BUF_INIT;
    document_text(doc, &json);
    const void *parts[] = {json.data};
    size_t sizes[] = {json.len};
    int rc = pt_out_dir_write(&out, file_name, parts, sizes, 1, 0644, err);
    if (rc == 0)
        rc = pt_out_dir_sub(&display, &out, "PerfDisplay", true, err);
    if (rc == 0) {
        rc = pt_perfdisplay_write_doc_into(&display, doc, json.data, json.len, err);
        pt_out_dir_close(&display);
    }
    pt_out_dir_close(&out);
    pt_buf_free(&json);
    pt_phase("report written");
    return rc;
}

/* One file in out_dir/<sub...>/ (folders made as needed, each checked), its text in
 * pieces (written in one go: no copy to join them). */
static int write_in(const char *out_dir, const char *const *subs, size_t sub_count, const char *name,
                    const void *const *pieces, const size_t *sizes, size_t count, pt_error *err)
{
    pt_out_dir dirs[4];
    size_t opened = 0;
    int rc = pt_out_dir_open(&dirs[0], out_dir, true, err);
    opened += rc == 0;
    for (size_t i = 0; rc == 0 && i < sub_count && i + 1 < PT_ARRAY_LEN(dirs); i++) {
        rc = pt_out_dir_sub(&dirs[i + 1], &dirs[i], subs[i], true, err);
        opened += rc == 0;
    }
    if (rc == 0)
        rc = pt_out_dir_write(&dirs[opened - 1], name, pieces, sizes, count, 0644, err);
    while (opened)
        pt_out_dir_close(&dirs[--opened]);
    return rc;
}

/* A part as the script the page loads from file:// too: the same JSON text (the writer
 * is HTML-safe: nothing in it can end the script), registered under its index. text: the
 * part's JSON with its final newline. */
static int write_part_script(const char *base, const char *const *subs, size_t sub_count, const char *stem,
                             const pt_json *part, const pt_buf *text, pt_error *err)
{
    pt_buf head = PT_BUF_INIT, name = PT_BUF_INIT;
    const pt_json *index = pt_json_get(part, "part");
    pt_buf_printf(&head, "(window.PT_REPORT_PARTS = window.PT_REPORT_PARTS || {})[%lld] = ",
                  (long long)(index ? index->integer : 0));
    static const char tail[] = ";\n";
    const void *pieces[] = {head.data, text->data, tail};
    size_t sizes[] = {head.len, text->len - 1, sizeof tail - 1};
    pt_buf_printf(&name, "%s.js", stem);
    int rc = write_in(base, subs, sub_count, name.data, pieces, sizes, 3, err);
    pt_buf_free(&head);
    pt_buf_free(&name);
    return rc;
}

int pt_report_write_part(const char *out_dir, const char *stem, const pt_json *part, pt_error *err)
{
    pt_buf text = PT_BUF_INIT, name = PT_BUF_INIT;
    pt_json_write(&text, part, -1);
    pt_buf_putc(&text, '\n');
    pt_buf_printf(&name, "%s.json", stem);
    static const char *const json_dir[] = {"parts"}, *const script_dir[] = {"PerfDisplay", "parts"};
    const void *pieces[] = {text.data};
    int rc = write_in(out_dir, json_dir, 1, name.data, pieces, &text.len, 1, err);
    if (rc == 0)
        rc = write_part_script(out_dir, script_dir, 2, stem, part, &text, err);
    pt_buf_free(&text);
    pt_buf_free(&name);
    return rc;
}

int pt_report_part_writer(void *out_dir, const char *stem, const pt_json *part, pt_error *err)
{
    return pt_report_write_part(out_dir, stem, part, err);
}

/* What the page accepts as a folder or file name (web/scale.js, SAFE_NAME): one component,
 * no leading dot, so nothing outside the folders named can be read or written. */
static bool safe_name(const char *s)
{
    if (!s || !*s || !(isalnum((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || *s == '.' || *s == '-'))
            return false;
    return true;
}

/* One listed part, read from beside the report and checked: an object with its index and
 * a workers list. NULL with err otherwise. */
static pt_json *read_part(const char *report_dir, const char *folder, const char *file, int64_t index, pt_error *err)
{
    pt_buf path = PT_BUF_INIT;
    pt_buf_printf(&path, "%s/%s/%s", report_dir, folder, file);
    size_t len = 0;
    pt_error why = {{0}};
    char *raw = pt_read_file(path.data, PART_MAX_BYTES, &len, &why);
    pt_json *part = raw ? pt_json_parse(raw, len, 64, &why) : NULL;
    free(raw);
    const pt_json *got = part ? pt_json_get(part, "part") : NULL;
    const pt_json *workers = part ? pt_json_get(part, "workers") : NULL;
    if (!part) {
        pt_error_set(err, "%s: %s", path.data, why.message);
    } else if (part->type != PT_JSON_OBJECT || !got || got->type != PT_JSON_NUMBER || !got->is_integer ||
               got->integer != index || !workers || workers->type != PT_JSON_ARRAY) {
        pt_error_set(err, "%s is not part %lld of this report", path.data, (long long)index);
        pt_json_free(part);
        part = NULL;
    }
    pt_buf_free(&path);
    return part;
}

/* A listed file name and where it is listed, to find names listed twice. */
typedef struct listed_part {
    const char *file;
    size_t index;
} listed_part;

static int by_file_then_index(const void *a, const void *b)
{
    const listed_part *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Which listed parts name a file listed before them: each file holds one part, whose index
 * must be where it is listed, so a repeat can only fail -- after being read and parsed,
 * up to PART_MAX_BYTES each time, which made a few MB of report cost hundreds of GB of
 * parsing. NULL when there is nothing to mark (or no memory: then every part is read). */
static bool *repeated_parts(const pt_json *files, size_t count)
{
    listed_part *listed = count ? malloc(count * sizeof *listed) : NULL;
    bool *repeat = count ? calloc(count, sizeof *repeat) : NULL;
    if (!listed || !repeat) {
        free(listed), free(repeat);
        return NULL;
    }
    for (size_t i = 0; i < count; i++)
        listed[i] = (listed_part){pt_json_get_string(files->items[i], "file", ""), i};
    qsort(listed, count, sizeof *listed, by_file_then_index);
    for (size_t i = 1; i < count; i++)
        repeat[listed[i].index] = strcmp(listed[i].file, listed[i - 1].file) == 0;
    free(listed);
    return repeat;
}

size_t pt_report_each_part(const pt_json *report, const char *report_path, pt_report_part_visitor visit, void *ctx,
                           pt_buf *problems)
{
    const pt_json *parts = pt_json_get(pt_json_get(report, "scale"), "parts");
    const pt_json *files = parts ? pt_json_get(parts, "files") : NULL;
    const char *folder = parts ? pt_json_get_string(parts, "folder", "") : "";
    size_t count = files && files->type == PT_JSON_ARRAY ? files->count : 0, visited = 0;
    if (count && !safe_name(folder)) {
        pt_buf_printf(problems, "the report names its parts' folder \"%.80s\", not a plain folder name; none read\n",
                      folder);
        count = 0;
    }
    char *report_dir = pt_dirname(report_path);
    bool *repeat = repeated_parts(files, count);
    for (size_t i = 0; i < count; i++) {
        const char *file = pt_json_get_string(files->items[i], "file", "");
        size_t n = strlen(file);
        pt_error why = {{0}};
        pt_json *part = NULL;
        if (!safe_name(file) || n <= strlen(".json") || !pt_ends_with(file, ".json") || n >= 250)
            pt_buf_printf(problems, "part %zu: \"%.80s\" is not a part's file name; not read\n", i, file);
        else if (repeat && repeat[i])
            pt_buf_printf(problems, "part %zu: \"%.80s\" is listed before; not read again\n", i, file);
        else if (!(part = read_part(report_dir, folder, file, (int64_t)i, &why)) ||
                 visit(ctx, folder, file, part, &why) != 0)
            pt_buf_printf(problems, "part %zu: %s\n", i, why.message);
        else
            visited++;
        pt_json_free(part);
    }
    free(repeat);
    free(report_dir);
    return visited;
}

/* A part's script, written into display_dir (ctx)/<folder>/ (pt_report_each_part). */
static int copy_part(void *display_dir, const char *folder, const char *file, const pt_json *part, pt_error *err)
{
    pt_buf text = PT_BUF_INIT;
    pt_json_write(&text, part, -1);
    pt_buf_putc(&text, '\n');
    char stem[256];
    snprintf(stem, sizeof stem, "%.*s", (int)(strlen(file) - strlen(".json")), file);
    const char *const subs[] = {folder};
    int rc = write_part_script(display_dir, subs, 1, stem, part, &text, err);
    pt_buf_free(&text);
    return rc;
}

int pt_report_copy_parts(const char *report_path, const char *report_json, size_t report_len, const char *display_dir,
                         size_t *copied, pt_buf *problems, pt_error *err)
{
    *copied = 0;
    pt_json *report = pt_json_parse(report_json, report_len, 128, err);
    if (!report)
        return -1;
    *copied = pt_report_each_part(report, report_path, copy_part, (void *)display_dir, problems);
    pt_json_free(report);
    return 0;
}

int pt_report_write(const char *out_dir, const pt_json *report, pt_error *err)
{
    return pt_report_write_document(out_dir, "report.json", report, err);
}

int pt_report_render(const pt_json *report, pt_buf *report_json, pt_buf *data_js, pt_error *err)
{
    document_text(report, report_json);
    bool is_diff;
    return pt_perfdisplay_render_data(report_json->data, report_json->len, data_js, &is_diff, err);
}
