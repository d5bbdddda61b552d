/* nvml.c -- NVML through dlopen, with our own declarations (see nvml.h). */
#define _POSIX_C_SOURCE 200809L
#include "collect/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* ---- the NVML ABI we rely on (from NVIDIA's public nvml.h) ---- */
typedef int nvmlReturn_t;
enum { NVML_SUCCESS = 0 };
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
enum { NVML_CLOCK_SM = 1 };
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct { char *shortName, *longName, *unit; } metricInfo;
} nvmlGpmMetric_t;
/* NVML reads numMetrics entries, so the array may be shorter than NVML_GPM_METRIC_MAX. */
typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1, sample2;
    nvmlGpmMetric_t metrics[PT_NVML_GPM];
} gpm_metrics_get;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
/* nvmlDeviceGetSamples: nvmlSamplingType_t, nvmlValueType_t, nvmlSample_t. */
enum { NVML_TOTAL_POWER_SAMPLES = 0, NVML_GPU_UTILIZATION_SAMPLES = 1, NVML_PROCESSOR_CLK_SAMPLES = 5 };
enum { NVML_VALUE_TYPE_DOUBLE, NVML_VALUE_TYPE_UNSIGNED_INT, NVML_VALUE_TYPE_UNSIGNED_LONG,
       NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, NVML_VALUE_TYPE_SIGNED_LONG_LONG, NVML_VALUE_TYPE_SIGNED_INT };
enum { NVML_ERROR_NOT_FOUND = 6 };
typedef union {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
} nvmlValue_t;
typedef struct {
    unsigned long long timeStamp;
    nvmlValue_t sampleValue;
} nvmlSample_t;
/* The sampling type of each fast metric, in the order of pt_nvml_fast_names. */
static const int fast_sampling[PT_NVML_FAST] = {NVML_GPU_UTILIZATION_SAMPLES, NVML_PROCESSOR_CLK_SAMPLES,
                                                 NVML_TOTAL_POWER_SAMPLES};
#define MAX_BUFFERED 1024
enum { GPM_METRICS_GET_VERSION = 1, GPM_SUPPORT_VERSION = 1 };
/* NVML_GPM_METRIC_* ids, in the order of pt_nvml_gpm_names. */
static const unsigned gpm_ids[PT_NVML_GPM] = {2, 3, 5, 10, 20, 21, 61, 60};

const char *const pt_nvml_fast_names[PT_NVML_FAST] = {"util", "sm_clock_mhz", "power_w"};
const char *const pt_nvml_slow_names[PT_NVML_SLOW] = {"mem_used_mb"};
const char *const pt_nvml_gpm_names[PT_NVML_GPM] = {"sm_active", "sm_occupancy", "tensor_active", "dram_bw_util",
                                                    "pcie_tx_mibps", "pcie_rx_mibps", "nvlink_tx_mibps",
                                                    "nvlink_rx_mibps"};

typedef struct nvml_api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*samples)(nvmlDevice_t, int, unsigned long long, int *, unsigned int *, nvmlSample_t *);
    /* GPM: optional (older drivers lack it) */
    nvmlReturn_t (*gpm_support)(nvmlDevice_t, nvmlGpmSupport_t *);
    nvmlReturn_t (*gpm_alloc)(nvmlGpmSample_t *);
    nvmlReturn_t (*gpm_free)(nvmlGpmSample_t);
    nvmlReturn_t (*gpm_sample)(nvmlDevice_t, nvmlGpmSample_t);
    nvmlReturn_t (*gpm_metrics)(gpm_metrics_get *);
} nvml_api;

struct pt_nvml {
    void *lib;
    nvml_api api;
    nvmlDevice_t device;
    int index;
    char name[96];
    bool gpm;
    nvmlGpmSample_t gpm_samples[2];
    int gpm_latest; /* index of the newest sample, -1 before the first */
    unsigned buffered;                       /* fast metrics read from the driver's buffer */
    unsigned long long last_seen[PT_NVML_FAST]; /* newest buffered sample read, epoch us */
    nvmlSample_t sample_buf[MAX_BUFFERED];
};

static bool load(pt_nvml *n, pt_error *err)
{
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        pt_error_set(err, "NVML is not available (libnvidia-ml.so.1 not found: no NVIDIA driver)");
        return false;
    }
#define SYM(field, name) *(void **)(&n->api.field) = dlsym(n->lib, name)
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(error_string, "nvmlErrorString");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
    SYM(by_uuid, "nvmlDeviceGetHandleByUUID");
    SYM(name, "nvmlDeviceGetName");
    SYM(utilization, "nvmlDeviceGetUtilizationRates");
    SYM(memory, "nvmlDeviceGetMemoryInfo");
    SYM(power, "nvmlDeviceGetPowerUsage");
    SYM(clock, "nvmlDeviceGetClockInfo");
    SYM(samples, "nvmlDeviceGetSamples");
    SYM(gpm_support, "nvmlGpmQueryDeviceSupport");
    SYM(gpm_alloc, "nvmlGpmSampleAlloc");
    SYM(gpm_free, "nvmlGpmSampleFree");
    SYM(gpm_sample, "nvmlGpmSampleGet");
    SYM(gpm_metrics, "nvmlGpmMetricsGet");
