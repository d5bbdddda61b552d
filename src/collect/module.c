/* module.c -- the CPython extension `perftracker._perftracker`: step(), the C profile
 * hook, frame names, and the link to the control plane's agent.
 *
 * The hook (the _lsprof approach). While a window is open every Python thread runs
 * profile_hook through PyEval_SetProfile, with its own ThreadRecorder as the hook's
 * argument, so the hook reaches its thread's log without a lookup or a lock. Per event it
 * reads the clock, finds the callable's name id with one hash probe on pointers
 * (funcs.h) and pushes or pops a record (recorder.h): no allocation, no Python object.
 * Outside windows no hook is installed at all, and step() is a counter update and one
 * atomic load (plus, while the job secret is being handed over or watched, a pointer
 * test and a call into tracer.py at most once a second).
 *
 * Names follow the seed's convention (Kineto's with_stack naming without line numbers):
 * "path/file.py: function" with the path as the user knows it (relative to
 * site-packages, the standard library or the working directory), and C calls as
 * "<built-in method NAME of TYPE object at 0x>" or "<built-in function NAME>". So
 * torch.distributed.barrier is "torch/distributed/distributed_c10d.py: barrier", which
 * the summarizer treats as communication. A name is built once per callable; the hook
 * holds a reference to each code object and type it named until the window ends, so a
 * pointer is never reused for another callable within a window.
 *
 * When a window opens, the stacks that are already running (the training loop that
 * called step(), and every other thread) are entered at the window's start, so calls
 * made inside them nest under their real callers. New threads started through
 * `threading` pick the hook up via threading.setprofile. Threads created by C code
 * during the window are not seen (CPython 3.11 has no hook for them).
 *
 * The job secret (src/control/agent.h). Python (tracer.py) carries rank 0's job secret
 * through the job's torch.distributed store; the _job_secret_* functions are its hands
 * on the C side. While something is left to do (another machine's rank waits for it, or
 * rank 0 watches that the store still holds its own), step() calls tracer.py's hook at
 * most once a second: only the training thread ever touches the store (so no other thread
 * competes with the job's own store calls), and each call is a non-blocking check.
 *
 * A hang report's snapshot (hook_snapshot, for the agent). A helper thread takes the
 * GIL, calls collectives.py's refresh (async calls done since, torch's Flight Recorder),
 * and formats every thread's stack, the training thread marked; the agent waits at most
 * two seconds for it, then adds the collective bookkeeping (collectives.h), which needs
 * no GIL. The bookkeeping's own functions come from collectives_module.c.
 *
 * Failure policy: nothing here raises into the training loop. A failure abandons the
 * window with one log line and the collector stays ready for the next one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_GetBack before 3.11 */
#endif

#include "collect/collectives.h"
#include "collect/collector.h"
#include "collect/cupti.h"
#include "collect/collectives_module.h"
#include "collect/log.h"
#include "util/step_number.h"

#ifdef PT_HAVE_AGENT
#include "control/agent.h"
#endif
#include "control/round.h" /* PT_DEFAULT_OUTPUT_DIR */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_PREFIXES 16
#define PT_STACKS_MAX (64u << 10) /* every thread's stack, as a hang report sends it */
#define NAME_MAX_BYTES 1024

/* ------------------------------------------------------------ state (GIL-guarded) */

typedef struct ThreadRecorder {
    PyObject_HEAD
    pt_window *window;
    pt_thread_log *log;
} ThreadRecorder;

static PyTypeObject ThreadRecorder_Type;

static struct {
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
} M;

#define SECRET_RETRY_NS 1000000000LL

static PyObject *tracer_step(PyObject *self, PyObject *unused);
/* Our own step() is not recorded: it is the window's boundary, not the program's work. */
#define IS_STEP_DEF(ml) ((ml)->ml_meth == (PyCFunction)tracer_step)
#define IS_STEP(fn) IS_STEP_DEF((fn)->m_ml)

/* ------------------------------------------------------------ names */

static const char *trim_path(const char *file)
{
    static const char *const markers[] = {"/site-packages/", "/dist-packages/"};
    if (file[0] == '<')
        return file;
    const char *best = NULL;
    for (size_t i = 0; i < PT_ARRAY_LEN(markers); i++)
        for (const char *p = strstr(file, markers[i]); p; p = strstr(p + 1, markers[i]))
            best = p + strlen(markers[i]);
    if (best)
        return best;
    for (size_t i = 0; i < M.prefix_count; i++) {
        size_t n = strlen(M.prefixes[i]);
        if (strncmp(file, M.prefixes[i], n) == 0 && file[n])
            return file + n;
    }
    return file;
}

static const char *utf8_or(PyObject *s, const char *fallback)
{
    const char *u = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    if (!u) {
        PyErr_Clear();
        return fallback;
    }
    return u;
}

static int format_code_name(PyCodeObject *code, char *out, size_t cap)
{
    return snprintf(out, cap, "%s: %s", trim_path(utf8_or(code->co_filename, "?")), utf8_or(code->co_name, "?"));
}

/* What repr() of a builtin says, with the address cut to "0x" as the seed's keys have it.
 * ml and self: a builtin's method def and what it is bound to (NULL or a module for a
 * function). */
static int format_c_name(const PyMethodDef *ml, PyObject *self, char *out, size_t cap)
{
    if (!self || PyModule_Check(self))
        return snprintf(out, cap, "<built-in function %s>", ml->ml_name);
    return snprintf(out, cap, "<built-in method %s of %s object at 0x>", ml->ml_name, Py_TYPE(self)->tp_name);
}

static bool hold(PyObject *o)
{
    if (M.held_count == M.held_cap) {
        size_t cap = M.held_cap ? M.held_cap * 2 : 1024;
        PyObject **held = realloc(M.held, cap * sizeof *held);
        if (!held)
            return false;
        M.held = held;
        M.held_cap = cap;
    }
    Py_INCREF(o);
    M.held[M.held_count++] = o;
    return true;
}

static void release_held(void)
{
    for (size_t i = 0; i < M.held_count; i++)
        Py_DECREF(M.held[i]);
    M.held_count = 0;
}

/* Names a callable seen for the first time (a code object, or else a builtin's method
 * def and self), and remembers it under (key, key2) when a reference to `keep` can be
 * held. Runs inside the hook: any pending exception is saved around the naming. */
static uint32_t name_first_sight(pt_window *w, const void *key, const void *key2, PyObject *keep,
                                 PyCodeObject *code, const PyMethodDef *ml, PyObject *self)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    char name[NAME_MAX_BYTES];
    int n = code ? format_code_name(code, name, sizeof name) : format_c_name(ml, self, name, sizeof name);
    uint32_t id = n < 0 ? PT_NAMES_NONE : pt_window_name(w, name, (size_t)PT_MIN(n, NAME_MAX_BYTES - 1));
    if (id == PT_NAMES_NONE)
        id = PT_WINDOW_UNKNOWN_NAME;
    else if (hold(keep) && pt_functab_add(&w->funcs, key, key2, id) != 0) {
        /* Not remembered: the name is rebuilt on the next call, the reference is harmless. */
    }
    PyErr_Restore(type, value, tb);
    return id;
}

static uint32_t code_name(pt_window *w, PyCodeObject *code)
{
    uint32_t id = pt_functab_find(&w->funcs, code, NULL);
    if (PT_LIKELY(id != PT_FUNC_NONE))
        return id;
    return name_first_sight(w, code, NULL, (PyObject *)code, code, NULL, NULL);
}

/* A builtin is named by its method def and the type it is bound to: the same key whether
 * the call came as a bound builtin (3.11's hook) or as a method descriptor and its self
 * (3.12's CALL event). keep: what to hold so the method def outlives the window. */
static uint32_t c_name(pt_window *w, PyMethodDef *ml, PyObject *self, PyObject *keep)
{
    const void *type = self && !PyModule_Check(self) ? (const void *)Py_TYPE(self) : NULL;
    uint32_t id = pt_functab_find(&w->funcs, ml, type);
    if (PT_LIKELY(id != PT_FUNC_NONE))
        return id;
    if (type) /* the method def lives as long as its owner */
        keep = (PyObject *)type;
    return name_first_sight(w, ml, type, keep, NULL, ml, self);
}

