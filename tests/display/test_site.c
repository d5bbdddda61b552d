/* The display server's path rules (src/display/site.c): what a request may reach. Runs on
 * a real folder with real symlinks, because the containment check is realpath()'s. */
#define _XOPEN_SOURCE 700
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "display/site.h"

typedef struct fixture {
    char base[64];     /* <tmp>/ : out/ lives here */
    char out[128];     /* <tmp>/out: PerfDisplay/, raw_trace/, secret.txt */
    char display[256]; /* <tmp>/out/PerfDisplay */
    pt_display_site site;
} fixture;

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_dir(const char *dir, const char *name)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(mkdir(path, 0755), 0);
}

static void make_link(const char *target, const char *dir, const char *name)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(symlink(target, path), 0);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->base, sizeof f->base, "/tmp/pt-site-XXXXXX");
    if (!mkdtemp(f->base))
        return -1;
    snprintf(f->out, sizeof f->out, "%s/out", f->base);
    snprintf(f->display, sizeof f->display, "%s/PerfDisplay", f->out);
    mkdir(f->out, 0755);
    mkdir(f->display, 0755);
    write_text(f->out, "secret.txt", "secret\n");
    make_dir(f->out, "raw_trace");
    write_text(f->out, "raw_trace/host_0_1.ptrace", "trace\n");
    write_text(f->display, "index.html", "<!DOCTYPE html>\n");
    make_dir(f->display, "assets");
    write_text(f->display, "assets/app.js", "1;\n");
    write_text(f->display, ".hidden", "x\n");
    make_link("../secret.txt", f->display, "leak.txt");     /* a file outside */
    make_link("..", f->display, "up");                      /* a folder outside */
    make_link("assets", f->display, "inner");               /* a folder inside: fine */
    make_link("/etc/passwd", f->display, "passwd");         /* an absolute target */
    pt_error err = {{0}};
    if (pt_display_site_open(&f->site, f->display, &err) != 0) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->base);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

static pt_display_status resolve(fixture *f, const char *request, char file[PATH_MAX])
{
    return pt_display_resolve(&f->site, request, file);
}

/* The real path of name inside dir, as the resolver must return it. */
static void expect_file(fixture *f, const char *request, const char *dir, const char *name)
{
    char file[PATH_MAX], want[PATH_MAX * 2], want_real[PATH_MAX];
    assert_int_equal(resolve(f, request, file), PT_DISPLAY_OK);
    snprintf(want, sizeof want, "%s/%s", dir, name);
    assert_non_null(realpath(want, want_real));
    assert_string_equal(file, want_real);
}

static void test_serves_files_inside(void **state)
{
    fixture *f = *state;
    expect_file(f, "/", f->display, "index.html");
    expect_file(f, "/index.html", f->display, "index.html");
    expect_file(f, "/assets/app.js", f->display, "assets/app.js");
    expect_file(f, "/assets/%61pp.js", f->display, "assets/app.js"); /* %61 = 'a', decoded once */
    expect_file(f, "/inner/app.js", f->display, "assets/app.js");    /* symlink staying inside */
}

static void test_maps_sibling_raw_trace(void **state)
{
    fixture *f = *state;
    assert_true(f->site.raw_trace[0] != '\0');
    expect_file(f, "/raw_trace/host_0_1.ptrace", f->out, "raw_trace/host_0_1.ptrace");
    char file[PATH_MAX];
    assert_int_equal(resolve(f, "/raw_trace/../secret.txt", file), PT_DISPLAY_FORBIDDEN);
    assert_int_equal(resolve(f, "/raw_trace/%2e%2e/secret.txt", file), PT_DISPLAY_FORBIDDEN);
    assert_int_equal(resolve(f, "/raw_trace/", file), PT_DISPLAY_NOT_FOUND); /* no listing */
    assert_int_equal(resolve(f, "/raw_trace/nope", file), PT_DISPLAY_NOT_FOUND);
}

/* A sibling whose name starts with the folder's (PerfDisplay-old beside PerfDisplay,
 * raw_trace-old beside raw_trace) is outside it: containment ends on a '/' boundary. */
static void test_sibling_with_the_same_prefix_is_outside(void **state)
{
    fixture *f = *state;
    make_dir(f->out, "PerfDisplay-old");
    write_text(f->out, "PerfDisplay-old/old.txt", "old\n");
    make_link("../PerfDisplay-old/old.txt", f->display, "old.txt");
    make_dir(f->out, "raw_trace-old");
    write_text(f->out, "raw_trace-old/host_9_9.ptrace", "other\n");
    make_link("../raw_trace-old/host_9_9.ptrace", f->out, "raw_trace/other.ptrace");
    char file[PATH_MAX];
    assert_int_equal(resolve(f, "/old.txt", file), PT_DISPLAY_FORBIDDEN);
    assert_int_equal(resolve(f, "/raw_trace/other.ptrace", file), PT_DISPLAY_FORBIDDEN);
    assert_int_equal(resolve(f, "/raw_trace-old/host_9_9.ptrace", file), PT_DISPLAY_NOT_FOUND);
    expect_file(f, "/raw_trace/host_0_1.ptrace", f->out, "raw_trace/host_0_1.ptrace");
}

