"""The CNN example's training step (examples/train_cnn_digits.py: conv-BN-ReLU-maxpool twice, then Linear;
batch 32 of 1x8x8 images, float32, Adam), opforge beside PyTorch in one process, interleaved, the same
thread count. Each library trains its own copy of the same weights on the same batch; the first step's
losses are checked to agree.

    python -m bench.vision_train [--repeats N] [--batch 32] [--quick]

Prints the median ms per step of each and PyTorch's time over opforge's (above 1: opforge is faster).
Needs torch (not an opforge extra).
"""
import argparse
import os
import sys

import numpy as np

from bench import timing


def _opforge(seed):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import train_cnn_digits as ex
    import opforge as of
    model = ex.build_model(seed)
    opt = of.optim.Adam(model.parameters(), lr=3e-3)

    def step(x, y):
        loss = of.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss)
    return model, step


def _torch(model):
    """The same network in torch, with opforge's initial weights."""
    import torch
    nn = torch.nn
    c1, c2 = 16, 32
    net = nn.Sequential(nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(c2 * 4, 10))
    state = {n: torch.from_numpy(np.array(w.numpy(), np.float32)) for n, w in model.named_weights()}
    with torch.no_grad():
        for (name, p), v in zip(list(net.state_dict().items()), _ordered(net, state)):
            p.copy_(v)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    lossf = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad()
        loss = lossf(net(x), y)
        loss.backward()
        opt.step()
        return float(loss)
    return step


def _ordered(net, state):
    """opforge's weights in torch's state_dict order (weight, bias, running stats per layer)."""
    vals = list(state.values())
    out, k = [], 0
    for name, v in net.state_dict().items():
        if name.endswith("num_batches_tracked"):
            out.append(v)
            continue
        out.append(vals[k].reshape(v.shape))
        k += 1
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.vision_train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    import torch
    import opforge as of
    threads = of.config.num_threads()
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, args.batch).astype(np.int64)
    model, of_step = _opforge(0)
    t_step = _torch(model)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    l_of, l_t = of_step(x, y), t_step(tx, ty)
    if not np.isclose(l_of, l_t, rtol=1e-4):
        print(f"bench.vision_train: first-step losses differ: opforge {l_of}, torch {l_t}", file=sys.stderr)
        return 1
    repeats, settle = (1, 0.0) if args.quick else (args.repeats, 0.3)
    ns = dict(of_step=of_step, t_step=t_step, x=x, y=y, tx=tx, ty=ty)
    med = {lib: timing.summarize(s)["median_s"] for lib, s in timing.interleaved(
        {"opforge": "of_step(x, y)", "torch": "t_step(tx, ty)"}, ns, repeats, 0.05, settle_s=settle).items()}
    print(f"CNN digits training step (batch {args.batch}), {threads} threads, median of {repeats} interleaved repeats")
    print(f"{'opforge ms':>12}{'torch ms':>10}{'torch/opforge':>15}")
    print(f"{med['opforge'] * 1e3:>12.3f}{med['torch'] * 1e3:>10.3f}{med['torch'] / med['opforge']:>14.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