static inline uint32_t cfunction_name(pt_window *w, PyCFunctionObject *fn)
{
    return c_name(w, fn->m_ml, fn->m_self, (PyObject *)fn);
}

/* ------------------------------------------------------------ the hook */

static int profile_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    ThreadRecorder *rec = (ThreadRecorder *)obj;
    pt_thread_log *t = rec->log;
    int64_t now = pt_ticks();
    switch (what) {
    case PyTrace_CALL: {
        PyCodeObject *code = PyFrame_GetCode(frame);
        uint32_t name = code_name(rec->window, code);
        Py_DECREF(code); /* held by the frame (and by us once named) */
        pt_thread_log_enter(t, code, name, now);
        break;
    }
    case PyTrace_RETURN: {
        PyCodeObject *code = PyFrame_GetCode(frame);
        Py_DECREF(code);
        pt_thread_log_leave(t, code, now);
        break;
    }
    case PyTrace_C_CALL:
        if (PyCFunction_Check(arg)) {
            PyCFunctionObject *fn = (PyCFunctionObject *)arg;
            if (!IS_STEP(fn))
                pt_thread_log_enter(t, fn->m_ml, cfunction_name(rec->window, fn), now);
        }
        break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
        if (PyCFunction_Check(arg)) {
            PyCFunctionObject *fn = (PyCFunctionObject *)arg;
            if (!IS_STEP(fn))
                pt_thread_log_leave(t, fn->m_ml, now);
        }
        break;
    default:
        break;
    }
    return 0;
}

static ThreadRecorder *new_recorder(pt_window *w, int64_t tid)
{
    pt_thread_log *log = pt_window_add_thread(w, tid);
    if (!log)
        return NULL;
    ThreadRecorder *rec = PyObject_New(ThreadRecorder, &ThreadRecorder_Type);
    if (!rec) {
        PyErr_Clear();
        return NULL;
    }
    rec->window = w;
    rec->log = log;
    return rec;
}

/* Enters the frames already running on a thread (outermost first) at the window start. */
static void enter_running_frames(pt_window *w, pt_thread_log *t, PyFrameObject *innermost, int64_t start)
{
    PyFrameObject *frames[PT_MAX_DEPTH];
    int depth = 0;
    PyFrameObject *f = innermost;
    Py_XINCREF(f);
    while (f && depth < PT_MAX_DEPTH) {
        frames[depth++] = f;
        f = PyFrame_GetBack(f);
    }
    Py_XDECREF(f);
    for (int i = depth - 1; i >= 0; i--) {
        PyCodeObject *code = PyFrame_GetCode(frames[i]);
        pt_thread_log_enter(t, code, code_name(w, code), start);
        Py_DECREF(code);
        Py_DECREF(frames[i]);
    }
}

static bool is_our_hook(PyThreadState *ts)
{
    return ts->c_profilefunc == profile_hook;
}

static bool install_on(PyThreadState *ts, pt_window *w, int64_t start)
{
    if (ts->c_profilefunc && !is_our_hook(ts))
        return false; /* another profiler owns this thread */
#if PY_VERSION_HEX >= 0x030C0000
    if (ts != PyThreadState_Get())
        return false; /* 3.12+: no per-thread install for other threads */
#endif
#if PY_VERSION_HEX >= 0x030B0000
    int64_t other_tid = (int64_t)ts->native_thread_id;
#else
    int64_t other_tid = (int64_t)ts->thread_id; /* 3.10 keeps only the pthread id */
#endif
    int64_t tid = ts == PyThreadState_Get() ? (int64_t)syscall(SYS_gettid) : other_tid;
    ThreadRecorder *rec = new_recorder(w, tid);
    if (!rec)
        return false;
    PyFrameObject *frame = PyThreadState_GetFrame(ts);
    enter_running_frames(w, rec->log, frame, start);
    Py_XDECREF(frame);
    int rc;
    if (ts == PyThreadState_Get()) {
        PyEval_SetProfile(profile_hook, (PyObject *)rec);
        rc = 0;
    } else {
#if PY_VERSION_HEX < 0x030C0000
        rc = _PyEval_SetProfile(ts, profile_hook, (PyObject *)rec);
#else
        rc = -1;
#endif
    }
    Py_DECREF(rec);
    if (rc != 0)
        PyErr_Clear();
    return rc == 0;
}

static void uninstall_all(void)
{
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (!is_our_hook(ts))
            continue;
        if (ts == me) {
            PyEval_SetProfile(NULL, NULL);
        } else {
#if PY_VERSION_HEX < 0x030C0000
            if (_PyEval_SetProfile(ts, NULL, NULL) != 0)
                PyErr_Clear();
#endif
        }
    }
}

/* threading.setprofile target: runs once on a new thread's first event, swaps itself for
 * the C hook and records that event. */
