/* output.h -- writing files by path so that a reader never sees half of one and no other
 * user can redirect the write (the rules are outdir.h's; these are its path-level uses). */
#ifndef PT_UTIL_OUTPUT_H
#define PT_UTIL_OUTPUT_H

#include "util/common.h"

#include <stdbool.h>

/* Writes path from the concatenation of parts under a fresh temporary name created with
 * O_EXCL | O_NOFOLLOW in its checked folder, then renamed into place, so readers see the
 * old file or the whole new one (a crash or a full disk leaves no half file behind) and a
 * planted symlink is never followed. mode: permission bits, e.g. 0644 (private below a
 * world-writable folder). 0 or -1 with err naming the path. */
int pt_write_file_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t part_count,
                         int mode, pt_error *err);

/* mkdir -p through the checked walk: 0, or -1 with err. */
int pt_make_dirs(const char *path, pt_error *err);

/* Before any long work: can this user write where the work will go, safely? For a
 * directory it is created (mkdir -p); for a file its folder must exist. Every folder on
 * the way is checked (outdir.h), and a probe file is created there and removed at once.
 * 0, or -1 with err naming the path and the reason. */
int pt_check_writable(const char *path, bool is_dir, pt_error *err);

#endif
