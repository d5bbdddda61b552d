/* output.c -- the path-level writers (see output.h), all through outdir.c's checked folders,
 * so every caller that names a path gets the same protection as one that holds a folder. */
#define _POSIX_C_SOURCE 200809L
#include "util/output.h"
#include "util/buf.h"
#include "util/outdir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pt_write_file_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t part_count,
                         int mode, pt_error *err)
{
    return pt_out_write_path(path, parts, sizes, part_count, mode, err);
}

int pt_make_dirs(const char *path, pt_error *err)
{
    pt_out_dir d;
    if (pt_out_dir_open(&d, path, true, err) != 0)
        return -1;
    pt_out_dir_close(&d);
    return 0;
}

int pt_check_writable(const char *path, bool is_dir, pt_error *err)
{
    char *folder = is_dir ? pt_xstrdup(path) : pt_dirname(path);
    pt_out_dir d;
    int rc = pt_out_dir_open(&d, folder, is_dir, err);
    if (rc == 0) {
        pt_out_file probe; /* a real file, since access() answers yes to root everywhere */
        pt_error why;
        rc = pt_out_file_create_in(&probe, &d, "perftracker-probe", 0600, &why);
        if (rc == 0)
            pt_out_file_abandon(&probe);
        else
            pt_error_set(err, "cannot write to %s: %s", folder, strerror(errno));
        pt_out_dir_close(&d);
    }
    free(folder);
    return rc;
}
