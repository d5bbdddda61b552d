/* module_hook.c -- the profile hook of `perftracker._perftracker` and the frame names it
 * records.
 *
 * The hook (the _lsprof approach). While a window is open every Python thread runs
 * profile_hook through PyEval_SetProfile, with its own ThreadRecorder as the hook's
 * argument, so the hook reaches its thread's log without a lookup or a lock. Per event it
 * reads the clock, finds the callable's name id with one hash probe on pointers
 * (funcs.h) and pushes or pops a record (recorder.h): no allocation, no Python object.
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
 * On 3.12+ the events come through sys.monitoring instead, to C callbacks of our own (the
 * section "the 3.12+ hook" says why): every thread's calls arrive, those of threads C code
 * started included. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "collect/module_state.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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
    for (size_t i = 0; i < module_state.prefix_count; i++) {
        size_t n = strlen(module_state.prefixes[i]);
        if (strncmp(file, module_state.prefixes[i], n) == 0 && file[n])
            return file + n;
    }
    return file;
}

const char *module_utf8_or(PyObject *s, const char *fallback)
{
    const char *u = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
    if (!u) {
        PyErr_Clear();
        return fallback;
    }
    return u;
}

int module_format_code_name(PyCodeObject *code, char *out, size_t cap)
{
    return snprintf(out, cap, "%s: %s", trim_path(module_utf8_or(code->co_filename, "?")),
                    module_utf8_or(code->co_name, "?"));
}

/* What repr() of a builtin says, with the address cut to "0x" as the seed's keys have it.
 * ml and self: a builtin's method def and what it is bound to (NULL or a module for a
 * function). */
int module_format_c_name(const PyMethodDef *ml, PyObject *self, char *out, size_t cap)
{
    if (!self || PyModule_Check(self))
        return snprintf(out, cap, "<built-in function %s>", ml->ml_name);
    return snprintf(out, cap, "<built-in method %s of %s object at 0x>", ml->ml_name, Py_TYPE(self)->tp_name);
}

static bool hold(PyObject *o)
{
    if (module_state.held_count == module_state.held_cap) {
        size_t cap = module_state.held_cap ? module_state.held_cap * 2 : 1024;
        PyObject **held = realloc(module_state.held, cap * sizeof *held);
        if (!held)
            return false;
        module_state.held = held;
        module_state.held_cap = cap;
    }
    Py_INCREF(o);
    module_state.held[module_state.held_count++] = o;
    return true;
}

void module_release_held(void)
{
    for (size_t i = 0; i < module_state.held_count; i++)
        Py_DECREF(module_state.held[i]);
    module_state.held_count = 0;
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
    int n = code ? module_format_code_name(code, name, sizeof name) : module_format_c_name(ml, self, name, sizeof name);
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

static PyTypeObject ThreadRecorder_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "perftracker._perftracker.ThreadRecorder",
    .tp_basicsize = sizeof(ThreadRecorder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One thread's profile-hook state (internal).",
};

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

bool module_is_our_hook(PyThreadState *ts)
{
    return ts->c_profilefunc == profile_hook;
}

bool module_install_on(PyThreadState *ts, pt_window *w, int64_t start)
{
    if (ts->c_profilefunc && !module_is_our_hook(ts))
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

void module_uninstall_all(void)
{
    PyThreadState *me = PyThreadState_Get();
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts)) {
        if (!module_is_our_hook(ts))
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

PyMethodDef module_bootstrap_def = {"_thread_bootstrap", thread_bootstrap, METH_VARARGS, NULL};

/* ------------------------------------------------------------ the 3.12+ hook: sys.monitoring */

#if PY_VERSION_HEX >= 0x030C0000
/* On 3.12 the legacy profile hook is emulated on top of sys.monitoring: an extra layer
 * per event, and a bound builtin object created for every method-descriptor call. PEP
 * 669 lets a tool register its own callables per event instead; ours are C objects
 * called through vectorcall (no argument tuple, no bound method), and a C call arrives as
 * (callable, self), named without allocating. Events are global: every thread's calls
 * arrive, including threads C code started, so a thread finds its log through a
 * thread-local (generation, log) pair, made on its first event of the window. */

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
void module_monitoring_stop(void)
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
bool module_monitoring_start(bool null_hook, const char **why)
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
        module_monitoring_stop();
    return ok;
}

/* Opens the window's recording: every existing thread's running frames are entered at
 * the window's start, then the events go on. */
bool module_monitoring_begin(pt_window *w, int64_t start, const char **why)
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
    return module_monitoring_start(false, why);
}

bool module_monitoring_in_use(void)
{
    return MON.tool >= 0;
}
#endif

/* ------------------------------------------------------------ types */

int module_hook_types_ready(void)
{
    if (PyType_Ready(&ThreadRecorder_Type) < 0)
        return -1;
#ifdef PT_MONITORING
    if (PyType_Ready(&MonitorCallback_Type) < 0)
        return -1;
#endif
    return 0;
}
