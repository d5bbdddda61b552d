/* module_window.c -- a window's start and end in `perftracker._perftracker`, when step()
 * opens or closes one (collector.h's window lifecycle).
 *
 * A window opens: the Python side says who this worker is (rank, backend, GPU: the
 * identity callable), the GPU and hardware sources start, and the hook goes onto every
 * thread (module_hook.c). When the training thread cannot be hooked (another profiler
 * owns it), the window is abandoned with one log line and the collector stays ready for
 * the next one. A window closes: the hooks come off, threading's own profile hook is put
 * back, the threads' logs close and the names' references are released; the collector
 * then writes the window on its own thread. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "collect/module_state.h"

#include <string.h>
#include <unistd.h>

void module_set_threading_hook(PyObject *hook, PyObject **previous)
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
    const char *s = v ? module_utf8_or(v, NULL) : NULL;
    if (s)
        snprintf(out, cap, "%s", s);
}

/* Asks the Python side who this worker is (rank, backend, GPU, ...). */
static bool fill_identity(pt_window *w)
{
    pt_trace_meta *m = &w->meta;
    m->pid = getpid();
    PyObject *d = module_state.identity ? PyObject_CallNoArgs(module_state.identity) : NULL;
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

void module_begin_window(void)
{
    pt_window *w = pt_collector_window();
    bool cuda = fill_identity(w);
    PyThreadState *me = PyThreadState_Get();
    module_state.training_tstate = me;
#ifdef PT_MONITORING
    pt_collector_start_sources(cuda);
    const char *why;
    if (!module_monitoring_begin(w, w->tick_begin, &why)) {
        module_release_held();
        pt_collector_abort_window(why);
    }
    return;
#endif
    if (me->c_profilefunc && !module_is_our_hook(me)) {
        pt_collector_abort_window("another profiler (cProfile or sys.setprofile) is active on the training thread");
        return;
    }
    pt_collector_start_sources(cuda);
    /* Before any hook is installed, so these Python calls are not recorded. */
    PyObject *bootstrap = PyCFunction_New(&module_bootstrap_def, NULL);
    if (bootstrap) {
        module_set_threading_hook(bootstrap, &module_state.saved_thread_hook);
        Py_DECREF(bootstrap);
    } else {
        PyErr_Clear();
    }
    int64_t start = w->tick_begin;
    int skipped = 0;
    for (PyThreadState *ts = PyInterpreterState_ThreadHead(me->interp); ts; ts = PyThreadState_Next(ts))
        if (!module_install_on(ts, w, start))
            skipped++;
    if (!module_is_our_hook(me)) {
        module_uninstall_all();
        module_set_threading_hook(module_state.saved_thread_hook, NULL);
        Py_CLEAR(module_state.saved_thread_hook);
        module_release_held();
        pt_collector_abort_window("the profile hook could not be installed");
        return;
    }
    if (skipped)
        pt_window_warn(w, "%d Python thread(s) not profiled (another profiler owns them, or no per-thread hook "
                          "on this Python)", skipped);
}

void module_end_window(void)
{
    pt_window *w = pt_collector_window();
#ifdef PT_MONITORING
    module_monitoring_stop(); /* threading's and sys.setprofile's hooks were never touched */
#else
    module_uninstall_all();
    module_set_threading_hook(module_state.saved_thread_hook, NULL);
    Py_CLEAR(module_state.saved_thread_hook);
#endif
    pt_window_close_threads(w);
    module_release_held();
    pt_collector_end_window();
}
