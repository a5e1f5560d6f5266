"""Matmul as programs use it (issue 15): alone or alternating with numpy, warm or cold.

The main table times each library in steady state, after a settle pause and a
warm-up. Programs rarely do either: they alternate numpy and opforge calls
(numpy's BLAS threads are still spinning when opforge's call starts), and
their first calls find every worker parked. Four modes, each a median of
per-call times:

- alone, warm: the main table's figure (settle pause, warm-up, timed batch).
- alone, cold: after a settle pause, one call, timed (no warm-up).
- interleaved, warm: numpy, opforge, numpy, ... with no pause, after a
  warm-up of such pairs; every call timed.
- interleaved, cold: after a settle pause, a few such pairs, every call timed
  (which library goes first rotates).
"""
import statistics
import time
import timeit

from bench.timing import WARMUP_S

MODES = ("alone_warm", "alone_cold", "interleaved_warm", "interleaved_cold")
COLD_PAIRS = 3


def _caller(stmt, namespace):
    # One call per invocation: timeit's compiled loop with number=1.
    timer = timeit.Timer(stmt, globals=namespace)
    return lambda: timer.timeit(1)


def _alternate(calls, order, pairs, times):
    for _ in range(pairs):
        for lib in order:
            times[lib].append(calls[lib]())


def measure(stmts, namespace, repeats, settle_s, alone_warm):
    """stmts: {lib: statement}; alone_warm: {lib: median seconds} from the main table.

    Returns {mode: {lib: median seconds per call}}.
    """
    calls = {lib: _caller(s, namespace) for lib, s in stmts.items()}
    libs = list(stmts)
    rot = lambda r: libs[r % len(libs):] + libs[:r % len(libs)]
    out = {"alone_warm": dict(alone_warm)}

    cold = {lib: [] for lib in libs}
    for r in range(repeats):
        for lib in rot(r):
            time.sleep(settle_s)
            cold[lib].append(calls[lib]())
    out["alone_cold"] = cold

    warm = {lib: [] for lib in libs}
    deadline = time.perf_counter() + WARMUP_S
    while time.perf_counter() < deadline:
        _alternate(calls, libs, 1, {lib: [] for lib in libs})
    for r in range(repeats):
        _alternate(calls, rot(r), 1, warm)
    out["interleaved_warm"] = warm

    cold_pairs = {lib: [] for lib in libs}
    for r in range(repeats):
        time.sleep(settle_s)
        _alternate(calls, rot(r), COLD_PAIRS, cold_pairs)
    out["interleaved_cold"] = cold_pairs

    return {mode: {lib: v if mode == "alone_warm" else statistics.median(v)
                   for lib, v in per_lib.items()} for mode, per_lib in out.items()}


def speedups(modes):
    """{mode: {lib: numpy's time / lib's time}} for the libraries other than numpy."""
    return {mode: {lib: t["numpy"] / v for lib, v in t.items() if lib != "numpy" and v > 0}
            for mode, t in modes.items()}
