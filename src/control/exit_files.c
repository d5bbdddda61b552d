/* exit_files.c -- see exit_files.h. */
#define _GNU_SOURCE
#include "control/exit_files.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static const int fatal_signals[] = {SIGTERM, SIGHUP, SIGQUIT};
#define FATAL_COUNT (sizeof fatal_signals / sizeof *fatal_signals)

/* Read by the handler: a slot's path is written before `used` says so, and `used` is
 * cleared before the path is touched again. */
static char paths[PT_EXIT_FILES_MAX][PATH_MAX];
static volatile sig_atomic_t used[PT_EXIT_FILES_MAX];
static volatile pid_t owner;
static bool installed[FATAL_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void on_fatal_signal(int sig)
{
    if (getpid() == owner)
        for (int i = 0; i < PT_EXIT_FILES_MAX; i++)
            if (used[i])
                unlink(paths[i]);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered as the handler returns: the process ends of it, as it would have */
}

/* Only where nothing else handles the signal: a job's own handler, or Python's, stays. */
static void install_locked(void)
{
    for (size_t i = 0; i < FATAL_COUNT; i++) {
        struct sigaction now;
        if (installed[i] || sigaction(fatal_signals[i], NULL, &now) != 0 || now.sa_handler != SIG_DFL ||
            (now.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction ours;
        memset(&ours, 0, sizeof ours);
        ours.sa_handler = on_fatal_signal;
        sigemptyset(&ours.sa_mask);
        ours.sa_flags = SA_RESETHAND;
        installed[i] = sigaction(fatal_signals[i], &ours, NULL) == 0;
    }
}

/* Gives back the signals that still have our handler (someone may have replaced it since). */
static void uninstall_locked(void)
{
    for (size_t i = 0; i < FATAL_COUNT; i++) {
        struct sigaction now;
        if (installed[i] && sigaction(fatal_signals[i], NULL, &now) == 0 && now.sa_handler == on_fatal_signal)
            signal(fatal_signals[i], SIG_DFL);
        installed[i] = false;
    }
}

int pt_exit_files_add(const char *path)
{
    if (!path || !*path || strlen(path) >= PATH_MAX)
        return -1;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < PT_EXIT_FILES_MAX && slot < 0; i++)
        if (!used[i])
            slot = i;
    if (slot >= 0) {
        snprintf(paths[slot], sizeof paths[slot], "%s", path);
        owner = getpid();
        used[slot] = 1;
        install_locked();
    }
    pthread_mutex_unlock(&lock);
    return slot >= 0 ? 0 : -1;
}

void pt_exit_files_remove(const char *path)
{
    if (!path || !*path)
        return;
    pthread_mutex_lock(&lock);
    bool any = false;
    for (int i = 0; i < PT_EXIT_FILES_MAX; i++) {
        if (used[i] && strcmp(paths[i], path) == 0)
            used[i] = 0;
        any |= used[i] != 0;
    }
    if (!any)
        uninstall_locked();
    pthread_mutex_unlock(&lock);
}
