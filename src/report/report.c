/* report.c -- writes report.json (atomically: a reader never sees half a report) and the
 * PerfDisplay folder next to it, and renders the seed-style log lines. */
#define _POSIX_C_SOURCE 200809L
#include "report/report.h"
#include "report/perfdisplay.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int pt_make_dirs(const char *path, pt_error *err)
{
    pt_buf b = PT_BUF_INIT;
    pt_buf_puts(&b, path);
    int rc = 0;
    for (char *p = b.data + 1; rc == 0; p++) {
        bool end = *p == '\0';
        if (*p != '/' && !end)
            continue;
        *p = '\0';
        if (mkdir(b.data, 0755) != 0 && errno != EEXIST) {
            pt_error_set(err, "cannot create directory %s: %s", b.data, strerror(errno));
            rc = -1;
        }
        if (end)
            break;
        *p = '/';
    }
    struct stat st;
    if (rc == 0 && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) {
        pt_error_set(err, "%s is not a directory", path);
        rc = -1;
    }
    pt_buf_free(&b);
    return rc;
}

static int write_atomically(const char *path, const char *data, size_t len, pt_error *err)
{
    pt_buf tmp = PT_BUF_INIT;
    pt_buf_printf(&tmp, "%s.tmp", path);
    FILE *f = fopen(tmp.data, "wb");
    int rc = -1;
    if (!f) {
        pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
    } else {
        bool ok = fwrite(data, 1, len, f) == len;
        ok = fflush(f) == 0 && ok;
        ok = fclose(f) == 0 && ok;
        if (!ok)
            pt_error_set(err, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        else if (rename(tmp.data, path) != 0)
            pt_error_set(err, "cannot write %s: %s", path, strerror(errno));
        else
            rc = 0;
        if (rc != 0)
            remove(tmp.data);
    }
    pt_buf_free(&tmp);
    return rc;
}

int pt_report_write(const char *out_dir, const pt_json *report, pt_error *err)
{
    if (pt_make_dirs(out_dir, err) != 0)
        return -1;
    pt_buf json = PT_BUF_INIT, path = PT_BUF_INIT;
    pt_json_write(&json, report, 2);
    pt_buf_putc(&json, '\n');
    pt_buf_printf(&path, "%s/report.json", out_dir);
    int rc = write_atomically(path.data, json.data, json.len, err);
    if (rc == 0) {
        pt_buf_reset(&path);
        pt_buf_printf(&path, "%s/PerfDisplay", out_dir);
        rc = pt_perfdisplay_write(path.data, json.data, json.len, err);
    }
    pt_buf_free(&json);
    pt_buf_free(&path);
    return rc;
}

/* ------------------------------------------------------------ log lines */

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

void pt_report_render_log(const pt_json *report, pt_buf *out)
{
    static const struct {
        const char *section, *source;
    } sections[] = {
        {"GPU Compute", "gpu_compute.c"},     {"GPU memory operations", "gpu_memory.c"},
        {"Communication", "communication.c"}, {"CUDA Runtime", "cuda_runtime.c"},
        {"Python functions", "python_functions.c"},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(sections); i++) {
        const pt_json *s = pt_json_get(report, sections[i].section);
        if (!s)
            continue;
        pt_buf_printf(out, "%s:\n", sections[i].section);
        log_prefix(out, sections[i].source);
        pt_json_write(out, s, 4);
        pt_buf_putc(out, '\n');
    }
    const pt_json *diagnosis = pt_json_get(report, "diagnosis");
    const pt_json *findings = pt_json_get(diagnosis, "findings");
    pt_buf_puts(out, "Diagnosis:\n");
    log_prefix(out, "findings.c");
    pt_buf_printf(out, "verdict: %s\n", pt_json_get_string(diagnosis, "verdict", "unknown"));
    for (size_t i = 0; findings && i < findings->count; i++) {
        const pt_json *f = findings->items[i];
        pt_buf_printf(out, "  %zu. [%s, impact %.1f%%] %s\n", i + 1, pt_json_get_string(f, "category", "?"),
                      100 * pt_json_get_number(f, "impact", 0), pt_json_get_string(f, "summary", ""));
    }
}
