/* The checked folders of util/outdir.c, as any user can test them (sanitized): what
 * reliability.shared_folders shows for root against another user, here against our own
 * planted names. A world-writable folder without the sticky bit is refused on the way and
 * at the end; a symlink we own is followed on the way, but never at a name we create or as
 * a folder we write into; a planted symlink under a temporary or final name is replaced,
 * never written through; files below a sticky world-writable folder are private. */
#define _GNU_SOURCE
#include "check.h"
#include "util/outdir.h"
#include "util/output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64];

static void path_of(char *out, size_t cap, const char *rel)
{
    snprintf(out, cap, "%s/%s", base, rel);
}

static void make(const char *rel, mode_t mode)
{
    char p[PATH_MAX];
    path_of(p, sizeof p, rel);
    CHECK(mkdir(p, mode) == 0 && chmod(p, mode) == 0, "mkdir %s: %s", p, strerror(errno));
}

static void write_text(const char *rel, const char *text)
{
    char p[PATH_MAX];
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL, "cannot create %s", p);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static bool holds(const char *rel, const char *text)
{
    char p[PATH_MAX], got[256] = "";
    path_of(p, sizeof p, rel);
    FILE *f = fopen(p, "r");
    if (!f)
        return false;
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    return strcmp(got, text) == 0;
}

static int write_into(const char *rel_dir, const char *name, const char *text, pt_error *err)
{
    char p[PATH_MAX];
    path_of(p, sizeof p, rel_dir);
    pt_out_dir d;
    if (pt_out_dir_open(&d, p, true, err) != 0)
        return -1;
    const void *parts[] = {text};
    size_t size = strlen(text);
    int rc = pt_out_dir_write(&d, name, parts, &size, 1, 0644, err);
    pt_out_dir_close(&d);
    return rc;
}

static void test_world_writable_refused(void)
{
    pt_error err = {{0}};
    make("open", 0777);
    CHECK(write_into("open", "report.json", "x", &err) == -1 && strstr(err.message, "written by every user"),
          "a 0777 folder was used: %s", err.message);
    CHECK(write_into("open/deeper", "report.json", "x", &err) == -1 && strstr(err.message, "/open "),
          "a 0777 folder on the way was used: %s", err.message);
    make("sticky", 01777);
    CHECK(write_into("sticky", "report.json", "ok", &err) == 0, "a sticky 1777 folder was refused: %s",
          err.message);
    char p[PATH_MAX];
    path_of(p, sizeof p, "sticky/report.json");
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600, "a file below /tmp-like folder is mode %o",
          (unsigned)(st.st_mode & 0777));
    pt_out_dir d, sub;
    path_of(p, sizeof p, "sticky");
    CHECK(pt_out_dir_open(&d, p, false, &err) == 0 && pt_out_dir_sub(&sub, &d, "PerfDisplay", true, &err) == 0,
          "sub: %s", err.message);
    path_of(p, sizeof p, "sticky/PerfDisplay");
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0700, "a folder below it is mode %o",
          (unsigned)(st.st_mode & 0777));
    pt_out_dir_close(&sub);
    pt_out_dir_close(&d);
}

static void test_symlinks(void)
{
    pt_error err = {{0}};
    char p[PATH_MAX], target[PATH_MAX];
    make("real", 0755);
    make("secret", 0700);
    write_text("secret/report.json", "secret\n");
    /* Our own symlink on the way is followed (a user's /data -> /mnt/data). */
    path_of(p, sizeof p, "via");
    CHECK(symlink("real", p) == 0, "symlink");
    CHECK(write_into("via/out", "a.json", "through\n", &err) == 0 && holds("real/out/a.json", "through\n"),
          "a path through our own symlink: %s", err.message);
    /* A symlink at the name being written is replaced, not written through. */
    path_of(p, sizeof p, "real/out/report.json");
    path_of(target, sizeof target, "secret/report.json");
    CHECK(symlink(target, p) == 0, "symlink");
    CHECK(write_into("real/out", "report.json", "new\n", &err) == 0, "write: %s", err.message);
    CHECK(holds("secret/report.json", "secret\n"), "the symlink's target was overwritten");
    struct stat st;
    CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && holds("real/out/report.json", "new\n"),
          "report.json is not the new regular file");
    /* A symlink where a folder we write into should be is refused. */
    pt_out_dir d, sub;
    path_of(p, sizeof p, "real/out/PerfDisplay");
    path_of(target, sizeof target, "secret");
    CHECK(symlink(target, p) == 0, "symlink");
    path_of(p, sizeof p, "real/out");
    CHECK(pt_out_dir_open(&d, p, false, &err) == 0, "open: %s", err.message);
    CHECK(pt_out_dir_sub(&sub, &d, "PerfDisplay", true, &err) == -1 && strstr(err.message, "symlink"),
          "a symlinked PerfDisplay was used: %s", err.message);
    pt_out_dir_close(&d);
    /* The path-level writer: the same, and a device is written directly. */
    path_of(p, sizeof p, "real/out/x.ptsum");
    path_of(target, sizeof target, "secret/report.json");
    CHECK(symlink(target, p) == 0, "symlink");
    const void *parts[] = {"summary"};
    size_t size = 7;
    CHECK(pt_write_file_atomic(p, parts, &size, 1, 0644, &err) == 0 && holds("secret/report.json", "secret\n"),
          "pt_write_file_atomic followed a symlink: %s", err.message);
    CHECK(pt_write_file_atomic("/dev/null", parts, &size, 1, 0644, &err) == 0, "/dev/null: %s", err.message);
}

