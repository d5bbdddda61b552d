/* job_env.c -- read the job's identity and the control plane's settings from the
 * environment. Every lookup tries the launchers' variables in a fixed order (torchrun
 * first, then Kubernetes, Slurm, Open MPI), so a process reads the same answer wherever
 * it runs; nothing here touches the network. */
#define _POSIX_C_SOURCE 200809L
#include "control/job_env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *pt_env_str(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

static bool parse_int(const char *text, int64_t *out)
{
    if (!text || !*text)
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text)
        return false;
    while (*end == ' ')
        end++;
    if (*end && *end != '(') /* Slurm writes "4(x2)" for per-node counts */
        return false;
    *out = v;
    return true;
}

int64_t pt_env_int(const char *name, int64_t fallback, int64_t lo, int64_t hi)
{
    int64_t v;
    if (!parse_int(getenv(name), &v))
        return fallback;
    return v < lo ? lo : v > hi ? hi : v;
}

/* The first of names that is set and parses, or -1. */
static int32_t first_int(const char *const *names)
{
    for (; *names; names++) {
        int64_t v;
        if (parse_int(getenv(*names), &v) && v >= 0 && v <= INT32_MAX)
            return (int32_t)v;
    }
    return -1;
}

static int split_host_port(const char *spec, char *host, size_t cap, uint16_t *port, pt_error *err)
{
    const char *colon = strrchr(spec, ':');
    int64_t p;
    if (!colon || colon == spec || !parse_int(colon + 1, &p) || p <= 0 || p > 65535) {
        pt_error_set(err, "PERFTRACKER_COORDINATOR='%s' is not host:port", spec);
        return -1;
    }
    size_t n = (size_t)(colon - spec);
    if (spec[0] == '[' && n >= 2 && spec[n - 1] == ']') /* [ipv6]:port */
        spec++, n -= 2;
    if (n >= cap) {
        pt_error_set(err, "PERFTRACKER_COORDINATOR host is too long");
        return -1;
    }
    memcpy(host, spec, n);
    host[n] = '\0';
    *port = (uint16_t)p;
    return 0;
}

static void read_identity(pt_job_env *env)
{
    static const char *const rank[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
    static const char *const world[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    static const char *const local[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "MPI_LOCALRANKID", NULL};
    static const char *const local_world[] = {"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE",
                                              "OMPI_COMM_WORLD_LOCAL_SIZE", NULL};
    static const char *const node[] = {"GROUP_RANK", "NODE_RANK", "PET_NODE_RANK", "SLURM_NODEID",
                                       "OMPI_COMM_WORLD_NODE_RANK", NULL};
    env->rank = first_int(rank);
    env->world_size = first_int(world);
    env->local_rank = first_int(local);
    env->local_world_size = first_int(local_world);
    env->node_rank = first_int(node);
    if (env->local_rank < 0 && env->rank >= 0 && env->local_world_size > 0)
        env->local_rank = env->rank % env->local_world_size;
    if (env->node_rank < 0 && env->rank >= 0 && env->local_world_size > 0)
        env->node_rank = env->rank / env->local_world_size;
}

static int read_coordinator(pt_job_env *env, pt_error *err)
{
    const char *addr = pt_env_str("MASTER_ADDR", NULL);
    int64_t port = -1;
    if (addr && strlen(addr) >= sizeof env->master_addr) {
        pt_error_set(err, "MASTER_ADDR is too long");
        return -1;
    }
    if (addr)
        strcpy(env->master_addr, addr);
    if (parse_int(getenv("MASTER_PORT"), &port) && port > 0 && port <= 65535)
        env->master_port = (int32_t)port;

    const char *spec = pt_env_str("PERFTRACKER_COORDINATOR", NULL);
    if (spec)
        return split_host_port(spec, env->coordinator_host, sizeof env->coordinator_host,
                               &env->coordinator_port, err);
    if (!addr || env->master_port < 0) {
        pt_error_set(err, "no MASTER_ADDR/MASTER_PORT (or PERFTRACKER_COORDINATOR) in the environment");
        return 1;
    }
    strcpy(env->coordinator_host, addr);
    /* One port above the rendezvous port: it is the job's own (torch's TCPStore holds only
     * MASTER_PORT), every process computes it without talking to anyone, and
     * PERFTRACKER_PORT moves it when that port is taken. */
    int64_t derived = env->master_port < 65535 ? env->master_port + 1 : env->master_port - 1;
    env->coordinator_port = (uint16_t)pt_env_int("PERFTRACKER_PORT", derived, 1, 65535);
    return 0;
}

int pt_job_env_read(pt_job_env *env, bool need_rank, pt_error *err)
{
    memset(env, 0, sizeof *env);
    env->master_port = -1;
    env->pid = (int64_t)getpid();
    if (gethostname(env->host, sizeof env->host) != 0 || !env->host[0])
        strcpy(env->host, "localhost");
    env->host[sizeof env->host - 1] = '\0';
    read_identity(env);
    int rc = read_coordinator(env, err);
    if (rc != 0)
        return rc;
    if (need_rank && (env->rank < 0 || env->world_size <= 0)) {
        pt_error_set(err, "no RANK/WORLD_SIZE in the environment");
        return 1;
    }
    if (need_rank && env->rank >= env->world_size) {
        pt_error_set(err, "RANK %d is not below WORLD_SIZE %d", env->rank, env->world_size);
        return -1;
    }
    return 0;
}

bool pt_job_env_single_node(const pt_job_env *env)
{
    return env->world_size > 0 && env->local_world_size == env->world_size;
}

void pt_worker_file_name(char *dst, size_t cap, const char *host, int32_t local_rank, int64_t pid,
                         const char *suffix)
{
    char safe_host[PT_HOST_MAX];
    size_t n = 0;
    for (const char *p = host ? host : ""; *p && n + 1 < sizeof safe_host; p++)
        safe_host[n++] = (*p == '/' || *p == '\\') ? '_' : *p; /* a name, never a path */
    safe_host[n] = '\0';
    snprintf(dst, cap, "%s_%d_%lld%s", n ? safe_host : "unknown", (int)local_rank, (long long)pid,
             suffix ? suffix : "");
}