static PyObject *thread_bootstrap(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *frame_obj, *arg;
    const char *event;
    if (!PyArg_ParseTuple(args, "OsO", &frame_obj, &event, &arg)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    pt_window *w = pt_collector_window();
    PyEval_SetProfile(NULL, NULL);
    if (!w || !PyFrame_Check(frame_obj))
        Py_RETURN_NONE;
    ThreadRecorder *rec = new_recorder(w, (int64_t)syscall(SYS_gettid));
    if (!rec)
        Py_RETURN_NONE;
    PyFrameObject *frame = (PyFrameObject *)frame_obj;
    int64_t now = pt_ticks();
    if (strcmp(event, "call") == 0) {
        PyFrameObject *back = PyFrame_GetBack(frame);
        enter_running_frames(w, rec->log, back, now);
        Py_XDECREF(back);
        PyCodeObject *code = PyFrame_GetCode(frame);
        pt_thread_log_enter(rec->log, code, code_name(w, code), now);
        Py_DECREF(code);
    } else {
        enter_running_frames(w, rec->log, frame, now);
    }
    PyEval_SetProfile(profile_hook, (PyObject *)rec);
    Py_DECREF(rec);
    Py_RETURN_NONE;
}

static PyMethodDef bootstrap_def = {"_thread_bootstrap", thread_bootstrap, METH_VARARGS, NULL};

/* ------------------------------------------------------------ the 3.12+ hook: sys.monitoring */

#if PY_VERSION_HEX >= 0x030C0000
/* On 3.12 the legacy profile hook is emulated on top of sys.monitoring: an extra layer
 * per event, and a bound builtin object created for every method-descriptor call. PEP
 * 669 lets a tool register its own callables per event instead; ours are C objects
 * called through vectorcall (no argument tuple, no bound method), and a C call arrives as
 * (callable, self), named without allocating. Events are global: every thread's calls
 * arrive, including threads C code started, so a thread finds its log through a
 * thread-local (generation, log) pair, made on its first event of the window. */
#define PT_MONITORING 1

enum { MON_START, MON_RETURN, MON_CALL, MON_C_RETURN, MON_NULL, MON_KINDS };

typedef struct MonitorCallback {
    PyObject_HEAD
    vectorcallfunc vectorcall;
} MonitorCallback;

static PyTypeObject MonitorCallback_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "perftracker._perftracker.MonitorCallback",
    .tp_basicsize = sizeof(MonitorCallback),
    .tp_vectorcall_offset = offsetof(MonitorCallback, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A sys.monitoring callback in C (internal).",
};

#define MON_PREPARED_MAX 256
static struct {
    int tool;                        /* our sys.monitoring tool id, -1 when none */
    uint64_t generation;             /* one per window (and per null-hook run) */
    pt_window *window;
    PyObject *missing;               /* sys.monitoring.MISSING: a CALL without self */
    PyObject *disable;               /* sys.monitoring.DISABLE */
    struct {
        PyThreadState *ts;
        pt_thread_log *log;
    } prepared[MON_PREPARED_MAX];    /* threads that existed when the window opened */
    size_t prepared_count;
} MON = {.tool = -1};

/* Which log the thread that holds the GIL writes to. Events arrive under the GIL, so a
 * one-entry cache keyed by the thread state answers almost every event (a thread-local
 * would cost a __tls_get_addr call per event in a dlopen'd module); a thread switch
 * looks the thread up in MON.threads. */
#define MON_THREADS_MAX 4096
static struct {
    PyThreadState *ts;
    pt_thread_log *log;              /* NULL: this thread is not recorded */
    uint64_t generation;
} mon_last;
static struct {
    PyThreadState *ts;
    pt_thread_log *log;
    uint64_t generation;
} mon_threads[MON_THREADS_MAX];
static size_t mon_thread_count;

/* A thread's first event in this window: its prepared log, or a new one with the frames
 * it is already running entered (all of them, or all but the innermost when the event
 * itself starts that frame). */
static pt_thread_log *mon_new_thread(PyThreadState *ts, bool starting)
{
    pt_thread_log *log = NULL;
    for (size_t i = 0; i < MON.prepared_count && !log; i++)
        if (MON.prepared[i].ts == ts)
            log = MON.prepared[i].log;
    if (!log && (log = pt_window_add_thread(MON.window, (int64_t)syscall(SYS_gettid))) != NULL) {
        PyFrameObject *frame = PyThreadState_GetFrame(ts);
        PyFrameObject *outer = starting && frame ? PyFrame_GetBack(frame) : NULL;
        enter_running_frames(MON.window, log, starting ? outer : frame, pt_ticks());
        Py_XDECREF(outer);
        Py_XDECREF(frame);
    }
    return log;
}

static pt_thread_log *mon_switch_thread(PyThreadState *ts, bool starting)
{
    size_t i = 0;
    while (i < mon_thread_count && mon_threads[i].ts != ts)
        i++;
    if (i == mon_thread_count || mon_threads[i].generation != MON.generation) {
        pt_thread_log *log = mon_new_thread(ts, starting);
        if (i == mon_thread_count && mon_thread_count < MON_THREADS_MAX)
            mon_thread_count++;
        if (i < mon_thread_count) {
            mon_threads[i].ts = ts;
            mon_threads[i].log = log;
            mon_threads[i].generation = MON.generation;
        }
        mon_last.ts = ts, mon_last.log = log, mon_last.generation = MON.generation;
        return log;
    }
    mon_last.ts = ts, mon_last.log = mon_threads[i].log, mon_last.generation = MON.generation;
    return mon_last.log;
}

static inline pt_thread_log *mon_log(bool starting)
{
    PyThreadState *ts = PyThreadState_Get();
    if (PT_LIKELY(mon_last.ts == ts && mon_last.generation == MON.generation))
        return mon_last.log;
    return mon_switch_thread(ts, starting);
}

/* PY_START, PY_RESUME, PY_THROW: (code, offset[, exception]) */
static PyObject *mon_start(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)self, (void)nargsf, (void)kwnames;
    int64_t now = pt_ticks();
    pt_thread_log *t = mon_log(true);
    if (PT_LIKELY(t != NULL)) {
        PyCodeObject *code = (PyCodeObject *)args[0];
        pt_thread_log_enter(t, code, code_name(MON.window, code), now);
    }
    Py_RETURN_NONE;
}

/* PY_RETURN, PY_YIELD, PY_UNWIND: (code, offset, value) */
static PyObject *mon_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)self, (void)nargsf, (void)kwnames;
    int64_t now = pt_ticks();
    pt_thread_log *t = mon_log(false);
    if (PT_LIKELY(t != NULL))
        pt_thread_log_leave(t, args[0], now);
    Py_RETURN_NONE;
}

/* The builtin a CALL or C_RETURN event is about, as (method def, self); false for calls
 * of anything else (Python functions, types, ...), which have their own events or none,
 * as in the legacy hook. */
static inline bool c_call_target(PyObject *callable, PyObject *arg0, PyMethodDef **ml, PyObject **self)
{
    if (PyCFunction_Check(callable)) {
        *ml = ((PyCFunctionObject *)callable)->m_ml;
        *self = ((PyCFunctionObject *)callable)->m_self;
        return true;
    }
    if (Py_IS_TYPE(callable, &PyMethodDescr_Type) && arg0 != MON.missing) {
        *ml = ((PyMethodDescrObject *)callable)->d_method;
        *self = arg0;
        return true;
    }
    return false;
}

/* CALL: (code, offset, callable, arg0). A call site that calls a Python function or a
 * class is switched off for us (DISABLE): those calls are recorded by their own
 * PY_START (or not at all, as classes in the legacy hook), and a third of all events
 * in call-heavy code are such CALLs. The cost: should that same site later call a
 * builtin, the builtin's time shows as its caller's. */
static PyObject *mon_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)self, (void)nargsf, (void)kwnames;
    PyObject *callable = args[2];
    if (Py_IS_TYPE(callable, &PyFunction_Type) || PyType_Check(callable))
        return Py_NewRef(MON.disable);
    int64_t now = pt_ticks();
    PyMethodDef *ml;
    PyObject *bound;
    if (!c_call_target(callable, args[3], &ml, &bound) || IS_STEP_DEF(ml))
        Py_RETURN_NONE;
    pt_thread_log *t = mon_log(false);
    if (PT_LIKELY(t != NULL))
        pt_thread_log_enter(t, ml, c_name(MON.window, ml, bound, callable), now);
    Py_RETURN_NONE;
}

/* C_RETURN, C_RAISE: (code, offset, callable, arg0) */
static PyObject *mon_c_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)self, (void)nargsf, (void)kwnames;
    int64_t now = pt_ticks();
    PyMethodDef *ml;
    PyObject *bound;
    if (!c_call_target(args[2], args[3], &ml, &bound) || IS_STEP_DEF(ml))
        Py_RETURN_NONE;
    pt_thread_log *t = mon_log(false);
    if (PT_LIKELY(t != NULL))
        pt_thread_log_leave(t, ml, now);
    Py_RETURN_NONE;
}

/* What CPython charges for any monitoring callback (benchmarks). */
static PyObject *mon_null(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    (void)self, (void)args, (void)nargsf, (void)kwnames;
    Py_RETURN_NONE;
}

/* Each event the hook takes, and the callback it goes to (as in cProfile's 3.12 table). */
static const struct {
    const char *event;
    int kind;
} mon_events[] = {
    {"PY_START", MON_START},   {"PY_RESUME", MON_START}, {"PY_THROW", MON_START},
    {"PY_RETURN", MON_RETURN}, {"PY_YIELD", MON_RETURN}, {"PY_UNWIND", MON_RETURN},
    {"CALL", MON_CALL},        {"C_RETURN", MON_C_RETURN}, {"C_RAISE", MON_C_RETURN},
};

static PyObject *monitoring_module(void)
{
    PyObject *sys = PyImport_ImportModule("sys");
    PyObject *mon = sys ? PyObject_GetAttrString(sys, "monitoring") : NULL;
    Py_XDECREF(sys);
    return mon;
}

static bool call_ok(PyObject *result)
{
    Py_XDECREF(result);
    return result != NULL;
}

/* Stops our events and frees the tool id (no-op when not in use). */
static void monitoring_stop(void)
{
    if (MON.tool < 0)
        return;
    PyObject *mon = monitoring_module();
    PyObject *events = mon ? PyObject_GetAttrString(mon, "events") : NULL;
    if (mon && events) {
        call_ok(PyObject_CallMethod(mon, "set_events", "ii", MON.tool, 0));
        for (size_t i = 0; i < PT_ARRAY_LEN(mon_events); i++) {
            PyObject *bit = PyObject_GetAttrString(events, mon_events[i].event);
            if (bit)
                call_ok(PyObject_CallMethod(mon, "register_callback", "iOO", MON.tool, bit, Py_None));
            Py_XDECREF(bit);
        }
        call_ok(PyObject_CallMethod(mon, "free_tool_id", "i", MON.tool));
    }
    PyErr_Clear();
    Py_XDECREF(events);
    Py_XDECREF(mon);
    MON.tool = -1;
    MON.window = NULL;
    MON.generation++; /* stale thread-locals never match again */
}

