/* module.c -- the CPython extension `perftracker._perftracker`: step(), the C profile
 * hook, frame names, and the link to the control plane's agent. This file is the glue
 * to CPython: the Tracer type (step() and its numbering), the module's functions and
 * their method table, the agent's hooks and the job secret. The rest has a file of its
 * own, each with its design: the hook and the names it records (module_hook.c), a
 * window's start and end (module_window.c), a hang report's stacks (module_snapshot.c);
 * module_state.h holds what they share.
 *
 * Outside windows no hook is installed at all, and step() is a counter update and one
 * atomic load (plus, while the job secret is being handed over or watched, a pointer
 * test and a call into tracer.py at most once a second).
 *
 * The job secret (src/control/agent.h). Python (tracer.py) carries rank 0's job secret
 * through the job's torch.distributed store; the _job_secret_* functions are its hands
 * on the C side. While something is left to do (another machine's rank waits for it, or
 * rank 0 watches that the store still holds its own), step() calls tracer.py's hook at
 * most once a second: only the training thread ever touches the store (so no other thread
 * competes with the job's own store calls), and each call is a non-blocking check.
 *
 * Failure policy: nothing here raises into the training loop. A failure abandons the
 * window with one log line and the collector stays ready for the next one. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "collect/collectives.h"
#include "collect/collector.h"
#include "collect/cupti.h"
#include "collect/collectives_module.h"
#include "collect/log.h"
#include "collect/module_state.h"
#include "util/step_number.h"

#ifdef PT_HAVE_AGENT
#include "control/agent.h"
#endif
#include "control/round.h" /* PT_DEFAULT_OUTPUT_DIR */

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct module_state module_state;

#define SECRET_RETRY_NS 1000000000LL

/* ------------------------------------------------------------ Tracer type */

/* Calls the job-secret hook (at most once a second); it returns True when nothing is left
 * to do, and never raises. */
static void secret_step(void)
{
    int64_t now = pt_now_ns();
    if (now < module_state.secret_next_ns)
        return;
    module_state.secret_next_ns = now + SECRET_RETRY_NS;
    PyObject *hook = module_state.secret_hook;
    Py_INCREF(hook);
    PyObject *done = PyObject_CallNoArgs(hook);
    if (!done)
        PyErr_Clear();
    else if (PyObject_IsTrue(done) == 1 && module_state.secret_hook == hook)
        Py_CLEAR(module_state.secret_hook);
    Py_XDECREF(done);
    Py_DECREF(hook);
}

static void after_step(pt_step_action a)
{
    if (PT_UNLIKELY(a == PT_STEP_BEGIN))
        module_begin_window();
    else if (PT_UNLIKELY(a == PT_STEP_END))
        module_end_window();
    if (PT_UNLIKELY(module_state.secret_hook != NULL))
        secret_step();
}

PyObject *module_tracer_step(PyObject *self, PyObject *unused)
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
    {"step", module_tracer_step, METH_NOARGS, "Mark the end of a training step (cheap when not profiling)."},
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

#ifdef PT_HAVE_AGENT
static void hook_snapshot(void *ctx, pt_agent_snapshot *out)
{
    (void)ctx;
    pt_snapshot_bufs bufs = {out->stack, out->stack_cap, out->threads, out->threads_cap, out->collectives,
                             out->collectives_cap};
    module_take_snapshot(&bufs);
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
        module_state.agent_running = true;
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
    for (size_t i = 0; i < module_state.prefix_count; i++)
        free(module_state.prefixes[i]);
    module_state.prefix_count = 0;
    Py_ssize_t n = list && PyList_Check(list) ? PyList_GET_SIZE(list) : 0;
    for (Py_ssize_t i = 0; i < n && module_state.prefix_count < MAX_PREFIXES; i++) {
        const char *s = module_utf8_or(PyList_GET_ITEM(list, i), NULL);
        char *copy = s && s[0] ? strdup(s) : NULL;
        if (copy)
            module_state.prefixes[module_state.prefix_count++] = copy;
    }
}

