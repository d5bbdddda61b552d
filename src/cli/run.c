/* run.c -- `perftracker run [--seconds S] [--] COMMAND [ARG...]`: runs a training job
 * with the collector in every Python process of it, without a change to the job.
 *
 * How: the collector's bootstrap folder (perftracker/run_boot/, one sitecustomize.py) goes
 * first on PYTHONPATH, so every Python process the command starts -- a launcher, torchrun's
 * workers, `python3 train.py` -- runs it at startup; it chains to the sitecustomize that
 * would have run, and loads the collector only in processes that import torch and are
 * workers (python/perftracker/autostep.py finds their steps). Besides PYTHONPATH the
 * command's environment gains only perftracker's own variables: PERFTRACKER_RUN=1 (the
 * bootstrap acts only under it), PERFTRACKER_RUN_SECONDS with --seconds, and
 * PERFTRACKER_CLI (this binary, for the workers' summaries) when it was not set.
 *
 * Then this process becomes the command (execvp): its pid, exit status and signals are
 * the job's own, so Ctrl-C and a scheduler's SIGTERM reach it as they would without
 * perftracker. The bootstrap is looked for beside this binary: <bin>/../python (a build
 * tree), <bin>/../.. (perftracker/bin/ inside a pip install), <bin>/../lib/python3.* /
 * {site,dist}-packages (make install). Exit status: the command's; 2 bad command line;
 * 127 the command or the bootstrap was not found, 126 the command could not be run. */
#define _DEFAULT_SOURCE /* realpath, setenv, readlink */
#include "cli/cli.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BOOT_SUBDIR "perftracker/run_boot"
#define SECONDS_MAX 3600.0

static void usage(FILE *out)
{
    fprintf(out, "usage: perftracker run [--seconds S] [--] COMMAND [ARG...]\n"
                 "  Runs COMMAND (python3 train.py, torchrun ..., a launcher script) with the perftracker\n"
                 "  collector loaded in each of its Python workers: no change to the training script.\n"
                 "  Steps are the script's own PerfTracker.step() calls if it makes them, else the end of\n"
                 "  each optimizer.step, else a repeating sequence of data-loader items and collectives\n"
                 "  it learns; the report says which. Then profile it from another shell as usual:\n"
                 "  perftracker --trigger-on --auto-analyze.\n"
                 "  --seconds S   when no step is found, mark one every S seconds (default 1; 0.01..3600)\n"
                 "Exit status: COMMAND's; 1 the environment could not be set; 2 bad command line; 126/127\n"
                 "COMMAND could not be run or found (127 also: the collector is not installed beside this\n"
                 "binary).\n");
}

/* The folder holding perftracker/run_boot/sitecustomize.py beside this binary, or false. */
static bool find_boot_dir(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0'; /* exe is now the binary's folder */
    char pattern[PATH_MAX + 64];
    const char *const relative[] = {"/../python", "/../..", "/../lib/python3*/*-packages"};
    for (size_t i = 0; i < sizeof relative / sizeof relative[0]; i++) {
        snprintf(pattern, sizeof pattern, "%s%s/" BOOT_SUBDIR "/sitecustomize.py", exe, relative[i]);
        glob_t found;
        if (glob(pattern, 0, NULL, &found) == 0 && found.gl_pathc > 0) {
            char real[PATH_MAX];
            bool ok = realpath(found.gl_pathv[0], real) != NULL;
            globfree(&found);
            if (ok && strlen(real) < cap) {
                *strrchr(real, '/') = '\0';
                snprintf(out, cap, "%s", real);
                return true;
            }
            continue;
        }
        globfree(&found);
    }
    return false;
}

static bool parse_seconds(const char *text, double *seconds)
{
    char *end = NULL;
    errno = 0;
    double v = text && *text ? strtod(text, &end) : -1;
    if (errno || !end || *end || !(v >= 0.01 && v <= SECONDS_MAX))
        return false;
    *seconds = v;
    return true;
}

/* PYTHONPATH with boot first; the rest as it was (an empty one stays absent). */
static int set_environment(const char *boot, const char *seconds_text)
{
    const char *old = getenv("PYTHONPATH");
    pt_buf path = PT_BUF_INIT;
    pt_buf_puts(&path, boot);
    if (old && *old) {
        pt_buf_puts(&path, ":");
        pt_buf_puts(&path, old);
    }
    int rc = setenv("PYTHONPATH", path.data, 1) | setenv("PERFTRACKER_RUN", "1", 1);
    pt_buf_free(&path);
    if (seconds_text)
        rc |= setenv("PERFTRACKER_RUN_SECONDS", seconds_text, 1);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!getenv("PERFTRACKER_CLI") && n > 0) {
        self[n] = '\0';
        rc |= setenv("PERFTRACKER_CLI", self, 1);
    }
    return rc;
}

int cmd_run(int argc, char **argv)
{
    const char *seconds_text = NULL;
    double seconds = 0;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return PT_EXIT_OK;
        }
        if (strcmp(argv[i], "--seconds") == 0) {
            if (i + 1 >= argc || !parse_seconds(argv[i + 1], &seconds))
                return pt_cli_usage_error("run", usage, "--seconds wants seconds from 0.01 to 3600",
                                          i + 1 < argc ? argv[i + 1] : NULL);
            seconds_text = argv[++i];
            continue;
        }
        return pt_cli_usage_error("run", usage, "unknown option", argv[i]);
    }
    if (i >= argc)
        return pt_cli_usage_error("run", usage, "no command to run", NULL);
    char boot[PATH_MAX];
    if (!find_boot_dir(boot, sizeof boot)) {
        fprintf(stderr, "perftracker run: the collector's bootstrap (" BOOT_SUBDIR "/sitecustomize.py) is not "
                        "installed beside this binary; reinstall perftracker\n");
        return 127;
    }
    if (set_environment(boot, seconds_text) != 0) {
        fprintf(stderr, "perftracker run: cannot set the environment: %s\n", strerror(errno));
        return PT_EXIT_FAILURE;
    }
    fflush(NULL);
    execvp(argv[i], argv + i);
    int why = errno;
    pt_cli_print(stderr, "perftracker run: cannot run %s: %s\n", argv[i], strerror(why));
    return why == ENOENT ? 127 : 126;
}