/* Takes a free tool id (never cProfile's PROFILER_ID, so both can run), registers one
 * callback object per kind and turns the events on. false with why set on failure. */
static bool monitoring_start(bool null_hook, const char **why)
{
    static const vectorcallfunc functions[MON_KINDS] = {mon_start, mon_return, mon_call, mon_c_return, mon_null};
    PyObject *mon = monitoring_module(), *events = mon ? PyObject_GetAttrString(mon, "events") : NULL;
    PyObject *callbacks[MON_KINDS] = {NULL};
    bool ok = false;
    *why = "sys.monitoring is unavailable";
    if (!mon || !events)
        goto out;
    if (!MON.missing)
        MON.missing = PyObject_GetAttrString(mon, "MISSING");
    if (!MON.disable)
        MON.disable = PyObject_GetAttrString(mon, "DISABLE");
    if (!MON.missing || !MON.disable)
        goto out;
    for (int id = 4; id >= 3 && MON.tool < 0; id--) {
        PyObject *owner = PyObject_CallMethod(mon, "get_tool", "i", id);
        if (owner == Py_None && call_ok(PyObject_CallMethod(mon, "use_tool_id", "is", id, "perftracker")))
            MON.tool = id;
        Py_XDECREF(owner);
    }
    *why = "no free sys.monitoring tool id (other tools hold 3 and 4)";
    if (MON.tool < 0)
        goto out;
    for (int k = 0; k < MON_KINDS; k++) {
        MonitorCallback *cb = PyObject_New(MonitorCallback, &MonitorCallback_Type);
        if (!cb)
            goto out;
        cb->vectorcall = functions[k];
        callbacks[k] = (PyObject *)cb;
    }
    long mask = 0;
    *why = "sys.monitoring refused the callbacks";
    for (size_t i = 0; i < PT_ARRAY_LEN(mon_events); i++) {
        PyObject *bit = PyObject_GetAttrString(events, mon_events[i].event);
        PyObject *cb = callbacks[null_hook ? MON_NULL : mon_events[i].kind];
        bool registered = bit && call_ok(PyObject_CallMethod(mon, "register_callback", "iOO", MON.tool, bit, cb));
        mask |= bit ? PyLong_AsLong(bit) : 0;
        Py_XDECREF(bit);
        if (!registered)
            goto out;
    }
    MON.generation++;
    ok = call_ok(PyObject_CallMethod(mon, "set_events", "il", MON.tool, mask));
out:
    for (int k = 0; k < MON_KINDS; k++)
        Py_XDECREF(callbacks[k]);
    Py_XDECREF(events);
    Py_XDECREF(mon);
    PyErr_Clear();
    if (!ok)
        monitoring_stop();
    return ok;
}

/* Opens the window's recording: every existing thread's running frames are entered at
 * the window's start, then the events go on. */
static bool monitoring_begin(pt_window *w, int64_t start, const char **why)
{
    MON.window = w;
    MON.prepared_count = 0;
    mon_thread_count = 0; /* thread states of earlier windows may have been freed and reused */
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts && MON.prepared_count < MON_PREPARED_MAX;
         ts = PyThreadState_Next(ts)) {
        int64_t tid = ts == me ? (int64_t)syscall(SYS_gettid) : (int64_t)ts->native_thread_id;
        pt_thread_log *log = pt_window_add_thread(w, tid);
        if (!log)
            break;
        PyFrameObject *frame = PyThreadState_GetFrame(ts);
        enter_running_frames(w, log, frame, start);
        Py_XDECREF(frame);
        MON.prepared[MON.prepared_count].ts = ts;
        MON.prepared[MON.prepared_count++].log = log;
    }
    return monitoring_start(false, why);
}
#endif

/* ------------------------------------------------------------ windows */

static void set_threading_hook(PyObject *hook, PyObject **previous)
{
    PyObject *threading = PyImport_ImportModule("threading");
    if (!threading) {
        PyErr_Clear();
        return;
    }
    if (previous) {
        *previous = PyObject_CallMethod(threading, "getprofile", NULL);
        if (!*previous)
            PyErr_Clear();
    }
    PyObject *r = PyObject_CallMethod(threading, "setprofile", "O", hook ? hook : Py_None);
    if (!r)
        PyErr_Clear();
    Py_XDECREF(r);
    Py_DECREF(threading);
}

static int64_t dict_int(PyObject *d, const char *key, int64_t fallback)
{
    PyObject *v = d ? PyDict_GetItemString(d, key) : NULL;
    if (!v || !PyLong_Check(v))
        return fallback;
    int64_t x = PyLong_AsLongLong(v);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return fallback;
    }
    return x;
}

static void dict_str(PyObject *d, const char *key, char *out, size_t cap)
{
    PyObject *v = d ? PyDict_GetItemString(d, key) : NULL;
    const char *s = v ? utf8_or(v, NULL) : NULL;
    if (s)
        snprintf(out, cap, "%s", s);
}

/* Asks the Python side who this worker is (rank, backend, GPU, ...). */
static bool fill_identity(pt_window *w)
{
    pt_trace_meta *m = &w->meta;
    m->pid = getpid();
    PyObject *d = M.identity ? PyObject_CallNoArgs(M.identity) : NULL;
    if (!d || !PyDict_Check(d)) {
        PyErr_Clear();
        Py_XDECREF(d);
        d = NULL;
    }
    m->rank = (int32_t)dict_int(d, "rank", -1);
    m->local_rank = (int32_t)dict_int(d, "local_rank", -1);
    m->world_size = (int32_t)dict_int(d, "world_size", -1);
    m->device_count = (int32_t)dict_int(d, "device_count", 0);
    dict_str(d, "host", m->host, sizeof m->host);
    dict_str(d, "backend", m->backend, sizeof m->backend);
    dict_str(d, "device_name", m->device_name, sizeof m->device_name);
    dict_str(d, "software", m->software, sizeof m->software);
    if (!m->host[0])
        gethostname(m->host, sizeof m->host - 1);
    char step_source[256] = ""; /* under `perftracker run`: where the steps come from */
    dict_str(d, "step_source", step_source, sizeof step_source);
    if (step_source[0])
        pt_window_warn(w, "steps: %s", step_source);
    bool cuda = dict_int(d, "cuda", 0) != 0;
    Py_XDECREF(d);
    return cuda;
}

static void begin_window(void)
{
    pt_window *w = pt_collector_window();
    bool cuda = fill_identity(w);
    PyThreadState *me = PyThreadState_Get();
    M.training_tstate = me;
#ifdef PT_MONITORING
    pt_collector_start_sources(cuda);
    const char *why;
    if (!monitoring_begin(w, w->tick_begin, &why)) {
        release_held();
        pt_collector_abort_window(why);
    }
    return;
#endif
    if (me->c_profilefunc && !is_our_hook(me)) {
        pt_collector_abort_window("another profiler (cProfile or sys.setprofile) is active on the training thread");
        return;
    }
    pt_collector_start_sources(cuda);
    /* Before any hook is installed, so these Python calls are not recorded. */
    PyObject *bootstrap = PyCFunction_New(&bootstrap_def, NULL);
    if (bootstrap) {
        set_threading_hook(bootstrap, &M.saved_thread_hook);
        Py_DECREF(bootstrap);
    } else {
        PyErr_Clear();
    }
    int64_t start = w->tick_begin;
    int skipped = 0;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts))
        if (!install_on(ts, w, start))
            skipped++;
    if (!is_our_hook(me)) {
        uninstall_all();
        set_threading_hook(M.saved_thread_hook, NULL);
        Py_CLEAR(M.saved_thread_hook);
        release_held();
        pt_collector_abort_window("the profile hook could not be installed");
        return;
    }
    if (skipped)
        pt_window_warn(w, "%d Python thread(s) not profiled (another profiler owns them, or no per-thread hook "
                          "on this Python)", skipped);
}

