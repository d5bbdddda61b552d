/* pt_perfdisplay_write (src/report/perfdisplay.c): the folder it writes, byte for byte, and
 * what it refuses; and the page compiled into the binary is the one in web/ (PT_WEB_DIR),
 * byte for byte, with no page file left out. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/perfdisplay.h"
#include "report/perfdisplay_assets.h"
#include "util/buf.h"

static const char report[] =
    "{\n  \"report_version\": 1,\n  \"job\": {\"world_size\": 2},\n"
    "  \"GPU Compute\": {\"major_kernel_executions\": {\"<img src=x onerror=alert(1)>1_1_1|1_1_1\": "
    "{\"median cost per execution (ms)\": 0.5}}},\n"
    "  \"warnings\": [\"</script><script>alert(1)</script>\", \"a & b\"]\n}\n";

static int setup(void **state)
{
    char *base = malloc(64);
    snprintf(base, 64, "/tmp/pt-perfdisplay-XXXXXX");
    if (!mkdtemp(base))
        return -1;
    *state = base;
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", (char *)*state);
    free(*state);
    return system(cmd) == 0 ? 0 : -1;
}

static char *read_all(const char *dir, const char *name, size_t *len)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    pt_buf b = PT_BUF_INIT;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        pt_buf_append(&b, chunk, n);
    fclose(f);
    *len = b.len;
    pt_buf_putc(&b, '\0');
    return pt_buf_take(&b);
}

static bool exists(const char *dir, const char *name)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void display_path(char *out, size_t size, const char *base)
{
    snprintf(out, size, "%s/out/20261129-073000/PerfDisplay", base); /* parents do not exist */
}

/* Descriptors this process holds now (a write must leave none behind: the collector
 * writes from inside a training process that runs for days). */
static int open_descriptors(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_writes_every_asset_byte_for_byte(void **state)
{
    char dir[PATH_MAX];
    display_path(dir, sizeof dir, *state);
    pt_error err = {{0}};
    int held = open_descriptors();
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), 0);
    assert_int_equal(open_descriptors(), held);
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), 0); /* in place, again */
    assert_int_equal(open_descriptors(), held);
    assert_true(pt_perfdisplay_asset_count >= 6);
    for (size_t i = 0; i < pt_perfdisplay_asset_count; i++) {
        const pt_perfdisplay_asset *a = &pt_perfdisplay_assets[i];
        size_t len = 0;
        char *data = read_all(dir, a->path, &len);
        assert_non_null(data);
        assert_int_equal(len, a->size);
        assert_memory_equal(data, a->data, a->size);
        free(data);
        char path[2 * PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, a->path);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal((st.st_mode & 0111) != 0, a->executable);
    }
    assert_true(exists(dir, "index.html"));
    assert_true(exists(dir, "app.py"));
    assert_true(exists(dir, "assets/app.js"));
}

static void test_report_json_is_the_callers_bytes(void **state)
{
    char dir[PATH_MAX];
    display_path(dir, sizeof dir, *state);
    pt_error err = {{0}};
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), 0);
    size_t len = 0;
    char *json = read_all(dir, "report.json", &len);
    assert_non_null(json);
    assert_int_equal(len, strlen(report));
    assert_memory_equal(json, report, len);
    free(json);
}

static void test_data_js_is_inert_compact_json(void **state)
{
    char dir[PATH_MAX];
    display_path(dir, sizeof dir, *state);
    pt_error err = {{0}};
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), 0);
    size_t len = 0;
    char *js = read_all(dir, "data.js", &len);
    assert_non_null(js);
    const char *start = strstr(js, "window.PT_REPORT = {");
    assert_non_null(start);
    assert_int_equal(strncmp(js, "/*", 2), 0);
    assert_string_equal(js + len - 2, ";\n");
    /* No report byte can close the script or open markup: '<', '>' and '&' are escaped. */
    assert_null(strchr(start, '<'));
    assert_null(strchr(start, '>'));
    assert_null(strchr(start, '&'));
    assert_non_null(strstr(start, "\\u003cimg src=x onerror=alert(1)\\u003e"));
    assert_non_null(strstr(start, "\\u003c/script\\u003e"));
    assert_ptr_equal(strchr(start, '\n'), js + len - 1); /* compact: one line */
    free(js);
}

