"""Trains a small CNN on scikit-learn's 8x8 handwritten digits with opforge.nn and opforge.optim.

    pip install "opforge[train]"
    python examples/train_cnn_digits.py        # ~98-99% test accuracy

The model is conv-BatchNorm-ReLU-maxpool twice, then Linear: every forward
and backward step runs opforge ops (Conv2D and its backward ops, MaxPool2D,
the batch statistics, the fused cross-entropy, ApplyAdam); numpy only
shuffles and batches the data. BatchNorm2d uses batch statistics while
training and its running statistics in eval(); the model (running
statistics included) is saved to a safetensors file, reloaded with
of.nn.load_model, and the reloaded model's accuracy is checked.
"""

import argparse
import sys
import time

import numpy as np

import opforge as of
from digits_common import accuracy, add_common_args, save_and_reload, train, verdict
from digits_common import load_data as _load_data


def load_data(seed):
    # pixel values 0..16 -> [-0.5, 0.5], NCHW
    return _load_data(seed, lambda a, _train: (a / 16.0 - 0.5).astype(np.float32).reshape(-1, 1, 8, 8))


def build_model(seed, channels=(16, 32)):
    c1, c2 = channels
    nn = of.nn
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1, seed=seed), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),     # 16 x 4 x 4
        nn.Conv2d(c1, c2, 3, padding=1, seed=seed + 1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(), nn.Linear(c2 * 4, 10, seed=seed + 2))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(p, epochs=15, batch_size=32, lr=3e-3, min_accuracy=0.98)
    args = p.parse_args(argv)

    x_tr, y_tr, x_te, y_te = load_data(args.seed)
    model = build_model(args.seed)
    print(f"digits: {len(x_tr)} training and {len(x_te)} test images; model: {model!r}")
    start = time.perf_counter()
    losses = train(model, x_tr, y_tr, args.epochs, args.batch_size, args.lr, args.seed, not args.no_progress,
                   min_batch=2)  # batch statistics need two samples
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_te, y_te)
    print(f"trained {args.epochs} epochs in {seconds:.2f} s: final loss {losses[-1]:.4f}, test accuracy {acc:.4f}")

    where, nbytes, same, acc2 = save_and_reload(model, x_te, y_te, args.save, "digits_cnn.safetensors")
    print(f"saved to {where} ({nbytes} bytes), reloaded: "
          f"weights and running statistics identical: {same}, test accuracy {acc2:.4f}")
    return verdict(acc, acc2, same, args.min_accuracy)


if __name__ == "__main__":
    sys.exit(main())
