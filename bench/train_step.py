"""Issue 22's training-step rows: an MLP step (forward, backward, Adam) in
opforge beside the same step in PyTorch, one process, interleaved.

- the digits MLP: 64-256-10, ReLU, batch 64 (bench/train_cases.py's model);
- 784-1024-1024-10, ReLU, batch 256: compute-bound, so the row also prints
  GFLOP/s (3 products per layer: forward, grad input, grad weight) beside the
  measured FMA peak.

Both start from the same weights and batch; the first step's losses are
compared before timing. Used by ``python -m bench.gemm_table --train``.
"""
import statistics

import numpy as np

from bench import timing
from bench.train_cases import opforge_step, torch_step, has_tape_gradients

CASES = (("digits MLP 64-256-10 b64", (64, 256, 10), 64),
         ("MLP 784-1024-1024-10 b256", (784, 1024, 1024, 10), 256))


def _weights(rng, sizes):
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        b = 1 / np.sqrt(fan_in)
        out += [rng.uniform(-b, b, (fan_out, fan_in)).astype(np.float32), rng.uniform(-b, b, fan_out).astype(np.float32)]
    return out


def _models(of, torch, sizes, init):
    layers, tlayers = [], []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i:
            layers.append(of.nn.ReLU())
            tlayers.append(torch.nn.ReLU())
        layers.append(of.nn.Linear(fan_in, fan_out))
        tlayers.append(torch.nn.Linear(fan_in, fan_out))
    model, tmodel = of.nn.Sequential(*layers), torch.nn.Sequential(*tlayers)
    model.set_weights(dict(zip(model.weights(), init)))
    with torch.no_grad():
        for p, w in zip(tmodel.parameters(), init):
            p.copy_(torch.from_numpy(w))
    return model, tmodel


def step_flops(sizes, batch):
    return 6.0 * batch * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))


def rows(repeats, quick=False, cpu_time=False):
    """[(name, torch ms, opforge ms, torch/opforge, opforge GFLOP/s)]; [] without torch.

    cpu_time: timed by the process's CPU time (run with one thread each: a
    per-core figure on a loaded machine)."""
    try:
        import torch
    except ImportError:
        return []
    import opforge as of
    torch.set_num_threads(of.config.num_threads())
    out = []
    for name, sizes, batch in CASES[:1] if quick else CASES:
        rng = np.random.default_rng(0)
        init = _weights(rng, sizes)
        x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
        y = rng.integers(0, sizes[-1], batch).astype(np.int64)
        model, tmodel = _models(of, torch, sizes, init)
        opt = of.optim.Adam(model.parameters(), lr=1e-3)
        topt = torch.optim.Adam(tmodel.parameters(), lr=1e-3)
        ns = {"of": of, "torch": torch, "model": model, "opt": opt, "tmodel": tmodel, "topt": topt, "x": x, "y": y,
              "tx": torch.from_numpy(x), "ty": torch.from_numpy(y), "tape": has_tape_gradients(of),
              "opforge_step": opforge_step, "torch_step": torch_step}
        stmts = {"torch": "torch_step(torch, tmodel, topt, tx, ty)", "opforge": "opforge_step(of, model, opt, x, y, tape)"}
        l_t, l_o = float(eval(stmts["torch"], ns)), float(np.asarray(eval(stmts["opforge"], ns)))
        if not np.isclose(l_t, l_o, rtol=1e-4, atol=1e-5):
            raise SystemExit(f"bench.train_step: first-step losses differ at {name}: torch {l_t}, opforge {l_o}")
        if cpu_time:
            import time
            from bench.gemm_table import _thread_time
            samples = _thread_time(stmts, ns, repeats, 0.05, clock=time.process_time)
        else:
            # torch's OpenMP workers spin after each op: a settle pause before each batch.
            samples = timing.interleaved(stmts, ns, repeats, 0.02 if quick else 0.1, settle_s=0.1)
        med = {lib: statistics.median(s) for lib, s in samples.items()}
        out.append((name, med["torch"] * 1e3, med["opforge"] * 1e3, med["torch"] / med["opforge"],
                    step_flops(sizes, batch) / med["opforge"] / 1e9))
    return out