static void end_window(void)
{
    pt_window *w = pt_collector_window();
#ifdef PT_MONITORING
    monitoring_stop(); /* threading's and sys.setprofile's hooks were never touched */
#else
    uninstall_all();
    set_threading_hook(M.saved_thread_hook, NULL);
    Py_CLEAR(M.saved_thread_hook);
#endif
    pt_window_close_threads(w);
    release_held();
    pt_collector_end_window();
}

/* ------------------------------------------------------------ Tracer type */

/* Calls the job-secret hook (at most once a second); it returns True when nothing is left
 * to do, and never raises. */
static void secret_step(void)
{
    int64_t now = pt_now_ns();
    if (now < M.secret_next_ns)
        return;
    M.secret_next_ns = now + SECRET_RETRY_NS;
    PyObject *hook = M.secret_hook;
    Py_INCREF(hook);
    PyObject *done = PyObject_CallNoArgs(hook);
    if (!done)
        PyErr_Clear();
    else if (PyObject_IsTrue(done) == 1 && M.secret_hook == hook)
        Py_CLEAR(M.secret_hook);
    Py_XDECREF(done);
    Py_DECREF(hook);
}

static void after_step(pt_step_action a)
{
    if (PT_UNLIKELY(a == PT_STEP_BEGIN))
        begin_window();
    else if (PT_UNLIKELY(a == PT_STEP_END))
        end_window();
    if (PT_UNLIKELY(M.secret_hook != NULL))
        secret_step();
}

static PyObject *tracer_step(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    after_step(pt_collector_step());
    Py_RETURN_NONE;
}

static int64_t current_step_number(void)
{
    int64_t steps, last, mean;
    pt_collector_status(&steps, &last, &mean);
    return steps;
}

/* A step number from Python: util/step_number.h's, bounded as the protocol bounds it. */
static bool step_number_arg(PyObject *arg, int64_t *number)
{
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred())
        return false;
    if (n < 0 || n > PT_STEP_NUMBER_MAX) {
        PyErr_Format(PyExc_ValueError, "step number %lld is outside 0..2^53", n);
        return false;
    }
    *number = n;
    return true;
}

static PyObject *tracer_step_to(PyObject *self, PyObject *arg)
{
    (void)self;
    int64_t number;
    if (!step_number_arg(arg, &number))
        return NULL;
    after_step(pt_collector_step_to(number));
    return PyLong_FromLongLong(current_step_number()); /* saves autostep a second call */
}

static PyObject *tracer_renumber(PyObject *self, PyObject *arg)
{
    (void)self;
    int64_t number;
    if (!step_number_arg(arg, &number))
        return NULL;
    pt_collector_renumber(number);
    Py_RETURN_NONE;
}

static PyObject *tracer_steps(PyObject *self, void *closure)
{
    (void)self, (void)closure;
    return PyLong_FromLongLong(pt_step_count(current_step_number()));
}

static PyObject *tracer_step_number(PyObject *self, void *closure)
{
    (void)self, (void)closure;
    return PyLong_FromLongLong(current_step_number());
}

