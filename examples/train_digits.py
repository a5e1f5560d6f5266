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
import sys
import time

import opforge as of
from digits_common import accuracy, add_common_args, save_and_reload, standardize, train, verdict
from digits_common import load_data as _load_data


def load_data(seed):
    return _load_data(seed, standardize)


def build_model(seed, hidden=256, dropout=0.3):
    return of.nn.Sequential(of.nn.Linear(64, hidden, seed=seed), of.nn.ReLU(), of.nn.Dropout(dropout, seed=seed),
                            of.nn.Linear(hidden, 10, seed=seed + 1))


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
    add_common_args(p, epochs=30, batch_size=64, lr=2e-3, min_accuracy=0.97)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--plot", metavar="PNG", help="draw the loss curve into this file (matplotlib)")
    args = p.parse_args(argv)

    x_tr, y_tr, x_te, y_te = load_data(args.seed)
    model = build_model(args.seed, args.hidden, args.dropout)
    print(f"digits: {len(x_tr)} training and {len(x_te)} test images; model: {model!r}")
    start = time.perf_counter()
    losses = train(model, x_tr, y_tr, args.epochs, args.batch_size, args.lr, args.seed, not args.no_progress)
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_te, y_te)
    print(f"trained {args.epochs} epochs in {seconds:.2f} s: final loss {losses[-1]:.4f}, test accuracy {acc:.4f}")

    where, nbytes, same, acc2 = save_and_reload(model, x_te, y_te, args.save, "digits_mlp.safetensors")
    print(f"saved to {where} ({nbytes} bytes), reloaded: weights identical: {same}, test accuracy {acc2:.4f}")
    if args.plot:
        plot(losses, args.plot)
        print(f"loss curve written to {args.plot}")
    return verdict(acc, acc2, same, args.min_accuracy)


if __name__ == "__main__":
    sys.exit(main())