static void test_refuses_traversal(void **state)
{
    fixture *f = *state;
    static const char *const forbidden[] = {
        "/../secret.txt", "/assets/../../secret.txt", "/../../../../etc/passwd",
        "/%2e%2e/secret.txt", "/%2E%2E/secret.txt", "/.%2e/secret.txt", "/%2e./secret.txt",
        "/assets/..%2fsecret.txt", "/%2e%2e%2fsecret.txt", "/assets%2fapp.js", "/%2F",
        "/leak.txt", "/up/secret.txt", "/up/PerfDisplay/../secret.txt", "/passwd", "/.hidden",
        "/./index.html", "/assets/.",
    };
    char file[PATH_MAX];
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++) {
        pt_display_status s = resolve(f, forbidden[i], file);
        if (s != PT_DISPLAY_FORBIDDEN)
            fail_msg("%s: expected 403, got %d", forbidden[i], (int)s);
    }
}

static void test_refuses_malformed(void **state)
{
    fixture *f = *state;
    static const char *const bad[] = {
        "", "index.html", "http://127.0.0.1/index.html", "//etc/passwd", "/assets//app.js",
        "/index.html%00", "/index.html%00.js", "/%", "/%4", "/%zz", "/%g0", "/a%5c..%5csecret.txt",
        "/a\\b", "/a\x01", "/%7f", "/%0a",
    };
    char file[PATH_MAX];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_display_status s = resolve(f, bad[i], file);
        if (s != PT_DISPLAY_BAD_REQUEST)
            fail_msg("'%s': expected 400, got %d", bad[i], (int)s);
    }
    char *long_path = malloc(PATH_MAX + 16);
    long_path[0] = '/';
    memset(long_path + 1, 'a', PATH_MAX + 8);
    long_path[PATH_MAX + 9] = '\0';
    assert_int_equal(resolve(f, long_path, file), PT_DISPLAY_BAD_REQUEST);
    free(long_path);
}

static void test_not_found(void **state)
{
    fixture *f = *state;
    char file[PATH_MAX];
    assert_int_equal(resolve(f, "/nope.js", file), PT_DISPLAY_NOT_FOUND);
    assert_int_equal(resolve(f, "/assets/", file), PT_DISPLAY_NOT_FOUND);      /* no index.html */
    assert_int_equal(resolve(f, "/assets", file), PT_DISPLAY_NOT_FOUND);       /* a directory */
    assert_int_equal(resolve(f, "/index.html/x", file), PT_DISPLAY_NOT_FOUND); /* ENOTDIR */
}

static void test_site_open_checks_the_folder(void **state)
{
    fixture *f = *state;
    pt_display_site site;
    pt_error err = {{0}};
    char path[PATH_MAX * 2];
    assert_int_equal(pt_display_site_open(&site, f->out, &err), -1); /* no index.html */
    assert_non_null(strstr(err.message, "index.html"));
    snprintf(path, sizeof path, "%s/missing", f->base);
    assert_int_equal(pt_display_site_open(&site, path, &err), -1);
    snprintf(path, sizeof path, "%s/index.html", f->display);
    assert_int_equal(pt_display_site_open(&site, path, &err), -1);    /* a file, not a folder */

    /* A folder with its own raw_trace/ serves that one, not its parent's. */
    make_dir(f->display, "raw_trace");
    write_text(f->display, "raw_trace/own.ptrace", "own\n");
    assert_int_equal(pt_display_site_open(&site, f->display, &err), 0);
    assert_string_equal(site.raw_trace, "");
    char file[PATH_MAX];
    assert_int_equal(pt_display_resolve(&site, "/raw_trace/own.ptrace", file), PT_DISPLAY_OK);
    assert_int_equal(pt_display_resolve(&site, "/raw_trace/host_0_1.ptrace", file), PT_DISPLAY_NOT_FOUND);
}

/* The round's raw_trace/ beside the folder is served only when it is a real folder there:
 * `ln -s /etc raw_trace` (issue 15) used to publish /etc, and a symlink to any other folder
 * outside the round would publish that one. */