static void test_refuses_a_report_that_is_not_json(void **state)
{
    char dir[PATH_MAX];
    display_path(dir, sizeof dir, *state);
    pt_error err = {{0}};
    static const char truncated[] = "{\"report_version\": 1, \"job\": {";
    assert_int_equal(pt_perfdisplay_write(dir, truncated, strlen(truncated), &err), -1);
    assert_non_null(strstr(err.message, "not valid JSON"));
    assert_false(exists(dir, "data.js"));
    assert_false(exists(dir, "index.html")); /* no page without its data */
    assert_int_equal(pt_perfdisplay_write(dir, "[1, 2]", 6, &err), -1);
    assert_non_null(strstr(err.message, "not a JSON object"));
}

static void test_rewrites_in_place_and_drops_stale_optional_files(void **state)
{
    char dir[PATH_MAX], path[2 * PATH_MAX];
    display_path(dir, sizeof dir, *state);
    pt_error err = {{0}};
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), 0);
    /* An older build's optional files (the chart library) must not outlive this build's page. */
    for (const char *const *absent = pt_perfdisplay_absent_assets; *absent; absent++) {
        snprintf(path, sizeof path, "%s/%s", dir, *absent);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    }
    static const char second[] = "{\"report_version\": 1, \"job\": {\"world_size\": 3}}";
    assert_int_equal(pt_perfdisplay_write(dir, second, strlen(second), &err), 0);
    for (const char *const *absent = pt_perfdisplay_absent_assets; *absent; absent++)
        assert_false(exists(dir, *absent));
    size_t len = 0;
    char *js = read_all(dir, "data.js", &len);
    assert_non_null(strstr(js, "\"world_size\":3"));
    free(js);
    /* No temporary file is left behind. */
    const char *subdirs[] = {"", "/assets"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s%s", dir, subdirs[i]);
        DIR *d = opendir(path);
        assert_non_null(d);
        for (struct dirent *e; (e = readdir(d));)
            if (strstr(e->d_name, ".tmp"))
                fail_msg("temporary file left: %s/%s", path, e->d_name);
        closedir(d);
    }
}

/* Where an asset comes from: web/<basename> for the page, the npm tree for the charts. */
static void asset_source(const char *asset_path, char *out, size_t size)
{
    const char *base = strrchr(asset_path, '/') ? strrchr(asset_path, '/') + 1 : asset_path;
    if (strncmp(base, "echarts.", 8) == 0) {
        const char *file = strcmp(base, "echarts.min.js") == 0 ? "dist/echarts.min.js"
                           : strcmp(base, "echarts.LICENSE.txt") == 0 ? "LICENSE"
                                                                       : "NOTICE";
        snprintf(out, size, "%s/%s", PT_ECHARTS_DIR, file);
    } else {
        snprintf(out, size, "%s/%s", PT_WEB_DIR, base);
    }
}

static void test_embedded_assets_are_the_web_sources(void **state)
{
    (void)state;
    for (size_t i = 0; i < pt_perfdisplay_asset_count; i++) {
        const pt_perfdisplay_asset *a = &pt_perfdisplay_assets[i];
        char source[2 * PATH_MAX];
        asset_source(a->path, source, sizeof source);
        size_t len = 0;
        char *dir = strdup(source), *slash = strrchr(dir, '/');
        *slash = '\0';
        char *data = read_all(dir, slash + 1, &len);
        if (!data)
            fail_msg("%s: its source %s cannot be read", a->path, source);
        if (len != a->size || memcmp(data, a->data, len) != 0)
            fail_msg("%s differs from %s (%zu bytes embedded, %zu on disk): the build is stale", a->path, source,
                     a->size, len);
        struct stat st;
        assert_int_equal(stat(source, &st), 0);
        assert_int_equal((st.st_mode & 0111) != 0, a->executable);
        free(data);
        free(dir);
    }
}

