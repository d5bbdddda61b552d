"""perftracker run's bootstrap: `perftracker run COMMAND` puts this folder first on
PYTHONPATH, so every Python process of the job runs this file at startup (site imports
the first sitecustomize it finds). It does as little as it can, since it also runs in
processes that are not workers (launchers, tools the job starts):

1. It takes its own folder off sys.path and runs the sitecustomize that would have run
   without it (Debian's, a virtualenv's, the user's), so the program sees the sys.path
   and the startup it would see without perftracker.
2. Only in a process that imports torch, once torch is imported, it loads the collector
   and the step finder (perftracker.autostep): at once in a worker (a rank variable --
   RANK, SLURM_PROCID, ... -- in its environment), else when the process calls
   torch.distributed.init_process_group(). A process without torch (a launcher, a tool)
   never loads perftracker. Processes multiprocessing starts for a worker (DataLoader
   workers, spawn) inherit its rank variables but are not workers, and torchrun (or
   torch.distributed.launch/run) may have a rank variable of its own under SLURM or MPI:
   both are left alone.

The perftracker package is found where it is installed; when it is not importable (a
build tree), the folder above this package is appended to sys.path, after everything the
program would import first. Nothing here may stop the program: every failure is one line
on stderr.
"""
import os
import sys

_BOOT_DIR = os.path.dirname(os.path.abspath(__file__))


def _chain_to_the_next_sitecustomize():
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _BOOT_DIR]
    import importlib.util
    me = sys.modules.pop("sitecustomize", None)
    try:
        spec = importlib.util.find_spec("sitecustomize")
        if spec is not None and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != _BOOT_DIR:
            import importlib
            importlib.import_module("sitecustomize")
    except Exception as exc:  # what site itself does with a failing sitecustomize
        sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                         % (type(exc).__name__, exc))
    finally:
        if "sitecustomize" not in sys.modules and me is not None:
            sys.modules["sitecustomize"] = me


def _is_torch_launcher():
    """torchrun and torch.distributed.launch/run start the workers; under SLURM or MPI they
    have a rank variable of their own (the node's task), but they are not workers."""
    argv = getattr(sys, "orig_argv", None) or []
    return any(os.path.basename(a) == "torchrun" or a in ("torch.distributed.run", "torch.distributed.launch")
               for a in argv[:3])


def _is_multiprocessing_child():
    argv = getattr(sys, "orig_argv", None) or []
    return "--multiprocessing-fork" in argv or any("multiprocessing" in a and "import" in a for a in argv[1:3])


_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")  # src/control/job_env.c's


class _AfterTorchImport:
    """A meta-path finder that finds nothing: when `torch` is first imported it lets the
    other finders find it, and runs perftracker's set-up once torch's __init__ is done
    (torch.optim, torch.utils.data and torch.distributed are imported by then). It takes
    itself off sys.meta_path at once, so it costs one call per import until then."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_then_set_up(module):
            exec_module(module)
            _set_up_after_torch()

        loader.exec_module = exec_then_set_up
        return spec


def _set_up_after_torch():
    try:
        try:
            import perftracker  # noqa: F401  (installed, or already on the path)
        except ImportError:
            sys.path.append(os.path.dirname(os.path.dirname(_BOOT_DIR)))
        from perftracker import autostep
        autostep.after_torch(worker=any(os.environ.get(v, "").strip() for v in _RANK_VARIABLES))
    except Exception as exc:
        sys.stderr.write("[perftracker] perftracker run: the collector was not loaded: %s: %s\n"
                         % (type(exc).__name__, exc))


_chain_to_the_next_sitecustomize()
if os.environ.get("PERFTRACKER_RUN") == "1" and not _is_multiprocessing_child() and not _is_torch_launcher():
    if "torch" in sys.modules:  # the chained sitecustomize imported it
        _set_up_after_torch()
    else:
        sys.meta_path.insert(0, _AfterTorchImport())
