/* module_snapshot.c -- a hang report's snapshot (hook_snapshot in module.c, for the
 * agent): the training thread's stack, every thread's line, and the collective
 * bookkeeping.
 *
 * A helper thread takes the GIL, calls collectives.py's refresh (async calls done since,
 * torch's Flight Recorder), and formats every thread's stack, the training thread marked;
 * the agent waits at most two seconds for it, then adds the collective bookkeeping
 * (collectives.h), which needs no GIL. A helper that gets the GIL later frees its request
 * itself. The collective wrapper's own frames (collectives.py) are left out of the stacks:
 * a stack blocked in all_reduce reads as it would without us. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "collect/collectives.h"
#include "collect/module_state.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
            module_format_code_name(code, storage[depth], sizeof storage[depth]);
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
                     ts == module_state.training_tstate, stack);
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
    PyObject *hook = module_state.hang_hook;
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
        if (ts == module_state.training_tstate)
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
void module_take_snapshot(pt_snapshot_bufs *out)
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

