/* summary_io.h -- the per-worker summary file (format documented in docs/summary-format.md).
 *
 * This is what travels from every worker to the central analysis, so it is small
 * (varints, a string table, zstd: tens of KB) and exact (integers stay integers,
 * doubles travel as their bits), which is why analysing summaries gives byte-for-byte
 * the report that analysing the traces gives. The reader trusts nothing: every length
 * and count is checked against what is left and against fixed limits, and what it
 * decoded must keep every rule of pt_summary_check (summary.h), or it is refused with
 * the rule in err. */
#ifndef PT_SUMMARIZE_SUMMARY_IO_H
#define PT_SUMMARIZE_SUMMARY_IO_H

#include "summarize/summary.h"
#include "util/buf.h"

#define PT_SUMMARY_MAGIC "PTSUMRY\n"
#define PT_SUMMARY_VERSION 6

/* Appends the encoded (compressed) summary to out. */
void pt_summary_encode(const pt_worker_summary *s, pt_buf *out);
pt_worker_summary *pt_summary_decode(const void *data, size_t len, pt_error *err);

int pt_summary_write_file(const pt_worker_summary *s, const char *path, pt_error *err);
pt_worker_summary *pt_summary_read_file(const char *path, pt_error *err);
/* The same for size bytes at offset in the file open at fd (a member of an archive,
 * util/tar.h), under the same bound on a summary's size. Thread-safe on a shared fd. */
pt_worker_summary *pt_summary_read_at(int fd, uint64_t offset, uint64_t size, pt_error *err);
/* From now on, summaries decoded in this process keep their functions' names, groups
 * and callers in one shared pool (each distinct string once, for the life of the
 * process) instead of a copy each: a job's 100 000 workers name the same few hundred
 * functions. Their function records move to one column store (function_store.h:
 * s->functions is NULL, s->fn_store holds them), a quarter of their size as records.
 * Thread-safe; for a process that decodes a whole job at once, then analyses it
 * (analyze): the store is read without its lock. */
void pt_summary_share_names(void);
/* With names shared, before the first summary is decoded: the job's ranks are [0, world),
 * so the store can keep each rank's records where a walk in rank order reads them in
 * order (pt_fn_store_expect_ranks). Without shared names, or once a summary is in the
 * store: nothing. */
void pt_summary_expect_ranks(size_t world);
/* What the summaries decoded so far keep in the shared pool and the store (their names
 * and functions), which outlives the files they were read from; 0 without shared names. */
size_t pt_summary_kept_bytes(void);
/* With names shared: s's collective calls' op and dtype, its own strings (hang state
 * parsed outside the decoder), become the pool's, so s can join a pooled summary, which
 * never frees them. Without: nothing changes. */
void pt_summary_pool_call_names(pt_worker_summary *s);
/* True when the first bytes are a summary's magic. */
bool pt_summary_sniff(const void *head, size_t n);

#endif
