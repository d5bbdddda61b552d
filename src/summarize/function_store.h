/* function_store.h -- the functions of many workers in columns: one column per function
 * (class + name), its values indexed by the worker's slot. A job's workers run the same
 * few dozen functions, so a record per worker per function (pt_function_summary, 120
 * bytes, and an allocation for its per-step values) is most of what a decoded job costs:
 * 100 000 workers x 55 functions were 830 MB, twice the summaries on disk. A column keeps
 * each value in 4 bytes while it fits (8 once one does not) and nothing for a value that
 * is 0 or absent in a whole block of workers, which is ~30 bytes per record. What a
 * function costs follows the workers that have it: a function one worker names is a few
 * hundred bytes (its column, its key, a block with room for one), not a block for 1024.
 *
 * Writers (pt_fn_store_adopt, pt_fn_store_add) take the store's lock; readers
 * (pt_fn_store_get, pt_fn_store_function) do not: they run once the writers are done
 * (analyze decodes every file, then analyses). Values read back are exactly the ones
 * stored, so an analysis over the store writes the report it writes over the records. */
#ifndef PT_SUMMARIZE_FUNCTION_STORE_H
#define PT_SUMMARIZE_FUNCTION_STORE_H

#include "summarize/summary.h"

#include <stdint.h>

typedef struct pt_fn_store pt_fn_store;
typedef struct pt_fn_column pt_fn_column;

pt_fn_store *pt_fn_store_new(void);
void pt_fn_store_free(pt_fn_store *st);

/* Slots [0, world) are kept for ranks: the first summary adopted for a rank below world
 * takes the slot of its number, any other the next slot past them. A job's summaries
 * arrive (and are decoded) in no useful order; the analysis walks its workers in rank
 * order, column by column, and with slots in arrival order every worker's value was in
 * another block (a cache miss per worker and column at 100 000 workers). Only for an
 * empty store (no slot yet); the expectation ends when the store empties. */
void pt_fn_store_expect_ranks(pt_fn_store *st, size_t world);
/* Moves s's functions (checked: pt_summary_check passed) into the store: s->functions is
 * freed and s->fn_store, s->fn_slot say where they are; s->function_count stays. Their
 * strings must outlive the store (the decoder's shared pool). */
void pt_fn_store_adopt(pt_fn_store *st, pt_worker_summary *s);
/* The same where adopting s may allocate at most limit bytes (a file's memory share):
 * *cost is what it may allocate, at most (new columns and keys, blocks made or grown,
 * arrays widened, malloc's own bytes beside each), worked out before anything is; above
 * limit, false and nothing changed (s keeps its records). */
bool pt_fn_store_adopt_within(pt_fn_store *st, pt_worker_summary *s, size_t limit, size_t *cost);
/* Copies the functions of s (records, or a slot of another store) into the store and
 * returns their slot; pt_fn_store_release_slot gives it back. s's strings must outlive
 * the slot. */
uint32_t pt_fn_store_add(pt_fn_store *st, const pt_worker_summary *s);
/* What the store holds on the heap (its columns, keys, blocks and their arrays), as
 * counted when allocated: what the summaries in it keep. */
size_t pt_fn_store_bytes(pt_fn_store *st);
/* A slot is no longer needed (its summary is freed); once none is, the store drops its
 * columns and starts again empty. */
void pt_fn_store_release_slot(pt_fn_store *st, uint32_t slot);

/* The column of a slot's i-th function (i < the count its summary had), in the order its
 * summary listed them. */
const pt_fn_column *pt_fn_store_function(const pt_fn_store *st, uint32_t slot, size_t i);
pt_class pt_fn_column_class(const pt_fn_column *col);
const char *pt_fn_column_name(const pt_fn_column *col);
/* The record of col at slot, or NULL where the slot has none. With steps (room for
 * PT_SUMMARY_MAX_STEP_VALUES), the per-step values go there and out->step_exposed_ns
 * points to them; without, out->step_exposed_ns is NULL (step_count still says how many). */
const pt_function_summary *pt_fn_store_get(const pt_fn_column *col, uint32_t slot, pt_function_summary *out,
                                           int64_t *steps);

/* One value of col's record at slot, for the analysis's loops over workers (cheaper than
 * the whole record): false, and 0, where the slot has none. The count is its bits. */
typedef enum pt_fn_field { PT_FN_COUNT, PT_FN_TOTAL, PT_FN_EXPOSED, PT_FN_MEDIAN } pt_fn_field;
bool pt_fn_store_value(const pt_fn_column *col, uint32_t slot, pt_fn_field field, int64_t *value);

/* A summary's i-th function, wherever it lives: its record, or (in a store) as
 * pt_fn_store_get fills it. */
const pt_function_summary *pt_summary_function(const pt_worker_summary *s, size_t i, pt_function_summary *out,
                                               int64_t *steps);

#endif