static PyMethodDef tracer_methods[] = {
    {"step", tracer_step, METH_NOARGS, "Mark the end of a training step (cheap when not profiling)."},
    {"_step_to", tracer_step_to, METH_O,
     "_step_to(number) -> the step's number: a step whose number its step source counted (perftracker.autostep)."},
    {"_renumber", tracer_renumber, METH_O,
     "_renumber(number): a better step source counts from here (perftracker.autostep); no step."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tracer_getset[] = {
    {"steps_done", tracer_steps, NULL, "steps so far in this process, as the step source in use counts them", NULL},
    {"_step_number", tracer_step_number, NULL, "the last step's number, its step source included", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Tracer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "perftracker._perftracker.Tracer",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Base of PerfTracker: step() in C.",
    .tp_methods = tracer_methods,
    .tp_getset = tracer_getset,
    .tp_new = PyType_GenericNew,
};

static PyTypeObject ThreadRecorder_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "perftracker._perftracker.ThreadRecorder",
    .tp_basicsize = sizeof(ThreadRecorder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One thread's profile-hook state (internal).",
};

/* ------------------------------------------------------------ agent hooks */

static int hook_arm(void *ctx, int64_t start_step, int32_t steps, const char *raw_trace_path)
{
    (void)ctx;
    return pt_collector_arm(start_step, steps, raw_trace_path);
}

static void hook_cancel(void *ctx)
{
    (void)ctx;
    pt_collector_cancel();
}

static void hook_status(void *ctx, int64_t *steps_done, int64_t *last_step_end_ns, int64_t *mean_step_ns)
{
    (void)ctx;
    pt_collector_status(steps_done, last_step_end_ns, mean_step_ns);
}

/* The collective bookkeeping's own wrapper (collectives.py) is not the user's code: a
 * stack blocked in all_reduce reads ".. train > all_reduce", as it would without us. */
static bool is_bookkeeping_frame(PyCodeObject *code)
{
    const char *file = code->co_filename ? PyUnicode_AsUTF8(code->co_filename) : NULL;
    if (!file) {
        PyErr_Clear();
        return false;
    }
    return pt_ends_with(file, "/perftracker/collectives.py");
}

static void format_stack(PyThreadState *ts, char *buf, size_t cap)
{
    const char *names[PT_MAX_DEPTH];
    char storage[PT_MAX_DEPTH][128];
    int depth = 0;
    PyFrameObject *f = PyThreadState_GetFrame(ts);
    while (f && depth < PT_MAX_DEPTH) {
        PyCodeObject *code = PyFrame_GetCode(f);
        if (!is_bookkeeping_frame(code)) {
            format_code_name(code, storage[depth], sizeof storage[depth]);
            names[depth] = storage[depth];
            depth++;
        }
        Py_DECREF(code);
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    size_t used = 0;
    buf[0] = '\0';
    for (int i = depth - 1; i >= 0 && used + 1 < cap; i--) {
        int n = snprintf(buf + used, cap - used, "%s%s", names[i], i ? "|" : "");
        if (n < 0)
            break;
        used += PT_MIN((size_t)n, cap - used - 1);
    }
}

/* "name<TAB>ident<TAB>training<TAB>stack" for one thread, the line a hang report sends. */
static void thread_line(PyThreadState *ts, PyObject *active, char *buf, size_t cap, size_t *used)
{
    char stack[8192], name[128] = "";
    format_stack(ts, stack, sizeof stack);
    unsigned long ident = ts->thread_id;
    PyObject *key = PyLong_FromUnsignedLong(ident);
    PyObject *thread = key && active ? PyDict_GetItemWithError(active, key) : NULL; /* borrowed */
    Py_XDECREF(key);
    PyObject *label = thread ? PyObject_GetAttrString(thread, "name") : NULL;
    const char *text = label && PyUnicode_Check(label) ? PyUnicode_AsUTF8(label) : NULL;
    snprintf(name, sizeof name, "%s", text ? text : "");
    Py_XDECREF(label);
    PyErr_Clear();
    for (char *c = name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    if (*used >= cap)
        return;
    int n = snprintf(buf + *used, cap - *used, "thread\t%s\t%lu\t%d\t%s\n", name[0] ? name : "-", ident,
                     ts == M.training_tstate, stack);
    if (n > 0 && (size_t)n < cap - *used)
        *used += (size_t)n;
    else
        buf[*used] = '\0'; /* a thread is sent whole or not at all */
}

typedef struct stack_request {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done, abandoned;
    char stack[8192];
    char threads[PT_STACKS_MAX];
    char replaced[PT_STACKS_MAX]; /* collectives the refresh hook read from a better source */
} stack_request;

/* Under the GIL: the refresh hook (collectives.py: async calls done since, torch's Flight
 * Recorder), then every thread's stack. */
static void take_stacks(stack_request *req)
{
    PyObject *hook = M.hang_hook;
    req->replaced[0] = '\0';
    if (hook) {
        Py_INCREF(hook);
        PyObject *r = PyObject_CallNoArgs(hook);
        const char *text = r && PyUnicode_Check(r) ? PyUnicode_AsUTF8(r) : NULL;
        if (text && strlen(text) < sizeof req->replaced)
            snprintf(req->replaced, sizeof req->replaced, "%s", text);
        Py_XDECREF(r);
        Py_DECREF(hook);
        PyErr_Clear();
    }
    PyObject *name = PyUnicode_FromString("threading");
    PyObject *module = name ? PyImport_GetModule(name) : NULL;
    Py_XDECREF(name);
    PyObject *active = module ? PyObject_GetAttrString(module, "_active") : NULL;
    Py_XDECREF(module);
    if (active && !PyDict_Check(active))
        Py_CLEAR(active);
    PyErr_Clear();
    size_t used = 0;
    req->threads[0] = '\0';
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (ts == me)
            continue; /* this helper */
        if (ts == M.training_tstate)
            format_stack(ts, req->stack, sizeof req->stack);
        thread_line(ts, active, req->threads, sizeof req->threads, &used);
    }
    Py_XDECREF(active);
}

static void *stack_helper(void *arg)
{
    stack_request *req = arg;
    stack_request *taken = calloc(1, sizeof *taken);
    if (taken && Py_IsInitialized()) {
        PyGILState_STATE st = PyGILState_Ensure();
        take_stacks(taken);
        PyGILState_Release(st);
    }
    pthread_mutex_lock(&req->lock);
    if (taken) {
        memcpy(req->stack, taken->stack, sizeof req->stack);
        memcpy(req->threads, taken->threads, sizeof req->threads);
        memcpy(req->replaced, taken->replaced, sizeof req->replaced);
    }
    req->done = true;
    bool abandoned = req->abandoned;
    pthread_cond_signal(&req->done_cond);
    pthread_mutex_unlock(&req->lock);
    free(taken);
    if (abandoned)
        free(req);
    return NULL;
}

/* The agent thread must not wait on the GIL for long (a hung worker may hold it): a
 * helper thread takes the GIL, the agent waits at most two seconds for its answer. The
 * collective bookkeeping needs no GIL and is read whatever happened. */
/* Where the three parts of a hang report's snapshot go (caps may be 0: not wanted). */
typedef struct pt_snapshot_bufs {
    char *stack;
    size_t stack_cap;
    char *threads;
    size_t threads_cap;
    char *collectives;
    size_t collectives_cap;
} pt_snapshot_bufs;

static void take_snapshot(pt_snapshot_bufs *out)
{
    if (out->stack_cap)
        out->stack[0] = '\0';
    if (out->threads_cap)
        out->threads[0] = '\0';
    stack_request *req = calloc(1, sizeof *req);
    pthread_t helper;
    if (req) {
        pthread_mutex_init(&req->lock, NULL);
        pthread_cond_init(&req->done_cond, NULL);
        if (pthread_create(&helper, NULL, stack_helper, req) != 0) {
            free(req);
            req = NULL;
        }
    }
    char *replaced = NULL; /* the refresh hook's collectives, when it had any */
    if (req) {
        pthread_detach(helper);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 2;
        pthread_mutex_lock(&req->lock);
        while (!req->done && pthread_cond_timedwait(&req->done_cond, &req->lock, &deadline) == 0) {
        }
        bool done = req->done;
        if (done) {
            if (out->stack_cap)
                snprintf(out->stack, out->stack_cap, "%s", req->stack);
            if (out->threads_cap)
                snprintf(out->threads, out->threads_cap, "%s", req->threads);
            if (req->replaced[0])
                replaced = strdup(req->replaced);
        } else {
            req->abandoned = true; /* the helper frees it when it finally gets the GIL */
        }
        pthread_mutex_unlock(&req->lock);
        if (done)
            free(req);
    }
    if (out->collectives_cap) {
        size_t used = 0;
        out->collectives[0] = '\0';
        if (replaced && strlen(replaced) < out->collectives_cap) {
            used = strlen(replaced);
            memcpy(out->collectives, replaced, used + 1);
        }
        pt_coll_snapshot(out->collectives + used, out->collectives_cap - used, pt_now_ns(), replaced);
    }
    free(replaced);
}

#ifdef PT_HAVE_AGENT
static void hook_snapshot(void *ctx, pt_agent_snapshot *out)
{
    (void)ctx;
    pt_snapshot_bufs bufs = {out->stack, out->stack_cap, out->threads, out->threads_cap, out->collectives,
                             out->collectives_cap};
    take_snapshot(&bufs);
}
#endif

static bool hook_collective_failed(void *ctx)
{
    (void)ctx;
    return pt_coll_take_failure();
}

static void start_agent(bool auto_trigger)
{
#ifdef PT_HAVE_AGENT
    pt_agent_hooks hooks = {NULL, hook_arm, hook_status, hook_snapshot, hook_collective_failed, hook_cancel};
    pt_error err;
    pt_agent_set_auto_trigger(auto_trigger ? 1 : 0);
    int rc = pt_agent_start(&hooks, &err);
    if (rc == 0) {
        M.agent_running = true;
        pt_collector_set_window_done(pt_agent_window_done);
    } else if (rc < 0) {
        pt_collect_log(PT_LOG_FAILURE, "control-plane agent not started: %s", err.message);
    }
#else
    (void)auto_trigger;
    (void)hook_arm, (void)hook_status, (void)hook_collective_failed, (void)hook_cancel;
#endif
}

/* ------------------------------------------------------------ module functions */

static void set_prefixes(PyObject *list)
{
    for (size_t i = 0; i < M.prefix_count; i++)
        free(M.prefixes[i]);
    M.prefix_count = 0;
    Py_ssize_t n = list && PyList_Check(list) ? PyList_GET_SIZE(list) : 0;
    for (Py_ssize_t i = 0; i < n && M.prefix_count < MAX_PREFIXES; i++) {
        const char *s = utf8_or(PyList_GET_ITEM(list, i), NULL);
        char *copy = s && s[0] ? strdup(s) : NULL;
        if (copy)
            M.prefixes[M.prefix_count++] = copy;
    }
}

static char **string_list(PyObject *list)
{
    Py_ssize_t n = list && PyList_Check(list) ? PyList_GET_SIZE(list) : 0;
    char **out = calloc((size_t)n + 1, sizeof *out);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        const char *s = utf8_or(PyList_GET_ITEM(list, i), "");
        out[i] = strdup(s);
    }
    return out;
}

static PyObject *mod_start(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *keywords[] = {"cli_path", "summary_dir", "sample_period_us", "gpm_period_ms", "gpu",
                               "cupti_libs", "gpu_uuid", "gpu_index", "max_events", "max_gpu_events",
                               "max_samples", "prefixes", "identity", "agent", "auto_trigger", "quiet",
                               "cuda_api_count", NULL};
    const char *cli = "", *summary_dir = "", *uuid = "";
    int period = 100, gpm_ms = 100, gpu = 1, gpu_index = -1, agent = 1, auto_trigger = 0, quiet = 0, api_count = 1;
    Py_ssize_t max_events = 4 << 20, max_gpu = 1 << 20, max_samples = 2 << 20;
    PyObject *libs = NULL, *prefixes = NULL, *identity = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ssiipOsinnnOOpppp", keywords, &cli, &summary_dir, &period, &gpm_ms,
                                     &gpu, &libs, &uuid, &gpu_index, &max_events, &max_gpu, &max_samples, &prefixes,
                                     &identity, &agent, &auto_trigger, &quiet, &api_count))
        return NULL;
    if (M.started)
        Py_RETURN_FALSE;
    pt_collect_log_quiet(quiet);
    set_prefixes(prefixes);
    Py_XINCREF(identity);
    Py_XSETREF(M.identity, identity);
    M.cupti_libs = string_list(libs);
    pt_collect_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.limits.max_cpu_records = (size_t)PT_MAX(max_events, 1);
    cfg.limits.max_gpu_records = (size_t)PT_MAX(max_gpu, 0);
    cfg.limits.max_samples = (size_t)PT_MAX(max_samples, 0);
    cfg.sample_period_us = period;
    cfg.gpm_period_ms = gpm_ms;
    cfg.gpu = gpu != 0;
    cfg.cupti_libs = (const char *const *)M.cupti_libs;
    cfg.count_api_calls = api_count != 0;
    snprintf(cfg.gpu_uuid, sizeof cfg.gpu_uuid, "%s", uuid);
    cfg.gpu_index = gpu_index;
    snprintf(cfg.cli_path, sizeof cfg.cli_path, "%s", cli);
    snprintf(cfg.summary_dir, sizeof cfg.summary_dir, "%s", summary_dir);
    pt_error err;
    if (pt_collector_init(&cfg, &err) != 0) {
        pt_collect_log(PT_LOG_FAILURE, "collector disabled: %s", err.message);
        Py_RETURN_FALSE;
    }
    M.started = true;
    M.training_tstate = PyThreadState_Get(); /* until a window says otherwise */
    if (agent)
        start_agent(auto_trigger != 0);
    Py_RETURN_TRUE;
}

static PyObject *mod_arm(PyObject *self, PyObject *args)
{
    (void)self;
    long long start;
    int steps;
    const char *path = "";
    if (!PyArg_ParseTuple(args, "Li|s", &start, &steps, &path))
        return NULL;
    if (start < 0 || start >= PT_STEP_SOURCE_SPAN)
        return PyErr_Format(PyExc_ValueError, "start step %lld is outside 0..10^12", start);
    /* start counts steps of the source in use (the script's own under perftracker run). */
    int64_t source = pt_step_source(current_step_number());
    return PyBool_FromLong(pt_collector_arm(source * PT_STEP_SOURCE_SPAN + start, steps, path) == 0);
}

static PyObject *mod_wait_idle(PyObject *self, PyObject *args)
{
    (void)self;
    double timeout = 60;
    if (!PyArg_ParseTuple(args, "|d", &timeout))
        return NULL;
    bool idle;
    Py_BEGIN_ALLOW_THREADS idle = pt_collector_wait_idle(timeout);
    Py_END_ALLOW_THREADS return PyBool_FromLong(idle);
}

static PyObject *mod_stats(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    pt_collector_stats s;
    pt_collector_stats_get(&s);
    int64_t steps, last, mean;
    pt_collector_status(&steps, &last, &mean);
    return Py_BuildValue("{s:L,s:L,s:L,s:i,s:s,s:s,s:s,s:K,s:K,s:K,s:K,s:i,s:d,s:s,s:K,s:K,s:O,s:L,s:O,s:O}",
                         "steps_done", (long long)pt_step_count(s.steps_done), /* as steps_done counts */
                         "windows_done", (long long)s.windows_done, "windows_failed", (long long)s.windows_failed,
                         "last_status", s.last_status, "last_trace", s.last_trace,
                         "last_summary", s.last_summary, "last_error", s.last_error, "last_dropped",
                         (unsigned long long)s.last_dropped, "last_cpu_records",
                         (unsigned long long)s.last_cpu_records, "last_gpu_records",
                         (unsigned long long)s.last_gpu_records, "last_samples", (unsigned long long)s.last_samples,
                         "last_sample_period_us", s.last_sample_period_us, "last_sampler_cpu_pct",
                         s.last_sampler_cpu_pct, "last_sampler_reads", s.last_sampler_reads, "last_api_recorded", (unsigned long long)s.last_api_recorded,
                         "last_api_counted", (unsigned long long)s.last_api_counted, "busy", s.busy ? Py_True : Py_False,
                         "mean_step_ns", (long long)mean, "agent", M.agent_running ? Py_True : Py_False,
                         "cupti_compiled", pt_cupti_compiled() ? Py_True : Py_False);
}

static PyObject *mod_shutdown(PyObject *self, PyObject *args)
{
    (void)self;
    double timeout = 60;
    if (!PyArg_ParseTuple(args, "|d", &timeout))
        return NULL;
    if (pt_collector_window()) /* the program ends inside a window: keep what was recorded */
        end_window();
    pt_collector_cancel_pending();
    /* Finish the window being written first: its summary goes out through the agent. */
    Py_BEGIN_ALLOW_THREADS pt_collector_wait_idle(timeout);
    Py_END_ALLOW_THREADS
#ifdef PT_HAVE_AGENT
    if (M.agent_running) {
        Py_BEGIN_ALLOW_THREADS pt_agent_stop();
        Py_END_ALLOW_THREADS M.agent_running = false;
    }
#endif
    Py_BEGIN_ALLOW_THREADS pt_collector_shutdown();
    Py_END_ALLOW_THREADS M.started = false;
    Py_RETURN_NONE;
}

typedef struct snapshot_probe {
    char stack[8192];
    char threads[PT_STACKS_MAX];
    char collectives[PT_STACKS_MAX];
} snapshot_probe;

static void *probe_snapshot(void *arg)
{
    snapshot_probe *p = arg;
    pt_snapshot_bufs bufs = {p->stack, sizeof p->stack, p->threads, sizeof p->threads, p->collectives,
                             sizeof p->collectives};
    take_snapshot(&bufs);
    return NULL;
}

/* Test helper: the snapshot a hang report takes, from a thread of its own as the agent
 * takes it (the GIL is released meanwhile, as it is while training waits): (the training
 * thread's stack, every thread's line, the collective bookkeeping). */
static PyObject *mod_hang_snapshot(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    snapshot_probe *probe = calloc(1, sizeof *probe);
    if (!probe)
        return PyErr_NoMemory();
    pthread_t thread;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = pthread_create(&thread, NULL, probe_snapshot, probe);
    if (rc == 0)
        pthread_join(thread, NULL);
    Py_END_ALLOW_THREADS
    PyObject *out = rc != 0 ? PyErr_Format(PyExc_OSError, "cannot start a thread")
                            : Py_BuildValue("(sss)", probe->stack, probe->threads, probe->collectives);
    free(probe);
    return out;
}

static PyObject *mod_training_stack(PyObject *self, PyObject *unused)
{
    PyObject *all = mod_hang_snapshot(self, unused);
    if (!all)
        return NULL;
    PyObject *stack = PyTuple_GetItem(all, 0);
    Py_XINCREF(stack);
    Py_DECREF(all);
    return stack;
}

/* collectives.py's refresh, called under the GIL before a hang report's stacks. */
static PyObject *mod_set_hang_hook(PyObject *self, PyObject *hook)
{
    (void)self;
    if (hook != Py_None && !PyCallable_Check(hook))
        return PyErr_Format(PyExc_TypeError, "the hang hook must be callable or None");
    PyObject *kept = hook == Py_None ? NULL : hook;
    Py_XINCREF(kept);
    Py_XSETREF(M.hang_hook, kept);
    Py_RETURN_NONE;
}

/* os.register_at_fork(after_in_child=...): a DataLoader worker forked during a window must
 * not keep the parent's hook (it would run traced, into buffers nobody writes). */
static PyObject *mod_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    if (pt_collector_window()) {
#ifdef PT_MONITORING
        monitoring_stop();
#else
        PyEval_SetProfile(NULL, NULL);
        set_threading_hook(M.saved_thread_hook, NULL);
        Py_CLEAR(M.saved_thread_hook);
#endif
        M.held_count = 0; /* the references belong to the parent's window: leaked, not released */
    }
    pt_collector_after_fork_child();
    pt_coll_reset();
    M.started = false;
    M.agent_running = false;
    Py_CLEAR(M.secret_hook);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ the job secret */

static PyObject *mod_job_secret_to_publish(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
#ifdef PT_HAVE_AGENT
    char hex[128];
    if (pt_agent_job_secret_to_publish(hex, sizeof hex)) {
        PyObject *text = PyUnicode_FromString(hex);
        memset(hex, 0, sizeof hex);
        return text;
    }
#endif
    Py_RETURN_NONE;
}

static PyObject *mod_job_secret_published(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
#ifdef PT_HAVE_AGENT
    pt_agent_job_secret_published();
#endif
    Py_RETURN_NONE;
}

static PyObject *mod_job_secret_needed(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
#ifdef PT_HAVE_AGENT
    return PyBool_FromLong(pt_agent_needs_job_secret());
#else
    Py_RETURN_FALSE;
#endif
}

static PyObject *mod_set_job_secret(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_ssize_t len = 0;
    const char *text = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, &len) : NULL;
    if (!text)
        return PyErr_Format(PyExc_TypeError, "the job secret is a str");
#ifdef PT_HAVE_AGENT
    pt_error err;
    if (pt_agent_set_job_secret(text, (size_t)len, &err) != 0)
        return PyErr_Format(PyExc_ValueError, "%s", err.message);
    Py_RETURN_NONE;
#else
    return PyErr_Format(PyExc_RuntimeError, "built without the control-plane agent");
#endif
}

