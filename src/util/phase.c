/* phase.c -- phase notes (phase.h): read once per note, so a phase costs one getenv. */
#define _POSIX_C_SOURCE 200809L
#include "util/phase.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A "Vm...:  123 kB" line of /proc/self/status, in MiB; -1 unknown. */
static long status_mib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

void pt_phase(const char *name)
{
    if (!getenv("PERFTRACKER_PHASES"))
        return;
    struct timespec cpu = {0, 0}, now = {0, 0};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    clock_gettime(CLOCK_MONOTONIC, &now);
    fprintf(stderr, "perftracker: phase %s: %.2f s cpu, %.3f s monotonic, %ld MiB resident, peak %ld MiB\n", name,
            (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9, (double)now.tv_sec + (double)now.tv_nsec / 1e9,
            status_mib("VmRSS"), status_mib("VmHWM"));
}
