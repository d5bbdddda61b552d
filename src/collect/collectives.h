/* collectives.h -- the always-on record of this process's collectives, per process group:
 * a sequence number, the operation, the element count and dtype, and how far each call
 * got (entered, issued, completed, failed), for the last PT_COLL_RING calls of each group.
 *
 * Who writes: the wrappers python/perftracker/collectives.py puts around the
 * torch.distributed calls (and, on torch 2.x with NCCL, what torch's Flight Recorder
 * says, fed in at a hang report), on whatever thread calls them. Who reads: the agent
 * thread, when a hang report asks where this worker is (pt_coll_snapshot), without the
 * GIL and without a lock: each ring entry is a small seqlock of atomic fields, so a
 * reader never blocks a writer and retries (or skips) an entry written meanwhile.
 *
 * Cost, per call: one atomic add, a clock read and a handful of relaxed stores on enter,
 * a few on leave; no allocation, no syscall, no lock (bench/collector measures it with
 * the Python wrapper around it). Memory is fixed: PT_COLL_MAX_GROUPS groups of
 * PT_COLL_RING entries (~60 KB). A group past the table, or a name or rank list past its
 * bounds, is simply not recorded.
 *
 * The snapshot is text, one record a line, the contract the control plane carries to the
 * analysis (docs/control-plane.md, "Hang reports"; parsed by src/summarize/hang_state.c):
 *   group <TAB> name <TAB> backend <TAB> size <TAB> ranks        ranks: "0-3,8,16-56/8"
 *   call <TAB> seq <TAB> op <TAB> count <TAB> dtype <TAB> state <TAB> age_us [<TAB> error]
 * Calls follow their group, oldest first. */
#ifndef PT_COLLECT_COLLECTIVES_H
#define PT_COLLECT_COLLECTIVES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PT_COLL_MAX_GROUPS 64
#define PT_COLL_RING 16
#define PT_COLL_NAME_MAX 64       /* a group's name and backend, bytes with the NUL */
#define PT_COLL_RANKS_MAX 512     /* a group's rank list in the run notation above */
#define PT_COLL_ERROR_MAX 256     /* a failed call's error text */

typedef enum pt_coll_state {
    PT_COLL_ENTERED = 1,   /* called; not returned */
    PT_COLL_ISSUED,        /* returned a handle (async_op, or NCCL's enqueue); not known done */
    PT_COLL_COMPLETED,
    PT_COLL_FAILED         /* raised (error text kept) */
} pt_coll_state;

/* Names of operations and dtypes, by index (the Python side passes indexes). */
extern const char *const pt_coll_op_names[];
extern const size_t pt_coll_op_count;
extern const char *const pt_coll_dtype_names[];   /* the last one is "other" */
extern const size_t pt_coll_dtype_count;
const char *pt_coll_state_name(int state);        /* "entered", ... */

/* The group called name (a process group's name, unique in the job), of the given
 * global ranks (sorted ascending). Registering a name again resets it when its ranks are
 * the same (a re-created group counts from 1 again) and replaces it otherwise. Returns
 * the group's index, or -1 (table full, bad name, or too many ranks to write down). */
int pt_coll_group(const char *name, const char *backend, const int32_t *ranks, size_t rank_count);
/* A call entering group g: returns its token (0 when not recorded). */
uint64_t pt_coll_enter(int group, int op, int64_t count, int dtype);
/* How the call of token ended (PT_COLL_ISSUED, _COMPLETED or _FAILED with error). A
 * token whose entry has been reused by later calls is ignored. */
void pt_coll_leave(uint64_t token, int state, const char *error);
/* The sequence number a token stands for. */
static inline uint64_t pt_coll_token_seq(uint64_t token)
{
    return token & ((UINT64_C(1) << 48) - 1);
}
/* Whether any call failed since the last pt_coll_take_failure (the agent polls it). */
bool pt_coll_take_failure(void);
/* Writes the snapshot text into buf (NUL-terminated, cut at a group's boundary when it
 * does not fit); now_ns is pt_now_ns(). Groups that `replaced` (snapshot text from a
 * better source: torch's Flight Recorder; may be NULL) holds are left out. Returns the
 * bytes written. Any thread, no lock. */
size_t pt_coll_snapshot(char *buf, size_t cap, int64_t now_ns, const char *replaced);
/* Forgets every group (a forked child; tests). Not safe against concurrent writers. */
void pt_coll_reset(void);

#endif