/* Rank 0 found the job secret in the store changed, or planted before it wrote its own
 * (tracer.py): perftracker stops in this process, the training does not. */
static PyObject *mod_job_secret_compromised(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *why = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!why)
        return PyErr_Format(PyExc_TypeError, "the reason is a str");
#ifdef PT_HAVE_AGENT
    Py_BEGIN_ALLOW_THREADS
    pt_agent_abandon(why);
    Py_END_ALLOW_THREADS
#endif
    Py_RETURN_NONE;
}

/* The folder a local window writes to when nobody chose one: the CLI's own choice
 * (round.c), so that Python follows the same policy without a copy of its rules. */
static PyObject *mod_default_output_dir(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    char dir[PT_CTL_MAX_PATH] = PT_DEFAULT_OUTPUT_DIR, note[1024] = "";
#ifdef PT_HAVE_AGENT
    Py_BEGIN_ALLOW_THREADS
    pt_round_default_output_dir(dir, sizeof dir, note, sizeof note);
    Py_END_ALLOW_THREADS
#endif
    return Py_BuildValue("(ss)", dir, note);
}

static PyObject *mod_set_secret_hook(PyObject *self, PyObject *hook)
{
    (void)self;
    if (hook != Py_None && !PyCallable_Check(hook))
        return PyErr_Format(PyExc_TypeError, "the secret hook must be callable or None");
    PyObject *kept = hook == Py_None ? NULL : hook;
    Py_XINCREF(kept);
    Py_XSETREF(M.secret_hook, kept);
    M.secret_next_ns = 0;
    Py_RETURN_NONE;
}

