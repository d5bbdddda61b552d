/* kineto_split.c -- where a large plain Kineto file can be cut, so that several threads
 * read it at once (pt_kineto_split; each span is read by pt_kineto_read_span, kineto.c).
 *
 * Design. The event list starts where the reader, reading the file's head, meets its
 * first event. From there the file is cut into `parts` shares, and each cut moves to a
 * likely event start: a '{' after "}" ws "," ws and followed by '"' or whitespace, looked
 * for from the share's target up to the next target, a window at a time, so whitespace
 * of any length between events is crossed. Such a '{' may also sit inside a string; the
 * spans verify each other (each must end exactly where the next begins), and the caller
 * reads the file in one go when they do not.
 *
 * Cost: the head is read up to the first event, and the scans read the file at most
 * once between them (memchr to each '}'), through one window of SPLIT_WINDOW bytes. Only
 * files of 64 MiB or more are cut; compressed ones never (no offsets to seek to). */
#define _POSIX_C_SOURCE 200809L
#include "trace/reader.h"
#include "util/json.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int ignore_event(void *ctx, const pt_event *ev)
{
    (void)ctx, (void)ev;
    return 0;
}

#define SPLIT_WINDOW ((size_t)1 << 20)

/* Where a scan for an event start stands: after "}", after "}" ws ",", after "}" ws "," ws "{". */
enum split_match { SEEN_NOTHING, SEEN_CLOSE, SEEN_COMMA, SEEN_OPEN };

static enum split_match split_advance(enum split_match m, char c)
{
    if (m == SEEN_OPEN && (c == '"' || pt_json_is_space(c)))
        return SEEN_OPEN; /* the caller has its match */
    if ((m == SEEN_CLOSE || m == SEEN_COMMA) && pt_json_is_space(c))
        return m;
    if (m == SEEN_CLOSE && c == ',')
        return SEEN_COMMA;
    if (m == SEEN_COMMA && c == '{')
        return SEEN_OPEN;
    return c == '}' ? SEEN_CLOSE : SEEN_NOTHING;
}

/* Offset of the first '{' in [from, limit) that follows "}" ws "," ws and is followed by
 * '"' or whitespace: a likely event start. The whitespace may be of any length: the scan
 * reads SPLIT_WINDOW bytes at a time and carries its state across them. UINT64_MAX when
 * there is none. */
static uint64_t find_event_start(int fd, uint64_t from, uint64_t limit, char *window)
{
    enum split_match m = SEEN_NOTHING;
    uint64_t open_at = 0;
    /* One byte past limit: what follows a '{' just before it. */
    for (uint64_t at = from; at <= limit;) {
        ptrdiff_t got = pt_pread_all(fd, window, (size_t)PT_MIN((uint64_t)SPLIT_WINDOW, limit + 1 - at), at);
        if (got <= 0)
            break;
        for (ptrdiff_t i = 0; i < got; i++) {
            if (m == SEEN_NOTHING && window[i] != '}') { /* most bytes: jump to the next '}' */
                const char *close = memchr(window + i, '}', (size_t)(got - i));
                if (!close)
                    break;
                i = close - window;
            }
            enum split_match next = split_advance(m, window[i]);
            if (m == SEEN_OPEN && next == SEEN_OPEN)
                return open_at;
            if (next == SEEN_OPEN)
                open_at = at + (uint64_t)i;
            if (next == SEEN_OPEN && open_at >= limit)
                return UINT64_MAX;
            m = next;
        }
        at += (uint64_t)got;
    }
    return UINT64_MAX;
}

size_t pt_kineto_split(const char *path, size_t parts, uint64_t *starts, bool *bare_list, pt_error *err)
{
    starts[0] = 0;
    *bare_list = false;
    pt_input *in = pt_input_open(path, err);
    if (!in)
        return 1;
    uint64_t size = pt_input_file_size(in);
    if (parts < 2 || pt_input_compression(in) != PT_COMPRESSION_NONE || size < ((uint64_t)64 << 20)) {
        pt_input_close(in);
        return 1;
    }
    pt_input_close(in);
    /* Find where the event list starts: read the head, stopping at the first event. */
    pt_trace_sink sink = {NULL, ignore_event, NULL};
    pt_trace_meta meta;
    pt_trace_meta_init(&meta);
    uint64_t first_event;
    if (pt_kineto_read_span(path, 0, 1, false, &sink, &meta, NULL, &first_event, err) != 0 ||
        first_event == UINT64_MAX)
        return 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    /* Each start is looked for between its target and the next one, so the scans cost
     * at most one read of the file however long the runs of whitespace or strings. */
    char *window = pt_xmalloc(SPLIT_WINDOW);
    size_t found = 1;
    uint64_t share = (size - first_event) / parts;
    for (size_t k = 1; k < parts; k++) {
        uint64_t target = first_event + share * k;
        uint64_t limit = k + 1 < parts ? target + share : size;
        uint64_t from = PT_MAX(target, starts[found - 1] + 1);
        uint64_t at = from < limit ? find_event_start(fd, from, limit, window) : UINT64_MAX;
        if (at != UINT64_MAX)
            starts[found++] = at;
    }
    free(window);
    close(fd);
    return found;
}
