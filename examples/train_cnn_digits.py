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
import os
import sys
import tempfile
import time

import numpy as np

import opforge as of


def load_data(seed):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    x, y = load_digits(return_X_y=True)  # 1797 8x8 images, pixel values 0..16
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    prep = lambda a: (a / 16.0 - 0.5).astype(np.float32).reshape(-1, 1, 8, 8)  # noqa: E731  NCHW
    return prep(x_tr), y_tr.astype(np.int64), prep(x_te), y_te.astype(np.int64)


def build_model(seed, channels=(16, 32)):
    c1, c2 = channels
    nn = of.nn
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1, seed=seed), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),     # 16 x 4 x 4
        nn.Conv2d(c1, c2, 3, padding=1, seed=seed + 1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 2 x 2
        nn.Flatten(), nn.Linear(c2 * 4, 10, seed=seed + 2))


def accuracy(model, x, y):
    model.eval()
    with of.no_grad():
        pred = of.argmax(model(x), axis=1).numpy()
    model.train()
    return float((pred == y).mean())


def train(model, x, y, epochs, batch_size, lr, seed, progress=True):
    """Returns the mean training loss of every epoch."""
    from tqdm import tqdm
    opt = of.optim.Adam(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    bar = tqdm(range(epochs), desc="training", unit="epoch", disable=not progress, file=sys.stdout)
    for _ in bar:
        order = rng.permutation(len(x))
        total, seen, correct = 0.0, 0, 0
        for i in range(0, len(x), batch_size):
            idx = order[i:i + batch_size]
            if len(idx) < 2:  # batch statistics need two samples
                continue
            logits = model(x[idx])
            loss = of.nn.functional.cross_entropy(logits, y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
            seen += len(idx)
            correct += int((of.argmax(logits, axis=1).numpy() == y[idx]).sum())
        losses.append(total / seen)
        bar.set_postfix(loss=f"{losses[-1]:.4f}", acc=f"{correct / seen:.3f}")
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default=None, help="model file (default: a temporary one)")
    p.add_argument("--min-accuracy", type=float, default=0.98, help="exit 1 below this test accuracy")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    x_tr, y_tr, x_te, y_te = load_data(args.seed)
    model = build_model(args.seed)
    print(f"digits: {len(x_tr)} training and {len(x_te)} test images; model: {model!r}")
    start = time.perf_counter()
    losses = train(model, x_tr, y_tr, args.epochs, args.batch_size, args.lr, args.seed, not args.no_progress)
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_te, y_te)
    print(f"trained {args.epochs} epochs in {seconds:.2f} s: final loss {losses[-1]:.4f}, test accuracy {acc:.4f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = args.save or os.path.join(tmp, "digits_cnn.safetensors")
        model.save(path)
        reloaded = of.nn.load_model(path)
        same = all(np.array_equal(a.numpy(), b.numpy()) for (_, a), (_, b) in
                   zip(model.named_weights(), reloaded.named_weights()))
        acc2 = accuracy(reloaded, x_te, y_te)
        print(f"saved to {os.path.basename(path)} ({os.path.getsize(path)} bytes), reloaded: "
              f"weights and running statistics identical: {same}, test accuracy {acc2:.4f}")
    ok = same and acc2 == acc and acc >= args.min_accuracy
    if not ok:
        print(f"FAILED: accuracy {acc:.4f} (need {args.min_accuracy}), reload identical: {same}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