/* Test helper: the name the hook gives a code object or builtin. */
static PyObject *mod_frame_name(PyObject *self, PyObject *obj)
{
    (void)self;
    char name[NAME_MAX_BYTES];
    if (PyCode_Check(obj))
        format_code_name((PyCodeObject *)obj, name, sizeof name);
    else if (PyCFunction_Check(obj))
        format_c_name(((PyCFunctionObject *)obj)->m_ml, ((PyCFunctionObject *)obj)->m_self, name, sizeof name);
    else
        return PyErr_Format(PyExc_TypeError, "expected a code object or a builtin function");
    return PyUnicode_FromString(name);
}

/* Benchmark baseline: a profile hook that does nothing, i.e. what CPython itself charges
 * for having any profile hook installed (bench/collector/bench_overhead.py). */
static int null_hook(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
    (void)obj, (void)frame, (void)what, (void)arg;
    return 0;
}

static PyObject *mod_null_profile(PyObject *self, PyObject *enable)
{
    (void)self;
    PyEval_SetProfile(PyObject_IsTrue(enable) ? null_hook : NULL, NULL);
    Py_RETURN_NONE;
}

/* Benchmark baseline on 3.12+: do-nothing C callbacks for the events our hook takes. */
static PyObject *mod_null_monitoring(PyObject *self, PyObject *enable)
{
    (void)self;
#ifdef PT_MONITORING
    const char *why = NULL;
    if (!PyObject_IsTrue(enable))
        monitoring_stop();
    else if (MON.tool >= 0 || !monitoring_start(true, &why))
        return PyErr_Format(PyExc_RuntimeError, "cannot install the null monitoring hook: %s",
                            why ? why : "the tool is in use");
    Py_RETURN_NONE;
#else
    (void)enable;
    return PyErr_Format(PyExc_RuntimeError, "sys.monitoring needs Python 3.12");
#endif
}

static PyObject *mod_set_prefixes(PyObject *self, PyObject *list)
{
    (void)self;
    set_prefixes(list);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"start", (PyCFunction)(void (*)(void))mod_start, METH_VARARGS | METH_KEYWORDS,
     "Configure the collector once per process; returns True when it started now."},
    {"arm", mod_arm, METH_VARARGS,
     "arm(start_step, steps, raw_trace_path='') -> bool: profile a window (start_step as steps_done counts)."},
    {"wait_idle", mod_wait_idle, METH_VARARGS, "wait_idle(timeout=60) -> bool: wait for pending windows."},
    {"stats", mod_stats, METH_NOARGS, "What the collector did so far."},
    {"shutdown", mod_shutdown, METH_VARARGS, "Finish pending windows and stop the threads."},
    {"frame_name", mod_frame_name, METH_O, "The hook's name for a code object or builtin (tests)."},
    {"set_prefixes", mod_set_prefixes, METH_O, "Path prefixes cut from file names, longest first."},
    {"_null_profile", mod_null_profile, METH_O, "Install (True) or remove a do-nothing profile hook (benchmarks)."},
    {"_null_monitoring", mod_null_monitoring, METH_O,
     "Install (True) or remove do-nothing sys.monitoring callbacks for the hook's events (3.12+ benchmarks)."},
    {"_training_stack", mod_training_stack, METH_NOARGS, "The agent's view of the training thread's stack (tests)."},
    {"_hang_snapshot", mod_hang_snapshot, METH_NOARGS,
     "(training stack, every thread's stack, collectives) as a hang report takes them (tests)."},
    {"_set_hang_hook", mod_set_hang_hook, METH_O, "Called under the GIL before a hang report's stacks."},
    {"_after_fork_child", mod_after_fork_child, METH_NOARGS, "Forget the parent's collector in a forked child."},
    {"_job_secret_to_publish", mod_job_secret_to_publish, METH_NOARGS,
     "Rank 0: the job secret to put into the job's store, or None."},
    {"_job_secret_published", mod_job_secret_published, METH_NOARGS, "Rank 0: the secret is in the store."},
    {"_job_secret_needed", mod_job_secret_needed, METH_NOARGS, "Whether this rank's agent waits for the secret."},
    {"_set_job_secret", mod_set_job_secret, METH_O, "Hand the job secret from the store to the agent."},
    {"_job_secret_compromised", mod_job_secret_compromised, METH_O,
     "Rank 0: the store's job secret was changed or planted; stop perftracker (not the training)."},
    {"_default_output_dir", mod_default_output_dir, METH_NOARGS,
     "(folder, note): where a local window's files go when nobody chose (the CLI's choice); note says why it "
     "is not the shared one, or is ''."},
    {"_set_secret_hook", mod_set_secret_hook, METH_O, "step() calls this (at most once a second) until it "
                                                      "returns True; None removes it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_perftracker", "perftracker's in-process collector (C).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__perftracker(void)
{
    if (PyType_Ready(&Tracer_Type) < 0 || PyType_Ready(&ThreadRecorder_Type) < 0)
        return NULL;
#ifdef PT_MONITORING
    if (PyType_Ready(&MonitorCallback_Type) < 0)
        return NULL;
#endif
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    Py_INCREF(&Tracer_Type);
    if (PyModule_AddObject(m, "Tracer", (PyObject *)&Tracer_Type) < 0) {
        Py_DECREF(&Tracer_Type);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddStringConstant(m, "__version__", PT_VERSION);
    PyModule_AddIntConstant(m, "cupti_compiled", pt_cupti_compiled());
    PyModule_AddIntConstant(m, "STEP_SOURCE_SPAN", (long)PT_STEP_SOURCE_SPAN);
    if (pt_coll_add_to_module(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
