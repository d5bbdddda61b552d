/* discover.h -- the CLI's side of finding a running job on this machine: the job files
 * rank 0's coordinator publishes (jobfile.h), and, to explain why a job is not there,
 * the processes whose environment says they are workers of a distributed job.
 *
 * `perftracker jobs` lists what this finds; the trigger uses it when nothing names the
 * job (one job: that one; several: --job or MASTER_ADDR/MASTER_PORT picks one). Job files
 * whose process is gone are stale: the listing removes those it owns and says so. */
#ifndef PT_CONTROL_DISCOVER_H
#define PT_CONTROL_DISCOVER_H

#include "control/jobfile.h"
#include "util/buf.h"

typedef struct pt_job_list {
    pt_job_record *jobs;        /* running jobs, oldest first */
    size_t count;
    pt_job_record *stale;       /* files of jobs no longer running */
    size_t stale_count;
    bool *stale_removed;        /* [stale_count]: its files were ours and are gone now */
    char dir[PT_RUNTIME_PATH_MAX]; /* the runtime directories read, as messages name them */
    char *notes;                /* lines: what was ignored and why (a squatted directory,
                                   other users' job files), "" when nothing */
} pt_job_list;

/* Reads this user's runtime directories (pt_runtime_dirs_to_read) and trusts only job
 * files of this user there -- root included: another user's job file would make the CLI
 * connect to, and believe, whatever that user runs. Other users' job files it can see
 * are named in notes, never read. Never fails: unreadable files are skipped (and noted). */
void pt_jobs_list(pt_job_list *out);
void pt_job_list_free(pt_job_list *l);

/* The job a --job ID names: its MASTER_PORT, its coordinator's port or rank 0's pid. */
const pt_job_record *pt_jobs_find(const pt_job_list *l, const char *id);
/* The job whose MASTER_PORT or coordinator port the environment (pt_job_env) names. */
const pt_job_record *pt_jobs_match_env(const pt_job_list *l, const pt_job_env *env);

/* One line per running job ("ID  PID  WORKERS  COORDINATOR  STARTED  COMMAND"), for
 * `perftracker jobs` and for the trigger's "pick one" message. */
void pt_jobs_format(const pt_job_list *l, pt_buf *out);

/* A worker of a distributed job seen in /proc (only processes this user may read). */
typedef struct pt_job_process {
    int64_t pid;
    int32_t rank;
    int32_t master_port;        /* -1 when unset */
    bool has_collector;         /* perftracker's extension is loaded in it */
    bool starting;              /* without it, but young and not yet in its job's rendezvous
                                   (no socket on MASTER_PORT): it may still load it */
    int64_t age_s;              /* since it started; -1 when unknown */
    bool agent_disabled;        /* PERFTRACKER_AGENT=0 in its environment */
    bool registered;            /* a running job file is its rank 0's */
    uint32_t uid;               /* who runs it */
    char key_dir[PT_RUNTIME_PATH_MAX]; /* its PERFTRACKER_KEY_DIR, "" for the default */
    char command[256];
} pt_job_process;

/* One process per job (lowest rank seen), by MASTER_PORT. *out is allocated; returns
 * the count. l marks the ones whose job is registered. */
size_t pt_jobs_scan_processes(const pt_job_list *l, pt_job_process **out);

/* Lines (each ending in '\n') saying what was found instead of a running job: the
 * notes (a squatted directory, other users' job files), stale job files, and workers of jobs that run without the collector, without the control plane,
 * with another PERFTRACKER_KEY_DIR, run by another user, or with their rank 0 elsewhere. "" when nothing. */
void pt_jobs_explain(const pt_job_list *l, pt_buf *out);

#endif
