/* phase.h -- where an analysis spends its CPU and its memory: with PERFTRACKER_PHASES set
 * in the environment, each pt_phase prints to stderr the process's CPU seconds so far, its
 * resident memory and its peak (VmRSS, VmHWM of /proc/self/status). A measuring aid for
 * the scale benchmarks (bench/scale); silent and nearly free otherwise. */
#ifndef PT_UTIL_PHASE_H
#define PT_UTIL_PHASE_H

/* "perftracker: phase NAME: 3.21 s cpu, 1234.567 s monotonic, 412 MiB resident, peak 498 MiB": the
 * monotonic clock, so two notes give the wall time between them. */
void pt_phase(const char *name);

#endif
