/* job_env.h -- what the environment says about the distributed job: who this process is,
 * where the coordinator lives, and the control plane's tunables (PERFTRACKER_*).
 *
 * The same reader serves a worker (which needs its rank) and the CLI in the master's
 * shell (which only needs MASTER_ADDR/MASTER_PORT/WORLD_SIZE), so both derive the
 * coordinator's address the same way. Launchers covered: torchrun / torch.distributed
 * (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), Kubernetes PyTorchJob
 * (the same plus PET_NODE_RANK), Slurm srun (SLURM_PROCID, ...), Open MPI. */
#ifndef PT_CONTROL_JOB_ENV_H
#define PT_CONTROL_JOB_ENV_H

#include "util/common.h"

#include <stdbool.h>
#include <stdint.h>

#define PT_HOST_MAX 256

typedef struct pt_job_env {
    int32_t rank;              /* -1 when the environment does not say */
    int32_t local_rank;
    int32_t world_size;
    int32_t local_world_size;
    int32_t node_rank;
    char master_addr[PT_HOST_MAX];
    int32_t master_port;       /* -1 when unset */
    char coordinator_host[PT_HOST_MAX]; /* PERFTRACKER_COORDINATOR's host, else MASTER_ADDR */
    uint16_t coordinator_port; /* PERFTRACKER_PORT, else MASTER_PORT + 1 */
    char host[PT_HOST_MAX];    /* this machine's name */
    int64_t pid;
} pt_job_env;

/* Reads the environment. need_rank: a worker (RANK and WORLD_SIZE required) rather than
 * the CLI. Returns 0, 1 when the environment describes no job (err says what is
 * missing), -1 when it is malformed (err says why). */
int pt_job_env_read(pt_job_env *env, bool need_rank, pt_error *err);

/* True when every worker runs on this node, so the coordinator can stay on loopback. */
bool pt_job_env_single_node(const pt_job_env *env);

/* An integer PERFTRACKER_* setting (or any variable), clamped to [lo, hi]; fallback when
 * unset or unparsable. */
int64_t pt_env_int(const char *name, int64_t fallback, int64_t lo, int64_t hi);
/* A variable's value or fallback when unset or empty. */
const char *pt_env_str(const char *name, const char *fallback);

/* The seed's worker name: "<host>_<local_rank>_<pid>" + suffix (".json", ".ptrace"). */
void pt_worker_file_name(char *dst, size_t cap, const char *host, int32_t local_rank, int64_t pid,
                         const char *suffix);

#endif
