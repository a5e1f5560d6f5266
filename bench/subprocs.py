"""Measurements that need a fresh interpreter: import time and peak RSS.

Subprocesses inherit this process's environment (PYTHONPATH included), so they
import the same opforge as the parent.
"""
import json
import statistics
import subprocess
import sys

# Time of `import numpy` alone, and of `import <lib>` with numpy already imported:
# the second is what a library adds to a program that already uses numpy.
_IMPORT_NUMPY = "from time import perf_counter as p\nt = p()\nimport numpy\nprint(p() - t)"
_IMPORT_AFTER_NUMPY = ("import numpy\nfrom time import perf_counter as p\nt = p()\n"
                       "import {lib}\nprint(p() - t)")


def _python(code, *args, timeout=600):
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"subprocess failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


def import_times(libs, runs):
    """{"numpy": {...}, lib: {...}}: median seconds over runs, interleaved by run;
    {"error": ...} for a library that failed to import."""
    codes = {"numpy": _IMPORT_NUMPY}
    codes.update({lib: _IMPORT_AFTER_NUMPY.format(lib=lib) for lib in libs})
    out = {}
    for name, code in list(codes.items()):  # untimed: warm the page cache
        try:
            _python(code)
        except RuntimeError as e:
            out[name] = {"error": str(e)}
            del codes[name]
    samples = {name: [] for name in codes}
    for _ in range(runs):
        for name, code in codes.items():
            samples[name].append(float(_python(code)))
    out.update({name: {"median_s": statistics.median(s), "samples_s": s}
                for name, s in samples.items()})
    return out


# ru_maxrss after imports, after creating the two inputs, and after the add.
_PEAK_RSS = r"""
import json, resource, sys
import numpy as np
lib, n = sys.argv[1], int(sys.argv[2])
if lib == "opforge":
    import opforge
    add = opforge.add
elif lib == "torch":
    import torch
    add = lambda a, b: torch.add(torch.from_numpy(a), torch.from_numpy(b))
else:
    add = np.add
scale = 1 if sys.platform == "darwin" else 1024  # Linux reports KiB
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
base = peak()
a = np.full(n, 1.0, np.float32)
b = np.full(n, 2.0, np.float32)
inputs = peak()
c = add(a, b)
after = peak()
c = np.asarray(c.numpy() if hasattr(c, "numpy") else c)
ok = c.shape == (n,) and c.dtype == np.float32 and bool((c == 3.0).all())
print(json.dumps({"base": base, "inputs": inputs, "after_add": after, "ok": ok}))
"""


def peak_rss(libs, n):
    """{lib: {"base", "inputs", "after_add" (bytes), "ok"}} for adding two n-element arrays;
    {"ok": False, "error": ...} for a library whose subprocess failed (e.g. out of memory)."""
    out = {}
    for lib in libs:
        try:
            out[lib] = json.loads(_python(_PEAK_RSS, lib, n))
        except RuntimeError as e:
            out[lib] = {"ok": False, "error": str(e)}
    return out


def engine_cases(quick):
    """bench/engine.py's figures, from a subprocess with OPFORGE_NUM_THREADS=1;
    {"error": ...} if it failed."""
    import os
    env = dict(os.environ, OPFORGE_NUM_THREADS="1")
    args = [sys.executable, "-m", "bench.engine"] + (["--quick"] if quick else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        return {"error": f"bench.engine failed ({out.returncode}): {out.stderr[-1500:]}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def dask_pipeline(quick):
    """bench/dask_pipeline.py's figures from a subprocess (its array is freed
    with it); {"error": ...} if it failed."""
    args = [sys.executable, "-m", "bench.dask_pipeline"] + (["--quick"] if quick else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        return {"error": f"bench.dask_pipeline failed ({out.returncode}): {out.stderr[-1500:]}"}
    return json.loads(out.stdout.strip().splitlines()[-1])
