/* outdir.h -- folders and files that another user cannot redirect.
 *
 * Reports, summaries and traces often go to shared places (/tmp/perftracker/output, a
 * team's scratch folder) and are often written by root. Another user who owns a folder on
 * the way, or can write to one, could otherwise swap a name for a symlink between our
 * check and our open and make us overwrite any file we can write. So:
 *
 *   - a folder is reached by walking its path from "/" one component at a time with
 *     openat(O_DIRECTORY | O_NOFOLLOW), and every folder met is checked with fstat: it
 *     must belong to this user or root, and one that every user can write to must have
 *     the sticky bit (like /tmp). A symlink on the way is followed only when this user or
 *     root owns it. Since nobody else can rename anything on such a path, the path names
 *     the same folder for as long as we use it;
 *   - folders we create are made with mkdirat in a checked folder, then opened and
 *     checked the same way;
 *   - pt_out_dir_write writes a file unnamed (O_TMPFILE in the checked folder) and names it
 *     with linkat once whole; linkat never follows a symlink at its new name, and a name
 *     that exists is replaced by renaming a fresh link over it. Where the file system has
 *     no O_TMPFILE (or there is no /proc), and for pt_out_file_*, files are created under a
 *     fresh random name with O_CREAT | O_EXCL | O_NOFOLLOW in the checked folder's
 *     descriptor and renamed into place with renameat in that same descriptor. Either way
 *     a planted symlink is never followed and readers never see half a file;
 *   - below a folder every user can write to (a sticky /tmp), what we create is private:
 *     files 0600 (0700 for scripts), folders 0700.
 *
 * Group-writable folders are accepted: a group is a grant the owner made on purpose. */
#ifndef PT_UTIL_OUTDIR_H
#define PT_UTIL_OUTDIR_H

#include "util/common.h"

#include <stdbool.h>

typedef struct pt_out_dir {
    int fd;             /* the checked folder (O_DIRECTORY), or -1 */
    bool private_files; /* below a folder every user can write to: create 0600 / 0700 */
    char *path;         /* as the caller named it, for messages */
} pt_out_dir;

#define PT_OUT_DIR_INIT {-1, false, NULL}

/* Opens path (absolute, or relative to the working directory) by the checked walk above;
 * create: make missing folders (mkdir -p). 0, or -1 with err naming the folder at fault. */
int pt_out_dir_open(pt_out_dir *d, const char *path, bool create, pt_error *err);
/* The folder name (one component) inside parent, checked the same way; a symlink there is
 * refused. create: made when missing. 0 or -1 with err. */
int pt_out_dir_sub(pt_out_dir *sub, const pt_out_dir *parent, const char *name, bool create, pt_error *err);
/* Creates the folder name inside parent, which must not exist yet (-1 with errno EEXIST
 * when it does), and opens it checked. */
int pt_out_dir_make_new(pt_out_dir *sub, const pt_out_dir *parent, const char *name, pt_error *err);
void pt_out_dir_close(pt_out_dir *d);

/* Writes d/name from the concatenation of parts, atomically (see above). mode: 0644, or
 * 0755 for a script, before the private rule. 0 or -1 with err naming the file. */
int pt_out_dir_write(const pt_out_dir *d, const char *name, const void *const *parts, const size_t *sizes,
                     size_t part_count, int mode, pt_error *err);
/* The same for a path: its folder (which must exist) by the checked walk, the file inside it
 * by pt_out_file_create. */
int pt_out_write_path(const char *path, const void *const *parts, const size_t *sizes, size_t part_count, int mode,
                      pt_error *err);
/* Creates d/name, which must not exist (O_CREAT | O_EXCL | O_NOFOLLOW in the checked
 * folder, mode by the private rule), for a file that grows in place under its own name
 * while it is written (an archive appended to as its members arrive, which readers may
 * read up to its last whole member). Its descriptor (O_RDWR), or -1 with err. */
int pt_out_dir_create_new(const pt_out_dir *d, const char *name, int mode, pt_error *err);
/* Removes d/name (a file) if it is there; a missing one is not an error. */
void pt_out_dir_remove(const pt_out_dir *d, const char *name);

/* A file being written under a temporary name, for writers that stream. */
typedef struct pt_out_file {
    int fd;        /* write here; a writer that hands it to fdopen/gzdopen sets it to -1 */
    int dir_fd;    /* the checked folder; -1 when writing straight into a device */
    char *tmp_name;
    char *name;
    char *path;    /* for messages */
} pt_out_file;

/* Creates the temporary file for path (its folder is opened by the checked walk, and must
 * exist). An existing character device or FIFO at path (/dev/null, /dev/full, a pipe) is
 * opened and written directly instead. 0 or -1 with err naming path. */
int pt_out_file_create(pt_out_file *f, const char *path, int mode, pt_error *err);
int pt_out_file_create_in(pt_out_file *f, const pt_out_dir *d, const char *name, int mode, pt_error *err);
/* Closes the file (unless handed over) and renames it into place. 0, or -1 with err (the
 * temporary file is then removed). Frees f's names either way. */
int pt_out_file_commit(pt_out_file *f, pt_error *err);
/* Closes (unless handed over) and removes the temporary file; frees f's names. */
void pt_out_file_abandon(pt_out_file *f);

#endif
