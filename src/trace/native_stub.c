/* native_stub.c -- placeholder until the collector's raw-trace reader lands (issue 3):
 * recognises nothing, so every file goes to the Kineto reader. */
#include "trace/reader.h"

static bool native_sniff(const unsigned char *head, size_t n)
{
    (void)head;
    (void)n;
    return false;
}

static int native_read(pt_input *in, pt_trace_sink *sink, pt_trace_meta *meta,
                       const pt_read_options *opts, pt_error *err)
{
    (void)in, (void)sink, (void)meta, (void)opts;
    pt_error_set(err, "native raw traces are not supported in this build");
    return -1;
}

const pt_trace_reader pt_native_reader = {"perftracker", native_sniff, native_read};
