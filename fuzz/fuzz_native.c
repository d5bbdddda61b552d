/* fuzz_native.c -- the collector's raw-trace reader (src/trace/native.c), end to end.
 *
 * A raw trace is one zstd frame with a content checksum, so mutating compressed bytes
 * would only ever test the checksum. The seeds are therefore the decompressed streams
 * (pt_input takes plain bytes as readily as zstd, by magic), which puts every mutation
 * into the section parser; compressed seeds keep the zstd path covered. What the reader
 * accepts is summarized, and one input in 16 diagnosed, like any worker (fuzz_common.c). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_worker_summary *s = pt_fuzz_summarize(pt_fuzz_file(data, size), "node0_3_4711.ptrace");
    if (s)
        pt_fuzz_exercise_summary(s, pt_fuzz_one_in(data, size, PT_FUZZ_DIAGNOSE_ONE_IN));
    return 0;
}
