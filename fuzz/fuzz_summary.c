/* fuzz_summary.c -- the summary reader (pt_summary_decode, src/summarize/summary_io.c).
 *
 * Summaries arrive from every worker, over the network from agents that hold only the
 * weak agent key (docs/control-plane.md), so the decoder and everything that trusts its
 * output must survive any bytes. Two kinds of input:
 *   - a whole .ptsum file (starts with the magic): read the way `perftracker analyze`
 *     reads one (pt_load_worker on a path), which also covers the header checks;
 *   - anything else is taken as a decompressed payload and wrapped in a valid header and
 *     zstd frame here, so mutations reach the field decoder instead of dying in zstd.
 * A decoded summary goes on through re-encoding, JSON, diagnosis and report text. */
#include "fuzz_common.h"

#include "summarize/summarize.h"
#include "summarize/summary_io.h"
#include "util/buf.h"

#include <string.h>
#include <zstd.h>

static void wrap_payload(const uint8_t *payload, size_t size, pt_buf *out)
{
    unsigned char header[24] = PT_SUMMARY_MAGIC;
    header[8] = PT_SUMMARY_VERSION;
    for (int i = 0; i < 8; i++)
        header[16 + i] = (unsigned char)((uint64_t)size >> (8 * i));
    pt_buf_append(out, header, sizeof header);
    size_t bound = ZSTD_compressBound(size);
    pt_buf_reserve(out, bound);
    size_t n = ZSTD_compress(out->data + out->len, bound, payload, size, 1);
    PT_FUZZ_CHECK(!ZSTD_isError(n), "zstd compression of a payload");
    out->len += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_error err = {{0}};
    pt_worker_summary *s;
    if (pt_summary_sniff(data, size)) {
        s = pt_load_worker(pt_fuzz_file(data, size), NULL, &err);
    } else {
        pt_buf file = PT_BUF_INIT;
        wrap_payload(data, size, &file);
        s = pt_summary_decode(file.data, file.len, &err);
        pt_buf_free(&file);
    }
    PT_FUZZ_CHECK(s || err.message[0], "a summary was refused without a message");
    if (s)
        pt_fuzz_exercise_summary(s, true);
    return 0;
}
