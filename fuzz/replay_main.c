/* replay_main.c -- runs a fuzz target once on each file named (directories: every file
 * in them, sorted), without libFuzzer. This is how saved crashers and the seed corpora
 * become ordinary regression tests in every build tree (ASan+UBSan with gcc included):
 * a fixed bug stays fixed. Prints how many inputs ran; a failing input aborts with the
 * sanitizer's or the target's report, naming the file on the line before. An argument
 * that yields no input (an empty or unreadable corpus directory) fails the run: a replay
 * of nothing would pass while testing nothing. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static size_t replayed;

static void replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        exit(2);
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *data = malloc(cap);
    size_t got;
    while (data && (got = fread(data + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap)
            data = realloc(data, cap *= 2);
    }
    fclose(f);
    if (!data) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        exit(2);
    }
    /* An exact-size copy, so that reading one byte past the input is caught. */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, data, len);
    free(data);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    replayed++;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: no such file or directory\n", path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path);
        return;
    }
    DIR *dir = opendir(path);
    if (!dir) {
        fprintf(stderr, "replay: cannot open directory %s\n", path);
        exit(2);
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (count == cap)
            names = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
        names[count++] = strdup(de->d_name);
    }
    closedir(dir);
    if (count)
        qsort(names, count, sizeof *names, compare_names);
    for (size_t i = 0; i < count; i++) {
        size_t n = strlen(path) + strlen(names[i]) + 2;
        char *child = malloc(n);
        snprintf(child, n, "%s/%s", path, names[i]);
        replay(child);
        free(child);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s INPUT_OR_DIR...\n", argv[0]);
        return 2;
    }
    pt_fuzz_replaying = true;
    for (int i = 1; i < argc; i++) {
        size_t before = replayed;
        replay(argv[i]);
        if (replayed == before) {
            fprintf(stderr, "replay: %s holds no input: an empty corpus tests nothing\n", argv[i]);
            return 1;
        }
    }
    printf("replayed %zu inputs, all passed\n", replayed);
    return 0;
}