static void test_temporary_names(void)
{
    /* The temporary name is fresh each time: a planted one is never opened. */
    pt_error err = {{0}};
    char p[PATH_MAX];
    make("tmpnames", 0755);
    path_of(p, sizeof p, "tmpnames");
    pt_out_dir d;
    CHECK(pt_out_dir_open(&d, p, false, &err) == 0, "open: %s", err.message);
    pt_out_file a, b;
    CHECK(pt_out_file_create_in(&a, &d, "report.json", 0644, &err) == 0, "create: %s", err.message);
    CHECK(pt_out_file_create_in(&b, &d, "report.json", 0644, &err) == 0, "create: %s", err.message);
    CHECK(strcmp(a.tmp_name, b.tmp_name) != 0 && a.tmp_name[0] == '.', "temporary names %s and %s", a.tmp_name,
          b.tmp_name);
    pt_out_file_abandon(&a);
    CHECK(pt_out_file_commit(&b, &err) == 0, "commit: %s", err.message);
    pt_out_dir_close(&d);
    CHECK(holds("tmpnames/report.json", ""), "the committed file is missing");
}

/* Whole files under their names, nothing else: a new name, the same name again (replaced,
 * by a rename, the first time through a planted dotfile's way), both contents exact, and
 * no temporary or unnamed file left in the folder. */
static void test_written_whole_and_nothing_left(void)
{
    pt_error err = {{0}};
    make("whole", 0755);
    write_text("whole/.summary.ptsum.tmp-0000000000000000", "planted\n");
    CHECK(write_into("whole", "summary.ptsum", "first\n", &err) == 0, "write: %s", err.message);
    CHECK(write_into("whole", "summary.ptsum", "second\n", &err) == 0, "replace: %s", err.message);
    CHECK(write_into("whole", "other.ptsum", "other\n", &err) == 0, "write: %s", err.message);
    CHECK(holds("whole/summary.ptsum", "second\n") && holds("whole/other.ptsum", "other\n"),
          "the files do not hold what was written last");
    CHECK(holds("whole/.summary.ptsum.tmp-0000000000000000", "planted\n"), "a planted dotfile was written through");
    char p[PATH_MAX];
    path_of(p, sizeof p, "whole");
    DIR *dir = opendir(p);
    int entries = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        entries += e->d_name[0] != '.' || (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0);
    if (dir)
        closedir(dir);
    CHECK(entries == 3, "%d entries in the folder (2 files and the planted one expected)", entries);
}

/* Only one name is ever made or opened in a folder: a path, ".", ".." or "" is refused by
 * every entry point, with a message naming it, and nothing is created. */
static void test_only_one_name(void)
{
    char p[PATH_MAX];
    make("names", 0755);
    path_of(p, sizeof p, "names");
    pt_error err = {{0}};
    pt_out_dir d;
    CHECK(pt_out_dir_open(&d, p, false, &err) == 0, "open: %s", err.message);
    const char *bad[] = {"../escaped", "a/b", "..", ".", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[PATH_MAX + 64];
        pt_out_dir sub;
        pt_out_file f;
        snprintf(want, sizeof want, "%s/%s: not a folder name", p, bad[i]);
        err.message[0] = '\0';
        CHECK(pt_out_dir_sub(&sub, &d, bad[i], true, &err) == -1 && strcmp(err.message, want) == 0,
              "pt_out_dir_sub(\"%s\"): \"%s\"", bad[i], err.message);
        err.message[0] = '\0';
        CHECK(pt_out_dir_make_new(&sub, &d, bad[i], &err) == -1 && strcmp(err.message, want) == 0 && errno == EINVAL,
              "pt_out_dir_make_new(\"%s\"): \"%s\"", bad[i], err.message);
        snprintf(want, sizeof want, "%s/%s: not a file name", p, bad[i]);
        err.message[0] = '\0';
        CHECK(pt_out_file_create_in(&f, &d, bad[i], 0644, &err) == -1 && strcmp(err.message, want) == 0,
              "pt_out_file_create_in(\"%s\"): \"%s\"", bad[i], err.message);
    }
    pt_out_dir_close(&d);
    path_of(p, sizeof p, "escaped");
    CHECK(access(p, F_OK) != 0, "a name with \"../\" was created outside its folder");
    path_of(p, sizeof p, "names/a");
    CHECK(access(p, F_OK) != 0, "a path's first part was created");
}

int main(void)
{
    snprintf(base, sizeof base, "/tmp/pt-outdir-XXXXXX");
    if (!mkdtemp(base))
        return 1;
    chmod(base, 0755);
    umask(022);
    test_world_writable_refused();
    test_symlinks();
    test_temporary_names();
    test_written_whole_and_nothing_left();
    test_only_one_name();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        failures++;
    if (failures == 0)
        printf("output folders: ok\n");
    return failures != 0;
}
