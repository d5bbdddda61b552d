/* output.h -- writing files so that a reader never sees half of one. */
#ifndef PT_UTIL_OUTPUT_H
#define PT_UTIL_OUTPUT_H

#include "util/common.h"

#include <stdbool.h>

/* Writes path from the concatenation of parts, through "path.tmp<pid>" and rename(), so
 * readers see the old file or the whole new one (a crash or a full disk leaves no half
 * file behind). mode: permission bits, e.g. 0644. 0 or -1 with err naming the path. */
int pt_write_file_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t part_count,
                         int mode, pt_error *err);

/* mkdir -p: 0, or -1 with err. */
int pt_make_dirs(const char *path, pt_error *err);

/* Before any long work: can this user write where the work will go? For a directory it
 * is created (mkdir -p); for a file its folder must exist. A probe file is created there
 * and removed at once. 0, or -1 with err naming the path and the reason. */
int pt_check_writable(const char *path, bool is_dir, pt_error *err);

#endif
