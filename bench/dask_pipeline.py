"""A Dask pipeline on the local threaded scheduler, opforge's ops against
numpy's (issue 15): sum(sigmoid(2x - 1) * tanh(x)) over a float32 array held
in memory, in 64 MB chunks, built once with ``dask.array`` (numpy's ufuncs
in every block) and once with ``opforge.dask`` (opforge's kernels in every
block). Both graphs get dask's usual blockwise fusion: one task per chunk.

Run alone: ``python -m bench.dask_pipeline [--quick] [--gb N]`` prints JSON
(4 GB in the full run; the array and a few chunk temporaries must fit in
memory); ``python -m bench --only dask`` runs it in a subprocess so the
array is freed when it is done. Prints {"skipped": ...} without dask.
"""
import json
import statistics
import sys

import numpy as np

from bench import timing

TARGET = 1.5
CHUNK_BYTES = 64 << 20
COLS = 4096


def run(gb, repeats):
    try:
        import dask
        import dask.array as da
    except ImportError as e:
        return {"skipped": f"dask is not installed ({e})"}
    import opforge.dask as odask

    rows = max(-(-int(gb * 1e9) // (4 * COLS)), 1)  # at least gb
    x = np.empty((rows, COLS), np.float32)
    rng = np.random.default_rng(0)
    for i in range(0, rows, 8192):  # filled in 128 MB slices: no temporary of the whole
        x[i:i + 8192] = rng.random((min(8192, rows - i), COLS), dtype=np.float32)
    chunk_rows = max(CHUNK_BYTES // (4 * COLS), 1)
    dx = da.from_array(x, chunks=(chunk_rows, COLS))

    def with_numpy():
        y = (1 / (1 + da.exp(-(2 * dx - 1)))) * da.tanh(dx)
        return y.sum().compute()

    def with_opforge():
        y = odask.mul(odask.sigmoid(odask.sub(odask.mul(dx, 2.0), 1.0)), odask.tanh(dx))
        return odask.sum(y).compute()

    with dask.config.set(scheduler="threads"):
        ref, got = float(with_numpy()), float(with_opforge())
        ok = bool(np.isclose(got, ref, rtol=1e-3))
        tn, to = timing.paired(with_numpy, with_opforge, repeats)
    n, o = statistics.median(tn), statistics.median(to)
    return {"title": f"sum(sigmoid(2x-1)*tanh(x)), {x.nbytes / 1e9:.2f} GB float32, "
                     f"{dx.npartitions} chunks, threaded scheduler",
            "bytes": x.nbytes, "chunks": dx.npartitions, "numpy_s": n, "opforge_s": o,
            "numpy_samples_s": tn, "opforge_samples_s": to, "speedup": n / o,
            "paired_speedups": [a / b for a, b in zip(tn, to)],
            "ok": ok, "numpy_result": ref, "opforge_result": got, "target": TARGET,
            "status": ("PASS" if n / o >= TARGET and ok else "FAIL") if x.nbytes >= 4e9 else "SKIP"}


def render(r):
    if "skipped" in r or "error" in r:
        return f"Dask pipeline: {r.get('skipped') or r.get('error')}"
    note = "" if r["status"] != "SKIP" else " (target judged at 4 GB only)"
    return ("Dask pipeline (numpy's ops vs opforge.dask, threaded scheduler)\n"
            f"  {r['title']}\n"
            f"  numpy {r['numpy_s']:.3f} s, opforge {r['opforge_s']:.3f} s: {r['speedup']:.2f}x  "
            f"target >= {TARGET}x {r['status']}{note}" + ("" if r["ok"] else "  WRONG RESULT"))


def main(argv):
    quick = "--quick" in argv
    gb = float(argv[argv.index("--gb") + 1]) if "--gb" in argv else (0.02 if quick else 4.0)
    result = run(gb, 2 if quick else 5)
    print(render(result), file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
