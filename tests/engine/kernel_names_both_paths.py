"""The same job recorded by both paths gives the same kernel keys: the H200 job of
../shared/data/traces/h200 was recorded once by torch.profiler (kineto_healthy, demangled
names) and once by perftracker's collector (native_healthy, the linkage names CUPTI
reports). Summarized, every compute kernel key (name + grid + block) the native trace
keeps must be a key of the Kineto trace, with no mangled name left. (The summaries may
keep different small kernels: two runs, each summary capped to the kernels that matter.)"""
import gzip
import json
import os
import sys

from engine_common import TRACES, TempDir, require_traces, run


def kernel_keys(path):
    rc, out, _ = run("summarize", "--json", path)
    return {f["name"] for f in json.loads(out)["functions"] if f["class"] == "compute"}


def main():
    require_traces()
    h200 = os.path.join(TRACES, "h200")
    native_dir, kineto_dir = os.path.join(h200, "native_healthy"), os.path.join(h200, "kineto_healthy")
    native = os.path.join(native_dir, sorted(f for f in os.listdir(native_dir) if f.endswith(".ptrace"))[0])
    kineto = os.path.join(kineto_dir, "rank0.pt.trace.json.gz")
    ours, theirs = kernel_keys(native), kernel_keys(kineto)
    mangled = sorted(k for k in ours if k.startswith("_Z"))
    if mangled:
        sys.exit(f"FAIL: {len(mangled)} native kernel names left mangled, e.g. {mangled[0][:120]}")
    if len(ours) < 20:
        sys.exit(f"FAIL: only {len(ours)} kernel keys in {native}")
    only_native = sorted(ours - theirs)
    if only_native:
        sys.exit(f"FAIL: {len(only_native)} of {len(ours)} native kernel keys are not in the Kineto trace, e.g. "
                 f"{only_native[0][:200]}")
    # `perftracker export` shows the same names as Kineto too.
    with TempDir() as tmp:
        exported = os.path.join(tmp, "native.json")
        run("export", native, "-o", exported)
        with open(exported) as f:
            names = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    with gzip.open(kineto, "rt") as f:
        kineto_names = {e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
    if not names or not names <= kineto_names:
        sys.exit(f"FAIL: exported kernel names not in the Kineto trace, e.g. {sorted(names - kineto_names)[:1]}")
    print(f"PASS: all {len(ours)} kernel keys of {os.path.basename(native)} are keys of {os.path.basename(kineto)} "
          f"({len(theirs)} keys)")


if __name__ == "__main__":
    main()
