/* fuzz_display_path.c -- the PerfDisplay servers' request-path rules
 * (pt_display_resolve, src/display/site.c; docs/perfdisplay.md "Path rules").
 *
 * A fixture folder is built once: PerfDisplay/ with an index, an asset, a dotfile, a
 * symlink pointing inside and one pointing outside; the sibling raw_trace/; and a secret
 * beside them that must never be served. For any request path the resolver may only
 * answer 200 with a regular file inside PerfDisplay/ or raw_trace/, never the secret,
 * never a dotfile, never through the outward symlink. The Host check is fed the same
 * bytes. */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include "display/site.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pt_display_site site;
static char secret[PATH_MAX];

static char top[] = "/tmp/pt-fuzz-site-XXXXXX";

static void put_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    PT_FUZZ_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "writing the fixture");
}

static void remove_fixture(void)
{
    static const char *const files[] = {"PerfDisplay/index.html", "PerfDisplay/assets/app.js",
                                        "PerfDisplay/.hidden", "PerfDisplay/out.txt", "PerfDisplay/in.html",
                                        "raw_trace/node0_0_1.ptrace", "secret.txt"};
    static const char *const dirs[] = {"PerfDisplay/assets", "PerfDisplay", "raw_trace", ""};
    char path[512];
    for (size_t i = 0; i < PT_ARRAY_LEN(files); i++)
        snprintf(path, sizeof path, "%s/%s", top, files[i]), unlink(path);
    for (size_t i = 0; i < PT_ARRAY_LEN(dirs); i++)
        snprintf(path, sizeof path, "%s/%s", top, dirs[i]), rmdir(path);
}

static void build_fixture(void)
{
    PT_FUZZ_CHECK(mkdtemp(top) != NULL, "mkdtemp");
    atexit(remove_fixture);
    char display[128], assets[128], raw[128], link[256];
    snprintf(display, sizeof display, "%s/PerfDisplay", top);
    snprintf(assets, sizeof assets, "%s/PerfDisplay/assets", top);
    snprintf(raw, sizeof raw, "%s/raw_trace", top);
    PT_FUZZ_CHECK(mkdir(display, 0700) == 0 && mkdir(assets, 0700) == 0 && mkdir(raw, 0700) == 0, "mkdir");
    put_file(display, "index.html", "<!doctype html>");
    put_file(assets, "app.js", "1");
    put_file(display, ".hidden", "dotfile");
    put_file(raw, "node0_0_1.ptrace", "trace");
    put_file(top, "secret.txt", "secret");
    snprintf(link, sizeof link, "%s/secret.txt", top);
    char *real = realpath(link, NULL);
    PT_FUZZ_CHECK(real != NULL, "realpath of the secret");
    snprintf(secret, sizeof secret, "%s", real);
    free(real);
    char out[256];
    snprintf(out, sizeof out, "%s/out.txt", display);
    PT_FUZZ_CHECK(symlink(secret, out) == 0, "symlink out");
    snprintf(link, sizeof link, "%s/in.html", display);
    PT_FUZZ_CHECK(symlink("index.html", link) == 0, "symlink in");
    pt_error err = {{0}};
    PT_FUZZ_CHECK(pt_display_site_open(&site, display, &err) == 0, "opening the fixture");
    PT_FUZZ_CHECK(site.raw_trace[0], "the fixture's raw_trace/ was not found");
}

static int inside(const char *file, const char *base)
{
    size_t n = strlen(base);
    return strncmp(file, base, n) == 0 && file[n] == '/';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!site.root[0])
        build_fixture();
    char *request = strndup((const char *)data, size); /* stops at a NUL, as a C server would */
    char file[PATH_MAX];
    pt_display_status st = pt_display_resolve(&site, request, file);
    PT_FUZZ_CHECK(st == PT_DISPLAY_OK || st == PT_DISPLAY_BAD_REQUEST || st == PT_DISPLAY_FORBIDDEN ||
                      st == PT_DISPLAY_NOT_FOUND, "an unknown status");
    if (st == PT_DISPLAY_OK) {
        PT_FUZZ_CHECK(inside(file, site.root) || inside(file, site.raw_trace), "served a file outside the folder");
        PT_FUZZ_CHECK(strcmp(file, secret) != 0, "served the secret beside the folder");
        PT_FUZZ_CHECK(strstr(file, "/.") == NULL, "served a dotfile");
        struct stat sb;
        PT_FUZZ_CHECK(stat(file, &sb) == 0 && S_ISREG(sb.st_mode), "served something that is not a regular file");
    }
    (void)pt_display_host_is_loopback(request);
    (void)pt_display_content_type(request);
    free(request);
    return 0;
}
