/* module_state.h -- what the files of the `perftracker._perftracker` extension share:
 * the module's state, the ThreadRecorder the profile hook gets, and the functions one file
 * calls in another, prefixed module_ (module.c: the CPython glue, Tracer and the method
 * table; module_hook.c: frame names and the hooks; module_window.c: a window's start and
 * end; module_snapshot.c: a hang report's stacks). Internal to src/collect: nothing
 * outside these four files includes it. Needs Python.h first. Everything here is touched
 * under the GIL only, so nothing locks; the extension is linked with hidden visibility, so
 * none of these names leaves it. */
#ifndef PT_COLLECT_MODULE_STATE_H
#define PT_COLLECT_MODULE_STATE_H

#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_GetBack before 3.11 */
#endif

#include "collect/collector.h"

#include <stdbool.h>
#include <stdint.h>

#define MAX_PREFIXES 16
#define PT_STACKS_MAX (64u << 10) /* every thread's stack, as a hang report sends it */
#define NAME_MAX_BYTES 1024

/* The 3.12+ hook (sys.monitoring, module_hook.c) replaces the profile hook. */
#if PY_VERSION_HEX >= 0x030C0000
#define PT_MONITORING 1
#endif

typedef struct ThreadRecorder {
    PyObject_HEAD
    pt_window *window;
    pt_thread_log *log;
} ThreadRecorder;

/* The module's state (GIL-guarded). */
struct module_state {
    bool started;
    char *prefixes[MAX_PREFIXES];       /* path prefixes to cut, longest first */
    size_t prefix_count;
    PyObject *identity;                 /* callable -> dict, called when a window opens */
    PyObject **held;                    /* references kept for the open window's names */
    size_t held_count, held_cap;
    PyObject *saved_thread_hook;        /* threading's profile hook before the window */
    PyThreadState *training_tstate;     /* the thread that calls step() */
    char **cupti_libs;                  /* NULL-terminated */
    bool agent_running;
    PyObject *secret_hook;              /* tracer.py's job-secret step hook, while needed */
    PyObject *hang_hook;                /* collectives.py's refresh before a hang snapshot */
    int64_t secret_next_ns;             /* when step() may call it again */
};
extern struct module_state module_state;

/* step(): Tracer.step in C. */
PyObject *module_tracer_step(PyObject *self, PyObject *unused);
/* Our own step() is not recorded: it is the window's boundary, not the program's work. */
#define IS_STEP_DEF(ml) ((ml)->ml_meth == (PyCFunction)module_tracer_step)
#define IS_STEP(fn) IS_STEP_DEF((fn)->m_ml)

/* ------------------------------------------------------------ module_hook.c */

/* The type of a thread's profile-hook argument (and, on 3.12+, of the monitoring
 * callbacks) made ready; -1 with a Python error set. */
int module_hook_types_ready(void);
/* str's UTF-8, or fallback (the error cleared). */
const char *module_utf8_or(PyObject *s, const char *fallback);
/* "path/file.py: function", the path cut as the user knows it. */
int module_format_code_name(PyCodeObject *code, char *out, size_t cap);
/* What repr() of a builtin says, the address cut to "0x". */
int module_format_c_name(const PyMethodDef *ml, PyObject *self, char *out, size_t cap);
/* Drops the references the open window's names held. */
void module_release_held(void);
/* Whether ts runs our profile hook. */
bool module_is_our_hook(PyThreadState *ts);
/* Installs the profile hook on ts, its running frames entered at start; false when another
 * profiler owns the thread or it cannot be installed. */
bool module_install_on(PyThreadState *ts, pt_window *w, int64_t start);
/* Removes the profile hook from every thread that runs it. */
void module_uninstall_all(void);
/* threading.setprofile's target while a window is open: hooks each new thread. */
extern PyMethodDef module_bootstrap_def;
#ifdef PT_MONITORING
/* Every thread's running frames entered at start, then the monitoring events on; false with
 * why set on failure. */
bool module_monitoring_begin(pt_window *w, int64_t start, const char **why);
/* Our events off and the tool id freed (no-op when not in use). */
void module_monitoring_stop(void);
/* The callbacks (do-nothing ones with null_hook) registered and the events on. */
bool module_monitoring_start(bool null_hook, const char **why);
/* Whether our tool id is taken. */
bool module_monitoring_in_use(void);
#endif

/* ------------------------------------------------------------ module_window.c */

/* A window opens: who the worker is, the sources started, the hooks installed (or the
 * window abandoned with why). */
void module_begin_window(void);
/* A window closes: the hooks removed, its threads' logs closed, the collector told. */
void module_end_window(void);
/* threading.setprofile(hook); *previous, when given, gets what it was. */
void module_set_threading_hook(PyObject *hook, PyObject **previous);

/* ------------------------------------------------------------ module_snapshot.c */

/* Where the three parts of a hang report's snapshot go (caps may be 0: not wanted). */
typedef struct pt_snapshot_bufs {
    char *stack;
    size_t stack_cap;
    char *threads;
    size_t threads_cap;
    char *collectives;
    size_t collectives_cap;
} pt_snapshot_bufs;

/* The training thread's stack, every thread's line and the collective bookkeeping, from a
 * helper thread that takes the GIL (waited for at most two seconds). */
void module_take_snapshot(pt_snapshot_bufs *out);

#endif