/* Every page file in web/ is embedded: a new script or stylesheet cannot be forgotten in
 * web/CMakeLists.txt. */
static void test_every_page_file_is_embedded(void **state)
{
    (void)state;
    static const char *const page_suffixes[] = {".html", ".js", ".css"};
    static const char *const page_files[] = {"app.py", "README.txt"};
    DIR *d = opendir(PT_WEB_DIR);
    assert_non_null(d);
    size_t checked = 0;
    for (struct dirent *e; (e = readdir(d));) {
        bool page = false;
        size_t n = strlen(e->d_name);
        for (size_t k = 0; k < sizeof page_suffixes / sizeof *page_suffixes; k++) {
            size_t m = strlen(page_suffixes[k]);
            page |= n > m && strcmp(e->d_name + n - m, page_suffixes[k]) == 0;
        }
        for (size_t k = 0; k < sizeof page_files / sizeof *page_files; k++)
            page |= strcmp(e->d_name, page_files[k]) == 0;
        if (!page)
            continue;
        bool embedded = false;
        for (size_t i = 0; i < pt_perfdisplay_asset_count && !embedded; i++) {
            const char *path = pt_perfdisplay_assets[i].path;
            const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
            embedded = strcmp(base, e->d_name) == 0;
        }
        if (!embedded)
            fail_msg("web/%s is not embedded in the binary (web/CMakeLists.txt, page_files)", e->d_name);
        checked++;
    }
    closedir(d);
    assert_true(checked >= 6); /* index.html, four scripts, style.css, app.py, README.txt */
}

static void test_has_charts_matches_the_table(void **state)
{
    (void)state;
    bool bundled = false;
    for (size_t i = 0; i < pt_perfdisplay_asset_count; i++)
        bundled |= strcmp(pt_perfdisplay_assets[i].path, "assets/echarts.min.js") == 0;
    assert_int_equal(pt_perfdisplay_has_charts(), bundled);
    bool listed_absent = false;
    for (const char *const *absent = pt_perfdisplay_absent_assets; *absent; absent++)
        listed_absent |= strcmp(*absent, "assets/echarts.min.js") == 0;
    assert_int_equal(listed_absent, !bundled); /* exactly one of the two */
}

static void test_unwritable_destination_is_an_error(void **state)
{
    char dir[2 * PATH_MAX], blocker[PATH_MAX];
    snprintf(blocker, sizeof blocker, "%s/file", (char *)*state);
    FILE *f = fopen(blocker, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/PerfDisplay", blocker); /* a parent that is a file */
    pt_error err = {{0}};
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), -1);
    assert_true(err.message[0] != '\0');
}

/* A folder inside PerfDisplay that is a file (assets/, planted or left over): the write
 * fails, naming it, rather than going on with a folder it could not open. */
static void test_a_subfolder_that_is_a_file_is_an_error(void **state)
{
    char dir[2 * PATH_MAX], blocker[3 * PATH_MAX];
    snprintf(dir, sizeof dir, "%s/PerfDisplay", (char *)*state);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(blocker, sizeof blocker, "%s/assets", dir);
    FILE *f = fopen(blocker, "w");
    assert_non_null(f);
    fclose(f);
    pt_error err = {{0}};
    assert_int_equal(pt_perfdisplay_write(dir, report, strlen(report), &err), -1);
    assert_non_null(strstr(err.message, "assets"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writes_every_asset_byte_for_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_json_is_the_callers_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_data_js_is_inert_compact_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_a_report_that_is_not_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rewrites_in_place_and_drops_stale_optional_files, setup, teardown),
        cmocka_unit_test(test_has_charts_matches_the_table),
        cmocka_unit_test(test_embedded_assets_are_the_web_sources),
        cmocka_unit_test(test_every_page_file_is_embedded),
        cmocka_unit_test_setup_teardown(test_unwritable_destination_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_subfolder_that_is_a_file_is_an_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
