/* fuzz_tar.c -- the archive reader (pt_tar_list, src/util/tar.c) and what analyze does
 * with each member it lists (pt_summary_read_at, then the summary decoder).
 *
 * A large round's summaries come back as summaries/summaries.tar, and anyone who can
 * write the output folder, or hands a user an archive, chooses its bytes: headers,
 * sizes and offsets must be checked before a member is read, whatever they claim. The
 * input is the archive itself. */
#define _POSIX_C_SOURCE 200809L
#include "fuzz_common.h"

#include "summarize/summary.h"
#include "summarize/summary_io.h"
#include "util/tar.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = pt_fuzz_file(data, size);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    PT_FUZZ_CHECK(fd >= 0, "opening the input's file");
    pt_tar_listing l;
    pt_error err = {{0}};
    if (pt_tar_list(fd, 4096, &l, &err) == 0) {
        struct stat st;
        PT_FUZZ_CHECK(fstat(fd, &st) == 0, "fstat");
        for (size_t i = 0; i < l.count; i++) {
            const pt_tar_member *m = &l.members[i];
            PT_FUZZ_CHECK(m->offset >= 512 && m->offset % 512 == 0, "a member's data follows its header");
            PT_FUZZ_CHECK(m->size <= (uint64_t)st.st_size - m->offset, "a listed member lies inside the file");
            PT_FUZZ_CHECK(m->name[0] && m->name[0] != '.' && !strchr(m->name, '/'), "a member's name is one plain component");
            pt_worker_summary *s = pt_summary_read_at(fd, m->offset, m->size, &err);
            pt_summary_free(s);
        }
        pt_tar_listing_free(&l);
    }
    close(fd);
    return 0;
}
