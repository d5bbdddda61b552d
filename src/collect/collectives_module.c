/* collectives_module.c -- the Python face of the collective bookkeeping (collectives.h),
 * part of the `perftracker._perftracker` extension: what python/perftracker/collectives.py
 * calls around every torch.distributed collective.
 *
 * _coll_enter and _coll_leave are on the path of every collective, so they take their
 * arguments as METH_FASTCALL integers and do nothing else: no allocation, no Python
 * object made except the token. A bad argument is not recorded, never raised: the
 * wrapper calls them inside the training loop. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "collect/collectives.h"
#include "collect/collectives_module.h"
#include "util/common.h"

#include <stdlib.h>

/* An int argument, or def when it is not one (the error is cleared). */
static long long int_arg(PyObject *arg, long long def)
{
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return def;
    }
    return v;
}

/* _coll_group(name, backend, ranks) -> index, or -1 when not recorded. */
static PyObject *coll_group(PyObject *self, PyObject *args)
{
    (void)self;
    const char *name, *backend;
    PyObject *ranks;
    if (!PyArg_ParseTuple(args, "ssO", &name, &backend, &ranks))
        return NULL;
    PyObject *seq = PySequence_Fast(ranks, "ranks must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int32_t *list = n > 0 && n <= (1 << 20) ? malloc((size_t)n * sizeof *list) : NULL;
    int index = -1;
    if (list) {
        bool ok = true;
        for (Py_ssize_t i = 0; i < n && ok; i++) {
            long long r = int_arg(PySequence_Fast_GET_ITEM(seq, i), -1);
            ok = r >= 0 && r <= INT32_MAX;
            list[i] = (int32_t)r;
        }
        if (ok)
            index = pt_coll_group(name, backend, list, (size_t)n);
        free(list);
    }
    Py_DECREF(seq);
    return PyLong_FromLong(index);
}

/* _coll_enter(group, op, count, dtype) -> token (0: not recorded). */
static PyObject *coll_enter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4)
        return PyLong_FromLong(0);
    uint64_t token = pt_coll_enter((int)int_arg(args[0], -1), (int)int_arg(args[1], -1), int_arg(args[2], -1),
                                   (int)int_arg(args[3], -1));
    return PyLong_FromUnsignedLongLong(token);
}

/* _coll_leave(token, state[, error]) */
static PyObject *coll_leave(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 2)
        Py_RETURN_NONE;
    unsigned long long token = PyLong_AsUnsignedLongLong(args[0]);
    if (token == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const char *error = NULL;
    if (nargs > 2 && PyUnicode_Check(args[2])) {
        error = PyUnicode_AsUTF8(args[2]);
        if (!error)
            PyErr_Clear();
    }
    pt_coll_leave(token, (int)int_arg(args[1], 0), error);
    Py_RETURN_NONE;
}

/* _coll_snapshot() -> the snapshot text the agent would send (tests, benchmarks). */
static PyObject *coll_snapshot(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    size_t cap = 64u << 10;
    char *buf = malloc(cap);
    if (!buf)
        return PyErr_NoMemory();
    size_t n = pt_coll_snapshot(buf, cap, pt_now_ns(), NULL);
    PyObject *text = PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, "replace");
    free(buf);
    return text;
}

static PyObject *coll_reset(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    pt_coll_reset();
    Py_RETURN_NONE;
}

static PyMethodDef pt_coll_methods[] = {
    {"_coll_group", coll_group, METH_VARARGS, "_coll_group(name, backend, ranks) -> group index or -1."},
    {"_coll_enter", (PyCFunction)(void (*)(void))coll_enter, METH_FASTCALL,
     "_coll_enter(group, op, count, dtype) -> token (0: not recorded)."},
    {"_coll_leave", (PyCFunction)(void (*)(void))coll_leave, METH_FASTCALL,
     "_coll_leave(token, state, error=None): how the call ended."},
    {"_coll_snapshot", coll_snapshot, METH_NOARGS, "The collective bookkeeping as a hang report sends it."},
    {"_coll_reset", coll_reset, METH_NOARGS, "Forget every group (tests)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *names_tuple(const char *const *names, size_t n)
{
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(names[i]);
        if (!s) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
    }
    return t;
}

int pt_coll_add_to_module(PyObject *m)
{
    if (PyModule_AddFunctions(m, pt_coll_methods) < 0)
        return -1;
    PyObject *ops = names_tuple(pt_coll_op_names, pt_coll_op_count);
    PyObject *dtypes = names_tuple(pt_coll_dtype_names, pt_coll_dtype_count);
    if (!ops || !dtypes || PyModule_AddObject(m, "COLL_OPS", ops) < 0) {
        Py_XDECREF(ops), Py_XDECREF(dtypes);
        return -1;
    }
    if (PyModule_AddObject(m, "COLL_DTYPES", dtypes) < 0) {
        Py_DECREF(dtypes);
        return -1;
    }
    if (PyModule_AddIntConstant(m, "COLL_ISSUED", PT_COLL_ISSUED) < 0 ||
        PyModule_AddIntConstant(m, "COLL_COMPLETED", PT_COLL_COMPLETED) < 0 ||
        PyModule_AddIntConstant(m, "COLL_FAILED", PT_COLL_FAILED) < 0)
        return -1;
    return 0;
}