#undef SYM
    const nvml_api *a = &n->api;
    if (!a->init || !a->shutdown || !a->count || !a->by_index || !a->name || !a->utilization || !a->memory ||
        !a->power || !a->clock) {
        pt_error_set(err, "NVML is too old (a required function is missing)");
        return false;
    }
    return true;
}

static const char *nvml_error(const pt_nvml *n, nvmlReturn_t rc)
{
    return n->api.error_string ? n->api.error_string(rc) : "error";
}

static bool pick_device(pt_nvml *n, const char *uuid, int index, pt_error *err)
{
    nvmlReturn_t rc;
    if (uuid && uuid[0] && n->api.by_uuid) {
        char full[128];
        snprintf(full, sizeof full, "%s%s", strncmp(uuid, "GPU-", 4) == 0 ? "" : "GPU-", uuid);
        if (n->api.by_uuid(full, &n->device) == NVML_SUCCESS)
            return true;
    }
    unsigned int count = 0;
    if ((rc = n->api.count(&count)) != NVML_SUCCESS || count == 0) {
        pt_error_set(err, "NVML sees no GPU (%s)", rc ? nvml_error(n, rc) : "0 devices");
        return false;
    }
    n->index = index >= 0 ? index % (int)count : 0;
    if ((rc = n->api.by_index((unsigned)n->index, &n->device)) != NVML_SUCCESS) {
        pt_error_set(err, "NVML cannot open GPU %d: %s", n->index, nvml_error(n, rc));
        return false;
    }
    return true;
}

static void setup_gpm(pt_nvml *n)
{
    const nvml_api *a = &n->api;
    n->gpm_latest = -1;
    if (!a->gpm_support || !a->gpm_alloc || !a->gpm_free || !a->gpm_sample || !a->gpm_metrics)
        return;
    nvmlGpmSupport_t support = {GPM_SUPPORT_VERSION, 0};
    if (a->gpm_support(n->device, &support) != NVML_SUCCESS || !support.isSupportedDevice)
        return;
    if (a->gpm_alloc(&n->gpm_samples[0]) != NVML_SUCCESS)
        return;
    if (a->gpm_alloc(&n->gpm_samples[1]) != NVML_SUCCESS) {
        a->gpm_free(n->gpm_samples[0]);
        return;
    }
    n->gpm = true;
}

/* A metric is buffered when the driver answers for its sample type (NOT_FOUND only
 * means no sample is newer than the time asked) and stamps its samples with the wall
 * clock in microseconds, as NVML documents; a buffer whose newest sample is more than a
 * minute away from now is not trusted, and that metric is polled instead. */
static void setup_buffered(pt_nvml *n)
{
    if (!n->api.samples)
        return;
    for (int i = 0; i < PT_NVML_FAST; i++) {
        int type = 0;
        unsigned int count = MAX_BUFFERED;
        nvmlReturn_t rc = n->api.samples(n->device, fast_sampling[i], 0, &type, &count, n->sample_buf);
        if (rc == NVML_ERROR_NOT_FOUND) {
            n->buffered |= 1u << i;
            continue;
        }
        if (rc != NVML_SUCCESS)
            continue;
        unsigned long long newest = 0;
        for (unsigned k = 0; k < PT_MIN(count, (unsigned)MAX_BUFFERED); k++)
            newest = PT_MAX(newest, n->sample_buf[k].timeStamp);
        long long now_us = (long long)(pt_wall_ns() / 1000);
        if (count == 0 || llabs((long long)newest - now_us) < 60LL * 1000000)
            n->buffered |= 1u << i;
    }
}

pt_nvml *pt_nvml_open(const char *uuid, int index, pt_error *err)
{
    pt_nvml *n = calloc(1, sizeof *n);
    if (!n) {
        pt_error_set(err, "out of memory");
        return NULL;
    }
    n->index = index;
    if (!load(n, err)) {
        if (n->lib)
            dlclose(n->lib);
        free(n);
        return NULL;
    }
    nvmlReturn_t rc = n->api.init();
    if (rc != NVML_SUCCESS) {
        pt_error_set(err, "NVML failed to start: %s", nvml_error(n, rc));
        dlclose(n->lib);
        free(n);
        return NULL;
    }
    if (!pick_device(n, uuid, index, err)) {
        n->api.shutdown();
        dlclose(n->lib);
        free(n);
        return NULL;
    }
    if (n->api.name(n->device, n->name, sizeof n->name) != NVML_SUCCESS)
        snprintf(n->name, sizeof n->name, "NVIDIA GPU");
    setup_gpm(n);
    setup_buffered(n);
    return n;
}

