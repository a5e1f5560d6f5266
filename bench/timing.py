"""Interleaved timing: every repeat times each library once, in rotating order.

Each library's statement runs through ``timeit`` (the statement is compiled
into the loop, so no extra Python call is counted), batched so a tiny op's
batch lasts long enough for ``perf_counter`` to resolve it. Each timed batch
follows one untimed call of the same statement.
"""
import statistics
import time
import timeit


WARMUP_S = 0.1


def calibrate(timer, min_batch_s):
    """Calls per batch so one batch lasts at least min_batch_s (at least 1)."""
    number = 1
    while True:
        if timer.timeit(number) >= min_batch_s or number >= 1 << 24:
            return number
        number *= 4 if number < 1 << 10 else 2


def interleaved(stmts, namespace, repeats, min_batch_s, settle_s=0.0, timer=time.perf_counter):
    """stmts: {lib: statement}. Returns {lib: [seconds per call, one per repeat]}.

    timer: the clock (time.thread_time for single-threaded tiny calls on a
    loaded machine: it leaves out the time the thread was descheduled).

    settle_s: pause before each batch so the previous library's BLAS/OpenMP workers,
    which busy-wait for a while after each call, have gone to sleep and do not
    take cores from the next library (on 2 cores this alone can cost 10x).
    """
    timers = {lib: timeit.Timer(stmt, globals=namespace, timer=timer) for lib, stmt in stmts.items()}
    numbers = {lib: calibrate(t, min_batch_s) for lib, t in timers.items()}
    # Warm-up after a settle pause: at least WARMUP_S of calls.
    warmups = {lib: calibrate(t, max(min_batch_s, WARMUP_S)) for lib, t in timers.items()}
    libs = list(stmts)
    times = {lib: [] for lib in libs}
    for r in range(repeats):
        # Rotate who goes first so no library always runs right after another's
        # allocations (or always on a cold cache).
        for lib in libs[r % len(libs):] + libs[:r % len(libs)]:
            # Untimed calls first: switching libraries costs a thread-pool
            # hand-over (torch's OpenMP threads spin after each op and can stall
            # the next library's first call by milliseconds on 2 cores).
            time.sleep(settle_s)
            # After the pause, warm up for WARMUP_S: on a VM an idle core
            # comes back slowly (the first multi-threaded calls after a sleep
            # run at half speed), and we time steady state.
            timers[lib].timeit(warmups[lib] if settle_s else 1)
            times[lib].append(timers[lib].timeit(numbers[lib]) / numbers[lib])
    return times


def summarize(samples):
    return {"median_s": statistics.median(samples), "min_s": min(samples),
            "samples_s": samples}


def paired(a, b, repeats):
    """Per-call times of a() and b(), alternated and with the order swapped each repeat."""
    ta, tb = [], []
    for r in range(repeats):
        for f, out in ((a, ta), (b, tb)) if r % 2 == 0 else ((b, tb), (a, ta)):
            t0 = time.perf_counter()
            f()
            out.append(time.perf_counter() - t0)
    return ta, tb
