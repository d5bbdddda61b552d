/* collectives_module.h -- adds the collective bookkeeping's functions (_coll_group,
 * _coll_enter, _coll_leave, _coll_snapshot) and names (COLL_OPS, COLL_DTYPES, COLL_*
 * states) to the extension module. Needs Python.h first. */
#ifndef PT_COLLECT_COLLECTIVES_MODULE_H
#define PT_COLLECT_COLLECTIVES_MODULE_H

int pt_coll_add_to_module(PyObject *module); /* 0, or -1 with a Python error set */

#endif
