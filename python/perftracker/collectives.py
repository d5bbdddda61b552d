"""Always-on bookkeeping of this process's torch.distributed collectives.

For each process group the C side (src/collect/collectives.h) keeps a sequence number and
the last calls: operation, element count, dtype, and whether the call entered, was issued
or completed (or failed, with its error). A hang report reads it without the GIL and the
analysis lines up the ranks' calls by their numbers (src/diagnose/hangs.c).

Where it comes from. install() wraps the collective functions of torch.distributed (the
module's names and distributed_c10d's, so helpers such as all_gather_object that call
them are seen through them): each call registers its group once (name, backend, member
ranks), then costs one C call before and one after. That works with every backend and
torch version, torch 1.13 included. It does not see calls torch makes in C++ on its own
(DDP's gradient buckets): where torch keeps its Flight Recorder (torch 2.x with NCCL,
TORCH_NCCL_TRACE_BUFFER_SIZE > 0), a hang report takes that group's calls from it instead
(refresh(), called under the GIL just before the stacks are taken), so the buckets count.

It never raises into or stalls the training loop: any failure of the bookkeeping falls
back to calling the original function unrecorded, and an exception of the collective
itself is recorded and re-raised unchanged. Cost per call: bench/collector/bench_collectives.py.
"""
import functools
import inspect
import os
import pickle
import sys

from perftracker import _perftracker

# torch.distributed function -> (the operation recorded, the parameter holding its input)
_SPECS = {
    "all_reduce": ("all_reduce", "tensor"),
    "broadcast": ("broadcast", "tensor"),
    "reduce": ("reduce", "tensor"),
    "all_gather": ("all_gather", "tensor"),
    "all_gather_into_tensor": ("all_gather_into_tensor", "input_tensor"),
    "_all_gather_base": ("all_gather_into_tensor", "input_tensor"),
    "gather": ("gather", "tensor"),
    "scatter": ("scatter", "tensor"),
    "reduce_scatter": ("reduce_scatter", "input_list"),
    "reduce_scatter_tensor": ("reduce_scatter_tensor", "input"),
    "_reduce_scatter_base": ("reduce_scatter_tensor", "input"),
    "all_to_all": ("all_to_all", "input_tensor_list"),
    "all_to_all_single": ("all_to_all_single", "input"),
    "barrier": ("barrier", None),
    "monitored_barrier": ("monitored_barrier", None),
}
_MAX_PENDING = 256          # async calls whose completion is still looked for
_FR_STATES = {"scheduled": "issued", "started": "entered", "completed": "completed"}
_FR_DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
              "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool"}

_groups = {}                # id(group argument) -> (group index or -1, the group object)
_pending = []               # (token, work) of async calls not known to be done
_dtype_index = {}
_installed = False
observer = None             # autostep's sequence learner: called with the operation's index after each call
after_init = None           # tracer.py's: shares the job secret as init_process_group returns
_OP_INDEX = {name: i for i, name in enumerate(_perftracker.COLL_OPS)}
_OTHER_DTYPE = len(_perftracker.COLL_DTYPES) - 1


def _c10d():
    return sys.modules.get("torch.distributed.distributed_c10d")


def _group_name(c10d, pg):
    for get in (lambda: c10d._get_process_group_name(pg), lambda: pg.group_name,
                lambda: c10d._world.pg_names[pg], lambda: c10d._pg_names[pg]):
        try:
            name = get()
            if name:
                return str(name)
        except Exception:
            continue
    return None


def _group_ranks(c10d, pg):
    try:
        return sorted(int(r) for r in c10d.get_process_group_ranks(pg))
    except Exception:
        pass
    try:
        if pg is c10d._get_default_group():
            return list(range(c10d.get_world_size()))
        return sorted(int(r) for r in c10d._pg_group_ranks[pg])
    except Exception:
        return None


def _register(group):
    """The group's index in the C table, registered on first use; -1: not recorded (not a
    member, or a group the bookkeeping cannot describe). Raises before init_process_group
    (not cached: the call itself then raises the real error)."""
    c10d = _c10d()
    pg = group
    if group is None or group is c10d.GroupMember.WORLD:
        pg = c10d._get_default_group()
    index = -1
    if pg is not c10d.GroupMember.NON_GROUP_MEMBER:
        name, ranks = _group_name(c10d, pg), _group_ranks(c10d, pg)
        try:
            backend = str(c10d.get_backend(pg))
        except Exception:
            backend = ""
        if name and ranks:
            index = _perftracker._coll_group(name, backend, ranks)
    _groups[id(group)] = (index, group)
    return index


