/* fuzz_common.h -- what the fuzz targets share.
 *
 * Every target is a libFuzzer entry point, LLVMFuzzerTestOneInput(data, size), that must
 * return normally for every input: a crash, a sanitizer report, a leak, a hang or an
 * allocation beyond the fuzzer's limit is a bug. The same sources link either against
 * libFuzzer (scripts/fuzz.sh, clang, build-fuzz) or against replay_main.c, which runs
 * saved inputs once each (the regression tests, any compiler, any tree).
 *
 * Beyond "does not crash", each target checks properties that must hold for every input
 * (a re-encoded message decodes to the same bytes, escaped JSON holds no raw '<'), and
 * pushes what it parsed one stage further down the real pipeline (trace -> summary ->
 * diagnosis -> report text), because a parser that accepts hostile values only moves the
 * crash into the code that trusts them. PT_FUZZ_CHECK aborts, so a broken property is a
 * crash libFuzzer saves like any other. */
#ifndef PT_FUZZ_COMMON_H
#define PT_FUZZ_COMMON_H

#include "summarize/summary.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PT_FUZZ_CHECK(cond, what)                                                  \
    do {                                                                           \
        if (!(cond))                                                               \
            pt_fuzz_fail(__FILE__, __LINE__, what);                                \
    } while (0)

_Noreturn void pt_fuzz_fail(const char *file, int line, const char *what);

/* For a target's own checkers that walk every byte (a UTF-8 validator): without coverage
 * instrumentation, which would only steer the fuzzer towards satisfying the checker
 * itself and cost a callback per comparison; what they check is unchanged. */
#if defined(__clang__) && __clang_major__ >= 13
#define PT_FUZZ_CHECKER __attribute__((no_sanitize("coverage")))
#else
#define PT_FUZZ_CHECKER
#endif

/* Puts data into an in-memory file (memfd, reused across calls) and returns a path that
 * opens it ("/proc/self/fd/N"): the readers take paths, and the library gains no
 * in-memory entry point only for the fuzzers. */
const char *pt_fuzz_file(const void *data, size_t size);

/* Reads path with pt_trace_read into a summarizer, as `perftracker summarize` does.
 * NULL when the reader or the summarizer refused the input (its message must then be a
 * non-empty sentence: checked). */
pt_worker_summary *pt_fuzz_summarize(const char *path, const char *file_name);

/* Takes over s and pushes it through everything downstream of the summary: the file
 * encoding (re-encoding a decoded summary must give the same bytes; an invalid one, as
 * pt_summary_check judges, must not decode), its JSON form and, when diagnose is set, the
 * diagnosis beside a healthy synthetic worker (which refuses an invalid one and analyses
 * the other), and the report's text. Frees s. */
void pt_fuzz_exercise_summary(pt_worker_summary *s, bool diagnose);

/* True for one input in one_in, always the same ones (a hash of the bytes), so a saved
 * input replays the same way. The trace targets diagnose what they summarized only for
 * those: the diagnosis of arbitrary summaries has its own targets (summary, protocol),
 * and running it after every trace input took three quarters of each execution, which
 * kept the parsers from their 10 M executions. */
bool pt_fuzz_one_in(const uint8_t *data, size_t size, unsigned one_in);

/* Set by replay_main.c: a replayed input (the seeds and every saved crasher, in the
 * regression tests) takes every path, pt_fuzz_one_in is true for all of them. */
extern bool pt_fuzz_replaying;

/* How often a trace target's summary goes on through the diagnosis. */
#define PT_FUZZ_DIAGNOSE_ONE_IN 16

#endif
