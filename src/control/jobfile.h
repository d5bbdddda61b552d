/* jobfile.h -- how a running job tells the CLI where it is: one small file per job in
 * the user's runtime directory.
 *
 * Rank 0's coordinator writes <runtime dir>/job-<host>-<port>.info once it listens, next
 * to the control key file, and removes both when it stops. The CLI lists these files to
 * find the running jobs by itself (`perftracker jobs`, and the trigger when nothing else
 * names the job), so its shell needs no MASTER_ADDR/MASTER_PORT. A job that died without
 * cleaning up leaves its files behind; they are recognised as stale because the process
 * that wrote them is gone (pid and start time, so a reused pid does not fool it).
 *
 * The runtime directory is PERFTRACKER_KEY_DIR or /tmp/perftracker-<uid>, created 0700
 * and used only while it is this user's private directory. Writing happens inside the
 * training process: no allocation, bounded buffers, failures come back as -1. */
#ifndef PT_CONTROL_JOBFILE_H
#define PT_CONTROL_JOBFILE_H

#include "control/job_env.h"

#include <stdbool.h>
#include <stdint.h>

#define PT_RUNTIME_PATH_MAX 1400

typedef struct pt_job_record {
    char file[PT_RUNTIME_PATH_MAX];      /* the job file */
    uint32_t uid;                        /* its owner: the job's user */
    int64_t pid;                         /* rank 0's process, which hosts the coordinator */
    uint64_t start_ticks;                /* that process's start time (/proc/PID/stat), 0 if unknown */
    int64_t started;                     /* Unix seconds */
    int32_t world_size;
    char master_addr[PT_HOST_MAX];
    int32_t master_port;                 /* -1 when the job set none */
    char coordinator_host[PT_HOST_MAX];  /* the workers' name for the coordinator (MASTER_ADDR) */
    char connect_host[PT_HOST_MAX];      /* where a CLI on this machine connects */
    uint16_t port;
    char key_file[PT_RUNTIME_PATH_MAX];  /* the control key; "" when the job uses PERFTRACKER_SECRET */
    char command[256];                   /* rank 0's command line, for people */
} pt_job_record;

/* PERFTRACKER_KEY_DIR, else /tmp/perftracker-<euid>. */
void pt_runtime_dir(char *dst, size_t cap);
/* Creates dir (0700) if needed and checks that it is this user's private directory: a
 * /tmp path someone else created first must not receive keys. 0 or -1. */
int pt_runtime_dir_ensure(const char *dir, pt_error *err);

/* Writes a file only this user can read into the runtime directory (created if needed):
 * mkstemp (0600), then rename over path, so a reader never sees half of it. 0 or -1. */
int pt_runtime_write_private(const char *path, const char *text, size_t len, pt_error *err);

/* A host name as it appears in runtime file names: letters, digits, '.' and '-' kept,
 * everything else '_'. */
void pt_runtime_safe_host(const char *host, char *dst, size_t cap);

/* Fills the identity part of a record for this process (pid, start time, command line,
 * the job's MASTER_ADDR/MASTER_PORT and world size from env). */
void pt_job_record_for_self(pt_job_record *r, const pt_job_env *env);
/* Writes r's job file into the runtime directory (r->file receives its path). 0 or -1. */
int pt_job_file_write(pt_job_record *r, pt_error *err);
/* Parses a job file. 0, or -1 when it is not one (err says why). */
int pt_job_file_read(const char *path, pt_job_record *r, pt_error *err);

/* Whether the process that wrote r still runs. */
bool pt_job_record_alive(const pt_job_record *r);

/* Reads one line of /proc/PID/cmdline into dst, arguments joined by spaces and control
 * characters replaced, for people to recognise a process. "" when unreadable. */
void pt_process_command(int64_t pid, char *dst, size_t cap);

#endif
