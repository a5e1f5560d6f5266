"""Trains an MLP on scikit-learn's handwritten digits with opforge.nn and opforge.optim.

    pip install ".[train]"        (from the opforge checkout)
    python examples/train_digits.py                  # ~98% test accuracy in about a second
    python examples/train_digits.py --plot loss.png  # and draw the loss curve

Every forward and backward step runs opforge ops (MatMul, Relu, the fused
SparseSoftmaxCrossEntropyWithLogits, ApplyAdam); numpy only shuffles and
batches the data. The model is saved to a safetensors file, reloaded with
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
    x, y = load_digits(return_X_y=True)  # 1797 8x8 images, shipped with scikit-learn
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    mean, std = x_tr.mean(0), x_tr.std(0) + 1e-6  # standardise with the training statistics
    prep = lambda a: ((a - mean) / std).astype(np.float32)  # noqa: E731
    return prep(x_tr), y_tr.astype(np.int64), prep(x_te), y_te.astype(np.int64)


def build_model(seed, hidden=256, dropout=0.3):
    return of.nn.Sequential(of.nn.Linear(64, hidden, seed=seed), of.nn.ReLU(), of.nn.Dropout(dropout, seed=seed),
                            of.nn.Linear(hidden, 10, seed=seed + 1))


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


def plot(losses, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(range(1, len(losses) + 1), losses, marker="o", markersize=3)
    ax.set(xlabel="epoch", ylabel="training loss (cross-entropy)", yscale="log",
           title="opforge MLP on sklearn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save", default=None, help="model file (default: a temporary one)")
    p.add_argument("--plot", metavar="PNG", help="draw the loss curve into this file (matplotlib)")
    p.add_argument("--min-accuracy", type=float, default=0.97, help="exit 1 below this test accuracy")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    x_tr, y_tr, x_te, y_te = load_data(args.seed)
    model = build_model(args.seed, args.hidden, args.dropout)
    print(f"digits: {len(x_tr)} training and {len(x_te)} test images; model: {model!r}")
    start = time.perf_counter()
    losses = train(model, x_tr, y_tr, args.epochs, args.batch_size, args.lr, args.seed, not args.no_progress)
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_te, y_te)
    print(f"trained {args.epochs} epochs in {seconds:.2f} s: final loss {losses[-1]:.4f}, test accuracy {acc:.4f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = args.save or os.path.join(tmp, "digits_mlp.safetensors")
        model.save(path)
        reloaded = of.nn.load_model(path)
        same = all(np.array_equal(a.numpy(), b.numpy())
                   for a, b in zip(model.parameters(), reloaded.parameters()))
        acc2 = accuracy(reloaded, x_te, y_te)
        where = (os.path.abspath(path) if args.save
                 else f"a temporary file, deleted on exit ({path}; --save PATH keeps it)")
        print(f"saved to {where} ({os.path.getsize(path)} bytes), reloaded: "
              f"weights identical: {same}, test accuracy {acc2:.4f}")
    if args.plot:
        plot(losses, args.plot)
        print(f"loss curve written to {args.plot}")
    ok = same and acc2 == acc and acc >= args.min_accuracy
    if not ok:
        print(f"FAILED: accuracy {acc:.4f} (need {args.min_accuracy}), reload identical: {same}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