static char **string_list(PyObject *list)
{
    Py_ssize_t n = list && PyList_Check(list) ? PyList_GET_SIZE(list) : 0;
    char **out = calloc((size_t)n + 1, sizeof *out);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        const char *s = module_utf8_or(PyList_GET_ITEM(list, i), "");
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
    if (module_state.started)
        Py_RETURN_FALSE;
    pt_collect_log_quiet(quiet);
    set_prefixes(prefixes);
    Py_XINCREF(identity);
    Py_XSETREF(module_state.identity, identity);
    module_state.cupti_libs = string_list(libs);
    pt_collect_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.limits.max_cpu_records = (size_t)PT_MAX(max_events, 1);
    cfg.limits.max_gpu_records = (size_t)PT_MAX(max_gpu, 0);
    cfg.limits.max_samples = (size_t)PT_MAX(max_samples, 0);
    cfg.sample_period_us = period;
    cfg.gpm_period_ms = gpm_ms;
    cfg.gpu = gpu != 0;
    cfg.cupti_libs = (const char *const *)module_state.cupti_libs;
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
    module_state.started = true;
    module_state.training_tstate = PyThreadState_Get(); /* until a window says otherwise */
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
                         "mean_step_ns", (long long)mean, "agent", module_state.agent_running ? Py_True : Py_False,
                         "cupti_compiled", pt_cupti_compiled() ? Py_True : Py_False);
}

static PyObject *mod_shutdown(PyObject *self, PyObject *args)
{
    (void)self;
    double timeout = 60;
    if (!PyArg_ParseTuple(args, "|d", &timeout))
        return NULL;
    if (pt_collector_window()) /* the program ends inside a window: keep what was recorded */
        module_end_window();
    pt_collector_cancel_pending();
    /* Finish the window being written first: its summary goes out through the agent. */
    Py_BEGIN_ALLOW_THREADS pt_collector_wait_idle(timeout);
    Py_END_ALLOW_THREADS
#ifdef PT_HAVE_AGENT
    if (module_state.agent_running) {
        Py_BEGIN_ALLOW_THREADS pt_agent_stop();
        Py_END_ALLOW_THREADS module_state.agent_running = false;
    }
#endif
    Py_BEGIN_ALLOW_THREADS pt_collector_shutdown();
    Py_END_ALLOW_THREADS module_state.started = false;
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
    module_take_snapshot(&bufs);
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
    Py_XSETREF(module_state.hang_hook, kept);
    Py_RETURN_NONE;
}

/* os.register_at_fork(after_in_child=...): a DataLoader worker forked during a window must
 * not keep the parent's hook (it would run traced, into buffers nobody writes). */
static PyObject *mod_after_fork_child(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    if (pt_collector_window()) {
#ifdef PT_MONITORING
        module_monitoring_stop();
#else
        PyEval_SetProfile(NULL, NULL);
        module_set_threading_hook(module_state.saved_thread_hook, NULL);
        Py_CLEAR(module_state.saved_thread_hook);
#endif
        module_state.held_count = 0; /* the references belong to the parent's window: leaked, not released */
    }
    pt_collector_after_fork_child();
    pt_coll_reset();
    module_state.started = false;
    module_state.agent_running = false;
    Py_CLEAR(module_state.secret_hook);
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
    Py_XSETREF(module_state.secret_hook, kept);
    module_state.secret_next_ns = 0;
    Py_RETURN_NONE;
}

/* Test helper: the name the hook gives a code object or builtin. */
static PyObject *mod_frame_name(PyObject *self, PyObject *obj)
{
    (void)self;
    char name[NAME_MAX_BYTES];
    if (PyCode_Check(obj))
        module_format_code_name((PyCodeObject *)obj, name, sizeof name);
    else if (PyCFunction_Check(obj))
        module_format_c_name(((PyCFunctionObject *)obj)->m_ml, ((PyCFunctionObject *)obj)->m_self, name, sizeof name);
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
        module_monitoring_stop();
    else if (module_monitoring_in_use() || !module_monitoring_start(true, &why))
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
    if (PyType_Ready(&Tracer_Type) < 0 || module_hook_types_ready() < 0)
        return NULL;
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
