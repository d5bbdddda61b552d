/* reader.c -- picks the reader for a file by sniffing its decompressed first bytes. */
#include "trace/reader.h"

#include <string.h>

static const pt_trace_reader *const readers[] = {&pt_native_reader, &pt_kineto_reader};

int pt_trace_read(const char *path, pt_trace_sink *sink, pt_trace_meta *meta,
                  const pt_read_options *opts, pt_error *err)
{
    err->message[0] = '\0';
    pt_input *in = pt_input_open(path, err);
    if (!in)
        return -1;
    unsigned char head[64];
    ptrdiff_t n = pt_input_read(in, head, sizeof head, err);
    pt_input_close(in);
    if (n < 0)
        return -1;
    if (n == 0) {
        pt_error_set(err, "the file is empty");
        return -1;
    }
    for (size_t i = 0; i < PT_ARRAY_LEN(readers); i++) {
        if (!readers[i]->sniff(head, (size_t)n))
            continue;
        /* Reopen rather than un-read: sniffing costs one extra open, and every reader
         * then sees a plain stream from byte 0. */
        in = pt_input_open(path, err);
        if (!in)
            return -1;
        int rc = readers[i]->read(in, sink, meta, opts, err);
        pt_input_close(in);
        return rc;
    }
    pt_error_set(err, "not a trace: neither Chrome/Kineto JSON nor a perftracker raw trace");
    return -1;
}

bool pt_trace_error_is_foreign_json(const pt_error *err)
{
    return strncmp(err->message, PT_JSON_NOT_A_TRACE, strlen(PT_JSON_NOT_A_TRACE)) == 0;
}