static void test_symlinked_sibling_raw_trace_is_ignored(void **state)
{
    fixture *f = *state;
    char path[256], outside[256], file[PATH_MAX];
    snprintf(path, sizeof path, "%s/raw_trace/host_0_1.ptrace", f->out);
    assert_int_equal(unlink(path), 0);
    snprintf(path, sizeof path, "%s/raw_trace", f->out);
    assert_int_equal(rmdir(path), 0);
    snprintf(outside, sizeof outside, "%s/elsewhere", f->base);
    assert_int_equal(mkdir(outside, 0755), 0);
    write_text(outside, "host_0_1.ptrace", "not the round's\n");
    const char *targets[] = {"/etc", outside, "../elsewhere"};
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        unlink(path);
        assert_int_equal(symlink(targets[i], path), 0);
        pt_display_site site;
        pt_error err = {{0}};
        assert_int_equal(pt_display_site_open(&site, f->display, &err), 0);
        assert_string_equal(site.raw_trace, "");
        assert_int_equal(pt_display_resolve(&site, "/raw_trace/passwd", file), PT_DISPLAY_NOT_FOUND);
        assert_int_equal(pt_display_resolve(&site, "/raw_trace/host_0_1.ptrace", file), PT_DISPLAY_NOT_FOUND);
    }
    /* A real folder swapped for a symlink after the server started: still refused. */
    unlink(path);
    assert_int_equal(mkdir(path, 0755), 0);
    pt_display_site site;
    pt_error err = {{0}};
    assert_int_equal(pt_display_site_open(&site, f->display, &err), 0);
    assert_true(site.raw_trace[0] != '\0');
    assert_int_equal(rmdir(path), 0);
    assert_int_equal(symlink("/etc", path), 0);
    assert_int_equal(pt_display_resolve(&site, "/raw_trace/passwd", file), PT_DISPLAY_FORBIDDEN);
}

static void test_content_types(void **state)
{
    (void)state;
    assert_string_equal(pt_display_content_type("/x/index.html"), "text/html; charset=utf-8");
    assert_string_equal(pt_display_content_type("APP.JS"), "text/javascript; charset=utf-8");
    assert_string_equal(pt_display_content_type("a/style.css"), "text/css; charset=utf-8");
    assert_string_equal(pt_display_content_type("report.json"), "application/json");
    assert_string_equal(pt_display_content_type("app.py"), "text/plain; charset=utf-8");
    assert_string_equal(pt_display_content_type("t.ptrace"), "application/octet-stream");
    assert_string_equal(pt_display_content_type("dir.html/file"), "application/octet-stream");
    assert_string_equal(pt_display_content_type("noext"), "application/octet-stream");
}

static void test_loopback_hosts(void **state)
{
    (void)state;
    static const char *const yes[] = {"127.0.0.1", "127.0.0.1:5000", "localhost", "LocalHost:80",
                                      "[::1]", "[::1]:5000"};
    static const char *const no[] = {"evil.example", "127.0.0.1.evil.example", "localhost.evil",
                                     "127.0.0.1:", "127.0.0.1:80x", "localhost:80:81", "10.0.0.1",
                                     "", "[::1]x"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (!pt_display_host_is_loopback(yes[i]))
            fail_msg("%s should be loopback", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (pt_display_host_is_loopback(no[i]))
            fail_msg("%s should not be loopback", no[i]);
    assert_false(pt_display_host_is_loopback(NULL));
}

/* A <script>, <img> or fetch() from a page of another origin (another loopback address:
 * cross-site; another port: same-site; a file:// page: cross-site) is foreign; the page's
 * own requests, a typed-in URL, a followed link and a client without the headers are not. */
static void test_foreign_fetches(void **state)
{
    (void)state;
    static const char *const foreign[][2] = {
        {"cross-site", "no-cors"}, {"same-site", "no-cors"}, {"cross-site", "cors"},
        {"same-site", "cors"}, {"cross-site", NULL}, {"cross-site", "navigatex"},
        {"cross-site", "websocket"},
    };
    static const char *const own[][2] = {
        {NULL, NULL}, {NULL, "no-cors"}, {"same-origin", "no-cors"}, {"same-origin", "cors"},
        {"none", "navigate"}, {"cross-site", "navigate"}, {"same-site", "navigate"},
        {"cross-sitex", "no-cors"}, {"same-sit", "no-cors"}, {"", "no-cors"},
    };
    for (size_t i = 0; i < PT_ARRAY_LEN(foreign); i++)
        if (!pt_display_fetch_is_foreign(foreign[i][0], foreign[i][1]))
            fail_msg("Sec-Fetch-Site %s, Mode %s should be foreign", foreign[i][0],
                     foreign[i][1] ? foreign[i][1] : "(none)");
    for (size_t i = 0; i < PT_ARRAY_LEN(own); i++)
        if (pt_display_fetch_is_foreign(own[i][0], own[i][1]))
            fail_msg("Sec-Fetch-Site %s, Mode %s should pass", own[i][0] ? own[i][0] : "(none)",
                     own[i][1] ? own[i][1] : "(none)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_serves_files_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_maps_sibling_raw_trace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_traversal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sibling_with_the_same_prefix_is_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_site_open_checks_the_folder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinked_sibling_raw_trace_is_ignored, setup, teardown),
        cmocka_unit_test(test_content_types),
        cmocka_unit_test(test_loopback_hosts),
        cmocka_unit_test(test_foreign_fetches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
