/* nvml.h -- the few NVML calls the hardware sampler makes, loaded with dlopen.
 *
 * There is no nvml.h on build machines without the CUDA toolkit's NVML headers, and the
 * collector must import where no driver exists, so nvml.c declares the handful of
 * functions and structs it uses (stable NVML ABI: the _v2 entry points and the GPM
 * structs of NVML_GPM_METRICS_GET_VERSION 1) and resolves them at run time from
 * libnvidia-ml.so.1.
 *
 * Three tiers, by cost and by how often the driver refreshes the value:
 *   fast  utilization, SM clock, power. The driver samples these itself and keeps the
 *         samples, with their times, in a buffer (nvmlDeviceGetSamples): reading that
 *         buffer every 10 ms gives every value the driver measured at one call per
 *         metric, where polling the getters every 100 us made 30,000 calls a second
 *         that mostly read the same value again (each an ioctl into the driver, taking
 *         its lock beside the training process's launches). Only a metric whose buffer
 *         the driver does not offer is polled, every sampler tick;
 *   slow  memory used: every 10 ms;
 *   gpm   GPU Performance Monitoring on Hopper and later (SM activity and occupancy,
 *         tensor activity, DRAM bandwidth, PCIe and NVLink throughput): a rate between
 *         two samples, so read at the GPM period (default 100 ms). */
#ifndef PT_COLLECT_NVML_H
#define PT_COLLECT_NVML_H

#include "util/common.h"

#include <stdbool.h>

#define PT_NVML_FAST 3
#define PT_NVML_SLOW 1
#define PT_NVML_GPM 8

extern const char *const pt_nvml_fast_names[PT_NVML_FAST];
extern const char *const pt_nvml_slow_names[PT_NVML_SLOW];
extern const char *const pt_nvml_gpm_names[PT_NVML_GPM];

typedef struct pt_nvml pt_nvml;

/* Opens the GPU with this UUID ("GPU-..." or the bare hex), else the one at index.
 * NULL with err set when NVML or the GPU is unavailable. */
pt_nvml *pt_nvml_open(const char *uuid, int index, pt_error *err);
void pt_nvml_close(pt_nvml *n);
const char *pt_nvml_device_name(const pt_nvml *n);
int pt_nvml_device_index(const pt_nvml *n);
bool pt_nvml_has_gpm(const pt_nvml *n);

/* The fast metrics (bit i: pt_nvml_fast_names[i]) read from the driver's sample buffer;
 * the others must be polled. */
unsigned pt_nvml_buffered(const pt_nvml *n);
/* Calls fn for every buffered sample newer than the previous call's (the first call:
 * newer than since_epoch_us), with its time in Unix-epoch microseconds. Returns the
 * number of samples. */
unsigned pt_nvml_read_buffered(pt_nvml *n, uint64_t since_epoch_us,
                               void (*fn)(void *ctx, int metric, uint64_t epoch_us, double value), void *ctx);
/* Each fills out[] and returns a bit mask of the values that are valid. read_fast reads
 * only the metrics in `which` (a mask). */
unsigned pt_nvml_read_fast(pt_nvml *n, unsigned which, double out[PT_NVML_FAST]);
unsigned pt_nvml_read_slow(pt_nvml *n, double out[PT_NVML_SLOW]);
/* Rates since the previous call (the first call only takes a sample and returns 0). */
unsigned pt_nvml_read_gpm(pt_nvml *n, double out[PT_NVML_GPM]);

#endif
