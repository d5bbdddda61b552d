/* tar.h -- ustar archives (POSIX.1-1988), written a member at a time as the data arrives
 * and read back with every header checked.
 *
 * Why tar: a round of 100,000 workers stored one summary file each made 100,000 files in
 * one folder, and creating them was most of the collecting CLI's kernel time (an inode,
 * a directory entry and a partly filled page each). One archive appended to as summaries
 * arrive is one file, keeps the property that a summary is on disk as soon as it came
 * (a collector that dies leaves every whole member readable), and any user can still
 * list or unpack it with tar(1) or Python's tarfile.
 *
 * Written: regular-file members only, names of one component (at most 100 bytes: the
 * header's name field, no prefix), mode 0644 or what the caller gives, the end marker
 * (two zero blocks) by pt_tar_finish. Read: an archive is hostile input -- every header's
 * checksum, octal fields and bounds are checked before its member is used, a member's
 * data must lie inside the file, and a name that is not one plain component (a '/', "..",
 * a leading dot) is refused; links, devices and folders are skipped and counted. An
 * archive that stops at a member boundary without its end marker (its writer died) is
 * read up to there and said to be unfinished. */
#ifndef PT_UTIL_TAR_H
#define PT_UTIL_TAR_H
#include "util/common.h"

#include <stdbool.h>
#include <stdint.h>

#define PT_TAR_BLOCK 512
#define PT_TAR_NAME_MAX 100

/* Appends one member (header, data, zero padding to the block) at the file's offset
 * *end with one pwritev; *end advances past it on success. On a short or failed write the
 * file is cut back to *end, so the archive stays whole for the next member. 0 or -1 with
 * err. */
int pt_tar_append(int fd, uint64_t *end, const char *name, const void *data, size_t len, int mode, int64_t mtime,
                  pt_error *err);
/* Writes the end marker at *end. 0 or -1 with err. */
int pt_tar_finish(int fd, uint64_t end, pt_error *err);

typedef struct pt_tar_member {
    char name[PT_TAR_NAME_MAX + 1];
    uint64_t offset; /* of its data in the archive */
    uint64_t size;
} pt_tar_member;

typedef struct pt_tar_listing {
    pt_tar_member *members; /* regular files, in archive order */
    size_t count;
    size_t skipped;         /* members that are not regular files, or whose names were refused */
    bool unfinished;        /* no end marker: the writer stopped (or is still writing) */
    bool damaged;           /* a header after the first failed its checks: the members before it are listed */
    char damage[160];       /* then: where, and what was wrong */
} pt_tar_listing;

/* Lists the archive open at fd, at most max_members members (more is an error: an archive
 * is not allowed to make its reader allocate without bound). A bad first header is an
 * error (it is no archive); a bad later one ends the listing there, with damaged set, so
 * one damaged block does not cost the members before it. 0, or -1 with err. */
int pt_tar_list(int fd, size_t max_members, pt_tar_listing *out, pt_error *err);
void pt_tar_listing_free(pt_tar_listing *l);

#endif
