"""Times opforge beside numpy (and torch when importable), interleaved in one process, and
prints absolute figures, opforge's speedups and issue 4's targets."""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

from bench import cases as cases_mod
from bench import interleave, libs, report, subprocs, targets, timing

# (repeats, min seconds per timed batch, settle seconds before each batch of a threaded
# case, import-time runs, elements per RSS input)
MODES = {
    "full": (11, 0.02, 0.3, 7, 250_000_000),   # 1 GB per input; 0.3 s outlasts OpenBLAS spinning
    "quick": (3, 0.001, 0.0, 2, 10_000_000),    # 40 MB per input
}


def check(case, lib, got, ref):
    """None if got matches numpy's ref, else what is wrong."""
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return f"{lib} gave {got.dtype}{list(got.shape)}, numpy {ref.dtype}{list(ref.shape)}"
    if not np.allclose(got, ref, rtol=case.rtol, atol=case.atol):
        err = np.max(np.abs(got.astype(np.float64) - ref))
        return f"{lib} differs from numpy: max abs error {err:.3g}"
    return None


def measure(case, repeats, min_batch_s, settle_s=0.0):
    extra = case.setup() if case.setup else {}
    case.namespace.update(extra)
    try:
        return _measure(case, repeats, min_batch_s, settle_s)
    finally:
        for key in extra:
            del case.namespace[key]


def _measure(case, repeats, min_batch_s, settle_s=0.0):
    results, ref, raised = {}, None, set()
    for lib, stmt in case.stmts.items():  # numpy first: it is the oracle
        try:
            got = libs.as_numpy(eval(stmt, case.namespace))
        except Exception as e:
            results[lib] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            raised.add(lib)
            continue
        if lib == "numpy":
            ref = got
        problem = check(case, lib, got, ref) if ref is not None else "numpy, the oracle, failed"
        results[lib] = {"ok": problem is None, "error": problem}
    # A wrong answer is still timed (and flagged); one that raised cannot be.
    runnable = {lib: s for lib, s in case.stmts.items() if lib not in raised}
    # Large cases run threaded (BLAS, OpenMP, opforge's pool); tiny ones do not.
    samples = timing.interleaved(runnable, case.namespace, repeats, min_batch_s,
                                 settle_s if case.unit != "time" else 0.0,
                                 time.thread_time if case.cpu_time else time.perf_counter)
    for lib, s in samples.items():
        results[lib].update(timing.summarize(s))
        if case.unit != "time":
            results[lib]["rate"] = case.work / results[lib]["median_s"] / 1e9
    base = results["numpy"].get("median_s")
    for lib in ("opforge", "torch"):
        if base and "median_s" in results.get(lib, {}):
            results[lib]["speedup_vs_numpy"] = base / results[lib]["median_s"]
    of, torch = results.get("opforge", {}), results.get("torch", {})
    if "median_s" in of and "median_s" in torch:
        of["speedup_vs_torch"] = torch["median_s"] / of["median_s"]
    out = {"group": case.group, "title": case.title, "shape": list(case.shape),
           "unit": case.unit, "work": case.work, "results": results,
           "clock": "thread CPU time" if case.cpu_time else "wall clock"}
    if case.group == "matmul" and "numpy" in samples:
        # Issue 15: also cold and alternating with numpy (bench/interleave.py).
        modes = interleave.measure(runnable, case.namespace, repeats, settle_s,
                                   {lib: results[lib]["median_s"] for lib in samples})
        out["modes"] = modes
        out["mode_speedups"] = interleave.speedups(modes)
    return out