void pt_nvml_close(pt_nvml *n)
{
    if (!n)
        return;
    if (n->gpm) {
        n->api.gpm_free(n->gpm_samples[0]);
        n->api.gpm_free(n->gpm_samples[1]);
    }
    n->api.shutdown();
    dlclose(n->lib);
    free(n);
}

const char *pt_nvml_device_name(const pt_nvml *n) { return n->name; }
int pt_nvml_device_index(const pt_nvml *n) { return n->index; }
bool pt_nvml_has_gpm(const pt_nvml *n) { return n->gpm; }

unsigned pt_nvml_buffered(const pt_nvml *n) { return n->buffered; }

static double sample_value(int type, nvmlValue_t v)
{
    switch (type) {
    case NVML_VALUE_TYPE_DOUBLE: return v.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT: return v.uiVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: return (double)v.ulVal;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return (double)v.ullVal;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: return (double)v.sllVal;
    case NVML_VALUE_TYPE_SIGNED_INT: return v.siVal;
    default: return 0;
    }
}

unsigned pt_nvml_read_buffered(pt_nvml *n, uint64_t since_epoch_us,
                               void (*fn)(void *ctx, int metric, uint64_t epoch_us, double value), void *ctx)
{
    unsigned total = 0;
    for (int i = 0; i < PT_NVML_FAST; i++) {
        if (!(n->buffered & (1u << i)))
            continue;
        unsigned long long since = PT_MAX(n->last_seen[i], (unsigned long long)since_epoch_us);
        int type = 0;
        unsigned int count = MAX_BUFFERED;
        if (n->api.samples(n->device, fast_sampling[i], since, &type, &count, n->sample_buf) != NVML_SUCCESS)
            continue;
        for (unsigned k = 0; k < PT_MIN(count, (unsigned)MAX_BUFFERED); k++) {
            const nvmlSample_t *smp = &n->sample_buf[k];
            if (smp->timeStamp <= since)
                continue;
            double value = sample_value(type, smp->sampleValue);
            fn(ctx, i, smp->timeStamp, i == 2 ? value / 1000.0 : value); /* power: mW -> W */
            n->last_seen[i] = PT_MAX(n->last_seen[i], smp->timeStamp);
            total++;
        }
    }
    return total;
}

unsigned pt_nvml_read_fast(pt_nvml *n, unsigned which, double out[PT_NVML_FAST])
{
    unsigned valid = 0;
    nvmlUtilization_t u;
    unsigned int v;
    if ((which & 1u << 0) && n->api.utilization(n->device, &u) == NVML_SUCCESS)
        out[0] = u.gpu, valid |= 1u << 0;
    if ((which & 1u << 1) && n->api.clock(n->device, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
        out[1] = v, valid |= 1u << 1;
    if ((which & 1u << 2) && n->api.power(n->device, &v) == NVML_SUCCESS)
        out[2] = v / 1000.0, valid |= 1u << 2; /* mW -> W */
    return valid;
}

unsigned pt_nvml_read_slow(pt_nvml *n, double out[PT_NVML_SLOW])
{
    nvmlMemory_t m;
    if (n->api.memory(n->device, &m) != NVML_SUCCESS)
        return 0;
    out[0] = (double)m.used / (1024.0 * 1024.0);
    return 1;
}

unsigned pt_nvml_read_gpm(pt_nvml *n, double out[PT_NVML_GPM])
{
    if (!n->gpm)
        return 0;
    int next = n->gpm_latest < 0 ? 0 : 1 - n->gpm_latest;
    if (n->api.gpm_sample(n->device, n->gpm_samples[next]) != NVML_SUCCESS)
        return 0;
    int previous = n->gpm_latest;
    n->gpm_latest = next;
    if (previous < 0)
        return 0;
    gpm_metrics_get get;
    memset(&get, 0, sizeof get);
    get.version = GPM_METRICS_GET_VERSION;
    get.numMetrics = PT_NVML_GPM;
    get.sample1 = n->gpm_samples[previous];
    get.sample2 = n->gpm_samples[next];
    for (unsigned i = 0; i < PT_NVML_GPM; i++)
        get.metrics[i].metricId = gpm_ids[i];
    if (n->api.gpm_metrics(&get) != NVML_SUCCESS)
        return 0;
    unsigned valid = 0;
    for (unsigned i = 0; i < PT_NVML_GPM; i++)
        if (get.metrics[i].nvmlReturn == NVML_SUCCESS) {
            out[i] = get.metrics[i].value;
            valid |= 1u << i;
        }
    return valid;
}
