/* fuzz_protocol.c -- the control plane's frame decoder (src/control/protocol.c).
 *
 * The coordinator decodes whatever reaches its port, before and after authentication, so
 * pt_ctl_decode must turn any bytes into a frame, "need more" or an error. The input is
 * a byte stream of frames, decoded one after another as a connection's buffer is.
 * Properties: a decoded frame re-encodes to exactly the bytes it came from (the codec is
 * one table, so a difference means a field was misread); every shorter prefix of a valid
 * frame asks for more bytes instead of failing or decoding something else; a refusal
 * says why. Summaries carried in SUMMARY and WORKER_SUMMARY frames go on into the summary
 * decoder and the diagnosis, which is where the coordinator and the CLI send them. */
#include "fuzz_common.h"

#include "control/protocol.h"
#include "summarize/summary_io.h"

#include <stdlib.h>
#include <string.h>

static void check_reencodes(const pt_ctl_msg *m, const uint8_t *frame, size_t n)
{
    PT_FUZZ_CHECK(pt_ctl_encoded_size(m) == n, "a decoded frame re-encodes to another size");
    uint8_t *again = malloc(n);
    PT_FUZZ_CHECK(again && pt_ctl_encode(m, again, n) == n, "a decoded frame does not re-encode");
    PT_FUZZ_CHECK(memcmp(again, frame, n) == 0, "a decoded frame re-encodes to other bytes");
    free(again);
    pt_ctl_msg partial;
    pt_error err = {{0}};
    PT_FUZZ_CHECK(pt_ctl_decode(frame, n - 1, &partial, &err) == 0, "a cut frame did not ask for more bytes");
}

static void follow_payloads(const pt_ctl_msg *m)
{
    char text[PT_CTL_MAX_TEXT + 1];
    pt_ctl_copy_str(text, sizeof text, m->text);
    PT_FUZZ_CHECK(strlen(text) == PT_MIN(m->text.len, (uint32_t)PT_CTL_MAX_TEXT), "copied text lost bytes");
    (void)pt_ctl_type_name(m->type);
    (void)pt_ctl_failure_name(m->kind);
    if ((m->type == PT_CTL_SUMMARY || m->type == PT_CTL_WORKER_SUMMARY) && m->blob.len) {
        pt_error err = {{0}};
        pt_worker_summary *s = pt_summary_decode(m->blob.data, m->blob.len, &err);
        if (s)
            pt_fuzz_exercise_summary(s, true);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0;
    while (at < size) {
        pt_ctl_msg m;
        pt_error err = {{0}};
        ssize_t n = pt_ctl_decode(data + at, size - at, &m, &err);
        if (n < 0) {
            PT_FUZZ_CHECK(err.message[0], "a frame was refused without a message");
            break;
        }
        if (n == 0)
            break;
        PT_FUZZ_CHECK((size_t)n <= size - at, "a frame longer than the bytes given");
        check_reencodes(&m, data + at, (size_t)n);
        follow_payloads(&m);
        at += (size_t)n;
    }
    return 0;
}
