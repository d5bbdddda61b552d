/* exit_files.h -- files a process must not leave behind when a signal ends it.
 *
 * Rank 0's coordinator writes a job file and a control key file that tell the CLI a job
 * runs here; it removes them when it stops. A signal whose action is to terminate (the
 * SIGTERM a launcher or a scheduler sends, SIGHUP, SIGQUIT) skips every atexit handler,
 * and the files stayed until a later CLI found the process gone. While files are
 * registered, a handler is installed for each such signal whose disposition is still the
 * default: it unlinks them (unlink is async-signal-safe; the paths are copied in advance,
 * and only the process that registered them acts: a forked DataLoader worker inherits the
 * handler, not the files), restores the default and raises the signal again, so the
 * process dies of it exactly as it would have. A signal the program handles itself keeps
 * its handler (Python's SIGINT, a job's own SIGTERM handler): those exits run atexit. */
#ifndef PT_CONTROL_EXIT_FILES_H
#define PT_CONTROL_EXIT_FILES_H

#define PT_EXIT_FILES_MAX 4

/* Registers path (copied; at most PT_EXIT_FILES_MAX at once, PATH_MAX bytes). 0 or -1. */
int pt_exit_files_add(const char *path);
/* Forgets path (the caller removes it itself), and the handlers once none is left. */
void pt_exit_files_remove(const char *path);

#endif