def _loadavg():
    # Other processes on the machine skew every figure (threaded ones most): recorded
    # so a noisy run can be recognised.
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes and few repeats: proves the harness works, times nothing useful")
    p.add_argument("--json", metavar="PATH", help="write every figure to PATH")
    p.add_argument("--only", nargs="+", metavar="SUBSTR",
                   help="run cases whose id contains SUBSTR (ids: dispatch.add_1, matmul.2048, "
                        "..., import, memory, engine, dask)")
    p.add_argument("--no-torch", action="store_true",
                   help="leave torch out even if it is importable (its threads then cannot "
                        "perturb the others)")
    p.add_argument("--repeats", type=int, help="override the number of interleaved repeats")
    p.add_argument("--markdown", metavar="PATH",
                   help="also write the report as a Markdown page (docs/figures.md is made this way: "
                        "figures in the docs come from the bench, not typed)")
    p.add_argument("--report-only", action="store_true",
                   help="exit 0 when a performance target is missed (wrong results still exit 1)")
    args = p.parse_args(argv)

    mode = "quick" if args.quick else "full"
    repeats, min_batch_s, settle_s, import_runs, rss_n = MODES[mode]
    repeats = args.repeats or repeats
    wanted = lambda id: not args.only or any(s in id for s in args.only)
    torch = None if args.no_torch else libs.load_torch()
    import opforge
    data = {"meta": {"mode": mode, "repeats": repeats, "python": sys.version.split()[0],
                     "platform": platform.platform(), "cpus": os.cpu_count(),
                     "versions": libs.versions(torch), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "loadavg_at_start": _loadavg()},
            "cases": {}}
    sizes = cases_mod.QUICK if args.quick else cases_mod.FULL
    for case in cases_mod.build(sizes, opforge, torch):
        if wanted(case.id):
            print(f"bench: {case.id}", file=sys.stderr, flush=True)
            data["cases"][case.id] = measure(case, repeats, min_batch_s, settle_s)
        case.namespace.clear()  # free the large inputs before the next case
    sub_libs = ["opforge"] + (["torch"] if torch else [])
    if wanted("import"):
        print("bench: import", file=sys.stderr, flush=True)
        data["import"] = {"runs": import_runs, **subprocs.import_times(sub_libs, import_runs)}
    if wanted("memory"):
        print("bench: memory", file=sys.stderr, flush=True)
        data["memory"] = {"bytes_per_input": 4 * rss_n,
                          "results": subprocs.peak_rss(["numpy"] + sub_libs, rss_n)}
    if wanted("engine"):
        print("bench: engine", file=sys.stderr, flush=True)
        data["engine"] = subprocs.engine_cases(args.quick)
    if wanted("dask"):
        print("bench: dask", file=sys.stderr, flush=True)
        data["dask"] = subprocs.dask_pipeline(args.quick)
    data["meta"]["loadavg_at_end"] = _loadavg()
    data["targets"] = targets.evaluate(data["cases"], data.get("import"), data.get("memory"),
                                       data.get("dask"))
    bad = [f"{id} [{lib}]: {r['error']}" for id, c in data["cases"].items()
           for lib, r in c["results"].items() if not r["ok"]]
    bad += [f"import [{lib}]: {r['error'].splitlines()[-1]}" for lib, r in
            data.get("import", {}).items() if lib != "runs" and "error" in r]
    bad += [f"memory [{lib}]: {r.get('error') or 'wrong result'}" for lib, r in
            data.get("memory", {}).get("results", {}).items() if not r["ok"]]
    if "engine" in data and "error" in data["engine"]:
        bad.append(f"engine: {data['engine']['error']}")
    if "dask" in data and ("error" in data["dask"] or data["dask"].get("ok") is False):
        bad.append(f"dask: {data['dask'].get('error') or 'wrong result'}")
    data["ok"] = not bad
    data["problems"] = bad
    text = report.render(data)
    if "engine" in data and "error" not in data["engine"]:
        from bench import engine
        text += "\n\n" + engine.render(data["engine"])
    if "dask" in data:
        from bench import dask_pipeline
        text += "\n\n" + dask_pipeline.render(data["dask"])
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(data, text, argv if argv is not None else sys.argv[1:]))
    if bad:
        print("\nWRONG RESULTS OR ERRORS:\n  " + "\n  ".join(bad))
    missed = [t["target"] for t in data["targets"] if t["status"] == "FAIL"]
    data["missed_targets"] = missed if mode == "full" else []
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    return _exit_status(mode, bad, missed, args.report_only)


def _exit_status(mode, bad, missed, report_only):
    """1: a wrong result or an error; 2: a performance target missed (full mode
    only, and not with --report-only); 0 otherwise. Says which, in words."""
    if bad:
        print(f"\nbench: exit 1: {len(bad)} wrong result(s) or error(s), listed above")
        return 1
    if mode == "quick":
        print("\nbench: results correct; quick mode only reports (its sizes are too small to judge "
              "the targets), exit 0")
        return 0
    if missed and not report_only:
        print(f"\nbench: exit 2: {len(missed)} target(s) missed: {', '.join(missed)} "
              "(--report-only exits 0 for missed targets)")
        return 2
    print("\nbench: results correct; " + (f"{len(missed)} target(s) missed (--report-only)" if missed
                                          else "every target checked was met") + ", exit 0")
    return 0
