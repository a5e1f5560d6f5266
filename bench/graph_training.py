"""A training step of the digits MLP (64-256-10, Adam, batch 128): graph
mode (one ``Session.run`` of ``opt.minimize(loss)``) against eager mode, in
one process, interleaved (issue 26: graph >= 1.0x eager).

Two eager baselines, the way users write them: the same variables and
``opt.minimize(loss_fn)`` (eager_minimize), and an ``of.nn.Sequential`` with
``loss.backward(); opt.step()`` (eager_nn). Each timed sample is a block of
steps; medians of the per-step times; ratio = eager time / graph time (> 1:
graph is faster).

    python -m bench.graph_training [--quick]     # table on stderr, JSON on stdout
"""
import json
import os
import statistics
import sys
import time

import numpy as np

HIDDEN, BATCH = 256, 128


def _data(seed=0):
    try:
        from sklearn.datasets import load_digits
        x, y = load_digits(return_X_y=True)
        source = "sklearn digits"
    except ImportError:  # the same shapes, generated
        rng = np.random.default_rng(seed)
        x, y = rng.standard_normal((1797, 64)), rng.integers(0, 10, 1797)
        source = "generated (scikit-learn not installed)"
    x = ((x - x.mean(0)) / (x.std(0) + 1e-6)).astype(np.float32)
    return x[:BATCH], y[:BATCH].astype(np.int64), source


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    out, fan_in = [], 64
    for width in (HIDDEN, 10):
        lim = np.sqrt(6.0 / (fan_in + width))
        out += [rng.uniform(-lim, lim, (fan_in, width)).astype(np.float32), np.zeros(width, np.float32)]
        fan_in = width
    return out


def _model(of, p, x):
    return of.matmul(of.relu(of.matmul(x, p[0]) + p[1]), p[2]) + p[3]


def setups(of):
    x, y, source = _data()

    g = of.Graph()
    with g.as_default():
        xp = of.placeholder(of.float32, [None, 64])
        yp = of.placeholder(of.int64, [None])
        params = [of.Variable(w) for w in _weights()]
        loss = of.nn.functional.cross_entropy(_model(of, params, xp), yp)
        train = of.optim.Adam(lr=1e-3).minimize(loss)
        init = of.global_variables_initializer()
    sess = of.Session(g, inter_op_threads=1)
    sess.run(init)
    feed = {xp: x, yp: y}

    def graph_step():
        sess.run(train, feed)

    eparams = [of.Variable(w) for w in _weights()]
    eopt = of.optim.Adam(eparams, lr=1e-3)

    def eager_minimize():
        eopt.minimize(lambda: of.nn.functional.cross_entropy(_model(of, eparams, x), y), var_list=eparams)

    model = of.nn.Sequential(of.nn.Linear(64, HIDDEN, seed=0), of.nn.ReLU(), of.nn.Linear(HIDDEN, 10, seed=1))
    nopt = of.optim.Adam(model.parameters(), lr=1e-3)

    def eager_nn():
        nopt.zero_grad()
        of.nn.functional.cross_entropy(model(x), y).backward()
        nopt.step()

    return {"graph": graph_step, "eager_minimize": eager_minimize, "eager_nn": eager_nn}, source


def run(quick=False):
    import opforge as of
    steps, repeats = (10, 7) if quick else (50, 15)
    fns, source = setups(of)
    for f in fns.values():  # warm up (plans, arenas, caches)
        for _ in range(5):
            f()
    times = {k: [] for k in fns}
    names = list(fns)
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            for _ in range(steps):
                fns[k]()
            times[k].append((time.perf_counter() - t0) / steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    load = os.getloadavg()[0]
    out = {}
    for base in ("eager_minimize", "eager_nn"):
        out[f"graph_training.{base}"] = {
            "title": f"digits MLP 64-{HIDDEN}-10 Adam step, batch {BATCH} ({source}): graph vs {base}",
            "baseline_s": med[base], "new_s": med["graph"], "ratio": med[base] / med["graph"],
            "target": 1.0, "load": load}
    return out


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv)
    for key, c in result.items():
        print(f"{key}: eager {c['baseline_s'] * 1e6:.0f} us/step, graph {c['new_s'] * 1e6:.0f} us/step, "
              f"eager/graph {c['ratio']:.2f}x (load {c['load']:.1f})", file=sys.stderr)
    print(json.dumps(result))
