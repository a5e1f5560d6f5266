"""nn.Conv2d in eval mode: a small CNN's forward under no_grad with the filters packed once (Conv2DPacked,
pkg/opforge/nn/conv.py) beside the same model unpacked (Conv2D + a bias Add per call) and beside PyTorch,
in one process, interleaved, the same thread count.

    OPFORGE_NUM_THREADS=1 python -m bench.nn_conv_eval [--repeats N] [--quick]

Models: the digits example's CNN (conv-BN-ReLU-pool twice, Linear; 1x8x8 images, batch 256) and a small
VGG-style stack (3->32->64->64->128 channels of 3x3 convolutions with ReLU and 2x2 pools, 32x32 images,
batch 8). Process CPU time at one thread, wall time otherwise. Needs torch for its column (optional).
"""
import argparse
import os
import sys
import time

import numpy as np

from bench import timing


def _vgg(of):
    nn = of.nn
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, seed=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1, seed=2),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(64, 64, 3, padding=1, seed=3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1, seed=4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10, seed=5))


def _torch_copy(model):
    """The same layers in torch with model's weights (Conv2d, Linear, BatchNorm2d in eval, ReLU, pools)."""
    import torch
    tnn, layers = torch.nn, []
    for m in model._layers.values():
        kind, c = type(m).__name__, getattr(m, "config", {})
        if kind == "Conv2d":
            t = tnn.Conv2d(c["in_channels"], c["out_channels"], c["kernel_size"], c["stride"], c["padding"])
        elif kind == "Linear":
            t = tnn.Linear(*m.weight.shape[::-1])
        elif kind == "BatchNorm2d":
            t = tnn.BatchNorm2d(m.weight.shape[0]).eval()
        else:
            t = {"ReLU": tnn.ReLU(), "Flatten": tnn.Flatten(), "AdaptiveAvgPool2d": tnn.AdaptiveAvgPool2d(1),
                 "MaxPool2d": tnn.MaxPool2d(2)}[kind]
        with torch.no_grad():
            for name, w in m.named_weights():
                getattr(t, name).copy_(torch.from_numpy(np.array(w.numpy())))
            for name, b in m.named_buffers():
                getattr(t, name).copy_(torch.from_numpy(np.array(b.numpy())))
        layers.append(t)
    return tnn.Sequential(*layers).eval()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.nn_conv_eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--quick", action="store_true", help="one repeat: proves the harness works")
    args = p.parse_args(argv)
    import opforge as of
    from opforge.nn import conv as nn_conv
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import train_cnn_digits as ex
    try:
        import torch
        torch.set_num_threads(of.config.num_threads())
    except ImportError:
        torch = None
    threads = of.config.num_threads()
    timer, tname = (time.process_time, "cpu") if threads == 1 else (time.perf_counter, "wall")
    repeats = 1 if args.quick else args.repeats
    rng = np.random.default_rng(0)
    models = {"digits CNN b256": (ex.build_model(0), rng.standard_normal((256, 1, 8, 8)).astype(np.float32)),
              "VGG-style 32x32 b8": (_vgg(of), rng.standard_normal((8, 3, 32, 32)).astype(np.float32))}
    print(f"nn.Conv2d eval forward under no_grad, {threads} threads, {tname} time, median of {repeats} "
          f"interleaved repeats, load {os.getloadavg()[0]:.1f}")
    print(f"{'model':<22}{'unpacked ms':>12}{'packed ms':>11}{'unpacked/packed':>17}{'torch ms':>10}"
          f"{'torch/packed':>14}")

    def run(model, x, packed):
        nn_conv._PACK = packed
        with of.no_grad():
            return model(x)

    for name, (model, x) in models.items():
        model.eval()
        ns = dict(run=run, model=model, x=x)
        ref = run(model, x, False).numpy()
        got = run(model, x, True).numpy()
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
            print(f"nn_conv_eval: {name}: packed differs by {np.abs(got - ref).max()}", file=sys.stderr)
            return 1
        stmts = {"unpacked": "run(model, x, False)", "packed": "run(model, x, True)"}
        if torch is not None:
            ns.update(tm=_torch_copy(model), tx=torch.from_numpy(x), torch=torch)
            want = ns["tm"](ns["tx"]).detach().numpy()
            if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
                print(f"nn_conv_eval: {name}: torch differs by {np.abs(got - want).max()}", file=sys.stderr)
                return 1
            stmts["torch"] = "with torch.no_grad(): tm(tx)"
        t = timing.interleaved(stmts, ns, repeats, 0.05, settle_s=0.0 if args.quick else 0.1, timer=timer)
        med = {k: timing.summarize(v)["median_s"] * 1e3 for k, v in t.items()}
        tcol = (f"{med['torch']:>10.3f}{med['torch'] / med['packed']:>13.2f}x" if "torch" in med else "")
        print(f"{name:<22}{med['unpacked']:>12.3f}{med['packed']:>11.3f}{med['unpacked'] / med['packed']:>16.2f}x"
              + tcol)
    nn_conv._PACK = True
    return 0


if __name__ == "__main__":
    sys.exit(main())