def _group_index(group):
    hit = _groups.get(id(group))
    if hit is not None and hit[1] is group:
        return hit[0]
    return _register(group)


def _dtype_of(tensor):
    index = _dtype_index.get(tensor.dtype)
    if index is None:
        name = str(tensor.dtype).replace("torch.", "")
        index = _perftracker.COLL_DTYPES.index(name) if name in _perftracker.COLL_DTYPES else _OTHER_DTYPE
        _dtype_index[tensor.dtype] = index
    return index


def _count_and_dtype(value):
    """Elements of the call's input (a tensor, or a list of them) and its dtype index."""
    try:
        index = _dtype_index.get(value.dtype)  # a tensor: the usual case, kept short
        return value.numel(), index if index is not None else _dtype_of(value)
    except AttributeError:
        pass
    if isinstance(value, (list, tuple)) and value:
        return sum(t.numel() for t in value), _dtype_of(value[0])
    return (0 if isinstance(value, (list, tuple)) else -1), _OTHER_DTYPE


def _error_text(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return " ".join(text.split())[:1000]


def _watch(token, work):
    """An async call: done when its Work says so (looked at by refresh())."""
    if len(_pending) >= _MAX_PENDING:
        refresh_pending()
        del _pending[: len(_pending) - _MAX_PENDING + 1]
    _pending.append((token, work))


def refresh_pending():
    """Marks the async calls whose Work completed (or failed) since."""
    leave = _perftracker._coll_leave
    still = []
    for token, work in _pending:
        try:
            done = work.is_completed()
        except Exception as exc:
            leave(token, _perftracker.COLL_FAILED, _error_text(exc))
            continue
        if done:
            leave(token, _perftracker.COLL_COMPLETED)
        else:
            still.append((token, work))
    _pending[:] = still


def _observe(op_index):
    """Tells the step learner a collective returned: a step that begins at it begins when
    every rank leaves it, the one moment of the call the ranks share."""
    hook = observer
    if hook is not None:
        try:
            hook(op_index)
        except Exception:
            pass


def _wrap(fn, op, input_name):
    """The wrapper for one torch.distributed function: positions come from its own
    signature, so it follows the torch version it wraps."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return fn
    group_pos = params.index("group") if "group" in params else None
    input_pos = params.index(input_name) if input_name in params else None
    if group_pos is None:
        return fn
    op_index = _OP_INDEX[op]
    enter, leave = _perftracker._coll_enter, _perftracker._coll_leave
    completed, issued, failed = _perftracker.COLL_COMPLETED, _perftracker.COLL_ISSUED, _perftracker.COLL_FAILED
    group_index, count_and_dtype, no_dtype = _group_index, _count_and_dtype, _OTHER_DTYPE

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            group = args[group_pos] if len(args) > group_pos else kwargs.get("group")
            index = group_index(group)
            token = 0
            if index >= 0:
                if input_pos is None:
                    count, dtype = 0, no_dtype
                else:
                    count, dtype = count_and_dtype(args[input_pos] if len(args) > input_pos
                                                   else kwargs.get(input_name))
                token = enter(index, op_index, count, dtype)
        except Exception:
            token = 0
        if not token:
            result = fn(*args, **kwargs)
            _observe(op_index)
            return result
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            try:
                leave(token, failed, _error_text(exc))
            except Exception:
                pass
            raise
        try:
            if result is None:
                leave(token, completed)
            else:
                leave(token, issued)
                _watch(token, result)
        except Exception:
            pass
        _observe(op_index)
        return result

    wrapper.__perftracker_wraps__ = fn
    return wrapper


def _then_share_secret(fn):
    """init_process_group, then after_init: its rendezvous has just brought every rank
    together, so rank 0 publishes the job secret and the others fetch it before their first
    collective, which may be the one that hangs (step() would come too late)."""
    @functools.wraps(fn)
    def init(*args, **kwargs):
        result = fn(*args, **kwargs)
        hook = after_init
        if hook is not None:
            try:
                hook()
            except Exception:
                pass
        return result

    init.__perftracker_wraps__ = fn
    return init


def _forget_groups(fn):
    @functools.wraps(fn)
    def destroy(*args, **kwargs):
        try:
            _groups.clear()
            del _pending[:]
        except Exception:
            pass
        return fn(*args, **kwargs)

    destroy.__perftracker_wraps__ = fn
    return destroy


def install():
    """Wraps torch.distributed's collectives (once; True when they are wrapped). Needs
    torch.distributed imported: PerfTracker() calls it, and again from step() until it
    is (the usual script imports torch first)."""
    global _installed
    if _installed:
        return True
    dist = sys.modules.get("torch.distributed")
    c10d = _c10d()
    if dist is None or c10d is None:
        return False
    try:
        if not dist.is_available():
            _installed = True  # nothing to wrap, ever
            return True
        for name, (op, input_name) in _SPECS.items():
            fn = getattr(c10d, name, None)
            if fn is None or hasattr(fn, "__perftracker_wraps__"):
                continue
            wrapped = _wrap(fn, op, input_name)
            for module in (c10d, dist):
                if getattr(module, name, None) is fn:
                    setattr(module, name, wrapped)
        for name, wrap in (("destroy_process_group", _forget_groups), ("init_process_group", _then_share_secret)):
            fn = getattr(c10d, name, None)
            if fn is None or hasattr(fn, "__perftracker_wraps__"):
                continue
            wrapped = wrap(fn)
            for module in (c10d, dist):
                if getattr(module, name, None) is fn:
                    setattr(module, name, wrapped)
        _perftracker._set_hang_hook(refresh)
    except Exception:
        return False
    _installed = True
    return True


# ------------------------------------------------------------ torch's Flight Recorder

def _fr_ranks(config):
    ranks = config.get("ranks") if isinstance(config, dict) else None
    if isinstance(ranks, str):
        ranks = [int(r) for r in ranks.strip("[] ").split(",") if r.strip()]
    return sorted(int(r) for r in ranks) if ranks else None


def _run_notation(ranks):
    parts, i = [], 0
    while i < len(ranks):
        j = i + 1
        while j < len(ranks) and ranks[j] == ranks[j - 1] + 1:
            j += 1
        parts.append(str(ranks[i]) if j - i == 1 else "%d-%d" % (ranks[i], ranks[j - 1]))
        i = j
    return ",".join(parts)


def flight_recorder_text(dump, now_ns):
    """Snapshot lines (collectives.h's format) for the groups a Flight Recorder dump (the
    dict torch's _dump_nccl_trace pickles) holds: its last calls per group, numbered by
    torch's collective_seq_id, p2p calls left out."""
    entries = [e for e in dump.get("entries", ()) if isinstance(e, dict) and not e.get("is_p2p")]
    configs = dump.get("pg_config", {})
    by_group = {}
    for e in entries:
        pg = e.get("process_group")
        name = str(pg[0] if isinstance(pg, (list, tuple)) and pg else e.get("pg_id", ""))
        seq = int(e.get("collective_seq_id") or 0)
        if name and seq > 0:
            by_group.setdefault(name, {})[seq] = e
    lines = []
    for name in sorted(by_group):
        config = configs.get(name) if isinstance(configs, dict) else None
        ranks = _fr_ranks(config)
        lines.append("group\t%s\tnccl\t%d\t%s" % (name, len(ranks) if ranks else -1,
                                                  _run_notation(ranks) if ranks else "-"))
        calls = by_group[name]
        for seq in sorted(calls)[-16:]:
            e = calls[seq]
            op = str(e.get("profiling_name", "unknown")).split(":", 1)[-1] or "unknown"
            sizes = e.get("input_sizes") or []
            count = 0
            for shape in sizes:
                n = 1
                for d in shape:
                    n *= int(d)
                count += n
            dtypes = e.get("input_dtypes") or ["-"]
            dtype = _FR_DTYPES.get(str(dtypes[0]), str(dtypes[0]))
            state = _FR_STATES.get(str(e.get("state")), "issued")
            created = e.get("time_created_ns")
            created = int(created) if created is not None else now_ns
            lines.append("call\t%d\t%s\t%d\t%s\t%s\t%d" % (seq, op, count if sizes else -1, dtype, state,
                                                           max(now_ns - created, 0) // 1000))
    return "".join(line.replace("\n", " ") + "\n" for line in lines)


def _flight_recorder():
    if int(os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE", "0") or 0) <= 0:
        return None
    torch_c = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(torch_c, "_dump_nccl_trace", None) if torch_c else None
    if dump is None:
        return None
    try:
        data = pickle.loads(dump(includeCollectives=True, includeStackTraces=False, onlyActive=False))
    except TypeError:
        data = pickle.loads(dump())
    import time
    return flight_recorder_text(data, time.time_ns()) or None


def refresh():
    """Called by the collector under the GIL right before a hang report's stacks: async
    calls that completed since, and (returned) Flight Recorder lines that replace the
    wrappers' view of the groups they cover. Never raises."""
    try:
        refresh_pending()
    except Exception:
        pass
    try:
        return _flight_recorder()
    except Exception:
        return None
