"""Where a 784-1024-1024-10 training step's time goes (issue 22): each op
the tape runs for one step (batch 256, Adam), called on its own with the
step's shapes, beside the whole step, interleaved in one process.

    python -m bench.train_profile [--repeats N]

The rows sum to about the step: what the step takes beyond the sum is the
tape, Python and the ops not listed (the loss's gradient, a third bias sum).
GF/s rows count the product's multiply-adds twice. Run it under `chrt -f 1`
on a shared machine and compare rows of one run, not runs."""
import argparse
import statistics
import time

import numpy as np

SIZES, BATCH = (784, 1024, 1024, 10), 256


def cases(of):
    rng = np.random.default_rng(0)

    def t(*shape):
        return of.tensor(rng.standard_normal(shape).astype(np.float32))

    x, w1, b1, h1, w2, b2, h2, w3, b3 = t(256, 784), t(1024, 784), t(1024), t(256, 1024), t(1024, 1024), t(1024), \
        t(256, 1024), t(10, 1024), t(10)
    dz, dh, y = t(256, 10), t(256, 1024), rng.integers(0, 10, 256)
    ops, gemm = of.ops, 2 * 256 * 1024
    # Slots and weights in opforge's allocator, as Adam and nn.Linear make them.
    slots = [[ops.zeros_like(p) for _ in range(2)] + [ops.add(p, 0.0), ops.mul(p, 1e-3)]
             for p in (w1, b1, w2, b2, w3, b3)]
    return [  # (name, call, flops)
        ("forward 1: 256x784 @ [1024,784]^T +b relu", lambda: ops.fused_mat_mul(x, w1, b1, transpose_b=True,
                                                                                 activation="relu"), gemm * 784),
        ("forward 2: 256x1024 @ [1024,1024]^T +b relu", lambda: ops.fused_mat_mul(h1, w2, b2, transpose_b=True,
                                                                                   activation="relu"), gemm * 1024),
        ("forward 3: 256x1024 @ [10,1024]^T +b", lambda: ops.fused_mat_mul(h2, w3, b3, transpose_b=True), 0),
        ("loss: sparse softmax cross-entropy, mean",
         lambda: of.mean(ops.sparse_softmax_cross_entropy_with_logits(dz, y)[0]), 0),
        ("backward 3: dX and dW (N = 10)", lambda: ops.mat_mul_grad(h2, w3, dz, transpose_b=True), 0),
        ("relu grad 256x1024 (x2 per step)", lambda: ops.fused_mat_mul_activation_grad(
            dh, h2, h1, w2, b2, transpose_b=True, activation="relu"), 0),
        ("bias grad: column sums 256x1024 (x2)", lambda: of.sum(dh, axis=0), 0),
        ("backward 2: dX = dY W, dW = dY^T X", lambda: ops.mat_mul_grad(h1, w2, dh, transpose_b=True), 2 * gemm * 1024),
        ("backward 1: dW only (dX zeros)", lambda: ops.mat_mul_grad(x, w1, dh, transpose_b=True,
                                                                   compute_grad_a=False), gemm * 784),
        ("Adam, 6 parameters (1.86M)", lambda: [ops.apply_adam(p, m, v, g, lr=1e-3, step=1) for m, v, p, g in slots],
         0),
    ]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.train_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=20)
    args = p.parse_args(argv)
    import opforge as of
    from bench.train_step import CASES, _models, _weights, step_flops
    from bench.train_cases import opforge_step
    import torch
    rows = cases(of)
    rng = np.random.default_rng(1)
    model, _ = _models(of, torch, SIZES, _weights(rng, SIZES))
    opt = of.optim.Adam(model.parameters(), lr=1e-3)
    x, y = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32), rng.integers(0, SIZES[-1], BATCH)
    assert CASES[1][1:] == (SIZES, BATCH)
    rows.append(("the whole step (tape: forward, backward, Adam)", lambda: opforge_step(of, model, opt, x, y, True),
                 step_flops(SIZES, BATCH)))
    times = [[] for _ in rows]
    for _ in range(args.repeats):
        for i, (_, call, _) in enumerate(rows):
            call()
            t = time.perf_counter()
            for _ in range(5):
                call()
            times[i].append((time.perf_counter() - t) / 5)
    med = [statistics.median(ts) for ts in times]
    weight = {"relu grad": 2, "bias grad": 2}
    total = sum(m * next((w for k, w in weight.items() if name.startswith(k)), 1)
                for (name, _, _), m in zip(rows[:-1], med[:-1]))
    print(f"{'op (784-1024-1024-10, batch 256)':<48}{'ms':>8}{'GF/s':>7}")
    for (name, _, flops), m in zip(rows, med):
        print(f"{name:<48}{m * 1e3:>8.3f}" + (f"{flops / m / 1e9:>7.0f}" if flops else ""))
    print(f"{'sum of the ops (x2 rows counted twice)':<48}{total * 1e3:>8.3f}")
    print(f"(median of {args.repeats} interleaved repeats; load average "
          f"{' '.join(f'{v:.1f}' for v in __import__('os').getloadavg())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
