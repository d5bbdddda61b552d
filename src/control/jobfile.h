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
 * The runtime directory is PERFTRACKER_KEY_DIR or /tmp/perftracker-<uid> (or, when
 * another user squatted that name, a private fallback beside it), created 0700 and used
 * only while it is this user's private directory. The CLI trusts only job files of its
 * own user found there: a job file says where to connect and which key to prove, so one
 * planted by another user would make the CLI talk to that user's coordinator. Writing
 * happens inside the training process: bounded buffers, no exits, failures come back as
 * -1. */
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

/* Where this user's job files and control keys live, chosen the same way by rank 0's
 * coordinator (which writes them) and the CLI (which reads them):
 *   - PERFTRACKER_KEY_DIR, when set, as given (and used only while it is private);
 *   - else /tmp/perftracker-<euid>, unless it exists and is not this user's private
 *     directory (another user created it first: a squat, a symlink, mode 0777) -- then
 *     the first of this user's private fallbacks /tmp/perftracker-<euid>.XXXXXX, or a
 *     fresh one (mkdtemp) when `create`. Another user can create neither a directory
 *     owned by this user nor guess a mkdtemp name in advance, so a squat cannot stop a
 *     job from registering or make the CLI read someone else's files.
 * note (NULL allowed) receives one sentence naming what was wrong with the default (the
 * directory, its owner, its mode) and where the files go instead; "" when the default
 * is used. */
void pt_runtime_dir_choose(char *dst, size_t cap, bool create, char *note, size_t note_cap);
/* pt_runtime_dir_choose(create = true), no note: the directory to publish in. */
void pt_runtime_dir(char *dst, size_t cap);
/* The note above alone (rank 0 logs it); false when there is nothing to say. */
bool pt_runtime_dir_note(char *note, size_t cap);

/* Every directory a job of this user may have registered in (PERFTRACKER_KEY_DIR alone
 * when set; else the default, when private, and each private fallback), for the CLI. */
#define PT_RUNTIME_DIRS_MAX 8
typedef struct pt_runtime_dirs {
    size_t count;
    char dir[PT_RUNTIME_DIRS_MAX][PT_RUNTIME_PATH_MAX];
    char shown[PT_RUNTIME_PATH_MAX];     /* how messages name the place ("a or b") */
    char note[PT_RUNTIME_PATH_MAX];      /* why the default is not among them, or "" */
} pt_runtime_dirs;
void pt_runtime_dirs_to_read(pt_runtime_dirs *out);

/* Creates dir (0700) if needed and checks that it is this user's private directory: a
 * /tmp path someone else created first must not receive keys. 0 or -1 (err names the
 * directory, its owner and its mode). */
int pt_runtime_dir_ensure(const char *dir, pt_error *err);
/* Whether path (not followed if a symlink) is a directory of this user's that nobody
 * else may enter; when not, why says what it is instead (owner, mode), or is "" when the
 * path does not exist. */
bool pt_runtime_dir_is_private(const char *path, char *why, size_t cap);

/* "uid 1001 (mallory)", or "uid 1001" for a uid without a name. */
void pt_user_describe(uint32_t uid, char *dst, size_t cap);
/* The user's name; false (dst = the number) when it has none. */
bool pt_user_name(uint32_t uid, char *dst, size_t cap);

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
/* Parses a job file, trusting it only as far as it deserves: opened without following a
 * symlink or blocking on a FIFO, it must be a regular file of at most 8 KB that belongs
 * to this user and nobody else may write, and every value must be in range (ports,
 * pid, world size up to PT_MAX_WORLD_SIZE). 0; -1 when it is not one (err says why);
 * -2 when it belongs to another user (r->uid says whom; nothing else is read). */
int pt_job_file_read(const char *path, pt_job_record *r, pt_error *err);
/* The same for name inside an open directory (dir_fd; dir for r->file and messages). */
int pt_job_file_read_at(int dir_fd, const char *dir, const char *name, pt_job_record *r, pt_error *err);

/* Whether the process that wrote r still runs. */
bool pt_job_record_alive(const pt_job_record *r);

/* Reads one line of /proc/PID/cmdline into dst, arguments joined by spaces and control
 * characters replaced, for people to recognise a process. "" when unreadable. */
void pt_process_command(int64_t pid, char *dst, size_t cap);
/* When pid started, in clock ticks after boot (/proc/PID/stat's field 22); 0 when unknown. */
uint64_t pt_process_start_ticks(int64_t pid);

#endif
